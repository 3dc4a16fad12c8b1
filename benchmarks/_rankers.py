"""BM25 variants for the ablation in ``search_quality.py``: benchmark code, not shipped.

Each variant is BM25 alone over a tool's fields with one tokenization or field knob changed,
so a row of the ablation shows what that knob buys (the fusion's knobs are ``ToolIndex``'s
own :class:`caliban.search.index.Ranking`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from caliban.search.index import schema_texts
from caliban.search.text import STOP_WORDS, stem, words

Doc = object
Ranker = Callable[[str, int], list]  # type: ignore[type-arg]
FIELDS = ("name", "server", "description", "params")


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
    """Per-field weights (with ``per_field=False``: term frequency multipliers)."""
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


def bm25_ranker(docs: Sequence[object], variant: Variant) -> Ranker:
    """BM25 alone with ``variant``'s knobs; each query word counts once (as in ToolIndex)."""
    bm = Bm25(docs, variant)

    def rank(q: str, k: int) -> list:  # type: ignore[type-arg]
        scores = bm.scores(q)
        order = np.argsort(-scores, kind="stable")[:k]
        return [docs[i] for i in order if scores[i] > 0]

    return rank
