"""Asking the user: the request shown, the answers, and the call pipeline's authorizer.

:class:`PolicyAuthorizer` is the session's :class:`~caliban.permissions.policy.PermissionPolicy`
as the authorize stage's :class:`~caliban.calls.verdict.Authorizer`: it decides from each
call's subject and effects, and asks an :class:`Approver` (the REPL's prompt, the Agent SDK,
or :func:`deny_approver` / :class:`DenyingApprover` when headless) when the decision is "ask".
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, assert_never

from caliban.calls.bound import BoundCall
from caliban.calls.effects import NO_EFFECTS, Effects
from caliban.calls.verdict import ALLOW, AllowWith, Ask, Decided, Deny, Settled, with_hook
from caliban.config.settings import PermissionMode
from caliban.permissions.policy import Confined, Decision, PermissionPolicy
from caliban.permissions.rules import PATH_TOOLS, WEB_FETCH, RuleError, is_within
from caliban.permissions.saved_rules import RuleNotSaved, RulesFile
from caliban.permissions.updates import PermissionUpdate, PermissionUpdater
from caliban.tools.base import Invocation, Preview, ToolEnv, ToolOrigin
from caliban.tools.exit_plan_mode import UNATTENDED
from caliban.tools.origin import McpOrigin
from caliban.util.fsutil import resolved

__all__ = [
    "Approver",
    "DenyingApprover",
    "PermissionAnswer",
    "PermissionRequest",
    "PolicyAuthorizer",
    "denials_summary",
    "deny_approver",
    "describe",
    "headless_denial",
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
    suggestions: tuple[str, ...]
    """The rules "don't ask again" would add, e.g. ``Bash(npm test:*)`` and
    ``Bash(git push:*)`` for ``npm test && git push`` (one per command that needs one);
    empty: no rule can allow the call."""
    call_id: str = ""
    """The model's id for the call (``tool_use_id``)."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The call's input, as the model sent it (or as a PreToolUse hook changed it)."""
    effects: Effects = NO_EFFECTS
    """What the call would do (the command line it runs, the files it writes)."""
    edits_mode_allows: bool = False
    """acceptEdits mode would allow the call (a file edit in the project): the approver may
    offer "allow all edits during this session" instead of a rule."""
    persists: bool = False
    """"Don't ask again" keeps :attr:`suggestions` past the session where this front door
    saves rules (a command line's, a WebFetch host's, an MCP tool's, as Claude Code)."""
    saved_in: str | None = None
    """Where "don't ask again" keeps :attr:`suggestions` past the session
    (``.claude/settings.local.json``); None: for the session only."""

    def preview(self) -> Preview:
        """What the call would do: a file change, a command, or the input. Built only when
        someone looks (a headless denial never reads the file)."""
        return self.invocation.preview(self.env)


AnswerKind = Literal["allow_once", "allow_session", "deny"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionAnswer:
    behavior: AnswerKind
    pattern: str | None = None
    """For ``allow_session``: the rule to add instead of the request's suggestions. When
    there is none, or it does not parse, the call is allowed once and no rule is added."""
    reason: str | None = None
    """For ``deny``: the message the model gets, as is (see :func:`user_denial`); None
    gives a standard "the user declined" message."""
    updated_input: Mapping[str, Any] | None = None
    """For ``allow_once``: run the call with this input instead (the Agent SDK's
    ``updatedInput``). It is validated and decided again: a deny rule on it still wins."""
    mode: PermissionMode | None = None
    """For an allow: the session's permission mode from now on (a plan approval's choice);
    None leaves it."""
    updates: tuple[PermissionUpdate, ...] = ()
    """For an allow: the Agent SDK's ``updatedPermissions`` (rules, directories, mode, for
    the session or saved to a settings file; :mod:`caliban.permissions.updates`)."""

    @classmethod
    def allow_once(
        cls,
        updated_input: Mapping[str, Any] | None = None,
        *,
        mode: PermissionMode | None = None,
        updates: tuple[PermissionUpdate, ...] = (),
    ) -> PermissionAnswer:
        return cls(behavior="allow_once", updated_input=updated_input, mode=mode, updates=updates)

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
    if request.effects.runs is not None:
        return f"Running `{request.effects.runs.line}`"
    if request.tool_name in PATH_TOOLS and request.subject:
        return f"{request.tool_name} on {request.subject}"
    return f"Calling {request.tool_name}"


def headless_denial(request: PermissionRequest) -> str:
    """The model's message for a call denied because nobody can be asked, with the flag
    that would allow it (none approves a plan: plan mode stays read-only)."""
    if request.effects.leaves_plan_mode:
        return UNATTENDED
    start = (
        f"{describe(request)} requires approval ({request.reason}); caliban is running "
        "headless (-p)."
    )
    if not request.suggestions:
        # A line no rule can match: only allowing all of the tool would let it run.
        return (
            f"{start} Rewrite the command in a form caliban can check, or allow every "
            f"{request.tool_name} call with --allowed-tools '{request.tool_name}'."
        )
    rules = " ".join(f"'{rule}'" for rule in request.suggestions)
    where = "a [permissions] allow rule" if len(request.suggestions) == 1 else "allow rules"
    return f"{start} Allow it with --allowed-tools {rules} or {where}."


async def deny_approver(request: PermissionRequest) -> PermissionAnswer:
    """The approver for headless runs: whatever would ask is denied, with how to allow it."""
    return PermissionAnswer.deny(headless_denial(request))


@dataclass(kw_only=True)
class DenyingApprover:
    """:func:`deny_approver` that keeps each request it denied, so ``caliban -p`` can say at
    the end of a turn what was denied and which flag would allow it."""

    denied: list[PermissionRequest] = field(default_factory=list)

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        if not request.effects.leaves_plan_mode:  # no flag would have approved a plan
            self.denied.append(request)
        return await deny_approver(request)


def denials_summary(requests: Sequence[PermissionRequest]) -> str:
    """One paragraph for stderr: the calls denied for want of someone to ask, and the
    ``--allowed-tools`` rules that would let them run next time."""
    calls = list(dict.fromkeys(_call_label(r) for r in requests))
    rules = list(dict.fromkeys(rule for r in requests for rule in r.suggestions))
    unmatched = list(dict.fromkeys(r.tool_name for r in requests if not r.suggestions))
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


class PolicyAuthorizer:
    """``policy`` as the pipeline's authorizer, asking ``approver`` when it says to ask.

    Questions are asked one at a time; a call waiting for its turn is decided again first,
    so a "don't ask again" answer given meanwhile covers it. A command line's rule is also
    added to ``rules_file`` (:mod:`caliban.permissions.saved_rules`); when that fails,
    ``warn`` says why and the rule lasts the session. An allow's Agent SDK updates are
    applied (and saved where they say) for a folder that is ``trusted`` or not
    (:class:`~caliban.permissions.updates.PermissionUpdater`).
    """

    def __init__(
        self,
        policy: PermissionPolicy,
        approver: Approver,
        *,
        rules_file: RulesFile | None = None,
        trusted: bool = False,
        warn: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.policy = policy
        self.approver = approver
        self.rules_file = rules_file
        self.warn = warn
        self.updater = PermissionUpdater(
            policy=policy, trusted=trusted, warn=lambda text: self.warn(text)
        )
        self._one_question = asyncio.Lock()

    def decide(self, call: BoundCall) -> Decided:
        decision = self.policy.decide(
            call.tool.name,
            _subject(call),
            call.effects,
            read_only=call.tool.read_only,
            origin=call.tool.origin,
            confined=_confined(call),
        )
        return with_hook(_verdict(decision), call.hook)

    async def ask(self, call: BoundCall, question: Ask) -> Settled:
        """Once this call has the floor, ``question`` is decided again: an answer given
        meanwhile ("don't ask again") may cover it, and then nobody is asked."""
        async with self._one_question:
            verdict = self.decide(call)
            if not isinstance(verdict, Ask):
                return verdict
            return await self._ask(call, verdict)

    async def _ask(self, call: BoundCall, question: Ask) -> Settled:
        tool, subject = call.tool, _subject(call)
        suggestions = (
            (question.suggestion,)
            if question.suggestion
            else self.policy.suggestions(tool.name, subject, call.effects)
        )
        persists = bool(suggestions) and _kept_past_session(call, question)
        saved = self.rules_file if persists else None
        request = PermissionRequest(
            tool_name=tool.name,
            origin=tool.origin,
            invocation=call.invocation,
            env=call.env,
            subject=subject,
            reason=question.reason,
            suggestions=suggestions,
            call_id=call.id,
            arguments=call.arguments,
            effects=call.effects,
            edits_mode_allows=self._edits_mode_allows(call),
            persists=persists,
            saved_in=saved.relative if saved is not None else None,
        )
        answer = await self.approver(request)
        match answer.behavior:
            case "allow_once":
                settled = (
                    ALLOW
                    if answer.updated_input is None
                    else self._changed(call, answer.updated_input)
                )
                if not isinstance(settled, Deny):
                    if answer.mode is not None:
                        self.policy.mode = answer.mode
                    self.updater.apply(answer.updates)
                return settled
            case "allow_session":
                # No rule, or one that does not parse: this call was allowed, nothing more
                # (never a different rule than the one the user saw).
                if answer.pattern is not None:
                    with contextlib.suppress(RuleError):
                        self.policy.allow_for_session(answer.pattern)
                    return ALLOW
                for rule in request.suggestions:
                    with contextlib.suppress(RuleError):
                        self.policy.allow_for_session(rule)
                        if request.saved_in is not None:
                            self._save(rule)
                return ALLOW
            case "deny":
                return Deny(reason=answer.reason or user_denial(tool.name, None), by="user")
            case _:
                assert_never(answer.behavior)

    def _edits_mode_allows(self, call: BoundCall) -> bool:
        """Whether acceptEdits would allow ``call``, asked in default mode: a file edit
        in the project that no rule or protected path makes ask."""
        if self.policy.mode != "default" or call.effects.runs is not None:
            return False
        editing = dataclasses.replace(self.policy, mode="acceptEdits")
        decision = editing.decide(
            call.tool.name,
            _subject(call),
            call.effects,
            read_only=call.tool.read_only,
            origin=call.tool.origin,
        )
        return decision.behavior == "allow" and bool(call.effects.writes)

    def _save(self, rule: str) -> None:
        assert self.rules_file is not None
        try:
            self.rules_file.add_allow(rule)
        except RuleNotSaved as exc:
            self.warn(f"{rule} was not saved ({exc}); it holds for this session only")
            return
        if not self.rules_file.read_back:
            self.warn(
                f"{rule} was saved to {self.rules_file.relative}, but this folder is not "
                "trusted: new sessions apply it once you trust the folder (/trust)"
            )

    def _changed(self, call: BoundCall, arguments: Mapping[str, Any]) -> Settled:
        """An allow with a new input: the tool validates it and the policy decides on it
        again. A deny stands; an ask does not ask twice (the approver chose this input)."""
        changed = call.rebound(dict(arguments))
        if isinstance(changed, str):
            return Deny(
                reason=f"the input given with the approval is not valid for {call.tool.name}: "
                f"{changed}",
                by="user",
            )
        if isinstance(verdict := self.decide(changed), Deny):
            return verdict
        return AllowWith(call=changed)


def _kept_past_session(call: BoundCall, question: Ask) -> bool:
    """Whether "don't ask again" for ``call`` is saved, as Claude Code saves it: a command
    line's rule (one the parser understood: for any other line there is none), a WebFetch
    host's, an MCP tool's. Never a file's, nor a protected path's exact rule."""
    if question.suggestion:  # the exact rule a protected path asks for
        return False
    return (
        call.effects.runs is not None
        or call.tool.name == WEB_FETCH
        or isinstance(call.tool.origin, McpOrigin)
    )


def _confined(call: BoundCall) -> Confined | None:
    """Whether the command line ``call`` runs will be confined by the session's OS sandbox
    with ``autoAllowBashIfSandboxed`` on (None: not, or it runs no command line)."""
    command, sandbox = call.effects.runs, call.env.sandbox
    if command is None or sandbox is None:
        return None
    if not sandbox.auto_allows(command.analysis, outside_requested=command.outside_sandbox):
        return None
    return Confined(keeps_protected_paths=sandbox.keeps_protected_paths)


def _verdict(decision: Decision) -> Decided:
    """The policy's decision as a verdict: a deny names a rule, or else the mode."""
    match decision.behavior:
        case "allow":
            return ALLOW
        case "deny":
            return Deny(reason=decision.reason, by="rule" if decision.rule else "mode")
        case "ask":
            return Ask(reason=decision.reason, suggestion=decision.suggestion)
        case _:
            assert_never(decision.behavior)


def _subject(call: BoundCall) -> str | None:
    """The call's permission subject; a file tool's path made absolute and normalised
    against the directory the call is decided for."""
    subject = call.invocation.subject
    if subject is not None and call.tool.name in PATH_TOOLS:
        subject = str(resolved(call.cwd / Path(subject).expanduser()))
    return subject
