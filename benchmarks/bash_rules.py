"""Bash rule matching: how long a permission decision on a command line takes.

    python benchmarks/bash_rules.py [--runs 2000]

Measures, each decision parsing its line afresh (as a Bash call is bound, then decided),
in a scratch git repository (its discovery and the protected-path checks touch the real
file system, as in a session):

1. the first decision in a fresh interpreter (imports tree-sitter and loads the grammar);
2. per typical command: the line's effects (``caliban.calls.effects.command_effects``: the
   analysis, the files its redirections touch, the repository its git commands use) and
   ``caliban.permissions.decide`` for Bash with a realistic rule set (allow, ask and deny
   rules), median and 95th percentile — the budget is 1 ms;
3. bounded worst cases (very long and deeply nested lines): one decision each.

Prints the load average it ran under. Exits non-zero when a typical command's median is
over budget.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from caliban.calls.effects import command_effects
from caliban.permissions.policy import decide
from caliban.permissions.rules import PermissionRules
from caliban.shell import analyze
from caliban.tools.base import BUILTIN

BUDGET_S = 0.001
ROOT = Path(tempfile.gettempdir()) / f"caliban-bench-project-{os.getpid()}"
"""The project the lines run in: a git repository with the directories they name."""
RULES = PermissionRules.parse(
    allow=[
        "Bash(git status*)",
        "Bash(git diff:*)",
        "Bash(git log:*)",
        "Bash(npm test:*)",
        "Bash(npm run lint:*)",
        "Bash(ls*)",
        "Bash(head*)",
        "Bash(tail*)",
        "Bash(grep *)",
        "Bash(pytest*)",
    ],
    ask=["Bash(git push*)"],
    deny=["Bash(rm -rf *)", "Bash(curl *)", "Bash(sudo *)"],
)
TYPICAL = [
    "git status --short",
    "ls -la src/",
    "git diff --stat HEAD~1 | head -50",
    "npm test -- --watch=false 2>&1 | tail -20",
    "pytest tests/test_x.py -q -k 'not slow' > /tmp/out.log 2>&1",
    'git add -A && git commit -m "fix: handle empty input (#12)" && git push origin main',
    "grep -rn 'def main' --include='*.py' . | head -20",
    "cd sub && npm run lint -- --fix; echo done",
]
WORST = {
    "80k-character line": "echo " + "a " * 40_000,
    "5,000 nested subshells": "(" * 5000 + "rm x" + ")" * 5000,
    "5,000 chained &&": "a && " * 5000 + "rm -rf x",
    "2,000 nested $(…)": "echo " + '"$(' * 2000 + "rm x" + ')"' * 2000,
}


def decide_bash(command: str) -> str:
    decision = decide(
        "Bash",
        command,
        command_effects(analyze(command), ROOT),
        read_only=False,
        origin=BUILTIN,
        mode="default",
        rules=RULES,
        project_root=ROOT,
    )
    return decision.behavior


def timed(command: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        decide_bash(command)
        times.append(time.perf_counter() - started)
    return times


def make_project() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    for directory in ("src", "sub", "tests"):
        (ROOT / directory).mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ROOT)], check=True)


def first_decision() -> float:
    """Seconds for the first Bash decision in a fresh interpreter (lazy imports included)."""
    code = (
        "import time; from pathlib import Path; "
        "from caliban.calls.effects import command_effects; "
        "from caliban.permissions.policy import decide; "
        "from caliban.permissions.rules import PermissionRules; "
        "from caliban.shell import analyze; "
        "from caliban.tools.base import BUILTIN; "
        "r = PermissionRules.parse(allow=['Bash(git status*)']); t = time.perf_counter(); "
        "e = command_effects(analyze('git status'), Path('/p')); "
        "decide('Bash', 'git status', e, read_only=False, origin=BUILTIN, mode='default', "
        "rules=r, project_root=Path('/p')); "
        "print(time.perf_counter() - t)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return float(result.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args(argv)

    make_project()
    try:
        return run_all(args.runs)
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)


def run_all(runs: int) -> int:
    print(
        f"first decision in a fresh process (loads tree-sitter): {first_decision() * 1000:.1f} ms"
    )
    decide_bash("warm up")
    worst_median = 0.0
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"decide() for Bash, parse included, {runs} runs each (budget 1 ms), load {load}:")
    for command in TYPICAL:
        times = sorted(timed(command, runs))
        median = statistics.median(times)
        p95 = times[int(len(times) * 0.95)]
        worst_median = max(worst_median, median)
        shown = command if len(command) <= 60 else command[:59] + "…"
        print(
            f"  median {median * 1e6:6.0f} µs  p95 {p95 * 1e6:6.0f} µs  "
            f"{decide_bash(command):5}  {shown}"
        )
    print("bounded worst cases (one decision each):")
    for name, command in WORST.items():
        [took] = timed(command, 1)
        print(f"  {took * 1000:6.0f} ms  {decide_bash(command):5}  {name}")
    verdict = "within" if worst_median < BUDGET_S else "OVER"
    print(f"slowest typical median {worst_median * 1e6:.0f} µs: {verdict} the 1 ms budget")
    return 0 if worst_median < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
