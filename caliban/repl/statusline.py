"""Claude Code's ``statusLine``: a command whose output is shown above the toolbar.

A settings file says ``"statusLine": {"type": "command", "command": "~/.claude/statusline.sh"}``
(Claude Code's key; a project's only counts in a trusted folder, as it runs code). The
command gets Claude Code's JSON on stdin — session id, transcript path, cwd, model, workspace,
version, cost, context window (recorded from Claude Code 2.1.197:
``tests/fixtures/claude_code/statusline_input.json``) — and the first line it prints is
shown above caliban's own toolbar, its colours kept (SGR sequences only: any other escape is
shown, not obeyed). It runs when the session opens, after each turn and command, and when
the mode or model changes; one run at a time, bounded in time and output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples, to_formatted_text

from caliban import __version__
from caliban.util.text import visible

if TYPE_CHECKING:
    from caliban.session.session import Session

TIMEOUT_S = 5.0
MAX_OUTPUT_BYTES = 16 * 1024
MAX_LINE_CHARS = 400
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def sgr_only(line: str) -> str:
    """``line`` with its colour codes kept and every other control character made visible
    (an OSC 52 in a status script's output must not reach the clipboard)."""
    out, last = [], 0
    for match in _SGR.finditer(line):
        out.append(visible(line[last : match.start()]))
        out.append(match.group())
        last = match.end()
    out.append(visible(line[last:]))
    return "".join(out)


def status_input(session: Session, *, started: float) -> dict[str, Any]:
    """The JSON a status command reads, in Claude Code's shape."""
    from caliban.repl.info import context_used, session_cost
    from caliban.session.store import transcript_path

    usage = session.ledger.total()
    window = session.context_window()
    used = context_used(session)
    percent = round(used * 100 / window) if used is not None and window else None
    effort = getattr(session.provider, "effort", None)
    return {
        "session_id": session.id,
        "transcript_path": str(transcript_path(session.env.project_root, session.id)),
        "cwd": str(session.cwd),
        "effort": {"level": effort},
        "model": {"id": session.model, "display_name": session.model},
        "workspace": {
            "current_dir": str(session.env.cwd),
            "project_dir": str(session.env.project_root),
            "added_dirs": [],
        },
        "version": __version__,
        "output_style": {"name": "default"},
        "cost": {
            "total_cost_usd": session_cost(session) or 0,
            "total_duration_ms": int((time.monotonic() - started) * 1000),
            "total_api_duration_ms": 0,
            "total_lines_added": 0,
            "total_lines_removed": 0,
        },
        "context_window": {
            "total_input_tokens": usage.context_tokens,
            "total_output_tokens": usage.output_tokens,
            "context_window_size": window,
            "current_usage": used,
            "used_percentage": percent,
            "remaining_percentage": None if percent is None else 100 - percent,
        },
        "exceeds_200k_tokens": (used or 0) > 200_000,
        "fast_mode": False,
        "thinking": {"enabled": effort is not None},
        "permission_mode": session.permissions.mode if session.permissions else "default",
    }


async def run_status_command(command: str, stdin: bytes, cwd: Path) -> str:
    """The first line ``command`` prints, given ``stdin``; empty when it fails or is slow.

    It runs in a shell, in its own process group, stopped whole after :data:`TIMEOUT_S`."""
    from caliban.exec import PIPE, Command, spawn, stop_group

    child = await spawn(Command(argv=("/bin/sh", "-c", command), cwd=cwd), stdin=PIPE, stdout=PIPE)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            assert child.stdin is not None and child.stdout is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                child.stdin.write(stdin)
                await child.stdin.drain()
                child.stdin.close()
            output = await child.stdout.read(MAX_OUTPUT_BYTES)
            await child.wait()
    except (TimeoutError, asyncio.CancelledError):
        await stop_group(child, grace=0)
        raise
    finally:
        child.close()
    lines = output.decode("utf-8", "replace").splitlines()
    return lines[0][:MAX_LINE_CHARS] if lines else ""


class StatusLine:
    """The status command of a session, and its latest line."""

    def __init__(self) -> None:
        self.command: str | None = None
        self.text = ""
        self._session: Session | None = None
        self._refreshed: Callable[[], None] = lambda: None
        self._running: asyncio.Task[None] | None = None
        self._again = False
        self._started = time.monotonic()

    def configure(self, session: Session, *, refreshed: Callable[[], None]) -> None:
        """Use ``session``'s ``statusLine`` setting; ``refreshed`` redraws the toolbar."""
        self._session = session
        self._refreshed = refreshed
        self.command = _command(session.status_line)
        self.refresh()

    def refresh(self) -> None:
        """Run the command again (after the run under way, if any)."""
        if self.command is None or self._session is None:
            return
        if self._running is not None and not self._running.done():
            self._again = True
            return
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to refresh for
            self._running = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        session, command = self._session, self.command
        assert session is not None and command is not None
        payload = json.dumps(status_input(session, started=self._started)).encode()
        try:
            self.text = await run_status_command(command, payload, session.cwd)
        except (OSError, TimeoutError):
            self.text = ""
        self._refreshed()
        if self._again:
            self._again = False
            self.refresh()

    def fragments(self) -> StyleAndTextTuples:
        """The line for the toolbar (with its newline), or nothing."""
        if not self.text:
            return []
        return [*to_formatted_text(ANSI(" " + sgr_only(self.text))), ("", "\n")]


def _command(setting: Mapping[str, Any] | None) -> str | None:
    if not isinstance(setting, Mapping) or setting.get("type", "command") != "command":
        return None
    command = setting.get("command")
    return command.strip() or None if isinstance(command, str) else None
