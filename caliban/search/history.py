"""Which tools the model called after which ToolSearch queries, remembered across sessions.

A query nearly the same as one remembered (MiniLM's cosine at least :data:`NEAR`) lifts
the tools that query led to by up to :data:`LIFT` z-scores among the first :data:`DEPTH`
hits: the user's own history breaks the ranker's near-ties. The knobs were chosen on the
development sets with ``benchmarks/search_history_probe.py`` so that the ranking loses no
cell of any set whether the history holds the right tools or also the model's wrong calls
(docs/lazy-mcp.md, "The user's own history").

The history is the user's, not a project's: one file per embedding model under the cache
directory (``tool-history/``), written whole and renamed, at most :data:`MAX_ENTRIES`
entries (the oldest go first), and anything in it that is not what this module writes is
ignored.
"""

from __future__ import annotations

import contextlib
import io
import logging
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Final, TypeVar

import numpy as np
import numpy.typing as npt

from caliban.config.paths import cache_dir
from caliban.search.index import SearchResult, ToolDoc, ToolIndex
from caliban.util.fsutil import atomic_write_bytes

__all__ = ["DEPTH", "SearchHistory", "open_history", "search_with_history"]

log = logging.getLogger(__name__)

NEAR: Final = 0.9
"""A remembered query counts from this cosine up: the same request in other words."""
LIFT: Final = 4.0
"""Z-scores added at cosine 1, scaled down to 0 at :data:`NEAR`."""
DEPTH: Final = 20
"""Hits the history may re-order: it breaks ties among what the ranker found, adds none."""
MAX_ENTRIES: Final = 1000
_MAX_FILE_BYTES: Final = 4 * 2**20

D = TypeVar("D", bound=ToolDoc)
FloatArray = npt.NDArray[np.float32]


class SearchHistory:
    """Remembered (query embedding, tool called) pairs of one embedding model."""

    def __init__(self, path: Path | None, dims: int) -> None:
        """``path``: the model's history file (``None``: this session only)."""
        self._path = path
        self._dims = dims
        self._vectors, self._tools = self._read()

    def __len__(self) -> int:
        return len(self._tools)

    def near(self, query: FloatArray) -> dict[str, float]:
        """The tools remembered for queries near ``query``, each with the nearest cosine."""
        best: dict[str, float] = {}
        if self._tools:
            cosines = self._vectors @ query
            for i in np.flatnonzero(cosines >= NEAR).tolist():
                tool = self._tools[i]
                best[tool] = max(best.get(tool, 0.0), float(cosines[i]))
        return best

    def lift(self, query: FloatArray, result: SearchResult[D], limit: int) -> SearchResult[D]:
        """``result`` (ranked :data:`DEPTH` deep) re-ordered by the remembered queries near
        ``query``, cut to ``limit``."""
        best = self.near(query)
        lifted = [
            replace(h, score=h.score + LIFT * (best[h.doc.name] - NEAR) / (1 - NEAR))
            if h.doc.name in best
            else h
            for h in result.hits
        ]
        hits = sorted(lifted, key=lambda h: -h.score) if best else lifted
        return replace(result, hits=tuple(hits[:limit]))

    def remember(self, query: FloatArray, tool: str) -> None:
        """Record that ``tool`` was called after a search for ``query``, and save."""
        # another session may have added some since it was read
        vectors, tools = self._read() if self._path else (self._vectors, self._tools)
        vectors = np.vstack([vectors, query.astype(np.float32)[None, :]])[-MAX_ENTRIES:]
        tools = [*tools, tool][-MAX_ENTRIES:]
        self._vectors, self._tools = vectors, tools
        if self._path is None:
            return
        buffer = io.BytesIO()
        np.savez(buffer, vectors=vectors.astype(np.float16), tools=np.array(tools, dtype=str))
        try:
            atomic_write_bytes(self._path, buffer.getvalue())
        except OSError as exc:
            log.debug("could not save the search history %s: %s", self._path, exc)

    def _read(self) -> tuple[FloatArray, list[str]]:
        empty: tuple[FloatArray, list[str]] = (np.zeros((0, self._dims), np.float32), [])
        path = self._path
        if path is None:
            return empty
        with contextlib.suppress(OSError):
            if path.stat().st_size > _MAX_FILE_BYTES:
                return empty
        try:
            with np.load(path, allow_pickle=False) as data:
                vectors = np.asarray(data["vectors"])
                tools = np.asarray(data["tools"])
        except FileNotFoundError:
            return empty
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            log.debug("ignoring the search history %s: %s", path, exc)
            return empty
        if (
            vectors.dtype != np.float16
            or vectors.shape != (len(tools), self._dims)
            or tools.dtype.kind != "U"
            or not np.isfinite(vectors).all()
        ):
            return empty  # not what we wrote
        return vectors.astype(np.float32)[-MAX_ENTRIES:], [str(t) for t in tools][-MAX_ENTRIES:]


def open_history(index: ToolIndex[D]) -> SearchHistory | None:
    """The history of the transformer ranking ``index`` (``None`` until it ranks)."""
    model = index.dense_model
    if model is None:
        return None
    digest, dims = model
    return SearchHistory(cache_dir() / "tool-history" / f"{digest[:32]}.npz", dims)


def search_with_history(
    index: ToolIndex[D], query: str, limit: int, history: SearchHistory | None
) -> tuple[SearchResult[D], FloatArray | None]:
    """``index``'s answer to ``query``, re-ordered by ``history``; and the query's embedding
    (``None`` for a ``select:`` query or before the transformer ranks), which
    :meth:`SearchHistory.remember` takes when a found tool is called."""
    vector = index.query_vector(query) if history is not None else None
    if vector is None or history is None or not history.near(vector):
        return index.search(query, limit), vector  # a new query costs nothing more
    return history.lift(vector, index.search(query, max(limit, DEPTH)), limit), vector
