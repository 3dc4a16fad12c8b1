"""Remote MCP servers: the streamable HTTP transport and the legacy SSE one, both over an
httpx transport that will not read an answer past the message bound into memory.

A server's configured ``headers`` are sent as they are; OAuth (:mod:`caliban.mcp.auth`) is
an ``httpx2.Auth`` given to the client built here. The requests that auth makes to an
authorization server are marked, so that one that fails (a timeout, a refused connection) is
told to ``on_auth_failure``: the SDK's transports only log what goes wrong inside a request.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from caliban.mcp.config import ServerConfig

__all__ = ["http_transport", "sse_transport"]

_EVENT_END = re.compile(rb"\r?\n\r?\n")


@asynccontextmanager
async def http_transport(
    config: ServerConfig,
    *,
    max_message: int,
    on_violation: Callable[[str], None],
    auth: Any = None,
    on_auth_failure: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's streams to a streamable HTTP server; ``on_violation`` is told when the
    server's event stream carried a message over ``max_message`` bytes (which ends it).
    ``auth`` (an ``httpx2.Auth``) authenticates every request."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)
    transport = _bounded_transport(max_message, on_violation, on_auth_failure or on_violation)
    async with (
        httpx2.AsyncClient(
            headers=dict(config.headers), timeout=timeout, transport=transport, auth=auth
        ) as http,
        streamable_http_client(config.url or "", http_client=http) as streams,
    ):
        yield streams


def sse_transport(
    config: ServerConfig,
    *,
    max_message: int,
    on_violation: Callable[[str], None],
    auth: Any = None,
    on_auth_failure: Callable[[str], None] | None = None,
) -> Any:
    """The SDK's legacy SSE transport (an async context manager of its streams), bounded
    and authenticated like :func:`http_transport`."""
    import httpx2
    from mcp.client.sse import sse_client

    def client(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            transport=_bounded_transport(
                max_message, on_violation, on_auth_failure or on_violation
            ),
        )

    return sse_client(
        config.url or "", headers=dict(config.headers), auth=auth, httpx_client_factory=client
    )


def _bounded_transport(
    max_message: int, on_violation: Callable[[str], None], on_auth_failure: Callable[[str], None]
) -> Any:
    """An httpx transport that stops reading an answer past ``max_message`` bytes instead of
    reading it into memory whole: a whole body, or, for an event stream (which can last as
    long as the session), one event. A failed request of the OAuth flow is told to
    ``on_auth_failure``."""
    import httpx2

    limit = f"{max_message // 2**20} MB"

    class ResponseTooLarge(httpx2.StreamError, httpx2.SSEError):
        """Caught by the SDK both where it reads a JSON answer and where it reads SSE."""

    class Bounded(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, *, events: bool, stream: bool) -> None:
            self._inner = inner
            self._events = events
            self._stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            tail = b""  # an event's end may be split between chunks
            async for chunk in self._inner:
                if self._events:
                    ends = list(_EVENT_END.finditer(tail + chunk))
                    seen = len(tail) + len(chunk) - ends[-1].end() if ends else seen + len(chunk)
                    tail = chunk[-3:]
                else:
                    seen += len(chunk)
                if seen > max_message:
                    if self._stream:  # the GET stream: this ends the connection, so say why
                        on_violation(f"sent a message over {limit}")
                    raise ResponseTooLarge(f"the server's answer is over {limit}")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            try:
                response = await self._inner.handle_async_request(request)
            except httpx2.TransportError as exc:
                if request.extensions.get("caliban_auth"):
                    on_auth_failure(_auth_request_failed(request, exc))
                raise
            kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            response.stream = Bounded(
                response.stream,
                events=kind == "text/event-stream",
                stream=request.method == "GET",
            )
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Transport()


def _auth_request_failed(request: Any, exc: BaseException) -> str:
    import httpx2

    where = str(request.url.copy_with(query=None, fragment=None))
    if isinstance(exc, httpx2.TimeoutException):
        seconds = (request.extensions.get("timeout") or {}).get("read")
        within = f" within {seconds:g}s" if isinstance(seconds, int | float) else ""
        return f"OAuth failed: the authorization server did not answer{within} ({where})"
    detail = str(exc) or type(exc).__name__
    return f"OAuth failed: cannot reach the authorization server at {where}: {detail}"
