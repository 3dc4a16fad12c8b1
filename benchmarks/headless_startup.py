"""Wall time of a whole ``caliban -p hi`` (OpenAI provider, fake server), for code trees side
by side.

    python benchmarks/headless_startup.py [--runs 20] [--model local] DIR [DIR ...]

Each DIR is a checkout of caliban (e.g. ``git archive main | tar -x -C /tmp/main``); it is
put first on ``PYTHONPATH``. Runs are interleaved so that load on the machine hits every tree
alike; the first round is a warm-up. Prints the median and the minimum per tree. The default
model, ``local``, is one caliban's table does not know, so a tree that asks the server for
its context window does so.
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

FAKE_SERVER = Path(__file__).resolve().parent.parent / "tests" / "fake_model_server.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--model", default="local")
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp())
    script = scratch / "steps.json"
    script.write_text(json.dumps([{"text": "ok", "repeat": (args.runs + 1) * len(args.trees)}]))
    server = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    project = scratch / "project"
    project.mkdir()
    times: dict[Path, list[float]] = {tree: [] for tree in args.trees}
    try:
        for round_ in range(args.runs + 1):
            for tree in args.trees:
                env = {
                    **{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")},
                    "OPENAI_BASE_URL": f"{url}/v1",
                    "OPENAI_API_KEY": "x",
                    "PYTHONPATH": str(tree.resolve()),
                    **{f"CALIBAN_{d}_DIR": tempfile.mkdtemp() for d in ("CONFIG", "STATE", "DATA")},
                }
                started = time.perf_counter()
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "caliban",
                        "-p",
                        "hi",
                        "--provider",
                        "openai",
                        "--model",
                        args.model,
                    ],
                    cwd=project,
                    env=env,
                    capture_output=True,
                    check=True,
                )
                if round_:
                    times[tree].append(time.perf_counter() - started)
    finally:
        server.terminate()
    for tree, seconds in times.items():
        print(
            f"{tree}: median {statistics.median(seconds) * 1000:.0f} ms, "
            f"min {min(seconds) * 1000:.0f} ms ({args.runs} runs)"
        )


if __name__ == "__main__":
    main()
