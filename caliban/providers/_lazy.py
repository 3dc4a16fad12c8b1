"""What the providers share: a client created on first use, from any thread.

Importing the HTTP client takes time (``httpx2``: 0.2 s of CPU), so a provider is cheap to
construct and creates its client lazily — on the first request, or earlier through
:meth:`LazyClientProvider.warm_up` in a worker thread while other start-up work (MCP
servers) runs.

A provider also knows each model's context window as well as it can:
:meth:`LazyClientProvider.context_window` answers at once (the configured override, else what the
server reported, else the table in :mod:`caliban.providers.windows`), and
:meth:`LazyClientProvider.refresh_context_window` asks the server once per model (the OpenAI
provider asks llama.cpp, Ollama and vLLM; see :mod:`caliban.providers.windows`).
"""

from __future__ import annotations

import abc
import asyncio
import threading
from collections.abc import AsyncIterator
from typing import ClassVar, Generic, Protocol, TypeVar

from caliban.providers.base import Effort, PromptTooLong, ProviderEvent
from caliban.providers.guard import DEFAULT_LIMITS, StreamLimits
from caliban.providers.retry import DEFAULT_RETRY, RetryPolicy
from caliban.providers.windows import static_context_window


class _AsyncClosable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_AsyncClosable)


class LazyClientProvider(abc.ABC, Generic[ClientT]):
    name: str
    default_key_env: ClassVar[str]
    """The environment variable that normally holds this provider's key (for messages)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        key_env: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 600.0,
        effort: Effort | None = None,
        context_window: int | None = None,
        limits: StreamLimits = DEFAULT_LIMITS,
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.key_env = key_env or self.default_key_env
        self.retry = retry
        self.timeout = timeout
        self.effort = effort
        """How hard the model thinks on every request; ``None`` sends nothing about it."""
        self.context_window_override = context_window
        """``providers.<name>.context_window``: wins over anything the server reports."""
        self.limits = limits
        """What one response may hold (see :mod:`caliban.providers.guard`)."""
        self._client: ClientT | None = None
        self._lock = threading.Lock()
        self._windows: dict[str, int | None] = {}
        """Context windows the server reported, per model (``None``: asked, no answer)."""
        self._window_probes: dict[str, asyncio.Task[int | None]] = {}

    @abc.abstractmethod
    def _create_client(self) -> ClientT:
        """Import the HTTP client and build the provider's client (called once, under the
        lock)."""

    def client(self) -> ClientT:
        with self._lock:
            if self._client is None:
                self._client = self._create_client()
            return self._client

    def warm_up(self) -> None:
        """Import the HTTP client and create the client now (safe to call from a worker
        thread)."""
        self.client()

    async def prepare(self) -> None:
        """:meth:`warm_up` in a worker thread."""
        await asyncio.to_thread(self.warm_up)

    async def aclose(self) -> None:
        """Close the HTTP connections (before the event loop ends); a later request reopens."""
        probes, self._window_probes = self._window_probes, {}
        for probe in probes.values():
            probe.cancel()
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- context window

    def context_window(self, model: str) -> int:
        """The best known context window of ``model``, without waiting: the configured
        override, else what the server reported, else the built-in table."""
        if self.context_window_override is not None:
            return self.context_window_override
        return self._windows.get(model) or static_context_window(self.name, model)

    async def refresh_context_window(self, model: str) -> int:
        """Ask the server for ``model``'s context window (once per model; concurrent callers
        share the question), then return :meth:`context_window`. Never raises; a server that
        does not answer within a few seconds leaves the built-in value."""
        if self.context_window_override is None and model not in self._windows:
            probe = self._window_probes.get(model)
            if probe is None:
                probe = asyncio.ensure_future(self._probe_window(model))
                self._window_probes[model] = probe
                probe.add_done_callback(lambda task: self._probe_done(model, task))
            try:
                await asyncio.shield(probe)  # a cancelled caller leaves it to the others
            except asyncio.CancelledError:
                if not probe.cancelled():  # the caller was cancelled, not the probe
                    raise
        return self.context_window(model)

    def _probe_done(self, model: str, probe: asyncio.Task[int | None]) -> None:
        if self._window_probes.get(model) is probe:
            del self._window_probes[model]
        if not probe.cancelled() and probe.exception() is None:
            self._windows[model] = probe.result()

    async def _learn_window(
        self, model: str, events: AsyncIterator[ProviderEvent]
    ) -> AsyncIterator[ProviderEvent]:
        """Pass ``events`` on; a :class:`PromptTooLong` naming the limit teaches the window."""
        try:
            async for event in events:
                yield event
        except PromptTooLong as exc:
            if exc.limit is not None:
                self._windows[model] = exc.limit
            raise

    async def _probe_window(self, model: str) -> int | None:
        """Ask the server; ``None`` when it cannot say. Providers that can ask override this."""
        return None
