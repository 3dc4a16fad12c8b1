"""Pre-activation (``tools.preactivate``): which tools a user's request loads before the model
sees it, what that saves and what it costs.

Run: ``python benchmarks/preactivation.py`` (``--fires SET`` lists the requests of a negative
set that load a tool under the shipped rule, with the tools).

Each request is ranked by ``ToolIndex.rank`` — against a set's full catalog and the
negative catalogs with the shipped MiniLM, as pre-activation ranks once a catalog's
embeddings are ready; against the smaller catalogs drawn per request with the static model,
as it ranks before — and a rule decides which of the best ``k`` hits are loaded
(:func:`caliban.mcp.lazy.preactivate.likely_tools` is the shipped one). Reported:

* **Requests that need an MCP tool**: the request sets of ``search_quality.py`` (tuned on:
  ``toollens``, ``mcptoolbench`` and the ``dev`` halves; the ``holdout`` halves are scored
  only). ``gold``: a relevant tool is among those loaded; ``all``: every relevant tool in
  the catalog is (a request may need several); ``tools``: tools loaded per request;
  ``false``: loaded tools that are not relevant, per request; ``tokens``: the loaded tools'
  definitions added to turn 1 (``caliban.util.tokens``' estimate of the Anthropic shape, as
  ``lazy_tokens.py`` counts them), per request; ``saved``: round trips saved per 100
  requests by a scripted model that calls a relevant tool at once when one is on the wire
  and otherwise searches first (one request more): that is ``gold`` × 100.
* **Catalog size**: the same requests against the set's full catalog, against the relevant
  tools' servers plus three random other servers, and against the relevant servers alone
  (for the one-server GitHub set: the relevant tools plus 10 random GitHub tools). A rule
  that holds across catalog sizes scores alike in the three columns.
* **Requests that need no MCP tool** (most of a coding agent's prompts), against seven
  catalogs (the time server's 2 tools, the five reference servers' 50, GitHub's 117, the
  216-tool pool, ToolLens's 464, the 569-tool large catalog, three random servers of it):
  the share of requests that load any tool and the tokens that costs. Sets:

  - ``commits``: the subjects and bodies of this repository's own commits (``git log``,
    merges left out), read at run time: real developer language about code changes, written
    by the project's sessions for other purposes, never as requests. Limits: past tense
    and terse ("search: prune the tool-embedding cache"), long when a body is present (which
    lowers any coverage-like measure), and about a project whose own subject is MCP tools,
    so their words ("tool", "search", "server") meet tool descriptions more than a typical
    project's would. Split by position: the odd half chose the bar (``commits-tune``), the
    even half is scored only (``commits-check``).
  - ``coding``: ``queries_coding.txt``, 40 imperative coding requests written for this
    benchmark before any rule was measured on them; a few are borderline ("review my diff"
    could use a git server's ``git_diff``).
  - ``cc-prompts``: the ``-p`` prompts of the Claude Code recordings in
    ``../research/claude-code/fixtures/`` (read at run time when present): one- to
    three-word harness triggers ("read hello", "search", "write it") rather than real
    requests; they show how a very short prompt fares.

  The session rows replay each negative set in order through a real
  :class:`~caliban.mcp.lazy.activation.McpActivationSet` (cap 24, LRU) on the 569-tool
  catalog. caliban drops what a prompt loaded and the model did not use at the next prompt
  (the replay uses nothing), so each turn carries the tools the current prompt loaded —
  every coding prompt a rule fires on costs that turn their definitions.
* **Ablation**: each alternative confidence measure at the bar where it loads a tool for as
  many ``commits-tune`` requests as the shipped rule (or fewer), so the columns compare what
  each buys at the same cost; also "always the top k", the first cut's fixed bar on the
  fused score (6.0), and the top-k cap at 1, 2 and 3.
"""

from __future__ import annotations

# isort: off
import caliban.search  # noqa: F401 - first: it loads numpy with one BLAS thread, as caliban does

# isort: on

import argparse
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from _catalogs import (
    BENCH_DIR,
    REPO_ROOT,
    eval_dir_or_exit,
    large_catalog,
    load_github_catalog,
    load_reference_tools,
    load_toollens,
    pooled_catalog,
)
from search_quality import QuerySet, encoder, query_sets

from caliban.mcp.lazy.activation import McpActivationSet
from caliban.mcp.lazy.preactivate import MAX_REQUEST_CHARS, MIN_COVERAGE, MIN_TERMS, coverage
from caliban.search.dense import DenseEncoder
from caliban.search.index import SearchDoc, ToolIndex, tool_text
from caliban.search.models import MINILM_DIR
from caliban.search.semantic import CatalogEmbeddings, Embedder, load_embedder
from caliban.util.tokens import estimate_json_tokens

CODING = BENCH_DIR / "queries_coding.txt"
RECORDINGS = Path(
    os.environ.get(
        "CALIBAN_RECORDINGS_DIR", REPO_ROOT.parent / "research" / "claude-code" / "fixtures"
    )
)
DEV_SETS = ("toollens", "mcptoolbench", "user dev", "tasks dev", "github dev")
DEPTH = 10
"""Hits ranked per request (rules look at the first 3, or 10 for the "deeper" row)."""
SESSION_CATALOG = "large (569)"


# --------------------------------------------------------------------------- what a rule sees


@dataclass(frozen=True, kw_only=True)
class Hit:
    """One ranked tool with every measure a rule may look at."""

    doc: SearchDoc
    score: float
    """The fused ranking score (z-scores over the catalog)."""
    coverage: float
    """:func:`caliban.mcp.lazy.preactivate.coverage` (the shipped measure)."""
    share: float
    """Plain word coverage: matched request words / request words."""
    cosine: float
    """The static model's cosine between request and tool (0 without one)."""
    cosine_z: float
    """That cosine as a z-score over the catalog."""
    margin: float
    """Fused score over the next hit's (over 0 for the last)."""
    catalog: int


@dataclass(frozen=True, kw_only=True)
class Ranked:
    """A request ranked against one catalog."""

    text: str
    hits: tuple[Hit, ...]
    terms: int
    """The request's meaningful words."""
    relevant: frozenset[str] = frozenset()
    relevant_in_catalog: frozenset[str] = frozenset()
    """Wire names of the catalog's relevant tools."""

    def is_relevant(self, doc: SearchDoc) -> bool:
        return doc.name in self.relevant_in_catalog


class Catalog:
    """An index and the static model's embeddings for one catalog, built once; with
    ``dense``, the transformer's tool embeddings are awaited (the ranker pre-activation uses
    once they are ready)."""

    def __init__(
        self, docs: Sequence[SearchDoc], embedder: Embedder, dense: DenseEncoder | None = None
    ) -> None:
        self.docs = tuple(docs)
        self.index = ToolIndex.build(self.docs, embedder=embedder, dense=dense)
        if dense is not None and not self.index.wait_semantic(3600):
            sys.exit("the transformer's tool embeddings did not become ready")
        self.embeddings: CatalogEmbeddings = embedder.embed_catalog(
            [tool_text(d) for d in self.docs]
        )

    def rank(self, text: str, relevant: frozenset[str] = frozenset()) -> Ranked:
        text = text[:MAX_REQUEST_CHARS]
        result = self.index.rank(text, DEPTH)
        cosines = self.embeddings.similarities(text)
        if cosines is None:
            cosines = np.zeros(len(self.docs), dtype=np.float32)
        spread = float(cosines.std()) or 1.0
        position = {d.name: i for i, d in enumerate(self.docs)}
        terms = len(result.terms)
        hits = []
        for j, h in enumerate(result.hits):
            cos = float(cosines[position[h.doc.name]])
            following = result.hits[j + 1].score if j + 1 < len(result.hits) else 0.0
            hits.append(
                Hit(
                    doc=h.doc,
                    score=h.score,
                    coverage=coverage(h, terms),
                    share=len(h.matched) / terms if terms else 0.0,
                    cosine=cos,
                    cosine_z=(cos - float(cosines.mean())) / spread,
                    margin=h.score - following,
                    catalog=len(self.docs),
                )
            )
        in_catalog = frozenset(
            d.name for d in self.docs if d.tool in relevant or d.name in relevant
        )
        return Ranked(
            text=text,
            hits=tuple(hits),
            terms=terms,
            relevant=relevant,
            relevant_in_catalog=in_catalog,
        )


# --------------------------------------------------------------------------------- the rules

Rule = Callable[[Hit], bool]


@dataclass(frozen=True, kw_only=True)
class Measure:
    """A confidence measure; a rule is ``value(hit) >= bar``."""

    label: str
    value: Callable[[Hit], float]
    grid: Sequence[float]


MEASURES = (
    Measure(label="fused score (fixed bar)", value=lambda h: h.score, grid=np.arange(2, 20, 0.25)),
    Measure(
        label="fused score / sqrt(2 ln n)",
        value=lambda h: h.score / math.sqrt(2 * math.log(max(h.catalog, 3))),
        grid=np.arange(0.5, 6, 0.05),
    ),
    Measure(label="static cosine", value=lambda h: h.cosine, grid=np.arange(0.3, 1, 0.01)),
    Measure(label="static cosine z", value=lambda h: h.cosine_z, grid=np.arange(0.5, 8, 0.1)),
    Measure(label="margin over next hit", value=lambda h: h.margin, grid=np.arange(0, 15, 0.1)),
    Measure(label="word coverage (plain)", value=lambda h: h.share, grid=np.arange(0.1, 1, 0.02)),
)
SHIPPED = Measure(
    label="coverage, name words twice (shipped)",
    value=lambda h: h.coverage,
    grid=(MIN_COVERAGE,),
)


MIN_WORDS = MIN_TERMS
"""The shipped floor on a request's meaningful words; an ablation row sets it to 1."""


def loaded(r: Ranked, rule: Rule, k: int, depth: int | None = None) -> list[Hit]:
    """The hits ``rule`` loads among the best ``k`` (or the first ``k`` that pass among the
    best ``depth``), none for a request of fewer than :data:`MIN_WORDS` meaningful words."""
    if r.terms < MIN_WORDS:
        return []
    return [h for h in r.hits[: depth or k] if rule(h)][:k]


# ------------------------------------------------------------------------------- the figures


@cache
def tool_tokens(doc: SearchDoc) -> int:
    """Tokens of a tool's definition on the wire (Anthropic shape, compact JSON)."""
    return estimate_json_tokens(
        {"name": doc.name, "description": doc.description, "input_schema": dict(doc.input_schema)}
    )


@dataclass(frozen=True, kw_only=True)
class Figures:
    gold: float
    all_gold: float
    tools: float
    false: float
    tokens: float
    fired: float

    def cell(self) -> str:
        return f"{self.gold:.2f}/{self.all_gold:.2f}/{self.tokens:,.0f}"


def figures(requests: Sequence[Ranked], rule: Rule, k: int, depth: int | None = None) -> Figures:
    gold = all_gold = tools = false = tokens = fired = 0.0
    for r in requests:
        picked = loaded(r, rule, k, depth)
        names = {h.doc.name for h in picked}
        gold += any(r.is_relevant(h.doc) for h in picked)
        all_gold += bool(r.relevant_in_catalog) and r.relevant_in_catalog <= names
        tools += len(picked)
        false += sum(not r.is_relevant(h.doc) for h in picked)
        tokens += sum(tool_tokens(h.doc) for h in picked)
        fired += bool(picked)
    n = max(len(requests), 1)
    return Figures(
        gold=gold / n,
        all_gold=all_gold / n,
        tools=tools / n,
        false=false / n,
        tokens=tokens / n,
        fired=fired / n,
    )


# ------------------------------------------------------------------------------ the requests


def positives(
    sets: Sequence[QuerySet], embedder: Embedder, dense: DenseEncoder
) -> dict[tuple[str, str], list[Ranked]]:
    """(set, catalog variant) -> the set's requests ranked against that variant."""
    rng = random.Random(19)
    catalogs: dict[tuple[str, ...], Catalog] = {}

    def catalog(docs: Sequence[SearchDoc], full: bool = False) -> Catalog:
        key = tuple(d.name for d in docs)
        if key not in catalogs:
            if len(catalogs) > 500:
                catalogs.clear()
            # the transformer for the full catalogs (whose embeddings search_quality.py has
            # cached); the static model for the smaller variants drawn per request
            catalogs[key] = Catalog(docs, embedder, dense if full else None)
        return catalogs[key]

    out: dict[tuple[str, str], list[Ranked]] = {}
    for qs in sets:
        docs = list(qs.docs)
        servers = list(dict.fromkeys(d.server for d in docs))
        for q in qs.queries:
            gold = [d for d in docs if q.is_relevant(d)]
            gold_servers = {d.server for d in gold}
            if len(servers) > 1:
                others = [s for s in servers if s not in gold_servers]
                plus = gold_servers | set(rng.sample(others, min(3, len(others))))
                mid = [d for d in docs if d.server in plus]
                small = [d for d in docs if d.server in gold_servers]
            else:
                rest = [d for d in docs if not q.is_relevant(d)]
                keep = {d.name for d in gold} | {d.name for d in rng.sample(rest, 40)}
                mid = [d for d in docs if d.name in keep]
                keep = {d.name for d in gold} | {d.name for d in rng.sample(rest, 10)}
                small = [d for d in docs if d.name in keep]
            for variant, cat in (("full", docs), ("relevant+3", mid), ("relevant", small)):
                ranked = catalog(cat, full=variant == "full").rank(q.text, q.relevant)
                out.setdefault((qs.name, variant), []).append(ranked)
        print(f"  ranked {qs.name}", file=sys.stderr, flush=True)
    return out


def commit_messages() -> list[str]:
    """This repository's commit messages (subject and body), merges left out, newest first."""
    raw = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "log", "--format=%B%x00"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    messages = [m.strip() for m in raw.split("\0")]
    return [m for m in messages if m and not m.startswith("Merge ")]


def recorded_prompts() -> list[str]:
    """The ``-p`` prompts of the Claude Code recordings (empty when they are not here)."""
    prompts: set[str] = set()
    for path in sorted(RECORDINGS.glob("*/command.json")):
        argv = json.loads(path.read_text()).get("argv", [])
        if "-p" in argv:
            at = argv.index("-p") + 1
            if at < len(argv) and not argv[at].startswith("-"):
                prompts.add(argv[at])
    return sorted(prompts)


def negative_sets() -> dict[str, list[str]]:
    commits = commit_messages()
    coding = [
        line.strip()
        for line in CODING.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sets = {"commits-tune": commits[1::2], "commits-check": commits[0::2], "coding": coding}
    prompts = recorded_prompts()
    if prompts:
        sets["cc-prompts"] = prompts
    return sets


def negative_catalogs(embedder: Embedder, dense: DenseEncoder) -> dict[str, Catalog]:
    eval_dir = eval_dir_or_exit()
    reference = load_reference_tools()
    docs = {
        "time (2)": [d for d in reference if d.server == "time"],
        "reference (50)": reference,
        "github (117)": load_github_catalog(eval_dir),
        "pool (216)": pooled_catalog(eval_dir),
        "toollens (464)": load_toollens(eval_dir)[0],
        SESSION_CATALOG: large_catalog(eval_dir),
    }
    return {name: Catalog(d, embedder, dense) for name, d in docs.items()}


def negatives(
    sets: Mapping[str, Sequence[str]], catalogs: Mapping[str, Catalog], embedder: Embedder
) -> dict[tuple[str, str], list[Ranked]]:
    """(negative set, catalog) -> its requests ranked there; "3 random servers" draws three
    servers of the large catalog per request."""
    rng = random.Random(7)
    large = catalogs[SESSION_CATALOG].docs
    servers = sorted({d.server for d in large})
    random_catalogs: dict[tuple[str, ...], Catalog] = {}
    out: dict[tuple[str, str], list[Ranked]] = {}
    for name, texts in sets.items():
        for text in texts:
            for cname, cat in catalogs.items():
                out.setdefault((name, cname), []).append(cat.rank(text))
            pick = tuple(sorted(rng.sample(servers, 3)))
            if pick not in random_catalogs:
                random_catalogs[pick] = Catalog([d for d in large if d.server in pick], embedder)
            out.setdefault((name, "3 random servers"), []).append(random_catalogs[pick].rank(text))
    return out


def fire_rate(
    neg: Mapping[tuple[str, str], list[Ranked]],
    name: str,
    rule: Rule,
    k: int,
    depth: int | None = None,
) -> float:
    """Mean over catalogs of the share of ``name``'s requests that load any tool."""
    rates = [figures(rs, rule, k, depth).fired for (s, _), rs in neg.items() if s == name]
    return float(np.mean(rates))


def session_replay(
    requests: Iterable[Ranked], rule: Rule, k: int, depth: int | None = None
) -> tuple[float, float]:
    """Replay requests in order through an activation set as caliban does (nothing loaded
    is ever used, so what one prompt loaded is dropped at the next unless it wants it too):
    mean tools active per turn and mean definition tokens they add to each turn."""
    active = McpActivationSet.empty()
    docs: dict[str, SearchDoc] = {}
    sizes, tokens = [], []
    unclaimed: list[str] = []
    for r in requests:
        picked = loaded(r, rule, k, depth)
        docs.update((h.doc.name, h.doc) for h in picked)
        wanted = [h.doc.name for h in picked]
        active = active.without(n for n in unclaimed if n not in wanted)
        unclaimed = wanted
        active, _ = active.activate(wanted)
        sizes.append(len(active))
        tokens.append(sum(tool_tokens(docs[n]) for n in active))
    return float(np.mean(sizes or [0])), float(np.mean(tokens or [0]))


# ---------------------------------------------------------------------------------- printing


def calibrated(
    measure: Measure, neg: Mapping[tuple[str, str], list[Ranked]], target: float, k: int
) -> tuple[float, Rule]:
    """The lowest bar on ``measure`` whose ``commits-tune`` fire rate is at most ``target``."""
    for bar in measure.grid:

        def rule(h: Hit, bar: float = float(bar)) -> bool:
            return measure.value(h) >= bar

        if fire_rate(neg, "commits-tune", rule, k) <= target + 1e-9:
            return float(bar), rule
    return math.inf, lambda h: False


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fires", metavar="SET", help="list a negative set's loads (shipped)")
    args = parser.parse_args()

    embedder = load_embedder()
    dense = encoder(MINILM_DIR)
    # pre-activation ranks users' whole requests: the short ToolSearch queries are not those
    sets = [qs for qs in query_sets() if not qs.name.startswith(("short ", "joined "))]
    print("ranking requests...", file=sys.stderr)
    pos = positives(sets, embedder, dense)
    neg_sets = negative_sets()
    neg_catalogs = negative_catalogs(embedder, dense)
    neg = negatives(neg_sets, neg_catalogs, embedder)
    set_names = [qs.name for qs in sets]

    def shipped(h: Hit) -> bool:
        return h.coverage >= MIN_COVERAGE

    k = 3
    print(
        f"Shipped rule: the top {k} hits whose coverage is >= {MIN_COVERAGE} "
        "(full catalogs; holdout sets never tuned on)\n"
    )
    print(
        "| set | requests | tools | gold | all gold | tools loaded | false | precision "
        "| tokens added | round trips saved /100 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for qs in sets:
        f = figures(pos[(qs.name, "full")], shipped, k)
        precision = (f.tools - f.false) / f.tools if f.tools else float("nan")
        print(
            f"| {qs.name} | {len(qs.queries)} | {len(qs.docs)} | {f.gold:.2f} | {f.all_gold:.2f} "
            f"| {f.tools:.2f} | {f.false:.2f} | {precision:.2f} | {f.tokens:,.0f} "
            f"| {100 * f.gold:.0f} |"
        )

    print("\nCatalog size (gold loaded; the rule should score alike across a row):\n")
    print("| rule | " + " | ".join(set_names) + " |")
    print("|---|" + "---|" * len(set_names))
    for label, rule in (
        ("shipped: coverage >= 0.3", shipped),
        ("first cut: fused score >= 6", lambda h: h.score >= 6.0),
        ("always the top 3", lambda h: True),
    ):
        cells = [
            "/".join(
                f"{figures(pos[(s, v)], rule, k).gold:.2f}"
                for v in ("full", "relevant+3", "relevant")
            )
            for s in set_names
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("(each cell: full catalog / relevant servers + 3 random / relevant servers alone)")

    print("\nRequests that need no MCP tool: share that load any tool; tokens per request\n")
    catalogs = [c for (s, c) in neg if s == next(iter(neg_sets))]
    print("| set | requests | " + " | ".join(catalogs) + " |")
    print("|---|---|" + "---|" * len(catalogs))
    for name, texts in neg_sets.items():
        cells = []
        for c in catalogs:
            f = figures(neg[(name, c)], shipped, k)
            cells.append(f"{f.fired:.2f} ({f.tokens:,.0f})")
        print(f"| {name} | {len(texts)} | " + " | ".join(cells) + " |")

    target = fire_rate(neg, "commits-tune", shipped, k)
    rows: list[tuple[str, Rule, int, int | None]] = [
        ("always the top 3", lambda h: True, 3, None),
        ("first cut: fused score >= 6.0", lambda h: h.score >= 6.0, 3, None),
    ]
    for m in MEASURES:
        bar, rule = calibrated(m, neg, target, k)
        rows.append((f"{m.label} >= {bar:.2f}", rule, 3, None))
    rows.append((f"{SHIPPED.label} >= {MIN_COVERAGE}", shipped, 3, None))
    rows.append(("  the same, top 2", shipped, 2, None))
    rows.append(("  the same, top 1", shipped, 1, None))
    for bar in (0.25, 0.35):
        rows.append((f"  the same, bar {bar}", lambda h, bar=bar: h.coverage >= bar, 3, None))
    rows.append((f"  the same, first 3 of the top {DEPTH} that pass", shipped, 3, DEPTH))
    rows.append(("  the same, one-word requests too (MIN_TERMS 1)", shipped, 3, None))

    print(
        f"\nAblation (full catalogs). Alternatives at the bar where they load a tool for "
        f"<= {target:.3f} of commits-tune (the shipped rule's rate), top 3.\n"
        "Cells: gold / all gold / tokens added per request. Negatives: share that load any "
        "tool (mean over the 7 catalogs); session: coding then commits-check replayed in order "
        f"on {SESSION_CATALOG}, mean tools active per turn / their tokens per turn.\n"
    )
    neg_names = list(neg_sets)
    print(
        "| rule | "
        + " | ".join(DEV_SETS)
        + " | dev mean | holdout mean | "
        + " | ".join(neg_names)
        + " | session |"
    )
    print("|---|" + "---|" * (len(DEV_SETS) + 2 + len(neg_names) + 1))
    holdout = [s for s in set_names if "holdout" in s]
    session = [*neg[("coding", SESSION_CATALOG)], *neg[("commits-check", SESSION_CATALOG)]]
    global MIN_WORDS
    for label, rule, kk, depth in rows:
        MIN_WORDS = 1 if "MIN_TERMS 1" in label else MIN_TERMS
        dev = [figures(pos[(s, "full")], rule, kk, depth) for s in DEV_SETS]
        hold = [figures(pos[(s, "full")], rule, kk, depth).gold for s in holdout]
        fires = [fire_rate(neg, n, rule, kk, depth) for n in neg_names]
        mean_active, mean_tokens = session_replay(session, rule, kk, depth)
        print(
            f"| {label} | "
            + " | ".join(f.cell() for f in dev)
            + f" | {np.mean([f.gold for f in dev]):.3f} | {np.mean(hold):.3f} | "
            + " | ".join(f"{x:.3f}" for x in fires)
            + f" | {mean_active:.1f} / {mean_tokens:,.0f} |",
            flush=True,
        )

    if args.fires:
        for (name, cname), requests in neg.items():
            if name != args.fires:
                continue
            for r in requests:
                picked = loaded(r, shipped, k)
                if picked:
                    tools = ", ".join(f"{h.doc.tool} ({h.coverage:.2f})" for h in picked)
                    print(f"{cname}: {r.text[:70]!r} -> {tools}", file=sys.stderr)


if __name__ == "__main__":
    main()
