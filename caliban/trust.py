"""Trusted folders: whether what is committed in a project may run code or widen permissions.

A repository someone cloned can carry files that start processes (``.mcp.json`` servers,
hooks) or loosen the permission rules (``mode``, ``allow`` rules). Until the user trusts the
folder, caliban leaves those out and says so. Trust is per folder and covers everything
below it; it is kept in the user's state directory (``trusted-folders.json``), never in the
project, so a project cannot trust itself.

This module only stores and answers; what is skipped in an untrusted folder is decided
where each file is read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from caliban import paths
from caliban.fsutil import atomic_write_text

__all__ = ["is_trusted", "revoke", "trust", "trust_file", "trusted_folders"]

MAX_FILE_BYTES = 1_000_000
"""A larger trust file is not read (it is not one caliban wrote)."""


def trust_file() -> Path:
    """``<state dir>/trusted-folders.json`` (``~/.local/state/caliban`` by default)."""
    return paths.state_dir() / "trusted-folders.json"


def _normal(folder: Path) -> Path:
    return Path(os.path.realpath(folder.expanduser()))


def trusted_folders() -> list[Path]:
    """Every trusted folder, in the order they were trusted. A missing, unreadable or
    malformed file trusts nothing (fail closed)."""
    path = trust_file()
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return []
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(folders, list):
        return []
    return [Path(f) for f in folders if isinstance(f, str) and os.path.isabs(f)]


def is_trusted(folder: Path) -> bool:
    """Whether ``folder`` or a folder above it is trusted."""
    target = _normal(folder)
    return any(target == root or root in target.parents for root in trusted_folders())


def trust(folder: Path) -> Path:
    """Trust ``folder`` (and everything below it); returns the path as stored."""
    target = _normal(folder)
    folders = trusted_folders()
    if target not in folders:
        _write([*folders, target])
    return target


def revoke(folder: Path) -> bool:
    """Stop trusting ``folder`` itself; False when it was not trusted by name."""
    target = _normal(folder)
    folders = trusted_folders()
    if target not in folders:
        return False
    _write([f for f in folders if f != target])
    return True


def _write(folders: list[Path]) -> None:
    text = json.dumps({"folders": [str(f) for f in folders]}, indent=2) + "\n"
    atomic_write_text(trust_file(), text)
