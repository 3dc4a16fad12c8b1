from caliban.messages import Usage
from caliban.session.pricing import cost_usd


def test_cost_by_family_with_cache_tokens() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000)
    assert cost_usd("claude-sonnet-5-5", usage) == 3.0 + 1.5 + 0.6
    assert cost_usd("gpt-5-mini-2025-08-07", usage) == 0.25 + 0.2 + 0.05


def test_unknown_model_has_no_price() -> None:
    assert cost_usd("llama-3.1-8b-instruct", Usage(input_tokens=10)) is None
