"""The user's own history of calls after ToolSearch queries re-orders near-ties."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hang import HANG_S
from lazy_fakes import LazyBox, StaticCatalog, make_tools

from caliban.mcp.lazy.tool_search import search_catalog
from caliban.search import history as history_module
from caliban.search.history import LIFT, SearchHistory
from caliban.search.index import SearchDoc, SearchHit, SearchResult

DIMS = 4


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def result(*names: str) -> SearchResult[SearchDoc]:
    hits = tuple(
        SearchHit(
            doc=SearchDoc(name=n, server="s", tool=n, description="", input_schema={}),
            score=10.0 - i,
        )
        for i, n in enumerate(names)
    )
    return SearchResult(query="q", mode="keywords", hits=hits)


def names(r: SearchResult[SearchDoc]) -> list[str]:
    return [h.doc.name for h in r.hits]


def test_a_remembered_query_lifts_the_tool_it_led_to(tmp_path: Path) -> None:
    history = SearchHistory(tmp_path / "h.npz", DIMS)
    history.remember(unit(1, 0, 0, 0), "c")
    # the same query: c (third, 2 z-scores behind) goes first, and the answer is cut to 2
    assert names(history.lift(unit(1, 0, 0, 0), result("a", "b", "c", "d"), 2)) == ["c", "a"]
    # a query merely related (cosine 0.8 < 0.9) changes nothing
    assert names(history.lift(unit(0.8, 0.6, 0, 0), result("a", "b", "c"), 3)) == ["a", "b", "c"]
    # the history re-orders what was found; it never adds a tool
    assert names(history.lift(unit(1, 0, 0, 0), result("a", "b"), 5)) == ["a", "b"]


def test_the_lift_grows_with_the_likeness_of_the_queries(tmp_path: Path) -> None:
    history = SearchHistory(None, DIMS)
    history.remember(unit(1, 0, 0, 0), "b")
    near = unit(0.95, np.sqrt(1 - 0.95**2), 0, 0)  # cosine 0.95: half the lift
    lifted = history.lift(near, result("a", "b"), 2)
    assert [h.score for h in lifted.hits] == pytest.approx([9.0 + LIFT / 2, 10.0])


def test_the_history_is_kept_across_sessions_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history_module, "MAX_ENTRIES", 3)
    path = tmp_path / "h.npz"
    first = SearchHistory(path, DIMS)
    second = SearchHistory(path, DIMS)  # another session, open at the same time
    first.remember(unit(1, 0, 0, 0), "a")
    second.remember(unit(0, 1, 0, 0), "b")  # keeps what the first added
    for tool in ("c", "d"):
        first.remember(unit(0, 0, 1, 0), tool)
    later = SearchHistory(path, DIMS)
    assert len(later) == 3  # the oldest, "a", went first
    assert names(later.lift(unit(0, 1, 0, 0), result("x", "b"), 2)) == ["b", "x"]
    assert names(later.lift(unit(1, 0, 0, 0), result("x", "a"), 2)) == ["x", "a"]


@pytest.mark.parametrize(
    "content",
    [
        b"not a numpy archive",
        b"",
        "pickled",
        "wrong shape",
        "not finite",
        "too large",
    ],
)
def test_a_history_file_not_as_written_is_ignored(tmp_path: Path, content: bytes | str) -> None:
    path = tmp_path / "h.npz"
    buffer = io.BytesIO()
    if content == "pickled":  # np.load refuses object arrays without allow_pickle
        np.savez(buffer, vectors=np.zeros((1, DIMS), np.float16), tools=np.array([{"a": 1}]))
    elif content == "wrong shape":
        np.savez(buffer, vectors=np.zeros((2, DIMS + 1), np.float16), tools=np.array(["a", "b"]))
    elif content == "not finite":
        vectors = np.full((1, DIMS), np.inf, np.float16)
        np.savez(buffer, vectors=vectors, tools=np.array(["a"]))
    elif content == "too large":
        buffer.write(b"\0" * (5 * 2**20))
    else:
        assert isinstance(content, bytes)
        buffer.write(content)
    path.write_bytes(buffer.getvalue())
    history = SearchHistory(path, DIMS)
    assert len(history) == 0
    history.remember(unit(1, 0, 0, 0), "a")  # and a call replaces it with a good one
    assert len(SearchHistory(path, DIMS)) == 1


CATALOG = {
    "stocks": [
        "get_stock_price",
        "get_stock_price_history",
        "get_stock_quote",
        "get_stock_news",
        "list_stock_exchanges",
    ],
    "files": ["read_file", "write_file"],
}


def test_a_tool_called_after_a_search_ranks_first_for_that_search_in_the_next_session() -> None:
    # through ToolSearch as a session runs it, with the shipped MiniLM and the cache
    # directory every test gets to itself
    tools = make_tools(CATALOG)
    query = "stock price over the last months"

    def session() -> LazyBox:
        box = LazyBox(catalog=StaticCatalog(tools))
        assert box.lazy.catalog().index().wait_semantic(HANG_S)
        return box

    first = session()
    found = [m.name for m in first.lazy.search_tools(query, 3).matches]
    called = found[1]  # the model took the second hit
    first.lazy.note_call(called)
    second = session()
    assert second.lazy.search_tools(query, 3).matches[0].name == called
    # `caliban mcp search` ranks as ToolSearch does
    assert search_catalog(tools, query, 3, semantic_wait_s=HANG_S)["results"][0]["name"] == called
    # a search for something else is not moved
    other = "write a file to disk"
    assert [m.name for m in second.lazy.search_tools(other, 3).matches] == [
        m.name for m in first.lazy.search_tools(other, 3).matches
    ]
