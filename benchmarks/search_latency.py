"""ToolSearch latency: index build time and query p50/p99 at 100, 1,000 and 10,000 tools.

Run: ``python benchmarks/search_latency.py`` (``--sizes 100 1000`` to choose sizes;
``--transformer-sizes`` for the all-MiniLM-L6-v2 table: the int8 model caliban ships).

Each catalog is timed twice: BM25 alone (``embedder=None``) and with the semantic model.
*Cold* builds start from a model loaded from disk and an empty token cache (a new process);
*warm* builds reuse the embedder that has seen those tool texts (a rebuild after one server
changed). Query times include embedding the query.

Catalogs come from ``_catalogs.synthetic_catalog``; rows marked ``real`` copy the pooled
real catalog (long GitHub descriptions and schemas) up to that size. Queries mix two- to
eight-word keyword queries (some with synonyms or a ``+required`` word) and ``select:``
queries. For contrast the table also times rank_bm25's own ``BM25Okapi.get_scores`` over the
same corpus, which loops over every document in Python for every query term.

The transformer table (real tools, every text distinct: the large catalog, then ToolLens)
times what its background thread does and what a search then costs:
loading the model; embedding a catalog's tools with an empty disk cache (*cold*) and with
the cache of a previous process (*warm*: a new encoder, same cache directory); a search
before the embeddings are ready (it ranks with the static model); and a search once they
are ready, for a new query (the query is embedded) and a repeated one (remembered).
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import dataclasses
import functools
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _catalogs import EVAL_DIR, large_catalog, load_toollens, pooled_catalog, synthetic_catalog
from rank_bm25 import BM25Okapi

from caliban.search.dense import DenseEncoder
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import Embedder, StaticModel
from caliban.search.text import tokenize
from caliban.search.transformer import TransformerModel

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


def distinct_catalog(n: int) -> list[SearchDoc]:
    """Up to ``n`` real tools whose texts all differ (the large catalog, then ToolLens), so
    nothing is embedded twice; synthetic tools when the eval data is absent."""
    if not (EVAL_DIR / "catalog_github.json").is_file():
        return synthetic_catalog(n, seed=n)
    docs = [*large_catalog(EVAL_DIR), *load_toollens(EVAL_DIR)[0]]
    return docs[:n]


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
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 1_000, 10_000])
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--transformer-sizes", type=int, nargs="*", default=[100, 1_000])
    args = parser.parse_args()

    print(
        "| tools | ranking | cold build ms | warm rebuild ms | query p50 ms | query p99 ms |"
        " rank_bm25 get_scores p50 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    catalogs: list[tuple[str, list[SearchDoc]]] = []
    for n in args.sizes:
        catalogs.append((f"{n:,}", synthetic_catalog(n, seed=n)))
    for n in args.sizes:
        real = real_catalog(n)
        if real is not None and n >= 1_000:
            catalogs.append((f"{n:,} real", real))
    start = time.perf_counter()
    model = StaticModel.load()
    load_ms = (time.perf_counter() - start) * 1000
    for label, docs in catalogs:
        queries = make_queries(docs, args.queries, seed=1)
        plain = BM25Okapi([tokenize(f"{d.tool} {d.description}") for d in docs])
        keyword_queries = [q for q in queries if not q.startswith("select:")][:100]
        theirs = percentile(time_calls(functools.partial(plain_scores, plain), keyword_queries), 50)
        for ranking in ("bm25", "bm25+semantic"):
            embedder = Embedder(model) if ranking != "bm25" else None
            start = time.perf_counter()
            index = ToolIndex.build(docs, embedder=embedder)
            build_ms = (time.perf_counter() - start) * 1000
            builds = []
            for _ in range(3):  # a server's tool list changed: the index is simply rebuilt
                start = time.perf_counter()
                index = index.replace_server(
                    docs[0].server, [d for d in docs if d.server == docs[0].server]
                )
                builds.append((time.perf_counter() - start) * 1000)
            ours = time_calls(functools.partial(index.search, limit=5), queries)
            print(
                f"| {label} | {ranking} | {build_ms:.1f} | {statistics.median(builds):.1f} |"
                f" {percentile(ours, 50):.3f} | {percentile(ours, 99):.3f} | {theirs:.3f} |"
            )
    query = "I'm planning a trip to Lisbon next week: what's the weather and any cheap flights?"
    embed_ms = time_calls(lambda q: model.embed([q]), [query] * 200)
    print(f"\nmodel load: {load_ms:.1f} ms; query embedding p50 {percentile(embed_ms, 50):.3f} ms")
    if args.transformer_sizes:
        transformer_table(MINILM_DIR, Embedder(model), args.transformer_sizes, args.queries)


def transformer_table(source: Path, static: Embedder, sizes: Sequence[int], n_queries: int) -> None:
    """Cold and warm costs of the all-MiniLM-L6-v2 path."""
    start = time.perf_counter()
    transformer = TransformerModel.load(source)
    load_ms = (time.perf_counter() - start) * 1000
    query = "I'm planning a trip to Lisbon next week: what's the weather and any cheap flights?"
    embed_ms = time_calls(lambda q: transformer.embed([q]), [query] * 50)
    print(
        f"\nall-MiniLM-L6-v2: model load {load_ms:.0f} ms (on the background thread);"
        f" query embedding p50 {percentile(embed_ms, 50):.1f} ms,"
        f" p99 {percentile(embed_ms, 99):.1f} ms"
    )
    print(
        "\n| tools | embed tools cold s | embed tools warm (disk cache) ms |"
        " search before ready p50 ms | search ready p50 ms (new query) |"
        " search ready p50 ms (repeated query) |"
    )
    print("|---|---|---|---|---|---|")
    for n in sizes:
        docs = distinct_catalog(n)
        queries = [q for q in make_queries(docs, n_queries, seed=2) if not q.startswith("select:")]
        with tempfile.TemporaryDirectory() as cache:
            encoder = DenseEncoder(lambda: transformer, cache_dir=Path(cache), name="minilm")
            index = ToolIndex.build(docs, embedder=static, dense=encoder)
            before = time_calls(functools.partial(index.search, limit=5), queries[:100])
            start = time.perf_counter()
            index.wait_semantic()
            cold_s = time.perf_counter() - start
            fresh = DenseEncoder(lambda: transformer, cache_dir=Path(cache), name="minilm")
            start = time.perf_counter()
            warm = ToolIndex.build(docs, embedder=static, dense=fresh)
            warm.wait_semantic()
            warm_ms = (time.perf_counter() - start) * 1000
            new = []
            for q in queries[:200]:
                t0 = time.perf_counter()
                warm.search(q, 5)
                new.append((time.perf_counter() - t0) * 1000)
            repeated = time_calls(functools.partial(warm.search, limit=5), queries[:200])
        print(
            f"| {n:,} | {cold_s:.1f} | {warm_ms:.0f} | {percentile(before, 50):.3f} |"
            f" {percentile(new, 50):.2f} | {percentile(repeated, 50):.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
