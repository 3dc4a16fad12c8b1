"""Asking the user: the request shown, the answers, and the loop's ``authorize`` seam.

:func:`make_authorize` wraps the session's :class:`~caliban.permissions.policy.PermissionPolicy`
into the agent loop's ``Authorize`` callback, asking an :class:`Approver` (the REPL's prompt,
or :func:`deny_approver` / :class:`DenyingApprover` when headless) whenever the decision is
"ask".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, assert_never

from caliban.permissions.policy import Decision, PermissionPolicy
from caliban.permissions.rules import PATH_TOOLS, RuleError, is_within, suggest_rule
from caliban.tools.base import ChangedInput, Invocation, Preview, ToolEnv, ToolOrigin
from caliban.util.fsutil import resolved

if TYPE_CHECKING:
    from caliban.agent import Authorize
    from caliban.tools.base import CallContext, Tool

__all__ = [
    "Approver",
    "DenyingApprover",
    "PermissionAnswer",
    "PermissionRequest",
    "denials_summary",
    "deny_approver",
    "describe",
    "headless_denial",
    "make_authorize",
    "user_denial",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionRequest:
    """What the user is asked about."""

    tool_name: str
    origin: ToolOrigin
    invocation: Invocation
    env: ToolEnv
    subject: str | None
    reason: str
    """Why it asks, to follow "caliban asks because …" (e.g. "default mode asks before Bash
    runs")."""
    suggestion: str
    """The rule "don't ask again this session" would add, e.g. ``Bash(git commit*)``."""
    call_id: str = ""
    """The model's id for the call (``tool_use_id``)."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The call's input, as the model sent it."""

    def preview(self) -> Preview:
        """What the call would do: a file change, a command, or the input. Built only when
        someone looks (a headless denial never reads the file)."""
        return self.invocation.preview(self.env)


AnswerKind = Literal["allow_once", "allow_session", "deny"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionAnswer:
    behavior: AnswerKind
    pattern: str | None = None
    """For ``allow_session``: the rule to add (default: the request's suggestion). When
    there is none, or it does not parse, the call is allowed once and no rule is added."""
    reason: str | None = None
    """For ``deny``: the message the model gets, as is (see :func:`user_denial`); None
    gives a standard "the user declined" message."""
    updated_input: Mapping[str, Any] | None = None
    """For ``allow_once``: run the call with this input instead (the Agent SDK's
    ``updatedInput``). It is validated and decided again: a deny rule on it still wins."""

    @classmethod
    def allow_once(cls, updated_input: Mapping[str, Any] | None = None) -> PermissionAnswer:
        return cls(behavior="allow_once", updated_input=updated_input)

    @classmethod
    def allow_session(cls, pattern: str | None = None) -> PermissionAnswer:
        return cls(behavior="allow_session", pattern=pattern)

    @classmethod
    def deny(cls, reason: str | None = None) -> PermissionAnswer:
        return cls(behavior="deny", reason=reason)


class Approver(Protocol):
    """Asks the user; the REPL shows the request and waits for an answer."""

    def __call__(self, request: PermissionRequest) -> Awaitable[PermissionAnswer]: ...


def describe(request: PermissionRequest) -> str:
    """A short phrase for what the call would do: ``Running `npm test```, ``Edit on /p/a.py``,
    ``Calling mcp__github__create_issue``."""
    if request.tool_name == "Bash" and request.subject:
        return f"Running `{request.subject}`"
    if request.tool_name in PATH_TOOLS and request.subject:
        return f"{request.tool_name} on {request.subject}"
    return f"Calling {request.tool_name}"


def headless_denial(request: PermissionRequest) -> str:
    """The model's message for a call denied because nobody can be asked, with the flag
    that would allow it."""
    start = (
        f"{describe(request)} requires approval ({request.reason}); caliban is running "
        "headless (-p)."
    )
    if not request.suggestion:
        # A line no rule can match: only allowing all of the tool would let it run.
        return (
            f"{start} Rewrite the command in a form caliban can check, or allow every "
            f"{request.tool_name} call with --allowed-tools '{request.tool_name}'."
        )
    return (
        f"{start} Allow it with --allowed-tools '{request.suggestion}' or a [permissions] "
        "allow rule."
    )


async def deny_approver(request: PermissionRequest) -> PermissionAnswer:
    """The approver for headless runs: whatever would ask is denied, with how to allow it."""
    return PermissionAnswer.deny(headless_denial(request))


@dataclass(kw_only=True)
class DenyingApprover:
    """:func:`deny_approver` that keeps each request it denied, so ``caliban -p`` can say at
    the end of a turn what was denied and which flag would allow it."""

    denied: list[PermissionRequest] = field(default_factory=list)

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        self.denied.append(request)
        return await deny_approver(request)


def denials_summary(requests: Sequence[PermissionRequest]) -> str:
    """One paragraph for stderr: the calls denied for want of someone to ask, and the
    ``--allowed-tools`` rules that would let them run next time."""
    calls = list(dict.fromkeys(_call_label(r) for r in requests))
    rules = list(dict.fromkeys(r.suggestion for r in requests if r.suggestion))
    unmatched = list(dict.fromkeys(r.tool_name for r in requests if not r.suggestion))
    count = len(requests)
    text = (
        f"{count} tool call{'s' if count != 1 else ''} needed approval and "
        f"{'were' if count != 1 else 'was'} denied (-p cannot ask): {', '.join(calls)}."
    )
    if rules:
        text += " To allow " + ("them" if not unmatched else "most of them") + ", run again with "
        text += "--allowed-tools " + " ".join(shlex.quote(rule) for rule in rules)
        text += " (or add the rules to [permissions] allow)."
    if unmatched:
        text += (
            f" No rule can allow {', '.join(unmatched)} as written (caliban could not check "
            "the command); only allowing the whole tool would."
        )
    return text


def _call_label(request: PermissionRequest) -> str:
    subject = request.subject
    if subject is None:
        return request.tool_name
    if request.tool_name in PATH_TOOLS and is_within(Path(subject), request.env.cwd):
        subject = os.path.relpath(subject, request.env.cwd)
    return f"{request.tool_name}({subject if len(subject) <= 60 else subject[:57] + '...'})"


def user_denial(tool_name: str, said: str | None) -> str:
    """The model's message when the user says no, with what the user typed, if anything."""
    text = f"the user declined this {tool_name} call, so nothing was run or changed."
    if said:
        return f"{text} The user said: {said}"
    return f"{text} Do not retry it; ask the user how to proceed."


def make_authorize(policy: PermissionPolicy, approver: Approver) -> Authorize:
    """The agent loop's ``authorize`` for ``policy``, asking ``approver`` when needed.

    Questions are asked one at a time; a call waiting for its turn is decided again first,
    so a "don't ask again" answer given meanwhile covers it.
    """
    lock = asyncio.Lock()

    def decide(tool: Tool, subject: str | None, ctx: CallContext) -> Decision:
        decision = policy.decide(
            tool.name, subject, read_only=tool.read_only, origin=tool.origin, cwd=ctx.env.cwd
        )
        return _with_hook(decision, ctx.hook_decision)

    async def authorize(
        tool: Tool, invocation: Invocation, ctx: CallContext
    ) -> str | ChangedInput | None:
        subject = _subject(tool.name, invocation, ctx.env.cwd)

        def check() -> Decision:
            return decide(tool, subject, ctx)

        decision = check()
        if decision.behavior == "ask":
            async with lock:
                decision = check()
                if decision.behavior == "ask":
                    return await _ask(tool, invocation, subject, decision, ctx)
        match decision.behavior:
            case "allow":
                return None
            case "deny":
                return decision.reason
            case "ask":
                raise AssertionError("asked above")
            case _:
                assert_never(decision.behavior)

    async def _ask(
        tool: Tool,
        invocation: Invocation,
        subject: str | None,
        decision: Decision,
        ctx: CallContext,
    ) -> str | ChangedInput | None:
        request = PermissionRequest(
            tool_name=tool.name,
            origin=tool.origin,
            invocation=invocation,
            env=ctx.env,
            subject=subject,
            reason=decision.reason,
            suggestion=decision.suggestion or suggest_rule(tool.name, subject, policy.project_root),
            call_id=ctx.call_id,
            arguments=ctx.arguments,
        )
        answer = await approver(request)
        match answer.behavior:
            case "allow_once":
                if answer.updated_input is not None:
                    return changed_input(tool, answer.updated_input, ctx)
                return None
            case "allow_session":
                # No rule, or one that does not parse: this call was allowed, nothing more
                # (never a different rule than the one the user saw).
                with contextlib.suppress(RuleError):
                    policy.allow_for_session(answer.pattern or request.suggestion)
                return None
            case "deny":
                return answer.reason or user_denial(tool.name, None)
            case _:
                assert_never(answer.behavior)

    def changed_input(
        tool: Tool, arguments: Mapping[str, Any], ctx: CallContext
    ) -> str | ChangedInput:
        """An allow with a new input: the tool validates it and the policy decides on it
        again. A deny stands; an ask does not ask twice (the approver chose this input)."""
        bound = tool.bind(dict(arguments))
        if isinstance(bound, str):
            return f"the input given with the approval is not valid for {tool.name}: {bound}"
        decision = decide(tool, _subject(tool.name, bound, ctx.env.cwd), ctx)
        if decision.behavior == "deny":
            return decision.reason
        return ChangedInput(invocation=bound, arguments=arguments)

    return authorize


def _with_hook(decision: Decision, hook: str | None) -> Decision:
    """A PreToolUse hook's ``allow`` spares the question and its ``ask`` forces one; a deny
    (a rule, plan mode) stands either way."""
    if hook == "allow" and decision.behavior == "ask":
        return Decision(behavior="allow", reason="a PreToolUse hook allowed it")
    if hook == "ask" and decision.behavior == "allow":
        return Decision(behavior="ask", reason="a PreToolUse hook asks first")
    return decision


def _subject(tool_name: str, invocation: Invocation, cwd: Path) -> str | None:
    """The call's permission subject; a file tool's path made absolute and normalised."""
    subject = invocation.subject
    if subject is not None and tool_name in PATH_TOOLS:
        subject = str(resolved(cwd / Path(subject).expanduser()))
    return subject
