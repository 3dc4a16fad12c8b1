"""Trusted folders: whether what is committed in a project may run code or widen permissions.

A repository someone cloned can carry files that start processes (``.mcp.json`` servers,
hooks) or loosen the permission rules (``mode``, ``allow`` rules). Until the user trusts the
folder, caliban leaves those out and says so. Trust is per folder and covers everything
below it; it is kept in the user's state directory (``trusted-folders.json``), never in the
project, so a project cannot trust itself.

This module stores and answers, and says which settings an untrusted folder may not set
(:func:`drop_widening_settings`, the one filter every project-level settings source goes
through). Each reader of a project file applies it and reports what it skipped
(:func:`untrusted_notice`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from caliban.config import paths
from caliban.util.fsutil import atomic_write_text, updating

__all__ = [
    "GATED_KEYS",
    "PROJECT_FILES",
    "drop_widening_settings",
    "has_project_files",
    "is_trusted",
    "outside_notice",
    "project_file_outside",
    "revoke",
    "trust",
    "trust_file",
    "trusted_folders",
    "untrusted_notice",
]

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
    except (OSError, ValueError, RecursionError):
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
    with updating(trust_file()):
        folders = trusted_folders()
        if target not in folders:
            _write([*folders, target])
    return target


def revoke(folder: Path) -> bool:
    """Stop trusting ``folder`` itself; False when it was not trusted by name."""
    target = _normal(folder)
    with updating(trust_file()):
        folders = trusted_folders()
        if target not in folders:
            return False
        _write([f for f in folders if f != target])
    return True


def _write(folders: list[Path]) -> None:
    """Store ``folders``; call it inside :func:`updating` with what was read there."""
    text = json.dumps({"folders": [str(f) for f in folders]}, indent=2) + "\n"
    atomic_write_text(trust_file(), text)


# ---------------------------------------------------------------------------- settings

PROJECT_FILES = (
    ".mcp.json",
    ".caliban/config.toml",
    ".caliban/mcp.toml",
    ".claude/settings.json",
    ".claude/settings.local.json",
)
"""Files under a project root that trust can change the meaning of. A new project-level
source of settings or servers belongs here too (the REPL only asks about trust when one
of them exists)."""


def has_project_files(folder: Path) -> bool:
    """Whether ``folder`` holds any of :data:`PROJECT_FILES` (a few ``stat`` calls: cheap
    enough to run before the first prompt)."""
    return any((folder / name).exists() for name in PROJECT_FILES)


MODE_ORDER = ("plan", "default", "acceptEdits", "bypassPermissions")
"""Permission modes from the narrowest to the widest."""

GATED_KEYS = (
    "permissions.allow",
    "permissions.mode",
    "hooks",
    "providers.anthropic.base_url",
    "providers.anthropic.api_key_env",
    "providers.openai.base_url",
    "providers.openai.api_key_env",
)
"""Settings (dotted, caliban's shape) a project layer may only set in a trusted folder.

``permissions.allow`` and a wider ``permissions.mode`` loosen what runs without asking;
``hooks`` run commands; a provider's ``base_url`` and ``api_key_env`` decide where the
user's API key is sent (a cloned repository could send it to its own server). Everything
else only narrows or is harmless: ``deny`` and ``ask`` rules, ``lazy_mcp``, the model."""


def drop_widening_settings(
    layer: Mapping[str, Any], *, below: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A project-level settings layer as it applies in an untrusted folder.

    ``layer`` is one source's settings in caliban's shape (``{"permissions": {"allow":
    [...]}}``), ``below`` the layers it overrides, merged (the user's own settings). Returns
    the layer without the keys of :data:`GATED_KEYS` it would set, and those keys, dotted,
    in that order. ``permissions.mode`` is kept when it is no wider than the mode below
    (a project may ask for ``plan``); ``permissions.allow = []`` is kept (it allows nothing).
    Pure: reads no file, asks no store.
    """
    kept = _copy(layer)
    dropped: list[str] = []
    for key in GATED_KEYS:
        *tables, leaf = key.split(".")
        node: Any = kept
        for part in tables:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node[leaf]
        if key == "permissions.allow" and value == []:
            continue
        if key == "permissions.mode" and not _wider(value, _get(below or {}, key)):
            continue
        del node[leaf]
        dropped.append(key)
    return kept, tuple(dropped)


def _wider(mode: Any, base: Any) -> bool:
    """Whether ``mode`` loosens ``base`` (unset: default); an unknown mode counts as wider."""
    base = base if base in MODE_ORDER else "default"
    if mode not in MODE_ORDER:
        return True
    return MODE_ORDER.index(mode) > MODE_ORDER.index(base)


def _get(data: Mapping[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def project_file_outside(path: Path, root: Path) -> bool:
    """Whether ``path``, a file under the project ``root`` read into what the model sees (a
    memory file, a command, a skill, an agent), must not be read: it resolves outside the
    project (a committed symlink to ``~/.ssh/id_rsa`` or ``/proc/self/environ``) and the
    folder is not trusted."""
    target = os.path.realpath(path)
    top = os.path.realpath(root)
    if target == top or target.startswith(top.rstrip(os.sep) + os.sep):
        return False
    return not is_trusted(root)


def outside_notice(path: Path, root: Path) -> str:
    """The warning for a file :func:`project_file_outside` refuses."""
    return untrusted_notice(
        f"{path}: skipped: it leads outside the project, to {os.path.realpath(path)}", root
    )


def untrusted_notice(what: str, folder: Path) -> str:
    """One line: what was skipped (``ignored permissions.allow in /p/.caliban/config.toml``)
    and how to trust ``folder``."""
    import shlex

    return (
        f"{what}: {folder} is not a trusted folder (to trust it, run "
        f"`caliban trust {shlex.quote(str(folder))}` and start again)"
    )
