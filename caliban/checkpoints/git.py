"""git, run on caliban's own object store and never on the user's repository.

Every call names its repository, work tree and index through ``GIT_DIR``, ``GIT_WORK_TREE``
and ``GIT_INDEX_FILE``, in an environment built from nothing: no system or global config, no
hooks, no fsmonitor, no inherited ``GIT_*`` variable, no pager, no prompt. The project's own
``.git`` (its config, hooks, index, refs) is never read, so a hostile repository cannot get
code run by a checkpoint; its ``.gitattributes`` are overridden by the store's
``info/attributes``, so no filter or line-ending conversion changes a byte on the way in or
out. Processes start through :mod:`caliban.exec`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

from caliban.exec import DEVNULL, PIPE, Child, Command, spawn, stop_group

GIT_TIMEOUT_S = 60.0
"""The longest one git call may take (the first snapshot of a large project hashes it all)."""
MAX_ERROR_BYTES = 4096
STOP_GRACE_S = 1.0

ATTRIBUTES = b"* -text -eol -filter -ident -working-tree-encoding -export-subst\n"
"""The store's ``info/attributes``: it outranks every ``.gitattributes``, so files are stored
and restored byte for byte, and no attribute names a driver."""

HARDENING = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=true",
    "core.autocrlf=false",
    "core.symlinks=true",
    "core.quotePath=false",
    "core.preloadIndex=true",
    "core.askPass=",
    "core.sshCommand=",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "submodule.recurse=false",
    "diff.external=",
    "credential.helper=",
    "safe.directory=*",
)
"""``-c`` settings on every call: each closes a way git could run a program, read a file that
is not ours, or store what is not in the file."""


class GitFailed(OSError):
    """A git call failed, timed out, or could not start."""

    def __init__(self, message: str, code: int | None = None, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.code = code
        """Its exit code, when it ran and exited."""
        self.timed_out = timed_out


def _environment(store: Path, work_tree: Path, index: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C",
        "LC_ALL": "C",
        "HOME": str(store),
        "XDG_CONFIG_HOME": str(store),
        "GIT_DIR": str(store),
        "GIT_WORK_TREE": str(work_tree),
        "GIT_INDEX_FILE": str(index),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PAGER": "cat",
        "GIT_AUTHOR_NAME": "caliban",
        "GIT_AUTHOR_EMAIL": "caliban@localhost",
        "GIT_COMMITTER_NAME": "caliban",
        "GIT_COMMITTER_EMAIL": "caliban@localhost",
    }
    return env


def _repository_excludes(work_tree: Path) -> str:
    info = work_tree / ".git" / "info"
    try:
        plain = all(
            stat.S_ISDIR(os.lstat(folder).st_mode) for folder in (work_tree / ".git", info)
        ) and stat.S_ISREG(os.lstat(info / "exclude").st_mode)
    except OSError:
        return ""
    return str(info / "exclude") if plain else ""


class Git:
    """git bound to one store, one work tree and one index."""

    def __init__(self, store: Path, work_tree: Path, index: Path) -> None:
        self.store = store
        self.work_tree = work_tree
        self.index = index
        self.env = _environment(store, work_tree, index)
        self.excludes = _repository_excludes(work_tree)
        """The project repository's ``.git/info/exclude`` (patterns only: read, like
        ``.gitignore``), when it is a plain file; else nothing."""

    def command(self, *args: str) -> Command:
        argv = ["git", "--no-pager"]
        for setting in (*HARDENING, f"core.excludesFile={self.excludes}"):
            argv += ["-c", setting]
        env = self.env
        if args[:1] == ("init",):  # git refuses a work tree for a bare repository's creation
            env = {k: v for k, v in env.items() if k not in ("GIT_WORK_TREE", "GIT_INDEX_FILE")}
        return Command(argv=(*argv, *args), cwd=self.work_tree, env=env)

    async def run(self, *args: str, stdin: IO[Any] | None = None) -> bytes:
        """Run ``git args``; its stdout. Raises :class:`GitFailed` on a non-zero exit or after
        :data:`GIT_TIMEOUT_S` (its process group is stopped)."""
        timeout = GIT_TIMEOUT_S
        async with self._started(args, stdin) as child:
            assert child.stdout is not None and child.stderr is not None
            try:
                out, err = await asyncio.wait_for(
                    asyncio.gather(child.stdout.read(), child.stderr.read(MAX_ERROR_BYTES)),
                    timeout,
                )
                code = await asyncio.wait_for(child.wait(), timeout)
            except TimeoutError:
                raise GitFailed(
                    f"git {args[0]} took more than {timeout:.0f} s", timed_out=True
                ) from None
        if code != 0:
            text = err.decode(errors="replace").strip()
            raise GitFailed(f"git {args[0]} failed ({code}): {text}", code)
        return out

    @contextlib.asynccontextmanager
    async def stream(self, *args: str, stdin: IO[Any] | None = None) -> AsyncIterator[Child]:
        """``git args`` running, its stdout to read as it comes; stopped on the way out."""
        async with self._started(args, stdin) as child:
            yield child

    @contextlib.asynccontextmanager
    async def _started(self, args: tuple[str, ...], stdin: IO[Any] | None) -> AsyncIterator[Child]:
        try:
            child = await spawn(
                self.command(*args),
                stdin=stdin if stdin is not None else DEVNULL,
                stdout=PIPE,
                stderr=PIPE,
                limit=2**20,
            )
        except OSError as exc:
            raise GitFailed(f"git could not start: {exc}") from exc
        try:
            yield child
        finally:
            # A grace period: git stopped by SIGTERM removes its index.lock.
            await stop_group(child, grace=STOP_GRACE_S)
            child.close()
