"""The per-turn wire filter (the lazy MCP toolset), the deferred paragraph and the lazy
loading settings."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hang import cpu_time
from lazy_fakes import (
    CATALOG,
    Echo,
    FakeMcp,
    LazyBox,
    Note,
    StaticCatalog,
    lazy_settings,
    make_session,
    make_tools,
)

from caliban.config.settings import Settings
from caliban.events import ActivationChanged
from caliban.mcp.lazy.manifest import MANIFEST_BUDGET_TOKENS, deferred_paragraph, group_by_server
from caliban.mcp.lazy.policy import LazyPolicy, decide, resolve_policy
from caliban.mcp.lazy.toolset import DeferredTool
from caliban.mcp.tools import McpTool, unmark
from caliban.providers.scripted import ScriptedProvider
from caliban.tools.base import CallContext, McpOrigin, ToolEnv, call_tool
from caliban.toolsets.base import Toolset
from caliban.toolsets.tool_list import ToolList
from caliban.util.tokens import estimate_tokens

pytestmark = pytest.mark.anyio

GH_CREATE = "mcp__github__create_issue"
GH_SEARCH = "mcp__github__search_issues"
GH_PRS = "mcp__github__list_pull_requests"
GH_MERGE = "mcp__github__merge_pull_request"
GL_CREATE = "mcp__gitlab__create_issue"
GL_PIPES = "mcp__gitlab__list_pipelines"
TIME_NOW = "mcp__time__get_current_time"
TIME_CONVERT = "mcp__time__convert_time"


def toolbox(
    *, cap: int = 24, eager: frozenset[str] = frozenset(), catalog: dict[str, list[str]] = CATALOG
) -> LazyBox:
    return LazyBox(
        builtins=[Echo(), Note()],
        catalog=StaticCatalog(make_tools(catalog)),
        cap=cap,
        eager=eager,
    )


def names(box: LazyBox | Toolset) -> list[str]:
    return [tool.name for tool in box.offered()]


def paragraph(tools: tuple[McpTool, ...]) -> str:
    return deferred_paragraph(group_by_server([(t.server, t.tool_name) for t in tools]))


def ctx() -> CallContext:
    return CallContext(env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()), call_id="c1")


# ---------------------------------------------------------------------------- filter matrix


def test_nothing_active_offers_builtins_and_toolsearch_only() -> None:
    box = toolbox()
    assert names(box) == ["Echo", "Note", "ToolSearch"]


def test_eager_servers_are_always_offered_after_toolsearch() -> None:
    box = toolbox(eager=frozenset({"time"}))
    assert names(box) == ["Echo", "Note", "ToolSearch", TIME_NOW, TIME_CONVERT]


def test_tools_marked_always_load_stay_on_the_wire() -> None:
    """_meta["anthropic/alwaysLoad"] on one tool (fixtures/claude_code mcp_tool_search:
    mcp__metasrv__add sent in full, mcp__metasrv__echo deferred)."""
    import dataclasses

    tools = tuple(
        dataclasses.replace(tool, always_load=True) if tool.name == GH_SEARCH else tool
        for tool in make_tools(CATALOG)
    )
    box = LazyBox(builtins=[Echo()], catalog=StaticCatalog(tools))
    assert names(box) == ["Echo", "ToolSearch", GH_SEARCH]
    assert "search_issues" not in box.system_addendum()
    assert "create_issue" in box.system_addendum()


def test_always_load_is_read_from_the_tool_meta() -> None:
    import mcp_types

    from caliban.mcp.tools import tool_from_sdk

    listed = mcp_types.Tool.model_validate(
        {"name": "add", "inputSchema": {"type": "object"}, "_meta": {"anthropic/alwaysLoad": True}}
    )
    plain = mcp_types.Tool.model_validate({"name": "echo", "inputSchema": {"type": "object"}})
    assert tool_from_sdk("metasrv", listed).always_load
    assert not tool_from_sdk("metasrv", plain).always_load


def test_active_tools_follow_in_first_activation_order() -> None:
    box = toolbox(eager=frozenset({"time"}))
    box.activation.activate([GL_PIPES])
    box.activation.activate([GH_CREATE, GL_PIPES])  # GL_PIPES again: keeps its place
    box.activation.swap(lambda s: s.touch(GL_PIPES))
    assert names(box) == ["Echo", "Note", "ToolSearch", TIME_NOW, TIME_CONVERT, GL_PIPES, GH_CREATE]


def test_toolsearch_and_the_paragraph_stay_when_every_lazy_tool_is_active() -> None:
    box = toolbox(eager=frozenset({"github", "gitlab"}))
    before = (names(box), box.system_addendum())
    box.activation.activate([TIME_NOW, TIME_CONVERT])
    assert names(box) == [*before[0], TIME_NOW, TIME_CONVERT]  # appended, nothing removed
    assert box.system_addendum() == before[1] != ""


def test_only_eager_servers_means_no_toolsearch_and_no_paragraph() -> None:
    box = toolbox(eager=frozenset(CATALOG))
    assert names(box) == ["Echo", "Note", *(t.name for t in make_tools(CATALOG))]
    assert box.system_addendum() == ""


def test_a_turn_that_activates_nothing_sends_the_same_list() -> None:
    box = toolbox()
    box.activation.activate([GH_CREATE, GH_SEARCH])
    first = box.offered()
    box.activation.swap(lambda s: s.touch(GH_CREATE))  # a call refreshes recency only
    assert box.offered() == first
    assert box.offered() is box.offered()  # cached: no work on an unchanged turn


def test_active_names_missing_from_the_catalog_are_skipped() -> None:
    box = toolbox()
    box.activation.activate(["mcp__gone__tool", GH_CREATE])
    assert names(box) == ["Echo", "Note", "ToolSearch", GH_CREATE]


def test_allow_filter_hides_tools_from_offer_find_and_search() -> None:
    box = LazyBox(
        builtins=[Echo()],
        catalog=StaticCatalog(make_tools(CATALOG)),
        allow=lambda name: name.startswith("mcp__github__"),
    )
    box.activation.activate([GL_PIPES, GH_PRS])
    assert names(box) == ["Echo", "ToolSearch", GH_PRS]
    assert box.find(GL_CREATE) is None and box.find(GH_CREATE) is not None
    assert GL_CREATE not in box.names()
    outcome = box.search_tools("create issue", 5)
    found = [m.name for m in outcome.matches]
    assert found[0] == GH_CREATE and all(n.startswith("mcp__github__") for n in found)
    assert "gitlab" not in box.system_addendum()


def test_catalog_change_rebuilds_split_and_index() -> None:
    mcp = FakeMcp({"github": ["create_issue"]})
    box = LazyBox(builtins=[Echo()], catalog=mcp)
    assert box.search_tools("pipelines", 5).matches == ()
    assert "1 MCP tool " in box.system_addendum()
    mcp.set_catalog({"github": ["create_issue"], "gitlab": ["list_pipelines"]})
    assert "2 MCP tools " in box.system_addendum()
    assert [m.name for m in box.search_tools("pipelines", 5).matches] == [GL_PIPES]
    assert names(box) == ["Echo", "ToolSearch", GL_PIPES]


# ---------------------------------------------------------------------------- find / note_call


async def test_deferred_tool_is_found_wrapped_and_adds_its_schema_on_error() -> None:
    box = toolbox()
    tool = box.find(GH_CREATE)
    assert isinstance(tool, DeferredTool) and tool.name == GH_CREATE
    assert tool.origin == McpOrigin(server="github", tool="create_issue")
    ok = await call_tool(tool, {"q": "bug"}, ctx())
    assert not ok.is_error and unmark(ok.as_text) == (
        'github.create_issue({"q": "bug"})\n'
        f"({GH_CREATE} is now loaded: it is in your tool list.)"
    )
    failed = await call_tool(tool, {"title": "bug"}, ctx())
    assert failed.is_error
    assert "missing required argument 'q'" in failed.as_text
    assert '"required":["q"]' in failed.as_text and "now loaded" in failed.as_text


def test_active_and_eager_tools_are_found_unwrapped() -> None:
    box = toolbox(eager=frozenset({"time"}))
    box.activation.activate([GH_CREATE])
    assert not isinstance(box.find(GH_CREATE), DeferredTool)
    assert not isinstance(box.find(TIME_NOW), DeferredTool)
    assert box.find("Echo") is not None and box.find("ToolSearch") is box.tool_search
    assert box.find("mcp__github__nope") is None


def test_calling_a_deferred_tool_activates_it() -> None:
    box = toolbox(cap=2)
    box.activation.activate([GH_SEARCH, GH_PRS])  # the first name counts as most recent
    event = box.note_call(GL_PIPES)
    assert event == ActivationChanged(
        activated=(GL_PIPES,), evicted=(GH_PRS,), active=(GL_PIPES, GH_SEARCH)
    )
    assert names(box)[-2:] == [GH_SEARCH, GL_PIPES]


def test_calling_an_active_tool_refreshes_its_recency_without_an_event() -> None:
    box = toolbox(cap=2)
    box.activation.activate([GH_SEARCH, GH_PRS])  # GH_SEARCH is the most recent
    assert box.activation.get().names() == (GH_SEARCH, GH_PRS)
    assert box.note_call(GH_PRS) is None
    assert box.activation.get().names() == (GH_PRS, GH_SEARCH)
    box.note_call(GL_PIPES)  # evicts the least recently *used*: GH_SEARCH
    assert box.activation.get().names() == (GL_PIPES, GH_PRS)


def test_eager_and_builtin_calls_leave_the_set_alone() -> None:
    box = toolbox(eager=frozenset({"time"}))
    before = box.activation.get()
    assert box.note_call(TIME_NOW) is None and box.note_call("Echo") is None
    assert box.activation.get() is before


# ---------------------------------------------------------------------------- paragraph


def test_paragraph_counts_and_lists_the_whole_lazy_catalog() -> None:
    box = toolbox(eager=frozenset({"time"}))
    text = box.system_addendum()
    assert text.startswith("# Deferred MCP tools\n6 MCP tools from 2 servers are loaded on demand.")
    assert "ToolSearch" in text and "rest of the session" in text
    assert "- github (4): create_issue, search_issues, list_pull_requests, merge_pull_request" in (
        text
    )
    assert "- gitlab (2): create_issue, list_pipelines" in text
    assert "time" not in text.split("tool names):")[1]


def test_activations_never_change_the_paragraph() -> None:
    box = toolbox(cap=2)
    first = box.system_addendum()
    box.activation.activate([GH_CREATE])
    assert box.system_addendum() == first
    box.activation.activate([GL_PIPES, TIME_NOW])  # evicts GH_CREATE
    assert box.system_addendum() == first
    box.note_call(GH_MERGE)
    assert box.system_addendum() is first  # the same string: nothing was recomputed


def test_servers_still_starting_are_named_and_toolsearch_is_offered() -> None:
    class Starting(FakeMcp):
        def __init__(self) -> None:
            super().__init__({})
            self.pending: tuple[str, ...] = ("jira",)

        def unlisted(self) -> tuple[str, ...]:
            return self.pending

    mcp = Starting()
    box = LazyBox(builtins=[Echo()], catalog=mcp)
    box.lazy.servers = mcp
    assert names(box) == ["Echo", "ToolSearch"]
    text = box.system_addendum()
    assert text.startswith("# Deferred MCP tools\nMCP tools are loaded on demand.")
    assert text.endswith("\nServers still starting (ToolSearch waits for them): jira")
    mcp.pending = ()
    assert names(box) == ["Echo"] and box.system_addendum() == ""


def test_paragraph_is_deterministic() -> None:
    a, b = toolbox(), toolbox()
    assert a.system_addendum() == b.system_addendum() != ""


def test_paragraph_keeps_the_manifest_within_budget() -> None:
    big = {f"server{s:02d}": [f"tool_number_{t:03d}" for t in range(100)] for s in range(50)}
    tools = make_tools(big)
    text = paragraph(tools)
    manifest = text.split("tool names):\n", 1)[1]
    assert estimate_tokens(manifest) <= MANIFEST_BUDGET_TOKENS
    assert estimate_tokens(manifest) > MANIFEST_BUDGET_TOKENS * 0.8  # the budget is used
    assert text.count("\n- ") == 50 and "5000 MCP tools from 50 servers" in text
    assert "- server00 (100): tool_number_000, " in text and "… and 9" in text
    assert paragraph(tools) == text


def test_paragraph_with_too_many_servers_for_their_counts() -> None:
    many = {f"s{i:04d}": ["only_tool"] for i in range(2000)}
    text = paragraph(make_tools(many))
    manifest = text.split("tool names):\n", 1)[1]
    assert estimate_tokens(manifest) <= MANIFEST_BUDGET_TOKENS
    assert manifest.splitlines()[-1].startswith("- … and ")
    assert "more servers (" in manifest


def test_small_catalog_lists_every_name() -> None:
    text = paragraph(make_tools({"time": ["get_current_time", "convert_time"]}))
    assert text.endswith("- time (2): get_current_time, convert_time")
    assert "2 MCP tools from 1 server are" in text


# ---------------------------------------------------------------------------- cost per turn


def test_filter_costs_well_under_a_fifth_of_a_millisecond_at_1000_tools() -> None:
    catalog = {f"server{s}": [f"tool_{t}" for t in range(100)] for s in range(10)}
    box = LazyBox(builtins=[Echo(), Note()], catalog=StaticCatalog(make_tools(catalog)))
    box.activation.activate([f"mcp__server{s}__tool_{s}" for s in range(10)])
    box.offered()
    samples = []
    for _ in range(300):
        with cpu_time() as spent:
            box.offered()
            box.system_addendum()
        samples.append(spent.seconds)
    assert statistics.median(samples) < 0.0002


# ---------------------------------------------------------------------------- settings


def test_policy_resolution() -> None:
    on = resolve_policy(lazy_settings(True, 8).tools, {"gh": None, "time": False, "big": True})
    assert on == LazyPolicy(
        mode="on",
        cap=8,
        pinned_eager=frozenset({"time"}),
        forced_lazy=frozenset({"big"}),
        preactivate=3,
    )
    assert not resolve_policy(Settings().tools).may_be_lazy
    assert resolve_policy(Settings().tools, {"big": True}).may_be_lazy


def test_cap_zero_warns_and_turns_lazy_loading_off() -> None:
    policy = resolve_policy(lazy_settings(True, 0).tools, {"big": True})
    assert policy.mode == "off" and not policy.may_be_lazy
    assert policy.warning is not None and "max_active_schemas = 0" in policy.warning
    assert resolve_policy(lazy_settings(False, 0).tools).warning is None


def test_auto_is_lazy_above_a_tenth_of_the_window() -> None:
    tools = make_tools(CATALOG)  # ~8 small tools: a few hundred tokens
    policy = resolve_policy(lazy_settings("auto").tools, {"time": False})
    assert not decide(policy, tools, context_window=200_000).lazy
    small_window = decide(policy, tools, context_window=1_000)
    assert small_window.lazy and small_window.eager_servers == {"time"}


def test_a_server_forced_lazy_makes_the_others_eager() -> None:
    policy = resolve_policy(Settings().tools, {"github": True, "time": None, "idle": None})
    decision = decide(policy, make_tools(CATALOG), context_window=200_000)
    assert decision.lazy and not decision.is_eager("github")
    assert all(decision.is_eager(server) for server in ("gitlab", "time", "idle"))


# ---------------------------------------------------------------------------- session


def test_lazy_off_offers_every_tool(tmp_path: Path) -> None:
    mcp = FakeMcp(CATALOG)
    session = make_session(ScriptedProvider([]), tmp_path, mcp=mcp, settings=Settings())
    assert session.activation is None and not session.lazy
    request = session.agent().build_request()
    plain = ToolList([*session.builtins, *mcp.tools()])
    assert request.tools == tuple(tool.spec for tool in plain.offered())
    assert request.system == "You are a test."


def test_session_lazy_auto_follows_catalog_size(tmp_path: Path) -> None:
    session = make_session(ScriptedProvider([]), tmp_path, settings=lazy_settings("auto"))
    assert session.activation is not None and not session.lazy
    assert "ToolSearch" not in names(session.toolset) and len(names(session.toolset)) == 10
    huge = {f"s{i}": [f"tool_with_a_longer_name_{t}" for t in range(200)] for i in range(20)}
    assert isinstance(session.mcp, FakeMcp)
    session.mcp.set_catalog(huge)  # ~4,000 tools: well over 10% of 128k tokens
    assert session.lazy and names(session.toolset) == ["Echo", "Note", "ToolSearch"]


def test_server_pinned_eager_in_a_lazy_session(tmp_path: Path) -> None:
    mcp = FakeMcp(CATALOG, lazy={"time": False})
    session = make_session(ScriptedProvider([]), tmp_path, mcp=mcp)
    assert names(session.toolset)[2:] == ["ToolSearch", TIME_NOW, TIME_CONVERT]


def test_clear_empties_the_activation_set_keeping_the_cap(tmp_path: Path) -> None:
    session = make_session(ScriptedProvider([]), tmp_path, settings=lazy_settings(True, 7))
    assert session.activation is not None
    cell = session.activation
    cell.activate([GH_CREATE])
    session.clear()
    assert session.activation is cell and len(cell.get()) == 0 and cell.get().cap == 7


async def test_one_toolset_serves_every_prompt_of_a_session(tmp_path: Path) -> None:
    session = make_session(ScriptedProvider([]), tmp_path)
    assert session.agent().toolset is session.agent().toolset is session.toolset


def test_the_index_is_built_ahead_only_when_there_is_something_to_index(tmp_path: Path) -> None:
    session = make_session(ScriptedProvider([]), tmp_path)
    build = session.search_index_builder()
    assert build is not None
    index = build()
    again = session.search_index_builder()
    assert again is not None and again() is index  # built once per catalog
    empty = make_session(ScriptedProvider([]), tmp_path, mcp=FakeMcp({}))
    assert empty.search_index_builder() is None
    eager = make_session(ScriptedProvider([]), tmp_path, settings=Settings())
    assert eager.search_index_builder() is None
