"""Start-up benchmarks: how fast caliban answers and how fast its prompt appears.

    python benchmarks/startup.py [--runs 10] [--servers 5]

Measures, with the ``caliban`` console script next to ``sys.executable``:

1. the median wall time of ``caliban --version`` and ``caliban --help`` (subprocesses);
2. which heavy modules ``import caliban.cli.app`` (the parsed command line) pulls in
   (``python -X importtime``): none of anthropic, openai, mcp, prompt_toolkit or tree_sitter
   may load at start-up;
3. :func:`time_to_prompt`: the time from starting ``caliban`` in a pseudo-terminal (pexpect)
   until its prompt is drawn, in a project with five stdio MCP servers configured
   (``tests/mcp_servers/catalog_server.py``, 40 tools each). MCP servers connect in the
   background, so the budget is 500 ms whatever the servers do.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG_SERVER = ROOT / "tests" / "mcp_servers" / "catalog_server.py"
HEAVY = ("anthropic", "openai", "mcp", "prompt_toolkit", "tree_sitter")
PROMPT_BUDGET_S = 0.5


def caliban_exe() -> Path:
    """The installed console script, next to this interpreter."""
    return Path(sys.executable).parent / "caliban"


def median_wall(args: list[str], runs: int) -> float:
    """Median seconds for ``caliban ARGS`` to run to completion."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(caliban_exe()), *args], capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def heavy_imports(module: str = "caliban.cli.app") -> dict[str, bool]:
    """For each heavy package, whether importing ``module`` imports it."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    return {name: name in loaded for name in HEAVY}


def _project(root: Path, servers: int) -> dict[str, str]:
    """A project, ``servers`` MCP servers in the user's mcp.toml (a project's would need the
    folder trusted first), and an environment pointing caliban at them."""
    project = root / "project"
    (project / ".caliban").mkdir(parents=True)
    (project / ".git").mkdir()
    tables = [
        f'[server.catalog{i}]\ncommand = "{sys.executable}"\nargs = ["{CATALOG_SERVER}"]\n'
        for i in range(servers)
    ]
    (root / "config").mkdir()
    (root / "config" / "mcp.toml").write_text("\n".join(tables))
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",  # never called: no prompt is sent
        "CALIBAN_CONFIG_DIR": str(root / "config"),
        "CALIBAN_STATE_DIR": str(root / "state"),
        "CALIBAN_DATA_DIR": str(root / "data"),
        "CALIBAN_CACHE_DIR": str(root / "cache"),
        "TERM": "xterm-256color",
    }
    env.pop("OPENAI_API_KEY", None)
    return env


def time_to_prompt(servers: int = 5, runs: int = 5) -> list[float]:
    """Seconds from spawning ``caliban`` in a pty until the prompt is drawn, per run."""
    import pexpect

    times = []
    with tempfile.TemporaryDirectory() as tmp:
        env = _project(Path(tmp), servers)
        for _ in range(runs):
            started = time.perf_counter()
            child = pexpect.spawn(
                str(caliban_exe()),
                cwd=str(Path(tmp) / "project"),
                env=env,
                dimensions=(40, 120),
                encoding="utf-8",
            )
            try:
                child.expect("─", timeout=10)  # the rule above the prompt, then the prompt
                child.expect(">", timeout=10)
                times.append(time.perf_counter() - started)
                child.sendcontrol("d")
                child.expect(pexpect.EOF, timeout=10)
            finally:
                child.close(force=True)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--servers", type=int, default=5)
    args = parser.parse_args(argv)

    print(f"caliban --version  median {median_wall(['--version'], args.runs) * 1000:6.0f} ms")
    print(f"caliban --help     median {median_wall(['--help'], args.runs) * 1000:6.0f} ms")
    heavy = heavy_imports()
    loaded = [name for name, yes in heavy.items() if yes]
    shown = ", ".join(loaded) if loaded else "none of " + ", ".join(HEAVY)
    print(f"import caliban.cli.app loads: {shown}")
    prompt = time_to_prompt(args.servers, max(3, args.runs // 2))
    median = statistics.median(prompt)
    budget = f"{PROMPT_BUDGET_S * 1000:.0f} ms budget"
    verdict = f"within the {budget}" if median < PROMPT_BUDGET_S else f"OVER the {budget}"
    print(
        f"time to prompt ({args.servers} MCP servers)  median {median * 1000:.0f} ms  "
        f"(runs: {', '.join(f'{t * 1000:.0f}' for t in prompt)})  {verdict}"
    )
    return 0 if median < PROMPT_BUDGET_S and not loaded else 1


if __name__ == "__main__":
    raise SystemExit(main())
