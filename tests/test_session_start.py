"""What a session does before its MCP servers launch, and what it does not (issue 30).

``open_session`` launches the servers a headless run waits for as soon as the settings, the
flags and the provider are read, before it builds the rest of the session (the servers boot
on the other core meanwhile): the order is observed at the moment the built-in tools are
built, with real processes. Trust still decides first: an untrusted folder's project servers
never launch, early or late (a server with ``sandbox = true`` waits for the sandbox:
tests/test_sandbox_mcp_hooks.py). Start-up runs with the garbage collector paused
(``caliban.cli.main``), and the open session collects again with start-up's objects frozen.
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hang import hang_guard
from reaping import running
from test_headless import options

from caliban.cli.main import main
from caliban.cli.options import CliOptions
from caliban.config.settings import user_config_path
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig, user_mcp_path
from caliban.permissions.trust import trust
from caliban.session import assemble

pytestmark = pytest.mark.anyio

IDLE = "import sys; open(sys.argv[1], 'w').close(); sys.stdin.read()"
"""A stdio server that never answers: it notes that it ran, then waits for its stdin."""


class BuildFailed(Exception):
    """Raised where the session builds its built-in tools, after the launch."""


def run_options(cwd: Path) -> CliOptions:
    return options(cwd=cwd, output_format="text", no_session_persistence=True)


def idle_server(marker: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-c", IDLE, str(marker)]}


@pytest.fixture
def waiting_run(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A headless run that waits for its servers (``tools.wait_for_mcp``), with a key."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    user_config = user_config_path()
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text("[tools]\nwait_for_mcp = true\n")
    return project


@pytest.fixture
def at_build(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """What the session's MCP servers were when its built-in tools were built (one entry per
    server: name and whether its process ran); the build then fails, ending the session."""
    managers: list[McpManager] = []
    seen: list[dict[str, Any]] = []
    real_manager = assemble.mcp_manager

    def recording_manager(servers: Sequence[ServerConfig]) -> McpManager | None:
        manager = real_manager(servers)
        if manager is not None:
            managers.append(manager)
        return manager

    def failing_build(_tasks: object) -> list[object]:
        for manager in managers:
            for name in manager.server_names():
                pid = manager.status(name).pid
                seen.append(
                    {"name": name, "pid": pid, "running": pid is not None and bool(running([pid]))}
                )
        raise BuildFailed

    import caliban.tools.builtin

    monkeypatch.setattr(assemble, "mcp_manager", recording_manager)
    monkeypatch.setattr(caliban.tools.builtin, "builtin_tools", failing_build)
    yield seen


async def test_servers_run_before_the_session_is_built_and_stop_when_it_fails(
    waiting_run: Path, at_build: list[dict[str, Any]]
) -> None:
    trust(waiting_run)
    marker = waiting_run / "ran"
    (waiting_run / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"idle": idle_server(marker)}})
    )
    with hang_guard(), pytest.raises(BuildFailed):
        async with assemble.open_session(run_options(waiting_run)):
            pass
    [server] = at_build
    assert server["name"] == "idle" and server["running"]  # launched before the build
    assert not running([server["pid"]])  # and stopped, though the session never opened


async def test_an_untrusted_folders_servers_never_launch(
    waiting_run: Path, at_build: list[dict[str, Any]]
) -> None:
    # Not trusted: the project's .mcp.json and mcp.toml servers must not run, even for a
    # moment before the session has decided; the user's own server launches early.
    evil = waiting_run / "evil-ran"
    (waiting_run / ".mcp.json").write_text(json.dumps({"mcpServers": {"evil": idle_server(evil)}}))
    (waiting_run / ".caliban" / "mcp.toml").write_text(
        f"[server.toml_evil]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps(['-c', IDLE, str(evil)])}\n"
    )
    user_mcp_path().write_text(
        f"[server.mine]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps(['-c', IDLE, str(waiting_run / 'mine-ran')])}\n"
    )
    with hang_guard(), pytest.raises(BuildFailed):
        async with assemble.open_session(run_options(waiting_run)):
            pass
    assert [(s["name"], s["running"]) for s in at_build] == [("mine", True)]
    assert not evil.exists()


async def test_a_server_not_enabled_in_claude_codes_settings_never_launches(
    waiting_run: Path, at_build: list[dict[str, Any]]
) -> None:
    trust(waiting_run)
    (waiting_run / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "on": idle_server(waiting_run / "on-ran"),
                    "off": idle_server(waiting_run / "off-ran"),
                }
            }
        )
    )
    (waiting_run / ".claude").mkdir()
    (waiting_run / ".claude" / "settings.json").write_text(
        json.dumps({"enabledMcpjsonServers": ["on"]})
    )
    with hang_guard(), pytest.raises(BuildFailed):
        async with assemble.open_session(run_options(waiting_run)):
            pass
    assert [(s["name"], s["running"]) for s in at_build] == [("on", True)]
    assert not (waiting_run / "off-ran").exists()


def test_start_up_pauses_collection_and_a_command_resumes_it(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert gc.isenabled()
    assert "Usage" in capsys.readouterr().out


async def test_the_open_session_collects_again_with_start_ups_objects_frozen(
    waiting_run: Path,
) -> None:
    gc.disable()  # as caliban.cli.main does for start-up
    try:
        async with assemble.open_session(run_options(waiting_run)):
            assert gc.isenabled()
            assert gc.get_freeze_count() > 0
    finally:
        gc.enable()
