"""Sub-agents through a real Session with scripted providers.

One :class:`Router` stands in for the session's provider and sends each request to the
scripted provider of the agent that made it, recognised by the first user message of the
request (the parent's prompt, or the prompt an Agent call gave a child). So every agent has
its own script and its own recorded requests, whatever order concurrent children ask in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types
import pytest
from authorizers import Refusing
from hang import hang_guard
from lazy_fakes import EchoInput, Note

from caliban.agent import INTERRUPTED, Agent
from caliban.config.settings import Settings
from caliban.events import (
    AgentEvent,
    AssistantMessage,
    HistoryAppended,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.mcp.lazy.activation import McpActivationSet
from caliban.mcp.lazy.toolset import LazyMcpToolset
from caliban.mcp.results import CallOutcome
from caliban.mcp.tools import McpTool, wire_name
from caliban.messages import ToolResult, Usage
from caliban.providers.base import ProviderEvent, ProviderRequest, TextDelta
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.session.session import Session
from caliban.subagents import GENERAL_PURPOSE, AgentDefinition
from caliban.tools.agent import AgentTool
from caliban.tools.base import BuiltinTool, CallContext, Tool, ToolEnv, ToolOutput
from caliban.toolsets.combined import CombinedToolset

pytestmark = pytest.mark.anyio

PARENT = "parent task"


class Router:
    """A provider that hands each request to the script of the agent that sent it."""

    name = "router"

    def __init__(self, **routes: Any) -> None:
        self.routes = {_key(k): v for k, v in routes.items()}

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        first = request.messages[0].text
        if first not in self.routes:
            raise AssertionError(f"no script for an agent whose prompt is {first!r}")
        stream: AsyncIterator[ProviderEvent] = self.routes[first].stream(request)
        return stream


def _key(name: str) -> str:
    return PARENT if name == "parent" else name.replace("_", " ")


class Echo(BuiltinTool[EchoInput]):
    name = "Echo"
    description = "Echo the text back."
    input_model = EchoInput
    read_only = True

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text(f"echo: {args.text} (cwd {ctx.env.cwd.name})")


class Meet(BuiltinTool[EchoInput]):
    """Returns only once ``parties`` calls are inside it at the same time."""

    name = "Meet"
    description = "Wait for the others."
    input_model = EchoInput
    read_only = True

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_here = asyncio.Event()

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        self.arrived += 1
        if self.arrived == self.parties:
            self.all_here.set()
        await self.all_here.wait()
        return ToolOutput.text(f"met {args.text}")


class Stuck(BuiltinTool[EchoInput]):
    """Never returns; records that it started and that it was cancelled."""

    name = "Stuck"
    description = "Hang."
    input_model = EchoInput
    read_only = True

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class FakeDispatcher:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> CallOutcome:
        self.calls.append((server, tool))
        text = f"{server}.{tool}({json.dumps(dict(arguments))})"
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)])


class FakeMcp:
    """The part of McpManager a session reads: the current tools."""

    def __init__(self, catalog: Mapping[str, Sequence[str]], *, eager: Sequence[str] = ()) -> None:
        self.dispatcher = FakeDispatcher()
        self.eager = set(eager)
        self.order_settled = True
        self._tools = tuple(
            McpTool(
                server=server,
                tool_name=tool,
                name=wire_name(server, tool),
                description=f"{tool.replace('_', ' ')} on {server}",
                input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
                dispatcher=self.dispatcher,
            )
            for server, tools in catalog.items()
            for tool in tools
        )

    def tools(self) -> tuple[McpTool, ...]:
        return self._tools

    def server_names(self) -> list[str]:
        return list(dict.fromkeys(t.server for t in self._tools))

    def server_config(self, name: str) -> Any:
        return SimpleNamespace(lazy=False) if name in self.eager else None

    def statuses(self) -> list[Any]:
        return []

    def unlisted(self) -> tuple[str, ...]:
        return ()

    def instructions(self, name: str) -> str | None:
        return None

    def serves_resources(self) -> bool:
        return False

    def server_instructions(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def wait_listed(
        self,
        names: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[Any]:
        return []


CATALOG = {
    "github": ["create_issue", "search_issues", "list_pull_requests"],
    "gitlab": ["create_issue", "list_pipelines"],
}


def make_session(
    router: Router,
    root: Path,
    *,
    definitions: Sequence[AgentDefinition] = (GENERAL_PURPOSE,),
    tools: Sequence[Tool] = (),
    mcp: FakeMcp | None = None,
    settings: Settings | None = None,
    events: list[AgentEvent] | None = None,
) -> Session:
    session = Session(
        settings=settings or Settings(),
        provider=router,
        model="parent-model",
        system_prompt="You are the parent.",
        env=ToolEnv(cwd=root, project_root=root),
        builtins=[Echo(), Note(), *tools],
        agents=definitions,
        mcp=mcp,  # type: ignore[arg-type]
        listeners=[events.append] if events is not None else [],
    )
    return session


def agent_tool(session: Session) -> AgentTool:
    tool = session.toolset.find("Agent")
    assert isinstance(tool, AgentTool)
    return tool


def agent_call(prompt: str, subagent_type: str | None = None, *, id: str) -> Any:
    args = {"description": "test task", "prompt": prompt}
    if subagent_type:
        args["subagent_type"] = subagent_type
    return tool_call("Agent", args, id=id)


def tool_results(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    return [p for p in provider.requests[request].messages[-1].parts if isinstance(p, ToolResult)]


REVIEWER = AgentDefinition(
    name="reviewer",
    description="Reviews code.",
    system_prompt="You review code.",
    tools=("Echo", "mcp__github__*"),
    model="child-model",
    max_turns=3,
    source="project",
    path=Path("/x/.caliban/agents/reviewer.md"),
)


# ---------------------------------------------------------------------------- basics


async def test_child_runs_with_its_own_history_and_reports_back(project: Path) -> None:
    parent = ScriptedProvider(
        [reply("Delegating.", agent_call("look around", id="call_A")), "All done."]
    )
    child = ScriptedProvider(
        [reply(tool_call("Echo", {"text": "hi"})), "Found it: the answer is 42."],
        usage=Usage(input_tokens=100, output_tokens=7),
    )
    events: list[AgentEvent] = []
    session = make_session(Router(parent=parent, look_around=child), project, events=events)

    with hang_guard():
        result = await session.run(PARENT)

    assert result.text == "All done."
    first_child_request = child.requests[0]
    assert [m.text for m in first_child_request.messages] == ["look around"]
    assert first_child_request.model == "parent-model"
    assert first_child_request.system.startswith(GENERAL_PURPOSE.system_prompt)
    assert f"Working directory: {project}" in first_child_request.system
    [answer] = tool_results(parent, 1)
    assert not answer.is_error
    assert [part.text for part in answer.content] == [  # type: ignore[union-attr]
        "Found it: the answer is 42.",
        "[sub-agent general-purpose: 2 turns, 200 in / 14 out tokens]",
    ]
    # The parent's history holds the Agent call and its answer, nothing of the child's work.
    assert len(session.conversation.messages) == 4
    assert "echo: hi" not in json.dumps([m.text for m in session.conversation.messages])
    # Sub-agent spend counts toward the session (for /cost).
    assert session.ledger.total() == Usage(input_tokens=220, output_tokens=24)
    [finished] = [e for e in events if isinstance(e, ToolFinished) and e.call.name == "Agent"]
    assert finished.summary == "general-purpose: 2 turns, 200 in / 14 out tokens"


async def test_child_events_carry_the_agent_call_id(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("child work", id="call_7")), "ok"])
    child = ScriptedProvider([reply(tool_call("Echo", {"text": "x"})), "child answer"])
    events: list[AgentEvent] = []
    session = make_session(Router(parent=parent, child_work=child), project, events=events)
    with hang_guard():
        await session.run(PARENT)

    child_events = [e for e in events if e.parent_tool_use_id == "call_7"]
    parent_events = [e for e in events if e.parent_tool_use_id is None]
    assert {type(e).__name__ for e in child_events} >= {
        "UserPrompt",
        "AssistantMessage",
        "ToolStarted",
        "ToolFinished",
        "ToolResultsMessage",
    }
    assert [e.message.text for e in child_events if isinstance(e, AssistantMessage)] == [
        "",
        "child answer",
    ]
    assert all(e.parent_tool_use_id in (None, "call_7") for e in events)
    assert [e.call.name for e in parent_events if isinstance(e, ToolStarted)] == ["Agent"]
    assert [e.message.text for e in parent_events if isinstance(e, UserPrompt)] == [PARENT]
    # A transcript that keeps the events without a parent id rebuilds the parent's history.
    appended = (UserPrompt, AssistantMessage, ToolResultsMessage, HistoryAppended)
    rebuilt = [e.message for e in parent_events if isinstance(e, appended)]
    assert rebuilt == session.conversation.messages
    assert len([e for e in child_events if isinstance(e, appended)]) == 4


async def test_definition_sets_prompt_model_tools_and_turn_limit(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("review it", "reviewer", id="c1")), "ok"])
    child = ScriptedProvider([reply(tool_call("Echo", {"text": str(i)})) for i in range(3)])
    session = make_session(
        Router(parent=parent, review_it=child),
        project,
        definitions=[REVIEWER, GENERAL_PURPOSE],
        mcp=FakeMcp(CATALOG),
    )
    with hang_guard():
        await session.run(PARENT)

    assert child.requests[0].model == "child-model"
    assert child.requests[0].system.startswith("You review code.\n\n<env>")
    assert child.offered[0] == [
        "Echo",
        "mcp__github__create_issue",
        "mcp__github__search_issues",
        "mcp__github__list_pull_requests",
    ]
    assert len(child.requests) == 3  # max_turns: 3
    [answer] = tool_results(parent, 1)
    assert answer.is_error
    assert "Reached the maximum number of turns (3)" in answer.text
    assert answer.text.endswith("[sub-agent reviewer: 3 turns, 30 in / 15 out tokens]")


async def test_without_an_allowlist_the_child_gets_every_tool_but_agent(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("do it", id="c1")), "ok"])
    child = ScriptedProvider(["done"])
    session = make_session(Router(parent=parent, do_it=child), project, mcp=FakeMcp(CATALOG))
    with hang_guard():
        await session.run(PARENT)
    assert "Agent" in parent.offered[0]
    all_mcp = [t.name for t in FakeMcp(CATALOG).tools()]
    assert child.offered[0] == ["Echo", "Note", *all_mcp]


async def test_child_cannot_spawn_sub_agents(project: Path) -> None:
    nested = AgentDefinition(
        name="nester", description="d", system_prompt="", tools=("Agent", "Echo")
    )
    parent = ScriptedProvider([reply(agent_call("go deeper", "nester", id="c1")), "ok"])
    child = ScriptedProvider([reply(agent_call("deeper still", id="c2")), "could not"])
    session = make_session(
        Router(parent=parent, go_deeper=child), project, definitions=[nested, GENERAL_PURPOSE]
    )
    with hang_guard():
        await session.run(PARENT)
    assert child.offered[0] == ["Echo"]
    [refused] = tool_results(child, 1)
    assert refused.is_error and "Unknown tool 'Agent'" in refused.text


async def test_unknown_subagent_type_lists_the_available_ones(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("x", "nope", id="c1")), "ok"])
    session = make_session(Router(parent=parent), project, definitions=[REVIEWER, GENERAL_PURPOSE])
    with hang_guard():
        await session.run(PARENT)
    [error] = tool_results(parent, 1)
    assert error.is_error
    assert error.text == (
        "Unknown subagent_type 'nope'. Available agent types: reviewer, general-purpose."
    )


async def test_tool_description_lists_the_agent_types(project: Path) -> None:
    session = make_session(Router(), project, definitions=[REVIEWER, GENERAL_PURPOSE])
    tool = agent_tool(session)
    description = tool.spec.description
    assert "- reviewer: Reviews code. (Tools: Echo, mcp__github__*)" in description
    assert f"- general-purpose: {GENERAL_PURPOSE.description} (Tools: all)" in description
    assert set(tool.spec.input_schema["required"]) == {"description", "prompt"}


async def test_long_answer_is_cut_with_a_note(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("write a lot", id="c1")), "ok"])
    child = ScriptedProvider(["x" * 250])
    session = make_session(Router(parent=parent, write_a_lot=child), project)
    tool = agent_tool(session)
    tool.max_result_chars = 100
    with hang_guard():
        await session.run(PARENT)
    [answer] = tool_results(parent, 1)
    assert answer.text.startswith("x" * 100 + "\n[… answer cut: the sub-agent wrote 250 ")
    assert "x" * 101 not in answer.text


async def test_permission_policy_applies_to_children(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("take notes", id="c1")), "ok"])
    child = ScriptedProvider([reply(tool_call("Note", {"text": "x"})), "denied"])
    session = make_session(Router(parent=parent, take_notes=child), project)
    session.authorizer = Refusing(
        lambda call: "read-only session" if call.tool.name == "Note" else None
    )
    with hang_guard():
        await session.run(PARENT)
    [denied] = tool_results(child, 1)
    assert denied.is_error and "Permission denied for Note: read-only session" in denied.text


async def test_child_env_is_a_fork(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("move", id="c1")), "ok"])

    def move_and_answer(request: ProviderRequest) -> str:
        return "moved"

    child = ScriptedProvider([move_and_answer])
    seen: list[ToolEnv] = []
    session = make_session(Router(parent=parent, move=child), project)
    tool = agent_tool(session)
    spawn = tool.spawn

    def spying_spawn(definition: AgentDefinition, ctx: CallContext) -> Any:
        agent = spawn(definition, ctx)
        seen.append(agent.env)
        agent.env.cwd = project / "elsewhere"
        agent.env.file_reads[project / "f"] = 1
        return agent

    tool.spawn = spying_spawn
    with hang_guard():
        await session.run(PARENT)
    assert seen and seen[0] is not session.env
    assert session.env.cwd == project and session.env.file_reads == {}


# ---------------------------------------------------------------------------- concurrency


async def test_two_children_run_in_parallel(project: Path) -> None:
    """Each child's tool returns only when both are inside it: serial runs would hang."""
    meet = Meet(parties=2)
    parent = ScriptedProvider(
        [reply(agent_call("left", id="cL"), agent_call("right", id="cR")), "both done"]
    )
    left = ScriptedProvider([reply(tool_call("Meet", {"text": "L"})), "left answer"])
    right = ScriptedProvider([reply(tool_call("Meet", {"text": "R"})), "right answer"])
    session = make_session(Router(parent=parent, left=left, right=right), project, tools=[meet])
    with hang_guard():
        result = await session.run(PARENT)
    assert result.text == "both done"
    left_answer, right_answer = tool_results(parent, 1)
    assert left_answer.text.startswith("left answer")
    assert right_answer.text.startswith("right answer")
    assert tool_results(left, 1)[0].text == "met L"


class HangingModel:
    """A provider whose one request never answers; records that it was cancelled."""

    name = "hanging"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield TextDelta(text="")  # unreachable: makes this an async generator


async def test_cancelling_the_parent_cancels_its_children(project: Path) -> None:
    stuck = Stuck()
    parent = ScriptedProvider([reply(agent_call("hang", id="c1"), agent_call("wait", id="c2"))])
    hanging_tool = ScriptedProvider([reply(tool_call("Stuck", {}))])
    hanging_model = HangingModel()
    session = make_session(
        Router(parent=parent, hang=hanging_tool, wait=hanging_model), project, tools=[stuck]
    )
    task = asyncio.create_task(session.run(PARENT))
    with hang_guard():
        await stuck.started.wait()
        await hanging_model.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert hanging_model.cancelled
    assert stuck.cancelled
    # The parent's history stays valid: both Agent calls have a result.
    last = session.conversation.messages[-1]
    results = [p for p in last.parts if isinstance(p, ToolResult)]
    assert [r.tool_call_id for r in results] == ["c1", "c2"]
    assert all(r.is_error and r.text == INTERRUPTED for r in results)


# ---------------------------------------------------------------------------- lazy MCP

LAZY = Settings.model_validate({"tools": {"lazy_mcp": True, "max_active_schemas": 4}})
GH_CREATE = "mcp__github__create_issue"
GH_SEARCH = "mcp__github__search_issues"
GH_PRS = "mcp__github__list_pull_requests"
GL_CREATE = "mcp__gitlab__create_issue"
GL_PIPES = "mcp__gitlab__list_pipelines"


def lazy_session(router: Router, root: Path, *, mcp: FakeMcp | None = None, **kw: Any) -> Session:
    session = make_session(router, root, mcp=mcp or FakeMcp(CATALOG), settings=LAZY, **kw)
    assert session.activation is not None, "lazy_mcp = true must give the session a cell"
    return session


def mcp_offered(provider: ScriptedProvider, request: int) -> list[str]:
    return [name for name in provider.offered[request] if name.startswith("mcp__")]


def preset(session: Session, *names: str) -> McpActivationSet:
    assert session.activation is not None
    session.activation.activate(names)
    return session.activation.get()


async def test_child_inherits_the_parents_active_tools(project: Path) -> None:
    parent = ScriptedProvider([reply(agent_call("inherit", id="c1")), "ok"])
    child = ScriptedProvider(["done"])
    session = lazy_session(Router(parent=parent, inherit=child), project)
    preset(session, GH_CREATE, GL_PIPES)
    with hang_guard():
        await session.run(PARENT)
    assert mcp_offered(parent, 0) == [GH_CREATE, GL_PIPES]
    assert mcp_offered(child, 0) == [GH_CREATE, GL_PIPES]
    assert "ToolSearch" in child.offered[0]


async def test_child_can_start_from_an_empty_set(project: Path) -> None:
    fresh = AgentDefinition(
        name="fresh", description="d", system_prompt="", inherit_active_mcp=False
    )
    parent = ScriptedProvider([reply(agent_call("start fresh", "fresh", id="c1")), "ok"])
    child = ScriptedProvider(["done"])
    session = lazy_session(Router(parent=parent, start_fresh=child), project, definitions=[fresh])
    preset(session, GH_CREATE, GL_PIPES)
    with hang_guard():
        await session.run(PARENT)
    assert mcp_offered(child, 0) == []
    assert "ToolSearch" in child.offered[0]


async def test_child_activations_never_reach_the_parent(project: Path) -> None:
    parent = ScriptedProvider(
        [reply(agent_call("search more", id="c1")), reply(tool_call("Echo", {})), "ok"]
    )
    child = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": f"select:{GL_CREATE},{GH_PRS}"})),
            reply(tool_call(GH_SEARCH, {"q": "bug"})),
            "done",
        ]
    )
    session = lazy_session(Router(parent=parent, search_more=child), project)
    before = preset(session, GH_CREATE)
    with hang_guard():
        await session.run(PARENT)
    assert session.activation is not None
    assert session.activation.get() is before
    assert mcp_offered(child, 1) == [GH_CREATE, GL_CREATE, GH_PRS]
    assert mcp_offered(child, 2) == [GH_CREATE, GL_CREATE, GH_PRS, GH_SEARCH]
    assert mcp_offered(parent, 1) == mcp_offered(parent, 2) == [GH_CREATE]


async def test_allowlist_filters_inherited_offered_and_searchable_tools(project: Path) -> None:
    github_only = AgentDefinition(
        name="gh", description="d", system_prompt="", tools=("Echo", "mcp__github__*")
    )
    parent = ScriptedProvider([reply(agent_call("github work", "gh", id="c1")), "ok"])
    child = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": "create issue"})),
            reply(tool_call("ToolSearch", {"query": f"select:{GL_PIPES}"})),
            "done",
        ]
    )
    session = lazy_session(
        Router(parent=parent, github_work=child), project, definitions=[github_only]
    )
    preset(session, GL_CREATE, GH_SEARCH)
    with hang_guard():
        await session.run(PARENT)
    assert mcp_offered(child, 0) == [GH_SEARCH]  # gitlab was active in the parent
    assert "Note" not in child.offered[0]
    [found] = tool_results(child, 1)
    assert GH_CREATE in found.text and GL_CREATE not in found.text
    assert mcp_offered(child, 1) == [GH_SEARCH, GH_CREATE]
    [not_found] = tool_results(child, 2)
    assert GL_PIPES not in mcp_offered(child, 2)
    assert "No MCP tools matched" in not_found.text


async def test_exactly_named_mcp_tools_are_active_from_the_first_turn(project: Path) -> None:
    named = AgentDefinition(
        name="named",
        description="d",
        system_prompt="",
        tools=("Echo", GL_PIPES, "mcp__github__search_*"),
        inherit_active_mcp=False,
    )
    parent = ScriptedProvider([reply(agent_call("pipelines", "named", id="c1")), "ok"])
    child = ScriptedProvider(["done"])
    session = lazy_session(Router(parent=parent, pipelines=child), project, definitions=[named])
    before = preset(session, GH_CREATE)
    with hang_guard():
        await session.run(PARENT)
    assert mcp_offered(child, 0) == [GL_PIPES]  # the glob is found by search, not preloaded
    assert session.activation is not None and session.activation.get() is before


async def test_inherited_snapshot_is_the_same_value(project: Path) -> None:
    """inherit_active_mcp shares the parent's immutable set; nothing is copied."""
    session = lazy_session(Router(), project)
    snapshot = preset(session, GH_CREATE)
    child = session.spawn_child(GENERAL_PURPOSE, CallContext(env=session.env, call_id="c1"))
    lazy = child_lazy(child)
    assert lazy.activation.get() is snapshot and lazy.activation is not session.activation


async def test_named_tools_of_eager_servers_take_no_activation_slot(project: Path) -> None:
    named = AgentDefinition(
        name="named",
        description="d",
        system_prompt="",
        tools=(GL_PIPES, GH_PRS),
        inherit_active_mcp=False,
    )
    session = lazy_session(Router(), project, mcp=FakeMcp(CATALOG, eager=["gitlab"]))
    child = session.spawn_child(named, CallContext(env=session.env, call_id="c1"))
    assert child_lazy(child).activation.get().names() == (GH_PRS,)
    assert [t.name for t in child.toolset.offered()] == [GL_PIPES, GH_PRS]


def child_lazy(child: Agent) -> LazyMcpToolset:
    """The lazy MCP part of a child's toolset (built-ins first, then MCP)."""
    assert isinstance(child.toolset, CombinedToolset)
    [lazy] = [part for part in child.toolset.parts if isinstance(part, LazyMcpToolset)]
    return lazy


async def test_claude_code_model_aliases_resolve_for_the_provider(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """model: haiku in an agent file, or the Agent call's model parameter, becomes the model
    id Claude Code sends; for a provider without the alias the parent's model is kept."""
    haiku_agent = AgentDefinition(name="h", description="d", system_prompt="H.", model="haiku")
    parent = ScriptedProvider(
        [
            reply(agent_call("file model", "h", id="c1")),
            reply(
                tool_call(
                    "Agent", {"description": "t", "prompt": "param model", "model": "opus"}, id="c2"
                )
            ),
            "ok",
        ]
    )
    by_file, by_param = ScriptedProvider(["a"]), ScriptedProvider(["b"])
    router = Router(parent=parent, file_model=by_file, param_model=by_param)
    router.name = "anthropic"
    session = make_session(router, project, definitions=[haiku_agent, GENERAL_PURPOSE])
    with hang_guard():
        await session.run(PARENT)
    assert by_file.requests[0].model == "claude-haiku-4-5-20251001"
    assert by_param.requests[0].model == "claude-opus-4-8"

    monkeypatch.setenv("ANTHROPIC_DEFAULT_HAIKU_MODEL", "my-gateway-haiku")
    other = Router(parent=ScriptedProvider([reply(agent_call("again", "h", id="c3")), "ok"]))
    other.routes[_key("again")] = child = ScriptedProvider(["c"])
    events: list[AgentEvent] = []
    with hang_guard():
        await make_session(other, project, definitions=[haiku_agent], events=events).run(PARENT)
    assert child.requests[0].model == "my-gateway-haiku"

    monkeypatch.delenv("ANTHROPIC_DEFAULT_HAIKU_MODEL")
    third = Router(parent=ScriptedProvider([reply(agent_call("third", "h", id="c4")), "ok"]))
    third.routes[_key("third")] = child = ScriptedProvider(["c"])
    with hang_guard():
        await make_session(third, project, definitions=[haiku_agent], events=events).run(PARENT)
    assert child.requests[0].model == "parent-model"
    assert any(
        "'haiku' is a Claude Code alias with no meaning for router" in getattr(e, "text", "")
        for e in events
    )


async def test_max_turns_of_the_session_bounds_its_sub_agents(project: Path) -> None:
    looping = ScriptedProvider([reply(tool_call("Echo", {"text": f"{n}"})) for n in range(10)])
    parent = ScriptedProvider([reply(agent_call("loop", id="c1")), "gave up"])
    session = make_session(Router(parent=parent, loop=looping), project)
    session.max_turns = 3  # caliban -p --max-turns 3
    with hang_guard():
        await session.run(PARENT)
    assert len(looping.requests) == 3  # not the 50 a definition without max_turns allows
    [answer] = tool_results(parent, 1)
    assert "[sub-agent stopped before finishing: Reached the maximum number of turns (3).]" in (
        answer.text
    )
