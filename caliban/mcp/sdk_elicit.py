"""Elicitation over stream-json: the Agent SDK answers a server's question.

With ``--input-format stream-json`` Claude Code forwards an MCP server's elicitation to its
client as a ``control_request`` (subtype ``elicitation``: ``mcp_server_name``, ``message``,
``mode``, and ``requested_schema`` or ``url`` and ``elicitation_id``) and gives the server
the ``action`` and ``content`` of the ``control_response``; an error response (the Python
Agent SDK answers every subtype it does not know with one) cancels. Recorded from Claude
Code 2.1.197 in ``tests/fixtures/claude_code/elicitation_*``. Without stream-json input
nobody can answer and the manager's default declines at once.

:class:`StdioElicitor` does the same for caliban. Whatever is not a well-formed answer
cancels, and so does stdin closing while a question waits; the wait is bounded by the
server's ``tool_timeout`` (:func:`caliban.mcp.elicit.sdk_callback`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from caliban.mcp.elicit import ElicitAnswer, Elicitation

__all__ = ["StdioElicitor", "answer_from", "request_frame"]

CANCEL = ElicitAnswer(action="cancel")


class StdioElicitor:
    """An :data:`~caliban.mcp.elicit.Elicitor` that asks the Agent SDK over stdio.
    ``send`` writes one frame on stdout; the stdin reader hands each ``control_response``
    to :meth:`answer` and calls :meth:`close` at the end of input."""

    def __init__(self, *, send: Callable[[dict[str, Any]], None]) -> None:
        self._send = send
        self._pending: dict[str, asyncio.Future[Mapping[str, Any] | None]] = {}
        self._closed = False

    async def __call__(self, request: Elicitation) -> ElicitAnswer:
        if self._closed:
            return CANCEL
        request_id = str(uuid.uuid4())
        waiting: asyncio.Future[Mapping[str, Any] | None] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[request_id] = waiting
        try:
            self._send(request_frame(request_id, request))
            response = await waiting
        except asyncio.CancelledError:  # the tool timed out, or the turn was interrupted
            self._send({"type": "control_cancel_request", "request_id": request_id})
            raise
        finally:
            self._pending.pop(request_id, None)
        return answer_from(response)

    def answer(self, frame: Mapping[str, Any]) -> bool:
        """Take a ``control_response`` line; False when it answers no waiting question."""
        response = frame.get("response")
        if not isinstance(response, dict):
            return False
        request_id = response.get("request_id")
        waiting = self._pending.get(request_id) if isinstance(request_id, str) else None
        if waiting is None or waiting.done():
            return False
        waiting.set_result(response)
        return True

    def close(self) -> None:
        """The input ended: questions waiting, and any asked later, are cancelled."""
        self._closed = True
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_result(None)


def request_frame(request_id: str, request: Elicitation) -> dict[str, Any]:
    """The ``control_request`` Claude Code sends for an elicitation."""
    body: dict[str, Any] = {
        "subtype": "elicitation",
        "mcp_server_name": request.server,
        "message": request.message,
        "mode": "url" if request.url else "form",
    }
    if request.url:
        body["url"] = request.url
    if request.elicitation_id:
        body["elicitation_id"] = request.elicitation_id
    if request.schema is not None:
        body["requested_schema"] = dict(request.schema)
    return {"type": "control_request", "request_id": request_id, "request": body}


def answer_from(response: Mapping[str, Any] | None) -> ElicitAnswer:
    """The answer in a ``control_response``: its ``action`` (and for ``accept`` its
    ``content`` of strings, numbers, booleans and string lists); anything else cancels."""
    if response is None or response.get("subtype") != "success":
        return CANCEL
    body = response.get("response")
    action = body.get("action") if isinstance(body, dict) else None
    if action == "decline" or action == "cancel":
        return ElicitAnswer(action=action)
    if action != "accept" or not isinstance(body, dict):
        return CANCEL
    content = body.get("content", {})
    if not isinstance(content, dict) or not all(map(_form_value, content.values())):
        return CANCEL
    return ElicitAnswer(action="accept", content=content)


def _form_value(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return value is None or isinstance(value, str | int | float | bool)
