"""A turn's figures, gathered as it goes, and its ``result`` frame: timings, turns, the
main agent's usage, ``permission_denials``, ``stop_reason``, and what the run's requests
cost per model (``total_cost_usd``, ``modelUsage``: the session's ledger)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from caliban.headless.frames.common import Frame, new_uuid
from caliban.messages import Usage
from caliban.providers.base import DEFAULT_MAX_TOKENS
from caliban.session.ledger import UsageByModel, total_cost
from caliban.session.pricing import cost_usd
from caliban.session.serialize import usage_to_api_json


@dataclass(frozen=True, kw_only=True)
class TurnOutcome:
    """How a turn ended, for its result frame."""

    kind: Literal["success", "max_turns", "max_budget", "api_error", "interrupted", "error"]
    error: str | None = None
    status: int | None = None
    max_turns: int | None = None
    text: str | None = None
    """The result text when it did not come from the model (an unknown ``/command``)."""
    requested: bool = True
    """Whether the turn made a model request (Claude Code drops some keys when not)."""


@dataclass(kw_only=True)
class TurnFigures:
    """What a turn's result frame reports, counted as the turn goes (main agent only)."""

    started: float = field(default_factory=time.monotonic)
    request_started: float | None = None
    api_ms: float = 0.0
    ttft_ms: int | None = None
    num_turns: int = 0
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    last_text: str = ""
    denials: list[dict[str, Any]] = field(default_factory=list)
    streamed: bool = False
    """A response arrived (Claude Code reports its timings then)."""

    def request_starts(self) -> None:
        self.request_started = time.monotonic()

    def first_token(self) -> None:
        """Note the time to the turn's first streamed token (``ttft_ms``)."""
        if self.ttft_ms is None and self.request_started is not None:
            self.ttft_ms = int((time.monotonic() - self.started) * 1000)

    def response(self, usage: Usage, stop_reason: str | None, text: str) -> None:
        """A complete response of the main agent."""
        now = time.monotonic()
        if self.request_started is not None:
            self.api_ms += (now - self.request_started) * 1000
            self.request_started = None
        if self.ttft_ms is None:
            self.ttft_ms = int((now - self.started) * 1000)
        self.streamed = True
        self.num_turns = max(self.num_turns, 1)
        self.usage += usage
        self.stop_reason = stop_reason
        if text:
            self.last_text = text


def result_frame(
    outcome: TurnOutcome,
    turn: TurnFigures,
    *,
    session_id: str,
    run_started: float,
    by_model: UsageByModel,
    context_window: Callable[[str], int],
) -> Frame:
    """The turn's ``result`` frame, in Claude Code's shape for each way a turn ends."""
    now = time.monotonic()
    common = {
        "duration_ms": int((now - turn.started) * 1000),
        "duration_api_ms": int(turn.api_ms),
    }
    timings: dict[str, Any] = {}
    if turn.streamed:
        ttft = turn.ttft_ms or 0
        timings = {
            "ttft_ms": ttft,
            "ttft_stream_ms": ttft,
            "time_to_request_ms": int((turn.started - run_started) * 1000),
        }
    totals = {
        "session_id": session_id,
        "total_cost_usd": total_cost(by_model),
        "usage": usage_to_api_json(turn.usage),
        "modelUsage": model_usage(by_model, context_window),
        "permission_denials": list(turn.denials),
    }
    num_turns = max(turn.num_turns, 1)
    frame: Frame
    match outcome.kind:
        case "max_turns":
            frame = {
                "type": "result",
                "subtype": "error_max_turns",
                **common,
                "is_error": True,
                "num_turns": num_turns,
                "stop_reason": turn.stop_reason,
                **totals,
                "terminal_reason": "max_turns",
                "fast_mode_state": "off",
                "uuid": new_uuid(),
                "errors": [f"Reached maximum number of turns ({outcome.max_turns})"],
            }
        case "max_budget":
            # Claude Code's shape: error_max_turns' without terminal_reason.
            frame = {
                "type": "result",
                "subtype": "error_max_budget_usd",
                **common,
                "is_error": True,
                "num_turns": num_turns,
                "stop_reason": turn.stop_reason,
                **totals,
                "fast_mode_state": "off",
                "uuid": new_uuid(),
                "errors": [outcome.error or "Reached maximum budget"],
            }
        case "interrupted" | "error":
            frame = {
                "type": "result",
                "subtype": "error_during_execution",
                **common,
                "is_error": True,
                "num_turns": num_turns,
                "stop_reason": turn.stop_reason,
                **totals,
                "fast_mode_state": "off",
                "uuid": new_uuid(),
                "errors": [outcome.error or "interrupted"],
            }
        case "success" | "api_error" if not outcome.requested:
            frame = {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                **common,
                "num_turns": 0,
                "result": outcome.text or "",
                "stop_reason": None,
                **totals,
                "fast_mode_state": "off",
                "uuid": new_uuid(),
            }
        case "success" | "api_error":
            failed = outcome.kind == "api_error"
            frame = {
                "type": "result",
                "subtype": "success",
                "is_error": failed,
                "api_error_status": outcome.status if failed else None,
                **common,
                **timings,
                "num_turns": num_turns,
                "result": (outcome.error or "") if failed else turn.last_text,
                "stop_reason": "stop_sequence" if failed else turn.stop_reason,
                **totals,
                "terminal_reason": "completed",
                "fast_mode_state": "off",
                "uuid": new_uuid(),
            }
        case _:
            assert_never(outcome.kind)
    if outcome.error and outcome.kind != "success":
        frame["error"] = outcome.error  # caliban's key, kept for earlier scripts
    return frame


def model_usage(by_model: UsageByModel, context_window: Callable[[str], int]) -> dict[str, Any]:
    """``modelUsage``: each model's tokens, priced at that model's price."""
    return {
        model: {
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "cacheReadInputTokens": usage.cache_read_tokens,
            "cacheCreationInputTokens": usage.cache_write_tokens,
            "webSearchRequests": 0,
            "costUSD": cost_usd(model, usage),
            "contextWindow": context_window(model),
            "maxOutputTokens": DEFAULT_MAX_TOKENS,
        }
        for model, usage in by_model.items()
    }
