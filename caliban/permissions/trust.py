"""Trusted folders: whether what is committed in a project may run code or widen permissions.

A repository someone cloned can carry files that start processes (``.mcp.json`` servers,
hooks) or loosen the permission rules (``mode``, ``allow`` rules). Until the user trusts the
folder, caliban leaves those out and says so. Trust is per folder and covers everything
below it; it is kept in the user's state directory (``trusted-folders.json``), never in the
project, so a project cannot trust itself.

This module stores and answers, and says which settings an untrusted folder may set: only
those on an allowlist that narrow (:data:`UNTRUSTED_MAY_SET`, applied by
:func:`drop_widening_settings`, the one filter every project-level settings source goes
through). Each reader of a project file applies it and reports what it skipped
(:func:`untrusted_notice`). The store is changed under a lock
(:func:`caliban.util.fsutil.updating`): two ``caliban trust`` commands never undo each
other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from caliban.config import paths
from caliban.util.fsutil import atomic_write_text, updating
from caliban.util.mappings import dotted_get

__all__ = [
    "OPAQUE_KEYS",
    "PROJECT_FILES",
    "UNTRUSTED_MAY_SET",
    "drop_widening_settings",
    "has_project_files",
    "is_trusted",
    "outside_notice",
    "project_file_outside",
    "revoke",
    "trust",
    "trust_file",
    "trusted_folders",
    "untrusted_may_set",
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


def _any(value: Any, below: Any) -> bool:
    return True


def _no_wider_mode(value: Any, below: Any) -> bool:
    return not _wider(value, below)


def _no_more(value: Any, below: Any) -> bool:
    return isinstance(value, int) and isinstance(below, int) and value <= below


UNTRUSTED_MAY_SET: Mapping[str, Callable[[Any, Any], bool]] = {
    "permissions.deny": _any,
    "permissions.ask": _any,
    "permissions.allow": lambda value, below: value == [],
    "permissions.mode": _no_wider_mode,
    "max_turns": _no_more,
    "provider": _any,
    "model": _any,
    "model_effort": _any,
}
"""Settings (dotted, caliban's shape) a project layer may set in a folder that is not
trusted, each with the test its value must pass against the value below it (the user's own
settings, or the default): only what narrows — deny and ask rules (they add to the user's:
rule lists join across files), an empty allow list (a no-op, accepted quietly), a mode no
wider, fewer turns — and the choice of model, which widens nothing.

Everything else is left out, and a key added to the schema is left out until it is listed
here: what loosens what runs without asking (allow rules, a wider mode), runs commands
(``hooks``), decides where the API key is sent (a provider's ``base_url`` and
``api_key_env``), names a file to load (``tools.search_model``), or changes how the user's
own tools and limits behave (``tools.lazy_mcp``, a provider's ``context_window``,
``context.auto_compact_at``).

The ``sandbox`` table is checked key by key instead: what would widen the sandbox below it is
left out (:func:`caliban.sandbox.settings.widening_keys`: turning it off, auto-allow, excluded
commands, allowed domains and paths), what narrows it (turning it on, ``failIfUnavailable``)
is kept."""

OPAQUE_KEYS = frozenset({"hooks"})
"""Settings whose value is a table that is one setting (left out whole, named by its key)."""


def untrusted_may_set(key: str, value: Any, below: Any) -> bool:
    """Whether a project in an untrusted folder may set dotted ``key`` to ``value`` over
    ``below``, the value beneath it (see :data:`UNTRUSTED_MAY_SET`)."""
    allowed = UNTRUSTED_MAY_SET.get(key)
    return allowed is not None and allowed(value, below)


def drop_widening_settings(
    layer: Mapping[str, Any], *, below: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A project-level settings layer as it applies in an untrusted folder.

    ``layer`` is one source's settings in caliban's shape (``{"permissions": {"allow":
    [...]}}``), ``below`` the layers it overrides, merged (the user's own settings over the
    defaults). Returns the layer with only what :func:`untrusted_may_set` allows, and the
    keys left out, dotted, in the layer's order (a table left out whole is named once:
    ``hooks``). Pure: reads no file, asks no store.
    """
    kept = _copy(layer)
    dropped: list[str] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name in list(node):
            key, value = prefix + name, node[name]
            if key == "sandbox":
                continue  # checked key by key against the sandbox below it
            if isinstance(value, dict) and key not in UNTRUSTED_MAY_SET and key not in OPAQUE_KEYS:
                walk(value, key + ".")
            elif not untrusted_may_set(key, value, dotted_get(below or {}, key)):
                del node[name]
                dropped.append(key)

    walk(kept, "")
    dropped += _drop_widening_sandbox(kept, below)
    return kept, tuple(dropped)


def _drop_widening_sandbox(layer: dict[str, Any], below: Mapping[str, Any] | None) -> list[str]:
    """Take from ``layer``'s ``sandbox`` table what would widen the sandbox below it
    (:func:`caliban.sandbox.settings.widening_keys`; ``below`` None: not known, so whatever
    could widen); the dotted keys taken."""
    table = layer.get("sandbox")
    if not isinstance(table, dict):
        return []
    from caliban.sandbox.settings import widening_keys

    under = None if below is None else dotted_get(below, "sandbox")
    dropped = []
    known = under if isinstance(under, Mapping) else None if below is None else {}
    for key in widening_keys(table, known):
        *tables, leaf = key.split(".")
        node = table
        for part in tables:
            node = node[part]
        del node[leaf]
        dropped.append(f"sandbox.{key}")
    return dropped


def _wider(mode: Any, base: Any) -> bool:
    """Whether ``mode`` loosens ``base`` (unset: default); an unknown mode counts as wider."""
    base = base if base in MODE_ORDER else "default"
    if mode not in MODE_ORDER:
        return True
    return MODE_ORDER.index(mode) > MODE_ORDER.index(base)


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
