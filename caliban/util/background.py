"""Slow start-up work (importing an SDK takes seconds) in daemon threads.

``asyncio.to_thread`` would do, except that ``asyncio.run`` joins its worker threads at
exit: a user who quits right after start-up would wait for an import nobody needs any more.
Nothing joins these threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def start_in_daemon_thread(work: Callable[[], T], *, name: str) -> asyncio.Future[T]:
    """Run ``work`` in a daemon thread; the returned future settles with its outcome."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(value: T | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)  # type: ignore[arg-type]

    def run() -> None:
        try:
            value, error = work(), None
        except BaseException as exc:  # handed to whoever awaits the future
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop may be closed by now
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done
