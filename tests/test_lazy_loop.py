"""Lazy MCP loading through the agent loop, with the scripted provider.

What the model is offered on each request is read from the provider's recorded requests.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from authorizers import Refusing
from hang import hang_guard
from lazy_fakes import CATALOG, Echo, FakeMcp, Note, lazy_settings, make_session

from caliban.agent import Agent
from caliban.config.settings import Settings
from caliban.events import ActivationChanged, AgentEvent
from caliban.mcp.tools import unmark
from caliban.messages import ToolResult
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.session.context import context_report
from caliban.session.session import Session
from caliban.subagents import AgentDefinition
from caliban.tools.base import McpOrigin
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

GH_CREATE = "mcp__github__create_issue"
GH_SEARCH = "mcp__github__search_issues"
GH_PRS = "mcp__github__list_pull_requests"
GL_CREATE = "mcp__gitlab__create_issue"
GL_PIPES = "mcp__gitlab__list_pipelines"
TIME_NOW = "mcp__time__get_current_time"
TIME_CONVERT = "mcp__time__convert_time"
SERVERS = Path(__file__).parent / "mcp_servers"


def mcp_offered(provider: ScriptedProvider, request: int) -> list[str]:
    return [name for name in provider.offered[request] if name.startswith("mcp__")]


def results(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    last = provider.requests[request].messages[-1]
    return [p for p in last.parts if isinstance(p, ToolResult)]


def activations(events: list[AgentEvent]) -> list[ActivationChanged]:
    return [e for e in events if isinstance(e, ActivationChanged)]


async def run(session: Session, prompt: str = "go") -> None:
    with hang_guard():
        result = await session.run(prompt)
    assert result.subtype == "success", result


async def test_search_then_use_a_found_tool(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": "list pipelines", "max_results": 1})),
            reply(tool_call(GL_PIPES, {"q": "main"})),
            "Pipelines listed.",
        ]
    )
    events: list[AgentEvent] = []
    mcp = FakeMcp(CATALOG)
    session = make_session(provider, tmp_path, mcp=mcp, events=events)
    await run(session)

    assert provider.offered[0] == ["Echo", "Note", "ToolSearch"]
    assert "# Deferred MCP tools\n8 MCP tools from 3 servers" in provider.requests[0].system
    [found] = results(provider, 1)
    assert f"{GL_PIPES} (newly activated)" in found.text
    assert provider.offered[1] == ["Echo", "Note", "ToolSearch", GL_PIPES]
    # The activation is announced in the result; the system prompt is byte-identical.
    assert provider.requests[1].system == provider.requests[0].system
    [used] = results(provider, 2)
    assert unmark(used.text) == 'gitlab.list_pipelines({"q": "main"})' and not used.is_error
    assert provider.offered[2] == provider.offered[1]  # nothing new: same list, cache holds
    assert provider.requests[2].system == provider.requests[1].system
    assert mcp.dispatcher.calls == [("gitlab", "list_pipelines", {"q": "main"})]
    assert activations(events) == [
        ActivationChanged(activated=(GL_PIPES,), evicted=(), active=(GL_PIPES,))
    ]
    # The filter shaped only the requests: the history holds every call and result.
    roles = [m.role for m in session.conversation.messages]
    assert roles == ["user", "assistant"] * 3


async def test_activations_last_for_the_next_prompt(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [reply(tool_call("ToolSearch", {"query": f"select:{GH_PRS}"})), "found", "second"]
    )
    session = make_session(provider, tmp_path)
    await run(session)
    await run(session, "again")
    assert mcp_offered(provider, 2) == [GH_PRS]


async def test_eviction_is_in_the_result_and_the_next_request(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": f"select:{GH_CREATE},{GH_SEARCH}"})),
            reply(tool_call("ToolSearch", {"query": f"select:{TIME_NOW}"})),
            "done",
        ]
    )
    events: list[AgentEvent] = []
    session = make_session(provider, tmp_path, settings=lazy_settings(True, 2), events=events)
    await run(session)
    assert mcp_offered(provider, 1) == [GH_CREATE, GH_SEARCH]
    [second] = results(provider, 2)
    assert second.text.endswith(f"Evicted (least recently used): {GH_SEARCH}")
    assert mcp_offered(provider, 2) == [GH_CREATE, TIME_NOW]
    assert activations(events)[-1].evicted == (GH_SEARCH,)


async def test_direct_call_of_a_deferred_tool_runs_and_activates_it(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply(tool_call(GH_SEARCH, {"q": "crash"})), "done"])
    events: list[AgentEvent] = []
    mcp = FakeMcp(CATALOG)
    session = make_session(provider, tmp_path, mcp=mcp, events=events)
    await run(session)
    [result] = results(provider, 1)
    assert not result.is_error and unmark(result.text) == (
        f'github.search_issues({{"q": "crash"}})\n({GH_SEARCH} is now loaded: it is in your '
        "tool list.)"
    )
    assert mcp_offered(provider, 0) == [] and mcp_offered(provider, 1) == [GH_SEARCH]
    assert provider.requests[1].system == provider.requests[0].system
    assert activations(events) == [
        ActivationChanged(activated=(GH_SEARCH,), evicted=(), active=(GH_SEARCH,))
    ]


async def test_rejected_arguments_of_a_deferred_tool_come_back_with_its_schema(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            reply(tool_call(GH_SEARCH, {"query": "crash"})),
            reply(tool_call(GH_SEARCH, {"q": "crash"})),
            "done",
        ]
    )
    session = make_session(provider, tmp_path)
    await run(session)
    [rejected] = results(provider, 1)
    assert rejected.is_error and "missing required argument 'q'" in rejected.text
    assert '"required":["q"]' in rejected.text
    [retried] = results(provider, 2)
    assert not retried.is_error  # now active: its schema was on the wire, no extra text
    assert "schema" not in retried.text


async def test_a_denied_direct_call_neither_runs_nor_activates(tmp_path: Path) -> None:
    deny_mcp = Refusing(
        lambda call: "MCP is off limits" if isinstance(call.tool.origin, McpOrigin) else None
    )
    provider = ScriptedProvider([reply(tool_call(GH_SEARCH, {"q": "x"})), "ok"])
    mcp = FakeMcp(CATALOG)
    session = make_session(provider, tmp_path, mcp=mcp, authorizer=deny_mcp)
    await run(session)
    [result] = results(provider, 1)
    assert result.is_error and "MCP is off limits" in result.text
    assert mcp.dispatcher.calls == [] and mcp_offered(provider, 1) == []


async def test_parallel_searches_and_a_direct_call_lose_no_update(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            reply(
                tool_call("ToolSearch", {"query": f"select:{GH_CREATE}"}),
                tool_call("ToolSearch", {"query": f"select:{GL_PIPES}"}),
                tool_call(TIME_NOW, {"q": "UTC"}),
            ),
            "done",
        ]
    )
    events: list[AgentEvent] = []
    session = make_session(provider, tmp_path, events=events)
    await run(session)
    assert session.activation is not None
    assert set(session.activation.get().names()) == {GH_CREATE, GL_PIPES, TIME_NOW}
    assert sorted(mcp_offered(provider, 1)) == sorted([GH_CREATE, GL_PIPES, TIME_NOW])
    assert len(activations(events)) == 3


async def test_unknown_tool_error_does_not_list_every_deferred_tool(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply(tool_call("mcp__github__create_issues", {})), "ok"])
    await run(session := make_session(provider, tmp_path))
    [result] = results(provider, 1)
    assert result.is_error
    assert result.text.startswith("Unknown tool 'mcp__github__create_issues'. Available tools:")
    assert "8 more tools are not loaded (ToolSearch finds them)" in result.text
    assert f"closest names: {GH_CREATE}" in result.text
    assert GL_PIPES not in result.text
    assert session.activation is not None and len(session.activation.get()) == 0


async def test_with_thousands_of_tools_sent_an_unknown_tool_error_names_only_the_closest(
    tmp_path: Path,
) -> None:
    """lazy_mcp = false and 3,000 MCP tools on the wire: the error is not a 100 KB list."""
    catalog = {"big": [f"tool_{i}" for i in range(3000)]}
    provider = ScriptedProvider([reply(tool_call("mcp__big__tool_12x", {})), "ok"])
    await run(make_session(provider, tmp_path, mcp=FakeMcp(catalog), settings=Settings()))
    [result] = results(provider, 1)
    assert len(provider.offered[0]) == 3002
    assert result.is_error and len(result.text) < 500
    assert result.text.startswith(
        "Unknown tool 'mcp__big__tool_12x'. Available tools: Echo, Note, and 3,000 MCP tools "
        "(closest names: mcp__big__tool_12"
    )


async def test_lazy_off_request_is_unchanged(tmp_path: Path) -> None:
    """With lazy_mcp = false the request is what it was before lazy loading existed."""
    script = [reply(tool_call(GH_SEARCH, {"q": "x"})), "ok"]
    lazy_off = ScriptedProvider(list(script))
    mcp = FakeMcp(CATALOG)
    session = make_session(lazy_off, tmp_path, mcp=mcp, settings=Settings())
    await run(session)

    before = ScriptedProvider(list(script))  # the pre-feature assembly: builtins + MCP tools
    agent = Agent(
        provider=before,
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList([Echo(), Note(), *mcp.tools()]),
        env=session.env,
    )
    with hang_guard():
        await agent.run("go")
    assert lazy_off.requests == before.requests
    assert "ToolSearch" not in lazy_off.offered[0] and len(lazy_off.offered[0]) == 10
    assert "Deferred" not in lazy_off.requests[0].system


async def test_subagent_activation_events_carry_the_agent_call_id(tmp_path: Path) -> None:
    child_def = AgentDefinition(name="helper", description="d", system_prompt="")
    steps: dict[str, ScriptedProvider] = {
        "go": ScriptedProvider(
            [
                reply(
                    tool_call(
                        "Agent",
                        {"description": "d", "prompt": "child", "subagent_type": "helper"},
                        id="agent1",
                    )
                ),
                "ok",
            ]
        ),
        "child": ScriptedProvider(
            [reply(tool_call("ToolSearch", {"query": f"select:{GL_PIPES}"})), "done"]
        ),
    }

    class Router:
        name = "router"

        def stream(self, request: Any) -> Any:
            return steps[request.messages[0].text].stream(request)

    events: list[AgentEvent] = []
    session = make_session(
        Router(),  # type: ignore[arg-type]
        tmp_path,
        events=events,
        agents=[child_def],
    )
    await run(session)
    [change] = activations(events)
    assert change.activated == (GL_PIPES,) and change.parent_tool_use_id == "agent1"
    assert session.activation is not None and len(session.activation.get()) == 0


@pytest.mark.slow
async def test_real_mcp_tools_from_the_stdio_catalog_server(tmp_path: Path) -> None:
    from caliban.mcp.client import McpManager
    from caliban.mcp.config import ServerConfig

    config = ServerConfig(
        name="catalog",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "catalog_server.py"),),
    )
    provider = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": "start a deployment pipeline run"})),
            lambda request: reply(
                tool_call(
                    next(t.name for t in request.tools if t.name.startswith("mcp__catalog__")),
                    {"pipeline": "backend-deploy"},
                )
            ),
            reply(tool_call("mcp__catalog__fail_validation", {"reason": "date must be ISO"})),
            "done",
        ]
    )
    async with McpManager([config]) as manager:
        with hang_guard():
            await manager.wait_ready()
        assert len(manager.tools()) >= 30
        session = make_session(provider, tmp_path, mcp=manager)  # type: ignore[arg-type]
        with hang_guard():
            await session.run("go")  # names no tool: the model searches
    assert mcp_offered(provider, 0) == []
    assert f"{len(manager.tools())} MCP tools from 1 server" in provider.requests[0].system
    [found] = results(provider, 1)
    assert "mcp__catalog__" in found.text and "Input schema: {" in found.text
    offered = mcp_offered(provider, 1)
    assert offered and all(f"{name} (newly activated)" in found.text for name in offered)
    [ran] = results(provider, 2)
    assert not ran.is_error and '"backend-deploy"' in ran.text
    [failed] = results(provider, 3)
    assert failed.is_error and failed.text.startswith(
        '<mcp-data server="catalog" tool="fail_validation">\ndate must be ISO\n</mcp-data>\n'
    )
    assert "mcp__catalog__fail_validation is now loaded. Its input schema:" in failed.text
    assert mcp_offered(provider, 3)[-1] == "mcp__catalog__fail_validation"


async def test_a_bare_tool_name_runs_the_one_tool_it_names_and_says_its_full_name(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([reply(tool_call("get_current_time", {"q": "Tokyo"})), "9 am."])
    events: list[AgentEvent] = []
    mcp = FakeMcp(CATALOG)
    session = make_session(provider, tmp_path, mcp=mcp, events=events)
    await run(session)
    [result] = results(provider, 1)
    assert not result.is_error
    assert unmark(result.text).startswith('time.get_current_time({"q": "Tokyo"})')
    assert f"this ran {TIME_NOW}. Call it by that full name." in result.text
    assert mcp.dispatcher.calls == [("time", "get_current_time", {"q": "Tokyo"})]
    assert TIME_NOW in provider.offered[1]  # activated like any direct call
    assert [e.activated for e in activations(events)] == [(TIME_NOW,)]


async def test_an_ambiguous_bare_name_runs_nothing_and_shows_the_candidates(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([reply(tool_call("create_issue", {"q": "bug"})), "ok"])
    mcp = FakeMcp(CATALOG)
    session = make_session(provider, tmp_path, mcp=mcp)
    await run(session)
    [result] = results(provider, 1)
    assert result.is_error and result.text.startswith("Unknown tool 'create_issue'")
    for name, server in ((GH_CREATE, "github"), (GL_CREATE, "gitlab")):
        description = f'<mcp-data server="{server}">\nCreate issue on {server}.\n</mcp-data>'
        assert f"\n{name}: {description} Input schema: " in result.text
    assert mcp.dispatcher.calls == []


# ---------------------------------------------------------------------------- pre-activation


async def test_a_prompt_loads_its_likely_tools_before_it_is_sent(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply(tool_call(TIME_NOW, {"q": "Asia/Tokyo"})), "Evening."])
    events: list[AgentEvent] = []
    session = make_session(provider, tmp_path, events=events)
    await run(session, "what time is it in Tokyo?")

    # The first request already carries the time tools, after everything it had before.
    assert provider.offered[0] == ["Echo", "Note", "ToolSearch", TIME_CONVERT, TIME_NOW]
    prompt = provider.requests[0].messages[-1]
    assert prompt.text.startswith("what time is it in Tokyo?")
    assert prompt.text.endswith(
        f"(caliban loaded these MCP tools for this request: {TIME_CONVERT}, {TIME_NOW}. They "
        "are in your tool list; ToolSearch finds others.)"
    )
    [loaded] = activations(events)
    assert loaded.preactivated and loaded.activated == (TIME_CONVERT, TIME_NOW)
    report = context_report(session)
    assert report.preactivated == ((TIME_CONVERT, False), (TIME_NOW, True))
    assert report.as_dict()["mcp"]["preactivated"][1] == {"name": TIME_NOW, "used": True}

    # The system prompt is the one a session without pre-activation sends, byte for byte.
    plain = ScriptedProvider(["Evening."])
    off = Settings.model_validate({"tools": {"lazy_mcp": True, "preactivate": 0}})
    await run(make_session(plain, tmp_path, settings=off), "what time is it in Tokyo?")
    assert plain.offered[0] == ["Echo", "Note", "ToolSearch"]
    assert plain.requests[0].system == provider.requests[0].system
    assert plain.requests[0].messages[-1].text == "what time is it in Tokyo?"


async def test_loaded_tools_the_model_did_not_use_go_at_the_next_prompt(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            reply(tool_call(TIME_NOW, {"q": "UTC"})),
            "It is noon.",
            "Fixed.",
            reply(tool_call("ToolSearch", {"query": "select:create_issue"})),
            "Found.",
            "Done.",
        ]
    )
    events: list[AgentEvent] = []
    session = make_session(provider, tmp_path, events=events)
    await run(session, "what time is it in Tokyo?")
    await run(session, "fix the typo in README.md")
    # convert_time was loaded for the first prompt and never used: gone; get_current_time
    # was called: it stays, like any tool the model used.
    assert mcp_offered(provider, 2) == [TIME_NOW]
    dropped = activations(events)[-1]
    assert dropped.preactivated and dropped.evicted == (TIME_CONVERT,) and not dropped.activated

    await run(session, "open a github issue about the crash")
    assert mcp_offered(provider, 3) == [TIME_NOW, GH_CREATE, GH_SEARCH]
    await run(session, "thanks")  # create_issue was searched for: claimed; search_issues goes
    assert mcp_offered(provider, 5) == [TIME_NOW, GH_CREATE, GL_CREATE]

    session.clear()
    assert context_report(session).preactivated == ()
