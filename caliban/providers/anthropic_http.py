"""The Messages API over HTTP, with ``httpx2`` and without the ``anthropic`` SDK.

caliban encodes its request bodies itself and reads the stream's events as plain JSON, so
the SDK carried only HTTP for us, and importing it (thousands of pydantic type modules) cost
2-4 s of CPU on the critical path of ``caliban -p``. :class:`MessagesClient` does what the
SDK did on that path:

- the URL ``{base_url}/v1/messages``; a base URL that already ends in ``/v1`` gets only
  ``/messages`` (the SDK would post to ``/v1/v1/messages``, a 404);
- the credential: an API key as ``x-api-key`` (as Claude Code sends it), or
  ``ANTHROPIC_AUTH_TOKEN`` as ``Authorization: Bearer``;
- ``anthropic-version``, ``content-type``, ``accept``, a ``user-agent``, and the extra
  headers of ``ANTHROPIC_CUSTOM_HEADERS`` (``Name: value`` lines), which the SDK and Claude
  Code both honour; no ``anthropic-beta`` (nothing caliban sends needs one) and none of the
  SDK's ``x-stainless-*`` telemetry;
- a status other than 2xx raises :class:`ApiStatusError` with the error body's ``type`` and
  ``message`` (or the body's text, bounded, when it is not the API's JSON), the
  ``request-id``, and the headers (``retry-after``, ``x-should-retry``); a redirect is not
  followed (it would carry the key to another address) but reported with its target;
- the event stream (:mod:`caliban.providers.sse`, behind the stream guard): ``ping``
  skipped, an ``error`` event raised as :class:`ApiStatusError` (status 200, its ``type``
  tells), every other event handed on as a decoded JSON object;
- timeouts (5 s to connect, the provider's timeout for the rest), proxies and CA bundles
  from the environment (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, ``SSL_CERT_FILE``...,
  through httpx2's ``trust_env``, as the SDK's client reads them), and one connection pool
  per provider, so a session's requests reuse a kept-alive connection.

Retries are not here: :func:`caliban.providers.retry.with_retries` does them, with events.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx2

from caliban import __version__
from caliban.providers.guard import DEFAULT_LIMITS, StreamLimits
from caliban.providers.sse import server_sent_events

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
API_VERSION: Final = "2026-10-21"
"""The ``anthropic-version`` the SDK (2.14) sends: the request shapes the encoder writes."""
CUSTOM_HEADERS_ENV: Final = "ANTHROPIC_CUSTOM_HEADERS"
CONNECT_TIMEOUT: Final = 5.0
"""Seconds to open a connection (the SDK's default); reads wait the provider's timeout."""
MAX_ERROR_BODY: Final = 64 * 1024
"""Bytes of an error response read (a proxy's HTML page can be large)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Credential:
    """What authenticates a request: an API key, or a bearer token (a gateway's, or
    ``ANTHROPIC_AUTH_TOKEN``)."""

    secret: str
    bearer: bool = False

    def headers(self) -> dict[str, str]:
        if self.bearer:
            return {"authorization": f"Bearer {self.secret}"}
        return {"x-api-key": self.secret}


class ApiStatusError(Exception):
    """The API answered with an error: an HTTP status other than 2xx, or an ``error`` event
    in the stream (``status`` 200)."""

    def __init__(
        self,
        *,
        status: int,
        error_type: str | None,
        message: str | None,
        headers: Mapping[str, str],
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{status} {error_type or ''}: {message or ''}")
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers
        self.request_id = request_id


def messages_url(base_url: str | None) -> str:
    """Where to post: ``/v1/messages`` under ``base_url``, whether or not it ends in ``/v1``."""
    base = (base_url or DEFAULT_BASE_URL).rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def custom_headers(value: str | None) -> dict[str, str]:
    """``ANTHROPIC_CUSTOM_HEADERS``: one ``Name: value`` per line, as the SDK reads it (a
    line without a colon is skipped)."""
    headers: dict[str, str] = {}
    for line in (value or "").splitlines():
        name, colon, header = line.partition(":")
        if colon and name.strip():
            headers[name.strip()] = header.strip()
    return headers


def status_error(status: int, body: bytes, headers: Mapping[str, str]) -> ApiStatusError:
    """The error a response with ``status`` and ``body`` stands for."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    error_type, message = _error_fields(data)
    if message is None and text:
        message = text  # not the API's JSON: a proxy's page, a server's plain text
    if 300 <= status < 400:
        where = headers.get("location") or "another address"
        error_type = None
        message = f"the server redirected to {where}: set the base URL to the new address"
    return ApiStatusError(
        status=status,
        error_type=error_type,
        message=message,
        headers=headers,
        request_id=_request_id(headers, data),
    )


def event_error(data: str, headers: Mapping[str, str]) -> ApiStatusError:
    """The error an ``error`` event in the stream reports."""
    try:
        decoded: Any = json.loads(data)
    except ValueError:
        decoded = None
    error_type, message = _error_fields(decoded)
    return ApiStatusError(
        status=200,
        error_type=error_type,
        message=message or data or None,
        headers=headers,
        request_id=_request_id(headers, decoded),
    )


def _error_fields(data: Any) -> tuple[str | None, str | None]:
    """``(type, message)`` of an error body: the API's ``{"error": {"type", "message"}}``,
    or the ``message`` / ``detail`` other servers put at the top."""
    if not isinstance(data, Mapping):
        return None, None
    error = data.get("error")
    if isinstance(error, Mapping):
        error_type, message = error.get("type"), error.get("message")
        return (
            error_type if isinstance(error_type, str) else None,
            message if isinstance(message, str) else None,
        )
    for key in ("error", "message", "detail"):
        if isinstance(value := data.get(key), str):
            return None, value
    return None, None


def _request_id(headers: Mapping[str, str], data: Any) -> str | None:
    found = headers.get("request-id")
    if found is None and isinstance(data, Mapping) and isinstance(data.get("request_id"), str):
        found = data["request_id"]
    return found


class MessagesClient:
    """Posts Messages API requests and streams their events; one connection pool."""

    def __init__(
        self,
        *,
        base_url: str | None,
        credential: Credential,
        timeout: float,
        limits: StreamLimits = DEFAULT_LIMITS,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = messages_url(base_url)
        self.limits = limits
        self.headers = {
            "accept": "application/json",
            "content-type": "application/json",
            "user-agent": f"caliban/{__version__}",
            "anthropic-version": API_VERSION,
            **credential.headers(),
            **(extra_headers or {}),
        }
        self._http = httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
            follow_redirects=False,
            trust_env=True,
        )

    async def events(self, body: bytes) -> AsyncGenerator[Mapping[str, Any], None]:
        """Post ``body`` (a streaming request) and yield its events as decoded JSON."""
        request = self._http.build_request("POST", self.url, content=body, headers=self.headers)
        response = await self._http.send(request, stream=True)
        try:
            if not response.is_success:
                raise status_error(
                    response.status_code, await _read_bounded(response), response.headers
                )
            async for sse in server_sent_events(response.aiter_bytes(), limits=self.limits):
                if sse.event == "ping":
                    continue
                if sse.event == "error":
                    raise event_error(sse.data, response.headers)
                event = json.loads(sse.data)
                if not isinstance(event, Mapping):
                    continue  # not an event object: nothing the API sends
                if event.get("type") == "error":  # a server that names no events
                    raise event_error(sse.data, response.headers)
                yield event
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self._http.aclose()


async def _read_bounded(response: httpx2.Response) -> bytes:
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            return body[:MAX_ERROR_BODY]
    return body
