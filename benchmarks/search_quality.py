"""How well ToolSearch finds the right MCP tools, on every request set, beside plain BM25.

Run: ``python benchmarks/search_quality.py`` (``--misses SET`` lists the requests the shipped
ranker misses at 5 on one set; ``--no-ablation`` skips the ablation table).

Sets (catalog in brackets; the evaluation data lives in ``../shared/eval/``, or
``$CALIBAN_EVAL_DIR``):

* ``mcptoolbench`` - the 699 MCPToolBench++ requests [pool: reference servers + GitHub +
  MCPToolBench++ tools, 216 tools]. Generated from the tools' own schemas: an upper bound.
* ``toollens`` - the 957 ToolLens dev requests, whole request as the query, 1-3 relevant
  tools each [ToolLens, 464 tools on 19 servers]. Nobody on the project wrote them.
* ``user dev`` / ``user holdout`` - our own requests in a user's words
  (``queries_user.jsonl``) [pool].
* ``tasks dev`` / ``tasks holdout`` - task descriptions as a developer types them
  (``queries_tasks.jsonl``) [large: pool + 20 more real servers, 569 tools].
* ``github dev`` / ``github holdout`` - those of our requests whose answer is a GitHub tool
  [the GitHub server alone, 117 tools]: one heavy server.

Tuned on: toollens, mcptoolbench and the ``dev`` halves. Never tuned on: the ``holdout``
halves (scored only, in aggregate).

A request is answered at k when a relevant tool is among the first k hits; recall@10 is the
share of its relevant tools among the first 10. Rankers:

* ``shipped`` - ``caliban.search.ToolIndex`` with the shipped embedding model;
* ``bm25-plain`` - rank_bm25's BM25Okapi over name + server + description + parameters, the
  project's tokenizer (the baseline of issue 18).

The ablation (``_rankers.py``) changes one component of the shipped ranking per row; cells
are hit@5 / recall@10.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import snowballstemmer
from _catalogs import (
    Query,
    eval_dir_or_exit,
    large_catalog,
    load_github_catalog,
    load_mcptoolbench_queries,
    load_task_queries,
    load_toollens,
    load_user_queries,
    pooled_catalog,
)
from _rankers import Hybrid, Variant, hybrid_ranker
from rank_bm25 import BM25Okapi

from caliban.search.index import SearchDoc, ToolIndex, schema_texts
from caliban.search.semantic import load_embedder
from caliban.search.text import tokenize

Ranker = Callable[[str, int], list[SearchDoc]]
K = 10


@dataclass(frozen=True, kw_only=True)
class QuerySet:
    name: str
    docs: Sequence[SearchDoc]
    queries: Sequence[Query]


@dataclass(frozen=True, kw_only=True)
class Scores:
    hit1: float
    hit5: float
    recall10: float
    misses: tuple[tuple[Query, tuple[str, ...]], ...]


def shipped_ranker(docs: Sequence[SearchDoc]) -> Ranker:
    index = ToolIndex.build(docs, embedder=load_embedder())
    return lambda q, k: [hit.doc for hit in index.search(q, k).hits]


def bm25_plain_ranker(docs: Sequence[SearchDoc]) -> Ranker:
    corpus = [
        tokenize(" ".join([d.tool, d.server, d.description, *schema_texts(d.input_schema)]))
        for d in docs
    ]
    model = BM25Okapi(corpus)

    def rank(q: str, k: int) -> list[SearchDoc]:
        scores = model.get_scores(tokenize(q))
        order = np.argsort(-scores, kind="stable")[:k]
        return [docs[i] for i in order if scores[i] > 0]

    return rank


def evaluate(rank: Ranker, queries: Sequence[Query]) -> Scores:
    hit1 = hit5 = 0
    recall = 0.0
    misses = []
    for q in queries:
        found = rank(q.text, K)
        flags = [q.is_relevant(d) for d in found]
        hit1 += any(flags[:1])
        hit5 += any(flags[:5])
        if not any(flags[:5]):
            misses.append((q, tuple(d.name for d in found[:5])))
        names = {d.tool for d, ok in zip(found, flags, strict=True) if ok} | {
            d.name for d, ok in zip(found, flags, strict=True) if ok
        }
        recall += len(q.relevant & names) / len(q.relevant)
    n = len(queries)
    return Scores(hit1=hit1 / n, hit5=hit5 / n, recall10=recall / n, misses=tuple(misses))


def query_sets() -> list[QuerySet]:
    eval_dir = eval_dir_or_exit()
    pool = pooled_catalog(eval_dir)
    large = large_catalog(eval_dir)
    github = load_github_catalog(eval_dir)
    toollens_docs, toollens_queries = load_toollens(eval_dir)
    github_tools = {d.tool for d in github}
    sets = [
        QuerySet(name="mcptoolbench", docs=pool, queries=load_mcptoolbench_queries(eval_dir)),
        QuerySet(name="toollens", docs=toollens_docs, queries=toollens_queries),
    ]
    for split in ("dev", "holdout"):
        sets.append(
            QuerySet(name=f"user {split}", docs=pool, queries=load_user_queries(split=split))
        )
    for split in ("dev", "holdout"):
        sets.append(
            QuerySet(name=f"tasks {split}", docs=large, queries=load_task_queries(split=split))
        )
    for split in ("dev", "holdout"):
        mine = [*load_user_queries(split=split), *load_task_queries(split=split)]
        sets.append(
            QuerySet(
                name=f"github {split}",
                docs=github,
                queries=[
                    replace(q, relevant=q.relevant & github_tools)
                    for q in mine
                    if q.relevant & github_tools
                ],
            )
        )
    return sets


def ablation_rows() -> dict[str, Hybrid]:
    """One component changed per row (the first row is the shipped configuration)."""
    shipped = Hybrid()
    base = shipped.bm25
    assert base is not None
    porter = snowballstemmer.stemmer("porter")
    return {
        "shipped: BM25 + semantic (score fusion 0.5)": shipped,
        "- semantic (BM25 alone)": replace(shipped, semantic=None),
        "- BM25 (semantic alone)": replace(shipped, bm25=None),
        "RRF (k 60) instead of score fusion": replace(shipped, fusion="rrf", weight=1.0),
        "semantic weight 0.3": replace(shipped, weight=0.3),
        "semantic weight 0.8": replace(shipped, weight=0.8),
        "plain token mean, not catalog IDF": replace(shipped, semantic="mean"),
        "no stemming": replace(shipped, bm25=replace(base, stemmer=lambda w: w)),
        "Porter instead of Snowball English": replace(
            shipped, bm25=replace(base, stemmer=porter.stemWord)
        ),
        "no stop words": replace(shipped, bm25=replace(base, stop_words=frozenset())),
        "per-field BM25 (params 0.3), summed": replace(shipped, bm25=Variant()),
        "parameters at 0.5 in one field": replace(
            shipped, bm25=replace(base, weights={**base.weights, "params": 0.5})
        ),
        "+ multi-part: best clause score added": replace(shipped, parts=True),
        "+ server diversity (0.1 per repeat)": replace(shipped, diversity=0.1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", metavar="SET", help="list the shipped ranker's misses at 5")
    parser.add_argument("--no-ablation", action="store_true")
    args = parser.parse_args()

    sets = query_sets()
    print(f"| {'set':<22} | {'tools':>5} | {'ranker':<10} | hit@1 | hit@5 | recall@10 |")
    print(f"|{'-' * 24}|-------|{'-' * 12}|-------|-------|-----------|")
    for qs in sets:
        for ranker_name, make in (("shipped", shipped_ranker), ("bm25-plain", bm25_plain_ranker)):
            s = evaluate(make(qs.docs), qs.queries)
            label = f"{qs.name} ({len(qs.queries)})"
            print(
                f"| {label:<22} | {len(qs.docs):>5} | {ranker_name:<10} | {s.hit1:.3f} |"
                f" {s.hit5:.3f} | {s.recall10:9.3f} |"
            )
            if ranker_name == "shipped" and args.misses == qs.name:
                for q, got in s.misses:
                    print(
                        f"  {q.text!r}\n    want {sorted(q.relevant)}\n    got  {got}",
                        file=sys.stderr,
                    )
    if args.no_ablation:
        return
    embedder = load_embedder()
    print("\nablation: hit@5 / recall@10")
    print(f"| {'variant':<42} | " + " | ".join(f"{qs.name:<13}" for qs in sets) + " |")
    print(f"|{'-' * 44}|" + "|".join("-" * 15 for _ in sets) + "|")
    for label, variant in ablation_rows().items():
        cells = []
        for qs in sets:
            s = evaluate(hybrid_ranker(qs.docs, variant, embedder), qs.queries)
            cells.append(f"{s.hit5:.3f} / {s.recall10:.3f}")
        print(f"| {label:<42} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
