"""Pre-activation with the shipped ranker (MiniLM, ready), on every request set's full catalog:
how often a relevant tool is loaded, what share of the loaded tools are relevant (its
precision: loaded tools the model would use), and how often requests that need no MCP tool
load something, for a few bars and the one-word floor.

    python benchmarks/preactivation_precision.py

The reduced, quick form of ``preactivation.py`` (which also varies the catalog and replays
sessions): full catalogs only; the requests needing no tool are the 40 coding requests and
this repository's latest 150 commit messages, on the 569-tool catalog. A cell reads
"gold / precision" (precision over all the tools the set's requests loaded).
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on
import subprocess
from collections.abc import Sequence

import numpy as np
from _catalogs import BENCH_DIR, REPO_ROOT
from search_quality import encoder, query_sets

from caliban.mcp.lazy.preactivate import MAX_REQUEST_CHARS, MIN_COVERAGE, MIN_TERMS, coverage
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import load_embedder

BARS = (0.25, MIN_COVERAGE, 0.35)
FLOORS = (1, MIN_TERMS)


def picks(index: ToolIndex[SearchDoc], text: str, bar: float, words: int) -> list[SearchDoc]:
    """What pre-activation loads (top 3) under ``bar`` and a floor of ``words`` words."""
    result = index.rank(text[:MAX_REQUEST_CHARS], 3)
    terms = len(result.terms)
    if terms < words:
        return []
    return [h.doc for h in result.hits if coverage(h, terms) >= bar]


def main() -> None:
    static, dense = load_embedder(), encoder(MINILM_DIR)
    sets = [qs for qs in query_sets() if not qs.name.startswith(("short ", "joined "))]
    coding = [
        line.strip()
        for line in (BENCH_DIR / "queries_coding.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    log = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "log", "--format=%B%x00"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commits = [m.strip() for m in log.split("\0") if m.strip() and not m.startswith("Merge ")]
    indexes: dict[int, ToolIndex[SearchDoc]] = {}

    def index_for(docs: Sequence[SearchDoc]) -> ToolIndex[SearchDoc]:
        if id(docs) not in indexes:
            index = ToolIndex.build(docs, embedder=static, dense=dense)
            index.wait_semantic(3600)
            indexes[id(docs)] = index
        return indexes[id(docs)]

    large = next(qs.docs for qs in sets if qs.name.startswith("tasks"))
    print("| rule | " + " | ".join(qs.name for qs in sets) + " | coding fires | commits fires |")
    print("|---|" + "---|" * (len(sets) + 2))
    for bar in BARS:
        for words in FLOORS:
            cells = []
            for qs in sets:
                index = index_for(qs.docs)
                gold = loaded = relevant = 0
                for q in qs.queries:
                    found = picks(index, q.text, bar, words)
                    hits = sum(q.is_relevant(d) for d in found)
                    loaded, relevant, gold = loaded + len(found), relevant + hits, gold + (hits > 0)
                precision = f"{relevant / loaded:.2f}" if loaded else "-"
                cells.append(f"{gold / len(qs.queries):.2f} / {precision}")
            fires = [
                np.mean([bool(picks(index_for(large), t, bar, words)) for t in texts])
                for texts in (coding, commits[:150])
            ]
            print(
                f"| coverage >= {bar}, >= {words} words | "
                + " | ".join(cells)
                + f" | {fires[0]:.3f} | {fires[1]:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
