"""``--permission-prompt-tool stdio``: the Agent SDK answers permission questions.

The Claude Agent SDKs (Python ``claude-agent-sdk``, TypeScript ``@anthropic-ai/claude-agent-sdk``)
start the CLI with stream-json on both sides and this flag when they have a ``can_use_tool``
callback. Whenever a call would ask, :class:`StdioApprover` writes a ``control_request``
(subtype ``can_use_tool``) on stdout and waits for the ``control_response`` with the same
``request_id`` on stdin (shapes recorded from Claude Code 2.1.197 in
``tests/fixtures/claude_code/permission_stdio_*``).

Whatever is not a well-formed answer denies: an error response, an unknown behavior, an
allow without an ``updatedInput`` object (Claude Code rejects that too), and stdin closing
while a question waits. Waiting is bounded only by the session: the SDK's user may take time,
and an interrupt cancels the turn, the question with it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from caliban.permissions.approval import PermissionAnswer, PermissionRequest, describe
from caliban.permissions.rules import Rule, RuleError
from caliban.permissions.updates import UpdateError, parse_updates

__all__ = ["STDIN_CLOSED", "StdioApprover", "answer_from", "request_frame"]

STDIN_CLOSED = (
    "Tool permission request failed: the input closed before the permission prompt tool "
    "answered, so nothing was run."
)


class StdioApprover:
    """An :class:`~caliban.permissions.approval.Approver` that asks the Agent SDK over
    stdio. ``send`` writes one frame on stdout; the stdin reader hands each
    ``control_response`` to :meth:`answer` and calls :meth:`close` at the end of input.
    ``on_interrupt`` runs when a denial asks to stop the turn (``"interrupt": true``)."""

    def __init__(
        self,
        *,
        send: Callable[[dict[str, Any]], None],
        on_interrupt: Callable[[], None] = lambda: None,
    ) -> None:
        self._send = send
        self._on_interrupt = on_interrupt
        self._pending: dict[str, tuple[asyncio.Future[dict[str, Any]], PermissionRequest]] = {}
        self._closed = False

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        if self._closed:
            return PermissionAnswer.deny(STDIN_CLOSED)
        request_id = str(uuid.uuid4())
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (waiting, request)
        try:
            self._send(request_frame(request_id, request))
            response = await waiting
        except asyncio.CancelledError:
            # An interrupt: the SDK may drop its question (the TypeScript SDK aborts the
            # callback's signal; the Python SDK ignores the frame).
            self._send({"type": "control_cancel_request", "request_id": request_id})
            raise
        finally:
            self._pending.pop(request_id, None)
        answer, interrupt = answer_from(response, request)
        if interrupt:
            self._on_interrupt()
        return answer

    def answer(self, frame: Mapping[str, Any]) -> bool:
        """Take a ``control_response`` line; False when it answers no waiting question
        (an unknown or already answered ``request_id``), which then changes nothing."""
        response = frame.get("response")
        if not isinstance(response, dict):
            return False
        request_id = response.get("request_id")
        entry = self._pending.get(request_id) if isinstance(request_id, str) else None
        if entry is None or entry[0].done():
            return False
        entry[0].set_result(response)
        return True

    def close(self) -> None:
        """The input ended: every waiting question, and any later one, is denied."""
        self._closed = True
        for waiting, _ in list(self._pending.values()):
            if not waiting.done():
                waiting.set_result({"subtype": "closed"})


def request_frame(request_id: str, request: PermissionRequest) -> dict[str, Any]:
    """The ``control_request`` Claude Code writes (plus ``decision_reason``, a field of the
    SDK's type: why caliban asks). For a plan (ExitPlanMode) it has no description and no
    suggestions, as Claude Code's has none."""
    asked: dict[str, Any] = {
        "subtype": "can_use_tool",
        "tool_name": request.tool_name,
        "display_name": request.tool_name,
        "input": dict(request.arguments),
    }
    if not request.effects.leaves_plan_mode:
        asked["description"] = describe(request)
        asked["permission_suggestions"] = _suggestions(request)
    asked["tool_use_id"] = request.call_id
    asked["decision_reason"] = request.reason
    return {"type": "control_request", "request_id": request_id, "request": asked}


def answer_from(
    response: Mapping[str, Any], request: PermissionRequest
) -> tuple[PermissionAnswer, bool]:
    """The answer in a ``control_response`` body, and whether the SDK asked to interrupt;
    anything but a well-formed allow denies."""
    match response.get("subtype"):
        case "closed":
            return PermissionAnswer.deny(STDIN_CLOSED), False
        case "error":
            error = response.get("error")
            detail = error if isinstance(error, str) and error else "no reason given"
            return PermissionAnswer.deny(f"Tool permission request failed: {detail}"), False
        case "success":
            pass
        case _:
            return _malformed("an unknown response subtype"), False
    body = response.get("response")
    if not isinstance(body, dict):
        return _malformed("no response object"), False
    match body.get("behavior"):
        case "allow":
            updated = body.get("updatedInput")
            if not isinstance(updated, dict):
                return _malformed("an allow without an updatedInput object"), False
            try:
                updates = parse_updates(body.get("updatedPermissions"))
            except UpdateError:
                updates = ()  # as Claude Code: the call is allowed, no update applies
            changed = None if updated == dict(request.arguments) else updated
            return PermissionAnswer.allow_once(changed, updates=updates), False
        case "deny":
            message = body.get("message")
            reason = message if isinstance(message, str) and message else None
            return PermissionAnswer.deny(reason), body.get("interrupt") is True
        case _:
            return _malformed("a behavior other than allow or deny"), False


def _malformed(what: str) -> PermissionAnswer:
    return PermissionAnswer.deny(
        f"Tool permission request failed: the permission prompt tool's answer had {what}, "
        "so the call was denied."
    )


def _suggestions(request: PermissionRequest) -> list[dict[str, Any]]:
    """The SDK's ``PermissionUpdate`` list for "don't ask again", as Claude Code 2.1.197
    offers it: a file edit acceptEdits would allow switches the session to it; a command
    line's rules (one per command needing one, in one entry), a host's or an MCP tool's rule
    go to ``localSettings`` (any other rule to the session), ``Tool(content)`` split into
    its parts."""
    if request.edits_mode_allows:
        return [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
    entries: list[dict[str, Any]] = []
    for suggestion in request.suggestions:
        try:
            rule = Rule.parse(suggestion)
        except RuleError:
            return []
        entry: dict[str, Any] = {"toolName": rule.tool}
        if rule.pattern is not None:
            entry["ruleContent"] = rule.pattern
        entries.append(entry)
    if not entries:
        return []
    destination = "localSettings" if request.persists else "session"
    return [{"type": "addRules", "rules": entries, "behavior": "allow", "destination": destination}]
