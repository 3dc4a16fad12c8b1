"""What a session has used and cost: the tokens of every request, per model that served it.

The agent loop records each response's usage here (the main agent's, every sub-agent's, side
requests such as WebFetch's question and compaction's summary), under the model that
answered it; ``/cost``, the toolbar, the headless result (``total_cost_usd``, ``modelUsage``)
and ``--max-budget-usd`` read it. Each model's tokens are priced at that model's price, so a
session that switched models (``/model``, ``--fallback-model``, a sub-agent's own model) is
not repriced at the current one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from caliban.messages import Usage
from caliban.session.pricing import cost_usd

UsageByModel = Mapping[str, Usage]
"""Tokens per model id, in the order the models were first used."""


class UsageLedger:
    """A session's usage per model; the loop records into it, everything else reads it."""

    __slots__ = ("_by_model",)

    def __init__(self, by_model: UsageByModel | None = None) -> None:
        self._by_model: dict[str, Usage] = dict(by_model or {})

    def record(self, model: str, usage: Usage) -> None:
        """Add one request's ``usage`` under the ``model`` that served it."""
        by_model = self._by_model
        earlier = by_model.get(model)
        by_model[model] = usage if earlier is None else earlier + usage

    def by_model(self, *, since: UsageByModel | None = None) -> dict[str, Usage]:
        """Tokens per model; with ``since`` (an earlier :meth:`by_model`), only what was
        used after it."""
        if not since:
            return dict(self._by_model)
        return {
            model: usage - since[model] if model in since else usage
            for model, usage in self._by_model.items()
            if since.get(model) != usage
        }

    def total(self, *, since: UsageByModel | None = None) -> Usage:
        """Every model's tokens together."""
        return sum(self.by_model(since=since).values(), Usage())

    def cost_usd(self, *, since: UsageByModel | None = None) -> float | None:
        """What the requests cost, each model's tokens at its own price; ``None`` when a
        model's price is unknown (the sum would say less than was spent)."""
        return total_cost(self.by_model(since=since))


def total_cost(by_model: UsageByModel) -> float | None:
    """The cost of ``by_model``'s tokens, each model's at its own price (``None``: a price
    is unknown)."""
    costs = [cost_usd(model, usage) for model, usage in by_model.items()]
    if None in costs:
        return None
    # sum() of no costs is the int 0, printed `0` as Claude Code prints it (not `0.0`).
    return round(sum(cost for cost in costs if cost is not None), 6)


class SpendingLimit:
    """``--max-budget-usd``: what the loop asks after each response (``Agent.over_budget``).

    It reads the ledger — what was spent since the limit was set — and nothing a listener
    keeps. With a model whose price caliban does not know the limit cannot be kept: that is
    said once (``warn``), and it is not enforced.
    """

    def __init__(
        self, ledger: UsageLedger, limit_usd: float, *, warn: Callable[[str], None]
    ) -> None:
        self.ledger = ledger
        self.limit_usd = limit_usd
        self.since = ledger.by_model()
        self._warn: Callable[[str], None] | None = warn

    def __call__(self) -> str | None:
        """Why the run must stop now, or ``None``."""
        spent = self.ledger.by_model(since=self.since)
        cost = total_cost(spent)
        if cost is None:
            if self._warn is not None:
                unknown = ", ".join(m for m, u in spent.items() if cost_usd(m, u) is None)
                self._warn(f"--max-budget-usd is not enforced: the price of {unknown} is unknown")
                self._warn = None
            return None
        if cost < self.limit_usd:
            return None
        amount = f"{self.limit_usd:.10f}".rstrip("0").rstrip(".")  # as given: 0.0001, not 1e-04
        return f"Reached maximum budget (${amount})"
