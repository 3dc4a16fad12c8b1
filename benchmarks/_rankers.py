"""Ranking variants for the ablation in ``search_quality.py``: benchmark code, not shipped.

Each variant is plain, numpy-backed BM25 over a tool's fields with one knob changed, so a row
of the ablation shows what that knob buys. The shipped ranker (``caliban.search.ToolIndex``)
is measured beside them.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from caliban.search.index import schema_texts, tool_text
from caliban.search.semantic import Embedder
from caliban.search.text import STOP_WORDS, stem, words

Doc = object
Ranker = Callable[[str, int], list]  # type: ignore[type-arg]
FIELDS = ("name", "server", "description", "params")


def _no_stem(word: str) -> str:
    return word


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One BM25 configuration."""

    stemmer: Callable[[str], str] = stem
    stop_words: frozenset[str] = STOP_WORDS
    per_field: bool = True
    """True: a BM25 per field, weighted sum; False: one BM25 over all fields concatenated."""
    weights: Mapping[str, float] = field(
        default_factory=lambda: {"name": 1.0, "server": 1.0, "description": 1.0, "params": 0.3}
    )
    k1: float = 1.2
    b: float = 0.75
    delta: float = 0.0
    """BM25+ floor (0: BM25 Okapi)."""

    def terms(self, text: str) -> list[str]:
        return [self.stemmer(w) for w in words(text) if len(w) > 1 and w not in self.stop_words]


def doc_fields(doc: object, variant: Variant) -> dict[str, list[str]]:
    params: list[str] = []
    for text in schema_texts(doc.input_schema):  # type: ignore[attr-defined]
        params.extend(variant.terms(text))
    return {
        "name": variant.terms(doc.tool),  # type: ignore[attr-defined]
        "server": variant.terms(doc.server),  # type: ignore[attr-defined]
        "description": variant.terms(doc.description),  # type: ignore[attr-defined]
        "params": params[:300],
    }


class Bm25:
    """A dense BM25 scorer: ``scores(query)`` gives one score per document."""

    def __init__(self, docs: Sequence[object], variant: Variant) -> None:
        self.docs = list(docs)
        self.variant = variant
        fields = [doc_fields(d, variant) for d in self.docs]
        n = len(self.docs)
        self.postings: dict[str, dict[int, float]] = defaultdict(dict)
        if not variant.per_field:
            self._bm25f(fields)
            return
        weights = dict(variant.weights)
        for fname, weight in weights.items():
            if weight <= 0:
                continue
            corpus = [f[fname] for f in fields]
            lengths = [len(c) for c in corpus]
            avg = sum(lengths) / n or 1.0
            df: Counter[str] = Counter()
            for c in corpus:
                df.update(set(c))
            for i, c in enumerate(corpus):
                norm = variant.k1 * (1 - variant.b + variant.b * lengths[i] / avg)
                for term, tf in Counter(c).items():
                    idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                    s = weight * idf * (variant.delta + tf * (variant.k1 + 1) / (tf + norm))
                    self.postings[term][i] = self.postings[term].get(i, 0.0) + s

    def _bm25f(self, fields: list[dict[str, list[str]]]) -> None:
        """One BM25 over all fields, each field's term frequency scaled by its weight."""
        v = self.variant
        n = len(fields)
        tfs: list[dict[str, float]] = []
        lengths = []
        for fl in fields:
            tf: dict[str, float] = defaultdict(float)
            for fname in FIELDS:
                for t in fl[fname]:
                    tf[t] += v.weights[fname]
            tfs.append(tf)
            lengths.append(sum(v.weights[f] * len(fl[f]) for f in FIELDS))
        avg = sum(lengths) / n or 1.0
        df: Counter[str] = Counter()
        for tf in tfs:
            df.update(tf.keys())
        for i, tf in enumerate(tfs):
            norm = v.k1 * (1 - v.b + v.b * lengths[i] / avg)
            for term, f in tf.items():
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                self.postings[term][i] = idf * (v.delta + f * (v.k1 + 1) / (f + norm))

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        out = np.zeros(len(self.docs))
        for term in dict.fromkeys(self.variant.terms(query)):
            for i, s in self.postings.get(term, {}).items():
                out[i] += s
        return out


def top_k(scores: npt.NDArray[np.float64], k: int, positive: bool = True) -> list[int]:
    order = np.argsort(-scores, kind="stable")[:k]
    return [int(i) for i in order if not positive or scores[i] > 0]


def rrf(rankings: Sequence[npt.NDArray[np.float64]], weights: Sequence[float], k: float = 60.0):  # type: ignore[no-untyped-def]
    """Reciprocal-rank fusion of dense score vectors."""
    n = len(rankings[0])
    fused = np.zeros(n)
    for scores, w in zip(rankings, weights, strict=True):
        order = np.argsort(-scores, kind="stable")
        ranks = np.empty(n)
        ranks[order] = np.arange(1, n + 1)
        fused += w / (k + ranks)
    return fused


# --- the semantic signal and fusion ------------------------------------------------------------

SPLIT_PARTS = re.compile(r"(?<=[.!?;])\s+|,\s+(?:and\s+)?|\s+(?:and|also|then|plus)\s+", re.I)
"""Where a request that needs several tools may be cut into parts."""


@dataclass(frozen=True, kw_only=True)
class Hybrid:
    """BM25 (or not) fused with the semantic score (or not), plus multi-part options."""

    bm25: Variant | None = field(default_factory=lambda: Variant(per_field=False, weights=ALL1))
    semantic: str | None = "idf"
    """``idf``: catalog-IDF-weighted token mean (shipped); ``mean``: plain mean; None: off."""
    fusion: str = "score"
    """``score``: BM25/best + weight x rescaled cosine; ``rrf``: reciprocal-rank fusion."""
    weight: float = 0.5
    parts: bool = False
    """Rank each clause of a long request too and keep each tool's best part score."""
    diversity: float = 0.0
    """Penalty per tool already picked from the same server (0: off)."""


ALL1 = {"name": 1.0, "server": 1.0, "description": 1.0, "params": 1.0}


def hybrid_ranker(docs: Sequence[object], h: Hybrid, embedder: Embedder) -> Ranker:
    bm = Bm25(docs, h.bm25) if h.bm25 is not None else None
    cat = embedder.embed_catalog([tool_text(d) for d in docs]) if h.semantic else None  # type: ignore[arg-type]
    plain = embedder.model.embed([tool_text(d) for d in docs]) if h.semantic == "mean" else None  # type: ignore[arg-type]

    def fused(q: str) -> npt.NDArray[np.float64]:
        parts = []
        if bm is not None:
            parts.append(bm.scores(q))
        if cat is not None:
            if plain is not None:
                cos = plain @ embedder.model.embed([q])[0]
            else:
                cos = cat.similarities(q)
                if cos is None:
                    cos = np.zeros(len(docs))
            parts.append(cos.astype(np.float64))
        if len(parts) == 1:
            return parts[0]
        s, c = parts
        if h.fusion == "rrf":
            return rrf([s, c], [1.0, h.weight])
        sn = s / s.max() if s.max() > 0 else s
        top, mean = float(c.max()), float(c.mean())
        return sn + (h.weight * (c - mean) / (top - mean) if top > mean else 0.0)

    def rank(q: str, k: int) -> list:  # type: ignore[type-arg]
        f = fused(q)
        if h.parts:
            clauses = [p for p in SPLIT_PARTS.split(q) if p and len(bm_terms(p)) >= 2]
            if len(clauses) > 1:
                f = f + np.max(np.stack([fused(p) for p in clauses]), axis=0)
        pool = top_k(f, max(k, 30), positive=bm is not None and cat is None)
        if not h.diversity:
            return [docs[i] for i in pool[:k]]
        out: list[int] = []
        seen: Counter[str] = Counter()
        while pool and len(out) < k:
            best = max(pool, key=lambda i: f[i] - h.diversity * seen[docs[i].server])  # type: ignore[attr-defined]
            out.append(best)
            pool.remove(best)
            seen[docs[best].server] += 1  # type: ignore[attr-defined]
        return [docs[i] for i in out]

    return rank


def bm_terms(text: str) -> list[str]:
    return Variant().terms(text)
