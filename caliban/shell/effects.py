"""What a Bash line does to files, known before it runs: the files its redirections read
and write, resolved against where it runs and following its ``cd`` s — or why that cannot be
known (:class:`LineEffects`). The permission policy, the sandbox and checkpoints read these
same facts."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from caliban.shell.commands import CD, cd_argument, unwrap_builtins
from caliban.shell.values import Analysis, NotUnderstood, RedirectKind, SimpleCommand, Understood
from caliban.shell.words import Unclear
from caliban.util.fsutil import resolved


@dataclass(frozen=True, kw_only=True, slots=True)
class LineEffects:
    """The files a command line's redirections read and write (absolute, symlinks followed),
    or why they cannot be known."""

    reads: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()
    unknown: str | None = None
    """Why the files cannot be known: the line is not understood, or a redirection goes
    through a name only the shell's own process could resolve. ``reads`` and ``writes``
    are then empty and say nothing."""


def line_effects(analysis: Analysis, *, cwd: Path, home: Path | None = None) -> LineEffects:
    """What ``analysis`` reads and writes through its redirections when it starts in ``cwd``."""
    if isinstance(analysis, NotUnderstood):
        return LineEffects(unknown=analysis.reason)
    try:
        return LineEffects(
            reads=read_paths(analysis, cwd=cwd, home=home),
            writes=written_paths(analysis, cwd=cwd, home=home),
        )
    except UnknownTarget as exc:
        return LineEffects(unknown=str(exc))


def chdir(argv: Sequence[str], cwd: Path | None, home: Path) -> Path | None:
    """The working directory after a ``cd``/``pushd``/``popd`` (None: cannot be known).

    ``cd NAME`` is taken as ``./NAME``: CDPATH is not consulted (the Bash tool runs with it
    unset). ``..`` is read as bash's default ``cd -L`` reads it, lexically; with another
    option (``cd -P`` follows symlinks first, ``pushd -n`` does not move) the directory
    is unknown.
    """
    name = argv[0]
    target = cd_argument(argv) if name != "popd" else None
    rest = argv[argv.index(target) + 1 :] if target is not None else ()
    options = argv[1 : argv.index(target)] if target is not None else argv[1:]
    if name == "popd" or rest or any(option not in ("-L", "--") for option in options):
        return None
    if target is None:
        return home if name == "cd" else None  # pushd alone swaps with an unknown dir
    if target == "-" or (name == "pushd" and re.fullmatch(r"[-+]\d+", target)):
        return None
    if target == "~" or target.startswith("~/"):
        return Path(os.path.normpath(home / target[2:]))
    if target.startswith("~"):
        return None
    if target.startswith("/"):
        return Path(os.path.normpath(target))
    return None if cwd is None else Path(os.path.normpath(cwd / target))


def check_directories(commands: Sequence[SimpleCommand]) -> None:
    """After a ``cd`` whose directory cannot be known (``cd -``, ``popd``), a relative
    redirection's file cannot be known either."""
    cwd: Path | None = Path("/")
    for command in commands:
        for redirect in command.redirects:
            relative = not (redirect.tilde or redirect.target.startswith("/"))
            if redirect.kind in ("read", "write") and relative and cwd is None:
                raise Unclear(
                    f"a relative redirection ({redirect.operator}{redirect.target}) after a "
                    "`cd` whose directory cannot be known"
                )
        inner = unwrap_builtins(command.argv)
        if inner and inner[0] in CD:
            cwd = chdir(inner, cwd, Path("/home"))


def written_paths(analysis: Understood, *, cwd: Path, home: Path | None = None) -> tuple[Path, ...]:
    """The files an understood line's redirections write (``>``, ``>>``, ``&>``…),
    absolute and resolved (symlinks followed), following ``cd`` through the line;
    ``/dev/null`` and descriptor copies left out. Run each through the Write path rules.
    Raises :class:`UnknownTarget` for a target only the shell's process could resolve."""
    return _paths(analysis, cwd, home, "write")


def read_paths(analysis: Understood, *, cwd: Path, home: Path | None = None) -> tuple[Path, ...]:
    """The files an understood line's ``<`` redirections read, like :func:`written_paths`."""
    return _paths(analysis, cwd, home, "read")


class UnknownTarget(ValueError):
    """A redirection's file depends on the shell process that opens it (``/proc/self/cwd``,
    ``/dev/fd``): caliban, another process, cannot resolve it for the shell."""


def _through_this_process(path: Path) -> bool:
    """Whether resolving ``path`` goes through caliban's own ``/proc/PID`` entry, as
    ``/proc/self``, ``/proc/thread-self`` and ``/dev/fd`` do: the shell would find its own
    there (its working directory after a ``cd``, its descriptors), not caliban's."""
    own = Path(f"/proc/{os.getpid()}")
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = resolved(current / part)
        if current == own or own in current.parents:
            return True
    return False


def _paths(
    analysis: Understood, cwd: Path, home: Path | None, kind: RedirectKind
) -> tuple[Path, ...]:
    home = home if home is not None else Path.home()
    found: dict[Path, None] = {}
    current: Path | None = cwd
    for command in analysis.commands:
        for redirect in command.redirects:
            if redirect.kind != kind or redirect.benign:
                continue
            target = redirect.target
            if redirect.tilde:
                path = home / target[2:] if target != "~" else home
            elif target.startswith("/"):
                path = Path(target)
            elif current is None:  # pragma: no cover - analyze() refuses this line
                raise ValueError(f"cannot resolve {target!r} after an unknown cd")
            else:
                path = current / target
            if _through_this_process(path):
                raise UnknownTarget(
                    f"a redirection through the shell's own /proc entry "
                    f"({redirect.operator}{target}), which caliban cannot resolve for it"
                )
            found[resolved(path)] = None
        inner = unwrap_builtins(command.argv)
        if inner and inner[0] in CD:
            current = chdir(inner, current, home)
    return tuple(found)


__all__ = [
    "LineEffects",
    "UnknownTarget",
    "chdir",
    "check_directories",
    "line_effects",
    "read_paths",
    "written_paths",
]
