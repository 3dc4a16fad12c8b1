"""Issue 29, round 5: each idea's knob chosen on the development sets, then scored on all.

Run: ``python benchmarks/search_gate_probe.py --cache FILE``, where FILE holds the scored
sets of ``python benchmarks/search_rerank_probe.py --cache FILE`` (run that first: ~4
CPU-minutes). The base is the default before round 5 (BM25 + MiniLM 1.2 as z-scores, plus
the name-phrase bonus; BM25's ``b`` 0.75 for every query); each family changes one thing:

* **MaxSim where the default is unsure**: MaxSim (``search_rerank_probe.py``) re-ordering
  the default's first ``k`` hits among themselves, only those whose fused score is within a
  margin of the first's (a re-ranker that breaks near-ties and leaves clear decisions
  alone), optionally only for queries of a few content words;
* **MaxSim weighted by missing terms**: its weight times the share of the query's terms the
  first hit's text lacks (soft matches count where exact ones are missing);
* **BM25's b by query length**: ``b`` other than 0.75 for queries of at most ``n`` terms
  (the pick ships: ``Ranking.short_query_terms``);
* **a Dirichlet-smoothed query likelihood** (Zhai and Lafferty, SIGIR 2001: Dirichlet
  smoothing suits short keyword queries) in BM25's place, for queries of at most ``n`` terms;
* **hubness reduction** (CSLS, Conneau et al., ICLR 2018): MiniLM's cosines less a share of
  each tool's mean cosine to its nearest tools;
* **near-duplicates deferred** (maximal marginal relevance at its simplest): look-alikes of
  a tool ranked before them move behind the others in the top 20.

Selection is mechanical and uses the development sets only (``DEV``: the dev halves and
our own short queries): a variant is eligible when no cell of those sets drops, and the
family's pick gains the most short queries (hit@1 + hit@5), then the most development
requests. The table then prints each family's pick and the reference rows on every set —
the holdouts and the sets nobody here wrote (MCPToolBench++, ToolLens, the joined queries)
confirm or reject it. ``--dev`` prints every candidate's development cells instead.
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import math
import pickle
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import search_rerank_probe as rerank
from search_fusion_probe import Fusion, Parts, Scored, _top, _z, fuse, measure
from search_quality import DEV_SETS, encoder

from caliban.search import index as ix
from caliban.search.bm25 import VOCABULARY, Postings
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.models import MINILM_DIR

Vector = npt.NDArray[np.float64]

DEV = DEV_SETS

PHRASE_WEIGHT = 0.5
"""``Ranking.name_phrase``: the shipped default's bonus."""


@dataclass(frozen=True, kw_only=True)
class SetContext:
    """What the variants need of a query's catalog beyond its ``Parts``."""

    index: ToolIndex[SearchDoc]
    """The catalog's index (BM25 alone): its name-phrase shares."""
    postings: dict[float, Postings]
    """BM25 postings by ``b``."""
    tf: list[Counter[int]]
    lengths: Vector
    collection: dict[int, float]
    """Each term's share of all the catalog's terms."""
    crowding: dict[int, Vector]
    """:func:`crowding` of MiniLM's tool embeddings."""
    similar: npt.NDArray[np.float32]
    """MiniLM's cosine between every two tools."""


CONTEXT: dict[int, SetContext] = {}
PHRASES: dict[int, Vector] = {}
"""Each query's name-phrase shares, by ``id`` of its ``Parts``."""


def set_context(scored: Scored) -> SetContext:
    terms = [ix._doc_term_ids(d) for d in scored.docs]
    cf: Counter[int] = Counter()
    for t in terms:
        cf.update(t.tolist())
    total = sum(cf.values())
    index = ToolIndex.build(list(scored.docs), embedder=None, dense=encoder(MINILM_DIR))
    if not index.wait_semantic(7200) or index._dense is None or index._dense._matrix is None:
        raise SystemExit("MiniLM's tool embeddings did not become ready")
    return SetContext(
        crowding=crowding(index._dense._matrix),
        similar=index._dense._matrix @ index._dense._matrix.T,
        index=index,
        postings={b: Postings.build(terms, b=b) for b in (0.3, 0.4, 0.5, 0.6, 0.75)},
        tf=[Counter(t.tolist()) for t in terms],
        lengths=np.array([len(t) for t in terms], dtype=float),
        collection={term: count / total for term, count in cf.items()},
    )


def _unique_terms(p: Parts) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.terms))


def phrase_shares(p: Parts) -> Vector:
    """The name-phrase shares of each tool, as the index computes them."""
    out = np.zeros(len(CONTEXT[id(p)].crowding[5]))
    for i, share in CONTEXT[id(p)].index._phrase_shares(_unique_terms(p)).items():
        out[i] = share
    return out


def with_phrase(base: Fusion) -> Fusion:
    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        if p.dense is None and p.static is None:
            return scores, candidates
        shares = PHRASES.get(id(p))
        if shares is None:
            shares = PHRASES[id(p)] = phrase_shares(p)
        return scores + PHRASE_WEIGHT * shares, candidates

    return run


def shipped() -> Fusion:
    """The default as it ships: z-score fusion and the name-phrase bonus."""
    return with_phrase(fuse())


# --- BM25's b and the Dirichlet language model by query length -----------------------------


def _lexical(p: Parts, label: str, compute: Callable[[SetContext, tuple[str, ...]], Vector]) -> str:
    if label not in p.lexical:
        p.lexical[label] = compute(CONTEXT[id(p)], _unique_terms(p))
    return label


def _bm25_b(b: float) -> Callable[[SetContext, tuple[str, ...]], Vector]:
    def compute(c: SetContext, terms: tuple[str, ...]) -> Vector:
        out = np.zeros(len(c.tf))
        for term in terms:
            term_id = VOCABULARY.get(term)
            if term_id is not None:
                c.postings[b].add_to(out, term_id)
        return out

    return compute


def _dirichlet(mu_per_mean_length: float) -> Callable[[SetContext, tuple[str, ...]], Vector]:
    """Query likelihood with Dirichlet smoothing, rank-equivalent form, shifted so a tool
    that matches a term scores above 0 and one that matches none scores 0 (BM25's
    candidate rule stays as it is)."""

    def compute(c: SetContext, terms: tuple[str, ...]) -> Vector:
        mu = mu_per_mean_length * float(c.lengths.mean())
        ids = [VOCABULARY.get(t) for t in terms]
        known = [i for i in ids if i is not None and i in c.collection]
        out = np.zeros(len(c.tf))
        if not known:
            return out
        matched = np.zeros(len(c.tf), dtype=bool)
        for term in known:
            p_t = c.collection[term]
            for d, tf in enumerate(c.tf):
                count = tf.get(term, 0)
                if count:
                    out[d] += math.log(1 + count / (mu * p_t))
                    matched[d] = True
        longest = float(c.lengths.max())
        out += len(known) * np.log((longest + mu) / (c.lengths + mu))
        out[~matched] = 0.0
        return out

    return compute


def lexical_by_length(
    label: str, compute: Callable[[SetContext, tuple[str, ...]], Vector], at_most: int
) -> Fusion:
    """The shipped default with another lexical score for queries of at most ``at_most``
    terms (0: every query)."""

    def pick(p: Parts) -> str:
        if at_most and len(_unique_terms(p)) > at_most:
            return "default"
        return _lexical(p, label, compute)

    return with_phrase(fuse(lexical=pick))


# --- late interaction, re-ordering where the default is unsure ------------------------------


def _coverage(p: Parts, doc: int) -> float:
    """The share of the query's terms that tool ``doc``'s text has."""
    terms = _unique_terms(p)
    postings = CONTEXT[id(p)].postings[0.75]
    has = 0
    for term in terms:
        term_id = VOCABULARY.get(term)
        has += term_id is not None and postings.has(term_id, doc)
    return has / len(terms) if terms else 1.0


def reorder(
    weight: float,
    *,
    k: int,
    margin: float = 0.0,
    by_coverage: bool = False,
    base: Fusion | None = None,
    signal: Callable[[rerank.Extra], Vector | None] | None = None,
) -> Fusion:
    """MaxSim (as z-scores over ``base``'s first ``k``; by default :func:`shipped`'s)
    re-ordering those hits among themselves: only the ones whose fused score is within
    ``margin`` of the first's (0: all ``k``), with ``weight`` times the share of the query's
    terms the first hit lacks when ``by_coverage``. Never for a query of several
    ``;``-parts. ``signal`` replaces full-precision MaxSim (round 6: a compressed one)."""
    base = base or shipped()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        e = rerank.EXTRAS.get(id(p))
        if e is None or ";" in e.text:
            return scores, candidates
        x = signal(e) if signal else rerank._maxsim(e, idf=False, names=False, compressed=False)
        ids = _top(scores, candidates, k)
        if x is None or len(ids) < 2:
            return scores, candidates
        w = weight * (1 - _coverage(p, int(ids[0]))) if by_coverage else weight
        lifted = w * _z(x[ids])
        if margin:
            near = scores[ids[0]] - scores[ids] <= margin
            ids, lifted = ids[near], lifted[near]
            if len(ids) < 2:
                return scores, candidates
        new = scores[ids] + lifted
        floor = float(scores[ids].min())
        scores = scores.copy()
        scores[ids] = new - new.min() + floor  # the same tools, all still above the rest
        return scores, candidates

    return run


def words_at_most(n: int, fusion: Fusion, base: Fusion | None = None) -> Fusion:
    """``fusion`` for queries of at most ``n`` content words (round 4b's gate), else
    ``base`` (the shipped default)."""
    base = base or shipped()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        e = rerank.EXTRAS.get(id(p))
        if e is None or rerank._content_words(e) > n:
            return base(p)
        return fusion(p)

    return run


# --- hubness reduction -----------------------------------------------------------------------


def hubness(alpha: float, k: int) -> Fusion:
    """MiniLM's cosines less ``alpha`` times each tool's mean cosine to its ``k`` nearest
    tools (CSLS, Conneau et al., ICLR 2018, with the catalog's own tools standing in for
    queries): a tool in a crowd of look-alikes, near every query about its topic, counts
    for less. Candidates are chosen by the plain cosines, as the default does."""
    base = shipped()
    adjusted = with_phrase(fuse(dense=lambda p: _hub_adjusted(p, alpha, k)))

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        _, candidates = base(p)
        scores, _ = adjusted(p)
        return scores, candidates

    return run


def _hub_adjusted(p: Parts, alpha: float, k: int) -> Vector | None:
    if p.dense is None:
        return None
    return p.dense - alpha * CONTEXT[id(p)].crowding[k]  # type: ignore[no-any-return]


def crowding(dense: npt.NDArray[np.float32]) -> dict[int, Vector]:
    """Each tool's mean cosine to its ``k`` nearest other tools, for each ``k``."""
    sims = dense @ dense.T
    np.fill_diagonal(sims, -np.inf)
    ordered = -np.sort(-sims, axis=1)
    return {k: ordered[:, :k].mean(1).astype(float) for k in (5, 10, 20)}


# --- near-duplicates deferred ------------------------------------------------------------------


def defer_duplicates(threshold: float, *, top: int = 20) -> Fusion:
    """The default's first ``top`` hits walked in order, each tool whose MiniLM cosine with
    a tool kept before it reaches ``threshold`` deferred behind the others (maximal marginal
    relevance at its simplest, Carbonell and Goldstein, SIGIR 1998): a query answered by a
    crowd of look-alikes leaves room in the first five for a tool of another kind. The
    first hit never moves."""
    base = shipped()

    def run(p: Parts) -> tuple[Vector, npt.NDArray[np.bool_]]:
        scores, candidates = base(p)
        ids = _top(scores, candidates, top)
        if len(ids) < 3:
            return scores, candidates
        similar = CONTEXT[id(p)].similar
        kept: list[int] = []
        deferred: list[int] = []
        for i in ids.tolist():
            if kept and float(similar[i, kept].max()) >= threshold:
                deferred.append(i)
            else:
                kept.append(i)
        order = kept + deferred
        floor = float(scores[ids].min())
        scores = scores.copy()
        scores[order] = floor + np.arange(len(order), 0, -1)  # the same tools, re-ordered
        return scores, candidates

    return run


# --- the families, selection and the table ---------------------------------------------------


def families() -> dict[str, dict[str, Fusion]]:
    margins: dict[str, Fusion] = {}
    coverage: dict[str, Fusion] = {}
    for w in (0.3, 0.6, 0.8, 1.2):
        for k in (5, 10):
            for margin in (0.25, 0.5, 0.75, 1.0, 1.5):
                label = f"MaxSim x{w}, top {k} re-ordered within {margin} of the first"
                margins[label] = reorder(w, k=k, margin=margin)
                for n in (3, 4, 5):
                    margins[f"{label}, queries of ≤ {n} words"] = words_at_most(
                        n, reorder(w, k=k, margin=margin)
                    )
            coverage[f"MaxSim x{w} x (1 - first hit's term coverage), top {k} re-ordered"] = (
                reorder(w, k=k, by_coverage=True)
            )
    lengths: dict[str, Fusion] = {}
    for b in (0.3, 0.4, 0.5, 0.6):
        for n in (1, 2, 3, 4, 5, 0):
            gate = f"queries of ≤ {n} terms" if n else "every query"
            lengths[f"BM25 b {b} for {gate}"] = lexical_by_length(f"b {b}", _bm25_b(b), n)
    dirichlet: dict[str, Fusion] = {}
    for mu in (0.5, 1.0, 2.0):
        for n in (2, 3, 5, 0):
            gate = f"queries of ≤ {n} terms" if n else "every query"
            dirichlet[f"Dirichlet LM (mu {mu} x mean length) for {gate}"] = lexical_by_length(
                f"lm {mu}", _dirichlet(mu), n
            )
    hubs: dict[str, Fusion] = {}
    for alpha in (0.25, 0.5, 1.0):
        for k in (5, 10, 20):
            hubs[f"MiniLM cosine - {alpha} x mean cosine to the tool's {k} nearest tools"] = (
                hubness(alpha, k)
            )
    duplicates = {
        f"near-duplicates (MiniLM cosine ≥ {t}) deferred in the top 20": defer_duplicates(t)
        for t in (0.7, 0.8, 0.85, 0.9, 0.95)
    }
    return {
        "MaxSim where the default is unsure": margins,
        "MaxSim weighted by missing terms": coverage,
        "b by length": lengths,
        "Dirichlet LM": dirichlet,
        "hubness (CSLS)": hubs,
        "near-duplicates deferred": duplicates,
    }


def references() -> dict[str, Fusion]:
    return {
        "default (BM25 + MiniLM 1.2, z-scores, name phrase 0.5)": shipped(),
        "round 4b: MaxSim x0.6, top 5 re-ordered, queries of ≤ 5 words": words_at_most(
            5, reorder(0.6, k=5)
        ),
        "round 4b: MaxSim x0.8, top 10 re-ordered, queries of ≤ 5 words": words_at_most(
            5, reorder(0.8, k=10)
        ),
        # not a pick: its word cap joined the grid after the uncapped pick lost ToolLens
        "after looking: MaxSim x1.2, top 5 re-ordered within 1.5 of the first, "
        "queries of ≤ 4 words": words_at_most(4, reorder(1.2, k=5, margin=1.5)),
    }


def _counts(scored: Scored, fusion: Fusion) -> Vector:
    return measure(scored, fusion) * len(scored.queries)


def choose(
    dev: Sequence[Scored], family: dict[str, Fusion], *, show: bool, against: Fusion | None = None
) -> str | None:
    """The family's variant with no development cell lost against ``against`` (the shipped
    default) that gains the most short queries (hit@1 + hit@5), then the most development
    requests."""
    reference = against or shipped()
    base = {s.name: _counts(s, reference) for s in dev}
    best: tuple[float, float, str] | None = None
    for label, fusion in family.items():
        deltas = {s.name: _counts(s, fusion) - base[s.name] for s in dev}
        ok = all((d > -1e-9).all() for d in deltas.values())
        short = sum(float(d[:2].sum()) for n, d in deltas.items() if n.startswith("short"))
        total = sum(float(d.sum()) for d in deltas.values())
        if show:
            cells = " | ".join("/".join(f"{x:+.0f}" for x in d) for d in deltas.values())
            print(f"| {label} | {cells} | {short:+.0f} | {'yes' if ok else ''} |", flush=True)
        if ok and (short > 0 or total > 0) and (best is None or (short, total) > best[:2]):
            best = (short, total, label)
    return best[2] if best else None


def load(path: Path) -> list[Scored]:
    """The scored sets ``search_rerank_probe.py --cache`` wrote (scored now if absent)."""
    if not path.is_file():
        raise SystemExit(
            f"{path} not found: run `python benchmarks/search_rerank_probe.py --cache {path}` "
            "first (it scores every set, ~4 CPU-minutes)"
        )
    # the probe pickles its own classes as ``__main__``'s
    main_module = sys.modules["__main__"]
    for name in ("Extra", "WordVectors", "CatalogVectors"):
        setattr(main_module, name, getattr(rerank, name))
    with path.open("rb") as f:
        saved: list[tuple[Scored, list[rerank.Extra]]] = pickle.load(f)
    for scored, extras in saved:
        rerank.EXTRAS.update({id(p): e for p, e in zip(scored.parts, extras, strict=True)})
        context = set_context(scored)
        CONTEXT.update({id(p): context for p in scored.parts})
    return [scored for scored, _ in saved]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="search_rerank_probe's cache")
    parser.add_argument("--dev", action="store_true", help="every candidate's development cells")
    args = parser.parse_args()
    sets = load(args.cache)
    dev = [s for s in sets if s.name in DEV]
    if args.dev:
        print("| variant | " + " | ".join(s.name for s in dev) + " | short gained | dev-ok |")
        print("|---|" + "---|" * (len(dev) + 2))
    picks = {}
    for family, variants in families().items():
        label = choose(dev, variants, show=args.dev)
        print(f"chosen on the development sets, {family}: {label}", flush=True)
        if label:
            picks[f"{label} (chosen)"] = variants[label]
    rerank.report(sets, {**references(), **picks})


if __name__ == "__main__":
    main()
