"""Differential fuzz of what a Bash line writes: random lines caliban understands, run in
real bash in a scratch directory, the files they actually wrote compared with the writes
caliban decided on (:func:`caliban.shell.line_effects`). No line may write a file caliban
did not check.

    python benchmarks/shell_fuzz.py [--lines 10000] [--seed 28]

The lines mix what moves the working directory — ``cd`` that succeeds or fails, ``..``
through a symlink, ``~``, absolute paths — with what decides whether it moves this shell:
``&&``/``||``, ``if``/``elif``/``else``, ``while``/``until`` loops, ``( … )``, ``{ …; }``,
pipelines, background jobs, and redirections on commands and on groups. Each line runs
through :mod:`caliban.exec` with ``HOME`` in the scratch directory, whose start directory is
deep enough that no ``..`` leaves it. ``tests/test_shell_fuzz.py`` runs a small seeded
campaign in the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from caliban.exec import Command, run
from caliban.shell import Understood, analyze, line_effects

BASH = shutil.which("bash") or "/bin/bash"
START = Path("a/b/c/d/e/f/g/work")
"""The start directory, below the scratch root: more levels than a line climbs."""
MOST_UPS = 6
"""How many levels a line's ``cd ..`` s may climb in all."""
TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Scratch:
    """One scratch tree: a home, a directory outside the project, the start directory with
    subdirectories, a file, and a symlink out of it."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def start(self) -> Path:
        return self.root / START

    def make(self) -> None:
        for directory in (self.home, self.outside / "deep", self.start / "sub" / "deep"):
            directory.mkdir(parents=True)
        (self.start / "f").write_text("x\n")
        (self.start / "sub" / "f").write_text("x\n")
        (self.start / "link").symlink_to(self.outside / "deep")

    def files(self) -> dict[Path, tuple[int, int, int]]:
        """Every regular file: its identity, modification time and size."""
        found = {}
        for directory, _, names in os.walk(self.root):
            for name in names:
                path = Path(directory, name)
                info = path.lstat()
                if path.is_file() and not path.is_symlink():
                    found[path] = (info.st_ino, info.st_mtime_ns, info.st_size)
        return found


class Lines:
    """Random lines of cds, ordinary commands and redirections in bash's control flow."""

    def __init__(self, rng: random.Random, scratch: Scratch) -> None:
        self.rng = rng
        self.scratch = scratch
        self.ups = 0

    def line(self) -> str:
        self.ups = 0
        return self.statements(depth=0, count=self.rng.randint(1, 3))

    def statements(self, depth: int, count: int, in_loop: bool = False) -> str:
        text = self.statement(depth, in_loop)
        for _ in range(count - 1):
            text += self.rng.choice(["; ", "; ", "\n", " & "]) + self.statement(depth, in_loop)
        return text + (" &" if self.rng.random() < 0.1 else "")

    def statement(self, depth: int, in_loop: bool) -> str:
        rng = self.rng
        choice = rng.randrange(14) if depth < 2 else 0
        inner = depth + 1
        if choice <= 4:
            return self.simple(in_loop)
        if choice == 5:
            return f"( {self.statements(inner, rng.randint(1, 2), in_loop)} )" + self.tail()
        if choice == 6:
            body = self.statements(inner, rng.randint(1, 2), in_loop)
            return "{ " + _ended(body) + "}" + self.tail()
        if choice == 7:
            return f"{self.statement(inner, in_loop)} | {self.statement(inner, in_loop)}"
        if choice == 8:
            joiner = rng.choice([" && ", " || "])
            return f"{self.statement(inner, in_loop)}{joiner}{self.statement(inner, in_loop)}"
        if choice == 9:
            return f"! {self.simple(in_loop)}"
        if choice == 10:
            text = f"if {self.simple(in_loop)}; then {_ended(self.statements(inner, 1, in_loop))}"
            if rng.random() < 0.4:
                text += f"elif {self.simple(in_loop)}; then "
                text += _ended(self.statements(inner, 1, in_loop))
            if rng.random() < 0.5:
                text += f"else {_ended(self.statements(inner, 1, in_loop))}"
            return text + "fi" + self.tail()
        keyword, condition = rng.choice(
            [
                ("while", "false"),
                ("while", "mkdir stop 2>/dev/null"),
                ("while", "cd sub 2>/dev/null"),
                ("while", "cd deep 2>/dev/null"),
                ("until", "true"),
                ("until", "! mkdir stop 2>/dev/null"),
            ]
        )
        body = self.statements(inner, rng.randint(1, 2), in_loop=True)
        return f"{keyword} {condition}; do {_ended(body)}done" + self.tail()

    def tail(self) -> str:
        return f" {self.redirect()}" if self.rng.random() < 0.25 else ""

    def simple(self, in_loop: bool) -> str:
        rng = self.rng
        kind = rng.randrange(10)
        if kind < 4:
            command = self.cd(in_loop)
        elif kind < 8:
            command = rng.choice(["echo x", "true", "false", ":", "printf y", "echo"])
        else:
            command = rng.choice(["mkdir -p new", "mkdir stop", "test -d sub", "[ -e f ]"])
            command += " 2>/dev/null"
        redirects = rng.choice([0, 1, 1, 2]) if kind >= 4 else rng.choice([0, 0, 0, 1])
        return " ".join([command, *(self.redirect() for _ in range(redirects))])

    def cd(self, in_loop: bool) -> str:
        rng = self.rng
        targets = ["~", "", str(self.scratch.outside), str(self.scratch.start / "sub")]
        if not in_loop or rng.random() < 0.2:  # a relative cd in a loop is not understood
            targets += ["sub", "deep", "sub/deep", "nowhere", "link", "new", "stop"]
        if not in_loop and self.ups < MOST_UPS - 2:
            targets += ["..", "../..", "link/..", "link/../sub", "sub/../deep", "~/../home"]
        target = rng.choice(targets)
        self.ups += target.split("/").count("..")
        name = rng.choice(["cd", "cd", "cd", "pushd", "command cd", "builtin cd", "cd --"])
        quiet = " >/dev/null 2>&1" if name == "pushd" else rng.choice(["", " 2>/dev/null"])
        return f"{name} {target}".rstrip() + quiet

    def redirect(self) -> str:
        rng = self.rng
        operator = rng.choice([">", ">>", ">|", "2>", "&>", "&>>", "1>"])
        target = rng.choice(
            [
                "f",
                "g",
                "sub/f",
                "deep/g",
                "../f",
                "../../g",
                "new/f",
                "link/f",
                "link/../h",
                "~/f",
                "~/sub-f",
                str(self.scratch.outside / "f"),
            ]
        )
        return operator + target


def _ended(statements: str) -> str:
    """``statements`` ready for a keyword after them (``&`` already ends one)."""
    return statements + (" " if statements.endswith("&") else "; ")


@dataclass(kw_only=True)
class Outcome:
    lines: int = 0
    understood: int = 0
    ran: int = 0
    timed_out: int = 0
    unchecked: list[str] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        self.lines += other.lines
        self.understood += other.understood
        self.ran += other.ran
        self.timed_out += other.timed_out
        self.unchecked += other.unchecked


def unchecked_writes(line: str, scratch: Scratch) -> Outcome:
    """Run ``line`` in ``scratch`` (made fresh) if caliban understands it and knows what it
    writes: the files it wrote that caliban's decision did not cover."""
    outcome = Outcome(lines=1)
    analysis = analyze(line)
    if not isinstance(analysis, Understood):
        return outcome
    scratch.make()
    effects = line_effects(analysis, cwd=scratch.start, home=scratch.home)
    if effects.unknown is not None:
        return outcome
    outcome.understood = 1
    before = scratch.files()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch.home)}
    # `wait`: background jobs finish before the files are compared.
    command = Command(argv=(BASH, "-c", line + "\nwait"), cwd=scratch.start, env=env)
    result = run(command, timeout=TIMEOUT_S, max_output=4096)
    if result.timed_out:
        outcome.timed_out = 1
        return outcome
    outcome.ran = 1
    after = scratch.files()
    checked = set(effects.writes)
    for path, state in after.items():
        if before.get(path) != state and Path(os.path.realpath(path)) not in checked:
            outcome.unchecked.append(f"{line!r} wrote {path.relative_to(scratch.root)}")
    return outcome


def campaign(lines: int, seed: int, workdir: Path) -> Iterator[Outcome]:
    """``lines`` random lines (seeded), each run in a fresh scratch tree under ``workdir``."""
    rng = random.Random(seed)
    for number in range(lines):
        scratch = Scratch(workdir / f"s{number}")
        text = Lines(rng, scratch).line()
        try:
            yield unchecked_writes(text, scratch)
        finally:
            shutil.rmtree(scratch.root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args(argv)
    total = Outcome()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="caliban-shell-fuzz-") as workdir:
        for outcome in campaign(args.lines, args.seed, Path(workdir)):
            total.add(outcome)
    took = time.perf_counter() - started
    for problem in total.unchecked[:20]:
        print(problem)
    print(
        f"{total.lines:,} lines (seed {args.seed}): {total.understood:,} understood with known "
        f"writes, {total.ran:,} ran in bash ({total.timed_out} timed out), "
        f"{len(total.unchecked)} unchecked writes, in {took:.0f} s"
    )
    return 1 if total.unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
