"""Every process a test starts is reaped (used by conftest.py).

The test run makes itself the child subreaper of everything it starts (Linux ``prctl``), so a
process whose parent died before it (a ``sleep 300`` whose shell was killed, a server left by a
caliban that exited) becomes a child of the test run instead of init's, and is still found. After
each test, a process that started during the test and still runs fails that test by its command
line, and is killed with everything it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants become this process's children; False where that is unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None once gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [int(child) for child in Path(task.path, "children").read_text().split()]
    return found


def descendants(root: int | None = None) -> list[int]:
    """Every process below ``root`` (default: this one), zombies included."""
    found: list[int] = []
    pending = _children(os.getpid() if root is None else root)
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending += _children(pid)
    return found


def running(pids: list[int] | set[int]) -> set[int]:
    """Those of ``pids`` that still run (a zombie has finished)."""
    alive = set()
    for pid in pids:
        fields = _stat(pid)
        if fields is not None and fields[0] not in ("Z", "X"):
            alive.add(pid)
    return alive


def command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part) or "?"


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait (on pidfds: an event, not a poll) until ``pids`` have exited or ``seconds`` pass;
    returns those still running."""
    fds: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fds[os.pidfd_open(pid)] = pid
    try:
        deadline = time.monotonic() + seconds
        left = set(fds)
        while left and (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(left), [], [], remaining)
            left -= set(ready)
    finally:
        for fd in fds:
            os.close(fd)
    return running(pids)


def kill_all(pids: set[int]) -> None:
    """SIGKILL ``pids`` and everything below them."""
    for pid in pids | {child for parent in pids for child in descendants(parent)}:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def reap_zombies(keep: set[int]) -> None:
    """Collect this process's finished children, except ``keep`` (another fixture's, which may
    still wait for its own): orphans handed to a subreaper stay zombies until it does this."""
    for pid in _children(os.getpid()):
        fields = _stat(pid)
        if pid not in keep and fields is not None and fields[0] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def describe(pids: set[int]) -> str:
    return "\n".join(f"  pid {pid}: {command_line(pid)}" for pid in sorted(pids))
