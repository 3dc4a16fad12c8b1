"""Holding a session open in its own task, while the REPL's prompt runs in another."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from caliban.cli.options import CliOptions
from caliban.events import AgentEvent
from caliban.util.background import start_in_daemon_thread

if TYPE_CHECKING:
    from caliban.repl.approve import TerminalApprover
    from caliban.session.session import Session

Opener = Callable[..., AbstractAsyncContextManager["Session"]]
"""``caliban.session.assemble.open_session``'s shape (injectable for tests)."""


def _import_open_session() -> Opener:
    from caliban.session.assemble import open_session, preload

    preload()
    return open_session


class SessionHost:
    """Holds the session open in its own task: an async context manager must be entered
    and left in one task, and the REPL's task must not wait for it to open. ``ready`` is
    resolved with the session (or the reason it could not open)."""

    def __init__(
        self,
        options: CliOptions,
        opener: Opener | None,
        ready: asyncio.Future[Session],
        *,
        approver: TerminalApprover,
        listener: Callable[[AgentEvent], None],
    ) -> None:
        self._closing = asyncio.Event()
        self.ready = ready
        self.options = options
        self._args = (options, opener, approver, listener)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(*self._args))

    async def _run(
        self,
        options: CliOptions,
        opener: Opener | None,
        approver: TerminalApprover,
        listener: Callable[[AgentEvent], None],
    ) -> None:
        try:
            if opener is None:
                opener = await start_in_daemon_thread(_import_open_session, name="caliban-import")
            async with opener(
                options, approver=approver, listeners=[listener], interactive=True
            ) as session:
                self.ready.set_result(session)
                await self._closing.wait()
        except Exception as exc:
            if self.ready.done():
                raise
            self.ready.set_exception(exc)

    async def close(self) -> None:
        self._closing.set()
        if self._task is None:
            return
        if not self.ready.done():
            self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            if not self._task.cancelled():
                raise
        if self.ready.done() and not self.ready.cancelled():
            self.ready.exception()  # retrieved: the REPL has reported it already
