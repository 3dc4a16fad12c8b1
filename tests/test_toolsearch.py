"""The ToolSearch tool: its input, its answer, and what it activates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lazy_fakes import CATALOG, Echo, LazyBox, StaticCatalog, make_tools

from caliban.events import ActivationChanged, AgentEvent
from caliban.mcp.lazy.tool_search import ToolSearch
from caliban.permissions.policy import decide
from caliban.permissions.rules import PermissionRules
from caliban.tools.base import BUILTIN, CallContext, ToolEnv, ToolOutput

pytestmark = pytest.mark.anyio

GH_CREATE = "mcp__github__create_issue"
GH_SEARCH = "mcp__github__search_issues"
GL_CREATE = "mcp__gitlab__create_issue"
GL_PIPES = "mcp__gitlab__list_pipelines"
TIME_NOW = "mcp__time__get_current_time"


def toolbox(cap: int = 24, eager: frozenset[str] = frozenset()) -> LazyBox:
    return LazyBox(
        builtins=[Echo()], catalog=StaticCatalog(make_tools(CATALOG)), cap=cap, eager=eager
    )


async def search(
    box: LazyBox, events: list[AgentEvent] | None = None, **arguments: object
) -> ToolOutput:
    sink = events if events is not None else []
    ctx = CallContext(
        env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()), call_id="c1", emit=sink.append
    )
    return await box.tool_search.call(arguments, ctx)


def test_claude_code_input_shape() -> None:
    spec = ToolSearch(toolbox().lazy).spec
    assert spec.name == "ToolSearch"
    assert spec.input_schema["required"] == ["query"]
    props = spec.input_schema["properties"]
    assert set(props) == {"query", "max_results"}
    assert props["max_results"]["default"] == 5 and props["max_results"]["maximum"] == 25


def test_read_only_so_allowed_in_plan_mode(tmp_path: Path) -> None:
    tool = toolbox().tool_search
    assert tool.read_only and tool.origin == BUILTIN
    for mode in ("plan", "default"):
        decision = decide(
            tool.name,
            None,
            read_only=tool.read_only,
            origin=tool.origin,
            mode=mode,  # type: ignore[arg-type]
            rules=PermissionRules(),
            project_root=tmp_path,
        )
        assert decision.behavior == "allow", mode


async def test_result_lists_name_description_schema_and_activates() -> None:
    box = toolbox()
    events: list[AgentEvent] = []
    output = await search(box, events, query="list pipelines", max_results=1)
    assert not output.is_error and output.summary == "1 tool"
    text = output.as_text
    assert text.startswith("Found 1 MCP tool for 'list pipelines'. It is loaded: call by name.")
    assert (
        f'\n\n{GL_PIPES} (newly activated)\n<mcp-data server="gitlab">\n'
        "List pipelines on gitlab.\n</mcp-data>\n"
    ) in text
    schema = json.loads(text.split("Input schema: ", 1)[1].splitlines()[0])
    assert schema["required"] == ["q"] and "What list_pipelines" in json.dumps(schema)
    assert box.activation.get().names() == (GL_PIPES,)
    assert events == [ActivationChanged(activated=(GL_PIPES,), evicted=(), active=(GL_PIPES,))]


async def test_already_active_is_marked_and_announces_nothing() -> None:
    box = toolbox()
    await search(box, query=f"select:{GH_CREATE}")
    events: list[AgentEvent] = []
    output = await search(box, events, query=f"select:{GH_CREATE},{GL_CREATE}")
    assert f"{GH_CREATE} (already active)" in output.as_text
    assert f"{GL_CREATE} (newly activated)" in output.as_text
    assert events == [
        ActivationChanged(activated=(GL_CREATE,), evicted=(), active=(GH_CREATE, GL_CREATE))
    ]
    events.clear()
    await search(box, events, query=f"select:{GL_CREATE}")
    assert events == []


async def test_eviction_line_when_the_cap_forces_it() -> None:
    box = toolbox(cap=2)
    await search(box, query=f"select:{GH_CREATE},{GH_SEARCH}")
    events: list[AgentEvent] = []
    output = await search(box, events, query=f"select:{GL_PIPES}")
    assert output.as_text.endswith(f"\n\nEvicted (least recently used): {GH_SEARCH}")
    assert box.activation.get().names() == (GL_PIPES, GH_CREATE)
    assert events[0] == ActivationChanged(
        activated=(GL_PIPES,), evicted=(GH_SEARCH,), active=(GL_PIPES, GH_CREATE)
    )


async def test_no_match_names_the_servers() -> None:
    output = await search(toolbox(eager=frozenset({"time"})), query="kubernetes pods")
    assert not output.is_error and output.summary == "no match"
    assert output.as_text == (
        "No MCP tools matched 'kubernetes pods'.\nServers: github (4 tools), gitlab (2 tools)"
    )


async def test_select_bare_name_and_missing_names() -> None:
    box = toolbox()
    output = await search(box, query="select:create_issue,list_pipeline")
    text = output.as_text
    assert f"{GH_CREATE} (newly activated)" in text and f"{GL_CREATE} (newly activated)" in text
    assert f"Not found: list_pipeline. Closest: {GL_PIPES}, " in text
    assert GL_PIPES not in box.activation.get()


async def test_select_of_only_missing_names() -> None:
    output = await search(toolbox(), query="select:mcp__github__create_isue")
    assert output.as_text.splitlines() == [
        "No MCP tools matched 'select:mcp__github__create_isue'.",
        f"Not found: mcp__github__create_isue. Closest: {GH_CREATE}, {GL_CREATE}, {GH_SEARCH}.",
        "Servers: github (4 tools), gitlab (2 tools), time (2 tools)",
    ]


async def test_select_of_an_eager_tool_says_it_is_there() -> None:
    box = toolbox(eager=frozenset({"time"}))
    output = await search(box, query=f"select:{TIME_NOW}")
    assert f"{TIME_NOW} (already active)" in output.as_text
    assert len(box.activation.get()) == 0  # eager tools never count toward the cap


async def test_select_of_an_eager_tool_by_its_bare_name_finds_it() -> None:
    # select: takes bare names (the description says so); an eager tool is not in the
    # search index, so without this it came back "Not found" although it is on the wire
    box = toolbox(eager=frozenset({"time"}))
    output = await search(box, query="select:get_current_time")
    assert f"{TIME_NOW} (already active)" in output.as_text
    assert "Not found" not in output.as_text
    assert len(box.activation.get()) == 0


async def test_max_results_bounds() -> None:
    box = toolbox()
    for bad in (0, 26, "many"):
        output = await search(box, query="issue", max_results=bad)
        assert output.is_error and "max_results" in output.as_text
    assert (await search(box, query="")).is_error
    output = await search(box, query="issue", max_results=1)
    assert output.as_text.count("(newly activated)") == 1
    output = await search(toolbox(), query="issue")
    assert output.as_text.count("(newly activated)") == 3  # all issue tools; default is 5


async def test_max_results_is_limited_to_the_cap() -> None:
    box = toolbox(cap=2)
    output = await search(box, query="create issue pipelines", max_results=10)
    assert output.as_text.count(" activated)") == 2
    assert "At most 2 results" in output.as_text
    assert len(box.activation.get()) == 2


async def test_required_word() -> None:
    output = await search(toolbox(), query="+gitlab create issue")
    assert f"{GL_CREATE} (newly activated)" in output.as_text
    assert GH_CREATE not in output.as_text


# ---------------------------------------------------------------------------- caliban mcp search


def test_search_catalog_ranks_without_activating() -> None:
    from caliban.mcp.lazy.tool_search import format_search, search_catalog

    tools = make_tools(CATALOG)
    data = search_catalog(tools, "list pipelines", 2)
    assert data["mode"] == "keywords" and data["searched"] == 8
    assert data["results"][0]["name"] == GL_PIPES and len(data["results"]) <= 2
    assert data["results"][0]["server"] == "gitlab" and data["results"][0]["score"] > 0
    text = format_search(data)
    assert text.startswith(f" 1. {GL_PIPES}  ") and " score " in text.splitlines()[0]
    assert "\n    List pipelines on gitlab.\n" in text and text.endswith("(8 tools searched)")

    selected = search_catalog(tools, "select:create_issue,nope", 1)
    assert [r["name"] for r in selected["results"]] == [GH_CREATE, GL_CREATE]
    assert selected["missing"] == ["nope"]
    assert "selected" in format_search(selected) and "Not found: nope" in format_search(selected)

    none = search_catalog(tools, "kubernetes", 5)
    assert none["results"] == [] and format_search(none).startswith("No MCP tools matched")


def test_the_search_model_setting_decides_whether_meaning_counts() -> None:
    """No word of "report a bug" is in the issue tools' text: plain BM25 finds nothing, the
    shipped static model (the default) relates bug reports to issues."""
    from caliban.config.settings import Settings
    from caliban.mcp.lazy.catalog import Catalog
    from caliban.mcp.lazy.policy import LazyDecision, resolve_policy
    from caliban.mcp.lazy.tool_search import search_catalog

    tools = make_tools(CATALOG)
    assert search_catalog(tools, "report a bug", 3, search_model="bm25")["results"] == []
    found = search_catalog(tools, "report a bug", 3)["results"]
    assert {hit["name"] for hit in found} == {GH_CREATE, GL_CREATE}

    settings = Settings.model_validate({"tools": {"lazy_mcp": True, "search_model": "bm25"}})
    policy = resolve_policy(settings.tools)
    catalog = Catalog(tools, LazyDecision(lazy=True), search_model=policy.search_model)
    assert not catalog.index().semantic
    assert Catalog(tools, LazyDecision(lazy=True)).index().semantic


def test_answers_name_the_servers_that_are_not_available() -> None:
    from caliban.mcp.lazy.tool_search import (
        Match,
        SearchOutcome,
        ServerProblem,
        format_outcome,
    )

    problems = (
        ServerProblem(server="jira", reason="exited with code 1 while starting", searched=False),
        ServerProblem(server="git", reason="did not finish starting within 10s", searched=True),
    )
    found = SearchOutcome(
        query="q",
        matches=(Match(name=GH_CREATE, description="d", input_schema={}, newly_activated=True),),
        unavailable=problems,
    )
    nothing = SearchOutcome(query="q", servers=(("github", 4),), unavailable=problems)
    expected = [
        "MCP server 'jira' is not available (exited with code 1 while starting): its tools "
        "could not be searched, so the tool you need may be there. Tell the user.",
        "MCP server 'git' is not running (did not finish starting within 10s): its tools were "
        "searched from the list it gave earlier; calling one tries to start it again.",
    ]
    assert format_outcome(found).splitlines()[-2:] == expected
    assert format_outcome(nothing).splitlines() == [
        "No MCP tools matched 'q'.",
        "Servers: github (4 tools)",
        *expected,
    ]


def test_a_huge_schema_or_description_is_not_repeated_whole_in_the_answer() -> None:
    """A loaded tool's definition carries its schema; a server's 1 MB schema is not sent twice."""
    from caliban.mcp.lazy.tool_search import Match, SearchOutcome, format_outcome
    from caliban.mcp.tools import mark_data

    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50_000)}}
    description = mark_data("Does things. " * 50_000, server="big")
    found = SearchOutcome(
        query="q",
        matches=(
            Match(
                name=GH_CREATE, description=description, input_schema=schema, newly_activated=True
            ),
        ),
    )
    text = format_outcome(found)
    assert len(text) < 9_000
    assert text.count("characters in all, in the tool's definition]") == 2
    assert text.count('<mcp-data server="big">') == text.count("</mcp-data>") == 1
    assert 'Does things. \n</mcp-data>\nInput schema: {"type":"object"' in text


def test_the_index_reads_only_the_start_of_a_huge_description() -> None:
    """2,000 tools with 20 KB descriptions took the first search 23 s to index."""
    from caliban.mcp.lazy.catalog import MAX_INDEXED_DESCRIPTION, search_doc
    from caliban.mcp.tools import McpTool

    huge = McpTool(
        server="s",
        tool_name="t",
        name="mcp__s__t",
        description="Rotate the signing keys. " + "padding " * 5_000,
        input_schema={"type": "object"},
    )
    doc = search_doc(huge)
    assert len(doc.description) == MAX_INDEXED_DESCRIPTION == 2_000
    assert doc.description.startswith("Rotate the signing keys.")
