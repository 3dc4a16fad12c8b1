"""Where "Yes, and don't ask again" for a command line is kept past the session.

Claude Code writes the rule to the project's ``.claude/settings.local.json``
(``permissions.allow``); caliban does the same by default, or adds it to ``[permissions]
allow`` of ``.caliban/config.toml``, or keeps it for the session only
(``permissions.save_rules_in``). Either file is read back by the next session, ``caliban
-c`` included — in a trusted folder: in one that is not, a project's allow rules are left
out whoever wrote them (:mod:`caliban.permissions.trust`), so a repository's committed file
still only narrows.

The file is changed under a lock and replaced atomically; its other keys (and, for TOML,
comments) are kept. A file caliban cannot read as settings, a ``permissions`` or ``allow``
of another shape, or a path that leads out of the project (a committed symlink for
``.claude``, ``.caliban`` or the file itself) is left alone: :class:`RuleNotSaved` says why.

The Agent SDK's ``updatedPermissions`` (:mod:`caliban.permissions.updates`) name Claude
Code's settings files by destination (:func:`settings_file`) and change them through
:meth:`RulesFile.edit_permissions` under the same guarantees.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from caliban.config.paths import claude_user_dir
from caliban.errors import ConfigError
from caliban.util.fsutil import atomic_write_text, resolved, updating

__all__ = [
    "RULES_FILES",
    "SETTINGS_FILES",
    "RuleNotSaved",
    "RulesFile",
    "SaveRulesIn",
    "SettingsDestination",
    "listed",
    "rules_file",
    "settings_file",
]

SaveRulesIn = Literal["claude-local", "caliban-project", "session"]
"""``permissions.save_rules_in``: Claude Code's local settings, caliban's project config, or
nowhere (the rule lasts the session)."""

RULES_FILES: dict[SaveRulesIn, str] = {
    "claude-local": ".claude/settings.local.json",
    "caliban-project": ".caliban/config.toml",
}

SettingsDestination = Literal["localSettings", "projectSettings", "userSettings"]
"""The Agent SDK's names for Claude Code's settings files (``session`` is none of them)."""

SETTINGS_FILES: dict[SettingsDestination, str] = {
    "localSettings": ".claude/settings.local.json",
    "projectSettings": ".claude/settings.json",
    "userSettings": "~/.claude/settings.json",
}

MAX_SETTINGS_BYTES = 1_000_000
"""A larger settings file is not one to rewrite."""


class RuleNotSaved(Exception):
    """The rule could not be written (it still holds for the session)."""


@dataclass(frozen=True, slots=True)
class RulesFile:
    """The project file "don't ask again" rules are added to."""

    project_root: Path
    relative: str
    """Its path under the project root, as shown (``.claude/settings.local.json``)."""
    read_back: bool = True
    """New sessions apply its allow rules: the folder is trusted."""
    shown: str = ""
    """How messages name it, when not :attr:`relative` (``~/.claude/settings.json``)."""
    guarded: bool = True
    """A project's file: never written through a symbolic link (a repository could commit
    ``.claude`` as a link to ``~/.claude``). The user's own settings may be linked."""

    @property
    def name(self) -> str:
        return self.shown or self.relative

    def add_allow(self, rule: str) -> None:
        """Add ``rule`` to the file's allow rules (nothing when it is there already);
        raises :class:`RuleNotSaved`."""
        path = self._checked_path()
        try:
            if path.suffix == ".json":
                _edit_json(path, lambda permissions: _add(permissions, "allow", [rule]))
            else:
                _add_to_toml(path, rule)
        except (ConfigError, OSError) as exc:
            raise RuleNotSaved(f"{self.name}: {exc}") from None

    def edit_permissions(self, edit: Callable[[dict[str, Any]], None]) -> None:
        """Change the JSON file's ``permissions`` object in place with ``edit``, under the
        lock, and write it back atomically; raises :class:`RuleNotSaved` (``edit`` raises
        :class:`ConfigError` for a key of another shape)."""
        path = self._checked_path()
        try:
            _edit_json(path, edit)
        except (ConfigError, OSError) as exc:
            raise RuleNotSaved(f"{self.name}: {exc}") from None

    def _checked_path(self) -> Path:
        """The file's path, once sure that writing it writes a file of this project."""
        root = resolved(self.project_root)
        path = root / self.relative
        if not self.guarded:
            return path
        for place in (path.parent, path):
            if place.is_symlink():
                raise RuleNotSaved(f"{self.name}: {place.name} is a symbolic link")
        if resolved(path).parent != root / Path(self.relative).parent:
            raise RuleNotSaved(f"{self.name} is not inside the project")
        return path


def rules_file(project_root: Path, where: SaveRulesIn, *, trusted: bool = True) -> RulesFile | None:
    """The file ``permissions.save_rules_in`` names for a project (None: the session only);
    ``trusted``: the project's folder is, so new sessions read its allow rules back."""
    if where == "session":
        return None
    return RulesFile(project_root=project_root, relative=RULES_FILES[where], read_back=trusted)


def settings_file(
    destination: SettingsDestination, project_root: Path, *, trusted: bool
) -> RulesFile:
    """Claude Code's settings file an Agent SDK update names: the project's
    ``.claude/settings.local.json`` or ``.claude/settings.json`` (read back by new sessions
    once the folder is ``trusted``), or the user's ``settings.json`` (``$CLAUDE_CONFIG_DIR``
    or ``~/.claude``)."""
    if destination == "userSettings":
        return RulesFile(
            project_root=claude_user_dir(),
            relative="settings.json",
            shown=SETTINGS_FILES[destination],
            guarded=False,
        )
    return RulesFile(
        project_root=project_root, relative=SETTINGS_FILES[destination], read_back=trusted
    )


def listed(permissions: dict[str, Any], key: str) -> list[Any]:
    """``permissions[key]``, a list (created empty); :class:`ConfigError` when it is not."""
    values = permissions.setdefault(key, [])
    if not isinstance(values, list):
        raise ConfigError(f"its permissions.{key} is not a list; it was not changed")
    return values


def _add(permissions: dict[str, Any], key: str, values: list[str]) -> None:
    present = listed(permissions, key)
    present.extend(value for value in dict.fromkeys(values) if value not in present)


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    with updating(path):
        data = _read_json(path)
        permissions = data.setdefault("permissions", {})
        if not isinstance(permissions, dict):
            raise ConfigError("its permissions is not an object; it was not changed")
        before = json.dumps(permissions)
        edit(permissions)
        if json.dumps(permissions) != before:
            atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            raise ConfigError("larger than a settings file should be; the rule was not saved")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read it: {exc}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        raise ConfigError("not valid JSON; the rule was not saved") from None
    if not isinstance(data, dict):
        raise ConfigError("not a JSON object; the rule was not saved")
    return data


def _add_to_toml(path: Path, rule: str) -> None:
    from caliban.config.toml_edit import edited, set_key

    with edited(path) as document:
        table = document.get("permissions", {})
        allow = table.get("allow", []) if hasattr(table, "get") else None
        if not isinstance(allow, list):
            raise ConfigError("its [permissions] allow is not a list; the rule was not saved")
        if rule not in allow:
            set_key(document, ("permissions", "allow"), [*allow, rule])
