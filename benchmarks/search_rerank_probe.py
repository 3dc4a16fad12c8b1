"""Late interaction and server context against the default on every set (issue 29, round 4b).

Run: ``python benchmarks/search_rerank_probe.py`` for the late-interaction re-order of the
first hits, gated by query form; ``--all`` for every signal added to the default's score;
``--sets PREFIX ...`` for some sets only; ``--cache FILE`` keeps the scored sets (a pickle
this script wrote) so that a second run only recombines them. None of it ships
(``docs/lazy-mcp.md``, "round 4b").

Every query is scored as ``search_fusion_probe.py`` scores it (its first row reproduces the
default), and signals ``ToolIndex`` does not have are fused with the default's score; each
row prints its change per set (hit@1 / hit@5 / recall@10) and the 189 short queries pooled:

* **late interaction** (ColBERT's MaxSim, no training): MiniLM's contextual vectors of the
  query's words (word = the mean of its WordPiece vectors; stop words and punctuation
  dropped) against each tool's content words; each query word's best cosine, averaged
  (optionally weighted by the word's IDF over the catalog's tool texts), against all of a
  tool's text or its name's words only; added over every tool or the default's top 20, or
  re-ordering the default's top 5 or 10 among themselves; the tools' word vectors also
  compressed as a shipped re-ranker could hold them (PCA to 64 dimensions, int8);
* **server context**: a server's card (its name and its tools' names) embedded by MiniLM,
  its cosine with the query lifting the server's tools; each server scored by the soft
  maximum of its tools' fused scores; and score regularisation (Diaz, CIKM 2005): a tool's
  score plus a share of the mean score of its nearest tools under MiniLM (any server, or its
  own only).

The word vectors cost one MiniLM pass per tool text and query beyond the sentence
embeddings (~4 CPU-minutes for every set at a load average of 10), kept in memory.
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import math
import pickle
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
from _catalogs import eval_dir_or_exit, load_github_catalog, load_toollens
from search_fusion_probe import (
    Fusion,
    Parts,
    Scored,
    _top,
    _z,
    fuse,
    joined_all,
    measure,
    score_set,
)
from search_quality import QuerySet, encoder, query_sets

from caliban.search import index as ix
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.models import MINILM_DIR
from caliban.search.text import STOP_WORDS, words
from caliban.search.transformer import TransformerModel

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float32]


# --- MiniLM's contextual word vectors -----------------------------------------------------


@cache
def _model() -> TransformerModel:
    return TransformerModel.load(MINILM_DIR)


def _token_states(model: TransformerModel, ids: list[int]) -> Matrix:
    """The last layer's vector of each token of one text."""
    batch = np.array([ids], dtype=np.intp)
    return model.token_states(batch, np.ones(batch.shape, dtype=np.float32))[0]


@dataclass(frozen=True, kw_only=True)
class WordVectors:
    """A text's words (lower-cased, as WordPiece splits them) and their unit vectors."""

    words: tuple[str, ...]
    vectors: Matrix
    name_words: int
    """How many of the first words are the tool's name (before the first ``:``)."""


_WORD_MEMO: dict[str, WordVectors] = {}


def word_vectors(text: str) -> WordVectors:
    """MiniLM's contextual vector of each word of ``text`` (the mean of its pieces')."""
    found = _WORD_MEMO.get(text)
    if found is not None:
        return found
    model = _model()
    ids = model.token_ids(text)
    states = _token_states(model, ids)[1:-1]
    pieces = model.tokenizer.tokens(text)[: len(states)]
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if piece.startswith("##") and groups:
            groups[-1].append(i)
        else:
            groups.append([i])
    names = ["".join(pieces[i].removeprefix("##") for i in g) for g in groups]
    vecs = np.stack([states[g].mean(0) for g in groups]) if groups else np.zeros((0, 384))
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    colon = names.index(":") if ":" in names else len(names)
    found = WordVectors(words=tuple(names), vectors=vecs.astype(np.float32), name_words=colon)
    _WORD_MEMO[text] = found
    return found


def _content(word: str) -> bool:
    return any(c.isalnum() for c in word) and word not in STOP_WORDS


@dataclass(frozen=True, kw_only=True)
class CatalogVectors:
    """Every tool's word vectors, stacked, and what the server signals need."""

    matrix: Matrix
    """All tools' content words' vectors, one row each."""
    starts: npt.NDArray[np.intp]
    name_matrix: Matrix
    name_starts: npt.NDArray[np.intp]
    compressed: Matrix
    """``matrix`` projected to 64 dimensions (PCA over the catalog) and stored as int8 with
    a scale per row, widened back: what a shipped re-ranker could keep in memory."""
    projection: Matrix
    idf: dict[str, float]
    servers: npt.NDArray[np.intp]
    server_cards: Matrix
    """MiniLM's embedding of each server's card: its name and its tools' names."""
    neighbours: npt.NDArray[np.intp]
    """Each tool's 5 nearest tools under MiniLM (any server)."""
    server_neighbours: npt.NDArray[np.intp]
    """Each tool's 5 nearest tools of its own server (itself when it has fewer)."""
    bytes_full: int
    bytes_compressed: int


def _stack(groups: Sequence[Matrix]) -> tuple[Matrix, npt.NDArray[np.intp]]:
    lengths = [max(len(g), 1) for g in groups]
    padded = [g if len(g) else np.zeros((1, 384), dtype=np.float32) for g in groups]
    return np.concatenate(padded), np.cumsum([0, *lengths])[:-1].astype(np.intp)


def catalog_vectors(docs: Sequence[SearchDoc], dense: Matrix) -> CatalogVectors:
    texts = [ix.tool_text(d) for d in docs]
    each = [word_vectors(t) for t in texts]
    content = [np.array([_content(w) for w in e.words], dtype=bool) for e in each]
    full, starts = _stack([e.vectors[c] for e, c in zip(each, content, strict=True)])
    names, name_starts = _stack(
        [e.vectors[: e.name_words][c[: e.name_words]] for e, c in zip(each, content, strict=True)]
    )
    centred = full - full.mean(0)
    _, _, vt = np.linalg.svd(centred[:: max(1, len(centred) // 20000)], full_matrices=False)
    projection = vt[:64].T.astype(np.float32)
    low = full @ projection
    scale = np.abs(low).max(1, keepdims=True) / 127
    q8 = np.round(low / np.maximum(scale, 1e-12)).astype(np.int8)
    widened = q8 * scale
    widened /= np.maximum(np.linalg.norm(widened, axis=1, keepdims=True), 1e-12)
    df = Counter(w for e in each for w in set(e.words))
    n = len(docs)
    idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
    codes: dict[str, int] = {}
    servers = np.array([codes.setdefault(d.server, len(codes)) for d in docs], dtype=np.intp)
    cards = []
    for server in codes:
        tools = [" ".join(words(d.tool)) for d in docs if d.server == server]
        cards.append(f"{' '.join(words(server))}: {', '.join(tools)}")
    card_vectors = _model().embed(cards)
    sims = dense @ dense.T
    np.fill_diagonal(sims, -np.inf)
    neighbours = np.argsort(-sims, axis=1)[:, :5]
    own = sims.copy()
    own[servers[:, None] != servers[None, :]] = -np.inf
    server_neighbours = np.argsort(-own, axis=1)[:, :5]
    lonely = np.take_along_axis(own, server_neighbours, 1) == -np.inf
    server_neighbours[lonely] = np.broadcast_to(np.arange(n)[:, None], lonely.shape)[lonely]
    return CatalogVectors(
        matrix=full,
        starts=starts,
        name_matrix=names,
        name_starts=name_starts,
        compressed=(
            widened / np.maximum(np.linalg.norm(widened, axis=1, keepdims=True), 1e-12)
        ).astype(np.float32),
        projection=projection,
        idf=idf,
        servers=servers,
        server_cards=card_vectors,
        neighbours=neighbours,
        server_neighbours=server_neighbours,
        bytes_full=full.astype(np.float16).nbytes,
        bytes_compressed=q8.nbytes + scale.astype(np.float32).nbytes + projection.nbytes,
    )


# --- per-query signals ---------------------------------------------------------------------


@dataclass(kw_only=True)
class Extra:
    """What a query adds to its ``Parts``: its word vectors and the catalog's."""

    text: str
    query: WordVectors
    catalog: CatalogVectors
    memo: dict[str, Vector]


EXTRAS: dict[int, Extra] = {}


def _maxsim(e: Extra, *, idf: bool, names: bool, compressed: bool) -> Vector | None:
    key = f"maxsim {idf} {names} {compressed}"
    if key in e.memo:
        return e.memo[key]
    keep = [i for i, w in enumerate(e.query.words) if _content(w)]
    if not keep:
        return None
    q = e.query.vectors[keep]
    c = e.catalog
    if compressed:
        matrix, starts = c.compressed, c.starts
        q = q @ c.projection
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    else:
        matrix, starts = (c.name_matrix, c.name_starts) if names else (c.matrix, c.starts)
    best = np.maximum.reduceat(q @ matrix.T, starts, axis=1)
    top = max(c.idf.values())
    w = np.array([c.idf.get(e.query.words[i], top) for i in keep]) if idf else np.ones(len(keep))
    e.memo[key] = (w @ best / w.sum()).astype(float)
    return e.memo[key]


def late(
    weight: float,
    *,
    idf: bool,
    names: bool = False,
    top: int = 0,
    compressed: bool = False,
    strict: bool = False,
    max_words: int = 0,
    whole_only: bool = False,
) -> Fusion:
    """The default plus ``weight`` times MaxSim as z-scores: over every tool, or over the
    default's best ``top`` only; ``strict``: those ``top`` only change places among
    themselves (the top ``top`` stay the same tools); ``max_words``: only for queries of at
    most that many content words; ``whole_only``: not for a query of several ``;``-parts."""
    base = fuse()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        e = EXTRAS.get(id(p))
        if (
            e is None
            or (max_words and _content_words(e) > max_words)
            or (whole_only and ";" in e.text)
        ):
            return scores, candidates
        x = _maxsim(e, idf=idf, names=names, compressed=compressed)
        if x is None:
            return scores, candidates
        if not top:
            return scores + weight * _z(x), candidates
        ids = _top(scores, candidates, top)
        if len(ids) > 1:
            new = scores[ids] + weight * _z(x[ids])
            scores = scores.copy()
            if strict:
                # the same tools, re-ordered, all above the rest
                floor = float(scores[ids].min())
                new = new - new.min() + floor
            scores[ids] = new
        return scores, candidates

    return run


def _content_words(e: Extra) -> int:
    return sum(1 for w in e.query.words if _content(w))


@cache
def _sentence(text: str) -> Matrix:
    """MiniLM's sentence embedding of a query (what the default ranks with)."""
    return _model().embed([text])[0]


def _card_cosines(e: Extra, scores: Vector) -> Vector:
    """Each server's card's cosine with the query."""
    return (e.catalog.server_cards @ _sentence(e.text)).astype(float)  # type: ignore[no-any-return]


def _soft_maximum(e: Extra, scores: Vector) -> Vector:
    """Each server's log-sum-exp of its tools' fused scores."""
    s = np.minimum(scores, 50.0)  # the exact-name bonus is not a score to pool
    peak = float(s.max())
    return np.log(np.bincount(e.catalog.servers, weights=np.exp(s - peak))) + peak  # type: ignore[no-any-return]


def server_context(weight: float, per_server: Callable[[Extra, Vector], Vector]) -> Fusion:
    """The default plus ``weight`` times a server's score (as z-scores over the catalog's
    tools) for each of its tools; a one-server catalog gets nothing."""
    base = fuse()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        e = EXTRAS.get(id(p))
        if e is None or len(e.catalog.server_cards) < 2:
            return scores, candidates
        per = per_server(e, scores)
        return scores + weight * _z(per[e.catalog.servers]), candidates

    return run


def smoothed(alpha: float, *, own_server: bool) -> Fusion:
    base = fuse()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        e = EXTRAS.get(id(p))
        if e is None:
            return scores, candidates
        near = e.catalog.server_neighbours if own_server else e.catalog.neighbours
        clipped = np.minimum(scores, 50.0)
        return scores + alpha * clipped[near].mean(1), candidates

    return run


def rows() -> dict[str, Fusion]:
    """The late-interaction re-order of the first hits, gated (printed by default)."""
    out: dict[str, Fusion] = {"default (BM25 + MiniLM 1.2, z-scores)": fuse()}
    for w in (0.3, 0.45, 0.6, 0.8):
        for top in (5, 10):
            for at_most in (0, 4, 5, 6):
                gate = f", queries of ≤ {at_most} words" if at_most else ""
                out[f"MaxSim x{w}, top {top} re-ordered{gate}"] = late(
                    w, idf=False, top=top, strict=True, max_words=at_most
                )
                out[f"MaxSim x{w}, top {top} re-ordered{gate}, no ';'"] = late(
                    w, idf=False, top=top, strict=True, max_words=at_most, whole_only=True
                )
    return out


def all_rows() -> dict[str, Fusion]:
    """Every signal, added to the default's score (``--all``)."""
    out: dict[str, Fusion] = {"default (BM25 + MiniLM 1.2, z-scores)": fuse()}
    for w in (0.3, 0.45, 0.6, 0.8):
        out[f"MaxSim x{w}, every tool"] = late(w, idf=False)
        for top in (5, 10, 20):
            out[f"MaxSim x{w}, added to the top {top}"] = late(w, idf=False, top=top)
        out[f"MaxSim x{w}, every tool, PCA 64 int8"] = late(w, idf=False, compressed=True)
    for w in (0.3, 0.6):
        out[f"MaxSim, IDF-weighted x{w}, every tool"] = late(w, idf=True)
        out[f"MaxSim, IDF-weighted x{w}, added to the top 20"] = late(w, idf=True, top=20)
        out[f"MaxSim against the name only, IDF-weighted x{w}, every tool"] = late(
            w, idf=True, names=True
        )
    for w in (0.2, 0.4):
        out[f"server: its card's MiniLM cosine, x{w}"] = server_context(w, _card_cosines)
        out[f"server: soft maximum of its tools' fused scores, x{w}"] = server_context(
            w, _soft_maximum
        )
    for alpha in (0.1, 0.2):
        out[f"score regularisation: 5 nearest tools, x{alpha}"] = smoothed(alpha, own_server=False)
        out[f"score regularisation: 5 nearest of its server, x{alpha}"] = smoothed(
            alpha, own_server=True
        )
    return out


# --- scoring ---------------------------------------------------------------------------------


def extend(scored: Scored) -> CatalogVectors:
    docs = list(scored.docs)
    index = ToolIndex.build(docs, embedder=None, dense=encoder(MINILM_DIR))
    if not index.wait_semantic(7200) or index._dense is None:
        raise SystemExit("MiniLM's tool embeddings did not become ready")
    dense = index._dense._matrix
    assert dense is not None
    catalog = catalog_vectors(docs, dense)
    for q, p in zip(scored.queries, scored.parts, strict=True):
        _, ranked, _ = ix._parse(q.text)
        EXTRAS[id(p)] = Extra(text=ranked, query=word_vectors(ranked), catalog=catalog, memo={})
    return catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="*", help="only the sets whose names start so")
    parser.add_argument("--all", action="store_true", help="every signal, not only MaxSim's gates")
    parser.add_argument(
        "--cache", type=Path, help="keep the scored sets in this file (pickle) and reuse them"
    )
    args = parser.parse_args()
    if args.cache and args.cache.is_file():
        with args.cache.open("rb") as f:
            saved: list[tuple[Scored, list[Extra]]] = pickle.load(f)
        for scored, extras in saved:
            EXTRAS.update({id(p): e for p, e in zip(scored.parts, extras, strict=True)})
        report([scored for scored, _ in saved], all_rows() if args.all else rows())
        return
    eval_dir = eval_dir_or_exit()

    def wanted(name: str) -> bool:
        return not args.sets or name.startswith(tuple(args.sets))

    chosen = [qs for qs in query_sets() if wanted(qs.name)]
    for name, docs in (
        ("toollens", load_toollens(eval_dir)[0]),
        ("github", load_github_catalog(eval_dir)),
    ):
        qs = QuerySet(name=f"joined* {name}", docs=docs, queries=joined_all(name))
        if wanted(qs.name):
            chosen.append(qs)
    sets = []
    for qs in chosen:
        s = score_set(qs, rich=False)
        c = extend(s)
        sets.append(s)
        print(
            f"{qs.name}: {len(s.docs)} tools, word vectors {c.bytes_full / 2**20:.2f} MB "
            f"float16, {c.bytes_compressed / 2**20:.2f} MB PCA 64 int8",
            flush=True,
        )
    if args.cache:
        with args.cache.open("wb") as f:
            pickle.dump([(s, [EXTRAS[id(p)] for p in s.parts]) for s in sets], f)
    report(sets, all_rows() if args.all else rows())


def report(sets: list[Scored], variants: dict[str, Fusion]) -> None:
    base = {s.name: measure(s, next(iter(variants.values()))) for s in sets}
    short = [s for s in sets if s.name.startswith("short")]
    pooled = f"all short ({sum(len(s.queries) for s in short)})" if short else ""
    print("| variant | " + " | ".join(s.name for s in sets) + f" | {pooled} | all-ok |")
    print("|---|" + "---|" * (len(sets) + 2))
    for i, (label, fusion) in enumerate(variants.items()):
        measured = {s.name: measure(s, fusion) for s in sets}
        cells, ok = [], True
        for s in sets:
            delta = measured[s.name] - base[s.name]
            if i == 0:
                cells.append("/".join(f"{x:.3f}" for x in base[s.name]))
                continue
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
