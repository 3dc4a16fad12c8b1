"""The first request does not wait for MCP servers still starting (issue 30).

Real servers: the MCP SDK's own ``MCPServer``, connected in process, whose start-up waits on
an event the test sets (its lifespan), so "still starting" is a state the test holds, not a
race. Sessions run through the agent loop with the scripted provider. Claude Code's
``WaitForMcpServers`` (its name, input and answers, recorded from 2.1.197) is offered while
a server is starting; a server that lists late adds its tools at the end of the tool list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hang import hang_guard
from lazy_fakes import lazy_settings, make_session
from mcp.server.mcpserver import MCPServer

from caliban.events import AgentEvent, ToolStarted
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig
from caliban.mcp.startup import first_request_wait
from caliban.mcp.wait import WaitForMcpServers
from caliban.messages import ToolResult
from caliban.providers.scripted import ScriptedProvider, reply, tool_call

pytestmark = pytest.mark.anyio

WAIT = "WaitForMcpServers"
RESOURCE_TOOLS = ["ListMcpResourcesTool", "ReadMcpResourceTool"]  # the SDK server offers some
CONNECTED = "Connected (their tools are now available \u2014 call them directly)"


def gated(name: str, gate: anyio.Event) -> MCPServer:
    """An SDK server with an ``echo`` tool whose start-up waits until ``gate`` is set."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        await gate.wait()
        yield {}

    server = MCPServer(name, lifespan=lifespan)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"{name}: {text}"

    return server


def config(name: str, **kw: Any) -> ServerConfig:
    """The entry an in-process server stands in for (its timeouts are read from it)."""
    return ServerConfig(name=name, transport="stdio", command="unused", **kw)


@asynccontextmanager
async def manager(
    servers: dict[str, MCPServer], configs: Sequence[ServerConfig] = ()
) -> AsyncIterator[McpManager]:
    mcp = McpManager(configs, in_process=servers)
    mcp.start()
    try:
        yield mcp
    finally:
        await mcp.aclose()


def eager() -> Any:
    return lazy_settings(lazy=False)


def results(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    return [p for p in provider.requests[request].messages[-1].parts if isinstance(p, ToolResult)]


def on_start(tool: str, action: Any) -> Any:
    def listener(event: AgentEvent) -> None:
        if isinstance(event, ToolStarted) and event.call.name == tool:
            action()

    return listener


async def test_the_first_request_goes_before_a_slow_server_and_its_tools_join_at_the_end(
    tmp_path: Path,
) -> None:
    slow_gate, quick_gate = anyio.Event(), anyio.Event()
    quick_gate.set()
    provider = ScriptedProvider([reply(tool_call(WAIT, {})), "done"])
    # "slow" is configured first, yet lists last: its tools go after "quick"'s.
    servers = {"slow": gated("slow", slow_gate), "quick": gated("quick", quick_gate)}
    async with manager(servers) as mcp:
        with hang_guard():
            await mcp.wait_listed(["quick"])
        session = make_session(provider, tmp_path, mcp=mcp, settings=eager())  # type: ignore[arg-type]
        session.add_listener(on_start(WAIT, slow_gate.set))
        with hang_guard():
            result = await session.run("use the slow server")
    assert result.text == "done"
    first, second = provider.offered
    assert first == ["Echo", "Note", WAIT, "mcp__quick__echo", *RESOURCE_TOOLS]
    assert second == [*first, "mcp__slow__echo"]  # the list only grew, at its end
    [waited] = results(provider, 1)
    assert not waited.is_error
    assert waited.text == f"ready: true\n{CONNECTED}: slow"


async def test_wait_stays_offered_once_offered_and_answers_for_named_servers(
    tmp_path: Path,
) -> None:
    gate = anyio.Event()
    provider = ScriptedProvider(
        [
            reply(tool_call(WAIT, {"servers": ["slow"]})),
            reply(tool_call(WAIT, {"servers": ["slow", "nosuch"]})),
            "done",
        ]
    )
    async with manager({"slow": gated("slow", gate)}) as mcp:
        session = make_session(provider, tmp_path, mcp=mcp, settings=eager())  # type: ignore[arg-type]
        session.add_listener(on_start(WAIT, gate.set))
        with hang_guard():
            await session.run("wait twice")
    assert provider.offered[0] == ["Echo", "Note", WAIT]
    assert provider.offered[2] == ["Echo", "Note", WAIT, "mcp__slow__echo", *RESOURCE_TOOLS]
    [named] = results(provider, 2)
    assert named.is_error
    assert named.text == (
        f"ready: false\n{CONNECTED}: slow\n"
        "Unknown (no MCP server with this name is configured): nosuch"
    )


async def test_a_server_that_never_starts_does_not_hang_the_turn(tmp_path: Path) -> None:
    never = anyio.Event()  # never set
    provider = ScriptedProvider([reply(tool_call(WAIT, {})), "proceeding without it"])
    async with manager(
        {"never": gated("never", never)}, [config("never", startup_timeout=0.5)]
    ) as mcp:
        session = make_session(provider, tmp_path, mcp=mcp, settings=eager())  # type: ignore[arg-type]
        with hang_guard():
            result = await session.run("use it")
    assert result.text == "proceeding without it"
    [waited] = results(provider, 1)
    assert waited.is_error
    assert waited.text == "ready: false\nFailed to connect: never"


async def test_a_call_of_a_tool_of_a_server_still_starting_waits_for_it(tmp_path: Path) -> None:
    """Claude Code fails such a call ("… is still connecting. Call WaitForMcpServers …");
    caliban waits for the server and runs the tool, bounded by its start-up timeout."""
    gate, never = anyio.Event(), anyio.Event()
    provider = ScriptedProvider(
        [
            reply(tool_call("mcp__slow__echo", {"text": "hi"})),
            reply(tool_call("mcp__never__echo", {"text": "hi"})),
            "ok",
        ]
    )
    servers = {"slow": gated("slow", gate), "never": gated("never", never)}
    async with manager(servers, [config("never", startup_timeout=0.5)]) as mcp:
        session = make_session(provider, tmp_path, mcp=mcp, settings=eager())  # type: ignore[arg-type]
        session.add_listener(on_start("mcp__slow__echo", gate.set))
        with hang_guard():
            await session.run("echo hi")
    [ran] = results(provider, 1)
    assert not ran.is_error and "slow: hi" in ran.text
    [refused] = results(provider, 2)
    assert refused.is_error
    assert refused.text == (
        "No such tool available: mcp__never__echo. The MCP server 'never' is not available "
        "(did not finish starting within 0.5s)."
    )


async def test_under_lazy_loading_toolsearch_waits_instead(tmp_path: Path) -> None:
    gate = anyio.Event()
    provider = ScriptedProvider(
        [reply(tool_call("ToolSearch", {"query": "select:mcp__slow__echo"})), "found"]
    )
    async with manager({"slow": gated("slow", gate)}) as mcp:
        session = make_session(provider, tmp_path, mcp=mcp)  # type: ignore[arg-type]
        session.add_listener(on_start("ToolSearch", gate.set))
        with hang_guard():
            await session.run("find the echo tool")
    first, second = provider.offered
    assert first == ["Echo", "Note", "ToolSearch"]  # no WaitForMcpServers beside it
    assert second == [*first, "mcp__slow__echo"]
    [found] = results(provider, 1)
    assert "mcp__slow__echo (newly activated)" in found.text


async def test_the_wait_tool_matches_claude_codes_definition() -> None:
    """Recorded from Claude Code 2.1.197's request (tests/fixtures/claude_code/harness)."""
    spec = WaitForMcpServers(McpManager()).spec
    assert spec.description.startswith(
        "Wait for MCP servers that are still connecting and whose tools are not\n"
    )
    assert spec.description.endswith(
        "You do not need to ask the user for confirmation to use this tool."
    )
    assert spec.input_schema == {
        "type": "object",
        "properties": {
            "servers": {
                "description": "Server names to wait for (default: all pending)",
                "type": "array",
                "items": {"type": "string"},
            }
        },
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("environ", "wait_for_all", "waited", "timeout"),
    [
        ({}, False, ("pinned",), 5.0),  # Claude Code: only alwaysLoad servers
        ({"MCP_CONNECTION_NONBLOCKING": "1"}, False, ("pinned",), 5.0),
        ({"MCP_CONNECTION_NONBLOCKING": "0"}, False, ("pinned", "plain"), 5.0),
        (
            {"MCP_CONNECTION_NONBLOCKING": "false", "MCP_CONNECT_TIMEOUT_MS": "800"},
            False,
            ("pinned", "plain"),
            0.8,
        ),
        ({}, True, ("pinned", "plain"), None),  # tools.wait_for_mcp: the old wait
    ],
)
def test_what_the_first_request_waits_for(
    environ: dict[str, str],
    wait_for_all: bool,
    waited: tuple[str, ...],
    timeout: float | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    mcp = McpManager([config("pinned", lazy=False), config("plain"), config("off", disabled=True)])
    wait = first_request_wait(mcp, wait_for_all=wait_for_all, environ=environ)
    assert (wait.servers, wait.timeout) == (waited, timeout)


async def test_in_the_repl_the_first_prompt_goes_before_a_slow_server(project: Path) -> None:
    from test_repl import CTRL_D, ENTER, harness

    gate = anyio.Event()
    steps = [reply(tool_call(WAIT, {})), "the slow server is up"]
    async with (
        manager({"slow": gated("slow", gate)}) as mcp,
        harness(steps, project, mcp=mcp) as h,
    ):
        h.session.add_listener(on_start(WAIT, gate.set))
        with hang_guard():
            await h.run("use the slow server" + ENTER + CTRL_D)
    first, second = h.provider.offered
    assert first[-1] == WAIT and not any(name.startswith("mcp__") for name in first)
    assert second == [*first, "mcp__slow__echo", *RESOURCE_TOOLS]
    assert h.lines[-3:] == [
        "● WaitForMcpServers()",
        "  ⎿  connected: slow",
        "● the slow server is up",
    ]
