"""A scripted fake model server speaking the real Anthropic and OpenAI streaming wire formats.

It listens on 127.0.0.1 and answers ``POST /v1/messages`` (Anthropic Messages API, SSE) and
``POST /v1/chat/completions`` (OpenAI Chat Completions, SSE), one scripted step per request,
in order, whichever API asks. Point the real SDKs at it: Anthropic ``base_url=server.url``
(or ``ANTHROPIC_BASE_URL``), OpenAI ``base_url=server.url + "/v1"`` (or ``OPENAI_BASE_URL``).
Every request is captured (method, path, lower-cased headers, parsed JSON body). A request
beyond the script gets HTTP 500 (with ``retry-after: 0``) whose message is
``fake server: unexpected extra request``.

In tests, use the ``fake_model_server`` fixture (tests/conftest.py) or
``with FakeModelServer([...]) as server:``. As a script::

    python tests/fake_model_server.py --port 0 --script steps.json [--requests-log out.jsonl]

prints its base URL (``http://127.0.0.1:PORT``) as the first stdout line, then serves until
SIGTERM/SIGINT or until its parent process exits. ``GET /_fake/requests`` returns the
captured requests as JSON; ``--requests-log`` appends each one to a JSON-lines file.

Step format
-----------
The script file is a JSON list of steps (or ``{"steps": [...]}``). A step is an object; in
Python a step may also be a callable taking the :class:`CapturedRequest` and returning one.

``{"text": "Hello"}``
    A text reply, streamed in small pieces.
``{"text": "Reading.", "tool_calls": [{"name": "Read", "arguments": {"path": "a"}}]}``
    Tool calls (optional ``"id"``; ``"arguments"`` may be a raw string, even invalid JSON),
    after optional text. Several calls are parallel calls.
``"usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,``
``"cache_creation_input_tokens": 0}``
    Reported usage (OpenAI: ``prompt_tokens`` is the sum of the three input figures and
    ``prompt_tokens_details.cached_tokens`` the cache reads). Defaults: 10 in, 5 out.
``"stop_reason": "max_tokens"``
    Override the stop reason (Anthropic names; mapped to OpenAI ``finish_reason``).
``{"status": 429, "retry_after": 0, "message": "slow down", "error_type": "..."}``
    An HTTP error with the API's error body; optional ``retry_after`` (seconds) and
    ``retry_after_ms`` headers. ``"body": {...}`` sends exactly that JSON instead (a real
    server's error, recorded), ``"body_text": "..."`` that text (a proxy's HTML page).
``"headers": {"request-id": "req_1"}``
    Extra response headers (any step that answers).
``"delay": 0.5``
    Wait this long before answering (any step). ``"chunk_delay": 0.05`` waits between events.
``{"hang": true, "text": "partial"}``
    Stream the start of a reply (and any text), then hang until the client disconnects or
    the server stops: for cancellation / SIGINT tests.
``{"disconnect": true, "text": "partial"}``
    Stream the start of a reply, then drop the connection mid-stream.
``{"stream_error": "overloaded_error", "text": ""}``
    Stream the start of a reply, then an in-stream error event.
``{"sse": [{...}, "[DONE]"]}``
    Exactly these SSE payloads (Anthropic: ``event:`` is each object's ``type``; OpenAI:
    ``data:`` lines, strings sent as they are).
``{"raw": b"data: ..."}`` (or ``"raw_b64"`` in script files)
    Exactly these bytes as the response body (HTTP 200, ``text/event-stream``), for streams
    that are not UTF-8 or not SSE at all.
``{"web_search": {"query": "q", "results": [{"title": "T", "url": "https://x"}]}, "text": "A"}``
    (Anthropic) The server-side web search: a ``server_tool_use`` block, its
    ``web_search_tool_result`` (each result with ``encrypted_content``), then the text with
    a ``citations_delta``; the usage counts one ``web_search_requests``.
``{"thinking": "Let me see.", "signature": "sig", "text": "Hi"}``
    Reasoning before the reply. Anthropic: a ``thinking`` block streamed as
    ``thinking_delta`` pieces, then its ``signature_delta`` (``"signature"``, default
    ``"fake-signature"``); ``{"redacted_thinking": "opaque"}`` adds a ``redacted_thinking``
    block. OpenAI: ``reasoning_content`` deltas (``"reasoning_key": "reasoning"`` for
    Ollama's name).
``"repeat": 3``
    (script files) the step stands for three identical steps.

Other endpoints
---------------
``FakeModelServer(endpoints={"GET /props": {...}, "POST /api/show": {...}})`` answers those
requests (method, space, path without the query) with the given JSON, with
``(status, json)``, or with what a callable given the :class:`CapturedRequest` returns
(``None``: 404); any other GET, and a POST to an unknown path that is not a model
endpoint, gets a 404. These requests (a provider asking for a model's context window) are
recorded in ``server.probes``, not ``server.requests``, and use no step. Script files may
give ``{"steps": [...], "endpoints": {...}}``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

UNEXPECTED = "fake server: unexpected extra request"


@dataclass(frozen=True)
class CapturedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float = 0.0
    """``time.time()`` when the request arrived (for start-up benchmarks)."""
    text: str = ""
    """The body as sent (UTF-8 decoded), for assertions on the exact bytes."""
    peer: str = ""
    """The client's ``host:port``: requests on one kept-alive connection share it."""

    @property
    def api(self) -> str:
        route = self.path.split("?", 1)[0]
        return "openai" if route.endswith("/chat/completions") else "anthropic"

    @property
    def tool_names(self) -> list[str]:
        tools = (self.body or {}).get("tools") or []
        return [t.get("name") or t.get("function", {}).get("name") for t in tools]


Step = Mapping[str, Any] | Callable[[CapturedRequest], Mapping[str, Any]]

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
FINISH_REASONS = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_ids = itertools.count(1)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _arguments_json(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


# ---------------------------------------------------------------------------- Anthropic


def anthropic_events(
    step: Mapping[str, Any], model: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(head, tail): the reply's SSE payloads, split where a broken stream stops."""
    usage = {"input_tokens": 10, "output_tokens": 5, **step.get("usage", {})}
    calls = step.get("tool_calls", [])
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"} | {"output_tokens": 1}
    head: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": f"msg_fake_{next(_ids)}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        }
    ]
    index = 0
    if (thinking := step.get("thinking")) is not None:
        head.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        )
        for piece in _pieces(thinking, 16):
            head.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece},
                }
            )
        signature = step.get("signature", "fake-signature")
        head.append(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": signature},
            }
        )
        head.append({"type": "content_block_stop", "index": index})
        index += 1
    if (redacted := step.get("redacted_thinking")) is not None:
        head.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "redacted_thinking", "data": redacted},
            }
        )
        head.append({"type": "content_block_stop", "index": index})
        index += 1
    if (search := step.get("web_search")) is not None:
        index = _web_search_blocks(head, index, search)
    text_index = index
    if text := step.get("text", ""):
        head.append(
            {
                "type": "content_block_start",
                "index": text_index,
                "content_block": {"type": "text", "text": ""},
            }
        )
        head.append({"type": "ping"})
        for piece in _pieces(text, 16):
            head.append(
                {
                    "type": "content_block_delta",
                    "index": text_index,
                    "delta": {"type": "text_delta", "text": piece},
                }
            )
        if search is not None and search.get("results"):
            first = search["results"][0]
            head.append(
                {
                    "type": "content_block_delta",
                    "index": text_index,
                    "delta": {
                        "type": "citations_delta",
                        "citation": {
                            "type": "web_search_result_location",
                            "cited_text": text[:20],
                            "url": first["url"],
                            "title": first.get("title", ""),
                            "encrypted_index": "fake-encrypted-index",
                        },
                    },
                }
            )
        index += 1
    tail: list[dict[str, Any]] = []
    if text:
        tail.append({"type": "content_block_stop", "index": text_index})
    for call in calls:
        call_id = call.get("id") or f"toolu_fake_{next(_ids)}"
        tail.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": call_id,
                    "name": call["name"],
                    "input": {},
                },
            }
        )
        for piece in ["", *_pieces(_arguments_json(call), 12)]:
            tail.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
        tail.append({"type": "content_block_stop", "index": index})
        index += 1
    stop = step.get("stop_reason") or ("tool_use" if calls else "end_turn")
    end_usage: dict[str, Any] = {"output_tokens": usage["output_tokens"]}
    if search is not None:
        end_usage["server_tool_use"] = {"web_search_requests": 1}
    tail.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": end_usage,
        }
    )
    tail.append({"type": "message_stop"})
    return head, tail


def _web_search_blocks(head: list[dict[str, Any]], index: int, search: Mapping[str, Any]) -> int:
    """A ``server_tool_use`` block (the search the model asked for) and its
    ``web_search_tool_result``, as the API streams them; returns the next block index."""
    use_id = search.get("id") or f"srvtoolu_fake_{next(_ids)}"
    head.append(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {
                "type": "server_tool_use",
                "id": use_id,
                "name": "web_search",
                "input": {},
            },
        }
    )
    for piece in ["", *_pieces(json.dumps({"query": search.get("query", "")}), 12)]:
        head.append(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
        )
    head.append({"type": "content_block_stop", "index": index})
    results = [
        {
            "type": "web_search_result",
            "title": result.get("title", ""),
            "url": result["url"],
            "encrypted_content": f"fake-encrypted-{n}",
            "page_age": None,
        }
        for n, result in enumerate(search.get("results", []))
    ]
    head.append(
        {
            "type": "content_block_start",
            "index": index + 1,
            "content_block": {
                "type": "web_search_tool_result",
                "tool_use_id": use_id,
                "content": results,
            },
        }
    )
    head.append({"type": "content_block_stop", "index": index + 1})
    return index + 2


def anthropic_error(status: int, error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


# ---------------------------------------------------------------------------- OpenAI


def openai_events(
    step: Mapping[str, Any], model: str, *, include_usage: bool
) -> tuple[list[Any], list[Any]]:
    chunk_id = f"chatcmpl-fake{next(_ids)}"
    created = int(time.time())

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
        }

    head: list[Any] = [chunk({"role": "assistant", "content": ""})]
    reasoning_key = step.get("reasoning_key", "reasoning_content")
    for piece in _pieces(step.get("thinking") or "", 16):
        head.append(chunk({reasoning_key: piece}))
    for piece in _pieces(step.get("text", ""), 16):
        head.append(chunk({"content": piece}))
    tail: list[Any] = []
    calls = step.get("tool_calls", [])
    for index, call in enumerate(calls):
        call_id = call.get("id") or f"call_fake_{next(_ids)}"
        tail.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in _pieces(_arguments_json(call), 12):
            tail.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    stop = step.get("stop_reason") or ("tool_use" if calls else "end_turn")
    tail.append(chunk({}, FINISH_REASONS.get(stop, "stop")))
    if include_usage:
        usage = {"input_tokens": 10, "output_tokens": 5, **step.get("usage", {})}
        read = usage.get("cache_read_input_tokens", 0)
        prompt = usage["input_tokens"] + read + usage.get("cache_creation_input_tokens", 0)
        tail.append(
            {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": usage["output_tokens"],
                    "total_tokens": prompt + usage["output_tokens"],
                    "prompt_tokens_details": {"cached_tokens": read},
                },
            }
        )
    tail.append("[DONE]")
    return head, tail


def openai_error(status: int, error_type: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": str(status)}}


# ---------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # Small SSE writes would otherwise wait on Nagle + delayed ACK (40 ms each).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.connections.discard(self.connection)

    def do_GET(self) -> None:
        if self.path.startswith("/_fake/requests"):
            payload = [asdict(r) for r in self.server.owner.requests]
            self._json(200, payload)
        elif self.path.startswith("/_fake/health"):
            self._json(200, {"ok": True})
        else:
            self._endpoint(self._captured("GET", None))

    def _captured(self, method: str, body: Any, raw: bytes = b"") -> CapturedRequest:
        return CapturedRequest(
            method=method,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=time.time(),
            text=raw.decode("utf-8", "replace"),
            peer=f"{self.client_address[0]}:{self.client_address[1]}",
        )

    def _endpoint(self, request: CapturedRequest) -> None:
        owner = self.server.owner
        with owner._lock:
            owner.probes.append(request)
        answer = owner.endpoints.get(f"{request.method} {request.path.split('?', 1)[0]}")
        if callable(answer):
            answer = answer(request)
        if answer is None:
            self._json(404, {"error": {"message": f"fake server: no {request.method} {self.path}"}})
            return
        status, payload = answer if isinstance(answer, tuple) else (200, answer)
        with contextlib.suppress(OSError):  # the client gave up waiting (a timeout test)
            self._json(status, payload)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        request = self._captured("POST", body, raw)
        route = self.path.split("?", 1)[0]  # Claude Code posts to /v1/messages?beta=true
        if not (route.endswith("/messages") or route.endswith("/chat/completions")):
            self._endpoint(request)
            return
        owner = self.server.owner
        step = owner._next(request)
        is_openai = request.api == "openai"
        if step is None:
            make_error = openai_error if is_openai else anthropic_error
            self._json(500, make_error(500, "api_error", UNEXPECTED), {"retry-after": "0"})
            return
        if (delay := step.get("delay")) and owner.stopping.wait(float(delay)):
            return
        if status := step.get("status"):
            self._error(int(status), step, is_openai)
            return
        self._stream(step, request, is_openai)

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._body(status, json.dumps(payload).encode(), "application/json", headers)

    def _body(
        self, status: int, data: bytes, content_type: str, headers: Mapping[str, str] | None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, step: Mapping[str, Any], is_openai: bool) -> None:
        error_type = step.get("error_type") or ERROR_TYPES.get(status, "api_error")
        message = step.get("message") or f"fake {error_type}"
        headers = dict(step.get("headers", {}))
        if "retry_after" in step:
            headers["retry-after"] = str(step["retry_after"])
        if "retry_after_ms" in step:
            headers["retry-after-ms"] = str(step["retry_after_ms"])
        if "body_text" in step:
            self._body(status, str(step["body_text"]).encode(), "text/html", headers)
            return
        make_error = openai_error if is_openai else anthropic_error
        body = step["body"] if "body" in step else make_error(status, error_type, message)
        self._json(status, body, headers)

    def _stream(self, step: Mapping[str, Any], request: CapturedRequest, is_openai: bool) -> None:
        model = str((request.body or {}).get("model", "fake-model"))
        if "raw" in step or "raw_b64" in step:
            raw = step["raw"] if "raw" in step else base64.b64decode(step["raw_b64"])
            self._raw(raw.encode() if isinstance(raw, str) else raw)
            return
        if "sse" in step:
            head, tail = list(step["sse"]), []
        elif is_openai:
            include = bool(((request.body or {}).get("stream_options") or {}).get("include_usage"))
            head, tail = openai_events(step, model, include_usage=include)
        else:
            head, tail = anthropic_events(step, model)
        broken = step.get("hang") or step.get("disconnect") or step.get("stream_error")
        events = head if broken else head + tail
        if step.get("stream_error"):
            kind = str(step["stream_error"])
            events.append(
                openai_error(500, kind, f"fake {kind}")
                if is_openai
                else anthropic_error(500, kind, f"fake {kind}")
            )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for key, value in step.get("headers", {}).items():
            self.send_header(key, value)
        self.end_headers()
        pause = float(step.get("chunk_delay", 0))
        try:
            for event in events:
                self._chunk(_sse(event, is_openai))
                if pause and self.server.owner.stopping.wait(pause):
                    return
            if step.get("disconnect"):
                self._drop()
                return
            if step.get("hang"):
                self._hang()
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away
            self.close_connection = True

    def _raw(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _hang(self) -> None:
        self.close_connection = True
        while not self.server.owner.stopping.wait(0.02):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return
                except OSError:
                    return


def _sse(event: Any, is_openai: bool) -> bytes:
    if isinstance(event, str):
        return f"data: {event}\n\n".encode()
    data = json.dumps(event)
    if is_openai:
        return f"data: {data}\n\n".encode()
    name = "error" if event.get("type") == "error" else event.get("type", "message")
    return f"event: {name}\ndata: {data}\n\n".encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeModelServer
    connections: set[socket.socket]


class FakeModelServer:
    """The scripted server. Start it with ``with FakeModelServer(steps) as server:``."""

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        requests_log: Path | None = None,
        endpoints: Mapping[str, Any] | None = None,
    ) -> None:
        self.steps: list[Step] = list(steps)
        self.endpoints: dict[str, Any] = dict(endpoints or {})
        """Answers to other requests: ``"GET /props"`` → JSON, or ``(status, JSON)``."""
        self.probes: list[CapturedRequest] = []
        """Requests to other endpoints (context-window questions), in order."""
        self.requests: list[CapturedRequest] = []
        self.unexpected: list[CapturedRequest] = []
        self.requests_log = requests_log
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._served = 0
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._httpd.connections = set()
        self._thread: threading.Thread | None = None

    # -- scripting

    def add(self, *steps: Step) -> FakeModelServer:
        """Append steps to the script."""
        with self._lock:
            self.steps.extend(steps)
        return self

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self.steps) - self._served

    def _next(self, request: CapturedRequest) -> Mapping[str, Any] | None:
        with self._lock:
            self.requests.append(request)
            if self.requests_log is not None:
                with self.requests_log.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(asdict(request)) + "\n")
            if self._served >= len(self.steps):
                self.unexpected.append(request)
                return None
            step = self.steps[self._served]
            self._served += 1
        return step(request) if callable(step) else step

    # -- addresses

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def base_url(self, api: str) -> str:
        return self.openai_base_url if api == "openai" else self.anthropic_base_url

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- life cycle

    def start(self) -> FakeModelServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        for connection in list(self._httpd.connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------- script mode


def load_endpoints(path: Path) -> dict[str, Any]:
    """The ``"endpoints"`` of a script file (``{}`` when it has none)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data.get("endpoints") or {}) if isinstance(data, dict) else {}


def load_script(path: Path) -> list[dict[str, Any]]:
    """Steps from a script file, with ``"repeat"`` expanded."""
    data = json.loads(path.read_text(encoding="utf-8"))
    raw = data["steps"] if isinstance(data, dict) else data
    steps: list[dict[str, Any]] = []
    for step in raw:
        count = int(step.get("repeat", 1))
        steps.extend([{k: v for k, v in step.items() if k != "repeat"}] * count)
    return steps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted fake Anthropic/OpenAI server.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--script", type=Path, help="JSON file of steps")
    parser.add_argument("--requests-log", type=Path, help="append captured requests (JSON lines)")
    args = parser.parse_args(argv)
    steps = load_script(args.script) if args.script else []
    endpoints = load_endpoints(args.script) if args.script else {}
    server = FakeModelServer(
        steps,
        host=args.host,
        port=args.port,
        requests_log=args.requests_log,
        endpoints=endpoints,
    )
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    server.start()
    print(server.url, flush=True)
    parent = os.getppid()
    while not done.wait(0.2):
        if os.getppid() != parent:  # the parent died: we were re-parented
            break
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
