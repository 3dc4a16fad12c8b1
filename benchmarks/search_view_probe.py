"""Issue 29, round 6: tool views under max, query templates, MaxSim with a fixed projection.

Run: ``python benchmarks/search_view_probe.py --cache FILE`` (the scored sets of
``python benchmarks/search_rerank_probe.py --cache FILE``; ``--embeddings FILE`` keeps the
MiniLM embeddings this probe adds; ``--dev`` prints every candidate's development cells).
The base is the default as it ships after round 5 (BM25 + MiniLM 1.2 as z-scores, the
name-phrase bonus, BM25 ``b`` 0.5 for queries of one or two terms); each family changes one
thing:

* **a short view under max**: each tool embedded twice, its full text (the default's) and a
  short view (its name's words and the description's first sentence); a query's MiniLM
  cosine is the better of the two (``a`` 1), or that maximum averaged with the full view's
  (``a`` 0.5), for every query or only short ones;
* **a query template**: the query embedded inside a fixed sentence ("a tool to {q}",
  "{q} tool", "tool that can {q}") instead of as written, so a two-word query reads more
  like a tool's description; for every query or only short ones;
* **MaxSim's memory**: round 5's MaxSim re-orders with the tools' word vectors projected to
  64 dimensions by a projection fixed in advance (PCA of MiniLM's token states over
  caliban's own ``docs/``, ``lazy-mcp.md`` left out because it quotes evaluation queries)
  and stored as int8 with a scale per row, against full precision and round 4b's
  per-catalog PCA.

Knobs are chosen as in ``search_gate_probe.py``: on the development sets alone, against the
shipped default; the table then scores each pick on every set.
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import pickle
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import search_gate_probe as gate
import search_rerank_probe as rerank
from search_fusion_probe import Fusion, Parts, Scored, fuse

from caliban.search import index as ix
from caliban.search.index import SearchDoc
from caliban.search.text import words

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float32]

TEMPLATES = ("a tool to {q}", "{q} tool", "tool that can {q}")
EMBEDDED: dict[str, Matrix] = {}
"""MiniLM's sentence embedding of every text this probe embeds, by text."""
SHORT_VIEWS: dict[int, Matrix] = {}
"""Each set's short-view matrix, by ``id`` of its ``Parts``."""
RANKED: dict[int, str] = {}
"""Each query's ranked text (what MiniLM embeds), by ``id`` of its ``Parts``."""
DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"


def shipped() -> Fusion:
    """The default after round 5: BM25 ``b`` 0.5 for queries of one or two terms."""
    return gate.lexical_by_length("b 0.5", gate._bm25_b(0.5), 2)


def short_view(doc: SearchDoc) -> str:
    """A tool's name's words and its description's first sentence."""
    first = re.split(r"(?<=[.!?])\s", doc.description.strip(), maxsplit=1)[0]
    return f"{' '.join(words(doc.tool))}: {first}"


def embed_all(texts: Sequence[str]) -> None:
    new = list(dict.fromkeys(t for t in texts if t not in EMBEDDED))
    if new:
        EMBEDDED.update(zip(new, rerank._model().embed(new), strict=True))


def prepare(sets: Sequence[Scored], embeddings: Path | None) -> None:
    if embeddings and embeddings.is_file():
        with embeddings.open("rb") as f:
            EMBEDDED.update(pickle.load(f))
    for s in sets:
        for p in s.parts:
            e = rerank.EXTRAS.get(id(p))
            if e is not None and p.dense is not None:
                RANKED[id(p)] = ix._parse(e.text)[1]
        views = [short_view(d) for d in s.docs]
        queries = [RANKED[id(p)] for p in s.parts if id(p) in RANKED]
        embed_all(views + queries + [t.format(q=q) for t in TEMPLATES for q in queries])
        matrix = np.stack([EMBEDDED[v] for v in views])
        SHORT_VIEWS.update({id(p): matrix for p in s.parts})
        print(f"{s.name}: {len(s.docs)} tools, {len(queries)} queries embedded", flush=True)
    if embeddings:
        with embeddings.open("wb") as f:
            pickle.dump(EMBEDDED, f)


def _terms(p: Parts) -> int:
    return len(gate._unique_terms(p))


def _full(p: Parts) -> Matrix:
    dense = gate.CONTEXT[id(p)].index._dense
    assert dense is not None and dense._matrix is not None
    return dense._matrix


def views(a: float, at_most: int) -> Fusion:
    """MiniLM's cosine as ``(1 - a) * full + a * max(full, short view)`` for queries of at
    most ``at_most`` terms (0: every query)."""

    def dense(p: Parts) -> Vector | None:
        text = RANKED.get(id(p))
        if p.dense is None or text is None or (at_most and _terms(p) > at_most):
            return p.dense
        short = SHORT_VIEWS[id(p)] @ EMBEDDED[text]
        return (1 - a) * p.dense + a * np.maximum(p.dense, short)  # type: ignore[no-any-return]

    return _with_b(dense)


def template(form: str, at_most: int) -> Fusion:
    """MiniLM's cosine of the query embedded inside ``form`` for queries of at most
    ``at_most`` terms (0: every query)."""

    def dense(p: Parts) -> Vector | None:
        text = RANKED.get(id(p))
        if p.dense is None or text is None or (at_most and _terms(p) > at_most):
            return p.dense
        return np.asarray(_full(p) @ EMBEDDED[form.format(q=text)], dtype=np.float64)

    return _with_b(dense)


def _with_b(dense: Callable[[Parts], Vector | None]) -> Fusion:
    def pick(p: Parts) -> str:
        if _terms(p) > 2:
            return "default"
        return gate._lexical(p, "b 0.5", gate._bm25_b(0.5))

    return gate.with_phrase(fuse(lexical=pick, dense=dense))


# --- MaxSim with a fixed projection ---------------------------------------------------------


def fixed_projection() -> Matrix:
    """PCA to 64 dimensions of MiniLM's word vectors over caliban's own docs."""
    paragraphs = []
    for path in sorted(DOCS_DIR.glob("*.md")):
        if path.name == "lazy-mcp.md":
            continue
        text = path.read_text(encoding="utf-8")
        paragraphs += [p for p in re.split(r"\n\s*\n", text) if len(p.split()) >= 8]
    rows = [rerank.word_vectors(p[:600]).vectors for p in paragraphs[:400]]
    states = np.concatenate(rows)
    _, _, vt = np.linalg.svd(states - states.mean(0), full_matrices=False)
    print(f"fixed projection: {len(states)} word vectors from {len(rows)} paragraphs", flush=True)
    return vt[:64].T.astype(np.float32)


COMPRESSED: dict[int, Matrix] = {}


def _int8_rows(low: Matrix) -> Matrix:
    scale = np.abs(low).max(1, keepdims=True) / 127
    widened = np.round(low / np.maximum(scale, 1e-12)).astype(np.int8) * scale
    unit: Matrix = (
        widened / np.maximum(np.linalg.norm(widened, axis=1, keepdims=True), 1e-12)
    ).astype(np.float32)
    return unit


def maxsim_fixed(projection: Matrix) -> Callable[[rerank.Extra], Vector | None]:
    def signal(e: rerank.Extra) -> Vector | None:
        key = "maxsim fixed 64 int8"
        if key in e.memo:
            return e.memo[key]
        keep = [i for i, w in enumerate(e.query.words) if rerank._content(w)]
        if not keep:
            return None
        c = e.catalog
        matrix = COMPRESSED.get(id(c))
        if matrix is None:
            matrix = COMPRESSED[id(c)] = _int8_rows(c.matrix @ projection)
        q = e.query.vectors[keep] @ projection
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        e.memo[key] = (np.maximum.reduceat(q @ matrix.T, c.starts, axis=1).mean(0)).astype(float)
        return e.memo[key]

    return signal


def per_catalog_pca(e: rerank.Extra) -> Vector | None:
    return rerank._maxsim(e, idf=False, names=False, compressed=True)


def maxsim_rows(projection: Matrix) -> dict[str, Fusion]:
    base = shipped()
    out = {}
    for label, signal in (
        ("full precision", None),
        ("PCA 64 int8 per catalog (round 4b)", per_catalog_pca),
        ("fixed PCA 64 (caliban's docs) int8", maxsim_fixed(projection)),
    ):
        out[f"MaxSim x1.2, top 5 within 1.5, ≤ 4 words, {label}"] = gate.words_at_most(
            4, gate.reorder(1.2, k=5, margin=1.5, base=base, signal=signal), base
        )
        out[f"MaxSim x0.6, top 5 re-ordered, ≤ 5 words, {label}"] = gate.words_at_most(
            5, gate.reorder(0.6, k=5, base=base, signal=signal), base
        )
    return out


def families() -> dict[str, dict[str, Fusion]]:
    gates = (1, 2, 4, 0)

    def gate_label(n: int) -> str:
        return f"queries of ≤ {n} terms" if n else "every query"

    multi = {
        f"short view under max, a {a}, {gate_label(n)}": views(a, n)
        for a in (0.5, 1.0)
        for n in gates
    }
    templates = {
        f"query as '{form}', {gate_label(n)}": template(form, n)
        for form in TEMPLATES
        for n in gates
    }
    return {"short view under max": multi, "query template": templates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="search_rerank_probe's cache")
    parser.add_argument("--embeddings", type=Path, help="keep this probe's embeddings here")
    parser.add_argument("--dev", action="store_true", help="every candidate's development cells")
    args = parser.parse_args()
    sets = gate.load(args.cache)
    prepare(sets, args.embeddings)
    dev = [s for s in sets if s.name in gate.DEV]
    base = shipped()
    if args.dev:
        print("| variant | " + " | ".join(s.name for s in dev) + " | short gained | dev-ok |")
        print("|---|" + "---|" * (len(dev) + 2))
    picks = {}
    for family, variants in families().items():
        label = gate.choose(dev, variants, show=args.dev, against=base)
        print(f"chosen on the development sets, {family}: {label}", flush=True)
        if label:
            picks[f"{label} (chosen)"] = variants[label]
    rows = {"default (round 5: b 0.5 for queries of ≤ 2 terms)": base, **picks}
    rows |= {label: f for variants in families().values() for label, f in variants.items()}
    rows |= maxsim_rows(fixed_projection())
    rerank.report(sets, rows)


if __name__ == "__main__":
    main()
