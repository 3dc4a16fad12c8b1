"""Pre-activation: the deferred MCP tools a user's request most likely needs, found before
the model sees the request (``tools.preactivate``).

The request is ranked by the ToolSearch index (:meth:`caliban.search.index.ToolIndex.rank`,
no query syntax, no model call); the best few whose score clears a confidence bar are
activated for that turn. The bar was chosen on the development request sets by
``benchmarks/preactivation.py``, which also reports what it costs and saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from caliban.search.index import ToolDoc, ToolIndex

__all__ = ["MAX_REQUEST_CHARS", "MIN_SCORE", "likely_tools"]

D = TypeVar("D", bound="ToolDoc")

MAX_REQUEST_CHARS = 2_000
"""Only the start of a long request is ranked (a pasted log says little about tools)."""
MIN_SCORE = 6.0
"""The fused score (BM25 and the semantic model, z-scored over the catalog) a tool needs."""


def likely_tools(index: ToolIndex[D], request: str, limit: int) -> tuple[D, ...]:
    """Up to ``limit`` tools of ``index`` that ``request`` most likely needs, best first."""
    if limit <= 0 or not request.strip():
        return ()
    result = index.rank(request[:MAX_REQUEST_CHARS], limit)
    return tuple(hit.doc for hit in result.hits if hit.score >= MIN_SCORE)
