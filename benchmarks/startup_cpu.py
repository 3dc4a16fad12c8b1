"""CPU (user + system) of caliban's start-up paths, for code trees side by side.

    python benchmarks/startup_cpu.py [--runs 20] [--only NAME,...] [DIR ...]

Each DIR is a checkout of caliban (e.g. ``git archive main | tar -x -C /tmp/main``; default:
this one), put first on ``PYTHONPATH`` and compiled to bytecode first, as a user's install
leaves it. Runs are interleaved so that load on the machine hits every tree alike, after one
warm-up round. Per path and tree it prints the median CPU seconds of the whole process (as
``/usr/bin/time -f %U+%S`` counts them), which a busy machine disturbs far less than wall
time. The paths, against one local fake model server (tests/fake_model_server.py) answering
"ok", in a project and a home of their own, no MCP server:

* ``--version``, ``--help``;
* ``-p``: ``caliban -p "say ok"`` (Anthropic), ``-p stream-json`` (``--output-format
  stream-json --verbose``), ``-p openai`` (``--provider openai``);
* ``mcp list``;
* ``repl``: the interactive session in a pseudo-terminal until its prompt is drawn (the
  process's CPU at that moment; then Ctrl-D).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_model_server import FakeModelServer  # noqa: E402

PROMPT = "say ok"
COMMANDS: dict[str, list[str]] = {
    "--version": ["--version"],
    "--help": ["--help"],
    "-p": ["-p", PROMPT],
    "-p stream-json": ["-p", PROMPT, "--output-format", "stream-json", "--verbose"],
    "-p openai": ["-p", PROMPT, "--provider", "openai", "--model", "gpt-4o"],
    "mcp list": ["mcp", "list"],
}
REPL = "repl"


def _environment(tree: Path, home: Path, url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "CALIBAN_", "CLAUDE_"))
    }
    env.update(
        PYTHONPATH=str(tree),
        HOME=str(home),
        ANTHROPIC_API_KEY="x",
        ANTHROPIC_BASE_URL=url,
        OPENAI_API_KEY="x",
        OPENAI_BASE_URL=f"{url}/v1",
        TERM="xterm-256color",
        **{f"CALIBAN_{d}_DIR": str(home / d.lower()) for d in ("CONFIG", "STATE", "DATA", "CACHE")},
    )
    return env


def cpu_of_command(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU seconds of ``python -m caliban ARGS`` run to completion."""
    process = subprocess.Popen(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"caliban {' '.join(args)} failed ({process.returncode}): {error!r}")
    return usage.ru_utime + usage.ru_stime


def cpu_to_prompt(cwd: Path, env: dict[str, str]) -> float:
    """CPU seconds of the interactive session when its prompt is drawn."""
    import pexpect

    child = pexpect.spawn(
        sys.executable,
        ["-m", "caliban"],
        cwd=str(cwd),
        env=env,
        dimensions=(40, 120),
        encoding="utf-8",
    )
    try:
        child.expect("─", timeout=60)  # the rule above the prompt, then the prompt
        child.expect(">", timeout=60)
        with open(f"/proc/{child.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", help=f"comma-separated paths of: {', '.join([*COMMANDS, REPL])}")
    parser.add_argument("trees", nargs="*", type=Path, default=[ROOT])
    args = parser.parse_args()
    names = args.only.split(",") if args.only else [*COMMANDS, REPL]
    unknown = set(names) - {*COMMANDS, REPL}
    if unknown:
        parser.error(f"unknown paths: {', '.join(sorted(unknown))}")
    trees = [tree.resolve() for tree in args.trees]
    for tree in trees:
        compileall.compile_dir(tree / "caliban", quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="caliban-startup-cpu-"))
    project = scratch / "project"
    (project / ".git").mkdir(parents=True)
    cpu: dict[tuple[str, Path], list[float]] = {(n, t): [] for n in names for t in trees}
    requests = (args.runs + 1) * len(trees) * len(names)
    # The REPL may ask the endpoint for the model's context window, and leave before it answers.
    probes = {"GET /v1/models": {"data": []}, "GET /props": {}, "GET /api/ps": {"models": []}}
    with FakeModelServer([{"text": "ok"}] * requests, endpoints=probes) as server:
        # The REPL connects ahead of its first request and leaves before sending one.
        server._httpd.handle_error = lambda *_: None  # type: ignore[method-assign]
        envs = {
            tree: _environment(tree, scratch / f"home{i}", server.url)
            for i, tree in enumerate(trees)
        }
        for round_ in range(args.runs + 1):
            for name in names:
                for tree in trees:
                    measure: Callable[[], float] = (
                        (lambda: cpu_to_prompt(project, envs[tree]))  # noqa: B023
                        if name == REPL
                        else (lambda: cpu_of_command(COMMANDS[name], project, envs[tree]))  # noqa: B023
                    )
                    seconds = measure()
                    if round_:
                        cpu[name, tree].append(seconds)
    width = max(len(n) for n in names)
    print(f"median CPU (user+sys) of {args.runs} runs, seconds")
    for name in names:
        cells = "  ".join(f"{statistics.median(cpu[name, tree]):6.3f}" for tree in trees)
        print(f"{name:<{width}}  {cells}")
    if len(trees) > 1:
        print("columns: " + "  ".join(str(tree) for tree in trees))


if __name__ == "__main__":
    main()
