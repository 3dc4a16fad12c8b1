"""The Messages API over HTTP, with ``httpx2`` and without the ``anthropic`` SDK.

caliban encodes its request bodies itself and reads the stream's events as plain JSON, so
the SDK carried only HTTP for us, and importing it (thousands of pydantic type modules) cost
2-4 s of CPU on the critical path of ``caliban -p``. :class:`MessagesClient` does what the
SDK did on that path (the rest is :mod:`caliban.providers.http`: timeouts, proxies,
connection reuse, error bodies):

- the URL ``{base_url}/v1/messages``; a base URL that already ends in ``/v1`` gets only
  ``/messages`` (the SDK would post to ``/v1/v1/messages``, a 404);
- the credential: an API key as ``x-api-key`` (as Claude Code sends it), or
  ``ANTHROPIC_AUTH_TOKEN`` as ``Authorization: Bearer``;
- ``anthropic-version``, ``content-type``, ``accept``, a ``user-agent``, and the extra
  headers of ``ANTHROPIC_CUSTOM_HEADERS`` (``Name: value`` lines), which the SDK and Claude
  Code both honour; no ``anthropic-beta`` (nothing caliban sends needs one) and none of the
  SDK's ``x-stainless-*`` telemetry;
- errors carry the ``request-id`` header;
- the event stream: ``ping`` skipped, an ``error`` event raised as
  :class:`~caliban.providers.http.ApiStatusError` (status 200, its ``type`` tells), every
  other event handed on as a decoded JSON object.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final

from caliban.providers.body import RequestBody
from caliban.providers.guard import DEFAULT_LIMITS, StreamLimits
from caliban.providers.http import StreamingClient, event_error

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
API_VERSION: Final = "2026-10-21"
"""The ``anthropic-version`` the SDK (2.14) sends: the request shapes the encoder writes."""
CUSTOM_HEADERS_ENV: Final = "ANTHROPIC_CUSTOM_HEADERS"


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


class MessagesClient(StreamingClient):
    """Posts Messages API requests and streams their events; one connection pool."""

    request_id_header = "request-id"

    def __init__(
        self,
        *,
        base_url: str | None,
        credential: Credential,
        timeout: float,
        limits: StreamLimits = DEFAULT_LIMITS,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        headers = {
            "anthropic-version": API_VERSION,
            **credential.headers(),
            **(extra_headers or {}),
        }
        super().__init__(
            url=messages_url(base_url), headers=headers, timeout=timeout, limits=limits
        )

    async def events(self, body: RequestBody) -> AsyncGenerator[Mapping[str, Any], None]:
        """Post ``body`` (a streaming request) and yield its events as decoded JSON."""
        async with aclosing(self.post(body)) as sent:
            async for sse, response in sent:
                if sse.event == "ping":
                    continue
                event = None if sse.event == "error" else json.loads(sse.data)
                if event is None or (isinstance(event, Mapping) and event.get("type") == "error"):
                    # (an error event, also from a server that names no events)
                    raise event_error(
                        sse.data, response.headers, request_id_header=self.request_id_header
                    )
                if isinstance(event, Mapping):  # anything else is nothing the API sends
                    yield event
