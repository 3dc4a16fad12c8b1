"""Ranking ideas measured against the default on every set (issue 29, rounds 2 to 4).

Run: ``python benchmarks/search_fusion_probe.py`` for round 2's ideas, ``--round3`` for round
3's (BM25's ``k1`` and ``b``, the cosine floor, a tool as the mean of several wordings, a
server-name field, the query normalised before MiniLM embeds it). First run: ~25 CPU-minutes,
most of it MiniLM embedding the catalogs' tools in four other wordings; cached afterwards.
``--round4`` for round 4's (per-query confidence weights, MiniLM late interaction, server
context, a name-phrase bonus — the one kept, as ``Ranking.name_phrase`` — and Lucene's
coordination factor; ~5 CPU-minutes), ``--rows``/``--sets`` to run a few rows or sets only;
``--lengths`` prints each set's right tools' text lengths against its catalog's mean (why
BM25's ``b`` moves the sets apart). The fusion here re-implements the default without the
name-phrase bonus: round 4's first row is the ranking before it.

Each query of every set of ``search_quality.py`` is scored once into its parts — BM25 over
the index's postings (and over postings with one field changed), the static model's and
MiniLM's cosines, MiniLM's cosines with the tools embedded in other words, and each
``;``-separated part of a query scored alone — and every variant recombines those parts the
way ``ToolIndex`` does (z-score fusion, the same candidate rule and exact-name bonus), with
one thing changed. The first row reproduces the default (it matches ``search_quality.py``);
the other rows print their change against it, per set, hit@1 / hit@5 / recall@10, and
whether the variant is at or above the default on every cell ("all-ok"). The benchmark sets
plus two more for query splitting: ``joined* toollens`` and ``joined* github`` join *every*
short query written for a request, those no tool answers included (what a model does when
it cannot know which parts the catalog covers); ``joined toollens`` joins only answered ones.
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import numpy as np
import numpy.typing as npt
from _catalogs import SHORT_QUERIES, Query, eval_dir_or_exit, load_github_catalog, load_toollens
from search_quality import QuerySet, encoder, query_sets

from caliban.search import index as ix
from caliban.search.bm25 import VOCABULARY, Postings, term_ids
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import load_embedder
from caliban.search.text import STOP_WORDS, stem, tokenize, words
from caliban.search.transformer import TransformerModel

Vector = npt.NDArray[np.float64]


def _with_name_twice(doc: SearchDoc) -> npt.NDArray[np.int64]:
    return np.concatenate([term_ids(doc.tool), ix._doc_term_ids(doc)])


def _with_name_and_server_twice(doc: SearchDoc) -> npt.NDArray[np.int64]:
    server = term_ids(doc.server, keep_stop_words=True)
    return np.concatenate([term_ids(doc.tool), server, ix._doc_term_ids(doc)])


def _without_params(doc: SearchDoc) -> npt.NDArray[np.int64]:
    server = term_ids(doc.server, keep_stop_words=True)
    return np.concatenate([term_ids(doc.tool), server, term_ids(doc.description)])


def _with_server_twice(doc: SearchDoc) -> npt.NDArray[np.int64]:
    return np.concatenate([term_ids(doc.server, keep_stop_words=True), ix._doc_term_ids(doc)])


FIELD_VARIANTS: dict[str, Callable[[SearchDoc], npt.NDArray[np.int64]]] = {
    "name x2": _with_name_twice,
    "server x2": _with_server_twice,
    "name, server x2": _with_name_and_server_twice,
    "no parameters": _without_params,
}
"""BM25 with one field changed (the index counts each field once)."""


def _name(d: SearchDoc) -> str:
    return " ".join(words(d.tool))


WORDINGS: dict[str, Callable[[SearchDoc], str]] = {
    "name: description": lambda d: f"{_name(d)}: {d.description}",
    "description": lambda d: d.description or _name(d),
    "server name: description": lambda d: (
        f"{' '.join(words(d.server))} {_name(d)}: {d.description}"
    ),
    "name": _name,
}
"""A tool's text for MiniLM other than ``index.tool_text`` (name: description Parameters)."""

BM25_PARAMETERS = ((0.9, 0.75), (1.5, 0.75), (2.0, 0.75), (1.2, 0.3), (1.2, 0.5), (1.2, 0.9))
"""(k1, b) other than the index's (1.2, 0.75)."""


def _query_words(text: str) -> str:
    return " ".join(words(text))


QUERY_FORMS: dict[str, Callable[[str], str]] = {
    "split into words": _query_words,
    "split, no stop words": lambda t: " ".join(w for w in words(t) if w not in STOP_WORDS),
}
"""What MiniLM embeds of a query other than its ranked text (issue 29, round 3)."""

EXPANSIONS = ((0.6, 0.5), (0.7, 0.5), (0.7, 1.0), (0.8, 0.5))
"""(cosine floor, weight): each query word adds the tool-name word nearest to it under the
static model, when that close, to BM25 with that weight."""


@dataclass(kw_only=True)
class Parts:
    """What the fusion combines, for one query or one ``;``-part of it."""

    lexical: dict[str, Vector]
    static: Vector | None
    dense: Vector | None
    wordings: dict[str, Vector] = field(default_factory=dict)
    query_forms: dict[str, Vector] = field(default_factory=dict)
    exact: list[int] = field(default_factory=list)
    terms: tuple[str, ...] = ()
    parts: list[Parts] = field(default_factory=list)
    matched: Vector | None = None
    """How many of the query's terms each tool's text has (round 4)."""
    query_tokens: Vector | None = None
    """MiniLM's unit-length contextual vectors of the query's tokens (round 4)."""
    query_token_ids: npt.NDArray[np.intp] | None = None
    memo: dict[str, Vector] = field(default_factory=dict)
    """Round 4's signals, computed once per query."""
    catalog: Catalog | None = None


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """What round 4's signals know of the catalog beside the index."""

    servers: npt.NDArray[np.intp]
    """Each tool's server, as a number."""
    server_postings: Postings
    """BM25 over one document per server: all its tools' texts."""
    name_terms: list[tuple[str, ...]]
    """Each tool's name as index terms, in order."""
    token_matrix: Vector
    """MiniLM's unit-length contextual vectors of every tool's tokens, tool after tool."""
    token_starts: npt.NDArray[np.intp]
    """Where each tool's rows start in ``token_matrix``."""
    token_idf: dict[int, float]
    """Each MiniLM token's IDF over the catalog's tool texts (absent: no tool has it)."""


@dataclass(frozen=True, kw_only=True)
class Scored:
    name: str
    docs: Sequence[SearchDoc]
    queries: Sequence[Query]
    parts: Sequence[Parts]


def _bm25(postings: Postings, terms: Sequence[str], n: int) -> Vector:
    out = np.zeros(n)
    for term in dict.fromkeys(terms):
        term_id = VOCABULARY.get(term)
        if term_id is not None:
            postings.add_to(out, term_id)
    return out


@cache
def _transformer() -> TransformerModel:
    return TransformerModel.load(MINILM_DIR)


_TOKEN_MEMO: dict[str, Vector] = {}


def token_ids(text: str) -> npt.NDArray[np.intp]:
    """MiniLM's token ids of ``text``, without [CLS] and [SEP]."""
    return np.array(_transformer().token_ids(text)[1:-1], dtype=np.intp)


def token_vectors(text: str) -> Vector:
    """MiniLM's unit-length contextual vectors of ``text``'s tokens, without [CLS] and [SEP]."""
    if text not in _TOKEN_MEMO:
        model = _transformer()
        ids = np.array([model.token_ids(text)], dtype=np.intp)
        states = model.token_states(ids, np.ones(ids.shape, dtype=np.float32))[0, 1:-1]
        norms = np.linalg.norm(states, axis=1, keepdims=True)
        _TOKEN_MEMO[text] = (states / np.maximum(norms, 1e-12)).astype(np.float32)
    return _TOKEN_MEMO[text]


def catalog_of(docs: Sequence[SearchDoc]) -> Catalog:
    codes: dict[str, int] = {}
    servers = np.array([codes.setdefault(d.server, len(codes)) for d in docs], dtype=np.intp)
    by_server: list[list[npt.NDArray[np.int64]]] = [[] for _ in codes]
    for d, code in zip(docs, servers, strict=True):
        by_server[code].append(ix._doc_term_ids(d))
    tokens = [token_vectors(ix.tool_text(d)) for d in docs]
    starts = np.cumsum([0, *(len(t) for t in tokens)])[:-1]
    df = Counter(t for d in docs for t in set(token_ids(ix.tool_text(d)).tolist()))
    n = len(docs)
    return Catalog(
        servers=servers,
        server_postings=Postings.build([np.concatenate(g) for g in by_server]),
        name_terms=[tuple(tokenize(d.tool)) for d in docs],
        token_matrix=np.concatenate(tokens),
        token_starts=starts.astype(np.intp),
        token_idf={t: float(np.log1p((n - f + 0.5) / (f + 0.5))) for t, f in df.items()},
    )


def score_set(qs: QuerySet, *, rich: bool, round4: bool = False) -> Scored:
    """Every query's parts; ``rich``: also the other fields, wordings and expansions;
    ``round4``: round 4's signals."""
    docs = list(qs.docs)
    n = len(docs)
    static = load_embedder()
    index = ToolIndex.build(docs, embedder=static, dense=encoder(MINILM_DIR))
    if not index.wait_semantic(7200):
        raise SystemExit("MiniLM's tool embeddings did not become ready")
    postings = {"default": index._postings}
    wordings = {}
    catalog = catalog_of(docs) if round4 else None
    if round4:
        term_lists = [ix._doc_term_ids(d) for d in docs]
        for b in (0.3, 0.5):
            postings[f"k1 1.2, b {b}"] = Postings.build(term_lists, b=b)
    if rich:
        for label, fn in FIELD_VARIANTS.items():
            postings[label] = Postings.build([fn(d) for d in docs])
        term_lists = [ix._doc_term_ids(d) for d in docs]
        for k1, b in BM25_PARAMETERS:
            postings[f"k1 {k1}, b {b}"] = Postings.build(term_lists, k1=k1, b=b)
        alt = encoder(MINILM_DIR)
        for label, wording in WORDINGS.items():
            catalog = alt.catalog(ix._server_groups(docs, [wording(d) for d in docs]))
            if not catalog.wait(7200):
                raise SystemExit("MiniLM's tool embeddings did not become ready")
            wordings[label] = catalog
        name_words = sorted(
            {w for d in docs for w in words(d.tool) if len(w) > 2 and w.isalpha()} - STOP_WORDS
        )
        name_vectors = static.model.embed(name_words)

    def parts(text: str, *, whole: bool) -> Parts:
        _, ranked, identifiers = ix._parse(text)
        meaningful = tokenize(ranked)
        terms = meaningful or tokenize(ranked, keep_stop_words=True)
        p = Parts(
            lexical={label: _bm25(post, terms, n) for label, post in postings.items()},
            static=index._embeddings.similarities(ranked) if meaningful else None,
            dense=index._dense.similarities(ranked) if meaningful else None,
            wordings={k: c.similarities(ranked) for k, c in wordings.items()} if meaningful else {},
            query_forms=(
                {k: index._dense.similarities(form(ranked)) for k, form in QUERY_FORMS.items()}
                if meaningful and rich
                else {}
            ),
            exact=[i for w in identifiers for i in index._by_tool_lower.get(w, ())],
            terms=tuple(terms),
        )
        if rich and whole:
            _expand(p, ranked, static.model, name_words, name_vectors, index._postings, n)
        if catalog is not None and whole and terms:
            each = np.stack([_bm25(index._postings, [t], n) for t in dict.fromkeys(terms)])
            p.matched = (each > 0).sum(0).astype(float)
            p.query_tokens = token_vectors(ranked) if meaningful else None
            p.query_token_ids = token_ids(ranked)
            p.catalog = catalog
        pieces = [s.strip() for s in text.split(";") if s.strip()]
        if whole and len(pieces) > 1:
            p.parts = [parts(piece, whole=False) for piece in pieces]
        return p

    return Scored(
        name=qs.name,
        docs=docs,
        queries=qs.queries,
        parts=[parts(q.text, whole=True) for q in qs.queries],
    )


def _expand(
    p: Parts,
    ranked: str,
    model: Any,
    name_words: list[str],
    vectors: Any,
    postings: Postings,
    n: int,
) -> None:
    query_words = [w for w in words(ranked) if len(w) > 1 and w not in STOP_WORDS]
    if not query_words:
        return
    sims = model.embed(query_words) @ vectors.T
    for floor, weight in EXPANSIONS:
        lexical = p.lexical["default"].copy()
        added: set[str] = set()
        for row in sims:
            best = int(row.argmax())
            term = stem(name_words[best])
            if row[best] >= floor and term not in p.terms and term not in added:
                added.add(term)
                lexical += weight * _bm25(postings, [term], n)
        p.lexical[f"expand {floor} x{weight}"] = lexical


# --- the fusion, as ToolIndex._keywords does it, with knobs -----------------------------------


def _z(x: Vector) -> Vector:
    std = float(x.std())
    return (x - x.mean()) / std if std > 0 else np.zeros(len(x))


Fusion = Callable[[Parts], tuple[Vector, npt.NDArray[np.bool_]]]


def fuse(
    *,
    lexical: str | Callable[[Parts], str] = "default",
    dense: Callable[[Parts], Vector | None] = lambda p: p.dense,
    weight: float | Callable[[Parts], float] = 1.2,
    transform: Callable[[Vector], Vector] | None = None,
    rrf: bool = False,
    static_weight: float = 0.0,
    floor: float = ix._MIN_DENSE_COSINE,
) -> Fusion:
    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        label = lexical(p) if callable(lexical) else lexical
        lex = p.lexical.get(label, p.lexical["default"])
        cos = dense(p)
        candidates = lex > 0
        for cosines, least in ((p.static, ix._MIN_COSINE), (cos, floor)):
            if cosines is not None:
                candidates = candidates | (cosines >= max(float(cosines.mean()), least))
        shaped = transform(lex) if transform else lex
        w = weight(p) if callable(weight) else weight
        if cos is not None and rrf:
            order = np.empty(len(lex))
            order[np.argsort(-lex, kind="stable")] = np.arange(len(lex))
            by_cos = np.empty(len(lex))
            by_cos[np.argsort(-cos, kind="stable")] = np.arange(len(lex))
            scores = (lex > 0) / (60 + order) + w / (60 + by_cos)
        elif cos is not None:
            scores = _z(shaped) + w * _z(cos)
            if static_weight and p.static is not None:
                scores = scores + static_weight * _z(p.static)
        elif p.static is not None:
            scores = _z(shaped) + 0.5 * _z(p.static)
        else:
            scores = shaped.astype(float)
        for i in p.exact:
            scores[i] += ix._EXACT_NAME_BONUS
            candidates[i] = True
        return scores, candidates

    return run


def split(merge: str, *, floor: float = 0.0) -> Fusion:
    """The whole query's fused score merged with its ``;``-parts' (each fused alone)."""
    whole = fuse()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = whole(p)
        kept = [q for q in p.parts if q.dense is not None and float(q.dense.max()) >= floor]
        if not kept:
            return scores, candidates
        each = [whole(q) for q in kept]
        stacked = np.stack([s for s, _ in each])
        candidates = candidates | np.any(np.stack([c for _, c in each]), axis=0)
        merged = {
            "sum": scores + stacked.sum(0),
            "max": stacked.max(0),
            "whole + max": scores + stacked.max(0),
            "whole + mean": scores + stacked.mean(0),
        }[merge]
        return merged, candidates

    return run


def in_turns(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
    """Round 1's split: each part's hits taken in turns."""
    scores, candidates = fuse()(p)
    if not p.parts:
        return scores, candidates
    orders = [_top(*fuse()(q)) for q in p.parts]
    picked: list[int] = []
    for rank in range(10):
        for order in orders:
            if rank < len(order) and order[rank] not in picked:
                picked.append(int(order[rank]))
    out = np.full(len(scores), -1e9)
    chosen = np.zeros(len(scores), dtype=bool)
    for i, doc in enumerate(picked[:10]):
        out[doc] = 100.0 - i
        chosen[doc] = True
    return out, chosen


def _top(scores: Vector, candidates: npt.NDArray[np.bool_], k: int = 10) -> npt.NDArray[np.intp]:
    ids = np.flatnonzero(candidates)
    return ids[np.argsort(-scores[ids], kind="stable")][:k]


def measure(scored: Scored, fusion: Fusion) -> Vector:
    totals = np.zeros(3)
    for q, p in zip(scored.queries, scored.parts, strict=True):
        found = [scored.docs[i] for i in _top(*fusion(p))]
        flags = [q.is_relevant(d) for d in found]
        names = {x for d, ok in zip(found, flags, strict=True) if ok for x in (d.tool, d.name)}
        totals += (any(flags[:1]), any(flags[:5]), len(q.relevant & names) / len(q.relevant))
    return totals / len(scored.queries)


def joined_all(catalog: str) -> list[Query]:
    """Every short query written for a request joined with ``;`` (unanswered ones too)."""
    rows = [json.loads(line) for line in SHORT_QUERIES.open() if line.strip() and line[0] != "#"]
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["set"] == catalog:
            by_source[str(row["source"])].append(row)
    return [
        Query(
            text="; ".join(r["query"] for r in group),
            relevant=frozenset(g for r in group for g in r["gold"]),
            source=f"joined* {catalog}",
        )
        for group in by_source.values()
        if len(group) > 1 and any(r["gold"] for r in group)
    ]


def _max_with(p: Parts, wording: str) -> Vector | None:
    """Each tool's better cosine of its default text and ``wording``."""
    if p.dense is None:
        return None
    return np.maximum(p.dense, p.wordings.get(wording, p.dense))


def _mean_of(p: Parts, views: Sequence[str]) -> Vector | None:
    """Each tool's mean cosine over its default text and other wordings."""
    if p.dense is None:
        return None
    return np.mean([p.dense, *(p.wordings.get(v, p.dense) for v in views)], axis=0)


def round3() -> dict[str, Fusion]:
    """Issue 29, round 3: BM25's parameters, the candidate floor, a tool's text as the mean
    of several views, the query normalised before MiniLM embeds it, a server-name field."""
    out: dict[str, Fusion] = {}
    for k1, b in BM25_PARAMETERS:
        out[f"BM25 k1 {k1}, b {b}"] = fuse(lexical=f"k1 {k1}, b {b}")
    for b in (0.3, 0.5):
        out[f"BM25 b {b} for queries of <= 3 words"] = fuse(
            lexical=lambda p, b=b: f"k1 1.2, b {b}" if len(set(p.terms)) <= 3 else "default"
        )
    for floor in (0.2, 0.25, 0.35):
        out[f"MiniLM candidate floor {floor}"] = fuse(floor=floor)
    out["BM25 fields: server x2"] = fuse(lexical="server x2")
    for views in (["description"], ["name: description"], list(WORDINGS)):
        label = ", ".join(views) if len(views) < len(WORDINGS) else "all four"
        out[f"MiniLM: mean(default, {label})"] = fuse(dense=lambda p, v=views: _mean_of(p, v))
    for form in QUERY_FORMS:
        out[f"MiniLM query {form}"] = fuse(dense=lambda p, f=form: p.query_forms.get(f, p.dense))
    return out


# --- round 4: confidence, late interaction, server context, name phrases, coordination ------


def adaptive(mode: str, alpha: float = 1.0) -> Fusion:
    """MiniLM's weight set per query by how sure each ranker is of its best tool: its top
    z-score (``peak``) or its top-1 margin in z units (``margin``), MiniLM's over BM25's to
    the power ``alpha``, clipped to 0.5-2 times the default; ``peaks``: each signal's
    z-scores over its own top z-score (each ranker's best counts 1)."""

    def weight(p: Parts) -> float:
        if p.dense is None or not p.lexical["default"].any():
            return 1.2
        lex, cos = _z(p.lexical["default"]), _z(p.dense)
        if mode == "peak":
            a, b = float(cos.max()), float(lex.max())
        else:
            top_lex, top_cos = np.sort(lex)[-2:], np.sort(cos)[-2:]
            a, b = float(top_cos[1] - top_cos[0]), float(top_lex[1] - top_lex[0])
        ratio = (max(a, 1e-6) / max(b, 1e-6)) ** alpha
        return 1.2 * min(2.0, max(0.5, ratio))

    if mode != "peaks":
        return fuse(weight=weight)

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = fuse()(p)
        lex = p.lexical["default"]
        if p.dense is None or not lex.any():
            return scores, candidates
        zl, zc = _z(lex), _z(p.dense)
        out = zl / max(float(zl.max()), 1e-6) + 1.2 * zc / max(float(zc.max()), 1e-6)
        for i in p.exact:
            out[i] += ix._EXACT_NAME_BONUS
        return out, candidates

    return run


def maxsim(p: Parts, *, idf: bool = False) -> Vector | None:
    """ColBERT's late interaction with MiniLM's own token vectors: for each query token its
    best cosine over a tool's tokens, averaged over the query's tokens (``idf``: weighted
    by each token's IDF over the catalog's tool texts)."""
    if p.query_tokens is None or p.catalog is None or not len(p.query_tokens):
        return None
    key = f"maxsim idf={idf}"
    if key not in p.memo:
        c = p.catalog
        sims = p.query_tokens @ c.token_matrix.T
        best = np.maximum.reduceat(sims, c.token_starts, axis=1)
        if idf and p.query_token_ids is not None:
            top = max(c.token_idf.values())
            w = np.array([c.token_idf.get(int(t), top) for t in p.query_token_ids])
            p.memo[key] = (w @ best / max(float(w.sum()), 1e-9)).astype(float)
        else:
            p.memo[key] = best.mean(0).astype(float)
    return p.memo[key]


def server_mean_cosine(p: Parts) -> Vector | None:
    if p.dense is None or p.catalog is None:
        return None
    codes = p.catalog.servers
    means = np.bincount(codes, weights=p.dense) / np.bincount(codes)
    return means[codes]  # type: ignore[no-any-return]


def server_bm25(p: Parts) -> Vector | None:
    if p.catalog is None:
        return None
    c = p.catalog
    per_server = _bm25(c.server_postings, p.terms, int(c.servers.max()) + 1)
    return per_server[c.servers]  # type: ignore[no-any-return]


def name_phrase(p: Parts, *, contiguous: bool) -> Vector | None:
    """The share of the query's terms that a tool's name has: as one contiguous phrase of
    two or more terms (``contiguous``), or all of them in any order (else 0)."""
    if p.catalog is None:
        return None
    q = list(dict.fromkeys(t for t in p.terms))
    out = np.zeros(len(p.catalog.name_terms))
    if len(q) < 2:
        return out
    for i, name in enumerate(p.catalog.name_terms):
        if contiguous:
            best = 0
            for a in range(len(q)):
                for b in range(len(name)):
                    k = 0
                    while a + k < len(q) and b + k < len(name) and q[a + k] == name[b + k]:
                        k += 1
                    best = max(best, k)
            out[i] = best / len(q) if best >= 2 else 0.0
        else:
            out[i] = 1.0 if set(q) <= set(name) else 0.0
    return out


def plus(
    signal: Callable[[Parts], Vector | None],
    weight: float,
    *,
    top: int = 0,
    raw: bool = False,
    base: Fusion | None = None,
) -> Fusion:
    """``base`` (the default) plus ``weight`` times a signal: as z-scores over the catalog,
    over the base's best ``top`` tools only (a re-rank), or as is (``raw``, a bounded
    bonus)."""
    base = base or fuse()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        x = signal(p)
        if x is None:
            return scores, candidates
        if raw:
            return scores + weight * x, candidates
        if not top:
            return scores + weight * _z(x), candidates
        ids = _top(scores, candidates, top)
        if len(ids) > 1:
            scores = scores.copy()
            scores[ids] += weight * _z(x[ids])
        return scores, candidates

    return run


def server_top3(weight: float) -> Fusion:
    """Each server scored by the mean of its best three tools' fused scores; that lifts
    its tools (z-scores over the catalog)."""
    base = fuse()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        if p.catalog is None:
            return scores, candidates
        codes = p.catalog.servers
        per = np.zeros(int(codes.max()) + 1)
        for code in range(len(per)):
            mine = np.sort(np.minimum(scores[codes == code], 50.0))[-3:]
            per[code] = mine.mean()
        return scores + weight * _z(per[codes]), candidates

    return run


def coord(power: float) -> Fusion:
    """BM25 times the share of the query's terms a tool has, to ``power`` (Lucene's
    classic coordination factor)."""

    def lexical(p: Parts) -> str:
        if p.matched is not None and len(set(p.terms)) > 1:
            key = f"coord {power}"
            if key not in p.lexical:
                share = p.matched / len(set(p.terms))
                p.lexical[key] = p.lexical["default"] * share**power
            return key
        return "default"

    return fuse(lexical=lexical)


def round4() -> dict[str, Fusion]:
    """Issue 29, round 4: per-query confidence weights, late interaction, server context,
    name phrases, coordination, BM25's b by query length."""
    out: dict[str, Fusion] = {}
    for mode, alpha in (("peak", 0.5), ("peak", 1.0), ("margin", 0.5), ("peaks", 1.0)):
        label = "each signal over its top z" if mode == "peaks" else f"{mode} ratio ^{alpha}"
        out[f"adaptive: {label}"] = adaptive(mode, alpha)
    for w in (0.3, 0.6):
        out[f"late interaction (MaxSim) x{w}, all tools"] = plus(maxsim, w)
        out[f"late interaction (MaxSim) x{w}, top 20 re-ranked"] = plus(maxsim, w, top=20)
    idf_maxsim = partial(maxsim, idf=True)
    for w in (0.3, 0.6, 1.0):
        out[f"late interaction, IDF-weighted, x{w}, all tools"] = plus(idf_maxsim, w)
        for top in (10, 20, 50):
            out[f"late interaction, IDF-weighted, x{w}, top {top}"] = plus(idf_maxsim, w, top=top)
    for w in (0.3, 0.6):
        out[f"late interaction x{w} top 20 + coordination ^1"] = plus(
            maxsim, w, top=20, base=coord(1.0)
        )
        out[f"late interaction IDF x{w} all + coordination ^1"] = plus(
            idf_maxsim, w, base=coord(1.0)
        )
    for w in (0.2, 0.4):
        out[f"server: mean MiniLM cosine x{w}"] = plus(server_mean_cosine, w)
        out[f"server: BM25 of its whole text x{w}"] = plus(server_bm25, w)
        out[f"server: mean of its best 3 x{w}"] = server_top3(w)
    for w in (0.5, 1.0):
        out[f"name phrase (>= 2 terms) +{w} x share"] = plus(
            lambda p: name_phrase(p, contiguous=True), w, raw=True
        )
        out[f"name has every query term +{w}"] = plus(
            lambda p: name_phrase(p, contiguous=False), w, raw=True
        )
    for power in (0.5, 1.0):
        out[f"BM25 x (share of query terms)^{power}"] = coord(power)
    for b in (0.3, 0.5):
        out[f"BM25 b {b} for queries of <= 2 terms"] = fuse(
            lexical=lambda p, b=b: f"k1 1.2, b {b}" if len(set(p.terms)) <= 2 else "default"
        )
    # the level-or-better rows together, and late interaction for short queries only
    phrase = partial(name_phrase, contiguous=True)
    short_b = fuse(lexical=lambda p: "k1 1.2, b 0.5" if len(set(p.terms)) <= 2 else "default")
    out["combined: name phrase +0.5 and b 0.5 for <= 2 terms"] = plus(
        phrase, 0.5, raw=True, base=short_b
    )
    for w in (0.3, 0.6):
        out[f"late interaction x{w} top 20, queries of <= 4 terms"] = plus(
            lambda p: maxsim(p) if len(set(p.terms)) <= 4 else None, w, top=20
        )
    return out


def variants() -> dict[str, Fusion]:
    out: dict[str, Fusion] = {"default (BM25 + MiniLM 1.2, z-scores)": fuse()}
    for w in (1.0, 1.4, 1.6, 2.0):
        out[f"MiniLM weight {w}"] = fuse(weight=w)
    out["MiniLM weight 1.6 for queries of <= 3 words"] = fuse(
        weight=lambda p: 1.6 if len(set(p.terms)) <= 3 else 1.2
    )
    out["+ static model 0.2"] = fuse(static_weight=0.2)
    out["reciprocal rank fusion (k 60)"] = fuse(rrf=True, weight=1.0)
    out["BM25 as log(1 + score)"] = fuse(transform=np.log1p)
    out["BM25 as sqrt(score)"] = fuse(transform=np.sqrt)
    for label in FIELD_VARIANTS:
        out[f"BM25 fields: {label}"] = fuse(lexical=label)
    for label in WORDINGS:
        out[f"MiniLM on '{label}'"] = fuse(dense=lambda p, k=label: p.wordings.get(k, p.dense))
        out[f"MiniLM: max(default, '{label}')"] = fuse(dense=lambda p, k=label: _max_with(p, k))
    for floor, weight in EXPANSIONS:
        out[f"expand: nearest name word, cos >= {floor}, x{weight}"] = fuse(
            lexical=f"expand {floor} x{weight}"
        )
    out["split at ';': parts in turns (round 1)"] = in_turns
    for merge in ("sum", "max", "whole + max", "whole + mean"):
        out[f"split at ';': {merge}"] = split(merge)
    out["split at ';': whole + max of parts with cos >= 0.5"] = split("whole + max", floor=0.5)
    return out


def lengths() -> None:
    """Why BM25's ``b`` moves the sets apart: each set's right tools' text lengths (in index
    terms) against its catalog's mean."""
    print("| set | tools | mean length | right tools' length / mean (mean, median) |")
    print("|---|---|---|---|")
    for qs in query_sets():
        size = {}
        for d in qs.docs:
            size[d.name] = size.setdefault(d.tool, len(ix._doc_term_ids(d)))
        mean = float(np.mean([len(ix._doc_term_ids(d)) for d in qs.docs]))
        ratios = [
            np.mean([size[g] for g in q.relevant if g in size]) / mean
            for q in qs.queries
            if any(g in size for g in q.relevant)
        ]
        print(
            f"| {qs.name} | {len(qs.docs)} | {mean:.1f} |"
            f" {np.mean(ratios):.2f}, {np.median(ratios):.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round3", action="store_true", help="round 3's ideas")
    parser.add_argument("--round4", action="store_true", help="round 4's ideas")
    parser.add_argument("--sets", nargs="*", help="only these sets (names start with these)")
    parser.add_argument("--rows", nargs="*", help="only the variants whose label has these")
    parser.add_argument("--lengths", action="store_true", help="right tools' text lengths")
    args = parser.parse_args()
    if args.lengths:
        return lengths()
    rows = round4() if args.round4 else round3() if args.round3 else variants()
    if args.rows:
        rows = {k: v for k, v in rows.items() if any(r in k for r in args.rows)}
    rows = {"default (BM25 + MiniLM 1.2, z-scores)": fuse(), **rows}
    eval_dir = eval_dir_or_exit()
    rich = not args.round4

    def wanted(name: str) -> bool:
        return not args.sets or any(name.startswith(s) for s in args.sets)

    sets = [score_set(qs, rich=rich, round4=args.round4) for qs in query_sets() if wanted(qs.name)]
    for name, docs in (
        ("toollens", load_toollens(eval_dir)[0]),
        ("github", load_github_catalog(eval_dir)),
    ):
        qs = QuerySet(name=f"joined* {name}", docs=docs, queries=joined_all(name))
        if wanted(qs.name):
            sets.append(score_set(qs, rich=False, round4=args.round4))
    base = {s.name: measure(s, next(iter(rows.values()))) for s in sets}
    short = [s for s in sets if s.name.startswith("short")]
    pooled = f"all short ({sum(len(s.queries) for s in short)})" if short else ""
    print("| variant | " + " | ".join(s.name for s in sets) + f" | {pooled} | all-ok |")
    print("|---|" + "---|" * (len(sets) + 2))
    for i, (label, fusion) in enumerate(rows.items()):
        cells, ok = [], True
        measured = {s.name: measure(s, fusion) for s in sets}
        for s in sets:
            if i == 0:
                cells.append("/".join(f"{x:.3f}" for x in base[s.name]))
                continue
            delta = measured[s.name] - base[s.name]
            ok &= bool((delta > -1e-9).all())
            cells.append("/".join(f"{x:+.3f}" if abs(x) > 1e-9 else "0" for x in delta))
        if short:
            total = sum(measured[s.name][:2] * len(s.queries) for s in short)
            cells.append("/".join(f"{x:.3f}" for x in total / sum(len(s.queries) for s in short)))
        else:
            cells.append("")
        print(f"| {label} | " + " | ".join(cells) + f" | {'yes' if ok else ''} |", flush=True)


if __name__ == "__main__":
    main()
