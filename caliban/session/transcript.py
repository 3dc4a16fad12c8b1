"""Session transcripts: the loop's events, one JSON object per line, as they happen.

A :class:`Transcript` is a session listener. Each event becomes one line written with a
single ``write(2)`` on an ``O_APPEND`` descriptor, so a crash or ``kill -9`` loses at most
the line being written; lines that change what a resume restores are also ``fsync``-ed, so
they survive a power cut too. Streaming deltas are not recorded.

While a transcript is open its file holds an exclusive ``flock``: a second caliban process
trying to write the same session is refused with :class:`SessionLocked`. New files are
created with ``O_EXCL``, and only when the first prompt arrives, so sessions that never
asked anything leave no file behind.

Line format (``docs/sessions.md`` has the full description)::

    {"type":"header","version":1,"session_id":"…","cwd":"…","project_root":"…",…}
    {"type":"user_prompt","timestamp":"…","uuid":"…","message":{"role":"user","content":[…]},…}
    {"type":"assistant","timestamp":"…","uuid":"…","message":{…},"usage":{…},"model":"…",…}

Messages use the Anthropic content-block shape of :mod:`caliban.session.serialize`; a line
that appends one carries its id as ``uuid``, as each line of Claude Code's session files does.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, assert_never

from caliban import __version__
from caliban.errors import UsageError
from caliban.events import (
    ActivationChanged,
    AgentEvent,
    ApiRetryEvent,
    AssistantDelta,
    AssistantMessage,
    AssistantThinkingDelta,
    BackgroundTaskUpdate,
    ConversationCleared,
    ConversationCompacted,
    ConversationRewound,
    HistoryAppended,
    ModelChanged,
    ModelFallback,
    Notice,
    PermissionModeChanged,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.session.serialize import message_to_json
from caliban.util.text import encodable

FORMAT_VERSION = 1
"""Bumped only for changes old readers would misread; new line types are not such a change."""

HISTORY_TYPES = frozenset({"user_prompt", "assistant", "tool_results", "history_append"})
"""Line types that append a message to the history they belong to."""

DURABLE_TYPES = HISTORY_TYPES | {"header", "activation", "model", "clear", "compact", "rewind"}
"""Line types a resume restores from; these are fsync-ed."""


class SessionLocked(UsageError):
    """Another caliban process is writing this session's transcript (exit code 2)."""


def now_iso() -> str:
    """The current time as an ISO 8601 UTC timestamp with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def header_json(
    *,
    session_id: str,
    cwd: Path,
    project_root: Path,
    model: str,
    provider: str,
    created: str | None = None,
) -> dict[str, Any]:
    """The first line of every transcript."""
    return {
        "type": "header",
        "version": FORMAT_VERSION,
        "session_id": session_id,
        "created": created or now_iso(),
        "cwd": str(cwd),
        "project_root": str(project_root),
        "caliban_version": __version__,
        "model": model,
        "provider": provider,
    }


def event_to_json(event: AgentEvent) -> dict[str, Any] | None:
    """One transcript line for ``event``; ``None`` for events that are not recorded.

    ``type`` always comes first (readers may skim lines by their prefix); tool outputs are
    recorded once, in the ``tool_results`` line, not again in ``tool_finished``.
    """
    body: dict[str, Any]
    match event:
        case (
            AssistantDelta()
            | AssistantThinkingDelta()
            | BackgroundTaskUpdate()
            | PermissionModeChanged()
        ):
            return None
        case ModelFallback():
            body = {
                "type": "model_fallback",
                "original_model": event.original_model,
                "fallback_model": event.fallback_model,
                "error": event.error,
            }
        case UserPrompt(message=message):
            body = {"type": "user_prompt", "uuid": message.id, "message": message_to_json(message)}
        case AssistantMessage(message=message, usage=usage, model=model):
            body = {
                "type": "assistant",
                "uuid": message.id,
                "message": message_to_json(message),
                "usage": usage.as_dict(),
                "model": model,
            }
        case ToolResultsMessage(message=message):
            body = {"type": "tool_results", "uuid": message.id, "message": message_to_json(message)}
        case HistoryAppended(message=message):
            body = {
                "type": "history_append",
                "uuid": message.id,
                "message": message_to_json(message),
            }
        case ToolStarted(call=call):
            body = {"type": "tool_started", "tool_use_id": call.id, "name": call.name}
        case ToolFinished(call=call, result=result):
            body = {
                "type": "tool_finished",
                "tool_use_id": call.id,
                "name": call.name,
                "is_error": result.is_error,
                "duration_ms": event.duration_ms,
                "summary": event.summary,
            }
        case ActivationChanged(activated=activated, evicted=evicted, active=active):
            body = {
                "type": "activation",
                "activated": list(activated),
                "evicted": list(evicted),
                "active": list(active),
            }
        case ModelChanged(model=model):
            body = {"type": "model", "model": model}
        case ConversationCleared():
            body = {"type": "clear"}
        case ConversationRewound():
            body = {
                "type": "rewind",
                "to": event.to,
                "active": list(event.active) if event.active is not None else None,
                "messages": [{"uuid": m.id, **message_to_json(m)} for m in event.messages],
            }
        case ConversationCompacted():
            body = {
                "type": "compact",
                "trigger": event.trigger,
                "pre_tokens": event.pre_tokens,
                "post_tokens": event.post_tokens,
                "summary": event.summary,
                "messages": [{"uuid": m.id, **message_to_json(m)} for m in event.messages],
            }
        case ApiRetryEvent():
            body = {
                "type": "api_retry",
                "attempt": event.attempt,
                "max_attempts": event.max_attempts,
                "delay_s": event.delay_s,
                "status": event.status,
                "error": event.error,
            }
        case Notice(level=level, text=text):
            body = {"type": "notice", "level": level, "text": text}
        case _:
            assert_never(event)
    kind = body.pop("type")
    return {
        "type": kind,
        "timestamp": now_iso(),
        **body,
        "parent_tool_use_id": event.parent_tool_use_id,
    }


def dump_line(record: Mapping[str, Any]) -> bytes:
    """``record`` as one compact JSON line (newlines inside strings are escaped)."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return (encodable(text) + "\n").encode("utf-8")


class Transcript:
    """Appends events to a session's ``.jsonl`` file; add it to ``Session.listeners``.

    Build one with :meth:`create` (a new session) or :meth:`reopen` (a resumed one), and
    :meth:`close` it when the session ends (the lock is released then, or when the process
    exits). A write error never breaks the session: it is reported once through
    ``on_error`` and recording stops.
    """

    def __init__(
        self,
        path: Path,
        *,
        fd: int | None,
        pending: list[bytes] | None = None,
        fsync: bool = True,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.on_error = on_error
        self.failed: str | None = None
        """Why recording stopped, when it did."""
        self._fd = fd
        self._pending = pending or []
        self._lock = threading.Lock()  # tools may emit from worker threads
        self._closed = False

    @classmethod
    def create(
        cls,
        path: Path,
        *,
        header: Mapping[str, Any],
        fsync: bool = True,
        on_error: Callable[[str], None] | None = None,
    ) -> Transcript:
        """A transcript for a new session at ``path``, created with its first prompt."""
        return cls(path, fd=None, pending=[dump_line(header)], fsync=fsync, on_error=on_error)

    @classmethod
    def reopen(
        cls, path: Path, *, fsync: bool = True, on_error: Callable[[str], None] | None = None
    ) -> Transcript:
        """Continue appending to an existing transcript; takes its lock at once.

        Raises :class:`SessionLocked` when another process holds it, ``FileNotFoundError``
        when it is gone.
        """
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:
            _lock(fd, path)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")  # end the line a crash cut short, so ours starts clean
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd=fd, fsync=fsync, on_error=on_error)

    @property
    def started(self) -> bool:
        """Whether the file exists (for a new session: whether a prompt was recorded)."""
        return self._fd is not None

    def __call__(self, event: AgentEvent) -> None:
        record = event_to_json(event)
        if record is not None:
            self.write(record)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record (a dict with a ``type``); used for events and by resume."""
        with self._lock:
            if self.failed is not None or self._closed:
                return
            line = dump_line(record)
            kind = record.get("type")
            try:
                if self._fd is None:
                    if kind not in HISTORY_TYPES:
                        self._pending.append(line)
                        return
                    self._fd = _create(self.path)
                    line = b"".join([*self._pending, line])
                    self._pending.clear()
                _write_all(self._fd, line)
                if self.fsync and kind in DURABLE_TYPES:
                    os.fsync(self._fd)
            except OSError as exc:
                self.failed = f"{type(exc).__name__}: {exc}"
        if self.failed is not None and self.on_error is not None:
            self.on_error(
                f"this session is no longer being saved: writing {self.path} failed ({self.failed})"
            )
            self.on_error = None

    def close(self) -> None:
        """Stop recording and release the lock. Safe to call twice."""
        with self._lock:
            self._closed = True
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None


def _create(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # O_EXCL: a new session never writes into a file that already exists.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        _lock(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLocked(
            f"session {path.stem} is in use by another caliban process ({path}); "
            "finish it there, or resume another session (`caliban --resume`)"
        ) from None


def is_locked(path: Path) -> bool:
    """Whether a caliban process is writing the transcript at ``path`` right now."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
