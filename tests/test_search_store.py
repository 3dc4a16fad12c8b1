"""The search index off the first request's path: built indexes kept on disk per catalog
(:mod:`caliban.search.store`), and a large new catalog indexed in the background while
pre-activation goes without (:meth:`caliban.mcp.lazy.catalog.Catalog.index_now`)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from lazy_fakes import make_tools

from caliban.mcp.lazy import catalog as catalog_module
from caliban.mcp.lazy.catalog import BUILD_AT_ONCE, Catalog
from caliban.mcp.lazy.policy import LazyDecision
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.semantic import WordPiece
from caliban.search.store import IndexStore

QUERIES = ["create issue", "list the open invoices and refund the charge", "+git diff", "zzz"]


def docs(n: int, server: str = "shop") -> list[SearchDoc]:
    nouns = ["invoice", "charge", "refund", "issue", "branch", "commit", "diff", "customer"]
    verbs = ["create", "list", "get", "delete", "update"]
    return [
        SearchDoc(
            name=f"mcp__{server}__{verbs[i % 5]}_{nouns[i % 8]}_{i}",
            server=server,
            tool=f"{verbs[i % 5]}_{nouns[i % 8]}_{i}",
            description=f"{verbs[i % 5].capitalize()} a {nouns[i % 8]} (number {i}).",
            input_schema={
                "type": "object",
                "properties": {f"{nouns[i % 8]}_id": {"type": "string"}},
            },
        )
        for i in range(n)
    ]


def answers(index: ToolIndex[SearchDoc]) -> list[list[tuple[str, float, tuple[str, ...]]]]:
    return [
        [(h.doc.name, round(h.score, 6), h.matched) for h in index.search(q, 10).hits]
        for q in QUERIES
    ]


def test_an_index_read_back_from_disk_answers_like_the_one_built(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    catalog = docs(120) + docs(30, server="git")
    built = ToolIndex.build(catalog, store=store)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    loaded = ToolIndex.load(catalog, store=store)
    assert loaded is not None
    assert answers(loaded) == answers(built)
    # the scores short queries use once the transformer ranks come back too
    assert np.array_equal(loaded._postings.short_scores, built._postings.short_scores)
    # another catalog, or the same tools under another static model, is not found
    assert ToolIndex.load(catalog[:-1], store=store) is None
    assert ToolIndex.load(catalog, store=store, embedder=None) is None


def test_a_damaged_entry_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    catalog = docs(50)
    ToolIndex.build(catalog, store=store)
    (entry,) = tmp_path.glob("*.npz")
    entry.write_bytes(b"PK\x03\x04 not a zip")
    assert ToolIndex.load(catalog, store=store) is None
    rebuilt = ToolIndex.build(catalog, store=store)
    assert rebuilt.search("create invoice", 1).hits
    assert ToolIndex.load(catalog, store=store) is not None


def test_an_entry_that_does_not_fit_the_catalog_is_ignored(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    catalog = docs(40)
    ToolIndex.build(catalog, store=store)
    (entry,) = tmp_path.glob("*.npz")
    with np.load(entry) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["doc_ids"] = arrays["doc_ids"] + 1000  # tools the catalog does not have
    with entry.open("wb") as f:
        np.savez(f, **arrays)
    assert ToolIndex.load(catalog, store=store) is None


def test_the_store_keeps_the_most_recently_used_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("caliban.search.store.MAX_ENTRIES", 2)
    store = IndexStore(tmp_path)
    for n in (10, 11, 12):
        ToolIndex.build(docs(n), store=store, embedder=None)
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_a_schema_that_is_not_json_data_is_indexed_but_not_stored(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    odd = SearchDoc(name="mcp__x__odd", server="x", tool="odd", input_schema={"default": object()})
    index = ToolIndex.build([*docs(5), odd], store=store)
    assert index.search("odd", 1).names == ("mcp__x__odd",)
    assert not list(tmp_path.glob("*.npz"))


def test_ascii_text_tokenizes_as_the_general_path_does() -> None:
    # the regular expression for ASCII text against BERT's character-by-character rules
    rng = np.random.default_rng(3)
    alphabet = [chr(i) for i in range(128)] + list("éñ漢 \u00a0\u200b’İ\x85")
    for _ in range(3000):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 30))))
        assert WordPiece._words(text) == WordPiece._unicode_words(text), repr(text)


# --- the lazy catalog ----------------------------------------------------------------------


def catalog_of(n: int) -> Catalog:
    names = [f"tool_{i}" for i in range(n)]
    return Catalog(make_tools({"big": names}), LazyDecision(lazy=True), search_model="bm25")


def test_a_small_new_catalog_is_indexed_at_once() -> None:
    catalog = catalog_of(BUILD_AT_ONCE)
    assert catalog.index_now() is not None


def hold_builds(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Index builds (and reads from the disk cache) wait until the returned event is set."""
    gate = threading.Event()
    real_build = catalog_module.build_index

    def held_build(*args: object, **kwargs: object) -> object:
        gate.wait(60)
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_module, "build_index", held_build)
    return gate


def test_a_large_new_catalog_is_indexed_in_the_background_then_read_from_disk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_build = catalog_module.build_index
    gate = hold_builds(monkeypatch)
    catalog = catalog_of(BUILD_AT_ONCE + 1)
    assert catalog.index_now() is None  # the first request does not wait for the build
    assert catalog.index_now() is None  # nor does the next prompt while it runs
    gate.set()
    index = catalog.index()  # ToolSearch waits for the build in progress
    assert len(index) == BUILD_AT_ONCE + 1
    assert catalog.index_now() is index
    # the next session's catalog of the same tools reads it from the disk cache at once
    monkeypatch.setattr(catalog_module, "build_index", real_build)
    assert catalog_of(BUILD_AT_ONCE + 1).index_now() is not None


def test_a_very_large_catalog_is_read_from_disk_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog_of(BUILD_AT_ONCE + 2).index()  # indexed once: on disk
    monkeypatch.setattr(catalog_module, "LOAD_AT_ONCE", BUILD_AT_ONCE + 1)
    gate = hold_builds(monkeypatch)
    catalog = catalog_of(BUILD_AT_ONCE + 2)
    assert catalog.index_now() is None  # reading 10,000 tools' index is not next to nothing
    gate.set()
    index = catalog.index()  # read from the disk cache, in the background or by ToolSearch
    assert len(index) == BUILD_AT_ONCE + 2
    assert catalog.index_now() is index
