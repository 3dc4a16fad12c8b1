"""What a Bash line does to files, known before it runs: the files its redirections read
and write, resolved against where it runs and following its ``cd`` s — or why that cannot be
known (:class:`LineEffects`). The permission policy, the sandbox and checkpoints read these
same facts."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import assert_never

from caliban.shell.commands import CD, cd_argument, unwrap_builtins
from caliban.shell.git import discover, mentions_git, repositories
from caliban.shell.values import (
    Analysis,
    Apart,
    Both,
    Choice,
    Flow,
    Loop,
    Negated,
    NotUnderstood,
    RedirectKind,
    Run,
    Series,
    SimpleCommand,
    Understood,
)
from caliban.shell.words import Unclear
from caliban.util.fsutil import resolved


@dataclass(frozen=True, kw_only=True, slots=True)
class LineEffects:
    """The files a command line's redirections read and write (absolute, symlinks followed),
    or why they cannot be known."""

    reads: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()
    repositories: tuple[Path, ...] = ()
    """Git directories its ``git`` commands may use that are not a ``.git`` directory — a
    bare repository git finds by its shape, or one ``--git-dir`` names
    (:func:`caliban.shell.git.repositories`): git reads their configuration, which runs
    commands."""
    unknown: str | None = None
    """Why the files cannot be known: the line is not understood, or a redirection goes
    through a name only the shell's own process could resolve. ``reads``, ``writes`` and
    ``repositories`` are then empty and say nothing."""


def line_effects(analysis: Analysis, *, cwd: Path, home: Path | None = None) -> LineEffects:
    """What ``analysis`` reads and writes through its redirections, and the repositories its
    git commands use, when it starts in ``cwd``."""
    if isinstance(analysis, NotUnderstood):
        return LineEffects(unknown=analysis.reason)
    if not any(_touches_files(command) for command in analysis.commands):
        return LineEffects()  # nothing to place: no redirection to a file, no git command
    home = home if home is not None else Path.home()
    places = command_places(analysis, str(cwd), str(home))
    try:
        return LineEffects(
            reads=_paths(analysis, places, home, "read"),
            writes=_paths(analysis, places, home, "write"),
            repositories=_repositories(analysis, places),
        )
    except UnknownTarget as exc:
        return LineEffects(unknown=str(exc))


def _touches_files(command: SimpleCommand) -> bool:
    """Whether where ``command`` runs matters to :func:`line_effects`: it redirects to or
    from a file, or runs git."""
    files = any(
        redirect.kind in ("read", "write") and not redirect.benign for redirect in command.redirects
    )
    return files or mentions_git(command.argv)


def _repositories(analysis: Understood, places: Sequence[Places]) -> tuple[Path, ...]:
    # Each git command of the line starts discovery from the same few directories: each is
    # looked up once in this decision (nothing is kept for the next, when the file system
    # may have changed).
    discovered: dict[str, str | None] = {}

    def find(start: str) -> str | None:
        if start not in discovered:
            discovered[start] = discover(start)
        return discovered[start]

    found: dict[Path, None] = {}
    for command, where in zip(analysis.commands, places, strict=True):
        for repository in repositories(command.argv, sorted(where, key=str), find):
            if repository is None:
                raise UnknownTarget(
                    "a git command where the working directory, and so the repository git "
                    "finds, cannot be known"
                )
            found[repository] = None
    return tuple(found)


MAX_PLACES = 16
"""More directories than this that a line's ``cd`` s could lead a command to: where it
runs is unknown."""
MAX_ROUNDS = 8
"""A loop whose ``cd`` s still lead somewhere new after this many rounds: where the
commands in and after it run is unknown."""
MAX_STEPS = 20_000
"""Steps of following a line's flow (nested loops repeat their bodies) beyond which where
its commands run is unknown: the time a decision takes stays bounded."""

Place = str | None
"""A directory as bash names it (lexically, symlinks kept), or None: it cannot be known."""
Places = frozenset[Place]
_UNKNOWN: Places = frozenset({None})
_NOWHERE: Places = frozenset()


def chdir(argv: Sequence[str], here: Place, home: str, physical: Callable[[str], str]) -> Places:
    """Every directory a ``cd``/``pushd``/``popd`` that succeeds may lead to from ``here``.

    ``cd NAME`` is taken as ``./NAME``: CDPATH is not consulted (the Bash tool runs with it
    unset, and a line assigning it is not understood). bash's default ``cd -L`` reads ``..``
    lexically, but goes the physical way when the lexical directory does not exist: both
    are places (``physical`` resolves symlinks). With another option (``cd -P``, ``pushd
    -n``), ``cd -``, ``popd`` or ``~user`` the directory is unknown.
    """
    name = argv[0]
    target = cd_argument(argv) if name != "popd" else None
    rest = argv[argv.index(target) + 1 :] if target is not None else ()
    options = argv[1 : argv.index(target)] if target is not None else argv[1:]
    if name == "popd" or rest or any(option not in ("-L", "--") for option in options):
        return _UNKNOWN
    if target is None:
        return frozenset({home}) if name == "cd" else _UNKNOWN  # pushd alone swaps
    if target == "-" or (name == "pushd" and re.fullmatch(r"[-+]\d+", target)):
        return _UNKNOWN
    if target == "~" or target.startswith("~/"):
        base: Place = home
        target = target[2:]
    elif target.startswith("~"):
        return _UNKNOWN
    else:
        base = "/" if target.startswith("/") else here
    if base is None:
        return _UNKNOWN
    joined = os.path.join(base, target)
    lexical = os.path.normpath(joined)
    if ".." not in target.split("/"):
        return frozenset({lexical})
    return frozenset({lexical, physical(joined)})


@dataclass(slots=True)
class _Tracker:
    """Follows a line's flow from where it starts, gathering every directory each simple
    command may start in: a ``cd`` may fail, and one in a child shell (``( … )``, a
    pipeline, ``&``) moves nothing after it."""

    commands: Sequence[SimpleCommand]
    home: str
    physical: Callable[[str], str]
    at: list[set[Place]]
    steps: int = MAX_STEPS

    def run(self, flow: Flow, here: Places) -> tuple[Places, Places]:
        """Where the shell may be after ``flow`` when it succeeded, and when it failed."""
        self.steps -= 1
        if self.steps < 0:
            raise _TooLong
        match flow:
            case Run(index):
                self.at[index] |= here
                inner = unwrap_builtins(self.commands[index].argv)
                if not inner or inner[0] not in CD:
                    return here, here
                moved = frozenset(
                    place
                    for start in here
                    for place in chdir(inner, start, self.home, self.physical)
                )
                return _bounded(moved), here
            case Series(parts):
                ok, failed = here, _NOWHERE
                for part in parts:
                    ok, failed = self.run(part, ok | failed)
                return ok, failed
            case Both(left, operator, right):
                ok, failed = self.run(left, here)
                if operator == "&&":
                    right_ok, right_failed = self.run(right, ok) if ok else (_NOWHERE,) * 2
                    return right_ok, failed | right_failed
                right_ok, right_failed = self.run(right, failed) if failed else (_NOWHERE,) * 2
                return ok | right_ok, right_failed
            case Apart(body):
                self.run(body, here)
                return here, here
            case Negated(body):
                ok, failed = self.run(body, here)
                return failed, ok
            case Choice(condition, then, otherwise):
                ok, failed = self.run(condition, here)
                then_ok, then_failed = self.run(then, ok) if ok else (_NOWHERE,) * 2
                if otherwise is None:  # no branch taken: `if` succeeds
                    return then_ok | failed, then_failed
                else_ok, else_failed = self.run(otherwise, failed) if failed else (_NOWHERE,) * 2
                return then_ok | else_ok, then_failed | else_failed
            case Loop(condition, body, until):
                seen = here
                for _ in range(MAX_ROUNDS):
                    ok, failed = self.run(condition, seen)
                    body_ok, body_failed = self.run(body, failed if until else ok)
                    grown = _bounded(seen | ok | failed | body_ok | body_failed)
                    if grown == seen:
                        break
                    seen = grown
                else:
                    seen = _bounded(seen | _UNKNOWN)
                    self.run(condition, seen)
                    self.run(body, seen)
                # `break` may leave from anywhere in the body: every place seen.
                return seen, seen
            case _:
                assert_never(flow)


class _TooLong(Exception):
    """Following the flow took more than :data:`MAX_STEPS`."""


def _bounded(places: Places) -> Places:
    return places if len(places) <= MAX_PLACES else _UNKNOWN


def command_places(
    analysis: Understood,
    cwd: Place,
    home: str,
    physical: Callable[[str], str] = os.path.realpath,
) -> tuple[Places, ...]:
    """Where each simple command of an understood line may start when the line starts in
    ``cwd`` (None: unknown): every directory the ``cd`` s that may run before it in the
    same shell could lead to, and ``cwd`` itself when they may all fail."""
    tracker = _Tracker(analysis.commands, home, physical, [set() for _ in analysis.commands])
    try:
        tracker.run(analysis.structure, frozenset({cwd}))
    except _TooLong:
        return (_UNKNOWN,) * len(analysis.commands)
    return tuple(frozenset(at) if at else _UNKNOWN for at in tracker.at)


def check_directories(commands: Sequence[SimpleCommand], flow: Flow) -> None:
    """A relative redirection where the working directory cannot be known (after ``cd -``,
    ``popd``, a loop of ``cd`` s) names a file that cannot be known."""
    relative = [
        [
            redirect
            for redirect in command.redirects
            if redirect.kind in ("read", "write")
            and not (redirect.tilde or redirect.target.startswith("/"))
        ]
        for command in commands
    ]
    if not any(relative):
        return  # the directories do not matter: following the line's `cd`s is not needed
    line = Understood(command="", commands=tuple(commands), flow=flow)
    for redirects, places in zip(relative, command_places(line, "/", "/", str), strict=True):
        if redirects and None in places:
            redirect = redirects[0]
            raise Unclear(
                f"a relative redirection ({redirect.operator}{redirect.target}) where the "
                "working directory cannot be known (after `cd -`, `popd`, a loop of `cd`s…)"
            )


def written_paths(analysis: Understood, *, cwd: Path, home: Path | None = None) -> tuple[Path, ...]:
    """The files an understood line's redirections write (``>``, ``>>``, ``&>``…),
    absolute and resolved (symlinks followed), in every directory the line's ``cd`` s could
    lead each command to (:func:`command_places`); ``/dev/null`` and descriptor copies left
    out. Run each through the Write path rules. Raises :class:`UnknownTarget` for a target
    only the shell's process could resolve."""
    home = home if home is not None else Path.home()
    return _paths(analysis, command_places(analysis, str(cwd), str(home)), home, "write")


def read_paths(analysis: Understood, *, cwd: Path, home: Path | None = None) -> tuple[Path, ...]:
    """The files an understood line's ``<`` redirections read, like :func:`written_paths`."""
    home = home if home is not None else Path.home()
    return _paths(analysis, command_places(analysis, str(cwd), str(home)), home, "read")


class UnknownTarget(ValueError):
    """A redirection's file depends on the shell process that opens it (``/proc/self/cwd``,
    ``/dev/fd``): caliban, another process, cannot resolve it for the shell."""


def _shell_target(path: Path) -> Path | None:
    """``path`` resolved (symlinks followed, as :func:`~caliban.util.fsutil.resolved`), or
    None when resolving it goes through caliban's own ``/proc/PID`` entry, as
    ``/proc/self``, ``/proc/thread-self`` and ``/dev/fd`` do: the shell would find its own
    there (its working directory after a ``cd``, its descriptors), not caliban's. Each
    prefix of ``path`` is resolved in turn, from the one before: one ``lstat`` a component
    where there is no symlink (resolving each prefix from ``/`` was quadratic in depth)."""
    own = f"/proc/{os.getpid()}"
    current = path.anchor
    plain = current == os.sep  # `current` holds no symlink: a step resolves only its last part
    exact = path.is_absolute()  # and is what resolving the prefix at once gives
    for part in path.parts[1:]:
        if plain and part == "..":
            current = os.path.dirname(current)
        elif plain and not os.path.islink(step := os.path.join(current, part)):
            current = step
        else:
            current, plain = _physical(os.path.join(current, part))
            exact = exact and plain
        if current == own or current.startswith(own + os.sep):
            return None
    return Path(current) if exact else resolved(path)


def _physical(path: str) -> tuple[str, bool]:
    """``path`` resolved (:func:`~caliban.util.fsutil.resolved`), and whether that left no
    symlink in it: not where a symlink loop made resolving fall back to normalising."""
    try:
        return str(Path(path).resolve()), True
    except (OSError, RuntimeError, ValueError):
        return str(resolved(Path(path))), False


def _paths(
    analysis: Understood,
    places: Sequence[Places],
    home: Path,
    kind: RedirectKind,
) -> tuple[Path, ...]:
    found: dict[Path, None] = {}
    for command, where in zip(analysis.commands, places, strict=True):
        for redirect in command.redirects:
            if redirect.kind != kind or redirect.benign:
                continue
            target = redirect.target
            if redirect.tilde:
                paths = [home / target[2:] if target != "~" else home]
            elif target.startswith("/"):
                paths = [Path(target)]
            else:
                known = sorted(place for place in where if place is not None)
                if len(known) < len(where):
                    raise UnknownTarget(
                        f"a relative redirection ({redirect.operator}{target}) where the "
                        "working directory cannot be known"
                    )
                paths = [Path(place) / target for place in known]
            for path in paths:
                if (resolved_path := _shell_target(path)) is None:
                    raise UnknownTarget(
                        f"a redirection through the shell's own /proc entry "
                        f"({redirect.operator}{target}), which caliban cannot resolve for it"
                    )
                found[resolved_path] = None
    return tuple(found)


__all__ = [
    "MAX_PLACES",
    "MAX_ROUNDS",
    "MAX_STEPS",
    "LineEffects",
    "Place",
    "Places",
    "UnknownTarget",
    "chdir",
    "check_directories",
    "command_places",
    "line_effects",
    "read_paths",
    "written_paths",
]
