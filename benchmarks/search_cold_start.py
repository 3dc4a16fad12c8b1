"""ToolSearch's cold start, warm queries and memory at 1,000 tools: issue 29's three figures.

Run: ``python benchmarks/search_cold_start.py`` (``--tools N``, ``--runs N``).

Each phase runs in a new Python process, as a new caliban session would, with its own
cache directory (``CALIBAN_CACHE_DIR``), over 1,000 real tools whose texts all differ (the
large catalog, then ToolLens; synthetic tools when ``../shared/eval/`` is absent):

* **first session** - nothing cached: the first ToolSearch loads the static model, builds
  the index (BM25 and the static model's embeddings) and answers with the static model,
  while MiniLM loads and embeds the catalog on its background thread (competing for the
  machine's cores, as in caliban);
* **next session** - the index and MiniLM's tool embeddings cached by the first: the first
  ToolSearch reads the index from disk and answers; then the time until MiniLM's embeddings
  are ready (read from their cache).

Each run has its own cache directory; MiniLM's embedding cache is shared by the runs after
the first (their first sessions' figures are about the static model's path, and MiniLM's cold
embedding is timed once, in the first run).

Both report the first search's wall time and its thread's CPU time (the time a busy machine
cannot inflate), split into import, model load, index build and the query. Once MiniLM's
embeddings are ready (the first session waits for them), warm queries are timed: the 189
short queries of ``queries_short.jsonl``, each new (its embedding computed) and then
repeated (remembered), and memory is the bytes held by the tool embeddings (MiniLM's and the
static model's matrices) and by the BM25 postings.

``--stemmers`` times only a new catalog's index build (BM25 and the static model; MiniLM
left out), in new sessions taking turns with PyStemmer and with PyStemmer hidden, so that
``snowballstemmer`` stems in pure Python as it did before PyStemmer became a dependency.

Targets (issue 29): the first ToolSearch under 200 ms at 1,000 tools, a warm query under
10 ms, 1,000 tools' embeddings under 10 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_QUERY = "create a pdf report of the weekly sales"


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def _since(start: tuple[float, float]) -> dict[str, float]:
    wall, cpu = _clocks()
    return {"wall_ms": (wall - start[0]) * 1000, "cpu_ms": (cpu - start[1]) * 1000}


def child(tools: int, wait: bool) -> dict[str, Any]:
    """One session's first ToolSearch (and, with ``wait``, the warm figures; with
    ``BENCH_INDEX_ONLY``, only up to the index build)."""
    catalog_path = Path(os.environ["BENCH_CATALOG"])
    raw = json.loads(catalog_path.read_text())
    out: dict[str, Any] = {}
    index_only = bool(os.environ.get("BENCH_INDEX_ONLY"))
    if os.environ.get("BENCH_PURE_STEMMER"):
        sys.modules["Stemmer"] = None  # type: ignore[assignment] # snowballstemmer's fallback
    start = _clocks()
    from caliban.search import text
    from caliban.search.index import SearchDoc, ToolIndex
    from caliban.search.models import semantic_models

    out["import"] = _since(start)
    docs = [SearchDoc(**d) for d in raw[:tools]]
    t = _clocks()
    models = semantic_models("auto")
    out["static model"] = _since(t)
    from caliban.config.paths import cache_dir
    from caliban.search.store import IndexStore

    t = _clocks()
    index = ToolIndex.build(
        docs,
        embedder=models.static,
        dense=None if index_only else models.dense,
        store=IndexStore(cache_dir() / "tool-index"),
    )
    out["index"] = _since(t)
    if index_only:
        out["stemmer"] = type(text._STEMMER).__module__
        return out
    t = _clocks()
    hits = index.search(_QUERY, 5).hits
    out["query"] = _since(t)
    out["first search"] = _since(start)
    out["ranked by"] = "MiniLM" if index.dense_ready else "static model"
    out["hits"] = len(hits)
    t0 = time.perf_counter()
    if not index.wait_semantic(3600):
        sys.exit("MiniLM's tool embeddings did not become ready")
    out["minilm ready s"] = time.perf_counter() - t0
    if not wait:
        return out
    queries = _short_queries()
    new = []
    for q in queries:
        t = _clocks()
        index.search(q, 5)
        new.append(_since(t))
    repeated = []
    for q in queries:
        t = _clocks()
        index.search(q, 5)
        repeated.append(_since(t))
    out["warm new"] = _percentiles(new)
    out["warm repeated"] = _percentiles(repeated)
    out["memory"] = _memory(index)
    return out


def _short_queries() -> list[str]:
    path = Path(__file__).with_name("queries_short.jsonl")
    rows = [json.loads(line) for line in path.open() if line.strip() and line[0] != "#"]
    return list(dict.fromkeys(r["query"] for r in rows))


def _percentiles(samples: list[dict[str, float]]) -> dict[str, float]:
    out = {}
    for clock in ("wall_ms", "cpu_ms"):
        ordered = sorted(s[clock] for s in samples)
        out[f"{clock} p50"] = statistics.median(ordered)
        out[f"{clock} p99"] = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return out


def _memory(index: Any) -> dict[str, float]:
    """Megabytes held by the index's arrays (private attributes: benchmark code)."""
    dense = index._dense._matrix
    static = index._embeddings
    postings = index._postings
    posting_bytes = sum(
        a.nbytes
        for a in (
            postings.terms,
            postings.starts,
            postings.doc_ids,
            postings.scores,
            postings.short_scores,
        )
    )
    return {
        "MiniLM embeddings MB": dense.nbytes / 1e6,
        "static embeddings MB": (static.matrix.nbytes + static.idf.nbytes) / 1e6,
        "BM25 postings MB": posting_bytes / 1e6,
    }


def write_catalog(path: Path, tools: int) -> str:
    """The benchmark catalog as JSON for the children; returns what it is."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _catalogs import EVAL_DIR, large_catalog, load_toollens, synthetic_catalog

    eval_dir = Path(os.environ.get("CALIBAN_EVAL_DIR", EVAL_DIR))
    if (eval_dir / "catalog_github.json").is_file():
        docs = [*large_catalog(eval_dir), *load_toollens(eval_dir)[0]][:tools]
        what = "real tools (large catalog, then ToolLens)"
    else:
        docs = synthetic_catalog(tools, seed=tools)
        what = "synthetic tools"
    fields = ("name", "server", "tool", "description", "input_schema")
    path.write_text(json.dumps([{f: getattr(d, f) for f in fields} for d in docs]))
    return f"{len(docs):,} {what}"


def run_child(
    catalog: Path, cache: Path, tools: int, wait: bool, *, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    env = {**os.environ, "BENCH_CATALOG": str(catalog), "CALIBAN_CACHE_DIR": str(cache)}
    env.update(extra or {})
    argv = [sys.executable, __file__, "--child", "--tools", str(tools)]
    done = subprocess.run(
        [*argv, *(["--wait"] if wait else [])], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def compare_stemmers(catalog: Path, scratch: Path, tools: int, runs: int) -> None:
    """A new catalog's index build with PyStemmer and with snowballstemmer's pure Python."""
    builds: dict[str, list[dict[str, float]]] = {}
    for run in range(runs):
        for pure in (True, False):
            extra = {"BENCH_INDEX_ONLY": "1", **({"BENCH_PURE_STEMMER": "1"} if pure else {})}
            cache = scratch / f"stemmers{run}{pure}"
            out = run_child(catalog, cache, tools, wait=False, extra=extra)
            builds.setdefault(out["stemmer"], []).append(out["index"])
    print(f"\nnew catalog's index build, median of {runs} sessions: wall ms / CPU ms")
    for stemmer, samples in builds.items():
        wall = statistics.median(s["wall_ms"] for s in samples)
        cpu = statistics.median(s["cpu_ms"] for s in samples)
        print(f"  {stemmer}: {wall:.0f} / {cpu:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3, help="sessions per phase (medians)")
    parser.add_argument("--stemmers", action="store_true", help="index build, PyStemmer or not")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--wait", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.tools, args.wait)))
        return

    with tempfile.TemporaryDirectory() as scratch:
        catalog = Path(scratch) / "catalog.json"
        what = write_catalog(catalog, args.tools)
        print(f"{what}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        if args.stemmers:
            compare_stemmers(catalog, Path(scratch), args.tools, args.runs)
            return
        firsts, nexts = [], []
        warm: dict[str, Any] = {}
        for run in range(args.runs):
            cache = Path(scratch) / f"cache{run}"
            if run:  # MiniLM embeds 1,000 new tools once (minutes on a busy machine)
                cache.mkdir()
                (cache / "tool-embeddings").symlink_to(Path(scratch) / "cache0" / "tool-embeddings")
            firsts.append(run_child(catalog, cache, args.tools, wait=run == 0))
            nexts.append(run_child(catalog, cache, args.tools, wait=False))
            warm = warm or firsts[0]
    parts = ("import", "static model", "index", "query", "first search")
    print(f"\nfirst ToolSearch, median of {args.runs} sessions: wall ms / its thread's CPU ms")
    print("| session | " + " | ".join(parts) + " | ranked by | MiniLM ready |")
    print("|---|" + "---|" * (len(parts) + 2))
    for label, runs in (("first (nothing cached)", firsts), ("next (caches warm)", nexts)):
        cells = [
            f"{statistics.median(r[p]['wall_ms'] for r in runs):.0f} / "
            f"{statistics.median(r[p]['cpu_ms'] for r in runs):.0f}"
            for p in parts
        ]
        # the first session of the first run is the only one that embeds with MiniLM
        ready = (
            runs[0]["minilm ready s"]
            if runs is firsts
            else statistics.median(r["minilm ready s"] for r in runs)
        )
        print(f"| {label} | " + " | ".join(cells) + f" | {runs[0]['ranked by']} | {ready:.2f} s |")
    print("\nwarm ToolSearch (MiniLM ready), 189 short queries: wall ms / CPU ms")
    for label in ("warm new", "warm repeated"):
        p = warm[label]
        print(
            f"  {label.removeprefix('warm ')} query: p50 {p['wall_ms p50']:.2f} / "
            f"{p['cpu_ms p50']:.2f}, p99 {p['wall_ms p99']:.2f} / {p['cpu_ms p99']:.2f}"
        )
    print("\nmemory: " + ", ".join(f"{k} {v:.2f}" for k, v in warm["memory"].items()))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
