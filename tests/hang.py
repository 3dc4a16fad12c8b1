"""The only deadline a test may have: a hang guard.

This machine and CI share 2 cores with other test runs; at load 15 an SDK import takes 20 s and
a server start-up can take a minute. A deadline in a test exists only to stop a hang, so it is
generous enough for a machine three times as busy as the busiest seen. A test that bounds an
operation's cost measures work (counts, sizes, or the CPU time of that operation), not wall time.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import anyio

HANG_S = 300.0
"""Seconds after which a wait in a test is a hang: a failure, not a slow machine."""


def hang_guard() -> AbstractContextManager[anyio.CancelScope]:
    """``anyio.fail_after`` with the hang deadline."""
    return anyio.fail_after(HANG_S)


async def until(check: Callable[[], object], interval: float = 0.02) -> None:
    """Poll another process's state (there is no event to wait on) until ``check()``."""
    with hang_guard():
        while not check():  # noqa: ASYNC110
            await anyio.sleep(interval)


class CpuTime:
    """CPU seconds spent inside a ``with cpu_time() as spent:`` block."""

    seconds = 0.0


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@contextmanager
def cpu_time() -> Iterator[CpuTime]:
    """Measure the CPU time of an operation: this process's threads, and the child processes
    it waited for, during the block. Unlike wall time it does not grow when other processes
    load the machine, so a bound on it is a bound on the work done."""
    spent = CpuTime()
    started = _cpu_seconds()
    try:
        yield spent
    finally:
        spent.seconds = _cpu_seconds() - started


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds a running process (all its threads, and the children it waited for) has
    spent so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")
