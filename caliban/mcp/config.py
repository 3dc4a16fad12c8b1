"""MCP server configuration: ``mcp.toml`` (user and project) and a project's ``.mcp.json``.

One table per server::

    [server.github]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }

    [server.docs]
    url = "http://127.0.0.1:8931/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

Sources, lowest precedence first: the user ``mcp.toml``, the project's ``.mcp.json`` (Claude
Code's format), the project ``.caliban/mcp.toml``, the user's own servers for this project
(the ``local`` scope, Claude Code's default: a ``mcp.toml`` in the user's config directory,
keyed by the project root, that needs no trust), then each ``--mcp-config`` (a file or a JSON
string in ``.mcp.json``'s format; with ``--strict-mcp-config`` only those). A server defined in
a later source replaces the whole entry of the same name. A bad entry is reported (file, line,
server) and skipped; the other servers still load. Nothing here imports the MCP SDK.

Names in ``.mcp.json`` and ``--mcp-config`` are kept as Claude Code keeps them (``GitHub``, up
to 64 characters): the tools of server ``GitHub`` are ``mcp__GitHub__<tool>``. ``mcp.toml``
names are 1-32 lowercase characters. ``"alwaysLoad": true`` on a ``.mcp.json`` server is
``lazy = false``: its tools stay on the wire under lazy loading.

The project's servers start only in a trusted folder (:mod:`caliban.permissions.trust`): a cloned
repository's ``.mcp.json`` must not run a command on start-up. Until then they are listed
in :attr:`McpConfig.untrusted` and never in :attr:`McpConfig.servers`.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from caliban.config import paths
from caliban.config.settings import (
    ConfigError,
    find_key_line,
    read_toml,
)
from caliban.util.fsutil import atomic_write_text

MCP_FILE = "mcp.toml"
MCP_JSON = ".mcp.json"
JSON_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Server names as Claude Code accepts them (``GitHub``, ``notionApi``): kept verbatim."""
NAME_RE = JSON_NAME_RE
"""``mcp.toml`` takes the same names, so ``caliban mcp add`` takes what ``claude mcp add``
takes and tool names and permission rules (``mcp__notionApi__…``) stay the same."""
DEFAULT_STARTUP_TIMEOUT = 30.0
"""Seconds a server has to connect and list its tools unless ``MCP_TIMEOUT`` or its own
``startup_timeout`` says otherwise (a first ``npx -y`` downloads the package meanwhile)."""
DEFAULT_TOOL_TIMEOUT = 120.0
"""Seconds a tool call may take unless ``MCP_TOOL_TIMEOUT`` or ``tool_timeout`` says otherwise."""


def _seconds_from_env(variable: str, default: float) -> float:
    """Claude Code's ``MCP_TIMEOUT`` / ``MCP_TOOL_TIMEOUT``: milliseconds, a positive number;
    anything else keeps ``default``."""
    try:
        millis = float(os.environ.get(variable, ""))
    except ValueError:
        return default
    return millis / 1000 if math.isfinite(millis) and millis > 0 else default


def default_startup_timeout() -> float:
    return _seconds_from_env("MCP_TIMEOUT", DEFAULT_STARTUP_TIMEOUT)


def default_tool_timeout() -> float:
    return _seconds_from_env("MCP_TOOL_TIMEOUT", DEFAULT_TOOL_TIMEOUT)


DEFAULT_CONNECT_WINDOW = 5.0
"""Seconds ``caliban -p`` waits for the servers it waits for at all before its first request
(Claude Code's ``MCP_CONNECT_TIMEOUT_MS`` default)."""


def connect_window() -> float:
    return _seconds_from_env("MCP_CONNECT_TIMEOUT_MS", DEFAULT_CONNECT_WINDOW)


Transport = Literal["stdio", "http", "sse"]
Scope = Literal["user", "local", "project", "mcp.json", "flag"]
WriteScope = Literal["user", "local", "project"]


class OAuthEntry(BaseModel):
    """An HTTP server's ``oauth`` table: a client registered beforehand (Claude Code's
    ``oauth`` object in ``.mcp.json``, ``clientId`` and ``callbackPort``)."""

    model_config = ConfigDict(extra="forbid")

    client_id: str | None = Field(default=None, min_length=1, max_length=1000)
    """The client id the authorization server issued for caliban (``--client-id``): used
    instead of dynamic client registration."""
    callback_port: int | None = Field(default=None, ge=1, le=65535)
    """The fixed port of the login's callback, ``http://127.0.0.1:PORT/callback``
    (``--callback-port``), for a client whose redirect URI was registered with it."""


class ServerEntry(BaseModel):
    """One ``[server.NAME]`` table as written in ``mcp.toml``."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """Executable of a stdio server (looked up on PATH)."""
    args: list[str] = Field(default_factory=list)
    """Arguments of the stdio command."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for a stdio server (added to a minimal safe environment)."""
    cwd: str | None = None
    """Working directory of a stdio server; relative paths are relative to the project root
    (project files) or the home directory (user file)."""
    url: str | None = None
    """Endpoint of an HTTP server (streamable HTTP, or SSE with ``transport = "sse"``)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request to an HTTP server."""
    transport: Transport | None = None
    """stdio, http or sse; inferred from ``command`` / ``url`` when unset."""
    lazy: bool | None = None
    """false pins this server's tools on the wire when ``tools.lazy_mcp`` is on; true makes
    it lazy even when ``tools.lazy_mcp`` is off; unset follows ``tools.lazy_mcp``."""
    disabled: bool = False
    """true keeps the entry but does not start the server."""
    startup_timeout: float = Field(default_factory=default_startup_timeout, gt=0)
    """Seconds the server has to connect and list its tools."""
    tool_timeout: float = Field(default_factory=default_tool_timeout, gt=0)
    """Seconds one tool call may take before it fails with a timeout result."""
    sandbox: bool = False
    """true runs this stdio server in the OS sandbox (docs/sandbox.md): it writes only the
    project and a temporary folder and reaches only the allowed domains; where no sandbox
    works it does not start."""
    oauth: OAuthEntry | None = None
    """An HTTP server's OAuth client registered beforehand: ``{ client_id = "…",
    callback_port = 8080 }``."""

    @model_validator(mode="after")
    def _check_shape(self) -> ServerEntry:
        if self.command is None and self.url is None:
            raise ValueError("needs either `command` (a stdio server) or `url` (an HTTP server)")
        if self.command is not None and self.url is not None:
            raise ValueError("has both `command` and `url`; a server is either stdio or HTTP")
        if self.command is not None:
            if self.transport not in (None, "stdio"):
                raise ValueError(f"transport = {self.transport!r} needs `url`, not `command`")
            for key in ("headers", "oauth"):
                if getattr(self, key):
                    raise ValueError(
                        f"`{key}` applies to HTTP servers only (this one has `command`)"
                    )
        else:
            if self.transport == "stdio":
                raise ValueError('transport = "stdio" needs `command`, not `url`')
            for key in ("args", "env", "cwd", "sandbox"):
                if getattr(self, key):
                    raise ValueError(f"`{key}` applies to stdio servers only (this one has `url`)")
        return self


ENTRY_KEYS = tuple(ServerEntry.model_fields)


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """A validated server with environment variables expanded; what the client connects to."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    lazy: bool | None = None
    disabled: bool = False
    """Not started: by its entry (``disabled = true``), or switched off by the user for this
    project (``/mcp disable``, :func:`switched_off`)."""
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    sandbox: bool = False
    """A stdio server that runs in the OS sandbox (``sandbox = true``)."""
    oauth_client_id: str | None = None
    """A client id registered beforehand (``oauth.client_id``): no dynamic registration."""
    oauth_callback_port: int | None = None
    """The login callback's fixed port on 127.0.0.1 (``oauth.callback_port``)."""
    source: Path | None = None
    """The file this entry came from (None for servers built in code)."""
    scope: Scope | None = None
    line: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The entry as written, before ``${VAR}`` expansion (what ``caliban mcp get`` shows)."""
    overrides: tuple[Path, ...] = ()
    """Lower-precedence files that also define this name (replaced by this entry)."""

    @property
    def where(self) -> str:
        """``file:line`` (or just the file) this entry came from."""
        if self.source is None:
            return "(in code)"
        return f"{self.source}:{self.line}" if self.line else str(self.source)

    @property
    def target(self) -> str:
        """The command line or URL, for display."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


@dataclass(frozen=True, kw_only=True)
class McpConfig:
    """The servers that loaded, and what went wrong with the others."""

    servers: tuple[ServerConfig, ...] = ()
    problems: tuple[str, ...] = ()
    """Entries or files that could not be used (each names the file, line and server)."""
    warnings: tuple[str, ...] = ()
    """Things that loaded but look wrong (an unset ``${VAR}``, an ignored key)."""
    untrusted: tuple[ServerConfig, ...] = ()
    """Project servers that do not start because the folder is not trusted."""
    folder: Path | None = None
    """The project folder whose trust was checked."""

    def get(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)

    @property
    def untrusted_notices(self) -> tuple[str, ...]:
        """One line per project file whose servers were not started, saying how to trust."""
        from caliban.permissions.trust import untrusted_notice

        by_file: dict[Path | None, list[str]] = {}
        for server in self.untrusted:
            by_file.setdefault(server.source, []).append(server.name)
        return tuple(
            untrusted_notice(
                f"did not start MCP {'server' if len(names) == 1 else 'servers'} "
                f"{', '.join(names)} from {source}",
                self.folder or Path("."),
            )
            for source, names in by_file.items()
        )

    @property
    def enabled(self) -> tuple[ServerConfig, ...]:
        return tuple(s for s in self.servers if not s.disabled)


# ---------------------------------------------------------------------------- paths


def user_mcp_path() -> Path:
    return paths.user_config_dir() / MCP_FILE


def project_mcp_path(cwd: Path) -> Path:
    return paths.project_config_dir(cwd) / MCP_FILE


def mcp_json_path(cwd: Path) -> Path:
    return paths.project_root(cwd) / MCP_JSON


def local_mcp_path(cwd: Path) -> Path:
    """The user's private servers for the project of ``cwd`` (Claude Code's ``local`` scope):
    ``<config dir>/projects/<folder name>-<hash of its path>/mcp.toml``, outside the project,
    so it needs no trust and is never committed."""
    root = paths.project_root(cwd)
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", root.name)[:40] or "root"
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return paths.user_config_dir() / "projects" / f"{slug}-{digest}" / MCP_FILE


SWITCHED_OFF_KEY = "disabledMcpServers"
MAX_STATE_BYTES = 2**20


def local_state_path(cwd: Path) -> Path:
    """The user's MCP state for the project of ``cwd``, beside its local ``mcp.toml``:
    ``{"disabledMcpServers": [...]}``, as Claude Code keeps it under the project in
    ``~/.claude.json``."""
    return local_mcp_path(cwd).with_name("state.json")


def switched_off(cwd: Path) -> frozenset[str]:
    """Servers the user switched off for the project of ``cwd`` (``/mcp disable NAME``);
    a missing, oversized or unreadable file switches none off."""
    path = local_state_path(cwd)
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            return frozenset()
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return frozenset()
    names = data.get(SWITCHED_OFF_KEY) if isinstance(data, dict) else None
    if not isinstance(names, list):
        return frozenset()
    return frozenset(name for name in names if isinstance(name, str))


def switch_server(cwd: Path, name: str, *, on: bool) -> bool:
    """Switch server ``name`` on or off for the project of ``cwd`` (kept in
    :func:`local_state_path`, atomically); False when it already was."""
    before = switched_off(cwd)
    after = before - {name} if on else before | {name}
    if after == before:
        return False
    text = json.dumps({SWITCHED_OFF_KEY: sorted(after)}, indent=2) + "\n"
    atomic_write_text(local_state_path(cwd), text)
    return True


def scope_path(scope: WriteScope, cwd: Path) -> Path:
    match scope:
        case "user":
            return user_mcp_path()
        case "local":
            return local_mcp_path(cwd)
        case "project":
            return project_mcp_path(cwd)
        case _:
            assert_never(scope)


# ---------------------------------------------------------------------------- expansion

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_vars(text: str, environ: Mapping[str, str], missing: list[str]) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}``; unset variables without a default become
    ``""`` and their names are appended to ``missing``."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is not None and (value or default is None):
            return value
        if default is not None:
            return default
        missing.append(name)
        return ""

    return _VAR_RE.sub(substitute, text)


# ---------------------------------------------------------------------------- reading


def valid_name(name: str) -> bool:
    return bool(NAME_RE.fullmatch(name))


def _suggest_name(name: str) -> str:
    fixed = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:64]
    return fixed or "server"


def _name_problem(where: str, name: str) -> str:
    return (
        f"{where}: server name {name!r} is invalid: use 1-64 letters, digits, '_' "
        f"or '-' (e.g. {_suggest_name(name)!r})"
    )


def _toml_server_line(text: str | None, name: str) -> int | None:
    """The line of ``[server.NAME]`` (or of an assignment inside it)."""
    if not text:
        return None
    quoted = rf'(?:{re.escape(name)}|"{re.escape(name)}"|\'{re.escape(name)}\')'
    header = re.compile(rf"^\s*\[\s*server\s*\.\s*{quoted}\s*\]")
    inline = re.compile(rf"^\s*(?:server\s*\.\s*)?{quoted}\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if header.match(line) or inline.match(line):
            return number
    for key in ENTRY_KEYS:
        if line_no := find_key_line(text, f"server.{name}.{key}"):
            return line_no
    return None


def _json_server_line(text: str, name: str) -> int | None:
    needle = json.dumps(name)
    for number, line in enumerate(text.splitlines(), start=1):
        if re.search(rf"{re.escape(needle)}\s*:", line):
            return number
    return None


def _entry_errors(exc: ValidationError) -> list[tuple[str | None, str]]:
    """(key, message) for each validation error, with a suggestion for unknown keys."""
    out: list[tuple[str | None, str]] = []
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"]]
        key = loc[0] if loc else None
        if error["type"] == "extra_forbidden" and key is not None:
            close = difflib.get_close_matches(key, ENTRY_KEYS, n=1, cutoff=0.6)
            hint = f" — did you mean {close[0]!r}?" if close else ""
            out.append((key, f"unknown key {key!r}{hint} (valid: {', '.join(ENTRY_KEYS)})"))
        elif key is None:
            out.append((None, str(error["msg"]).removeprefix("Value error, ")))
        else:
            dotted = ".".join(loc)
            msg = str(error["msg"]).removeprefix("Value error, ")
            out.append((key, f"{dotted}: {msg} (got {error.get('input')!r})"))
    return out


@dataclass(frozen=True, kw_only=True)
class _Raw:
    name: str
    data: Any
    source: Path
    scope: Scope
    line: int | None
    key_line: Callable[[str], int | None]


def _read_toml_file(path: Path, scope: Scope, problems: list[str]) -> list[_Raw]:
    try:
        text, data = read_toml(path)
    except ConfigError as exc:
        problems.append(str(exc))
        return []
    if text is None:
        return []
    unknown = [k for k in data if k != "server"]
    for key in unknown:
        hint = " — did you mean 'server'?" if key in ("servers", "mcpServers", "mcp") else ""
        problems.append(
            f"{path}:{find_key_line(text, key) or 1}: unknown table {key!r}{hint} "
            "(servers go in [server.NAME] tables)"
        )
    servers = data.get("server", {})
    if not isinstance(servers, dict):
        problems.append(f"{path}: 'server' must be a table of [server.NAME] tables")
        return []
    return [
        _Raw(
            name=name,
            data=entry,
            source=path,
            scope=scope,
            line=_toml_server_line(text, name),
            key_line=_key_finder(text, name),
        )
        for name, entry in servers.items()
    ]


def _key_finder(text: str, name: str) -> Callable[[str], int | None]:
    return lambda key: find_key_line(text, f"server.{name}.{key}")


_JSON_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type"}
_JSON_OAUTH_KEYS = {"clientId": "client_id", "callbackPort": "callback_port"}


def _read_mcp_json(path: Path, problems: list[str], warnings: list[str]) -> list[_Raw]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot read: {exc}")
        return []
    return _mcp_json_entries(text, path, "mcp.json", problems, warnings)


def _read_flag_config(value: str, problems: list[str], warnings: list[str]) -> list[_Raw]:
    """One ``--mcp-config`` value: a JSON object, or the path of a file holding one.

    Raises :class:`ConfigError` when the file is missing or the JSON is invalid (a flag the
    user typed is not skipped quietly)."""
    if value.lstrip().startswith("{"):
        text, source = value, Path("--mcp-config")
    else:
        source = Path(value).expanduser()
        try:
            text = source.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"--mcp-config: MCP config file not found: {source}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--mcp-config: cannot read {source}: {exc}") from None
    flag_problems: list[str] = []
    raws = _mcp_json_entries(text, source, "flag", flag_problems, warnings)
    if flag_problems and not raws:
        raise ConfigError(f"--mcp-config: {'; '.join(flag_problems)}")
    problems.extend(flag_problems)
    return raws


def _mcp_json_entries(
    text: str, path: Path, scope: Scope, problems: list[str], warnings: list[str]
) -> list[_Raw]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"{path}: invalid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}")
        return []
    except RecursionError:
        problems.append(f"{path}: invalid JSON: nested too deeply")
        return []
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        problems.append(f'{path}: expected an object with "mcpServers": {{"NAME": {{...}}}}')
        return []
    raws = []
    for name, entry in servers.items():
        line = _json_server_line(text, name)
        where = f"{path}:{line}" if line else str(path)
        if not isinstance(entry, dict):
            problems.append(f"{where}: server {name!r}: expected an object")
            continue
        converted, ignored = entry_from_json(entry)
        for key in ignored:
            # Claude Code's format may grow keys caliban does not use; skip, do not fail.
            warnings.append(f"{where}: server {name!r}: ignoring key {key!r}")
        raws.append(
            _Raw(
                name=name,
                data=converted,
                source=path,
                scope=scope,
                line=line,
                key_line=lambda key: None,
            )
        )
    return raws


def entry_from_json(entry: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One server of Claude Code's JSON (``.mcp.json``, ``claude mcp add-json``) as an
    ``mcp.toml`` table, and the keys caliban does not use.

    ``type`` becomes ``transport`` (``streamable-http`` is ``http``); ``alwaysLoad: true``
    (Claude Code keeps the tools on the wire under tool search) is ``lazy = false``;
    ``oauth``'s ``clientId`` and ``callbackPort`` are ``oauth``'s ``client_id`` and
    ``callback_port``."""
    converted: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in entry.items():
        if key == "type":
            converted["transport"] = "http" if value == "streamable-http" else value
        elif key == "alwaysLoad":
            if value is True:
                converted["lazy"] = False
        elif key == "oauth" and isinstance(value, dict):
            oauth = {_JSON_OAUTH_KEYS[k]: v for k, v in value.items() if k in _JSON_OAUTH_KEYS}
            ignored += [f"oauth.{k}" for k in value if k not in _JSON_OAUTH_KEYS]
            if oauth:
                converted["oauth"] = oauth
        elif key in _JSON_KEYS:
            converted[key] = value
        else:
            ignored.append(key)
    return converted, ignored


def _resolve_cwd(raw_cwd: str, scope: Scope, cwd: Path) -> Path:
    path = Path(raw_cwd).expanduser()
    if path.is_absolute():
        return path
    base = Path.home() if scope == "user" else paths.project_root(cwd)
    return base / path


def _build(
    raw: _Raw, cwd: Path, environ: Mapping[str, str], problems: list[str], warnings: list[str]
) -> ServerConfig | None:
    where = f"{raw.source}:{raw.line}" if raw.line else str(raw.source)
    if not valid_name(raw.name):
        problems.append(_name_problem(where, raw.name))
        return None
    if not isinstance(raw.data, dict):
        problems.append(f"{where}: server {raw.name!r}: expected a table of settings")
        return None
    try:
        entry = ServerEntry.model_validate(raw.data)
    except ValidationError as exc:
        for key, message in _entry_errors(exc):
            line = raw.key_line(key) if key else None
            at = f"{raw.source}:{line}" if line else where
            problems.append(f"{at}: server {raw.name!r}: {message}")
        return None
    missing: list[str] = []

    def x(value: str) -> str:
        return expand_vars(value, environ, missing)

    transport: Transport
    if entry.transport is not None:
        transport = entry.transport
    elif entry.command is not None:
        transport = "stdio"
    else:
        transport = "sse" if (entry.url or "").rstrip("/").endswith("/sse") else "http"
    config = ServerConfig(
        name=raw.name,
        transport=transport,
        command=x(entry.command) if entry.command is not None else None,
        args=tuple(x(a) for a in entry.args),
        env={k: x(v) for k, v in entry.env.items()},
        cwd=_resolve_cwd(x(entry.cwd), raw.scope, cwd) if entry.cwd else None,
        url=x(entry.url) if entry.url is not None else None,
        headers={k: x(v) for k, v in entry.headers.items()},
        lazy=entry.lazy,
        disabled=entry.disabled,
        startup_timeout=entry.startup_timeout,
        tool_timeout=entry.tool_timeout,
        sandbox=entry.sandbox,
        oauth_client_id=x(entry.oauth.client_id) if entry.oauth and entry.oauth.client_id else None,
        oauth_callback_port=entry.oauth.callback_port if entry.oauth else None,
        source=raw.source,
        scope=raw.scope,
        line=raw.line,
        raw=raw.data,
    )
    for name in dict.fromkeys(missing) if not entry.disabled else ():
        warnings.append(
            f"{where}: server {raw.name!r}: environment variable ${{{name}}} is not set "
            "(expanded to an empty string)"
        )
    return config


def load_mcp_config(
    cwd: Path,
    *,
    environ: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
    strict: bool = False,
    mcp_json_allows: Callable[[str], bool] | None = None,
    trusted: bool | None = None,
) -> McpConfig:
    """Every configured server for a session started in ``cwd``.

    Never raises for a bad file or entry: those become :attr:`McpConfig.problems` and the
    valid servers still load. ``environ`` (default ``os.environ``) feeds ``${VAR}``.
    ``trusted`` (default: :func:`caliban.permissions.trust.is_trusted` of the project root) decides
    whether the project's servers are among :attr:`McpConfig.servers` or only listed in
    :attr:`McpConfig.untrusted`.
    ``extra`` are ``--mcp-config`` values (files or JSON strings; a missing file or invalid
    JSON raises :class:`ConfigError`); ``strict`` (``--strict-mcp-config``) uses only them.
    ``mcp_json_allows`` filters ``.mcp.json`` servers by name (Claude Code's
    ``disabledMcpjsonServers`` / ``enabledMcpjsonServers`` settings).
    """
    from caliban.permissions.trust import is_trusted

    folder = paths.project_root(cwd)
    if trusted is None:
        trusted = is_trusted(folder)
    env = os.environ if environ is None else environ
    problems: list[str] = []
    warnings: list[str] = []
    flagged = [raw for value in extra for raw in _read_flag_config(value, problems, warnings)]
    if strict:
        raws = flagged
    else:
        mcp_json = _read_mcp_json(mcp_json_path(cwd), problems, warnings)
        if mcp_json_allows is not None:
            mcp_json = [raw for raw in mcp_json if mcp_json_allows(raw.name)]
        raws = [
            *_read_toml_file(user_mcp_path(), "user", problems),
            *mcp_json,
            *_read_toml_file(project_mcp_path(cwd), "project", problems),
            *_read_toml_file(local_mcp_path(cwd), "local", problems),
            *flagged,
        ]
        if user_mcp_path() == project_mcp_path(cwd):  # running inside the config dir itself
            raws = [r for r in raws if r.scope != "project"]
    chosen: dict[str, ServerConfig] = {}
    untrusted: dict[str, ServerConfig] = {}
    off = switched_off(cwd)
    for raw in raws:
        if not trusted and raw.scope in ("project", "mcp.json"):  # flags are the user's own
            # Built only to be listed (nothing is expanded into a process or a request):
            # the user's own entry of the same name stays in force.
            if (config := _build(raw, cwd, {}, [], [])) is not None:
                untrusted[raw.name] = config
            continue
        config = _build(raw, cwd, env, problems, warnings)
        if config is None:
            # A broken override must not silently fall back to the entry it meant to replace.
            if raw.name in chosen:
                problems.append(
                    f"server {raw.name!r} from {chosen.pop(raw.name).where} is not used either: "
                    f"{raw.source} redefines it"
                )
            continue
        previous = chosen.pop(raw.name, None)
        if previous is not None and previous.source is not None:
            config = dataclasses.replace(config, overrides=(*previous.overrides, previous.source))
        if raw.name in off:
            config = dataclasses.replace(config, disabled=True)
        chosen[raw.name] = config
    ordered = sorted(chosen.values(), key=lambda s: _order_key(s, raws))
    return McpConfig(
        servers=tuple(ordered),
        problems=tuple(problems),
        warnings=tuple(warnings),
        untrusted=tuple(s for s in untrusted.values() if not s.disabled),
        folder=folder,
    )


def _order_key(server: ServerConfig, raws: Sequence[_Raw]) -> int:
    """Servers keep the position where their name first appeared (user file first)."""
    return next(i for i, raw in enumerate(raws) if raw.name == server.name)


# ---------------------------------------------------------------------------- writing


def add_server(path: Path, name: str, entry: Mapping[str, Any]) -> bool:
    """Add or replace ``[server.NAME]`` in the ``mcp.toml`` at ``path``, atomically.

    Comments, layout and other servers are kept (tomlkit edits the file in place). Returns
    True when an entry was replaced. Raises :class:`ConfigError` for an invalid name or
    entry, or a file whose ``server`` key is not a table.
    """
    from caliban.config.toml_edit import edited, set_key

    if not valid_name(name):
        raise ConfigError(_name_problem(str(path), name))
    try:
        ServerEntry.model_validate(dict(entry))
    except ValidationError as exc:
        raise ConfigError(
            "; ".join(f"server {name!r}: {msg}" for _, msg in _entry_errors(exc))
        ) from None
    with edited(path) as document:
        servers = document.get("server", {})
        if not isinstance(servers, Mapping):
            raise ConfigError(f"{path}: 'server' must be a table of [server.NAME] tables")
        replaced = name in servers
        set_key(document, ["server", name], dict(entry))
    return replaced


def remove_server(path: Path, name: str) -> bool:
    """Remove ``[server.NAME]`` from the file at ``path``; False when it was not there."""
    from caliban.config.toml_edit import edited, remove_key

    if not path.exists():
        return False
    with edited(path) as document:
        return remove_key(document, ["server", name])


def entry_from_options(
    *,
    command: Sequence[str] = (),
    url: str | None = None,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    transport: Transport | None = None,
) -> dict[str, Any]:
    """The ``mcp.toml`` table for ``caliban mcp add`` options (only the keys given)."""
    entry: dict[str, Any] = {}
    if command:
        entry["command"] = command[0]
        if command[1:]:
            entry["args"] = list(command[1:])
    if url is not None:
        entry["url"] = url
    if transport is not None:
        entry["transport"] = transport
    if env:
        entry["env"] = dict(env)
    if headers:
        entry["headers"] = dict(headers)
    return entry


__all__ = [
    "DEFAULT_STARTUP_TIMEOUT",
    "DEFAULT_TOOL_TIMEOUT",
    "McpConfig",
    "ServerConfig",
    "ServerEntry",
    "Transport",
    "add_server",
    "default_startup_timeout",
    "default_tool_timeout",
    "entry_from_json",
    "entry_from_options",
    "expand_vars",
    "load_mcp_config",
    "local_state_path",
    "mcp_json_path",
    "project_mcp_path",
    "remove_server",
    "scope_path",
    "switch_server",
    "switched_off",
    "user_mcp_path",
    "valid_name",
]
