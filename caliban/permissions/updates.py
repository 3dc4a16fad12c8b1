"""The Agent SDK's ``updatedPermissions``: what an allow answer may change besides the call.

A ``can_use_tool`` callback answers an allow with a list of Claude Code's permission
updates (recorded from Claude Code 2.1.197 in
``tests/fixtures/claude_code/permission_updates/``):

- ``addRules`` / ``replaceRules`` / ``removeRules`` with a ``behavior`` (allow, deny, ask)
  and ``rules`` (``{"toolName", "ruleContent"?}``, the rule ``Tool(content)``);
- ``addDirectories`` / ``removeDirectories`` (working directories: ``--add-dir``);
- ``setMode`` (``default``, ``acceptEdits`` or ``plan``, written to a file as
  ``permissions.defaultMode`` as Claude Code does: ``bypassPermissions`` is chosen at
  start-up, never in an answer, and such an entry is left out — Claude Code never writes
  it either).

Each has a ``destination``: ``session`` (until caliban exits), or the settings file it is
also written to — ``localSettings`` (``.claude/settings.local.json``), ``projectSettings``
(``.claude/settings.json``), ``userSettings`` (``~/.claude/settings.json``) — through
:mod:`caliban.permissions.saved_rules` (locked, atomic, other keys kept, never through a
symlinked ``.claude``). As in Claude Code, one malformed entry and none is applied.

What the session takes is the update's own content, never what a file holds: a project
file's allow rules still wait for trust in a folder that is not trusted. Removing narrows
at once; a deny or ask rule in force when the session started (from a file or a flag)
stays in force until it ends, even when an update removes it from its file — caliban does
not know which file a rule came from, and keeping a denial is the safe mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, assert_never

from caliban.config.settings import PermissionMode
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import Rule, RuleError
from caliban.permissions.saved_rules import (
    RuleNotSaved,
    SettingsDestination,
    listed,
    settings_file,
)

__all__ = [
    "DirectoriesUpdate",
    "ModeUpdate",
    "PermissionUpdate",
    "PermissionUpdater",
    "RulesUpdate",
    "UpdateError",
    "parse_updates",
]

Destination = Literal["session", "localSettings", "projectSettings", "userSettings"]
Behavior = Literal["allow", "deny", "ask"]
RulesKind = Literal["addRules", "replaceRules", "removeRules"]
DirectoriesKind = Literal["addDirectories", "removeDirectories"]

_RULES_KINDS: tuple[RulesKind, ...] = ("addRules", "replaceRules", "removeRules")
_DIRECTORIES_KINDS: tuple[DirectoriesKind, ...] = ("addDirectories", "removeDirectories")
_BEHAVIORS: tuple[Behavior, ...] = ("allow", "deny", "ask")
_DESTINATIONS: tuple[Destination, ...] = (
    "session",
    "localSettings",
    "projectSettings",
    "userSettings",
)
_T = TypeVar("_T", bound=str)
MAX_UPDATES = 100
"""More updates (or rules, or directories in one) than any permission dialog offers: the
answer's updates are refused."""


class UpdateError(ValueError):
    """An entry Claude Code would refuse; then none of the answer's updates applies."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RulesUpdate:
    kind: RulesKind
    behavior: Behavior
    rules: tuple[Rule, ...]
    destination: Destination


@dataclass(frozen=True, kw_only=True, slots=True)
class DirectoriesUpdate:
    kind: DirectoriesKind
    directories: tuple[str, ...]
    destination: Destination


@dataclass(frozen=True, kw_only=True, slots=True)
class ModeUpdate:
    mode: PermissionMode | None
    """None: a mode caliban never takes from an answer (``bypassPermissions``)."""
    destination: Destination


PermissionUpdate = RulesUpdate | DirectoriesUpdate | ModeUpdate


def parse_updates(raw: object) -> tuple[PermissionUpdate, ...]:
    """An answer's ``updatedPermissions`` (absent: none); raises :class:`UpdateError` for
    anything Claude Code would refuse, and then none applies."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_UPDATES:
        raise UpdateError(f"updatedPermissions is not a list of at most {MAX_UPDATES} updates")
    return tuple(_parse_one(entry) for entry in raw)


def _parse_one(entry: object) -> PermissionUpdate:
    if not isinstance(entry, dict):
        raise UpdateError("an update is not an object")
    destination = _one_of(entry, "destination", _DESTINATIONS)
    kind = entry.get("type")
    if kind in _RULES_KINDS:
        rules = entry.get("rules")
        if not isinstance(rules, list) or len(rules) > MAX_UPDATES:
            raise UpdateError(f"{kind} has no list of rules")
        return RulesUpdate(
            kind=_one_of(entry, "type", _RULES_KINDS),
            behavior=_one_of(entry, "behavior", _BEHAVIORS),
            rules=tuple(_rule(value) for value in rules),
            destination=destination,
        )
    if kind in _DIRECTORIES_KINDS:
        directories = entry.get("directories")
        if (
            not isinstance(directories, list)
            or len(directories) > MAX_UPDATES
            or not all(isinstance(path, str) and path and "\0" not in path for path in directories)
        ):
            raise UpdateError(f"{kind} has no list of directories")
        return DirectoriesUpdate(
            kind=_one_of(entry, "type", _DIRECTORIES_KINDS),
            directories=tuple(directories),
            destination=destination,
        )
    if kind == "setMode":
        match entry.get("mode"):
            case "default" | "acceptEdits" | "plan" as mode:
                return ModeUpdate(mode=mode, destination=destination)
            case "bypassPermissions" | "dontAsk" | "auto":
                return ModeUpdate(mode=None, destination=destination)
            case _:
                raise UpdateError("setMode names no mode")
    raise UpdateError(f"an update of an unknown type ({str(kind)[:40]!r})")


def _one_of(entry: Mapping[str, Any], key: str, allowed: tuple[_T, ...]) -> _T:
    value = entry.get(key)
    for candidate in allowed:
        if value == candidate:
            return candidate
    raise UpdateError(f"an update's {key} is none of {', '.join(allowed)}")


def _rule(value: object) -> Rule:
    """``{"toolName": "Bash", "ruleContent": "npm test:*"}`` as the rule ``Bash(npm test:*)``;
    no ``ruleContent`` is the whole tool (``null`` is refused, as Claude Code refuses it)."""
    if not isinstance(value, dict) or not isinstance(tool := value.get("toolName"), str):
        raise UpdateError("a rule has no toolName")
    if "ruleContent" in value and not isinstance(value["ruleContent"], str):
        raise UpdateError("a rule's ruleContent is not a string")
    content = value.get("ruleContent")
    try:
        return Rule.parse(f"{tool}({content})" if content else tool)
    except RuleError as exc:
        raise UpdateError(str(exc)) from None


@dataclass(kw_only=True)
class PermissionUpdater:
    """Applies an answer's updates to a session's ``policy`` and writes the persistent ones
    to Claude Code's settings files; ``warn`` says what could not be written (the update
    still holds for the session) and when a project file waits for trust."""

    policy: PermissionPolicy
    trusted: bool
    """The project's folder is: new sessions read its settings files' allow rules."""
    warn: Callable[[str], None] = lambda text: None

    def apply(self, updates: Sequence[PermissionUpdate]) -> None:
        for update in updates:
            match update:
                case RulesUpdate():
                    self._rules(update)
                case DirectoriesUpdate():
                    self._directories(update)
                case ModeUpdate():
                    self._mode(update)
                case _:
                    assert_never(update)

    def _rules(self, update: RulesUpdate) -> None:
        behavior, rules = update.behavior, list(update.rules)
        texts = [rule.text for rule in rules]
        previous: list[str] = []

        def edit(permissions: dict[str, Any]) -> None:
            present = listed(permissions, behavior)
            previous.extend(value for value in present if isinstance(value, str))
            if update.kind == "removeRules":
                present[:] = [value for value in present if value not in texts]
                return
            if update.kind == "replaceRules":
                present.clear()
            present.extend(text for text in dict.fromkeys(texts) if text not in present)

        if update.destination != "session":
            self._write(update.destination, edit, what=", ".join(texts) or behavior)
        match update.kind:
            case "addRules":
                self.policy.add_rules(behavior, rules)
            case "removeRules":
                self.policy.remove_rules(behavior, rules)
            case "replaceRules":
                # The session's own rules of this behavior, or the file's (read before it
                # changed): only narrowing comes from a file (remove_rules).
                if update.destination == "session":
                    replaced = list(self.policy.added_in_session(behavior))
                else:
                    replaced = _parsed(previous)
                self.policy.remove_rules(behavior, replaced)
                self.policy.add_rules(behavior, rules)
            case _:
                assert_never(update.kind)

    def _directories(self, update: DirectoriesUpdate) -> None:
        paths = [self.policy.working_dir(directory) for directory in update.directories]
        if update.destination != "session":
            wanted = list(update.directories)

            def edit(permissions: dict[str, Any]) -> None:
                present = listed(permissions, "additionalDirectories")
                if update.kind == "addDirectories":
                    present.extend(path for path in wanted if path not in present)
                else:
                    present[:] = [path for path in present if path not in wanted]

            self._write(update.destination, edit, what=", ".join(wanted))
        self.policy.change_working_dirs(paths, add=update.kind == "addDirectories")

    def _mode(self, update: ModeUpdate) -> None:
        mode = update.mode
        if mode is None:
            return
        if update.destination != "session":

            def edit(permissions: dict[str, Any]) -> None:
                permissions["defaultMode"] = mode

            # Only acceptEdits asks less than default: plan and default apply untrusted too.
            self._write(
                update.destination,
                edit,
                what=f"defaultMode {mode}",
                waits_for_trust=mode == "acceptEdits",
            )
        self.policy.mode = mode

    def _write(
        self,
        destination: SettingsDestination,
        edit: Callable[[dict[str, Any]], None],
        *,
        what: str,
        waits_for_trust: bool = True,
    ) -> None:
        file = settings_file(destination, self.policy.project_root, trusted=self.trusted)
        try:
            file.edit_permissions(edit)
        except RuleNotSaved as exc:
            self.warn(f"the update of {what} was not saved ({exc}); it holds for this session only")
            return
        if waits_for_trust and not file.read_back:
            self.warn(
                f"{what} was saved to {file.name}, but this folder is not "
                "trusted: new sessions apply it once you trust the folder (caliban trust)"
            )


def _parsed(texts: Sequence[str]) -> list[Rule]:
    rules = []
    for text in texts:
        try:
            rules.append(Rule.parse(text))
        except RuleError:
            continue
    return rules
