"""The MCP SDK, imported once in a daemon thread (it takes most of a second), and its logging
sent to a file, never to the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading

from caliban.mcp.logs import log_dir

__all__ = ["SDK", "SdkLoader", "route_sdk_logging"]

_SDK_MODULES = (
    "mcp",
    "mcp.client.subscriptions",
    "mcp.shared.exceptions",
    "mcp.shared.message",
    "mcp_types",
    "mcp_types.version",
)


class SdkLoader:
    """Imports the MCP SDK once, in a daemon thread, and wakes the tasks waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = False
        self._done = False
        self._error: BaseException | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def start(self) -> None:
        """Begin the import (once); returns at once."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="caliban-mcp-sdk", daemon=True).start()

    def _load(self) -> None:
        error: BaseException | None = None
        try:
            for name in _SDK_MODULES:
                importlib.import_module(name)
        except BaseException as exc:  # handed to the waiting tasks
            error = exc
        with self._lock:
            self._done, self._error = True, error
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed by now
                loop.call_soon_threadsafe(_settle, future)

    async def wait(self, *, start: bool = True) -> None:
        """Return once the SDK is imported (starting the import unless ``start`` is False)."""
        if start:
            self.start()
        with self._lock:
            future = None
            if not self._done:
                future = asyncio.get_running_loop().create_future()
                self._waiters.append((asyncio.get_running_loop(), future))
        if future is not None:
            await future
        if self._error is not None:
            raise RuntimeError(f"the MCP SDK could not be imported: {self._error}")


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


SDK = SdkLoader()
"""The process's loader: every manager waits on the same import."""

_sdk_logging_routed = False


def route_sdk_logging(*loggers: str) -> None:
    """Send the SDK's log records (it warns through ``logging``), and those of ``loggers``,
    to ``caliban-sdk.log`` in the MCP log directory; once per process."""
    global _sdk_logging_routed
    if _sdk_logging_routed:
        return
    _sdk_logging_routed = True
    try:
        log_dir().mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(log_dir() / "caliban-sdk.log")
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("mcp", *loggers):
        target = logging.getLogger(name)
        if not target.handlers:
            target.addHandler(handler)
            target.propagate = False
