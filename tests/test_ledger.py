"""The session's usage ledger: usage per model that served it, priced per model; the
budget (``--max-budget-usd``) reads it, with no printer attached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_sessions import make_session

from caliban.agent import NOT_RUN_OVER_BUDGET, Agent
from caliban.events import AgentEvent, Notice
from caliban.headless.frames import FrameBuilder, TurnOutcome
from caliban.messages import Usage
from caliban.providers.scripted import Reported, ScriptedProvider, reply, tool_call
from caliban.repl.info import session_cost
from caliban.session.ledger import UsageLedger
from caliban.session.pricing import cost_usd
from caliban.tools.base import ToolEnv
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

TOKENS = Usage(input_tokens=10_000)
OPUS, HAIKU = "claude-opus-4-1", "claude-haiku-4-5"  # $15 and $1 per million input tokens


def test_the_ledger_adds_up_per_model_and_says_what_came_since() -> None:
    ledger = UsageLedger()
    ledger.record("a", Usage(input_tokens=1))
    ledger.record("b", Usage(output_tokens=2))
    before = ledger.by_model()
    ledger.record("a", Usage(input_tokens=3))
    ledger.record("c", Usage(input_tokens=4))
    assert ledger.by_model() == {
        "a": Usage(input_tokens=4),
        "b": Usage(output_tokens=2),
        "c": Usage(input_tokens=4),
    }
    assert ledger.by_model(since=before) == {"a": Usage(input_tokens=3), "c": Usage(input_tokens=4)}
    assert ledger.total() == Usage(input_tokens=8, output_tokens=2)
    assert ledger.cost_usd() is None  # models without a price: the sum would be too low
    priced = UsageLedger({OPUS: TOKENS, HAIKU: TOKENS})
    assert priced.cost_usd() == 0.16


async def test_a_session_that_switches_model_half_way_is_priced_per_model(
    project: Path,
) -> None:
    session = make_session(project, ScriptedProvider(["first", "second"], usage=TOKENS), model=OPUS)
    await session.run("on opus")
    session.set_model(HAIKU)
    await session.run("on haiku")
    assert session.ledger.by_model() == {OPUS: TOKENS, HAIKU: TOKENS}
    # Each request at the price of the model that served it: not twice Haiku's $0.01.
    assert session_cost(session) == 0.16
    frames: list[dict[str, Any]] = []
    builder = FrameBuilder(sink=frames.append, usage_by_model=session.ledger.by_model)
    builder.begin_turn()
    result = builder.result(TurnOutcome(kind="success"))
    assert result["total_cost_usd"] == 0.16
    assert {m: u["costUSD"] for m, u in result["modelUsage"].items()} == {OPUS: 0.15, HAIKU: 0.01}


async def test_side_requests_and_compaction_are_in_the_ledger(project: Path) -> None:
    provider = ScriptedProvider([Reported("an answer", Usage(input_tokens=7))])
    ledger = UsageLedger()
    agent = Agent(
        provider=provider,
        model="side-model",
        system_prompt="s",
        toolset=ToolList([]),
        env=ToolEnv(cwd=project, project_root=project),
        ledger=ledger,
    )
    assert await agent.ask_model("a question") == "an answer"
    assert ledger.by_model() == {"side-model": Usage(input_tokens=7)}


async def test_the_budget_stops_the_run_with_no_printer_attached(project: Path) -> None:
    """Only the session and its ledger: no FrameBuilder, no listener at all."""
    provider = ScriptedProvider(
        [reply("Working.", tool_call("Echo", {"text": "a"})), "never asked"], usage=TOKENS
    )
    session = make_session(project, provider, model=OPUS)
    assert session.listeners == []
    session.limit_spending(0.1)
    result = await session.run("spend")
    assert (result.subtype, result.error) == (
        "error_max_budget_usd",
        "Reached maximum budget ($0.1)",
    )
    assert len(provider.requests) == 1  # the response that crossed the limit was the last
    [unrun] = session.conversation.messages[-1].parts
    assert NOT_RUN_OVER_BUDGET in unrun.text  # type: ignore[union-attr]
    assert cost_usd(OPUS, session.ledger.total()) == 0.15


async def test_a_budget_counts_from_when_it_was_set_and_warns_once_on_unknown_prices(
    project: Path,
) -> None:
    events: list[AgentEvent] = []
    provider = ScriptedProvider(["a", "b", "c", "d"], usage=TOKENS)
    session = make_session(project, provider, model=HAIKU)  # $0.01 a request
    session.ledger.record(OPUS, TOKENS)  # a resumed session's earlier spending: $0.15
    session.add_listener(events.append)
    session.limit_spending(0.1)
    assert (await session.run("one")).subtype == "success"
    assert (await session.run("two")).subtype == "success"
    session.set_model("unpriced-model")
    assert (await session.run("three")).subtype == "success"
    assert (await session.run("four")).subtype == "success"
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert warnings == ["--max-budget-usd is not enforced: the price of unpriced-model is unknown"]


def test_a_run_without_requests_costs_an_integer_zero_as_in_claude_code() -> None:
    builder = FrameBuilder(sink=lambda frame: None)
    builder.begin_turn()
    result = builder.result(TurnOutcome(kind="api_error", error="401", status=401))
    assert json.dumps(result["total_cost_usd"]) == "0" and result["modelUsage"] == {}
