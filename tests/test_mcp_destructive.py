"""An MCP tool its server marks ``destructiveHint`` asks unless a rule allows it: in every
mode but ``bypassPermissions`` (as Claude Code), whatever the mode's default would allow."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_mcp_features import add_travel, run_caliban

from caliban.calls.effects import Effects, McpServer, command_effects
from caliban.config.settings import PermissionMode
from caliban.mcp.tools import McpTool
from caliban.permissions.policy import Confined, decide
from caliban.permissions.rules import PermissionRules
from caliban.shell import analyze
from caliban.tools.base import BUILTIN, McpOrigin

ROOT = Path("/proj")
TRAVEL = McpOrigin(server="travel", tool="cancel")
DESTRUCTIVE = Effects(reaches=(McpServer("travel"),), destructive=True)


def cancel_tool(**annotations: bool) -> McpTool:
    return McpTool(
        server="travel",
        tool_name="cancel",
        name="mcp__travel__cancel",
        description="",
        input_schema={"type": "object"},
        annotations=annotations,
    )


def test_the_hint_reaches_the_calls_effects_and_outweighs_read_only() -> None:
    tool = cancel_tool(destructiveHint=True)
    assert tool.bind({}).effects(ROOT).destructive
    assert not cancel_tool().bind({}).effects(ROOT).destructive
    assert cancel_tool(readOnlyHint=True).read_only
    # A server saying both is taken at its stricter word: not read-only (plan mode denies).
    assert not cancel_tool(readOnlyHint=True, destructiveHint=True).read_only


def _decide(
    mode: PermissionMode,
    effects: Effects = DESTRUCTIVE,
    *,
    allow: tuple[str, ...] = (),
    ask: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    read_only: bool = False,
    tool: str = "mcp__travel__cancel",
    confined: Confined | None = None,
) -> str:
    decision = decide(
        tool,
        None,
        effects,
        read_only=read_only,
        origin=TRAVEL if tool.startswith("mcp__") else BUILTIN,
        mode=mode,
        rules=PermissionRules.parse(allow=list(allow), ask=list(ask), deny=list(deny)),
        project_root=ROOT,
        confined=confined,
    )
    if decision.behavior == "ask" and decision.rule is None:
        assert "destructive" in decision.reason, decision
    return decision.behavior


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("default", "ask"), ("acceptEdits", "ask"), ("plan", "deny"), ("bypassPermissions", "allow")],
)
def test_a_destructive_call_asks_in_every_mode_but_bypass(
    mode: PermissionMode, expected: str
) -> None:
    assert _decide(mode) == expected


def test_a_rule_decides_a_destructive_call() -> None:
    assert _decide("default", allow=("mcp__travel__cancel",)) == "allow"
    assert _decide("acceptEdits", allow=("mcp__travel",)) == "allow"
    assert _decide("bypassPermissions", deny=("mcp__travel__cancel",)) == "deny"
    assert _decide("default", allow=("mcp__travel",), ask=("mcp__travel__cancel",)) == "ask"


def test_what_a_mode_would_allow_asks_when_destructive() -> None:
    """Not a name switch: any call whose effects say destructive asks where only the mode's
    default (a read-only tool, acceptEdits' edits, the sandbox's auto-allow) would allow it."""
    assert _decide("default", read_only=True, tool="Read") == "ask"
    edit = Effects(writes=(ROOT / "a.py",), destructive=True)
    assert _decide("acceptEdits", edit, tool="Edit") == "ask"
    line = command_effects(analyze("make clean"), ROOT)
    confined = Confined(keeps_protected_paths=True)
    assert _decide("default", line, tool="Bash", confined=confined) == "allow"
    line = dataclasses.replace(line, destructive=True)
    assert _decide("default", line, tool="Bash", confined=confined) == "ask"


# ---------------------------------------------------------------------------- -p end to end


@pytest.mark.slow
def test_p_denies_a_destructive_tool_in_accept_edits_and_runs_it_under_bypass(
    fake_model_server: Any, tmp_path: Path
) -> None:
    (tmp_path / ".git").mkdir()
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_model_server.anthropic_base_url,
    }
    add_travel(tmp_path, env)
    call = {"tool_calls": [{"name": "mcp__travel__cancel", "arguments": {"trip_id": "t1"}}]}
    fake_model_server.add(call, {"text": "done"}, call, {"text": "done"})
    denied = run_caliban(tmp_path, env, "-p", "cancel t1", "--permission-mode", "acceptEdits")
    assert denied.returncode == 0, denied.stderr
    assert "--allowed-tools mcp__travel__cancel" in denied.stderr
    ran = run_caliban(tmp_path, env, "-p", "cancel t1", "--permission-mode", "bypassPermissions")
    assert ran.returncode == 0, ran.stderr
    first, second = (json.dumps(r.body["messages"][-1]) for r in fake_model_server.requests[1::2])
    assert "Permission denied for mcp__travel__cancel" in first
    assert "marked destructive by its server" in first
    assert "trip t1 cancelled" in second
