"""MCP stdio servers with ``sandbox = true`` run confined (each backend that works here),
and refuse to start where none does; ``sandbox`` in ``mcp.toml`` is for stdio servers; a
hook with ``"sandbox": true`` runs confined."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hang import hang_guard
from sandbox_helpers import (
    backend,
    launch_server_stopped,  # noqa: F401  (an autouse fixture)
)

from caliban.exec import NoSandbox, Sandbox, SandboxProfile
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig, load_mcp_config
from caliban.mcp.tools import unmark
from caliban.sandbox.runtime import SandboxRuntime, Unavailable
from caliban.sandbox.settings import SandboxConfig
from caliban.tools.base import CallContext, ToolEnv

pytestmark = pytest.mark.anyio
SERVERS = Path(__file__).parent / "mcp_servers"


def _writer(*, sandbox: bool) -> ServerConfig:
    return ServerConfig(
        name="writer",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "writer.py"),),
        sandbox=sandbox,
        startup_timeout=300,  # importing the MCP SDK takes seconds on a loaded machine
    )


async def _write(manager: McpManager, tmp_path: Path, path: Path) -> str:
    [tool] = [t for t in manager.tools() if t.name == "mcp__writer__write"]
    env = ToolEnv(cwd=tmp_path, project_root=tmp_path)
    out = await tool.call({"path": str(path), "text": "x"}, CallContext(env=env, call_id="c"))
    return unmark(out.as_text)


@pytest.mark.parametrize("name", ["bubblewrap", "landlock"])
async def test_a_sandboxed_server_writes_the_project_only(name: str, tmp_path: Path) -> None:
    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    runtime = SandboxRuntime(SandboxConfig(), project_root=project, backend=backend(name))
    try:
        for confined in (True, False):
            async with McpManager([_writer(sandbox=confined)], sandbox=runtime) as manager:
                with hang_guard():
                    [status] = await manager.wait_ready()
                assert status.state == "connected", status
                inside = await _write(manager, tmp_path, project / f"in-{confined}")
                escape = await _write(manager, tmp_path, outside / f"out-{confined}")
            assert inside.startswith("wrote")
            assert (outside / f"out-{confined}").exists() is not confined, escape
    finally:
        runtime.close()


async def test_a_server_asking_for_a_sandbox_does_not_start_without_one(tmp_path: Path) -> None:
    runtime = SandboxRuntime(
        SandboxConfig(), project_root=tmp_path, backend=Unavailable("bwrap is not installed")
    )
    async with McpManager([_writer(sandbox=True)], sandbox=runtime) as manager:
        with hang_guard():
            [status] = await manager.wait_ready()
    assert status.state == "failed"
    assert "none works here: bwrap is not installed" in (status.error or "")


class CountingSandbox:
    """No confinement, counting how often a server asked for it."""

    def __init__(self) -> None:
        self.asked = 0

    def confinement(self) -> tuple[SandboxProfile, NoSandbox]:
        self.asked += 1
        return SandboxProfile(), NoSandbox()

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        return env


async def test_a_server_that_asks_for_the_sandbox_waits_for_it() -> None:
    # A session launches its servers before it has built its sandbox (issue 30).
    async with McpManager([_writer(sandbox=True)], confine_later=True) as manager:
        with hang_guard():
            await manager.wait_launched()  # does not wait for the sandbox
            assert manager.status("writer").pid is None
            sandbox = CountingSandbox()
            manager.confine(sandbox)
            [status] = await manager.wait_ready()
    assert status.state == "connected", status
    assert sandbox.asked == 1


def test_sandbox_is_an_mcp_toml_key_for_stdio_servers(project: Path) -> None:
    (project / ".caliban" / "mcp.toml").write_text(
        '[server.a]\ncommand = "x"\nsandbox = true\n'
        '[server.b]\nurl = "http://127.0.0.1:1/mcp"\nsandbox = true\n'
    )
    config = load_mcp_config(project, trusted=True)
    assert [s.name for s in config.servers if s.sandbox] == ["a"]
    assert any("`sandbox` applies to stdio servers only" in p for p in config.problems)


async def test_a_hook_with_sandbox_true_runs_confined(tmp_path: Path) -> None:
    from caliban.hooks import HookRunner, parse_hooks

    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    script = f"touch inside-$X; touch {outside}/escaped-$X"
    table = {
        "SessionStart": [
            {"hooks": [{"type": "command", "command": script.replace("$X", "a"), "sandbox": True}]},
            {"hooks": [{"type": "command", "command": script.replace("$X", "b")}]},
            {"hooks": [{"type": "command", "command": "true", "sandbox": "yes"}]},
        ]
    }
    config, warnings = parse_hooks(table, "settings.json")
    assert any("sandbox must be true or false" in w for w in warnings)
    runtime = SandboxRuntime(SandboxConfig(), project_root=project, backend=_any_backend())
    try:
        runner = HookRunner(config, project_dir=project, session_id=lambda: "s", sandbox=runtime)
        await runner.run("SessionStart", "startup", source="startup")
    finally:
        runtime.close()
    assert (project / "inside-a").exists() and (project / "inside-b").exists()
    assert not (outside / "escaped-a").exists()  # the sandboxed one
    assert (outside / "escaped-b").exists()  # the other ran as hooks always have


def _any_backend() -> Sandbox:
    for name in ("bubblewrap", "landlock"):
        try:
            return backend(name)
        except pytest.skip.Exception:
            continue
    pytest.skip("no sandbox backend works here")
