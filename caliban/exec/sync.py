"""A quick helper run to completion, synchronously and bounded in time and output
(``git config --get`` while a permission is decided): :func:`run`; a program that takes
over the terminal until it exits (the user's editor): :func:`run_attached`."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

from caliban.exec.command import Command, SandboxProfile
from caliban.exec.process import REAP_WAIT_S, group_alive, wait_gone
from caliban.exec.sandbox import Sandbox, confine

__all__ = ["RunResult", "run", "run_attached"]

MAX_OUTPUT_BYTES = 2**20
"""How much of each of stdout and stderr :func:`run` keeps, by default."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """How a helper ended and what it wrote."""

    returncode: int
    """Its exit code; negative: the signal that killed it (-9 after a timeout)."""
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    truncated: bool = False
    """It wrote more than the cap to stdout or stderr; the rest was read and dropped."""

    @property
    def ok(self) -> bool:
        """It exited with 0 in time."""
        return self.returncode == 0 and not self.timed_out


def run(
    command: Command,
    *,
    timeout: float,
    max_output: int = MAX_OUTPUT_BYTES,
    profile: SandboxProfile | None = None,
    sandbox: Sandbox | None = None,
) -> RunResult:
    """Run ``command`` to completion with stdin from /dev/null, in its own process group,
    keeping at most ``max_output`` bytes of each of stdout and stderr.

    After ``timeout`` seconds the group is killed (``timed_out``). A helper may not leave
    processes behind: whatever still runs in its group when it exits is killed too.
    ``profile`` and ``sandbox`` confine it as in :func:`caliban.exec.spawn`. Raises OSError
    when the command cannot start. Blocks the calling thread: for quick helpers only.
    """
    command = confine(command, profile, sandbox)
    deadline = time.monotonic() + timeout
    try:
        popen = subprocess.Popen(
            command.argv,
            cwd=command.cwd,
            env=None if command.env is None else dict(command.env),
            pass_fds=command.pass_fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except BaseException:
        if command.on_exit is not None:
            command.on_exit()
        raise
    try:
        if command.started is not None:
            command.started()
        stdout, stderr, truncated = _collect(popen, deadline, max_output)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(max(0.0, deadline - time.monotonic()))
        timed_out = popen.returncode is None
    finally:
        if popen.returncode is None or group_alive(popen.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        if command.on_exit is not None:
            command.on_exit()
        wait_gone(popen.pid, REAP_WAIT_S)
        for pipe in (popen.stdout, popen.stderr):
            if pipe is not None:
                pipe.close()
    return RunResult(
        returncode=popen.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        truncated=truncated,
    )


def _collect(
    popen: subprocess.Popen[bytes], deadline: float, cap: int
) -> tuple[bytes, bytes, bool]:
    """Read stdout and stderr until both end or the deadline passes."""
    assert popen.stdout is not None and popen.stderr is not None
    kept = {popen.stdout.fileno(): bytearray(), popen.stderr.fileno(): bytearray()}
    truncated = False
    with selectors.DefaultSelector() as selector:
        for fd in kept:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer = kept[key.fd]
                room = max(0, cap - len(buffer))
                truncated = truncated or len(chunk) > room
                buffer += chunk[:room]
    return bytes(kept[popen.stdout.fileno()]), bytes(kept[popen.stderr.fileno()]), truncated


def run_attached(command: Command) -> int:
    """Run ``command`` on caliban's own terminal (stdin, stdout and stderr) until it exits;
    its exit code. For a program the user works in (``$EDITOR``): it stays in caliban's
    process group, the terminal's foreground, so its keys (Ctrl-C, Ctrl-Z) reach it, and it
    has no time limit. Raises OSError when the command cannot start."""
    popen = subprocess.Popen(
        command.argv,
        cwd=command.cwd,
        env=None if command.env is None else dict(command.env),
        pass_fds=command.pass_fds,
    )
    return popen.wait()
