"""Does training on query -> tool pairs generalise to tools it never saw? (It did not.)

Run in a venv with torch (never a runtime dependency of caliban), e.g. the one of
``build_embedding_model.py``, (it uses the MiniLM caliban ships)::

    python benchmarks/training_probe.py

ToolLens is split **by server** into 4 folds of its 19 servers: for each fold, training sees
the requests whose relevant tools all sit on the other servers (plus MCPToolBench++ and our
dev halves), and testing scores the requests whose tools all sit on the held-out servers (the
requests that span both are left out of both). Each candidate is scored fused with BM25 (as
the index fuses it: z-scores) against the same fusion untrained, over the whole ToolLens
catalog; the figures are hit@1 / hit@5 / recall@10 summed over the folds. Then a model trained
on all of ToolLens and the dev halves is scored on our holdout halves.

Candidates (contrastive InfoNCE over the whole catalog, temperature 0.05):

* ``adapter-q``: a linear map added to MiniLM's query embedding (identity + A);
* ``adapter-qt``: the same on both the query and the tool embeddings;
* ``static``: the static model's token vectors themselves, tied to the shipped ones by an L2
  penalty.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import torch
from _catalogs import Query
from _rankers import FIELDS, Bm25, Variant
from search_quality import K, QuerySet, query_sets

from caliban.search.index import tool_text
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import StaticModel
from caliban.search.transformer import TransformerModel

TAU = 0.05
FOLDS = 4
Metrics = tuple[float, float, float]


def zscores(x: np.ndarray) -> np.ndarray:
    std = x.std(axis=-1, keepdims=True)
    return np.where(std > 0, (x - x.mean(axis=-1, keepdims=True)) / np.maximum(std, 1e-12), 0)


def metrics(qs: QuerySet, scores: np.ndarray, rows: Sequence[int]) -> np.ndarray:
    """Summed hit@1, hit@5, recall@10 of ``rows`` (divide by their number)."""
    out = np.zeros(3)
    for r in rows:
        q: Query = qs.queries[r]
        top = np.argsort(-scores[r], kind="stable")[:K]
        flags = [q.is_relevant(qs.docs[i]) for i in top]
        found = {
            n
            for i, ok in zip(top, flags, strict=True)
            if ok
            for n in (qs.docs[i].tool, qs.docs[i].name)
        }
        out += (any(flags[:1]), any(flags[:5]), len(q.relevant & found) / len(q.relevant))
    return out


class Signals:
    """Per set: BM25 scores, relevance pairs, MiniLM embeddings and static token ids."""

    def __init__(self, qs: QuerySet, minilm: TransformerModel, static: StaticModel) -> None:
        self.qs = qs
        bm = Bm25(qs.docs, Variant(per_field=False, weights=dict.fromkeys(FIELDS, 1.0)))
        self.bm25 = np.stack([bm.scores(q.text) for q in qs.queries])
        self.pairs = [
            (r, i)
            for r, q in enumerate(qs.queries)
            for i, d in enumerate(qs.docs)
            if q.is_relevant(d)
        ]
        texts = [tool_text(d) for d in qs.docs]
        self.tools = torch.tensor(minilm.embed(texts))
        self.queries = torch.tensor(minilm.embed([q.text for q in qs.queries]))
        self.tool_ids = [torch.tensor(static.token_ids(t)) for t in texts]
        self.query_ids = [torch.tensor(static.token_ids(q.text)) for q in qs.queries]
        df = np.zeros(len(static.vocab), np.float32)
        for ids in self.tool_ids:
            df[np.unique(ids.numpy())] += 1
        n = len(texts)
        self.idf = torch.tensor(np.log1p((n - df + 0.5) / (df + 0.5)))


def pool(vectors: torch.Tensor, ids: Sequence[torch.Tensor], idf: torch.Tensor) -> torch.Tensor:
    flat = torch.cat(ids)
    offsets = torch.tensor([0, *[len(x) for x in ids[:-1]]]).cumsum(0)
    out = torch.nn.functional.embedding_bag(
        flat, vectors, offsets, mode="sum", per_sample_weights=idf[flat]
    )
    return out / out.norm(dim=1, keepdim=True).clamp_min(1e-9)


Scorer = Callable[[Signals], np.ndarray]


def train(
    kind: str, data: dict[str, tuple[Signals, list[tuple[int, int]]]], v0: torch.Tensor
) -> Scorer:
    """Train one candidate on ``data`` (set -> signals and its training pairs)."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    a = torch.zeros(384, 384, requires_grad=True)
    b = torch.zeros(384, 384, requires_grad=True)
    vectors = v0.clone().requires_grad_(True)
    params = {"adapter-q": [a], "adapter-qt": [a, b], "static": [vectors]}[kind]
    lr = 0.05 * float(v0.abs().mean()) if kind == "static" else 1e-3
    opt = torch.optim.Adam(params, lr=lr)

    def embed(s: Signals, rows: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        rows = list(range(len(s.qs.queries))) if rows is None else rows
        if kind == "static":
            return pool(vectors, [s.query_ids[r] for r in rows], s.idf), pool(
                vectors, s.tool_ids, s.idf
            )
        q = s.queries[rows] + s.queries[rows] @ a
        t = s.tools + s.tools @ b if kind == "adapter-qt" else s.tools
        return q / q.norm(dim=1, keepdim=True), t / t.norm(dim=1, keepdim=True)

    for _ in range(200 if kind != "static" else 150):
        loss = torch.zeros(())
        for s, pairs in data.values():
            chosen = [pairs[i] for i in rng.choice(len(pairs), min(128, len(pairs)), replace=False)]
            q, t = embed(s, [r for r, _ in chosen])
            target = torch.tensor([i for _, i in chosen])
            loss = loss + torch.nn.functional.cross_entropy(q @ t.T / TAU, target)
        penalty = (
            ((vectors - v0) ** 2).sum() / v0.pow(2).sum()
            if kind == "static"
            else 1e-2 * sum((p**2).sum() for p in params)
        )
        opt.zero_grad()
        (loss / len(data) + penalty).backward()
        opt.step()

    def score(s: Signals) -> np.ndarray:
        with torch.no_grad():
            q, t = embed(s)
            return (q @ t.T).numpy()

    return score


def main() -> None:
    minilm, static = TransformerModel.load(MINILM_DIR), StaticModel.load()
    v0 = torch.tensor(static._vectors.astype(np.float32) * static._scales[:, None])
    sets = {qs.name: Signals(qs, minilm, static) for qs in query_sets()}
    lens = sets["toollens"]
    server = {d.tool: d.server for d in lens.qs.docs}
    servers = sorted(set(server.values()))
    random.Random(0).shuffle(servers)
    extra = {n: (sets[n], sets[n].pairs) for n in ("mcptoolbench", "user dev", "tasks dev")}

    def base(kind: str) -> Scorer:
        if kind == "static":
            return lambda s: (pool(v0, s.query_ids, s.idf) @ pool(v0, s.tool_ids, s.idf).T).numpy()
        return lambda s: (s.queries @ s.tools.T).numpy()

    weight = {"adapter-q": 0.8, "adapter-qt": 0.8, "static": 0.5}
    for kind in ("adapter-q", "adapter-qt", "static"):
        before, after, n = np.zeros(3), np.zeros(3), 0
        for f in range(FOLDS):
            held = set(servers[f::FOLDS])
            test = [
                r
                for r, q in enumerate(lens.qs.queries)
                if all(server[t] in held for t in q.relevant)
            ]
            train_rows = {
                r
                for r, q in enumerate(lens.qs.queries)
                if not any(server[t] in held for t in q.relevant)
            }
            pairs = [(r, i) for r, i in lens.pairs if r in train_rows]
            scorer = train(kind, {"toollens": (lens, pairs), **extra}, v0)
            w = weight[kind]
            before += metrics(lens.qs, zscores(lens.bm25) + w * zscores(base(kind)(lens)), test)
            after += metrics(lens.qs, zscores(lens.bm25) + w * zscores(scorer(lens)), test)
            n += len(test)
        print(
            f"{kind}: ToolLens held-out servers ({n} requests)",
            np.round(before / n, 3),
            "->",
            np.round(after / n, 3),
            flush=True,
        )
        scorer = train(kind, {"toollens": (lens, lens.pairs), **extra}, v0)
        for name in ("user holdout", "tasks holdout", "github holdout"):
            s = sets[name]
            rows = range(len(s.qs.queries))
            b = metrics(s.qs, zscores(s.bm25) + weight[kind] * zscores(base(kind)(s)), rows) / len(
                rows
            )
            a = metrics(s.qs, zscores(s.bm25) + weight[kind] * zscores(scorer(s)), rows) / len(rows)
            print(f"    {name}", np.round(b, 3), "->", np.round(a, 3), flush=True)


if __name__ == "__main__":
    main()
