"""Issue 29: the user's own activation history breaking ties, replayed on every set.

Run: ``python benchmarks/search_history_probe.py`` (``--orders N``, ``--sets PREFIX ...``,
``--dev`` to print every candidate's development cells).

The idea (the issue's): which tools were actually called after which queries in the user's
past sessions can break ties between tools the ranker scores alike. No set here comes from
real sessions, so each set is replayed as one user's history. Its requests arrive one at a
time, in the file's order and in ``N`` shuffled orders; each is ranked by the shipped
``ToolIndex`` (its first 20 hits), then re-ranked with a bonus for the hits that earlier
requests of the same user led to — their relevant tools, standing for the tools the model
called — weighted by how close the earlier request is (MiniLM's cosine between the two
requests); only then does the request join the history. So a request never sees its own
answer (prequential evaluation), and what helps is what a user gains when later requests
resemble earlier ones.

Each variant is a bonus ``w`` for a hit some earlier request at cosine at least ``τ`` led
to: ``w × (cos − τ) / (1 − τ)`` of the nearest such request, or ``w`` for every one of
them, counted on a log scale. The pick is chosen on the development sets alone (no cell of
them may drop; most short queries gained, then most development requests) and scored on
all sets, averaged over the orders: it is kept only if at or above the default on every
cell of every set. ``--noisy`` remembers what a model would have called instead of the
right tools (a wrong first hit when no right one was among the first 5), so the history
also holds the model's mistakes; ``--pick LABEL`` scores one variant. What ships
(:mod:`caliban.search.history`) is the pick with ``--noisy``, ``nearest earlier request,
cos ≥ 0.9, x4.0``, which loses no cell of any set with either history.
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from search_quality import DEV_SETS, QuerySet, encoder, query_sets

from caliban.search.history import DEPTH, NEAR
from caliban.search.index import ToolIndex
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import default_embedder

Vector = npt.NDArray[np.float64]
Bonus = Callable[[Vector, list[frozenset[int]], Sequence[int]], Vector]
"""(cosines to the earlier requests, their relevant tools, the hits) → each hit's bonus."""


@dataclass(frozen=True, kw_only=True)
class Ranked:
    """One request of a set, ranked once by the shipped index."""

    hits: tuple[int, ...]
    """The first :data:`DEPTH` hits, as positions in the set's catalog."""
    scores: Vector
    embedding: npt.NDArray[np.float32]
    names: tuple[frozenset[str], ...]
    """Each hit's bare and full name (recall is counted over names, as in
    ``search_quality.evaluate``)."""
    relevant: frozenset[int]
    """Positions of the tools that answer it."""
    wanted: frozenset[str]
    """Its relevant names (bare or full)."""


def rank_set(qs: QuerySet) -> list[Ranked]:
    docs = list(qs.docs)
    dense = encoder(MINILM_DIR)
    index = ToolIndex.build(docs, embedder=default_embedder(), dense=dense)
    if not index.wait_semantic(7200):
        raise SystemExit("MiniLM's tool embeddings did not become ready")
    at = {id(d): i for i, d in enumerate(docs)}
    out = []
    for q in qs.queries:
        hits = index.search(q.text, DEPTH).hits
        out.append(
            Ranked(
                hits=tuple(at[id(h.doc)] for h in hits),
                scores=np.array([h.score for h in hits]),
                names=tuple(frozenset((h.doc.tool, h.doc.name)) for h in hits),
                embedding=dense.embed_query(q.text),
                relevant=frozenset(i for i, d in enumerate(docs) if q.is_relevant(d)),
                wanted=q.relevant,
            )
        )
    return out


def nearest(w: float, tau: float) -> Bonus:
    def bonus(cos: Vector, led_to: list[frozenset[int]], hits: Sequence[int]) -> Vector:
        out = np.zeros(len(hits))
        for j in np.flatnonzero(cos >= tau):
            share = w * (cos[j] - tau) / (1 - tau)
            for k, doc in enumerate(hits):
                if doc in led_to[j]:
                    out[k] = max(out[k], share)
        return out

    return bonus


def counted(w: float, tau: float) -> Bonus:
    def bonus(cos: Vector, led_to: list[frozenset[int]], hits: Sequence[int]) -> Vector:
        counts = np.zeros(len(hits))
        for j in np.flatnonzero(cos >= tau):
            for k, doc in enumerate(hits):
                counts[k] += doc in led_to[j]
        return w * np.log1p(counts)

    return bonus


def variants() -> dict[str, Bonus]:
    out: dict[str, Bonus] = {}
    for tau in (0.5, 0.6, 0.7, 0.8, 0.9):
        for w in (0.25, 0.5, 1.0, 2.0, 4.0):
            out[f"nearest earlier request, cos ≥ {tau}, x{w}"] = nearest(w, tau)
            out[f"earlier requests counted, cos ≥ {tau}, x{w}"] = counted(w, tau)
    return out


HISTORY = "gold"
"""What an earlier request led to: ``gold`` (its relevant tools) or, with ``--noisy``, what
a model would have called — the relevant tools among the first 5 it was shown, else the
first hit (a wrong call, remembered as if it were right)."""


def replay(requests: Sequence[Ranked], order: Sequence[int], bonus: Bonus | None) -> Vector:
    """hit@1, hit@5, recall@10 summed over the requests, taken in ``order``."""
    totals = np.zeros(3)
    dims = len(requests[0].embedding) if requests else 0
    seen = np.zeros((len(requests), dims), dtype=np.float32)
    led_to: list[frozenset[int]] = []
    for n, i in enumerate(order):
        r = requests[i]
        scores = r.scores
        if bonus is not None and n:
            scores = scores + bonus(seen[:n] @ r.embedding, led_to, r.hits)
        top = np.argsort(-scores, kind="stable")[:10]
        flags = [r.hits[k] in r.relevant for k in top]
        totals[0] += any(flags[:1])
        totals[1] += any(flags[:5])
        found = set().union(*(r.names[k] for k, ok in zip(top, flags, strict=True) if ok))
        totals[2] += len(r.wanted & found) / len(r.wanted)
        seen[n] = r.embedding
        shown = [r.hits[k] for k in top[:5]]
        if HISTORY == "gold":
            led_to.append(r.relevant)
        elif any(flags[:5]):  # the right tools it was shown
            led_to.append(frozenset(d for d, ok in zip(shown, flags, strict=False) if ok))
        else:  # a wrong call
            led_to.append(frozenset(shown[:1]))
    return totals


def orders(n: int, count: int) -> list[list[int]]:
    shuffled = []
    for seed in range(count):
        order = list(range(n))
        random.Random(seed).shuffle(order)
        shuffled.append(order)
    return [list(range(n)), *shuffled]


def averaged(requests: Sequence[Ranked], bonus: Bonus | None, count: int) -> Vector:
    runs = [replay(requests, order, bonus) for order in orders(len(requests), count)]
    return np.mean(runs, axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=4, help="shuffled orders beside the file's")
    parser.add_argument("--sets", nargs="*", help="only the sets whose names start so")
    parser.add_argument("--dev", action="store_true", help="every candidate's development cells")
    parser.add_argument("--noisy", action="store_true", help="remember wrong calls too")
    parser.add_argument("--pick", help="score this variant instead of choosing one")
    args = parser.parse_args()
    global HISTORY
    HISTORY = "noisy" if args.noisy else "gold"
    sets = [
        qs
        for qs in query_sets()
        if not args.sets or qs.name.startswith(tuple(args.sets)) or qs.name in DEV_SETS
    ]
    ranked = {qs.name: rank_set(qs) for qs in sets}
    base = {name: averaged(r, None, args.orders) for name, r in ranked.items()}
    dev = [name for name in ranked if name in DEV_SETS]
    best: tuple[float, float, str] | None = None
    table = variants()
    for label, bonus in table.items() if not args.pick else ():
        deltas = {name: averaged(ranked[name], bonus, args.orders) - base[name] for name in dev}
        ok = all((d > -1e-9).all() for d in deltas.values())
        short = sum(float(d[:2].sum()) for name, d in deltas.items() if name.startswith("short"))
        total = sum(float(d.sum()) for d in deltas.values())
        if args.dev:
            cells = " | ".join("/".join(f"{x:+.1f}" for x in d) for d in deltas.values())
            print(f"| {label} | {cells} | {short:+.1f} | {'yes' if ok else ''} |", flush=True)
        if ok and (short > 0 or total > 0) and (best is None or (short, total) > best[:2]):
            best = (short, total, label)
    pick = args.pick or (best[2] if best else None)
    print(f"{'given' if args.pick else 'chosen on the development sets'}: {pick}")
    rows: dict[str, Bonus | None] = {"default (shipped ranking, no history)": None}
    if pick:
        rows[f"{pick} ({'given' if args.pick else 'chosen'})"] = table[pick]
    print(
        "\nhit@1 / hit@5 / recall@10, mean over the file's order and "
        f"{args.orders} shuffled ones; the pick's row: its change in requests"
    )
    print("| ranking | " + " | ".join(f"{n} ({len(r)})" for n, r in ranked.items()) + " |")
    print("|---|" + "---|" * len(ranked))
    for label, bonus in rows.items():
        cells = []
        for name, requests in ranked.items():
            got = averaged(requests, bonus, args.orders) if bonus else base[name]
            if bonus is None:
                cells.append("/".join(f"{x / len(requests):.3f}" for x in got))
            else:
                cells.append("/".join(f"{x:+.1f}" for x in got - base[name]))
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    near = []
    for requests in ranked.values():
        vectors = np.stack([r.embedding for r in requests])
        cosines = np.tril(vectors @ vectors.T, -1)  # each request against the earlier ones
        near.append(f"{int((cosines >= NEAR).any(axis=1).sum())}")
    print(
        f"| requests with an earlier one at cosine ≥ {NEAR} (the file's order) | "
        + " | ".join(near)
        + " |"
    )
    if pick:
        every = all(
            (averaged(r, table[pick], args.orders) - base[n] > -1e-9).all()
            for n, r in ranked.items()
        )
        print(f"\nat or above the default on every cell of every set: {'yes' if every else 'no'}")


if __name__ == "__main__":
    main()
