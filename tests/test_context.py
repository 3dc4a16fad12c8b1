"""The /context report: token estimates by part and the lazy-MCP lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hang import hang_guard
from lazy_fakes import CATALOG, FakeMcp, lazy_settings, make_session
from rich.console import Console

from caliban.config.settings import Settings
from caliban.messages import Usage
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.repl.commands import CommandContext, run_command
from caliban.session.assemble import result_extra
from caliban.session.context import ContextReport, context_report
from caliban.session.session import Session
from caliban.util.tokens import estimate_tokens, tool_tokens

pytestmark = pytest.mark.anyio

GH_CREATE = "mcp__github__create_issue"
GL_PIPES = "mcp__gitlab__list_pipelines"


async def shown(session: Session) -> str:
    """What ``/context`` prints for ``session``."""
    out = io.StringIO()
    console = Console(file=out, width=160, color_system=None)
    await run_command("/context", CommandContext(session=session, console=console))
    return out.getvalue()


def test_lazy_session_before_any_search(tmp_path: Path) -> None:
    mcp = FakeMcp(CATALOG, lazy={"time": False})
    session = make_session(ScriptedProvider([]), tmp_path, mcp=mcp)
    report = context_report(session)
    addendum = session.toolset.system_addendum()
    assert report.lazy and report.window == 128_000 and report.cap == 24
    assert report.deferred_paragraph_tokens == estimate_tokens(addendum) > 100
    assert report.system_tokens == estimate_tokens(f"You are a test.\n\n{addendum}")
    time_tools = [t for t in mcp.tools() if t.server == "time"]
    assert report.mcp_tool_tokens == tool_tokens(time_tools)  # the pinned server only
    assert report.eager_mcp_tokens == tool_tokens(mcp.tools())
    assert report.tool_search_tokens > 0 and report.builtin_tool_tokens > report.tool_search_tokens
    assert (report.deferred_tools, report.deferred_servers) == (6, 2)
    assert report.active == () and report.message_tokens == 0 and report.measured is None
    assert [label for label, _ in report.categories] == [
        "System prompt",
        "Built-in tools",
        "MCP tools",
        "Messages",
    ]


TIMES = "mcp__time__get_current_time,mcp__time__convert_time"


async def test_after_a_search_and_a_request(tmp_path: Path) -> None:
    usage = Usage(input_tokens=900, output_tokens=5, cache_read_tokens=3_000)
    provider = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": f"select:{GL_PIPES},{GH_CREATE},{TIMES}"})),
            "done",
        ],
        usage=usage,
    )
    session = make_session(provider, tmp_path, settings=lazy_settings(True, 5))
    with hang_guard():
        await session.run("find tools")
    report = context_report(session)
    assert report.active == (GL_PIPES, GH_CREATE, *TIMES.split(","))  # most recent first
    assert report.deferred_tools == 4 and report.deferred_servers == 2
    assert report.mcp_tool_tokens > 0 and report.message_tokens > 0
    assert report.measured == 3_900 and report.last_usage == usage
    # Eight tiny tools, four of them active, cost less than four plus ToolSearch and the
    # paragraph: the report says so.
    assert report.lazy_mcp_tokens > report.eager_mcp_tokens and report.saved_percent < 0
    text = await shown(session)
    assert f"MCP active: 4/5 ({GL_PIPES}, {GH_CREATE}, {TIMES.replace(',', ', ')})" in (
        text.splitlines()
    )
    assert "MCP deferred: 4 tools on 2 servers (ToolSearch finds them)" in text.splitlines()
    assert "Last request, as reported by the provider: 3.9k tokens." in text
    assert "in this request: more than sending them all" in text
    assert "Estimated offline (about 4 characters a token)." in text


async def test_saved_share_compares_eager_with_everything_lazy_loading_adds(
    tmp_path: Path,
) -> None:
    big = {f"s{i}": [f"tool_{t}" for t in range(40)] for i in range(5)}
    session = make_session(ScriptedProvider([]), tmp_path, mcp=FakeMcp(big))
    report = context_report(session)
    lazy_cost = report.tool_search_tokens + report.deferred_paragraph_tokens
    assert report.lazy_mcp_tokens == lazy_cost
    assert report.saved_percent == pytest.approx(100 * (1 - lazy_cost / report.eager_mcp_tokens))
    assert report.saved_percent > 50
    assert f"{int(report.saved_percent)}% saved" in await shown(session)


async def test_eager_session(tmp_path: Path) -> None:
    mcp = FakeMcp(CATALOG)
    session = make_session(ScriptedProvider([]), tmp_path, mcp=mcp, settings=Settings())
    report = context_report(session)
    assert not report.lazy and report.deferred_paragraph_tokens == 0
    assert report.mcp_tool_tokens == report.eager_mcp_tokens == tool_tokens(mcp.tools())
    assert report.saved_percent == 0
    text = await shown(session)
    assert "MCP active" not in text
    assert "MCP tools: 8, all sent with every request" in text


def test_json_shape(tmp_path: Path) -> None:
    session = make_session(ScriptedProvider([]), tmp_path)
    data = result_extra(session)["context"]
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {
        "model",
        "context_window",
        "estimated_tokens",
        "categories",
        "last_request_tokens",
        "mcp",
        "skills",
    }
    assert data["mcp"]["lazy"] is True and data["mcp"]["deferred_tools"] == 8
    assert data["mcp"]["active"] == [] and data["mcp"]["cap"] == 24
    assert data["categories"]["deferred_paragraph"] > 0
    report = context_report(session)
    assert isinstance(report, ContextReport) and data["estimated_tokens"] == report.total
