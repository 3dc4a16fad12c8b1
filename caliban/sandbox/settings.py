"""The ``sandbox`` settings, in Claude Code's keys and shapes, from every source, as one
:class:`SandboxConfig` for a session.

Sources, lowest first: Claude Code's settings files (``~/.claude/settings.json``, the
project's ``.claude/settings.json`` and ``settings.local.json``, ``--settings``), then
caliban's ``config.toml`` files (user, project), then ``--sandbox``. A value set later wins;
lists (``excludedCommands``, the domains, the paths) are joined from every source, so a
project can add a denied domain but not remove the user's.

In a folder that is not trusted, a project's settings may only narrow (:func:`widening_keys`
says what to leave out): turning the sandbox on, ``failIfUnavailable``, denied domains and
paths apply; turning it off or to a looser mode, auto-allow, excluded commands, allowed
domains, writable paths and unix sockets do not. ``autoAllowBashIfSandboxed`` left unset is
true (Claude Code's default) only in a trusted folder.

Claude Code keys caliban does not use (``ignoreViolations``, ``enableWeakerNestedSandbox``,
``ripgrep``, ``bwrapPath``, …) are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from caliban.util.mappings import dotted_get

__all__ = ["MODES", "SandboxConfig", "SandboxLayer", "resolve", "widening_keys"]

Mode = Literal["off", "read-only", "workspace-write"]
MODES: tuple[Mode, ...] = ("off", "workspace-write", "read-only")
"""From the loosest to the strictest."""

_LISTS = (
    "excludedCommands",
    "network.allowedDomains",
    "network.deniedDomains",
    "network.allowUnixSockets",
    "filesystem.allowWrite",
    "filesystem.denyWrite",
    "filesystem.denyRead",
    "filesystem.allowRead",
)
_WIDENING_LISTS = frozenset(
    {
        "excludedCommands",
        "network.allowedDomains",
        "network.allowUnixSockets",
        "filesystem.allowWrite",
        "filesystem.allowRead",
    }
)
_FLAGS: dict[str, tuple[bool, bool]] = {
    # key: (the value that widens, the default)
    "enabled": (False, False),
    "failIfUnavailable": (False, False),
    "autoAllowBashIfSandboxed": (True, False),  # unset is false where this filter applies
    "allowUnsandboxedCommands": (True, True),
    "network.allowAllUnixSockets": (True, False),
    "network.allowLocalBinding": (True, False),
}


@dataclass(frozen=True, kw_only=True)
class SandboxConfig:
    """The session's sandbox settings, every source combined."""

    mode: Mode = "off"
    fail_if_unavailable: bool = False
    auto_allow_bash: bool = False
    """Sandboxed Bash commands run without asking (deny and ask rules still apply)."""
    allow_unsandboxed: bool = True
    """A command may be retried outside the sandbox (``dangerouslyDisableSandbox``) with
    approval; when false the parameter is ignored and commands stay sandboxed."""
    excluded_commands: tuple[str, ...] = ()
    allowed_domains: tuple[str, ...] = ()
    denied_domains: tuple[str, ...] = ()
    allow_unix_sockets: tuple[str, ...] = ()
    allow_all_unix_sockets: bool = False
    allow_local_binding: bool = False
    allow_write: tuple[str, ...] = ()
    deny_write: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    allow_read: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    """Where the mode came from (``--sandbox``, a file), for ``/sandbox``."""

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass(frozen=True, kw_only=True)
class SandboxLayer:
    """One source's ``sandbox`` table."""

    source: str
    """Where it came from, for ``/sandbox`` (a path, ``--settings``)."""
    table: Mapping[str, Any]
    project: bool = False
    """It is committed in the project (and so may only narrow in a folder not trusted)."""


def resolve(
    layers: Sequence[SandboxLayer], *, flag: Mode | None = None, trusted: bool
) -> SandboxConfig:
    """One :class:`SandboxConfig` from ``layers``, lowest first, and ``--sandbox``. In a
    folder not trusted, a project layer's widening keys (:func:`widening_keys`, weighed
    against every layer below it, Claude Code's and caliban's alike) do not apply. Values of
    the wrong type were refused where they were read (caliban's schema) or are skipped here
    (Claude Code's files)."""
    state: dict[str, Any] = {}
    lists: dict[str, list[str]] = {key: [] for key in _LISTS}
    mode_source = ""
    for layer in layers:
        skip = set(widening_keys(layer.table, state)) if layer.project and not trusted else set()
        for key in _FLAGS:
            value = dotted_get(layer.table, key)
            if isinstance(value, bool) and key not in skip:
                _put(state, key, value)
                if key == "enabled":
                    mode_source = layer.source
        mode = layer.table.get("mode")
        if mode in MODES and "mode" not in skip:
            state["mode"] = mode
            mode_source = layer.source
        for key in _LISTS:
            value = dotted_get(layer.table, key)
            if isinstance(value, list) and key not in skip:
                lists[key] += [v for v in value if isinstance(v, str)]
    mode = _mode_of(state)
    if flag is not None:
        mode, mode_source = flag, "--sandbox"
    auto = dotted_get(state, "autoAllowBashIfSandboxed")

    def joined(key: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lists[key]))

    return SandboxConfig(
        mode=mode,
        fail_if_unavailable=_effective(state, "failIfUnavailable", False),
        auto_allow_bash=auto if isinstance(auto, bool) else trusted,
        allow_unsandboxed=_effective(state, "allowUnsandboxedCommands", True),
        excluded_commands=joined("excludedCommands"),
        allowed_domains=joined("network.allowedDomains"),
        denied_domains=joined("network.deniedDomains"),
        allow_unix_sockets=joined("network.allowUnixSockets"),
        allow_all_unix_sockets=_effective(state, "network.allowAllUnixSockets", False),
        allow_local_binding=_effective(state, "network.allowLocalBinding", False),
        allow_write=joined("filesystem.allowWrite"),
        deny_write=joined("filesystem.denyWrite"),
        deny_read=joined("filesystem.denyRead"),
        allow_read=joined("filesystem.allowRead"),
        sources=(mode_source,) if mode_source else (),
    )


def widening_keys(table: Mapping[str, Any], below: Mapping[str, Any] | None) -> list[str]:
    """The keys of a project's ``sandbox`` table (dotted, without ``sandbox.``) that would
    widen what the layers ``below`` it allow: left out in a folder that is not trusted. A
    setting that changes nothing is kept. ``below`` None (not known): every key that could
    widen anything is left out."""
    dropped = []
    for key, (widening, default) in _FLAGS.items():
        value = dotted_get(table, key)
        if value is widening and (below is None or _effective(below, key, default) is not widening):
            dropped.append(key)
    mode = table.get("mode")
    floor = "read-only" if below is None else _mode_of(below)
    if mode is not None and (mode not in MODES or _rank(mode) < _rank(floor)):
        dropped.append("mode")
    dropped += [key for key in sorted(_WIDENING_LISTS) if dotted_get(table, key)]
    return dropped


def _mode_of(table: Mapping[str, Any]) -> Mode:
    mode = table.get("mode")
    if mode in MODES:
        return mode  # type: ignore[no-any-return]
    return "workspace-write" if table.get("enabled") is True else "off"


def _rank(mode: str) -> int:
    return MODES.index(mode)


def _effective(table: Mapping[str, Any], key: str, default: bool) -> bool:
    value = dotted_get(table, key)
    return value if isinstance(value, bool) else default


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    *tables, leaf = key.split(".")
    for part in tables:
        table = table.setdefault(part, {})
    table[leaf] = value
