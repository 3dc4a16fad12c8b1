"""The user's editor: ``$VISUAL``, else ``$EDITOR``, else the first of nano, vim, vi found.

Ctrl-G edits the prompt in it, ``/memory`` a memory file. The editor takes over the
terminal, so callers run :func:`edit_file` through prompt-toolkit's ``run_in_terminal``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

FALLBACK_EDITORS = ("nano", "vim", "vi")


class NoEditor(Exception):
    """No editor is configured or installed; the message says how to set one."""


def editor_command(env: Mapping[str, str] | None = None) -> list[str]:
    """The editor's argv (``$EDITOR`` may carry arguments: ``code --wait``)."""
    env = os.environ if env is None else env
    for variable in ("VISUAL", "EDITOR"):
        if (value := env.get(variable, "").strip()) and (argv := shlex.split(value)):
            return argv
    for name in FALLBACK_EDITORS:
        if (found := shutil.which(name)) is not None:
            return [found]
    raise NoEditor("no editor found: set $EDITOR (for example `export EDITOR=nano`)")


def edit_file(path: Path) -> int:
    """Open ``path`` in the user's editor and wait for it to close; returns its exit code."""
    from caliban.exec import Command, run_attached

    argv = [*editor_command(), str(path)]
    try:
        return run_attached(Command(argv=tuple(argv)))
    except OSError as exc:
        raise NoEditor(f"cannot start the editor {argv[0]!r}: {exc.strerror or exc}") from exc


def edit_text(text: str, *, suffix: str = ".md") -> str | None:
    """``text`` as edited in the user's editor; ``None`` when the editor failed."""
    with tempfile.TemporaryDirectory(prefix="caliban-edit-") as directory:
        path = Path(directory) / f"prompt{suffix}"
        path.write_text(text, encoding="utf-8")
        if edit_file(path) != 0:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
