"""How well ToolSearch finds the right MCP tools, on every request set, beside plain BM25.

Run: ``python benchmarks/search_quality.py`` (``--misses SET`` lists the default ranker's
misses at 5 on one set; ``--no-ablation`` skips the ablation table; ``--model NAME=DIR`` adds
rows for another conversion of MiniLM, e.g. the fp16 one ``scripts/convert_minilm.py
--dtype fp16`` writes, or the original float32 directory).

Sets (catalog in brackets; the evaluation data lives in ``../shared/eval/``, or
``$CALIBAN_EVAL_DIR``). Whole requests:

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

Short queries, one capability each, as a model writes them in a ToolSearch call
(``queries_short.jsonl``, written from the task texts before the tool names were read):

* ``short toollens`` [ToolLens], ``short mcptoolbench`` [pool], ``short github`` [GitHub];
* ``joined toollens`` - the short queries of one ToolLens request joined with ``;`` into one
  query (a model asking for several capabilities at once); relevant: every part's tools.

Tuned on: everything but the ``holdout`` halves, which are scored only.

A request is answered at k when a relevant tool is among the first k hits; recall@10 is the
share of its relevant tools among the first 10. Rankers:

* ``default`` - ``caliban.search.ToolIndex`` as it ships: BM25 fused with all-MiniLM-L6-v2
  (int8, ``caliban/search/model/minilm``) once its tool embeddings are ready (awaited here;
  they are cached under the user cache dir, so a second run is faster);
* ``static`` - the same before the transformer is ready: BM25 and the static model (the
  ranker of the first searches of a new catalog, and the previous default);
* ``bm25-plain`` - rank_bm25's BM25Okapi over name + server + description + parameters, the
  project's tokenizer (the baseline of issue 18).

The ablation changes one component per row; every cell is hit@1 / hit@5 / recall@10, and
its first row is plain BM25. Rows through ``ToolIndex`` change its :class:`Ranking` or its
models; the tokenization rows re-implement BM25 alone (``_rankers.py``) with one knob changed,
to compare with the row "BM25 alone (re-implemented)".
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
from _catalogs import (
    Query,
    eval_dir_or_exit,
    large_catalog,
    load_github_catalog,
    load_joined_queries,
    load_mcptoolbench_queries,
    load_short_queries,
    load_task_queries,
    load_toollens,
    load_user_queries,
    pooled_catalog,
)
from _rankers import FIELDS, Variant, bm25_ranker
from rank_bm25 import BM25Okapi

from caliban.config.paths import cache_dir
from caliban.search.dense import DenseEncoder, FloatArray
from caliban.search.index import DEFAULT_RANKING, Ranking, SearchDoc, ToolIndex, schema_texts
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import Embedder, load_embedder
from caliban.search.text import tokenize
from caliban.search.transformer import TransformerModel

Ranker = Callable[[str, int], list[SearchDoc]]
K = 10
DEV_SETS = (
    "user dev",
    "tasks dev",
    "github dev",
    "short toollens",
    "short mcptoolbench",
    "short github",
)
"""Where the probes choose their knobs: the dev halves and the short queries written here."""


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

    def cell(self) -> str:
        return f"{self.hit1:.3f}/{self.hit5:.3f}/{self.recall10:.3f}"


class MemoModel:
    """A transformer that remembers every text it embedded: the ablation asks the same
    queries again and again, beyond the encoder's own query cache."""

    def __init__(self, model: TransformerModel) -> None:
        self.model = model
        self.digest = model.digest
        self.dims = model.dims
        self._memo: dict[str, FloatArray] = {}

    def embed(self, texts: Sequence[str]) -> FloatArray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._memo.update(zip(missing, self.model.embed(missing), strict=True))
        return np.stack([self._memo[t] for t in texts])


@cache
def encoder(directory: Path) -> DenseEncoder:
    """A transformer encoder for the model in ``directory``, loaded once, its tool embeddings
    cached where caliban caches them."""
    model = MemoModel(TransformerModel.load(directory))
    return DenseEncoder(
        lambda: model, cache_dir=cache_dir() / "tool-embeddings", name=directory.name
    )


def index_ranker(
    docs: Sequence[SearchDoc],
    *,
    static: Embedder | None,
    dense: DenseEncoder | None = None,
    ranking: Ranking = DEFAULT_RANKING,
) -> Ranker:
    """``ToolIndex`` with these models; with a transformer, its embeddings are awaited."""
    index = ToolIndex.build(docs, embedder=static, dense=dense, ranking=ranking)
    if dense is not None and not index.wait_semantic(1800):
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
    sets += [
        QuerySet(name="short toollens", docs=toollens_docs, queries=load_short_queries("toollens")),
        QuerySet(name="short mcptoolbench", docs=pool, queries=load_short_queries("mcptoolbench")),
        QuerySet(name="short github", docs=github, queries=load_short_queries("github")),
        QuerySet(
            name="joined toollens", docs=toollens_docs, queries=load_joined_queries("toollens")
        ),
    ]
    return sets


Row = Callable[[QuerySet], Ranker]


def ablation_rows(models: dict[str, Path]) -> dict[str, Row]:
    """One component changed per row."""
    static = load_embedder()
    minilm = encoder(MINILM_DIR)

    def index(
        *, model: Embedder | None = static, dense: DenseEncoder | None = minilm, **knobs: object
    ) -> Row:
        ranking = replace(DEFAULT_RANKING, **knobs)  # type: ignore[arg-type]
        return lambda qs: index_ranker(qs.docs, static=model, dense=dense, ranking=ranking)

    base = Variant(per_field=False, weights=dict.fromkeys(FIELDS, 1.0))
    rows: dict[str, Row] = {
        "plain BM25 (rank_bm25, baseline)": lambda qs: bm25_plain_ranker(qs.docs),
        "BM25 alone (ToolIndex, no model)": index(model=None, dense=None),
        "  repeated query words counted again": index(model=None, dense=None, unique_terms=False),
        "BM25 alone (re-implemented)": lambda qs: bm25_ranker(qs.docs, base),
        "  no stemming": lambda qs: bm25_ranker(qs.docs, replace(base, stemmer=lambda w: w)),
        "  no stop words": lambda qs: bm25_ranker(qs.docs, replace(base, stop_words=frozenset())),
        "  per-field BM25 (params 0.3), summed": lambda qs: bm25_ranker(qs.docs, Variant()),
        "static: BM25 + static model, z-scores, 0.5": index(dense=None),
        "  round 1's fusion (max-scaled, 0.5)": index(dense=None, fusion="max"),
        "  static weight 0.3": index(dense=None, static_weight=0.3),
        "  static weight 0.8": index(dense=None, static_weight=0.8),
        "default: BM25 + MiniLM int8, z-scores, 1.2": index(),
        "  MiniLM weight 0.8": index(dense_weight=0.8),
        "  MiniLM weight 1.6": index(dense_weight=1.6),
        "  max-scaled fusion, weight 0.8": index(fusion="max", dense_weight=0.8),
        "  + static model, weight 0.3": index(static_with_dense=0.3),
        "  MiniLM alone (no BM25)": index(lexical_weight=0.0),
        "  a query's ;-separated parts ranked each, in turns": index(split_parts=True),
        "  no name-phrase bonus": index(name_phrase=0.0),
        "  no name-phrase bonus, static model": index(dense=None, name_phrase=0.0),
        "  BM25 b 0.75 for queries of 1-2 terms too": index(short_query_terms=0),
    }
    for name, directory in models.items():
        rows[f"  MiniLM {name}"] = index(dense=encoder(directory))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", metavar="SET", help="list the default ranker's misses at 5")
    parser.add_argument("--no-ablation", action="store_true")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an ablation row for another conversion of MiniLM",
    )
    parser.add_argument(
        "--sets", nargs="*", metavar="PREFIX", help="only the sets whose names start so"
    )
    parser.add_argument(
        "--minilm", type=Path, default=MINILM_DIR, help="the default's MiniLM directory"
    )
    args = parser.parse_args()
    models = {name: Path(d) for name, d in (m.split("=", 1) for m in args.model)}

    sets = [qs for qs in query_sets() if not args.sets or qs.name.startswith(tuple(args.sets))]
    static = load_embedder()
    rankers: dict[str, Row] = {
        "default": lambda qs: index_ranker(qs.docs, static=static, dense=encoder(args.minilm)),
        "static": lambda qs: index_ranker(qs.docs, static=static),
        "bm25-plain": lambda qs: bm25_plain_ranker(qs.docs),
    }
    print(f"| {'set':<24} | {'tools':>5} | {'ranker':<10} | hit@1 | hit@5 | recall@10 |")
    print(f"|{'-' * 26}|-------|{'-' * 12}|-------|-------|-----------|")
    below: list[str] = []
    for qs in sets:
        results = {name: evaluate(make(qs), qs.queries) for name, make in rankers.items()}
        for ranker_name, s in results.items():
            label = f"{qs.name} ({len(qs.queries)})"
            print(
                f"| {label:<24} | {len(qs.docs):>5} | {ranker_name:<10} | {s.hit1:.3f} |"
                f" {s.hit5:.3f} | {s.recall10:9.3f} |",
                flush=True,
            )
        ours, plain = results["default"], results["bm25-plain"]
        for measure in ("hit1", "hit5", "recall10"):
            if getattr(ours, measure) < getattr(plain, measure):
                below.append(f"{qs.name} {measure}")
        if args.misses == qs.name:
            for q, got in ours.misses:
                print(
                    f"  {q.text!r}\n    want {sorted(q.relevant)}\n    got  {got}", file=sys.stderr
                )
    print(
        "\ndefault below plain BM25 on: " + ", ".join(below)
        if below
        else "\ndefault at or above plain BM25 on every set and measure"
    )
    if args.no_ablation:
        return
    print("\nablation: hit@1/hit@5/recall@10")
    print(f"| {'variant':<44} | " + " | ".join(f"{qs.name:<18}" for qs in sets) + " |")
    print(f"|{'-' * 46}|" + "|".join("-" * 20 for _ in sets) + "|")
    for label, make in ablation_rows(models).items():
        cells = [evaluate(make(qs), qs.queries).cell() for qs in sets]
        print(f"| {label:<44} | " + " | ".join(f"{c:<18}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
