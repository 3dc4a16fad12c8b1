"""Authorizers for tests: refuse the calls a function names, allow the rest."""

from __future__ import annotations

from collections.abc import Callable

from caliban.calls.bound import BoundCall
from caliban.calls.verdict import ALLOW, Ask, Decided, Deny, Settled


class Refusing:
    """Denies (by a rule) every call ``why`` gives a reason for; never asks."""

    def __init__(self, why: Callable[[BoundCall], str | None]) -> None:
        self.why = why

    def decide(self, call: BoundCall) -> Decided:
        reason = self.why(call)
        return ALLOW if reason is None else Deny(reason=reason, by="rule")

    async def ask(self, call: BoundCall, question: Ask) -> Settled:
        raise AssertionError("Refusing never asks")
