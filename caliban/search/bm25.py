"""BM25 over tool texts, built with numpy.

Texts become arrays of term ids (:func:`term_ids`, remembered per text: catalogs repeat
texts, "Repository owner", and rebuilds see them again), and :meth:`Postings.build` turns a
catalog's arrays into BM25 scores per (term, tool) in a few vectorised passes, so indexing
10,000 tools costs a few sorts rather than a Python loop per word. Term ids come from one
process-wide :class:`Vocabulary`, so two indexes agree on them.

Scoring is Okapi BM25 (``k1`` 1.2, ``b`` 0.75) with Lucene's IDF,
``log(1 + (N - df + 0.5) / (df + 0.5))``, which stays positive for words most tools share
(rank_bm25's Okapi IDF goes negative there). Each posting also has its score with ``b`` 0.5
(:data:`SHORT_B`), which the index uses for queries of one or two terms (issue 29, round 5).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

import numpy as np
import numpy.typing as npt

from caliban.search.text import tokenize

__all__ = ["SHORT_B", "VOCABULARY", "Postings", "Vocabulary", "term_ids"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

K1: Final = 1.2
B: Final = 0.75
SHORT_B: Final = 0.5
"""``b`` of :attr:`Postings.short_scores`: less length normalisation, for short queries."""


class Vocabulary:
    """Term ↔ id, growing as new terms are seen (thread-safe; ids are never reused)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._terms: list[str] = []
        self._lock = threading.Lock()

    def ids(self, terms: Sequence[str]) -> IntArray:
        """The ids of ``terms``, adding the new ones."""
        known = self._ids
        try:
            return np.fromiter((known[t] for t in terms), dtype=np.int64, count=len(terms))
        except KeyError:
            with self._lock:
                for t in terms:
                    if t not in known:
                        known[t] = len(self._terms)
                        self._terms.append(t)
            return np.fromiter((known[t] for t in terms), dtype=np.int64, count=len(terms))

    def get(self, term: str) -> int | None:
        """The id of ``term``, or ``None`` if no text had it (then no tool has it)."""
        return self._ids.get(term)

    def terms(self, ids: IntArray) -> list[str]:
        """The terms of ``ids``."""
        terms = self._terms
        return [terms[i] for i in ids.tolist()]


VOCABULARY: Final = Vocabulary()


@lru_cache(maxsize=65536)
def term_ids(text: str, *, keep_stop_words: bool = False) -> IntArray:
    """The ids of ``text``'s terms (:func:`caliban.search.text.tokenize`), in order."""
    ids = VOCABULARY.ids(tokenize(text, keep_stop_words=keep_stop_words))
    ids.flags.writeable = False  # shared by every caller
    return ids


@dataclass(frozen=True, slots=True)
class Postings:
    """Each term's BM25 score in each tool that has it, grouped by term (CSR).

    The postings of ``terms[i]`` (a term id) are ``doc_ids[starts[i]:starts[i + 1]]``
    (ascending) and the matching ``scores`` (and ``short_scores``, with ``b`` =
    :data:`SHORT_B`).
    """

    terms: IntArray
    starts: IntArray
    doc_ids: IntArray
    scores: FloatArray
    short_scores: FloatArray
    blocks: dict[int, int] = field(init=False, repr=False)
    """Term id → its position in ``terms``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", {t: i for i, t in enumerate(self.terms.tolist())})

    @classmethod
    def build(cls, docs: Sequence[IntArray], *, k1: float = K1, b: float = B) -> Postings:
        """Postings of a catalog given each tool's term ids (its text's length is their
        number); ``k1`` and ``b`` other than the defaults are for the benchmarks' ablation."""
        n = len(docs)
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=n)
        total = int(lengths.sum())
        if not total:
            empty = np.zeros(0, dtype=np.int64)
            return cls(
                terms=empty,
                starts=np.zeros(1, np.int64),
                doc_ids=empty,
                scores=np.zeros(0),
                short_scores=np.zeros(0),
            )
        flat = np.concatenate(docs)
        doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
        # one key per (term, tool) occurrence, sorted by term, then tool: counting equal keys
        # gives term frequencies, already in CSR order
        keys, tf = np.unique(flat * n + doc, return_counts=True)
        term, doc_ids = np.divmod(keys, n)
        terms, starts = np.unique(term, return_index=True)
        starts = np.append(starts, len(keys))
        df = np.diff(starts)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        numerator: FloatArray = np.repeat(idf, df) * tf * (k1 + 1)
        tool_lengths = lengths[doc_ids]

        def scored(b: float) -> FloatArray:
            out: FloatArray = numerator / (tf + k1 * (1 - b + b * tool_lengths / (total / n)))
            return out

        return cls(
            terms=terms,
            starts=starts,
            doc_ids=doc_ids,
            scores=scored(b),
            short_scores=scored(SHORT_B),
        )

    def _slice(self, term: int) -> slice | None:
        at = self.blocks.get(term)
        if at is None:
            return None
        return slice(int(self.starts[at]), int(self.starts[at + 1]))

    def add_to(self, scores: FloatArray, term: int, *, short: bool = False) -> bool:
        """Add ``term``'s score in each tool to ``scores`` (with ``b`` = :data:`SHORT_B` if
        ``short``); whether any tool has it."""
        where = self._slice(term)
        if where is None:
            return False
        scores[self.doc_ids[where]] += (self.short_scores if short else self.scores)[where]
        return True

    def docs(self, term: int) -> IntArray:
        """The tools whose text has ``term``, ascending."""
        where = self._slice(term)
        return self.doc_ids[where] if where is not None else self.doc_ids[:0]

    def has(self, term: int, doc: int) -> bool:
        """Whether tool ``doc``'s text has ``term``."""
        where = self._slice(term)
        if where is None:
            return False
        ids = self.doc_ids[where]
        at = int(np.searchsorted(ids, doc))
        return at < len(ids) and int(ids[at]) == doc
