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
import weakref
from collections.abc import Callable, Coroutine
from typing import IO, Any, TypeVar

from caliban.exec.command import Command, SandboxProfile
from caliban.exec.sandbox import Sandbox, confine

__all__ = [
    "DEVNULL",
    "KILL_GRACE_S",
    "PIPE",
    "Child",
    "Stdio",
    "group_alive",
    "run_main",
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
_starting: weakref.WeakSet[asyncio.Future[Child]] = weakref.WeakSet()
"""Starts in flight (:func:`spawn`), for :func:`run_main`."""
T = TypeVar("T")


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
    ``cwd``). Cancelled while the process starts, it stops the whole group it started
    before the cancellation goes on.
    """
    command = confine(command, profile, sandbox)
    starting = asyncio.ensure_future(_start(command, limit, (stdin, stdout, stderr)))
    _starting.add(starting)
    try:
        child = await asyncio.shield(starting)
    except asyncio.CancelledError:
        # The process may already run (and have started others) while it is being started;
        # cancelled then, asyncio would kill the leader only. Let the start finish, then
        # stop the whole group before the cancellation goes on.
        await _stop_once_started(starting, command)
        raise
    except BaseException:
        if command.on_exit is not None:
            command.on_exit()
        raise
    if command.started is not None:
        try:
            await asyncio.to_thread(command.started)
        except BaseException:
            _signal(child.pid, signal.SIGKILL)
            await _until_gone(child, REAP_WAIT_S)
            child.close()
            raise
    return child


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` for an entry point that starts processes: once ``main`` ends,
    every start in flight finishes before ``asyncio.run`` cancels the tasks left.

    Cancelled while it connects a new process's pipes, Python 3.11's subprocess transport
    waits for ever for the pipes it never connected, and ``asyncio.run`` with it (a REPL
    that did not exit at Ctrl-D: a session's cancelled checkpoint task was starting git). A
    start let finish is stopped by its cancelled owner instead (:func:`spawn`)."""

    async def settled() -> T:
        try:
            return await main
        finally:
            while pending := [start for start in _starting if not start.done()]:
                await asyncio.wait(pending)

    return asyncio.run(settled())


async def _start(command: Command, limit: int, stdio: tuple[Stdio, Stdio, Stdio]) -> Child:
    loop = asyncio.get_running_loop()
    if command.by_launcher and PIPE not in stdio:
        child = await _spawn_served(command, loop, limit, stdio)
        if child is not None:
            return child
    stdin, stdout, stderr = stdio
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
    return Child(transport, protocol, command)


async def _stop_once_started(starting: asyncio.Future[Child], command: Command) -> None:
    """Wait for ``starting`` however often cancelled (it is a few turns of the loop), then
    stop the group it started; nothing when it failed to start."""
    while not starting.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(starting)
    if starting.cancelled():
        return  # by the loop's shutdown: asyncio killed what it had started
    if starting.exception() is not None:
        if command.on_exit is not None:
            command.on_exit()
        return
    child = starting.result()
    try:
        await stop_group(child)
    finally:
        child.close()


async def _spawn_served(
    command: Command, loop: asyncio.AbstractEventLoop, limit: int, stdio: tuple[Stdio, ...]
) -> Child | None:
    """``command`` (the launcher's argv) forked by the launch server
    (:mod:`caliban.exec.launch_server`) rather than started as a new Python; None when the
    server cannot take it (then it starts as usual)."""
    from caliban.exec.launch import PROGRAM
    from caliban.exec.launch_server import LaunchServer

    assert command.argv[: len(PROGRAM)] == PROGRAM, command.argv
    transport = _ServedTransport()
    protocol = _ExitAware(limit, loop, command.on_exit)
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    with contextlib.ExitStack() as opened:
        fds = {number: _descriptor(value, number, stdio, opened) for number, value in
               enumerate(stdio)}  # fmt: skip
        fds.update({fd: fd for fd in command.pass_fds})
        try:
            started = LaunchServer.shared().launch(
                list(command.argv[len(PROGRAM) :]),
                env=command.environment(),
                cwd=str(command.cwd or os.getcwd()),
                fds=fds,
                on_exit=lambda code: _settle(loop, transport, code),
            )
        except OSError:
            return None
    try:
        transport.pid = await asyncio.wrap_future(started)
    except OSError:
        return None
    return Child(transport, protocol, command)


def _descriptor(
    value: Stdio, number: int, stdio: tuple[Stdio, ...], opened: contextlib.ExitStack
) -> int:
    """The descriptor here that a child's stdin, stdout or stderr (``number``) is to be."""
    if value == DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        opened.callback(os.close, fd)
        return fd
    if value == subprocess.STDOUT and number == 2:
        return _descriptor(stdio[1], 1, stdio, opened)
    if value is None:
        return number
    if isinstance(value, int):
        return value
    return value.fileno()


def _settle(loop: asyncio.AbstractEventLoop, transport: _ServedTransport, code: int) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
        loop.call_soon_threadsafe(transport.exited, code)


class _ServedTransport(asyncio.SubprocessTransport):
    """A process the launch server forked: not caliban's child, so its exit comes from the
    server (:meth:`exited`) rather than ``waitpid``. No pipes (only descriptors are passed
    to it)."""

    def __init__(self) -> None:
        super().__init__()
        self.pid = 0
        self._returncode: int | None = None
        self._closed = False
        self._protocol: asyncio.SubprocessProtocol | None = None

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.SubprocessProtocol)
        self._protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self._protocol is not None
        return self._protocol

    def exited(self, code: int) -> None:
        """The server saw it exit with ``code``."""
        self._returncode = code
        protocol = self._protocol
        if protocol is not None:
            protocol.process_exited()

    def get_pid(self) -> int:
        return self.pid

    def get_returncode(self) -> int | None:
        return self._returncode

    def get_pipe_transport(self, fd: int) -> None:
        return None

    def send_signal(self, signum: int) -> None:
        if self._returncode is None and self.pid:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(ProcessLookupError):
                self.kill()


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
