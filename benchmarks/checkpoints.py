"""Checkpoint cost: per-prompt snapshot time in a large repository, and storage growth.

Run: ``python benchmarks/checkpoints.py [--files 10000] [--mb 200] [--prompts 100]``

Builds a git repository of ``--files`` files totalling ``--mb`` MB (source-like text, a few
larger files), commits it, then plays a ``--prompts``-prompt session: before each prompt a
checkpoint (``before_prompt``), a prompt's worth of edits (a few files changed, one created,
now and then one deleted; every tenth prompt a "build" touches 200 files), then the after
snapshot. Printed: the first checkpoint (it hashes everything), the per-prompt checkpoint
time (median, p90, max) when little changed and on the build prompts, the after-snapshot
time, a rewind across the whole session, and the store's size after the first checkpoint and
at the end (growth per prompt). Everything runs in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from caliban.checkpoints import Checkpoints


def make_repository(root: Path, files: int, megabytes: int, rng: random.Random) -> None:
    line = "    value = compute(alpha, beta, gamma)  # a line of ordinary source code\n"
    big = max(1, files // 500)  # a few larger files carry a share of the bytes
    per_small = (megabytes * 2**20 // 2) // files
    per_big = (megabytes * 2**20 // 2) // big
    for n in range(files):
        folder = root / f"pkg{n % 50}" / f"mod{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        size = per_small + (per_big if n < big else 0)
        body = f"# file {n} {rng.random()}\n" + line * (size // len(line))
        (folder / f"f{n}.py").write_text(body)
    (root / ".gitignore").write_text("build/\n*.pyc\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "init"], check=True, env=env)


def edit(root: Path, rng: random.Random, prompt: int, every: list[Path]) -> None:
    """One prompt's changes: a few files edited, one created, sometimes one deleted."""
    for path in rng.sample(every, 3):
        if path.exists():
            with path.open("a") as file:
                file.write(f"# edited by prompt {prompt}\n")
    new = root / "pkg0" / f"new_{prompt}.py"
    new.write_text(f"print({prompt})\n" * 20)
    if prompt % 7 == 3:
        victim = rng.choice(every)
        victim.unlink(missing_ok=True)
    if prompt % 10 == 9:  # a build or a formatter: many files touched at once
        for path in rng.sample(every, 200):
            if path.exists():
                path.write_text(path.read_text() + "\n")
        (root / "build").mkdir(exist_ok=True)
        (root / "build" / f"out{prompt}.bin").write_bytes(os.urandom(2**20))  # ignored


def cpu() -> float:
    """CPU seconds used so far by this process and the git processes it waited for: what a
    checkpoint costs, whatever else the machine is busy with."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def spread(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[max(0, int(len(values) * 0.9) - 1)]
    return f"median {ms(statistics.median(values))}, p90 {ms(p90)}, max {ms(values[-1])}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--prompts", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(25)
    with tempfile.TemporaryDirectory(prefix="caliban-bench-") as tmp:
        root = Path(tmp) / "repo"
        os.environ["CALIBAN_STATE_DIR"] = str(Path(tmp) / "state")
        started = time.perf_counter()
        make_repository(root, args.files, args.mb, rng)
        every = sorted(root.rglob("f*.py"))
        size = sum(p.stat().st_size for p in every) / 2**20
        built = time.perf_counter() - started
        print(f"repository: {len(every):,} files, {size:.0f} MB ({built:.0f} s to build)")
        checkpoints = Checkpoints(project=root, session_id="bench", warn=print)
        quiet, busy, after, quiet_cpu = [], [], [], []
        first = first_cpu = stored_first = 0.0
        for prompt in range(args.prompts):
            started, started_cpu = time.perf_counter(), cpu()
            await checkpoints.before_prompt(f"m{prompt}", f"prompt {prompt}")
            took = time.perf_counter() - started
            if prompt == 0:
                first, first_cpu = took, cpu() - started_cpu
                stored_first = checkpoints.usage_bytes()
            elif prompt % 10 == 0:  # the checkpoint right after a build prompt
                busy.append(took)
            else:
                quiet.append(took)
                quiet_cpu.append(cpu() - started_cpu)
            edit(root, rng, prompt, every)
            started = time.perf_counter()
            await checkpoints.after_prompt(f"m{prompt}")
            after.append(time.perf_counter() - started)
        started, started_cpu = time.perf_counter(), cpu()
        result = await checkpoints.rewind_files("m0")
        rewind, rewind_cpu = time.perf_counter() - started, cpu() - started_cpu
        stored = checkpoints.usage_bytes()
        print(f"first checkpoint (hashes the whole tree): {ms(first)} ({ms(first_cpu)} of CPU)")
        print(f"checkpoint before a prompt, little changed ({len(quiet)}): {spread(quiet)}")
        print(f"  its CPU time (caliban and git): {spread(quiet_cpu)}")
        if busy:
            print(f"checkpoint after a 200-file build ({len(busy)}): {spread(busy)}")
        print(f"snapshot after each prompt ({len(after)}): {spread(after)}")
        print(
            f"rewind of the whole session ({len(result.changes)} files): {ms(rewind)} "
            f"({ms(rewind_cpu)} of CPU)"
        )
        growth = (stored - stored_first) / max(1, args.prompts - 1) / 1024
        print(
            f"store: {stored_first / 2**20:.1f} MB after the first checkpoint, "
            f"{stored / 2**20:.1f} MB after {args.prompts} prompts ({growth:.0f} KB per prompt)"
        )


if __name__ == "__main__":
    asyncio.run(main())
