"""Recording a live session, and resuming a saved one into it.

Integration is one call each: :func:`open_transcript` when a session opens (it handles
``--continue`` / ``--resume`` too), :func:`resume_session` for ``/resume``, and
:func:`close_transcript` when the session ends.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO, TYPE_CHECKING, Protocol

from caliban.agent import Conversation
from caliban.errors import UsageError
from caliban.events import ModelChanged, Notice
from caliban.session.ledger import UsageLedger
from caliban.session.store import (
    SessionNotFound,
    SessionRecord,
    SessionSummary,
    find_session,
    format_summary,
    list_sessions,
    load_session,
    newest_session,
    replay_activations,
    transcript_path,
)
from caliban.session.transcript import Transcript, header_json
from caliban.util.text import plural

if TYPE_CHECKING:
    from caliban.session.session import Session


def attach_transcript(session: Session) -> Transcript:
    """Record ``session`` in a new transcript (created at its first prompt)."""
    header = header_json(
        session_id=session.id,
        cwd=session.cwd,
        project_root=session.env.project_root,
        model=session.model,
        provider=session.provider.name,
    )
    path = transcript_path(session.env.project_root, session.id)
    transcript = Transcript.create(path, header=header, on_error=_warn_to(session))
    _replace_transcript(session, transcript)
    return transcript


def start_afresh(session: Session) -> None:
    """``/clear``: a new conversation under a new session id, recorded (when the old one was)
    in a new transcript. The old transcript is left as it was, so ``/resume`` still finds
    the conversation that was cleared, as in Claude Code."""
    from caliban.session.session import new_session_id

    recording = current_transcript(session) is not None
    close_transcript(session)  # first: the old file must not record the clear
    session.clear()
    session.id = new_session_id()
    if recording:
        attach_transcript(session)


def close_transcript(session: Session) -> None:
    """Stop recording ``session`` and release its transcript's lock."""
    _replace_transcript(session, None)


def current_transcript(session: Session) -> Transcript | None:
    """The transcript recording ``session``, if any."""
    return next((x for x in session.listeners if isinstance(x, Transcript)), None)


def _replace_transcript(session: Session, transcript: Transcript | None) -> None:
    for old in [x for x in session.listeners if isinstance(x, Transcript)]:
        session.remove_listener(old)
        old.close()
    if transcript is not None:
        session.add_listener(transcript)


def _warn_to(session: Session) -> Callable[[str], None]:
    return lambda text: session.emit(Notice(level="warning", text=text))


async def resume_session(
    session: Session, ref: str | None, *, restore_model: bool = True
) -> SessionRecord:
    """Resume saved session ``ref`` (an id or unique prefix; ``None``: the newest) into
    ``session``, which from then on keeps appending to that session's transcript.

    Raises :class:`SessionNotFound` or :class:`~caliban.session.transcript.SessionLocked` (both
    usage errors, exit code 2) and leaves ``session`` untouched then.
    """
    root = session.env.project_root
    summary = newest_session(root) if ref is None else find_session(root, ref)
    if (current := current_transcript(session)) is not None and current.path == summary.path:
        raise UsageError(f"session {summary.id} is the current session")
    try:
        transcript = Transcript.reopen(summary.path, on_error=_warn_to(session))
    except FileNotFoundError:
        raise SessionNotFound(f"session {summary.id} was removed just now") from None
    try:
        record = load_session(summary.path)
    except BaseException:
        transcript.close()
        raise
    _replace_transcript(session, transcript)
    await resume_into(session, record, restore_model=restore_model)
    return record


async def fork_session(
    session: Session, ref: str | None, *, restore_model: bool = True
) -> SessionRecord:
    """``--fork-session``: start from saved session ``ref`` (``None``: the newest) under
    ``session``'s own id, in a new transcript that begins with a copy of the saved one's
    history; the saved session is left as it was."""
    import json

    root = session.env.project_root
    summary = newest_session(root) if ref is None else find_session(root, ref)
    record = load_session(summary.path)
    fork_id = session.id
    await resume_into(session, record, restore_model=restore_model)
    session.adopt(fork_id, session.conversation)
    transcript = attach_transcript(session)
    for line in summary.path.read_bytes().splitlines()[1:]:  # every record after the header
        try:
            transcript.write(json.loads(line))
        except ValueError:
            continue  # a line a crash cut short; loading skipped it too
    return record


async def resume_into(
    session: Session, record: SessionRecord, *, restore_model: bool = True
) -> None:
    """Restore ``record`` into ``session``: id, history, usage, model and activation set.

    Warnings (skipped lines, repairs, MCP tools that are gone) are emitted as notices. With
    recorded activations the MCP servers are waited for, to learn which tools still exist.
    ``restore_model=False`` keeps the session's model (``--model`` was given).
    """
    kept = len(record.messages) - record.repaired_tail
    session.adopt(
        record.id,
        Conversation(messages=list(record.messages[:kept]), last_usage=record.last_usage),
        UsageLedger(record.usage),
    )
    for message in record.messages[kept:]:
        session.add_context(message)  # announced, so the transcript records the repair once
    for warning in record.warnings:
        session.emit(Notice(level="warning", text=warning))
    same_provider = record.provider in (None, session.provider.name)
    if restore_model and record.model and same_provider:
        session.set_model(record.model, announce=False)
    elif record.model != session.model:
        session.emit(ModelChanged(model=session.model))
    await _restore_activations(session, record)
    when = datetime.fromtimestamp(record.path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    session.emit(
        Notice(
            level="info",
            text=f"Resumed session {record.id} ({plural(record.turns, 'turn')}, "
            f"last active {when}).",
        )
    )


async def _restore_activations(session: Session, record: SessionRecord) -> None:
    cell = session.activation
    if cell is None or not record.activations:
        return
    if session.mcp is not None:
        await session.mcp.wait_ready()
    existing = {tool.name for tool in session.mcp.tools()} if session.mcp is not None else set()
    replayed, gone = replay_activations(record.activations, cap=cell.get().cap, existing=existing)
    session.restore_activation(replayed)
    if gone:
        session.emit(
            Notice(
                level="warning",
                text="MCP tools no longer available, dropped from the active set: "
                + ", ".join(gone),
            )
        )


def pick_session(
    sessions: Sequence[SessionSummary],
    *,
    ask: Callable[[str], str] = input,
    out: IO[str] | None = None,
    limit: int = 20,
) -> SessionSummary | None:
    """A numbered list and a prompt; ``None`` when the user enters nothing."""
    out = out or sys.stderr
    shown = list(sessions[:limit])
    for index, summary in enumerate(shown, start=1):
        out.write(f"{index:>3}. {summary.id[:8]}  {format_summary(summary)}\n")
    out.flush()
    while True:
        try:
            answer = ask(f"Resume which session? [1-{len(shown)}, Enter to cancel] ").strip()
        except EOFError:
            return None
        if not answer:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(shown):
            return shown[int(answer) - 1]
        matches = [s for s in shown if len(answer) >= 4 and s.id.startswith(answer)]
        if len(matches) == 1:
            return matches[0]
        out.write(f"Enter a number from 1 to {len(shown)}, or a session id.\n")


class _ResumeOptions(Protocol):
    @property
    def continue_session(self) -> bool: ...

    @property
    def resume(self) -> str | None: ...

    @property
    def model(self) -> str | None: ...

    @property
    def fork_session(self) -> bool: ...


async def open_transcript(
    session: Session,
    options: _ResumeOptions,
    *,
    interactive: bool,
    ask: Callable[[str], str] = input,
) -> SessionRecord | None:
    """Start recording a freshly built session, resuming first when the flags ask to.

    ``--continue`` resumes the project's newest session, ``--resume ID`` that one, and
    ``--resume`` with no id shows the picker (interactive only; with ``-p`` it is a usage
    error). Returns the resumed record, or ``None`` for a new session.
    """
    if options.continue_session and options.resume is not None:
        raise UsageError("use either --continue or --resume, not both")
    restore_model = options.model is None
    if options.fork_session and (options.continue_session or options.resume):
        source = None if options.continue_session else (options.resume or "").strip()
        return await fork_session(session, source, restore_model=restore_model)
    if options.continue_session:
        return await resume_session(session, None, restore_model=restore_model)
    if options.resume is None:
        attach_transcript(session)
        return None
    ref: str | None = options.resume.strip()
    if not ref:
        if not interactive:
            raise UsageError(
                "--resume needs a session ID with -p: pass one (see `caliban sessions list`) "
                "or use -c to continue the newest session"
            )
        sessions = list_sessions(session.env.project_root)
        if not sessions:
            raise SessionNotFound(
                f"no saved sessions in this project ({session.env.project_root}) to resume"
            )
        from caliban.util.background import start_in_daemon_thread

        # A daemon thread: on Ctrl-C nothing waits for the blocked input() to return.
        chosen = await start_in_daemon_thread(
            lambda: pick_session(sessions, ask=ask), name="caliban-resume-picker"
        )
        if chosen is None:
            session.emit(Notice(level="info", text="No session chosen; starting a new one."))
            attach_transcript(session)
            return None
        ref = chosen.id
    return await resume_session(session, ref, restore_model=restore_model)
