"""Chat Completions over HTTP, with ``httpx2`` and without the ``openai`` SDK.

caliban encodes its request bodies itself and reads the stream's chunks as plain JSON, so
the SDK carried only HTTP for us, and importing it cost about 1.2 s of CPU on the critical
path of ``caliban -p`` (``httpx2``: 0.2 s). :class:`ChatClient` does what the SDK did on
that path (the rest is :mod:`caliban.providers.http`: timeouts, proxies, connection reuse,
error bodies):

- the URL ``{base_url}/chat/completions``, the base URL defaulting to OpenAI's
  ``https://api.openai.com/v1`` (compatible servers' base URLs end in ``/v1`` too);
- ``Authorization: Bearer`` with the key, and ``OpenAI-Organization`` / ``OpenAI-Project``
  from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``, which the SDK reads; ``content-type``,
  ``accept``, a ``user-agent``; none of the SDK's ``x-stainless-*`` telemetry;
- errors carry the ``x-request-id`` header;
- the chunk stream: it ends at ``data: [DONE]``; a stream that ends without it was cut short
  (:class:`~caliban.providers.retry.IncompleteStream`); a chunk carrying ``error`` is a
  :class:`ChatStreamError`, as the SDK raises it;
- short JSON requests to the server (:meth:`ChatClient.fetch_json`, asking llama.cpp,
  Ollama or vLLM for a model's context window) with the same key and connection pool.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any, Final

import httpx2

from caliban.providers.body import RequestBody
from caliban.providers.guard import DEFAULT_LIMITS, StreamLimits
from caliban.providers.http import StreamingClient, read_bounded
from caliban.providers.retry import IncompleteStream

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
ORGANIZATION_ENV: Final = "OPENAI_ORG_ID"
PROJECT_ENV: Final = "OPENAI_PROJECT_ID"

log = logging.getLogger(__name__)


class ChatStreamError(Exception):
    """A chunk in the stream carried an ``error`` object instead of choices."""

    def __init__(self, error: Any) -> None:
        message = error.get("message") if isinstance(error, Mapping) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"  # the SDK's words
        super().__init__(message)
        self.error = error
        self.message = message


def chat_url(base_url: str | None) -> str:
    return f"{(base_url or DEFAULT_BASE_URL).rstrip('/')}/chat/completions"


def account_headers(environ: Mapping[str, str]) -> dict[str, str]:
    """The organization and project the SDK would name, from the environment."""
    headers = {}
    if organization := environ.get(ORGANIZATION_ENV):
        headers["openai-organization"] = organization
    if project := environ.get(PROJECT_ENV):
        headers["openai-project"] = project
    return headers


class ChatClient(StreamingClient):
    """Posts Chat Completions requests and streams their chunks; one connection pool."""

    request_id_header = "x-request-id"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        timeout: float,
        limits: StreamLimits = DEFAULT_LIMITS,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.auth = {"authorization": f"Bearer {api_key}", **(extra_headers or {})}
        super().__init__(url=chat_url(base_url), headers=self.auth, timeout=timeout, limits=limits)

    async def chunks(self, body: RequestBody) -> AsyncGenerator[Mapping[str, Any], None]:
        """Post ``body`` (a streaming request) and yield its chunks as decoded JSON."""
        done = False
        async with aclosing(self.post(body)) as sent:
            async for sse, _ in sent:
                # After [DONE], the body is read to its end (as the SDK drains it), so the
                # connection can be used again.
                done = done or sse.data.startswith("[DONE]")
                if done:
                    continue
                chunk = json.loads(sse.data)
                if isinstance(chunk, Mapping) and chunk.get("error"):
                    raise ChatStreamError(chunk["error"])
                if isinstance(chunk, Mapping):  # anything else is nothing the API sends
                    yield chunk
        if not done:
            raise IncompleteStream("the stream ended without [DONE]")

    async def fetch_json(
        self, method: str, url: str, body: Mapping[str, Any] | None, *, limit: int
    ) -> Any:
        """One short request with the client's key (the caller bounds its time); the decoded
        JSON, or ``None`` for any failure (a 404 from a server without that endpoint, a body
        over ``limit`` bytes...)."""
        try:
            request = self._http.build_request(
                method, url, json=None if body is None else dict(body), headers=self.auth
            )
            response = await self._http.send(request, stream=True)
            try:
                if not response.is_success:
                    return None
                data = await read_bounded(response, limit + 1)
            finally:
                await response.aclose()
            return json.loads(data) if len(data) <= limit else None
        except (httpx2.HTTPError, httpx2.InvalidURL, ValueError) as exc:
            log.debug("%s %s: %s", method, url, exc)
            return None
