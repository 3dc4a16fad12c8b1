"""The prompt history: one file per project, readable by its owner only.

``$CALIBAN_STATE_DIR/prompt-history/<project-slug>`` (the same slug as the project's
transcripts), created ``0600`` in a ``0700`` directory: prompts hold pasted logs, keys and
customer data, and another project's Up arrow should not bring them back.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from prompt_toolkit.history import FileHistory, History

from caliban.config import paths

FILE_MODE = 0o600
DIR_MODE = 0o700


class PromptHistory(FileHistory):
    """The history file, kept in memory when it cannot be read or written (a read-only
    home): a history is a convenience, never a reason to stop."""

    def __init__(self, path: Path, warn: Callable[[str], None]) -> None:
        super().__init__(str(path))
        self.path = path
        self._warn: Callable[[str], None] | None = warn

    def load_history_strings(self) -> Iterator[str]:
        try:
            yield from list(super().load_history_strings())
        except OSError as exc:
            self._failed(exc)

    def store_string(self, string: str) -> None:
        if self._warn is None:
            return  # failed before: this session's history stays in memory
        try:
            _private_file(self.path)
            super().store_string(string)
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if self._warn is not None:
            self._warn(
                f"prompt history is not saved: {self.path} ({exc.strerror or exc}); "
                "set CALIBAN_STATE_DIR to a writable directory"
            )
            self._warn = None


def _private_file(path: Path) -> None:
    """Create ``path`` (and its directory) for its owner only; narrow an older, wider one."""
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & ~FILE_MODE:
            with contextlib.suppress(OSError):  # not ours to change: keep writing
                os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def history_path(cwd: Path) -> Path:
    """Where the prompt history of the project around ``cwd`` is kept."""
    from caliban.session.store import project_slug

    return paths.state_dir() / "prompt-history" / project_slug(paths.project_root(cwd))


def project_history(cwd: Path, warn: Callable[[str], None] = lambda text: None) -> History:
    return PromptHistory(history_path(cwd), warn)
