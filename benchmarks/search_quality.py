"""How well ToolSearch finds the right MCP tool, against two simple baselines.

Run: ``python benchmarks/search_quality.py`` (``--misses`` lists the queries ours misses at 5;
``--ablations`` measures ranking variants instead).

Catalogs: the reference servers + the GitHub server + the MCPToolBench++ tools, pooled (216
tools); and the large catalog, that pool plus 20 more real servers (``extra_tools.json``, 569
tools). Queries on the pool: every MCPToolBench++ query, and our own ``queries_user.jsonl``
written in a user's words. On the large catalog: ``queries_tasks.jsonl``, task descriptions
as a developer types them. Each of our sets has a ``dev`` split that was looked at while the
ranker was tuned and a ``holdout`` split that was written before tuning and never tuned on.
A query is answered at k if a relevant
tool (gold or also-correct, by bare tool name) is in the top k; recall@10 is the share of a
query's relevant tools in the top 10. Rankers:

* ``toolsearch`` - ``caliban.search.index.ToolIndex``;
* ``bm25-plain`` - rank_bm25's BM25Okapi over ``tool name + description`` lower-cased and split
  on whitespace;
* ``substring`` - a tool matches when a lower-cased query word is a substring of its name or
  description; tools rank by the number of matching words (ties in catalog order).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from _catalogs import (
    Query,
    eval_dir_or_exit,
    large_catalog,
    load_mcptoolbench_queries,
    load_task_queries,
    load_user_queries,
    pooled_catalog,
)
from rank_bm25 import BM25Okapi

from caliban.search.index import DEFAULT_PARAMS, RankingParams, SearchDoc, ToolIndex

Ranker = Callable[[str, int], list[SearchDoc]]
K = 10


def toolsearch_ranker(docs: Sequence[SearchDoc], params: RankingParams = DEFAULT_PARAMS) -> Ranker:
    index = ToolIndex.build(docs, params=params)
    return lambda q, k: [hit.doc for hit in index.search(q, k).hits]


def _variant(**changes: object) -> RankingParams:
    return dataclasses.replace(DEFAULT_PARAMS, **changes)  # type: ignore[arg-type]


ABLATIONS: dict[str, RankingParams] = {
    "default": DEFAULT_PARAMS,
    "no synonyms": _variant(synonym_weight=0.0, unknown_synonym_weight=0.0),
    "no phrases": _variant(phrase_weight=0.0),
    "no prefix relatives": _variant(prefix_weight=0.0),
    "no expansion at all": _variant(
        synonym_weight=0.0, unknown_synonym_weight=0.0, phrase_weight=0.0, prefix_weight=0.0
    ),
    "BM25Okapi instead of BM25Plus": _variant(scorer="okapi"),
    "BM25F instead of per-field sum": _variant(combine="bm25f"),
    "name x3 (others x1)": _variant(
        field_weights={"name": 3.0, "server": 1.0, "description": 1.0, "params": 1.0}
    ),
    "no parameters field": _variant(field_weights={**DEFAULT_PARAMS.field_weights, "params": 0.0}),
    "no server field": _variant(field_weights={**DEFAULT_PARAMS.field_weights, "server": 0.0}),
    "no action layer": _variant(action_boost=0.0),
    "leading verb at full weight": _variant(action_verb_weight=1.0),
}
"""Ranking variants for ``--ablations``: what each part of the ranking buys."""


def bm25_plain_ranker(docs: Sequence[SearchDoc]) -> Ranker:
    model = BM25Okapi([f"{d.tool} {d.description}".lower().split() for d in docs])

    def rank(q: str, k: int) -> list[SearchDoc]:
        scores = model.get_scores(q.lower().split())
        order = np.argsort(-scores, kind="stable")[:k]
        return [docs[i] for i in order if scores[i] > 0]

    return rank


def substring_ranker(docs: Sequence[SearchDoc]) -> Ranker:
    texts = [f"{d.tool} {d.description}".lower() for d in docs]

    def rank(q: str, k: int) -> list[SearchDoc]:
        words = q.lower().split()
        counts = [sum(w in t for w in words) for t in texts]
        order = sorted(range(len(docs)), key=lambda i: -counts[i])
        return [docs[i] for i in order[:k] if counts[i] > 0]

    return rank


@dataclass(frozen=True, kw_only=True)
class Scores:
    hit1: float
    hit5: float
    recall10: float
    misses: tuple[tuple[Query, tuple[str, ...]], ...]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list dev queries ours misses at 5")
    parser.add_argument(
        "--holdout-misses", action="store_true", help="with --misses, held-out sets too"
    )
    parser.add_argument(
        "--ablations", action="store_true", help="hit@5 of ranking variants instead"
    )
    args = parser.parse_args()

    eval_dir = eval_dir_or_exit()
    docs = pooled_catalog(eval_dir)
    query_sets = {
        "mcptoolbench": load_mcptoolbench_queries(eval_dir),
        "user (all)": load_user_queries(),
        "user dev": load_user_queries(split="dev"),
        "user holdout": load_user_queries(split="holdout"),
    }
    large = large_catalog(eval_dir)
    large_sets = {
        "tasks dev": load_task_queries(split="dev"),
        "tasks holdout": load_task_queries(split="holdout"),
    }
    if args.ablations:
        ablations(docs, query_sets, large, large_sets)
        return
    ours: dict[str, Scores] = {}
    for catalog, sets in ((docs, query_sets), (large, large_sets)):
        servers = len({d.server for d in catalog})
        print(f"\ncatalog: {len(catalog)} tools on {servers} servers")
        ours |= table(catalog, sets)
    if args.misses:
        for set_name, s in ours.items():
            if set_name.endswith("holdout") and not args.holdout_misses:
                continue  # tune on dev only
            print(f"\n{set_name}: {len(s.misses)} misses at 5", file=sys.stderr)
            for q, got in s.misses:
                print(
                    f"  {q.text!r}\n    want {sorted(q.relevant)}\n    got  {got}", file=sys.stderr
                )


def table(docs: Sequence[SearchDoc], query_sets: dict[str, list[Query]]) -> dict[str, Scores]:
    """Print hit@1, hit@5 and recall@10 of every ranker on every set; return ours."""
    rankers = {
        "toolsearch": toolsearch_ranker(docs),
        "bm25-plain": bm25_plain_ranker(docs),
        "substring": substring_ranker(docs),
    }
    print(f"| {'queries':<22} | {'ranker':<10} | hit@1 | hit@5 | recall@10 |")
    print(f"|{'-' * 24}|{'-' * 12}|-------|-------|-----------|")
    ours: dict[str, Scores] = {}
    for set_name, queries in query_sets.items():
        for ranker_name, rank in rankers.items():
            s = evaluate(rank, queries)
            if ranker_name == "toolsearch":
                ours[set_name] = s
            label = f"{set_name} ({len(queries)})"
            print(
                f"| {label:<22} | {ranker_name:<10} | {s.hit1:.3f} | {s.hit5:.3f} |"
                f" {s.recall10:9.3f} |"
            )
    return ours


def ablations(
    docs: Sequence[SearchDoc],
    query_sets: dict[str, list[Query]],
    large: Sequence[SearchDoc],
    large_sets: dict[str, list[Query]],
) -> None:
    """hit@5 (hit@1) of each ranking variant on each query set."""
    names = [n for n in query_sets if n != "user (all)"]
    all_names = [*names, *large_sets]
    print(f"| {'variant':<32} | " + " | ".join(f"{n:<14}" for n in all_names) + " |")
    print(f"|{'-' * 34}|" + "|".join("-" * 16 for _ in all_names) + "|")
    for label, params in ABLATIONS.items():
        rank = toolsearch_ranker(docs, params)
        rank_large = toolsearch_ranker(large, params)
        cells = []
        for n in names:
            s = evaluate(rank, query_sets[n])
            cells.append(f"{s.hit5:.3f} ({s.hit1:.3f})".ljust(14))
        for queries in large_sets.values():
            s = evaluate(rank_large, queries)
            cells.append(f"{s.hit5:.3f} ({s.hit1:.3f})".ljust(14))
        print(f"| {label:<32} | " + " | ".join(cells) + " |")
    print("cells: hit@5 (hit@1)")


if __name__ == "__main__":
    main()
