"""``caliban mcp …``: list, add, remove and inspect MCP servers.

Imported with the typer app (:mod:`caliban.cli.app`), so it imports neither asyncio, the MCP SDK
nor the config machinery at module level; each command imports what it needs when it runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from caliban.cli.output import err, out

if TYPE_CHECKING:
    from caliban.mcp.client import ServerStatus
    from caliban.mcp.config import McpConfig, ServerConfig
    from caliban.mcp.status import StatusRow
    from caliban.mcp.tools import McpTool

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2

mcp_app = typer.Typer(
    help="Manage MCP servers (mcp.toml, and a project's .mcp.json).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ScopeOption = Annotated[
    Literal["user", "project", "local"] | None,
    typer.Option(
        "--scope",
        "-s",
        metavar="SCOPE",
        help="local (the default, as in Claude Code: yours, for this project only; no trust "
        "needed), project (.caliban/mcp.toml, shared) or user (~/.config/caliban/mcp.toml).",
    ),
]


def _write_scope(
    scope: Literal["user", "project", "local"] | None,
) -> Literal["user", "project", "local"]:
    """Without ``--scope``, Claude Code's default: ``local``."""
    return scope or "local"


# ---------------------------------------------------------------------------- helpers


def _load(*, editing: bool = False) -> McpConfig:
    """The configured servers; ``editing`` (add, remove, get: nothing starts) sees the
    project's servers even in a folder that is not trusted."""
    from caliban.mcp.config import load_mcp_config

    config = load_mcp_config(Path.cwd(), trusted=True if editing else None)
    for problem in config.problems:
        err(f"caliban: mcp: error: {problem}")
    for warning in config.warnings:
        err(f"caliban: mcp: warning: {warning}")
    return config


def _require(config: McpConfig, name: str) -> ServerConfig:
    server = config.get(name)
    if server is None:
        held = next((s for s in config.untrusted if s.name == name), None)
        if held is not None:
            from caliban.permissions.trust import untrusted_notice

            what = f"MCP server {name!r} from {held.where} does not start"
            err(f"caliban: {untrusted_notice(what, config.folder or Path.cwd())}")
            raise typer.Exit(EXIT_NOT_FOUND)
        known = ", ".join(s.name for s in config.servers) or "none"
        err(f"caliban: no MCP server named {name!r} (configured: {known})")
        raise typer.Exit(EXIT_NOT_FOUND)
    return server


def _trusted() -> bool:
    from caliban.config.paths import project_root
    from caliban.permissions.trust import is_trusted

    return is_trusted(project_root(Path.cwd()))


def _search_model() -> str:
    """``tools.search_model`` of the session caliban would start here."""
    from caliban.config.settings import load_config

    return load_config(Path.cwd()).settings.tools.search_model


def _connect(servers: list[ServerConfig]) -> tuple[list[ServerStatus], list[McpTool]]:
    """Start ``servers``, wait for them, and return their statuses and the tools the connected
    ones listed (which refresh the user's tool-list cache)."""
    from caliban.exec import run_main

    return run_main(_connect_async(servers))


async def _connect_async(
    servers: list[ServerConfig],
) -> tuple[list[ServerStatus], list[McpTool]]:
    from caliban.mcp.catalog_cache import user_cache
    from caliban.mcp.client import McpManager

    manager = McpManager(servers, catalog_cache=user_cache())
    manager.on_warning(lambda text: err(f"caliban: warning: {text}"))
    try:
        manager.start()
        limit = max((s.startup_timeout for s in servers), default=0) + 1
        statuses = await manager.wait_ready(timeout=limit)
        connected = {s.name for s in statuses if s.state == "connected"}
        return statuses, [t for t in manager.tools() if t.server in connected]
    finally:
        await manager.aclose()


def _pairs(values: list[str] | None, sep: str, what: str) -> dict[str, str]:
    result = {}
    for value in values or []:
        key, found, val = value.partition(sep)
        if not found or not key.strip():
            err(f"caliban: {what} must look like KEY{sep}VALUE, got {value!r}")
            raise typer.Exit(EXIT_USAGE)
        result[key.strip()] = val.strip() if sep == ":" else val
    return result


# ---------------------------------------------------------------------------- commands


@mcp_app.command("list")
def mcp_list() -> None:
    """Connect to every configured server (concurrently) and show its status and tools."""
    config = _load()
    for notice in config.untrusted_notices:
        err(f"caliban: warning: {notice}")
    if not config.servers and not config.untrusted:
        out("No MCP servers configured. Add one with `caliban mcp add NAME -- COMMAND [ARGS]`")
        out("or `caliban mcp add NAME --url URL` (see docs/mcp.md).")
        return
    statuses, _ = _connect(list(config.servers)) if config.servers else ([], [])
    from caliban.mcp.status import format_rows, status_rows

    for text in format_rows(status_rows(statuses) + _untrusted_rows(config)):
        out(text)


def _format_rows(statuses: list[ServerStatus]) -> list[str]:
    from caliban.mcp.status import format_rows, status_rows

    return format_rows(status_rows(statuses))


def _untrusted_rows(config: McpConfig) -> list[StatusRow]:
    from caliban.mcp.status import StatusRow

    return [
        StatusRow(
            name=server.name,
            transport=server.transport,
            state="not trusted",
            tools=0,
            chars=0,
            tokens=0,
            detail=(f"not started: folder not trusted ({server.where})",),
        )
        for server in config.untrusted
    ]


@mcp_app.command("add")
def mcp_add(
    name: Annotated[str, typer.Argument(help="Server name: 1-64 letters, digits, '_' and '-'.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(metavar="[-- COMMAND [ARGS]...]", help="How to start a stdio server."),
    ] = None,
    url: Annotated[
        str | None, typer.Option("--url", metavar="URL", help="Endpoint of an HTTP server.")
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", metavar="K:V", help="HTTP header (repeatable)."),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", metavar="K=V", help="Environment variable (repeatable)."),
    ] = None,
    transport: Annotated[
        Literal["stdio", "http", "sse"] | None,
        typer.Option(
            "--transport",
            "-t",
            metavar="KIND",
            help="stdio (with a command), http (default with a URL) or sse.",
        ),
    ] = None,
    client_id: Annotated[
        str | None,
        typer.Option(
            "--client-id", metavar="ID", help="OAuth client id registered beforehand (HTTP)."
        ),
    ] = None,
    client_secret: Annotated[
        bool,
        typer.Option(
            "--client-secret",
            help="The client's secret, from MCP_CLIENT_SECRET or asked (kept with its tokens).",
        ),
    ] = False,
    callback_port: Annotated[
        int | None,
        typer.Option(
            "--callback-port",
            metavar="PORT",
            min=1,
            max=65535,
            help="Fixed port of the OAuth login's callback on 127.0.0.1 (HTTP).",
        ),
    ] = None,
    scope: ScopeOption = None,
) -> None:
    """Add a server for you in this project (--scope project: .caliban/mcp.toml, shared;
    --scope user: every project).

    stdio: caliban mcp add github -e GITHUB_TOKEN='${GITHUB_TOKEN}' -- npx -y PACKAGE

    HTTP:  caliban mcp add docs --url http://127.0.0.1:8931/mcp -H 'Authorization: Bearer ${T}'
    """
    from caliban.mcp.config import entry_from_options

    if transport == "stdio":
        if url is not None:
            err("caliban: --transport stdio takes a command, not --url")
            raise typer.Exit(EXIT_USAGE)
        transport = None  # a command is a stdio server; mcp.toml need not say so
    if url is None and command and len(command) == 1 and "://" in command[0]:
        # Claude Code's spelling: `claude mcp add --transport http NAME URL`.
        url, command = command[0], None
    if bool(command) == bool(url):
        err("caliban: give exactly one of `-- COMMAND [ARGS]` (stdio) or `--url URL` (HTTP)")
        raise typer.Exit(EXIT_USAGE)
    if command and (header or transport):
        err("caliban: --header and --transport apply to --url servers only")
        raise typer.Exit(EXIT_USAGE)
    if url and env:
        err("caliban: --env applies to stdio servers only")
        raise typer.Exit(EXIT_USAGE)
    if command and (client_id or callback_port):
        err("caliban: --client-id and --callback-port apply to --url servers only")
        raise typer.Exit(EXIT_USAGE)
    if client_secret and not client_id:
        err("caliban: --client-secret needs --client-id")
        raise typer.Exit(EXIT_USAGE)
    secret = _client_secret() if client_secret else None
    entry = entry_from_options(
        command=command or [],
        url=url,
        env=_pairs(env, "=", "--env"),
        headers=_pairs(header, ":", "--header"),
        transport=transport,
    )
    oauth = {"client_id": client_id, "callback_port": callback_port}
    if oauth := {key: value for key, value in oauth.items() if value is not None}:
        entry["oauth"] = oauth
    _add(name, entry, scope)
    if secret is not None:
        from caliban.mcp.auth import TokenStore
        from caliban.mcp.config import load_mcp_config

        server = _require(load_mcp_config(Path.cwd(), trusted=True), name)
        store = TokenStore(server)
        store.set_client_secret(secret)
        err(f"The client secret is in {store.path} (readable by you only).")


def _client_secret() -> str:
    """``--client-secret``: ``MCP_CLIENT_SECRET`` (Claude Code's variable), else asked
    without echo; never written to a configuration file."""
    import getpass

    secret = os.environ.get("MCP_CLIENT_SECRET", "")
    if not secret and sys.stdin.isatty():
        secret = getpass.getpass("OAuth client secret: ")
    if not secret:
        err("caliban: --client-secret: set MCP_CLIENT_SECRET or run it in a terminal")
        raise typer.Exit(EXIT_USAGE)
    return secret


def _add(
    name: str, entry: dict[str, Any], scope: Literal["user", "project", "local"] | None
) -> None:
    from caliban.mcp.config import add_server, load_mcp_config, scope_path

    cwd = Path.cwd()
    path = scope_path(_write_scope(scope), cwd)
    replaced = add_server(path, name, entry)
    kind = entry.get("transport") or ("stdio" if "command" in entry else "http")
    err(f"{'Replaced' if replaced else 'Added'} {kind} server {name!r} in {path}")
    effective = load_mcp_config(cwd, trusted=True).get(name)
    if effective is not None and effective.source != path:
        err(f"note: {effective.where} also defines {name!r} and takes precedence")


@mcp_app.command("add-json")
def mcp_add_json(
    name: Annotated[str, typer.Argument(help="Server name.")],
    config: Annotated[
        str, typer.Argument(metavar="JSON", help='One server as in .mcp.json: {"command": …}.')
    ],
    scope: ScopeOption = None,
) -> None:
    """Add a server given as Claude Code's JSON (`claude mcp add-json NAME JSON`).

    caliban mcp add-json github '{"type":"http","url":"https://…","headers":{…}}'
    """
    import json

    try:
        data = json.loads(config)
    except json.JSONDecodeError as exc:
        err(f"caliban: invalid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}")
        raise typer.Exit(EXIT_USAGE) from None
    if not isinstance(data, dict):
        err('caliban: expected one server as a JSON object, e.g. {"command": "npx", "args": [...]}')
        raise typer.Exit(EXIT_USAGE)
    from caliban.mcp.config import entry_from_json

    entry, ignored = entry_from_json(data)
    for key in ignored:
        err(f"caliban: warning: ignoring key {key!r} (caliban does not use it)")
    _add(name, entry, scope)


@mcp_app.command("remove")
def mcp_remove(
    name: Annotated[str, typer.Argument(help="Server name.")],
    scope: ScopeOption = None,
) -> None:
    """Remove a server from the file that defines it (or from the --scope file)."""
    from caliban.mcp.config import load_mcp_config, remove_server, scope_path

    cwd = Path.cwd()
    if scope is not None:
        path = scope_path(_write_scope(scope), cwd)
    else:
        server = load_mcp_config(cwd, trusted=True).get(name)
        if server is None or server.source is None:
            err(f"caliban: no MCP server named {name!r} is configured")
            raise typer.Exit(EXIT_NOT_FOUND)
        if server.scope == "mcp.json":
            err(
                f"caliban: {name!r} comes from {server.source}, which caliban does not edit; "
                f"remove it there, or turn it off with [server.{name}] disabled = true in "
                ".caliban/mcp.toml"
            )
            raise typer.Exit(EXIT_NOT_FOUND)
        path = server.source
    if not remove_server(path, name):
        err(f"caliban: {name!r} is not defined in {path}")
        raise typer.Exit(EXIT_NOT_FOUND)
    err(f"Removed {name!r} from {path}")
    remaining = load_mcp_config(cwd, trusted=True).get(name)
    if remaining is not None:
        err(f"note: {remaining.where} still defines {name!r}")


@mcp_app.command("get")
def mcp_get(name: Annotated[str, typer.Argument(help="Server name.")]) -> None:
    """Show a server's configuration (as written, ${VAR}s unexpanded) and where it comes from."""
    from caliban.mcp.client import log_path
    from caliban.mcp.config import default_startup_timeout, default_tool_timeout

    server = _require(_load(editing=True), name)
    raw = server.raw
    out(server.name)
    out(f"  source:    {server.where} ({server.scope})")
    if server.scope in ("project", "mcp.json") and not _trusted():
        out("  trusted:   no (it does not start until you run `caliban trust`)")
    for path in server.overrides:
        out(f"  overrides: {path}")
    out(f"  transport: {server.transport}")
    if server.transport == "stdio":
        words = [str(raw.get("command", "")), *map(str, raw.get("args", []))]
        out(f"  command:   {' '.join(words)}")
        for key, value in dict(raw.get("env", {})).items():
            out(f"  env:       {key}={value}")
        if raw.get("cwd"):
            out(f"  cwd:       {raw['cwd']} -> {server.cwd}")
    else:
        out(f"  url:       {raw.get('url', '')}")
        for key, value in dict(raw.get("headers", {})).items():
            out(f"  header:    {key}: {value}")
        for key, value in dict(raw.get("oauth", {})).items():
            out(f"  oauth:     {key} = {value}")
    lazy = {
        None: "follows tools.lazy_mcp",
        True: "true (always lazy)",
        False: "false (pinned eager)",
    }
    out(f"  lazy:      {lazy[server.lazy]}")
    if server.disabled:
        out("  disabled:  true")
    timeouts = (server.startup_timeout, server.tool_timeout)
    if timeouts != (default_startup_timeout(), default_tool_timeout()):
        out(f"  timeouts:  startup {timeouts[0]:g}s, tool calls {timeouts[1]:g}s")
    if server.transport == "stdio":
        out(f"  log:       {log_path(server.name)}")


@mcp_app.command("tools")
def mcp_tools(name: Annotated[str, typer.Argument(help="Server name.")]) -> None:
    """Connect to one server and list its tools with one-line descriptions."""
    server = _require(_load(), name)
    if server.disabled:
        err(f"caliban: {name!r} is disabled ({server.where}); set disabled = false to use it")
        raise typer.Exit(EXIT_NOT_FOUND)
    statuses, tools = _connect([server])
    [status] = statuses
    if status.state != "connected":
        for text in _format_rows(statuses):
            err(text)
        raise typer.Exit(EXIT_NOT_FOUND)
    listed = tools
    width = max((len(t.name) for t in listed), default=0)
    for tool in listed:
        summary = (tool.description.strip().splitlines() or [""])[0]
        marker = "  [read-only]" if tool.read_only else ""
        out(f"{tool.name.ljust(width)}  {summary}{marker}".rstrip())
    out(f"{len(listed)} tools, {status.tool_chars:,} characters, ≈{status.tool_tokens:,} tokens")


@mcp_app.command("login")
def mcp_login(name: Annotated[str, typer.Argument(help="Server name.")]) -> None:
    """Log in to an HTTP server that uses OAuth: opens your browser (BROWSER is honoured)
    and prints the URL; the token is kept for you only and refreshed when due."""
    import asyncio
    import threading
    import webbrowser

    from caliban.mcp.auth import LoginFailed, TokenStore, login, uses_oauth

    server = _require(_load(), name)
    if not uses_oauth(server):
        why = (
            "a stdio server"
            if server.transport == "stdio"
            else "it sends its own Authorization header"
        )
        err(f"caliban: {name!r} does not log in with OAuth ({why})")
        raise typer.Exit(EXIT_USAGE)

    def open_url(url: str) -> None:
        # The user's browser, handed the URL; a console browser may keep the terminal.
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    try:
        tools = asyncio.run(login(server, open_url=open_url, say=err))
    except LoginFailed as exc:
        err(f"caliban: login to {name!r} failed: {exc}")
        raise typer.Exit(EXIT_NOT_FOUND) from None
    except KeyboardInterrupt:
        err("caliban: login cancelled")
        raise typer.Exit(130) from None
    path = TokenStore(server).path
    err(f"Logged in to {name!r} ({tools} tools). The token is in {path} (readable by you only).")


@mcp_app.command("logout")
def mcp_logout(name: Annotated[str, typer.Argument(help="Server name.")]) -> None:
    """Forget the OAuth token (and client registration) caliban keeps for a server."""
    from caliban.mcp.auth import logout

    server = _require(_load(editing=True), name)
    if logout(server):
        err(f"Logged out of {name!r}: its token is deleted.")
    else:
        err(f"caliban: no login is stored for {name!r}")


__all__ = ["mcp_app"]


# ---------------------------------------------------------------------------- search (lazy MCP)


@mcp_app.command("search")
def mcp_search(
    query: Annotated[str, typer.Argument(help='Keywords, "select:name1,name2" or "+word".')],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100, help="Most tools to show.")
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    connect: Annotated[
        bool,
        typer.Option(
            "--connect", help="Start every server and list its tools again, even if cached."
        ),
    ] = False,
) -> None:
    """Rank the configured servers' tools as ToolSearch would, without a model.

    Servers whose tool lists are cached (from an earlier session) are not started: the
    answer comes at once. The others are started and listed (and cached).
    """
    import json

    from caliban.mcp.catalog_cache import user_cache
    from caliban.mcp.lazy.tool_search import format_search, search_catalog

    config = _load()
    for notice in config.untrusted_notices:
        err(f"caliban: warning: {notice}")
    if not config.servers:
        if not config.untrusted:
            err("caliban: no MCP servers configured (see `caliban mcp add`)")
        raise typer.Exit(EXIT_NOT_FOUND)
    enabled = list(config.enabled)
    cache = user_cache()
    cached = {} if connect else {s.name: cache.load(s) for s in enabled}
    fresh = [s for s in enabled if cached.get(s.name) is None]
    listed: list[McpTool] = []
    if fresh:
        statuses, listed = _connect(fresh)
        failed = [s for s in statuses if s.state == "failed"]
        if failed:
            for text in _format_rows(failed):
                err(text)
    tools = [t for s in enabled if (c := cached.get(s.name)) is not None for t in c.tools] + listed
    data = search_catalog(tools, query, limit, search_model=_search_model())
    data["cached"] = [name for name, found in cached.items() if found is not None]
    out(json.dumps(data, indent=2, ensure_ascii=False) if as_json else format_search(data))
    if not data["results"]:
        raise typer.Exit(EXIT_NOT_FOUND)
