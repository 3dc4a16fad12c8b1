"""Which repository a ``git`` command would use — git's own discovery, read before it runs.

git reads the configuration of the repository it finds, and that configuration runs
commands (``core.fsmonitor``, ``core.pager``, hooks…). Walking up from where it starts, git
takes the first directory holding a ``.git`` (a directory, or a file naming one), or that
*is* a repository by its shape — ``HEAD``, ``objects/`` and ``refs/``: a bare repository,
which a cloned project can commit and a model can write without touching any ``.git``.
:func:`repositories` finds, for a simple command, the git directories it may use that are
not a ``.git`` directory; the permission policy asks before a command uses one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from caliban.shell.commands import unwrap_builtins, wrapped

_OPTIONS_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def repositories(
    argv: Sequence[str],
    places: Iterable[str | None],
    find: Callable[[str], str | None] | None = None,
) -> Iterator[Path | None]:
    """The git directories a command (``git …``, or ``git`` after a wrapper) may use, when it
    starts in any of ``places``, that are not inside a ``.git`` directory: a bare repository
    git discovers by its shape, or one ``--git-dir`` or a ``.git`` file names. None for a
    place that is not known (None): what git would find there cannot be known. ``find`` is
    :func:`discover`, or a memo of it for one decision."""
    if not mentions_git(argv):
        return
    inner = unwrap_builtins(argv)
    for command in (tuple(inner), *wrapped(inner)):
        if command and os.path.basename(command[0]) == "git":
            for place in places:
                if place is None:
                    yield None
                    continue
                found = _git_dir(command[1:], place, find or discover)
                if found is not None and not _inside_dot_git(found):
                    yield Path(found)


def mentions_git(argv: Sequence[str]) -> bool:
    """Whether any word of ``argv`` could run git (``git``, ``/usr/bin/git``): only then can
    :func:`repositories` find any."""
    return any(word == "git" or word.endswith("/git") for word in argv)


def _git_dir(arguments: Sequence[str], start: str, find: Callable[[str], str | None]) -> str | None:
    """The git directory ``git ARGUMENTS`` uses when started in ``start``."""
    here = start
    named: str | None = None
    index = 0
    while index < len(arguments) and arguments[index].startswith("-"):
        option, equals, value = arguments[index].partition("=")
        if option in _OPTIONS_WITH_VALUE and not equals:
            value = arguments[index + 1] if index + 1 < len(arguments) else ""
            index += 1
        if option == "-C" and value:
            here = os.path.join(here, value)
        elif option == "--git-dir" and value:
            named = os.path.join(here, value)
        index += 1
    if named is not None:
        return os.path.realpath(named)
    return find(here)


def discover(start: str) -> str | None:
    """The git directory git's discovery finds from ``start`` (absolute, symlinks
    followed), or None. Two ``stat`` calls a level where there is none."""
    directory = os.path.realpath(start)
    while True:
        dot_git = os.path.join(directory, ".git")
        kind = _kind(dot_git)
        if kind == "file":
            return _gitfile_target(dot_git)
        if kind == "dir" and is_git_directory(dot_git):
            return dot_git
        if is_git_directory(directory):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def is_git_directory(path: str) -> bool:
    """Whether git takes ``path`` for a repository's git directory (its ``HEAD``, and its
    ``objects/`` and ``refs/``, here or in the directory its ``commondir`` names)."""
    if _kind(os.path.join(path, "HEAD")) != "file":
        return False
    if _kind(os.path.join(path, "commondir")) == "file":
        return True
    return _kind(os.path.join(path, "objects")) == "dir" == _kind(os.path.join(path, "refs"))


def _kind(path: str) -> Literal["file", "dir", None]:
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else None


def _gitfile_target(path: str) -> str:
    """The directory a ``.git`` file (``gitdir: …``) names; the file itself when it names
    none (git stops there with an error)."""
    try:
        with open(path, errors="replace") as file:
            text = file.read(4096)
    except OSError:
        return path
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = line.removeprefix("gitdir:").strip()
            return os.path.realpath(os.path.join(os.path.dirname(path), target))
    return path


def _inside_dot_git(path: str) -> bool:
    return any(part.casefold() == ".git" for part in path.split(os.sep))


__all__ = ["discover", "is_git_directory", "mentions_git", "repositories"]
