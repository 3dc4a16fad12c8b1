"""Shell commands in their own process group: started by Bash (in the foreground or as a
background task) and stopped as one group, children included."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import IO

KILL_GRACE_S = 2.0
"""How long a process group gets between SIGTERM and SIGKILL."""


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
    command: str, *, cwd: Path, output: int | IO[bytes]
) -> asyncio.subprocess.Process:
    """Start ``shell -c command`` in a new process group, stdin from /dev/null, stdout and
    stderr both into ``output`` (a file descriptor or a binary file); raises OSError."""
    return await asyncio.create_subprocess_exec(
        shell(),
        "-c",
        command,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        start_new_session=True,  # its own process group, stopped as one
        env=shell_environment(),
    )


async def stop_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM ``proc``'s process group, give it :data:`KILL_GRACE_S`, then SIGKILL whatever
    is left of the group (children that ignored SIGTERM or outlived the shell)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE_S)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        # A second cancellation (Ctrl-C again) must not leave the group half-stopped.
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE_S)


__all__ = ["KILL_GRACE_S", "shell", "shell_environment", "spawn_shell", "stop_group"]
