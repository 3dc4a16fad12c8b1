"""ToolSearch latency: index build time and query p50/p99 at 100, 1,000 and 10,000 tools.

Run: ``python benchmarks/search_latency.py`` (``--sizes 100 1000`` to choose sizes).

Catalogs come from ``_catalogs.synthetic_catalog``; rows marked ``real`` copy the pooled
real catalog (long GitHub descriptions and schemas) up to that size. Queries mix two- to
eight-word keyword queries (some with synonyms or a ``+required`` word) and ``select:``
queries. For contrast the table also times rank_bm25's own ``BM25Okapi.get_scores`` over the
same corpus, which loops over every document in Python for every query term.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import statistics
import time
from collections.abc import Callable, Sequence

from _catalogs import EVAL_DIR, pooled_catalog, synthetic_catalog
from rank_bm25 import BM25Okapi

from caliban.search.index import SearchDoc, ToolIndex, tokenize

QUERY_WORDS = [
    "create", "delete", "list", "issue", "message", "channel", "file", "folder", "invoice",
    "refund", "pod", "logs", "deployment", "email", "draft", "calendar", "event", "search",
    "page", "database", "export", "archive", "restore", "comment", "user", "team", "bucket",
    "show", "find", "remove", "ticket", "repo", "customer", "subscription", "forecast",
]  # fmt: skip


def make_queries(docs: Sequence[SearchDoc], n: int, seed: int) -> list[str]:
    """A reproducible mix of keyword, ``+required`` and ``select:`` queries."""
    rng = random.Random(seed)
    queries = []
    for i in range(n):
        kind = i % 10
        if kind == 0:
            queries.append("select:" + ",".join(d.tool for d in rng.sample(list(docs), 2)))
        elif kind == 1:
            queries.append(f"+{rng.choice(QUERY_WORDS)} {' '.join(rng.sample(QUERY_WORDS, 2))}")
        else:
            queries.append(" ".join(rng.sample(QUERY_WORDS, rng.randint(2, 8))))
    return queries


def real_catalog(n: int) -> list[SearchDoc] | None:
    """The pooled real catalog (long GitHub descriptions and schemas) copied up to ``n`` tools.

    Copies get numbered server names; ``None`` when the eval data is absent.
    """
    if not (EVAL_DIR / "catalog_github.json").is_file():
        return None
    base = pooled_catalog(EVAL_DIR)
    out: list[SearchDoc] = []
    copy = 0
    while len(out) < n:
        copy += 1
        for d in base[: n - len(out)]:
            server = d.server if copy == 1 else f"{d.server}_{copy}"
            out.append(dataclasses.replace(d, server=server, name=f"mcp__{server}__{d.tool}"))
    return out


def percentile(samples: Sequence[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def plain_scores(model: BM25Okapi, query: str) -> object:
    """rank_bm25's own full scan: every document, every query term."""
    return model.get_scores(tokenize(query.replace("+", " ")))


def time_calls(fn: Callable[[str], object], queries: Sequence[str]) -> list[float]:
    for q in queries[:20]:
        fn(q)  # warm caches
    out = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--queries", type=int, default=1_000)
    args = parser.parse_args()

    print(
        "| tools       | build ms | rebuild ms | query p50 ms | query p99 ms |"
        " rank_bm25 get_scores p50 ms |"
    )
    print("|-------------|----------|------------|--------------|--------------|" + "-" * 30 + "|")
    catalogs: list[tuple[str, list[SearchDoc]]] = []
    for n in args.sizes:
        catalogs.append((f"{n:,}", synthetic_catalog(n, seed=n)))
    for n in args.sizes:
        real = real_catalog(n)
        if real is not None and n >= 1_000:
            catalogs.append((f"{n:,} real", real))
    for label, docs in catalogs:
        queries = make_queries(docs, args.queries, seed=1)

        start = time.perf_counter()
        index = ToolIndex.build(docs)
        build_ms = (time.perf_counter() - start) * 1000
        builds = []
        for _ in range(3):  # a server's tool list changed: the index is simply rebuilt
            start = time.perf_counter()
            index = index.replace_server(
                docs[0].server, [d for d in docs if d.server == docs[0].server]
            )
            builds.append((time.perf_counter() - start) * 1000)
        rebuild_ms = statistics.median(builds)

        ours = time_calls(functools.partial(index.search, limit=5), queries)

        plain = BM25Okapi([tokenize(f"{d.tool} {d.description}") for d in docs])
        keyword_queries = [q for q in queries if not q.startswith("select:")][:100]
        theirs = time_calls(functools.partial(plain_scores, plain), keyword_queries)

        print(
            f"| {label:>11} | {build_ms:8.1f} | {rebuild_ms:10.1f} | {percentile(ours, 50):12.3f} |"
            f" {percentile(ours, 99):12.3f} | {percentile(theirs, 50):28.3f} |"
        )


if __name__ == "__main__":
    main()
