"""What may happen to a call: :data:`Verdict`, and the :class:`Authorizer` that gives it.

``Allow | AllowWith | Deny | Ask``. An authorizer's :meth:`~Authorizer.decide` says allow,
deny or ask without waiting for anyone; when it says ask, :meth:`~Authorizer.ask` puts the
question (to the user, the Agent SDK, or nobody when headless) and settles it: allow, allow
with another input, or deny. :func:`authorize` is the two in order: the pipeline's authorize
stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from caliban.calls.bound import BoundCall, HookWord

DeniedBy = Literal["rule", "mode", "hook", "user"]
"""Who refused a call: a permission rule, the mode (plan), a PreToolUse hook, or the user
(or whoever answers for them: the Agent SDK, a headless run that cannot ask)."""


@dataclass(frozen=True, slots=True)
class Allow:
    """The call runs as bound."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AllowWith:
    """The call runs with the input an approver gave instead (validated, and decided again:
    a deny rule on it still wins)."""

    call: BoundCall


@dataclass(frozen=True, kw_only=True, slots=True)
class Deny:
    """The call does not run; the model reads ``reason``."""

    reason: str
    by: DeniedBy


@dataclass(frozen=True, kw_only=True, slots=True)
class Ask:
    """Someone must say yes first."""

    reason: str
    """Why, to follow "caliban asks because …" (e.g. "default mode asks before Bash runs")."""
    suggestion: str | None = None
    """The rule that would allow the call, when only a specific one will do (a protected
    file); None lets the asker propose one."""


ALLOW = Allow()

Verdict = Allow | AllowWith | Deny | Ask
Decided = Allow | Deny | Ask
"""What :meth:`Authorizer.decide` says."""
Settled = Allow | AllowWith | Deny
"""What :meth:`Authorizer.ask` (and :func:`authorize`) says: nobody is left to ask."""


class Authorizer(Protocol):
    """The authorize stage's collaborator (the session's permission policy and approver:
    :class:`caliban.permissions.approval.PolicyAuthorizer`)."""

    def decide(self, call: BoundCall) -> Decided:
        """Allow, deny or ask, from the call's tool, subject and effects and the hooks'
        word (:attr:`BoundCall.hook`, see :func:`with_hook`); waits for nobody."""
        ...

    async def ask(self, call: BoundCall, question: Ask) -> Settled:
        """Put ``question`` to whoever answers, one question at a time, and settle it."""
        ...


async def authorize(authorizer: Authorizer, call: BoundCall) -> Settled:
    """Decide on ``call``, and ask when the decision is to ask."""
    verdict = authorizer.decide(call)
    if isinstance(verdict, Ask):
        return await authorizer.ask(call, verdict)
    return verdict


def with_hook(verdict: Decided, hook: HookWord | None) -> Decided:
    """A PreToolUse hook's ``allow`` spares the question and its ``ask`` forces one; a deny
    (a rule, plan mode) stands either way."""
    if hook == "allow" and isinstance(verdict, Ask):
        return ALLOW
    if hook == "ask" and isinstance(verdict, Allow):
        return Ask(reason="a PreToolUse hook asks first")
    return verdict


class AllowAll:
    """The authorizer of a session without permissions: everything runs."""

    def decide(self, call: BoundCall) -> Decided:
        return ALLOW

    async def ask(self, call: BoundCall, question: Ask) -> Settled:
        return ALLOW


ALLOW_ALL: Authorizer = AllowAll()


__all__ = [
    "ALLOW",
    "ALLOW_ALL",
    "Allow",
    "AllowAll",
    "AllowWith",
    "Ask",
    "Authorizer",
    "Decided",
    "DeniedBy",
    "Deny",
    "Settled",
    "Verdict",
    "authorize",
    "with_hook",
]
