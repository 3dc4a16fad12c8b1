"""Settings: a pydantic schema, read from a user and a project TOML file, layered.

The user file is ``<user config dir>/config.toml`` (see :mod:`caliban.config.paths`), the project
file ``<project root>/.caliban/config.toml``. The project file overrides the user file key
by key; tables merge deeply. Unknown keys are warnings (with the closest valid key); bad
TOML and wrong types are :class:`ConfigError` naming the file, line and key.

Until the user trusts the project folder (:mod:`caliban.permissions.trust`), the project file
may only narrow: every key but those that narrow (deny and ask rules, a narrower mode, fewer
turns) and the model is left out
(:func:`caliban.permissions.trust.drop_widening_settings`) and :attr:`LoadedConfig.untrusted`
says so.
The user file is always trusted.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from caliban.config import paths
from caliban.errors import ConfigError

CONFIG_FILE = "config.toml"

__all__ = ["ConfigError", "LoadedConfig", "Settings", "load_config"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ProviderSettings(_Section):
    base_url: str | None = None
    """Endpoint to use instead of the provider's default (an OpenAI-compatible server, a proxy)."""
    api_key_env: str | None = None
    """Environment variable holding the API key (default ANTHROPIC_API_KEY / OPENAI_API_KEY)."""
    context_window: int | None = Field(default=None, ge=1_024)
    """Tokens the model can read, when caliban's guess (or the server's answer) is wrong."""


class ProvidersSettings(_Section):
    anthropic: ProviderSettings = Field(default_factory=ProviderSettings)
    """Settings for the Anthropic Messages API."""
    openai: ProviderSettings = Field(default_factory=ProviderSettings)
    """Settings for OpenAI or any OpenAI-compatible Chat Completions endpoint."""


class ToolsSettings(_Section):
    lazy_mcp: bool | Literal["auto"] = False
    """Keep MCP tool schemas off the wire until ToolSearch finds them: true, false or "auto"
    (lazy when MCP tool definitions would take over 10% of the context window)."""
    max_active_schemas: int = Field(default=24, ge=0)
    """Soft cap on MCP tools activated by lazy loading (least recently used are evicted)."""
    preactivate: int = Field(default=3, ge=0)
    """Before each prompt is sent, activate up to this many deferred MCP tools that the
    prompt most likely needs (ToolSearch's ranking, no model call); 0 turns it off."""
    wait_for_mcp: bool = False
    """``caliban -p`` waits before its first request for every MCP server whose tools are
    not known yet (none cached), each within its ``startup_timeout``; by default it waits
    only for ``lazy = false`` servers, at most 5 s, as Claude Code does."""
    search_model: str = Field(default="auto", min_length=1)
    """ToolSearch's semantic model: "auto" (all-MiniLM-L6-v2, shipped, once a catalog's
    embeddings are computed; the shipped static model until then), "static", "bm25" (none),
    or the path of a BERT sentence-transformers directory."""


PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]


class PermissionsSettings(_Section):
    mode: PermissionMode = "default"
    """default, acceptEdits, plan (read-only) or bypassPermissions (dangerous)."""
    allow: list[str] = Field(default_factory=list)
    """Rules that run without asking, e.g. "Bash(git status*)", "Edit(src/**)"."""
    ask: list[str] = Field(default_factory=list)
    """Rules that always ask first."""
    deny: list[str] = Field(default_factory=list)
    """Rules that never run. deny beats ask beats allow."""
    save_rules_in: Literal["claude-local", "caliban-project", "session"] = "claude-local"
    """Where "Yes, and don't ask again" for a command line is kept: Claude Code's
    .claude/settings.local.json, this project's .caliban/config.toml, or the session only."""

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        # A rule that does not parse is refused where it is written (`config set`) and where
        # it is read (the file and line), not when a session starts.
        from caliban.permissions.rules import Rule, RuleError

        for rule in rules:
            try:
                Rule.parse(rule)
            except RuleError as exc:
                raise ValueError(str(exc)) from None
        return rules


class SandboxNetworkSettings(_Section):
    """Claude Code's ``sandbox.network`` (the same keys and shapes)."""

    allowedDomains: list[str] = Field(default_factory=list)
    """Hosts sandboxed commands may reach through the proxy: ``example.com``, or
    ``*.example.com`` for its subdomains. ``WebFetch(domain:…)`` allow rules count too."""
    deniedDomains: list[str] = Field(default_factory=list)
    """Hosts never reached, even when allowed (``WebFetch(domain:…)`` deny rules too)."""
    allowUnixSockets: list[str] = Field(default_factory=list)
    """Unix sockets sandboxed commands may connect to (macOS only: on Linux a filter
    cannot tell one socket from another; see allowAllUnixSockets)."""
    allowAllUnixSockets: bool | None = None
    """Do not block unix sockets at all (the Docker socket is a way out of the sandbox)."""
    allowLocalBinding: bool | None = None
    """Let sandboxed commands listen on local ports (Landlock and macOS)."""


class SandboxFilesystemSettings(_Section):
    """Claude Code's ``sandbox.filesystem`` (the same keys and shapes)."""

    allowWrite: list[str] = Field(default_factory=list)
    """Folders sandboxed commands may write besides the project and ``--add-dir``."""
    denyWrite: list[str] = Field(default_factory=list)
    """Paths kept read-only inside the writable folders (besides the protected paths)."""
    denyRead: list[str] = Field(default_factory=list)
    """Paths sandboxed commands may not read (besides those Read deny rules name)."""
    allowRead: list[str] = Field(default_factory=list)
    """Paths readable again inside denyRead."""


SandboxMode = Literal["off", "read-only", "workspace-write"]


class SandboxSettings(_Section):
    """The OS sandbox under Bash commands, in Claude Code's ``sandbox`` keys (see
    docs/security.md); ``mode`` is caliban's, as Codex's ``--sandbox``."""

    enabled: bool | None = None
    """Run Bash commands in the OS sandbox (workspace-write)."""
    mode: SandboxMode | None = None
    """off, read-only (writes only to a private temporary folder) or workspace-write (the
    project, --add-dir folders and allowWrite too); beats ``enabled``."""
    failIfUnavailable: bool | None = None
    """Refuse to run commands when no sandbox works here, instead of running them unconfined."""
    autoAllowBashIfSandboxed: bool | None = None
    """Sandboxed Bash commands run without asking (deny and ask rules still apply); unset:
    true, except in a folder that is not trusted."""
    allowUnsandboxedCommands: bool | None = None
    """Let a command that failed in the sandbox be retried outside it (dangerouslyDisableSandbox),
    with the user's approval; default true."""
    excludedCommands: list[str] = Field(default_factory=list)
    """Commands that always run outside the sandbox, as Bash rule patterns (``docker:*``)."""
    network: SandboxNetworkSettings = Field(default_factory=SandboxNetworkSettings)
    """Where sandboxed commands may connect: nowhere, unless a domain is allowed."""
    filesystem: SandboxFilesystemSettings = Field(default_factory=SandboxFilesystemSettings)
    """Extra writable, read-only and unreadable paths."""


class ContextSettings(_Section):
    auto_compact_at: float = Field(default=0.85, ge=0, le=1)
    """Compact the conversation when the latest request read this share of the context
    window (0 turns automatic compaction off; /compact still works)."""


class Settings(_Section):
    provider: Literal["anthropic", "openai"] | None = None
    """Model provider; unset picks one from the API keys in the environment."""
    model: str | None = None
    """Model name; unset uses the provider's default."""
    model_effort: Literal["low", "medium", "high"] | None = None
    """How hard the model thinks: low, medium or high (Anthropic thinking, OpenAI
    reasoning_effort); unset sends neither."""
    max_turns: int = Field(default=100, ge=1)
    """Model requests allowed for one prompt before caliban stops."""
    providers: ProvidersSettings = Field(default_factory=ProvidersSettings)
    """Per-provider endpoints and keys."""
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    """Tool behaviour, including lazy MCP loading."""
    permissions: PermissionsSettings = Field(default_factory=PermissionsSettings)
    """What tools may do without asking."""
    context: ContextSettings = Field(default_factory=ContextSettings)
    """When long conversations are compacted."""
    hooks: dict[str, Any] = Field(default_factory=dict)
    """Commands run at points of a session, in Claude Code's format (see docs/hooks.md);
    a project file's hooks run only in a trusted folder."""
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    """The OS sandbox under Bash commands (Claude Code's ``sandbox`` keys)."""


# ---------------------------------------------------------------------------- key paths


def _model_for(key: str) -> tuple[type[BaseModel], str]:
    """The model owning a dotted key and the last segment; raises KeyError if unknown."""
    model: type[BaseModel] = Settings
    *tables, leaf = key.split(".")
    for part in tables:
        info = model.model_fields.get(part)
        if info is None or not _is_model(info.annotation):
            raise KeyError(key)
        model = info.annotation  # type: ignore[assignment]
    if leaf not in model.model_fields:
        raise KeyError(key)
    return model, leaf


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def all_keys(model: type[BaseModel] = Settings, prefix: str = "") -> Iterator[str]:
    """Every leaf key of the schema, dotted (``tools.lazy_mcp``)."""
    for name, info in model.model_fields.items():
        if _is_model(info.annotation):
            yield from all_keys(info.annotation, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            yield f"{prefix}{name}"


def suggest_key(key: str) -> str | None:
    candidates = list(all_keys())
    leaf_matches = [k for k in candidates if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    if leaf_matches:
        return leaf_matches[0]
    by_leaf = {k.rsplit(".", 1)[-1]: k for k in candidates}
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(by_leaf), n=1, cutoff=0.6)
    if close:
        return by_leaf[close[0]]
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.5)
    return close[0] if close else None


# ---------------------------------------------------------------------------- files


@dataclass(frozen=True, kw_only=True)
class ConfigFile:
    path: Path
    scope: Literal["user", "project"]
    text: str | None
    data: dict[str, Any]
    """What applies from this file (in an untrusted folder, without the ignored keys)."""
    ignored: tuple[str, ...] = ()
    """Keys set in the file but left out because the folder is not trusted."""


def user_config_path() -> Path:
    return paths.user_config_dir() / CONFIG_FILE


def project_config_path(cwd: Path) -> Path:
    return paths.project_config_dir(cwd) / CONFIG_FILE


def read_toml(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The text and parsed content of a TOML file; ``(None, {})`` when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {_toml_error_text(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


def _toml_error_text(exc: tomllib.TOMLDecodeError) -> str:
    msg = str(exc)
    match = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if match:
        reason = msg[: match.start()].strip()
        return f"line {match.group(1)}, column {match.group(2)}: {reason}"
    return msg


def find_key_line(text: str | None, key: str) -> int | None:
    """The 1-based line where dotted ``key`` is assigned in TOML ``text``, if it can be found."""
    if not text:
        return None
    *tables, leaf = key.split(".")
    table = ".".join(tables)
    current = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if header := re.fullmatch(r"\[\s*([^\[\]]+?)\s*\]\s*(#.*)?", line):
            current = re.sub(r"\s*\.\s*", ".", header.group(1)).replace('"', "")
            continue
        assign = re.match(r'([A-Za-z0-9_\-."\s]+?)\s*=', line)
        if not assign:
            continue
        name = re.sub(r"\s*\.\s*", ".", assign.group(1)).replace('"', "")
        full = f"{current}.{name}" if current else name
        if full == key or (not table and full == leaf and not current):
            return number
    return None


def _where(file: ConfigFile, key: str) -> str:
    line = find_key_line(file.text, key)
    return f"{file.path}:{line}" if line else str(file.path)


def _walk_unknown(data: Mapping[str, Any], model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, value in data.items():
        info = model.model_fields.get(name)
        if info is None:
            yield f"{prefix}{name}"
        elif _is_model(info.annotation) and isinstance(value, Mapping):
            yield from _walk_unknown(value, info.annotation, f"{prefix}{name}.")  # type: ignore[arg-type]


def _strip_keys(data: Mapping[str, Any], keys: list[str]) -> dict[str, Any]:
    result = _deep_copy(data)
    for key in keys:
        *tables, leaf = key.split(".")
        node: Any = result
        for part in tables:
            node = node.get(part, {})
        if isinstance(node, dict):
            node.pop(leaf, None)
    return result


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = _deep_copy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = _deep_copy(value) if isinstance(value, Mapping) else value
    return merged


def _validation_message(file: ConfigFile | None, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        key = ".".join(str(p) for p in error["loc"] if not isinstance(p, int) or True)
        key = re.sub(r"\.(bool|str|int|literal\[.*?\]|list\[.*?\])$", "", key)
        where = f"{_where(file, key)}: " if file else ""
        if error["type"] == "value_error":  # a validator's own message says it all
            lines.append(f"{where}{key}: {str(error['msg']).removeprefix('Value error, ')}")
            continue
        expected = _expected_type(key)
        got = error.get("input")
        lines.append(f"{where}{key}: {error['msg']}{expected} (got {got!r})")
    return "\n".join(lines)


def _expected_type(key: str) -> str:
    try:
        model, leaf = _model_for(key)
    except KeyError:
        return ""
    annotation = model.model_fields[leaf].annotation
    text = repr(annotation).replace("typing.", "").replace("NoneType", "None")
    text = text.replace("<class '", "").replace("'>", "")
    return f"; expected {text}"


JOINED_LISTS = ("allow", "ask", "deny")
"""``[permissions]`` lists that add up across files instead of the project's replacing the
user's, as Claude Code joins its settings layers' rules: a project's ``deny = []`` cannot
erase the user's deny rules."""


def _join_rule_lists(below: Mapping[str, Any], merged: dict[str, Any]) -> dict[str, Any]:
    """``merged`` with each :data:`JOINED_LISTS` list the union of ``below``'s and its own
    (``below``'s rules first, each rule once)."""
    before, after = below.get("permissions"), merged.get("permissions")
    if not isinstance(before, Mapping) or not isinstance(after, dict):
        return merged
    for key in JOINED_LISTS:
        old, new = before.get(key), after.get(key)
        if isinstance(old, list) and isinstance(new, list) and new is not old:
            after[key] = list(dict.fromkeys([*old, *new]))
    return merged


@dataclass(kw_only=True)
class LoadedConfig:
    """Effective settings, the files they came from, and the warnings raised reading them."""

    settings: Settings
    files: list[ConfigFile]
    warnings: list[str] = field(default_factory=list)
    untrusted: list[str] = field(default_factory=list)
    """One notice per project file whose widening keys were ignored (folder not trusted)."""

    def origin(self, key: str) -> str:
        """Which file set ``key`` (the project file wins), or ``default``."""
        for file in reversed(self.files):
            if _lookup(file.data, key) is not _MISSING:
                return str(file.path)
        return "default"


_MISSING = object()


def _lookup(data: Mapping[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _check_file(file: ConfigFile, warnings: list[str]) -> dict[str, Any]:
    unknown = list(_walk_unknown(file.data, Settings, ""))
    for key in unknown:
        hint = suggest_key(key)
        suffix = f" — did you mean {hint}?" if hint else ""
        warnings.append(f"{_where(file, key)}: unknown key '{key}'{suffix}")
    data = _strip_keys(file.data, unknown)
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_message(file, exc)) from None
    return data


def load_config(
    cwd: Path, *, overrides: Mapping[str, Any] | None = None, trusted: bool | None = None
) -> LoadedConfig:
    """Read, check and layer the user and project files (then ``overrides``, e.g. CLI flags).

    ``trusted`` says whether the project folder is trusted (default: ask
    :func:`caliban.permissions.trust.is_trusted`); if not, the project file's widening keys are
    ignored.
    Flags in ``overrides`` come from the user and always apply.
    """
    from caliban.permissions.trust import drop_widening_settings, is_trusted, untrusted_notice

    root = paths.project_root(cwd)
    if trusted is None:
        trusted = is_trusted(root)
    files = []
    for scope, path in (("user", user_config_path()), ("project", project_config_path(cwd))):
        text, data = read_toml(path)
        if text is not None:
            files.append(ConfigFile(path=path, scope=scope, text=text, data=data))  # type: ignore[arg-type]
    warnings: list[str] = []
    untrusted: list[str] = []
    merged: dict[str, Any] = {}
    for index, file in enumerate(files):
        data = _check_file(file, warnings)
        if file.scope == "project" and not trusted:
            defaults = Settings().model_dump(exclude={"hooks"})
            data, ignored = drop_widening_settings(data, below=deep_merge(defaults, merged))
            if ignored:
                files[index] = dataclasses.replace(file, data=data, ignored=ignored)
                untrusted.append(
                    untrusted_notice(f"ignored {', '.join(ignored)} in {file.path}", root)
                )
        merged = _join_rule_lists(merged, deep_merge(merged, data))
    if overrides:
        merged = deep_merge(merged, overrides)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_validation_message(None, exc)) from None
    return LoadedConfig(settings=settings, files=files, warnings=warnings, untrusted=untrusted)


def get_value(settings: Settings, key: str) -> Any:
    try:
        _model_for(key)
    except KeyError:
        raise ConfigError(_unknown_key_message(key)) from None
    node: Any = settings
    for part in key.split("."):
        node = getattr(node, part)
    return node.model_dump() if isinstance(node, BaseModel) else node


def _unknown_key_message(key: str) -> str:
    hint = suggest_key(key)
    suffix = f" — did you mean {hint}?" if hint else ""
    return f"unknown config key '{key}'{suffix} (see `caliban config list`)"


def parse_value(raw: str) -> Any:
    """A CLI value as TOML (``true``, ``24``, ``"x"``, ``["a","b"]``), else the plain string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return raw


# ---------------------------------------------------------------------------- writing


def set_value(path: Path, key: str, value: Any) -> None:
    """Set ``key`` in the file at ``path`` after validating; keeps other keys and comments."""
    _edit(path, key, value)


def unset_value(path: Path, key: str) -> bool:
    """Remove ``key`` from the file; returns False when it was not set there."""
    _, data = read_toml(path)
    if _lookup(data, key) is _MISSING:
        return False
    _edit(path, key, _MISSING)
    return True


def _edit(path: Path, key: str, value: Any) -> None:
    """Change one key of the file, in place (tomlkit keeps comments and layout), after
    checking that the result is valid; atomic."""
    from caliban.config.toml_edit import edited, remove_key, set_key

    try:
        _model_for(key)
    except KeyError:
        raise ConfigError(_unknown_key_message(key)) from None
    with edited(path) as document:
        parts = key.split(".")
        if value is _MISSING:
            remove_key(document, parts)
        else:
            set_key(document, parts, value)
        expected = document.unwrap()
        known = _strip_keys(expected, list(_walk_unknown(expected, Settings, "")))
        try:
            Settings.model_validate(known)
        except ValidationError as exc:
            message = _validation_message(None, exc)
            raise ConfigError(f"not written: {message}") from None


def toml_value(value: Any) -> str:
    """``value`` written as a TOML value (``true``, ``"x"``, ``["a", "b"]``)."""
    from caliban.config.toml_edit import toml_value as render

    return render(value)


def flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
