"""Authorizers for tests: refuse the calls a function names, allow the rest; and an
approver that gives one answer to every question, keeping the requests."""

from __future__ import annotations

from collections.abc import Callable

from caliban.calls.bound import BoundCall
from caliban.calls.verdict import ALLOW, Ask, Decided, Deny, Settled
from caliban.permissions.approval import PermissionAnswer, PermissionRequest


class Refusing:
    """Denies (by a rule) every call ``why`` gives a reason for; never asks."""

    def __init__(self, why: Callable[[BoundCall], str | None]) -> None:
        self.why = why

    def decide(self, call: BoundCall) -> Decided:
        reason = self.why(call)
        return ALLOW if reason is None else Deny(reason=reason, by="rule")

    async def ask(self, call: BoundCall, question: Ask) -> Settled:
        raise AssertionError("Refusing never asks")


class Answering:
    """An approver answering every question with ``answer``; ``requests`` are the questions."""

    def __init__(self, answer: PermissionAnswer) -> None:
        self.answer = answer
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        self.requests.append(request)
        return self.answer
