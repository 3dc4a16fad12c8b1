"""``caliban doctor`` and ``/doctor``: what is wrong with this installation and project, and
how to fix it.

Each check looks at one thing — the install, the configuration files, the folder's trust,
the MCP servers' commands, the model provider's key, the tools caliban runs, the state
directory, the OS sandbox — and says ``ok``, ``warn`` or ``fail`` with the fix. Nothing is
sent, and nothing of the folder's runs: the checks read files and ``PATH``, and the sandbox
check runs ``true`` under each backend it tries (as a session's first sandboxed command
does), so they are safe in any folder.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from caliban import __version__
from caliban.config import paths

Status = Literal["ok", "warn", "fail"]
NODE_LAUNCHERS = frozenset({"npx", "npm", "node", "pnpm", "yarn", "bunx"})
"""Commands that need Node.js (MCP servers published on npm)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    area: str
    """``install``, ``config``, ``trust``, ``servers``, ``keys``, ``tools``, ``state``,
    ``sandbox``."""
    status: Status
    detail: str
    fix: str = ""


def run_checks(cwd: Path, environ: Mapping[str, str] | None = None) -> list[Check]:
    """Every check for a session started in ``cwd``; a check that itself fails is a
    ``fail`` naming the error, never an exception."""
    env = os.environ if environ is None else environ
    found: list[Check] = []
    checks: tuple[Callable[[Path, Mapping[str, str]], Iterator[Check]], ...] = (
        _install,
        _config,
        _trust,
        _servers,
        _keys,
        _tools,
        _state,
        _sandbox,
    )
    for check in checks:
        try:
            found.extend(check(cwd, env))
        except Exception as exc:  # a broken check must not hide the others
            found.append(Check(area=check.__name__.strip("_"), status="fail", detail=str(exc)))
    return found


def _install(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    where = Path(__file__).resolve().parents[1]
    python = ".".join(map(str, sys.version_info[:3]))
    yield Check(
        area="install",
        status="ok",
        detail=f"caliban {__version__} from {where} (Python {python}, {sys.executable})",
    )
    if sys.prefix == sys.base_prefix:
        yield Check(
            area="install",
            status="warn",
            detail="caliban is installed outside a virtual environment",
            fix="install it in one: python3 -m venv ~/.venvs/caliban && "
            "~/.venvs/caliban/bin/pip install caliban",
        )


def _config(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from caliban.claude_code.settings import load_claude_settings
    from caliban.config.settings import load_config
    from caliban.errors import ConfigError
    from caliban.permissions.trust import is_trusted

    trusted = is_trusted(paths.project_root(cwd))
    try:
        loaded = load_config(cwd, trusted=trusted)
    except ConfigError as exc:
        yield Check(area="config", status="fail", detail=str(exc), fix="fix the file named above")
        return
    files = ", ".join(str(f.path) for f in loaded.files) or "no config files (defaults)"
    yield Check(area="config", status="ok", detail=f"caliban settings: {files}")
    for warning in loaded.warnings:
        yield Check(area="config", status="warn", detail=warning)
    try:
        claude = load_claude_settings(cwd, trusted=trusted)
    except (ConfigError, ValueError) as exc:
        yield Check(area="config", status="fail", detail=str(exc), fix="fix the file named above")
        return
    sources = ", ".join(layer.source for layer in claude.layers) or "none"
    yield Check(area="config", status="ok", detail=f"Claude Code settings: {sources}")
    for warning in claude.warnings:
        yield Check(area="config", status="warn", detail=warning)


def _trust(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from caliban.permissions.trust import is_trusted

    root = paths.project_root(cwd)
    if is_trusted(root):
        yield Check(area="trust", status="ok", detail=f"{root} is trusted")
        return
    committed = [
        name
        for name in (
            ".mcp.json",
            ".caliban/mcp.toml",
            ".claude/settings.json",
            ".claude/settings.local.json",
        )
        if (root / name).is_file()
    ]
    if committed:
        yield Check(
            area="trust",
            status="warn",
            detail=f"{root} is not trusted: its {', '.join(committed)} widen nothing and start "
            "no servers",
            fix=f"if you trust who wrote them: caliban trust {root} (or /trust in a session)",
        )
    else:
        yield Check(area="trust", status="ok", detail=f"{root} is not trusted (nothing asks it)")


def _servers(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from caliban.mcp.config import load_mcp_config

    config = load_mcp_config(cwd, environ=env)
    for problem in config.problems:
        yield Check(area="servers", status="fail", detail=problem, fix="fix the entry named above")
    for warning in config.warnings:
        yield Check(area="servers", status="warn", detail=warning)
    for server in config.servers:
        if server.command is None:
            yield Check(area="servers", status="ok", detail=f"{server.name}: {server.url}")
            continue
        program = server.command
        if shutil.which(program, path=env.get("PATH")) is not None:
            yield Check(area="servers", status="ok", detail=f"{server.name}: {program} found")
        elif Path(program).name in NODE_LAUNCHERS:
            yield Check(
                area="servers",
                status="fail",
                detail=f"{server.name}: {program} is not installed (an npm server needs Node.js)",
                fix="install Node.js 18 or later (https://nodejs.org, or your package manager)",
            )
        else:
            yield Check(
                area="servers",
                status="fail",
                detail=f"{server.name}: {program} is not found on PATH",
                fix=f"install {program}, or fix the server's command (caliban mcp get "
                f"{server.name})",
            )
    if not config.servers and not config.problems:
        yield Check(area="servers", status="ok", detail="no MCP servers configured")


def _keys(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from caliban.config.settings import load_config
    from caliban.errors import ConfigError
    from caliban.providers.select import resolve_provider

    try:
        settings = load_config(cwd).settings
        choice = resolve_provider(settings, provider=None, model=None, environ=env)
    except ConfigError as exc:
        yield Check(area="keys", status="fail", detail=str(exc).splitlines()[0], fix=str(exc))
        return
    endpoint = choice.base_url or "the provider's API"
    key = f"the key from ${choice.api_key_env}" if env.get(choice.api_key_env) else "no key"
    yield Check(
        area="keys",
        status="ok",
        detail=f"{choice.provider}, model {choice.model}, {endpoint}, {key}",
    )


def _tools(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    for program, why, fix in (
        ("git", "worktrees (-w) and protected-file checks", "install git"),
        ("rg", "Grep and Glob (ripgrep)", "install ripgrep (apt install ripgrep)"),
    ):
        if shutil.which(program, path=env.get("PATH")) is not None:
            yield Check(area="tools", status="ok", detail=f"{program} found ({why})")
        else:
            yield Check(area="tools", status="warn", detail=f"{program} not found: {why}", fix=fix)


def _state(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    for name, directory in (("state", paths.state_dir()), ("data", paths.data_dir())):
        probe = directory
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if os.access(probe, os.W_OK) and probe.is_dir():
            yield Check(area="state", status="ok", detail=f"{name} directory {directory}")
        else:
            variable = "CALIBAN_STATE_DIR" if name == "state" else "CALIBAN_DATA_DIR"
            yield Check(
                area="state",
                status="fail",
                detail=f"{name} directory {directory} is not writable (history, sessions and "
                "trust cannot be saved)",
                fix=f"set {variable} to a writable directory",
            )


def _sandbox(cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    from caliban.claude_code.settings import load_claude_settings
    from caliban.config.settings import load_config
    from caliban.permissions.trust import is_trusted
    from caliban.sandbox.runtime import choose_backend
    from caliban.sandbox.session import session_config

    trusted = is_trusted(paths.project_root(cwd))
    config = session_config(
        load_config(cwd, trusted=trusted),
        load_claude_settings(cwd, trusted=trusted),
        flag=None,
        trusted=trusted,
    )
    backend = choose_backend()
    availability = backend.available()
    mode = f"sandbox {config.mode}" + (f" (from {config.sources[0]})" if config.sources else "")
    if availability.usable:
        limited = "" if getattr(backend, "keeps_protected_paths", False) else (
            "; protected paths inside the project are kept by the permission rules only"
        )  # fmt: skip
        yield Check(
            area="sandbox",
            status="ok",
            detail=f"{mode}; backend {backend.name}: {availability.detail}{limited}",
        )
        return
    fix = (
        "install bubblewrap (apt-get install bubblewrap) and allow unprivileged user "
        "namespaces, or run Linux 6.7 or later (Landlock)"
        if sys.platform.startswith("linux")
        else "no OS sandbox exists for this system"
    )
    if not config.enabled:
        yield Check(area="sandbox", status="ok", detail=f"{mode}; no backend would work here: "
                    f"{availability.detail}")  # fmt: skip
    elif config.fail_if_unavailable:
        yield Check(
            area="sandbox",
            status="fail",
            detail=f"{mode}, but no backend works here ({availability.detail}): Bash commands "
            "are refused (failIfUnavailable)",
            fix=fix,
        )
    else:
        yield Check(
            area="sandbox",
            status="warn",
            detail=f"{mode}, but no backend works here ({availability.detail}): commands run "
            "WITHOUT a sandbox",
            fix=f"{fix}; or set sandbox.failIfUnavailable = true to refuse them instead",
        )


def worst(checks: list[Check]) -> Status:
    """The most serious status among ``checks``."""
    statuses = {check.status for check in checks}
    return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "ok"
