"""Pre-activation: the deferred MCP tools a user's request most likely needs, found before
the model sees the request (``tools.preactivate``).

The request is ranked by the ToolSearch index (:meth:`caliban.search.index.ToolIndex.rank`,
no query syntax, no model call). Of the best ``limit`` hits, those that account for enough of
the request are activated for that turn: :func:`coverage` is the share of the request's words
that the tool's text has, where a word in the tool's or its server's name counts twice::

    coverage = (matched + matched in name) / (2 × request words + 0.5)

and the bar is :data:`MIN_COVERAGE`. "What time is it in Tokyo" (words ``time``, ``tokyo``)
loads ``convert_time`` (both words, ``time`` in its name: 3 / 4.5) and ``get_current_time``
(2 / 4.5); "rename the parse function in utils.py and fix its tests" (7 words) loads nothing:
no tool of the catalogs measured has more than one of its words. The 0.5 keeps a one-word
request from clearing the bar on a word a tool only mentions.

Why not the ranking's own score: it fuses z-scores over the catalog, whose size sets how
large they get (gold tools in the top 3 have a median fused score of 5.3 on the 117 GitHub
tools, 10.1 on a 569-tool catalog), so no fixed bar on it holds from a 2-tool server to 500
tools; coverage does not depend on the catalog at all. Measured by
``benchmarks/preactivation.py``: "gold" is the share of requests with a relevant tool among
those loaded (mean over the five development sets, full catalogs; holdout sets in brackets,
never tuned on); the other columns are the share of requests needing no MCP tool that load
any (this repository's commit messages, the half that chose the bar, and 40 coding requests;
mean over seven catalogs of 2 to 569 tools):

=================================  ============  =======  ======
rule, top 3                        gold          commits  coding
=================================  ============  =======  ======
always the top 3                   0.70 (0.74)   0.96     0.96
fused score >= 6 (the first cut)   0.51 (0.50)   0.30     0.46
coverage >= 0.3 (this)             0.41 (0.53)   0.02     0.05
=================================  ============  =======  ======

At the same rate of loads on commit messages, the other measures tried load a gold tool
less often: plain word coverage 0.30, the static model's cosine z-score 0.19, its cosine
0.14, the fused score 0.10-0.11 (a fixed bar, or divided by ``sqrt(2 ln n)``), the margin
over the next hit 0.09. Coverage also holds across catalog sizes: gold loaded on the full
catalog / the relevant servers plus three others / the relevant servers alone is 0.58 /
0.67 / 0.67 on the tasks set (the first cut: 0.62 / 0.28 / 0.07). Three tools beat one or two
(0.41 vs 0.32 and 0.37) at the same rate of loads on commits.

What it misses: requests whose words are not the tool's (ToolLens's multi-tool requests:
0.04; "who changed this line last"), and it fires on one- or two-word prompts that name a
tool's subject ("search", "write it": 32% of Claude Code's recorded harness prompts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from caliban.search.index import SearchHit, ToolDoc, ToolIndex

__all__ = ["MAX_REQUEST_CHARS", "MIN_COVERAGE", "MIN_TERMS", "coverage", "likely_tools"]

D = TypeVar("D", bound="ToolDoc")

MAX_REQUEST_CHARS: Final = 2_000
"""Only the start of a long request is ranked (a pasted log says little about tools)."""
MIN_COVERAGE: Final = 0.3
"""The :func:`coverage` a tool needs to be loaded before the model asks for it."""
MIN_TERMS: Final = 2
"""Meaningful words (stop words left out) a request needs before anything is loaded for it:
one word ("do search") names a subject, not a task."""
_SMOOTHING: Final = 0.5


def coverage(hit: SearchHit[D], request_terms: int) -> float:
    """How much of a request (``request_terms`` words) a hit accounts for, 0 to 1.

    Words in the tool's or its server's name count twice: a tool is what its name says.
    """
    if request_terms <= 0:
        return 0.0
    return (len(hit.matched) + len(hit.named)) / (2 * request_terms + _SMOOTHING)


def likely_tools(
    index: ToolIndex[D], request: str, limit: int, *, min_coverage: float = MIN_COVERAGE
) -> tuple[D, ...]:
    """Up to ``limit`` tools of ``index`` that ``request`` most likely needs, best first.

    Empty when nothing in the catalog accounts for ``min_coverage`` of the request (most
    coding requests).
    """
    if limit <= 0 or not request.strip():
        return ()
    result = index.rank(request[:MAX_REQUEST_CHARS], limit)
    terms = len(result.terms)
    if terms < MIN_TERMS:
        return ()  # "do search", "write it": too little to guess from
    return tuple(hit.doc for hit in result.hits if coverage(hit, terms) >= min_coverage)
