"""What the SDK-backed providers share: a client created on first use, from any thread.

Importing an SDK takes up to two seconds, so a provider is cheap to construct and creates its
client lazily — on the first request, or earlier through :meth:`SdkProvider.warm_up` in a
worker thread while other start-up work (MCP servers) runs.
"""

from __future__ import annotations

import abc
import asyncio
import threading
from typing import ClassVar, Generic, Protocol, TypeVar

from caliban.providers.retry import DEFAULT_RETRY, RetryPolicy


class _AsyncClosable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_AsyncClosable)


class SdkProvider(abc.ABC, Generic[ClientT]):
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
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.key_env = key_env or self.default_key_env
        self.retry = retry
        self.timeout = timeout
        self._client: ClientT | None = None
        self._lock = threading.Lock()

    @abc.abstractmethod
    def _create_client(self) -> ClientT:
        """Import the SDK and build its async client (called once, under the lock)."""

    def client(self) -> ClientT:
        with self._lock:
            if self._client is None:
                self._client = self._create_client()
            return self._client

    def warm_up(self) -> None:
        """Import the SDK and create the client now (safe to call from a worker thread)."""
        self.client()

    async def prepare(self) -> None:
        """:meth:`warm_up` in a worker thread."""
        await asyncio.to_thread(self.warm_up)

    async def aclose(self) -> None:
        """Close the HTTP connections (before the event loop ends); a later request reopens."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            await client.close()
