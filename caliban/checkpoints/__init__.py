"""Checkpoints: the project's files before each user prompt, in a git object store of
caliban's own, and rewinding to them (``/rewind``, ``/undo``, the ``rewind_files`` control
request). :mod:`caliban.checkpoints.store` takes and restores snapshots;
:mod:`caliban.checkpoints.manager` keeps a session's list of them."""

from caliban.checkpoints.manager import (
    Checkpoint,
    CheckpointNotFound,
    Checkpoints,
    RewindPlan,
    RewindResult,
    checkpointing,
)
from caliban.checkpoints.store import Change, StoreError

__all__ = [
    "Change",
    "Checkpoint",
    "CheckpointNotFound",
    "Checkpoints",
    "RewindPlan",
    "RewindResult",
    "StoreError",
    "checkpointing",
]
