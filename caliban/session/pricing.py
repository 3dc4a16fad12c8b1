"""Approximate list prices, to show what a session costs. Unknown models cost ``None``.

Prices are per model family (the longest matching name prefix wins), in USD per million
tokens; they are estimates for display, not billing.
"""

from __future__ import annotations

from caliban.messages import Usage

# input, output, cache read, cache write
PRICES: dict[str, tuple[float, float, float, float]] = {
    "claude-opus-4-0": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-1": (15.0, 75.0, 1.5, 18.75),
    "claude-opus": (5.0, 25.0, 0.5, 6.25),
    "claude-sonnet": (3.0, 15.0, 0.3, 3.75),
    "claude-haiku": (1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": (0.8, 4.0, 0.08, 1.0),
    "gpt-5": (1.25, 10.0, 0.125, 1.25),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.25),
    "gpt-5-nano": (0.05, 0.4, 0.005, 0.05),
    "gpt-4.1": (2.0, 8.0, 0.5, 2.0),
    "gpt-4o": (2.5, 10.0, 1.25, 2.5),
}


def price_for(model: str) -> tuple[float, float, float, float] | None:
    """The price row whose key is the longest prefix of ``model``."""
    matches = [key for key in PRICES if model.startswith(key)]
    return PRICES[max(matches, key=len)] if matches else None


def cost_usd(model: str, usage: Usage) -> float | None:
    price = price_for(model)
    if price is None:
        return None
    tokens = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
    return round(sum(n * p for n, p in zip(tokens, price, strict=True)) / 1_000_000, 6)
