"""Saved sessions: where transcripts live, listing them, loading one back.

Transcripts are ``data_dir()/sessions/<project-slug>/<session-id>.jsonl`` (see
:mod:`caliban.session.transcript` for the writer and the line format). Loading replays the lines:
history appends, usage, model switches, ``/clear`` and lazy-MCP activations. A line that is
cut short or corrupt is skipped with a warning naming the file and line, and the history is
repaired so the next request is well-formed (a tool call whose result was never written gets
an "interrupted" error result).

Putting a record back into a live session is :mod:`caliban.session.resume`'s job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caliban.config.paths import data_dir
from caliban.errors import UsageError
from caliban.messages import Message, TextPart, ToolCall, ToolResult, Usage
from caliban.session.ledger import UsageLedger
from caliban.session.serialize import message_from_json, usage_from_json
from caliban.session.transcript import HISTORY_TYPES, is_locked
from caliban.util.text import plural, visible

if TYPE_CHECKING:
    from caliban.mcp.lazy.activation import McpActivationSet

INTERRUPTED_BY_EXIT = (
    "caliban stopped (closed or crashed) before this tool call finished; it may have run "
    "partly. Check its effects before running it again."
)
"""The result given, on load, to a tool call whose result was never recorded."""
LOST_START = "[The start of this conversation could not be read from its saved transcript.]"
"""The placeholder first prompt of a resumed history whose first prompt was unreadable."""

_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SLUG_MAX = 100


class SessionNotFound(UsageError):
    """No saved session matches what was asked for (exit code 2)."""


# ---------------------------------------------------------------------------- paths


def sessions_dir() -> Path:
    """Where every project's transcripts live: ``data_dir()/sessions``."""
    return data_dir() / "sessions"


def project_slug(root: Path) -> str:
    """``root`` made into one safe, readable directory name: ``/work/main`` → ``-work-main``.

    Every character other than letters, digits, ``_`` and ``-`` becomes ``-``. Long paths
    keep their start and get a short hash so they stay unique.
    """
    text = str(root)
    slug = _SLUG_UNSAFE.sub("-", text)
    if len(slug) > _SLUG_MAX:
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        slug = f"{slug[: _SLUG_MAX - 13]}-{digest}"
    return slug


def project_sessions_dir(root: Path) -> Path:
    """The directory holding the transcripts of the project at ``root``."""
    return sessions_dir() / project_slug(root)


def transcript_path(root: Path, session_id: str) -> Path:
    """Where session ``session_id`` of the project at ``root`` is recorded."""
    return project_sessions_dir(root) / f"{session_id}.jsonl"


# ---------------------------------------------------------------------------- reading


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line_number, record)`` for each non-blank line, or ``(n, why)`` when it is bad."""
    with path.open("rb") as file:
        data = file.read()
    chunks = data.split(b"\n")
    for number, raw in enumerate(chunks, start=1):
        if not raw.strip():
            continue
        cut_short = number == len(chunks)  # no newline after it: the writer was stopped
        try:
            record = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            why = "it was cut short (the session ended mid-write)" if cut_short else str(exc)
            yield number, why
            continue
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            yield number, "it is not a transcript record"
            continue
        yield number, record


@dataclass(frozen=True, kw_only=True)
class SessionSummary:
    """What ``caliban sessions list`` and the resume picker show about a session."""

    id: str
    path: Path
    project_root: str | None
    created: str | None
    updated: datetime
    first_prompt: str
    turns: int
    """User prompts in the conversation a resume would restore."""
    in_use: bool


def summarize(path: Path) -> SessionSummary:
    """A quick look at one transcript: header, first prompt and prompt count."""
    header: dict[str, Any] = {}
    prompts: list[str] = []
    with path.open("rb") as file:
        for raw in file:
            # Only a few line types matter here; skip the big ones without parsing them.
            if not raw.startswith(
                (b'{"type":"header"', b'{"type":"user_prompt"', b'{"type":"clear"')
            ):
                continue
            try:
                record = json.loads(raw)
                kind = record["type"]
                if kind == "header":
                    header = record
                elif record.get("parent_tool_use_id") is not None:
                    continue
                elif kind == "clear":
                    prompts = []
                else:
                    prompts.append(user_words(message_from_json(record["message"]).text))
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
    stat = path.stat()
    return SessionSummary(
        id=path.stem,
        path=path,
        project_root=_str_or_none(header.get("project_root")),
        created=_str_or_none(header.get("created")),
        updated=datetime.fromtimestamp(stat.st_mtime).astimezone(),
        first_prompt=next((_one_line(p) for p in prompts if p.strip()), ""),
        turns=len(prompts),
        in_use=is_locked(path),
    )


_MARKUP = re.compile(
    r"<(system-reminder|bash-stdout|bash-stderr|file|directory)\b[^>]*>.*?(?:</\1>|\Z)",
    re.DOTALL,
)
_COMMAND = re.compile(
    r"<command-name>(.*?)</command-name>\s*(?:<command-args>(.*?)</command-args>)?", re.DOTALL
)
_BASH_INPUT = re.compile(r"<bash-input>(.*?)</bash-input>", re.DOTALL)


def user_words(text: str) -> str:
    """What the user typed, from a prompt as it was sent: ``/name args`` for a custom
    command (not its expansion), ``!cmd`` for a shell command, and no system reminders,
    attached files or command output."""
    if (command := _COMMAND.search(text)) is not None:
        return f"{command.group(1).strip()} {(command.group(2) or '').strip()}".strip()
    text = _BASH_INPUT.sub(lambda m: f"!{m.group(1)}", text)
    text = _MARKUP.sub(" ", text)
    return re.sub(r"</?command-message>", " ", text).strip()


def list_sessions(root: Path) -> list[SessionSummary]:
    """The saved sessions of the project at ``root``, most recently active first."""
    directory = project_sessions_dir(root)
    if not directory.is_dir():
        return []
    summaries = []
    for path in directory.glob("*.jsonl"):
        try:
            summary = summarize(path)
        except OSError:
            continue  # removed while we looked
        # Two projects whose paths differ only in punctuation share a slug; keep ours.
        if summary.project_root not in (None, str(root)):
            continue
        summaries.append(summary)
    summaries.sort(key=lambda s: (s.updated, s.created or ""), reverse=True)
    return summaries


def find_session(
    root: Path, ref: str, *, listed_by: str = "`caliban sessions list`"
) -> SessionSummary:
    """The session of this project whose id is ``ref`` or starts with it.

    Raises :class:`SessionNotFound` with the recent ids (or the project the id belongs to)
    when there is no single match, pointing to ``listed_by`` for the full list (the REPL
    passes its own ``/resume``).
    """
    ref = ref.strip()
    sessions = list_sessions(root)
    exact = [s for s in sessions if s.id == ref]
    matches = exact or [s for s in sessions if ref and s.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        listed = ", ".join(s.id for s in matches[:5])
        raise SessionNotFound(f"session id '{ref}' is ambiguous: it matches {listed}")
    elsewhere = sorted(sessions_dir().glob(f"*/{_glob_safe(ref)}*.jsonl")) if ref else []
    if elsewhere:
        other = summarize(elsewhere[0])
        raise SessionNotFound(
            f"session {other.id} belongs to another project "
            f"({other.project_root or elsewhere[0].parent.name}); run caliban there to resume it"
        )
    raise SessionNotFound(
        f"no session '{ref}' in this project ({root}). {_recent_hint(sessions, listed_by)}"
    )


def newest_session(root: Path) -> SessionSummary:
    """The most recently active session of this project (for ``--continue``)."""
    sessions = list_sessions(root)
    if not sessions:
        raise SessionNotFound(
            f"no saved session to continue in this project ({root}); "
            "start one with `caliban` or `caliban -p PROMPT`"
        )
    return sessions[0]


def remove_session(root: Path, ref: str) -> SessionSummary:
    """Delete the transcript of session ``ref`` (an id or a unique prefix)."""
    summary = find_session(root, ref)
    if summary.in_use:
        raise UsageError(f"session {summary.id} is in use by a running caliban; finish it first")
    summary.path.unlink(missing_ok=True)
    return summary


def _recent_hint(sessions: Sequence[SessionSummary], listed_by: str) -> str:
    if not sessions:
        return "This project has no saved sessions."
    recent = "; ".join(f"{s.id[:8]} {_clip(s.first_prompt, 30)!r}" for s in sessions[:5])
    return f"Recent sessions: {recent} (see {listed_by})"


def _glob_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "?", text)


def _is_prompt(message: Message) -> bool:
    """A user's prompt, not a message of tool results."""
    return message.role == "user" and not any(isinstance(p, ToolResult) for p in message.parts)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# ---------------------------------------------------------------------------- loading


@dataclass(frozen=True, kw_only=True)
class SessionRecord:
    """A transcript replayed: everything a resume restores."""

    id: str
    path: Path
    header: Mapping[str, Any]
    messages: tuple[Message, ...]
    """The main conversation, repaired so that the next request is well-formed."""
    repaired_tail: int = 0
    """How many messages at the end of ``messages`` were added by the repair."""
    turns: int = 0
    """User prompts in the restored conversation."""
    usage: Mapping[str, Usage] = field(default_factory=dict)
    """Tokens per model that served them (sub-agents' included): the session's ledger."""
    last_usage: Usage | None = None
    model: str | None = None
    """The model in use when the session stopped."""
    provider: str | None = None
    activations: tuple[tuple[str, ...], ...] = ()
    """The main agent's lazy-MCP activations, oldest first (each one ``activate`` call)."""
    warnings: tuple[str, ...] = ()
    """Lines skipped and repairs made, for the user to see."""


def load_session(path: Path) -> SessionRecord:
    """Replay the transcript at ``path``. Bad lines are skipped with a warning each."""
    header: dict[str, Any] = {}
    messages: list[Message] = []
    ledger, last_usage = UsageLedger(), None
    model: str | None = None
    activations: list[tuple[str, ...]] = []
    warnings: list[str] = []
    prompts = 0
    for number, record in _lines(path):
        if isinstance(record, str):
            warnings.append(f"{path}:{number}: skipped a line: {record}")
            continue
        try:
            kind = record["type"]
            main = record.get("parent_tool_use_id") is None
            if kind == "header":
                header = record
                model = model or _str_or_none(record.get("model"))
            elif kind in HISTORY_TYPES:
                message = message_from_json(
                    record["message"], id=_line_id(record, path.stem, number)
                )
                if kind == "assistant":
                    # Sub-agents' usage counts too: the session's total includes them.
                    turn_usage = usage_from_json(record.get("usage") or {})
                    served_by = _str_or_none(record.get("model")) or model or "unknown"
                    ledger.record(served_by, turn_usage)
                    if main:
                        last_usage = turn_usage
                        model = served_by
                if main:
                    messages.append(message)
                    prompts += kind == "user_prompt"
            elif kind == "model" and main:
                model = str(record["model"])
            elif kind == "compact" and main:
                # Resume after the boundary: the compacted history replaces what came before.
                messages = [
                    message_from_json(m, id=_line_id(m, path.stem, number, index))
                    for index, m in enumerate(record["messages"])
                ]
                last_usage = None
            elif kind == "clear" and main:
                # /clear starts a new conversation and empties the activation set.
                messages, ledger, last_usage, prompts = [], UsageLedger(), None, 0
                activations = []
            elif kind == "rewind" and main:
                # /rewind cut the conversation: its history, and the active tools then.
                messages = [
                    message_from_json(m, id=_line_id(m, path.stem, number, index))
                    for index, m in enumerate(record["messages"])
                ]
                prompts = sum(_is_prompt(m) for m in messages)
                last_usage = None
                if isinstance(record.get("active"), list):
                    activations = [tuple(str(name) for name in record["active"])]
            elif kind == "activation" and main:
                activations.append(tuple(str(name) for name in record["activated"]))
        except (KeyError, TypeError, ValueError) as exc:
            warnings.append(
                f"{path}:{number}: skipped a malformed {record.get('type')} line ({exc})"
            )
    repaired, notes, tail = _repair(messages)
    return SessionRecord(
        id=path.stem,
        path=path,
        header=header,
        messages=tuple(repaired),
        repaired_tail=tail,
        turns=prompts,
        usage=ledger.by_model(),
        last_usage=last_usage,
        model=model,
        provider=_str_or_none(header.get("provider")),
        activations=tuple(activations),
        warnings=tuple(warnings + [f"{path}: {note}" for note in notes]),
    )


_EARLIER_IDS = uuid.UUID("0f6a2f0e-2b1c-4c43-9d3c-6c0d8a0c1a7e")
"""The namespace of the ids given to messages that a transcript recorded without one (it was
written before messages had ids)."""


def _line_id(record: Mapping[str, Any], session_id: str, line: int, index: int = 0) -> str:
    """The id recorded with a message; for a line written without one, an id derived from
    where it is, so every load of that transcript gives the message the same id."""
    recorded = record.get("uuid")
    if isinstance(recorded, str) and recorded:
        return recorded
    return str(uuid.uuid5(_EARLIER_IDS, f"{session_id}:{line}:{index}"))


def _has_results(message: Message) -> bool:
    return any(isinstance(p, ToolResult) for p in message.parts)


def _interrupted(calls: Iterable[ToolCall]) -> tuple[ToolResult, ...]:
    text = (TextPart(text=INTERRUPTED_BY_EXIT),)
    return tuple(ToolResult(tool_call_id=c.id, content=text, is_error=True) for c in calls)


def repair_history(messages: Sequence[Message]) -> tuple[list[Message], list[str]]:
    """Make ``messages`` a history every provider accepts; returns it and what was fixed.

    Each assistant message with tool calls must be followed by a user message carrying a
    result for every call: missing results become "interrupted" errors. Results whose call
    is not in the preceding message (its line was lost) are dropped. A history whose first
    prompt was lost gets a placeholder one: providers (and local chat templates) want a user
    message first.
    """
    repaired, notes, _tail = _repair(messages)
    return repaired, notes


def _repair(messages: Sequence[Message]) -> tuple[list[Message], list[str], int]:
    """:func:`repair_history`, also saying how many messages it appended at the end."""
    repaired: list[Message] = []
    notes: list[str] = []
    pending: tuple[ToolCall, ...] = ()
    for message in messages:
        if pending and message.role == "user" and _has_results(message):
            message = _complete(message, pending, notes)
            pending = ()
            repaired.append(message)
            continue
        if pending:
            repaired.append(Message(role="user", parts=_interrupted(pending)))
            notes.append(_interrupted_note(pending))
            pending = ()
        if message.role == "user" and _has_results(message):
            kept = tuple(p for p in message.parts if not isinstance(p, ToolResult))
            notes.append("dropped tool results whose tool call was lost")
            if not kept:
                continue
            message = dataclasses.replace(message, parts=kept)
        if not repaired and message.role != "user":
            repaired.append(Message.user(LOST_START))
            notes.append("the conversation's first prompt could not be read; resumed without it")
        repaired.append(message)
        pending = message.tool_calls if message.role == "assistant" else ()
    if pending:
        repaired.append(Message(role="user", parts=_interrupted(pending)))
        notes.append(_interrupted_note(pending))
        return repaired, notes, 1
    return repaired, notes, 0


def _complete(message: Message, calls: tuple[ToolCall, ...], notes: list[str]) -> Message:
    results = {p.tool_call_id: p for p in message.parts if isinstance(p, ToolResult)}
    missing = [c for c in calls if c.id not in results]
    if unknown := set(results) - {c.id for c in calls}:
        notes.append(f"dropped {len(unknown)} tool result(s) whose tool call was lost")
    if missing:
        notes.append(_interrupted_note(missing))
    if not missing and not unknown:
        return message
    answers = {**results, **{r.tool_call_id: r for r in _interrupted(missing)}}
    others = tuple(p for p in message.parts if not isinstance(p, ToolResult))
    return dataclasses.replace(message, parts=(*(answers[c.id] for c in calls), *others))


def _interrupted_note(calls: Sequence[ToolCall]) -> str:
    names = ", ".join(c.name for c in calls)
    return f"tool call(s) without a recorded result ({names}) marked as interrupted"


def replay_activations(
    activations: Iterable[Sequence[str]], *, cap: int, existing: Collection[str]
) -> tuple[McpActivationSet, tuple[str, ...]]:
    """Rebuild the activation set from recorded activations, in order, under ``cap``.

    Returns the set and the names dropped from it because no such tool exists any more
    (a server was removed or changed its tools).
    """
    from caliban.mcp.lazy.activation import McpActivationSet

    current = McpActivationSet.empty(cap)
    for names in activations:
        current, _evicted = current.activate(names)
    gone = tuple(name for name in current.in_activation_order() if name not in existing)
    return current.without(gone), gone


def format_summary(summary: SessionSummary, width: int = 60) -> str:
    """One line for lists and the picker: time, turns, first prompt."""
    when = summary.updated.strftime("%Y-%m-%d %H:%M")
    busy = "  (in use)" if summary.in_use else ""
    # for a terminal: a prompt pasted from a file may hold escape sequences
    prompt = _clip(visible(summary.first_prompt), width) if summary.first_prompt else "(no prompt)"
    return f"{when}  {plural(summary.turns, 'turn'):>9}  {prompt}{busy}"
