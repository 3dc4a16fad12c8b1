"""What the providers' HTTP transports share: a streaming endpoint's client, and API errors.

The providers post the request bodies they encoded themselves over ``httpx2`` (the SDKs'
own HTTP client) instead of importing the ``anthropic`` (2-4 s of CPU) and ``openai``
(about 1.2 s) SDKs, which carried nothing else for them on the critical path of
``caliban -p``. Shared here, as the SDKs did it:

- :class:`StreamingClient`: one ``httpx2.AsyncClient`` per provider, a kept-alive pool;
  5 s to connect, the provider's timeout for the rest; proxies and CA bundles from the
  environment
  (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, ``SSL_CERT_FILE``,
  ``SSL_CERT_DIR``, through ``trust_env``); redirects are not followed (a key would go
  with them) but reported with their target;
- a status other than 2xx is an :class:`ApiStatusError` carrying the error body's
  ``type``, ``code`` and ``message`` (the API's JSON, in the shapes Anthropic, OpenAI, vLLM,
  llama.cpp and others use; else the body's text, at most 64 KiB read), the request id, and
  the headers (``retry-after``, ``x-should-retry``);
- the request body sent in its chunks (:class:`~caliban.providers.body.RequestBody`), with
  its ``Content-Length``;
- the response body as server-sent events (:mod:`caliban.providers.sse`), behind the
  stream guard.

Retries are not here: :func:`caliban.providers.retry.with_retries` does them, with events.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import httpx2

from caliban import __version__
from caliban.providers.body import RequestBody
from caliban.providers.guard import StreamLimits
from caliban.providers.retry import (
    Failure,
    IncompleteStream,
    classify_status,
    connection_failure,
    malformed_failure,
)
from caliban.providers.sse import ServerSentEvent, server_sent_events

CONNECT_TIMEOUT: Final = 5.0
"""Seconds to open a connection (the SDKs' default); reads wait the provider's timeout."""
MAX_ERROR_BODY: Final = 64 * 1024
"""Bytes of an error response read (a proxy's HTML page can be large)."""
USER_AGENT: Final = f"caliban/{__version__}"


@dataclass(kw_only=True, eq=False)
class ApiStatusError(Exception):
    """The API answered with an error: an HTTP status other than 2xx, or an error event in
    the stream (``status`` 200)."""

    status: int
    error_type: str | None
    message: str | None
    headers: Mapping[str, str]
    code: str | None = None
    request_id: str | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.error_type or self.code or ''}: {self.message or ''}"


def classify(exc: Exception) -> Failure | None:
    """An API or transport exception as a :class:`Failure`; None if neither (a bug)."""
    match exc:
        case ApiStatusError():
            return classify_status(
                exc.status,
                error_type=exc.error_type or exc.code,
                message=exc.message,
                headers=exc.headers,
                code=exc.code,
                request_id=exc.request_id,
            )
        case httpx2.UnsupportedProtocol() | httpx2.InvalidURL():
            return Failure(kind="fatal", summary=f"bad base URL: {exc}")
        case httpx2.TransportError() | IncompleteStream():
            return connection_failure(exc)
        case json.JSONDecodeError():
            return malformed_failure(exc)
    return None


class StreamingClient:
    """One API endpoint that answers a POST with server-sent events: its URL, the headers
    every request carries, the stream's limits, and one connection pool."""

    request_id_header: ClassVar[str]
    """The response header that carries the request's id."""

    def __init__(
        self, *, url: str, headers: Mapping[str, str], timeout: float, limits: StreamLimits
    ) -> None:
        self.url = url
        self.limits = limits
        self.headers = {
            "accept": "application/json",
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            **headers,
        }
        self._http = httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
            follow_redirects=False,
            trust_env=True,
        )

    async def post(
        self, body: RequestBody
    ) -> AsyncGenerator[tuple[ServerSentEvent, httpx2.Response], None]:
        """POST ``body`` and yield the response's events (each with the response, whose
        headers an error event reports); raise :class:`ApiStatusError` for a status other
        than 2xx."""
        # Sent chunk by chunk, with its length: not a chunked upload, which some
        # OpenAI-compatible servers reject.
        headers = {**self.headers, "content-length": str(body.size)}
        request = self._http.build_request("POST", self.url, content=body, headers=headers)
        response = await self._http.send(request, stream=True)
        try:
            if not response.is_success:
                raise status_error(
                    response.status_code,
                    await read_bounded(response),
                    response.headers,
                    request_id_header=self.request_id_header,
                )
            async for event in server_sent_events(response.aiter_bytes(), limits=self.limits):
                yield event, response
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self._http.aclose()


async def read_bounded(response: httpx2.Response, limit: int = MAX_ERROR_BODY) -> bytes:
    """At most ``limit`` bytes of the body."""
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= limit:
            return body[:limit]
    return body


def status_error(
    status: int, body: bytes, headers: Mapping[str, str], *, request_id_header: str
) -> ApiStatusError:
    """The error a response with ``status`` and ``body`` stands for."""
    text = body.decode("utf-8", "replace").strip()
    data = _json_or_none(text)
    error_type, code, message = error_fields(data)
    if message is None and text:
        message = text  # not an API's JSON: a proxy's page, a server's plain text
    if 300 <= status < 400:
        where = headers.get("location") or "another address"
        error_type = code = None
        message = f"the server redirected to {where}: set the base URL to the new address"
    return ApiStatusError(
        status=status,
        error_type=error_type,
        code=code,
        message=message,
        headers=headers,
        request_id=request_id(headers, data, header=request_id_header),
    )


def event_error(data: str, headers: Mapping[str, str], *, request_id_header: str) -> ApiStatusError:
    """The error an error event in a 200 stream reports."""
    decoded = _json_or_none(data)
    error_type, code, message = error_fields(decoded)
    return ApiStatusError(
        status=200,
        error_type=error_type,
        code=code,
        message=message or data or None,
        headers=headers,
        request_id=request_id(headers, decoded, header=request_id_header),
    )


def error_fields(data: Any) -> tuple[str | None, str | None, str | None]:
    """``(type, code, message)`` of an error body: ``{"error": {...}}`` (Anthropic, OpenAI,
    llama.cpp), else the fields at the top (vLLM), or a ``detail`` (FastAPI servers)."""
    if not isinstance(data, Mapping):
        return None, None, None
    error = data.get("error")
    if isinstance(error, str):
        return None, None, error
    fields = error if isinstance(error, Mapping) else data
    message = fields.get("message")
    if not isinstance(message, str) and isinstance(data.get("detail"), str):
        message = data["detail"]
    error_type, code = fields.get("type"), fields.get("code")
    if fields is data and error_type == "error":  # Anthropic's envelope, without its error
        error_type = None
    return (
        error_type if isinstance(error_type, str) else None,
        str(code) if isinstance(code, (str, int)) and not isinstance(code, bool) else None,
        message if isinstance(message, str) else None,
    )


def request_id(headers: Mapping[str, str], data: Any, *, header: str) -> str | None:
    """The request's id: the ``header`` the API sends it in, else a ``request_id`` in the
    body."""
    found = headers.get(header)
    if found is None and isinstance(data, Mapping) and isinstance(data.get("request_id"), str):
        found = data["request_id"]
    return found


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
