"""What the top-level command line asked for, handed to the REPL or the headless runner.

Kept apart from :mod:`caliban.cli.main` so that the runners can import it without importing
the command line (and the command line imports the runners only when it runs them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

EXIT_USAGE = 2
EXIT_CONFIG = 78
EXIT_INTERRUPTED = 130

OutputFormat = Literal["text", "json", "stream-json"]
PermissionModeName = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
EffortName = Literal["low", "medium", "high"]


@dataclass(frozen=True, kw_only=True)
class CliOptions:
    """What the top-level flags asked for."""

    prompt: str | None
    print_mode: bool
    output_format: OutputFormat
    model: str | None
    provider: str | None
    max_turns: int | None
    permission_mode: str | None
    allowed_tools: tuple[str, ...]
    disallowed_tools: tuple[str, ...]
    continue_session: bool
    resume: str | None
    """A session id, ``""`` for the picker, or ``None``."""
    cwd: Path
    effort: str | None = None
    """``--effort``: low, medium or high (the ``model_effort`` setting)."""
