"""Pre-activation's confidence bar (:mod:`caliban.mcp.lazy.preactivate`): which tools a
request loads before the model sees it, over our captures of real servers' tool lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caliban.mcp.lazy.preactivate import coverage, likely_tools
from caliban.search.index import SearchDoc, ToolIndex

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
TOKYO = "What time is it right now in Tokyo?"
CODING = (
    "rename the parse function in utils.py and fix its tests",
    "why does test_config fail on python 3.11?",
    "refactor the agent loop so retries live in one place",
    "add type hints to the session module",
)


def _docs(path: Path) -> list[SearchDoc]:
    data = json.loads(path.read_text())
    return [
        SearchDoc(
            name=f"mcp__{srv['server']}__{tool['name']}",
            server=srv["server"],
            tool=tool["name"],
            description=tool.get("description") or "",
            input_schema=tool.get("inputSchema") or {},
        )
        for srv in data["servers"]
        for tool in srv["tools"]
    ]


def _filler(n: int) -> list[SearchDoc]:
    """Tools of an unrelated warehouse server, to grow a catalog to a given size."""
    nouns = ["pallet", "shelf", "forklift", "shipment", "barcode", "dock", "carrier", "bin"]
    verbs = ["get", "list", "create", "update", "delete", "archive", "move", "count"]
    docs = []
    for i in range(n):
        verb, noun = verbs[i % len(verbs)], nouns[(i // len(verbs)) % len(nouns)]
        tool = f"{verb}_{noun}_{i}"
        docs.append(
            SearchDoc(
                name=f"mcp__warehouse__{tool}",
                server="warehouse",
                tool=tool,
                description=f"{verb.capitalize()} a {noun} in the warehouse inventory.",
                input_schema={"type": "object", "properties": {f"{noun}_id": {"type": "string"}}},
            )
        )
    return docs


@pytest.fixture(scope="module")
def reference() -> ToolIndex[SearchDoc]:
    """The five reference servers (everything, filesystem, memory, time, git): 50 tools."""
    return ToolIndex.build(_docs(BENCH / "reference_tools.json"))


@pytest.fixture(scope="module")
def time_only() -> ToolIndex[SearchDoc]:
    """The time server alone: 2 tools."""
    return ToolIndex.build(d for d in _docs(BENCH / "reference_tools.json") if d.server == "time")


@pytest.fixture(scope="module")
def big() -> ToolIndex[SearchDoc]:
    """The reference servers, 20 more real servers (Slack, Jira, Notion, ...) and filler:
    over 500 tools."""
    docs = [*_docs(BENCH / "reference_tools.json"), *_docs(BENCH / "extra_tools.json")]
    docs += _filler(520 - len(docs))
    return ToolIndex.build(docs)


def tools(index: ToolIndex[SearchDoc], request: str, limit: int = 3) -> list[str]:
    return [doc.tool for doc in likely_tools(index, request, limit)]


def test_asking_the_time_in_tokyo_loads_the_time_tool(reference: ToolIndex[SearchDoc]) -> None:
    loaded = tools(reference, TOKYO)
    assert "get_current_time" in loaded
    assert all(t.endswith("_time") for t in loaded)  # nothing but the time server's tools


@pytest.mark.parametrize("request_", CODING)
def test_a_coding_request_loads_nothing(
    request_: str,
    reference: ToolIndex[SearchDoc],
    time_only: ToolIndex[SearchDoc],
    big: ToolIndex[SearchDoc],
) -> None:
    for index in (time_only, reference, big):
        assert tools(index, request_) == [], f"{len(index)} tools"


def test_the_bar_holds_on_a_two_tool_and_a_500_tool_catalog(
    time_only: ToolIndex[SearchDoc], big: ToolIndex[SearchDoc]
) -> None:
    assert len(time_only) == 2 and len(big) >= 500
    request = "what time is it in Tokyo"
    assert set(tools(time_only, request)) == {"convert_time", "get_current_time"}
    assert set(tools(big, request)) == {"convert_time", "get_current_time"}
    # a tool's coverage of a request is the same whatever else the catalog holds
    for index in (time_only, big):
        result = index.rank(request, 3)
        hit = next(h for h in result.hits if h.doc.tool == "get_current_time")
        assert coverage(hit, len(result.terms)) == pytest.approx(2 / 4.5)


def test_a_request_that_names_a_git_action_loads_the_git_tools(
    big: ToolIndex[SearchDoc],
) -> None:
    loaded = tools(big, "show the git log of this repo")
    assert "git_log" in loaded
    assert all(t.startswith("git_") for t in loaded)


def test_the_limit_caps_what_is_loaded_and_zero_turns_it_off(
    reference: ToolIndex[SearchDoc],
) -> None:
    request = "show the git log of this repo"
    assert len(tools(reference, request, 3)) == 3
    assert tools(reference, request, 1) == ["git_log"]
    assert tools(reference, request, 0) == []
    assert tools(reference, "   ", 3) == []


def test_a_pasted_log_loads_nothing(reference: ToolIndex[SearchDoc]) -> None:
    pasted = "why does this fail?\n" + "Traceback (most recent call last): x\n" * 200
    assert tools(reference, pasted) == []


def test_rank_reads_select_and_plus_words_as_plain_words(
    reference: ToolIndex[SearchDoc],
) -> None:
    # ToolSearch syntax: "+time" requires "time" in a tool's name, "select:" picks by name
    assert {h.doc.server for h in reference.search("+time file", 10).hits} == {"time"}
    assert reference.search("select:git_log", 5).mode == "select"
    # a user's request is not a query: the same text ranks every tool as words
    ranked = reference.rank("+time file", 10)
    assert ranked.mode == "keywords"
    assert "filesystem" in {h.doc.server for h in ranked.hits}
    selected = reference.rank("select:git_log please", 5)
    assert selected.mode == "keywords"
    assert selected.missing_names == ()
    assert "git_log" in [h.doc.tool for h in selected.hits]


def test_a_hit_says_which_request_words_the_tool_has(reference: ToolIndex[SearchDoc]) -> None:
    result = reference.rank("show the git log of this repo", 1)
    assert result.terms == ("show", "git", "log", "repo")
    (hit,) = result.hits
    assert hit.doc.tool == "git_log"
    assert set(hit.matched) == {"show", "git", "log", "repo"}
    assert set(hit.named) == {"git", "log"}  # tool git_log on server git


@pytest.mark.parametrize("request_", ["do search", "search", "write it", "read"])
def test_a_one_word_request_loads_nothing(request_: str, big: ToolIndex[SearchDoc]) -> None:
    # issue 27, item 10: "do search" loaded three unrelated tools, a write tool among them
    assert big.rank(request_, 3).hits  # the words do match tools...
    assert tools(big, request_) == []  # ...but one word is no task to guess tools for
