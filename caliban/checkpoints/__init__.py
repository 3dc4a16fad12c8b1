"""Checkpoints: the project's files before each user prompt, in a git object store of
caliban's own, and rewinding to them (``/rewind``, ``/undo``, the ``rewind_files`` control
request). :mod:`caliban.checkpoints.store` takes and restores snapshots;
:mod:`caliban.checkpoints.manager` keeps a session's list of them.

This module only decides whether a session takes them, so that a ``-p`` run that does not
imports neither."""

from __future__ import annotations

import os
from collections.abc import Mapping

SDK_CHECKPOINTING = "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING"


def checkpointing(*, interactive: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a session takes checkpoints: the REPL does; ``-p`` does when
    ``CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`` is set (the Agent SDK's
    ``enable_file_checkpointing``), as Claude Code's does."""
    environ = os.environ if environ is None else environ
    if interactive:
        return True
    return environ.get(SDK_CHECKPOINTING, "").strip().lower() in ("1", "true", "yes", "on")
