"""Starting a child process in its own process group (:func:`spawn`) and stopping that whole
group (:func:`stop_group`), on asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from caliban.exec.command import Command, SandboxProfile
from caliban.exec.sandbox import Sandbox, confine

__all__ = [
    "DEVNULL",
    "KILL_GRACE_S",
    "PIPE",
    "Child",
    "Stdio",
    "group_alive",
    "spawn",
    "stop_group",
]

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
Stdio = int | IO[Any] | None
"""What a child's stdin, stdout or stderr is: :data:`PIPE`, :data:`DEVNULL`, a file
descriptor, a binary file, or None (caliban's own)."""

KILL_GRACE_S = 2.0
"""How long a process group gets between SIGTERM and SIGKILL, by default."""
REAP_WAIT_S = 2.0
"""How long :func:`stop_group` waits, after SIGKILL, for the group to be gone and its
leader reaped."""
_POLL_FIRST_S, _POLL_MAX_S = 0.005, 0.05


class _ExitAware(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol, plus a future settled when the process exits: on Python 3.11,
    ``Process.wait()`` also waits until its pipes close, which a grandchild can put off
    for ever. It runs the command's ``on_exit`` then, whether or not anyone waits."""

    def __init__(
        self, limit: int, loop: asyncio.AbstractEventLoop, on_exit: Callable[[], None] | None
    ) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()
        self._on_exit = on_exit

    def process_exited(self) -> None:
        super().process_exited()
        on_exit, self._on_exit = self._on_exit, None
        if on_exit is not None:
            on_exit()
        if not self.exited.done():
            self.exited.set_result(None)


class Child:
    """A started child process, the leader of its own process group (and session)."""

    def __init__(
        self, transport: asyncio.SubprocessTransport, protocol: _ExitAware, command: Command
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self.command = command
        """What was started (after a sandbox wrapped it)."""
        self.pid = transport.get_pid()
        """Its process id, which is also its process group's id."""
        self.stdin: asyncio.StreamWriter | None = protocol.stdin
        """With ``stdin=PIPE``."""
        self.stdout: asyncio.StreamReader | None = protocol.stdout
        """With ``stdout=PIPE``."""
        self.stderr: asyncio.StreamReader | None = protocol.stderr
        """With ``stderr=PIPE``."""

    def __repr__(self) -> str:
        return f"<Child {self.pid} {self.command.argv[0]!r} returncode={self.returncode}>"

    @property
    def returncode(self) -> int | None:
        """Its exit code once it has exited (negative: the signal that killed it)."""
        return self._transport.get_returncode()

    async def wait(self) -> int:
        """Wait until it exits (not until its pipes close); its exit code."""
        await asyncio.shield(self._protocol.exited)
        code = self.returncode
        assert code is not None
        return code

    def close(self) -> None:
        """Close its pipes (reading or writing them fails from now on). For after it exited:
        one still running is killed (only the leader; :func:`stop_group` stops a group)."""
        self._transport.close()


async def spawn(
    command: Command,
    *,
    stdin: Stdio = DEVNULL,
    stdout: Stdio = DEVNULL,
    stderr: Stdio = DEVNULL,
    profile: SandboxProfile | None = None,
    sandbox: Sandbox | None = None,
    limit: int = 2**16,
) -> Child:
    """Start ``command`` in a new session, so that it leads a process group of its own
    which :func:`stop_group` stops as one, children included.

    With a ``profile`` it starts as ``sandbox`` wraps it (:func:`~caliban.exec.sandbox.confine`).
    ``limit`` bounds one buffered line of a piped stdout or stderr (asyncio's
    ``StreamReader``).
    Raises OSError when the command cannot start (not found, not executable, a missing
    ``cwd``).
    """
    command = confine(command, profile, sandbox)
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _ExitAware(limit, loop, command.on_exit),
            *command.argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=command.cwd,
            env=None if command.env is None else dict(command.env),
            pass_fds=command.pass_fds,
            start_new_session=True,
        )
    except BaseException:
        if command.on_exit is not None:
            command.on_exit()
        raise
    return Child(transport, protocol, command)


async def stop_group(child: Child, *, grace: float | None = None) -> None:
    """Stop ``child``'s whole process group: SIGTERM, up to ``grace`` seconds
    (:data:`KILL_GRACE_S` by default) for its live members to exit (zombies waiting to be
    reaped do not count), SIGKILL for whatever is left, then a bounded wait until the group
    is gone and the leader reaped.

    A cancellation while it waits (Ctrl-C again) cuts the grace short: the group is killed
    before the cancellation goes on, so nothing is left running either way.
    """
    grace = KILL_GRACE_S if grace is None else grace
    try:
        if _signal(child.pid, signal.SIGTERM):
            await _until_gone(child, grace)
    finally:
        if group_alive(child.pid):
            _signal(child.pid, signal.SIGKILL)
        # A signal is sent, not yet acted on: stop once the group is seen gone.
        await _until_gone(child, REAP_WAIT_S)


async def _until_gone(child: Child, seconds: float) -> None:
    """Return once no member of the group runs, or after ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    # The leader's exit is an event; the exits of its children are not, so they are polled.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(child.wait(), seconds)
    pause = _POLL_FIRST_S
    while group_alive(child.pid):
        left = deadline - loop.time()
        if left <= 0:
            return
        await asyncio.sleep(min(pause, left))
        pause = min(2 * pause, _POLL_MAX_S)


def _signal(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal (it changed its user): the rest got it
        pass
    return True


def wait_gone(pgid: int, seconds: float) -> bool:
    """Block until no process of group ``pgid`` runs, for at most ``seconds``; whether it
    is gone. For synchronous callers (:func:`caliban.exec.run`)."""
    deadline = time.monotonic() + seconds
    pause = _POLL_FIRST_S
    while group_alive(pgid):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(2 * pause, _POLL_MAX_S)
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs; zombies do not count (an orphan's
    zombie waits for init, which can take a while, but it is dead)."""
    if not _signal(pgid, 0):
        return False
    if not sys.platform.startswith("linux"):
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
