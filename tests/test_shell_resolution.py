"""How a line's redirection targets are resolved, fast, against the plain definition: a
target goes through the shell's own ``/proc`` entry when some prefix of it, each resolved
in turn, is caliban's ``/proc/PID``; otherwise it is the path resolved. The fast walk
resolves each component once; here it must agree with the plain one on paths made of
symlinks, loops, ``..``, ``//``, ``/proc/self`` and ``/dev/fd``."""

from __future__ import annotations

import os
import random
from pathlib import Path

from caliban.shell import analyze, line_effects
from caliban.shell.effects import _shell_target
from caliban.util.fsutil import resolved


def _plain(path: Path) -> bool:
    own = Path(f"/proc/{os.getpid()}")
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = resolved(current / part)
        if current == own or own in current.parents:
            return True
    return False


def _scratch(root: Path) -> list[str]:
    (root / "d" / "e").mkdir(parents=True)
    (root / "f").write_text("x")
    links = {
        "up": "..",
        "loop1": "loop2",
        "loop2": "loop1",
        "self": "/proc/self",
        "thread": "/proc/thread-self",
        "fd": "/dev/fd",
        "abs": str(root / "d"),
        "dangling": "nowhere/x",
        "rel": "d/e",
        "proc": "/proc",
        "file": "f",
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    (root / "d" / "back").symlink_to("../up")
    return [*links, "..", "d", "e", "f", "back", "cwd", "x", "root", "1", str(os.getpid())]


def test_the_fast_walk_agrees_with_resolving_every_prefix(tmp_path: Path) -> None:
    parts = _scratch(tmp_path)
    rng = random.Random(28)
    through = 0
    for _ in range(600):
        names = [rng.choice(parts) for _ in range(rng.randint(1, 6))]
        top = rng.choices([tmp_path, Path("/"), Path("//")], weights=[8, 1, 1])[0]
        path = top.joinpath(*names)
        found = _shell_target(path)
        if _plain(path):
            assert found is None, path
            through += 1
        else:
            assert found == resolved(path), path
    assert through > 20  # not vacuous: many go through /proc/self or /dev/fd


def test_a_deep_target_through_a_symlink_is_resolved(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*"abcdefghijklmnopqrst")
    deep.mkdir(parents=True)
    (deep / "link").symlink_to(tmp_path / "a")
    line = analyze("echo x > link/out && echo y >> out")
    assert line_effects(line, cwd=deep).writes == (tmp_path / "a" / "out", deep / "out")
