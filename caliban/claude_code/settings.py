"""Claude Code's settings files, read so a Claude Code project works unchanged.

Files, lowest precedence first (Claude Code's order), then layered *under* caliban's own TOML:

1. ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json``): scope ``user``
2. ``<project root>/.claude/settings.json``: scope ``project``
3. ``<project root>/.claude/settings.local.json``: scope ``local``
4. ``--settings FILE|JSON``: scope ``flag``

``--setting-sources user,project,local`` limits which of the first three are read.

What is used: ``permissions.allow`` / ``ask`` / ``deny`` (rules from every layer are added
together, as Claude Code does), ``permissions.defaultMode``, ``permissions.additionalDirectories``,
``model`` and ``env`` (the last layer that sets a key wins), and ``disabledMcpjsonServers`` /
``enabledMcpjsonServers`` for ``.mcp.json``. caliban's ``config.toml`` files win over all of
these for the keys they set (``model``, ``permissions.mode``); their rules are added too. A file
that cannot be read (not valid JSON, not an object), or whose ``permissions``, ``deny`` or
``ask`` has the wrong type, is a config error: its deny rules would be lost, and permission
checks fail closed (Claude Code skips such a file). Other keys of the wrong type are skipped
with a warning. ``hooks`` are handed to :mod:`caliban.hooks` (an untrusted
folder's are left out, see below), ``statusLine`` to the REPL (the last layer's wins).

Trust: a cloned repository can carry ``.claude/settings.json`` *and* a
``.claude/settings.local.json``. In a folder that is not trusted (:mod:`caliban.permissions.trust`),
what they would widen or run is left out with one notice: ``permissions.allow``, a
``defaultMode`` that asks less (``acceptEdits``, ``bypassPermissions``), ``hooks``,
``statusLine`` (a command), ``additionalDirectories`` and ``env`` (which can redirect the
API key or change what an allowed command runs). What narrows
(``deny``, ``ask``, ``plan``/``dontAsk``, disabled servers) and ``model`` still apply. See
:func:`untrusted_filter`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from caliban.config.paths import claude_user_dir, project_root
from caliban.util.text import plural

__all__ = [
    "PROJECT_SCOPES",
    "SETTING_SOURCES",
    "ClaudeSettings",
    "SettingsLayer",
    "load_claude_settings",
    "untrusted_filter",
]

Scope = Literal["user", "project", "local", "flag"]
SETTING_SOURCES: tuple[Scope, ...] = ("user", "project", "local")
"""What ``--setting-sources`` may name."""
PROJECT_SCOPES: tuple[Scope, ...] = ("project", "local")
"""The layers a cloned repository can carry: trust-filtered in a folder not trusted."""

MODES = frozenset({"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"})
_RULE_KEYS = ("allow", "ask", "deny")


@dataclass(frozen=True, kw_only=True)
class SettingsLayer:
    """One settings file (or ``--settings`` value), parsed."""

    scope: Scope
    source: str
    """Where it came from, as shown in messages (a path, or ``--settings``)."""
    data: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class ClaudeSettings:
    """The Claude Code settings layers of a session, combined."""

    layers: tuple[SettingsLayer, ...] = ()
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    default_mode: str | None = None
    model: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    additional_directories: tuple[str, ...] = ()
    disabled_mcpjson_servers: frozenset[str] = frozenset()
    enabled_mcpjson_servers: frozenset[str] | None = None
    """When set, only these ``.mcp.json`` servers start."""
    hooks: tuple[tuple[str, object], ...] = ()
    """``(source, hooks table)`` of every layer that has one, lowest first (already trust-
    filtered: an untrusted folder's project and local layers have none)."""
    status_line: Mapping[str, Any] | None = None
    """``statusLine``: the REPL's status command (already trust-filtered, like hooks)."""
    disable_all_hooks: bool = False
    """``disableAllHooks: true`` in a layer that may say so: no hook runs, caliban's own
    included (scripts set it with ``--settings`` to run in isolation)."""
    warnings: tuple[str, ...] = ()
    unusable: tuple[str, ...] = ()
    """Files, or their permission keys, that could not be read: the deny and ask rules they
    may hold are unknown (:func:`load_claude_settings` refuses to go on)."""

    def allows_mcpjson_server(self, name: str) -> bool:
        """Whether the ``.mcp.json`` server ``name`` may start."""
        if name in self.disabled_mcpjson_servers:
            return False
        return self.enabled_mcpjson_servers is None or name in self.enabled_mcpjson_servers


# ---------------------------------------------------------------------------- reading


def user_settings_path() -> Path:
    return claude_user_dir() / "settings.json"


def project_settings_paths(cwd: Path) -> tuple[Path, Path]:
    """``.claude/settings.json`` and ``.claude/settings.local.json`` of the project."""
    directory = project_root(cwd) / ".claude"
    return directory / "settings.json", directory / "settings.local.json"


def _read_json(path: Path, unusable: list[str]) -> Mapping[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        unusable.append(f"{path}: cannot read: {exc}")
        return None
    return _parse(text, str(path), unusable)


def _parse(text: str, source: str, unusable: list[str]) -> Mapping[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        unusable.append(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        )
        return None
    except RecursionError:
        unusable.append(f"{source}: nested too deeply to read")
        return None
    if not isinstance(data, dict):
        unusable.append(f"{source}: expected a JSON object")
        return None
    return data


def read_layers(
    cwd: Path,
    *,
    sources: Iterable[str] = SETTING_SOURCES,
    extra: str | None = None,
) -> tuple[list[SettingsLayer], list[str]]:
    """The settings layers to use, lowest precedence first, and the files that could not
    be read (``"/p/.claude/settings.json: not valid JSON (line 3, column 5: …)"``).

    ``extra`` is ``--settings``: a file path or a JSON object. A missing file is an error
    (:class:`ValueError`), as in Claude Code.
    """
    wanted = set(sources)
    unusable: list[str] = []
    project, local = project_settings_paths(cwd)
    candidates: list[tuple[Scope, Path]] = [
        ("user", user_settings_path()),
        ("project", project),
        ("local", local),
    ]
    layers: list[SettingsLayer] = []
    for scope, path in candidates:
        if scope not in wanted:
            continue
        if (data := _read_json(path, unusable)) is not None:
            layers.append(SettingsLayer(scope=scope, source=str(path), data=data))
    if extra is not None:
        data = _flag_settings(extra, unusable)
        if data is not None:
            layers.append(SettingsLayer(scope="flag", source="--settings", data=data))
    return layers, unusable


def _flag_settings(value: str, unusable: list[str]) -> Mapping[str, Any] | None:
    if value.lstrip().startswith("{"):
        return _parse(value, "--settings", unusable)
    path = Path(value).expanduser()
    if not path.is_file():
        raise ValueError(f"--settings: file not found: {path}")
    return _read_json(path, unusable)


# ---------------------------------------------------------------------------- trust


def untrusted_filter(layer: SettingsLayer) -> tuple[SettingsLayer, tuple[str, ...]]:
    """``layer`` without what would widen permissions or run code, and what was left out
    (``("2 permissions.allow entries", "hooks")``; empty when nothing was).

    Used for the ``project`` and ``local`` layers of a folder that is not trusted. The keys
    caliban's own settings share (allow rules, the mode, hooks) go through the one filter for
    every project layer, :func:`caliban.permissions.trust.drop_widening_settings`; ``env`` and
    ``permissions.additionalDirectories`` exist only here and are dropped too (``env`` could
    point the provider at another server).
    """
    from caliban.permissions.trust import drop_widening_settings

    data = dict(layer.data)
    permissions = data.get("permissions")
    permissions = dict(permissions) if isinstance(permissions, Mapping) else {}
    mode = permissions.get("defaultMode")
    shared = {
        "permissions": {
            **({"allow": permissions["allow"]} if "allow" in permissions else {}),
            # dontAsk denies what would ask, so it is never wider; unknown modes count as wider
            **({"mode": mode} if mode not in (None, "dontAsk") else {}),
        },
        **({"hooks": data["hooks"]} if "hooks" in data else {}),
        **({"sandbox": data["sandbox"]} if isinstance(data.get("sandbox"), Mapping) else {}),
    }
    narrowed, gated = drop_widening_settings(shared)
    dropped: list[str] = []
    if "permissions.allow" in gated:
        allow = permissions.pop("allow")
        count = len(allow) if isinstance(allow, list) else 1
        dropped.append(plural(count, "permissions.allow entry", "permissions.allow entries"))
    if "permissions.mode" in gated:
        del permissions["defaultMode"]
        dropped.append(f"permissions.defaultMode {mode!r}")
    if "hooks" in gated:
        del data["hooks"]
        dropped.append("hooks")
    if sandbox_keys := [key for key in gated if key.startswith("sandbox.")]:
        data["sandbox"] = narrowed["sandbox"]
        dropped += sandbox_keys
    if data.pop("statusLine", None) is not None:
        dropped.append("statusLine")
    if permissions.pop("additionalDirectories", None):
        dropped.append("permissions.additionalDirectories")
    if "permissions" in data:
        data["permissions"] = permissions
    env = data.pop("env", None)
    if isinstance(env, Mapping) and env:
        dropped.append(f"env ({', '.join(sorted(map(str, env)))})")
    if not dropped:
        return layer, ()
    return SettingsLayer(scope=layer.scope, source=layer.source, data=data), tuple(dropped)


# ---------------------------------------------------------------------------- combining


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def combine(
    layers: Sequence[SettingsLayer],
    warnings: Sequence[str] = (),
    unusable: Sequence[str] = (),
) -> ClaudeSettings:
    """Layers (lowest first) as one :class:`ClaudeSettings`. Ill-typed keys warn and are
    skipped, except where skipping could drop a deny or ask rule: those go to ``unusable``."""
    notes = list(warnings)
    broken = list(unusable)
    rules: dict[str, list[str]] = {key: [] for key in _RULE_KEYS}
    directories: list[str] = []
    env: dict[str, str] = {}
    mode: str | None = None
    model: str | None = None
    disabled: set[str] = set()
    enabled: set[str] | None = None
    hooks: list[tuple[str, object]] = []
    status_line: Mapping[str, Any] | None = None

    for layer in layers:

        def bad(key: str, expected: str, layer: SettingsLayer = layer) -> None:
            notes.append(f"{layer.source}: {key} should be {expected}; ignored")

        data = layer.data
        permissions = data.get("permissions", {})
        if not isinstance(permissions, Mapping):
            broken.append(f"{layer.source}: permissions should be an object")
            permissions = {}
        for key in _RULE_KEYS:
            if key in permissions:
                if (values := _strings(permissions[key])) is not None:
                    rules[key] += values
                elif key == "allow":  # skipping allow rules only narrows
                    bad(f"permissions.{key}", "a list of rules")
                else:
                    broken.append(f"{layer.source}: permissions.{key} should be a list of rules")
        if "defaultMode" in permissions:
            if permissions["defaultMode"] in MODES:
                mode = permissions["defaultMode"]
            else:
                bad("permissions.defaultMode", f"one of {', '.join(sorted(MODES))}")
        if "additionalDirectories" in permissions:
            if (values := _strings(permissions["additionalDirectories"])) is None:
                bad("permissions.additionalDirectories", "a list of paths")
            else:
                directories += values
        if "model" in data:
            if isinstance(data["model"], str) and data["model"].strip():
                model = data["model"].strip()
            else:
                bad("model", "a model name")
        if "env" in data:
            values_env = data["env"]
            if isinstance(values_env, Mapping) and all(
                isinstance(v, str | int | float | bool) for v in values_env.values()
            ):
                env.update({str(k): _env_value(v) for k, v in values_env.items()})
            else:
                bad("env", "an object of strings")
        if "disabledMcpjsonServers" in data:
            if (values := _strings(data["disabledMcpjsonServers"])) is None:
                bad("disabledMcpjsonServers", "a list of server names")
            else:
                disabled.update(values)
        if "enabledMcpjsonServers" in data:
            if (values := _strings(data["enabledMcpjsonServers"])) is None:
                bad("enabledMcpjsonServers", "a list of server names")
            else:
                enabled = (enabled or set()) | set(values)
        if "hooks" in data:
            hooks.append((layer.source, data["hooks"]))
        if "statusLine" in data:
            if isinstance(data["statusLine"], Mapping):
                status_line = data["statusLine"]
            else:
                bad("statusLine", 'an object ({"type": "command", "command": …})')
    return ClaudeSettings(
        layers=tuple(layers),
        allow=tuple(dict.fromkeys(rules["allow"])),
        ask=tuple(dict.fromkeys(rules["ask"])),
        deny=tuple(dict.fromkeys(rules["deny"])),
        default_mode=mode,
        model=model,
        env=env,
        additional_directories=tuple(dict.fromkeys(directories)),
        disabled_mcpjson_servers=frozenset(disabled),
        enabled_mcpjson_servers=frozenset(enabled) if enabled is not None else None,
        hooks=tuple(hooks),
        status_line=status_line,
        warnings=tuple(notes),
        unusable=tuple(broken),
    )


def _env_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load_claude_settings(
    cwd: Path,
    *,
    sources: Iterable[str] = SETTING_SOURCES,
    extra: str | None = None,
    trusted: bool,
) -> ClaudeSettings:
    """Read, trust-filter and combine the Claude Code settings of a session in ``cwd``.

    ``trusted`` says whether the project folder is trusted; when it is not, the ``project``
    and ``local`` layers go through :func:`untrusted_filter`. Raises :class:`ValueError` for
    a ``--settings`` file that does not exist, and :class:`~caliban.errors.ConfigError` for
    one that cannot be read (its deny rules would be lost).
    """
    from caliban.errors import ConfigError
    from caliban.permissions.trust import untrusted_notice

    layers, unusable = read_layers(cwd, sources=sources, extra=extra)
    warnings: list[str] = []
    if not trusted:
        filtered = []
        for layer in layers:
            if layer.scope in PROJECT_SCOPES:
                layer, dropped = untrusted_filter(layer)
                if dropped:
                    what = f"ignored {', '.join(dropped)} in {layer.source}"
                    warnings.append(
                        untrusted_notice(
                            f"{what} (deny and ask rules still apply)", project_root(cwd)
                        )
                    )
            filtered.append(layer)
        layers = filtered
    combined = combine(layers, warnings, unusable)
    if combined.unusable:
        raise ConfigError(
            "\n".join(combined.unusable)
            + "\nThe deny and ask rules there cannot be applied, so caliban does not start: fix "
            "the file, or leave its layer out with --setting-sources (user, project, local)."
        )
    # Turning hooks off removes a user's guards: only the user's own layers may, and a
    # project's only in a trusted folder (the filter above does not know this key).
    disable = any(
        layer.data.get("disableAllHooks") is True
        for layer in layers
        if trusted or layer.scope not in PROJECT_SCOPES
    )
    return dataclasses.replace(combined, disable_all_hooks=disable) if disable else combined
