"""Time to the first request with a large MCP catalog: lazy against eager, now against before.

    python benchmarks/catalog_first_request.py [--sizes 1000 10000] [--runs 5] [--before DIR]

For each size, ``caliban -p "<prompt>"`` runs in a project whose MCP servers
(``tests/mcp_servers/catalog_server.py --catalog``, 20 servers, the tools of
``_catalogs.synthetic_catalog`` spread over them) are configured in the user's ``mcp.toml``,
against an instant local fake model (``tests/fake_model_server.py``), once with
``tools.lazy_mcp = false`` (eager: every definition on the wire) and once with ``true``.
Every server's tool list is cached by a warm-up run, as in any session after the first, so
nothing waits for a server: what is timed is caliban's own work before its first request
(reading the cached lists, the tool list or the deferred paragraph, and for lazy loading
pre-activation, which ranks the prompt with the search index). Reported per cell: the median
over ``--runs`` runs of the time from starting the process to the fake model receiving the
first request, and the whole run.

The prompt names something the catalog has ("list the open invoices and refund the
duplicate charge"), so pre-activation has work to do. ``--before DIR`` runs another checkout
(``git archive`` of ``main``) with ``python -m caliban`` and ``PYTHONPATH=DIR``, alternating
run by run with this working tree (which then also runs as ``python -m caliban``), so both
see the same machine load.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from _catalogs import synthetic_catalog  # noqa: E402
from fake_model_server import FakeModelServer  # noqa: E402

SERVER = REPO_ROOT / "tests" / "mcp_servers" / "catalog_server.py"
SERVERS = 20
PROMPT = "list the open invoices and refund the duplicate charge"


def write_project(root: Path, size: int) -> Path:
    """A project with ``size`` tools on :data:`SERVERS` servers; returns its directory."""
    docs = synthetic_catalog(size, seed=size)
    per_server: dict[str, list[dict[str, Any]]] = {}
    for i, doc in enumerate(docs):
        tools = per_server.setdefault(f"s{i % SERVERS:02d}", [])
        tools.append(
            {
                "name": f"{doc.server}_{doc.tool}",
                "description": doc.description,
                "inputSchema": dict(doc.input_schema),
            }
        )
    catalogs = root / "catalogs"
    catalogs.mkdir(parents=True)
    tables = []
    for server, tools in per_server.items():
        path = catalogs / f"{server}.json"
        path.write_text(json.dumps({"server": server, "tools": tools}))
        tables.append(
            f"[server.{server}]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps([str(SERVER), '--catalog', str(path)])}\nstartup_timeout = 120"
        )
    (root / "config").mkdir()
    (root / "config" / "mcp.toml").write_text("\n\n".join(tables) + "\n")
    project = root / "project"
    (project / ".caliban").mkdir(parents=True)
    (project / ".git").mkdir()
    return project


def run_once(
    command: Sequence[str], project: Path, env: dict[str, str], lazy: bool
) -> tuple[float, float]:
    """(first request s, whole run s) of one ``caliban -p``."""
    (project / ".caliban" / "config.toml").write_text(
        f"[tools]\nlazy_mcp = {'true' if lazy else 'false'}\n"
    )
    with FakeModelServer([{"text": "Done."}]) as server:
        started = time.time()
        done = subprocess.run(
            [*command, "-p", PROMPT],
            cwd=project,
            env={**env, "ANTHROPIC_BASE_URL": server.url},
            capture_output=True,
            text=True,
            timeout=600,
        )
        wall = time.time() - started
        if done.returncode != 0:
            raise SystemExit(f"caliban -p failed ({done.returncode}): {done.stderr[-2000:]}")
        first = server.requests[0].received_at - started
    return first, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, metavar="DIR", help="an older checkout to compare")
    args = parser.parse_args()

    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    base_env["ANTHROPIC_API_KEY"] = "bench"
    variants: dict[str, tuple[list[str], dict[str, str]]] = {
        "now": ([str(Path(sys.executable).parent / "caliban")], {})
    }
    if args.before is not None:
        variants = {
            "before": ([sys.executable, "-m", "caliban"], {"PYTHONPATH": str(args.before)}),
            "now": ([sys.executable, "-m", "caliban"], {"PYTHONPATH": str(REPO_ROOT)}),
        }
    print(
        f"caliban -p, warm tool-list cache, {SERVERS} servers, instant model; median of "
        f"{args.runs} runs (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
        "at the start)"
    )
    print(f"| tools | mode | {' | '.join(f'{v}: first request / whole run' for v in variants)} |")
    print("|---|---|" + "---|" * len(variants))
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="caliban-catalog-bench-") as tmp:
            root = Path(tmp)
            project = write_project(root, size)
            envs = {
                label: {
                    **base_env,
                    **extra,
                    "CALIBAN_CONFIG_DIR": str(root / "config"),
                    "CALIBAN_STATE_DIR": str(root / f"state-{label}"),
                    "CALIBAN_DATA_DIR": str(root / f"data-{label}"),
                    "CALIBAN_CACHE_DIR": str(root / f"cache-{label}"),
                }
                for label, (_cmd, extra) in variants.items()
            }
            results: dict[tuple[str, bool], list[tuple[float, float]]] = {}
            for label, (command, _extra) in variants.items():
                for lazy in (False, True):
                    run_once(command, project, envs[label], lazy)  # warm-up: caches, .pyc
            for i in range(args.runs):
                order = list(variants.items())
                for label, (command, _extra) in order if i % 2 == 0 else reversed(order):
                    for lazy in (False, True):
                        results.setdefault((label, lazy), []).append(
                            run_once(command, project, envs[label], lazy)
                        )
            for lazy in (False, True):
                cells = []
                for label in variants:
                    runs = results[(label, lazy)]
                    first = statistics.median(r[0] for r in runs)
                    wall = statistics.median(r[1] for r in runs)
                    cells.append(f"{first:.2f} s / {wall:.2f} s")
                mode = "lazy" if lazy else "eager"
                print(f"| {size:,} | {mode} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
