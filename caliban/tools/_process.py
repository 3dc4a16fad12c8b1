"""How a Bash command line becomes a child process: ``bash -c`` in an environment without
pagers or prompts, started through :mod:`caliban.exec` (its own process group, stopped as
one with :func:`caliban.exec.stop_group`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import IO, TYPE_CHECKING

from caliban.exec import DEVNULL, Child, Command, spawn

if TYPE_CHECKING:
    from caliban.sandbox.runtime import SandboxRuntime


def shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def shell_environment() -> dict[str, str]:
    """The environment commands run in: caliban's, with pagers and prompts turned off."""
    env = dict(os.environ)
    # Nothing may wait on a terminal that is not there.
    env.update(PAGER="cat", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")
    # `cd NAME` must mean ./NAME, as the permission check reads it (CDPATH could send it
    # to ~/.config/NAME, and a redirection after it there).
    env.pop("CDPATH", None)
    return env


async def spawn_shell(
    command: str,
    *,
    cwd: Path,
    output: int | IO[bytes],
    sandbox: SandboxRuntime | None = None,
) -> Child:
    """Start ``shell -c command`` in a new process group, stdin from /dev/null, stdout and
    stderr both into ``output`` (a file descriptor or a binary file), confined by
    ``sandbox`` when given (its profile as of now, its temporary folder as ``TMPDIR``);
    raises OSError. ``cwd`` is absolute."""
    argv = (shell(), "-c", command)
    # bash takes an inherited PWD that names its start directory by another path (caliban
    # started through a symlink) for where it is, and a `cd ..` would leave from there: PWD
    # is the directory the permission check read the line from.
    env = {**shell_environment(), "PWD": str(cwd)}
    if sandbox is None:
        return await spawn(
            Command(argv=argv, cwd=cwd, env=env), stdin=DEVNULL, stdout=output, stderr=output
        )
    return await spawn(
        Command(argv=argv, cwd=cwd, env=sandbox.environment(env)),
        stdin=DEVNULL,
        stdout=output,
        stderr=output,
        profile=sandbox.profile(),
        sandbox=sandbox.backend,
    )


__all__ = ["shell", "shell_environment", "spawn_shell"]
