"""MCP beyond tools, against a real SDK server (``tests/mcp_servers/features.py``):
elicitation, server instructions, resources and prompts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from lazy_fakes import LazyBox
from mcp_servers.features import build

from caliban.mcp.catalog_cache import CatalogCache
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig
from caliban.mcp.elicit import (
    ElicitAnswer,
    Elicitation,
    FormField,
    form_fields,
    parse_answer,
)
from caliban.mcp.lazy.tool_search import format_outcome
from caliban.mcp.tools import call_output
from caliban.mcp.toolset import McpToolset

pytestmark = pytest.mark.anyio
FEATURES = Path(__file__).parent / "mcp_servers" / "features.py"
# In-process servers connect over framed JSON-RPC ("legacy"): the SDK's direct in-process
# dispatch has no channel for a server's own requests (elicitation).


async def book(manager: McpManager) -> str:
    outcome = await manager.call_tool("travel", "book", {})
    return call_output(outcome, server="travel", tool="book").as_text


async def test_headless_declines_an_elicitation_at_once() -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode="legacy") as manager:
        with anyio.fail_after(30):
            await manager.wait_ready()
            assert "booking declined" in await book(manager)


async def test_an_elicitor_answers_the_form_with_typed_values() -> None:
    asked: list[Elicitation] = []

    async def elicitor(request: Elicitation) -> ElicitAnswer:
        asked.append(request)
        assert request.schema is not None
        fields = {f.name: f for f in form_fields(request.schema)}
        answers = {"name": "Ada", "seats": "2", "window": "y"}
        return ElicitAnswer(
            action="accept",
            content={name: parse_answer(fields[name], text) for name, text in answers.items()},
        )

    async with McpManager(
        in_process={"travel": build()}, connect_mode="legacy", elicitor=elicitor
    ) as manager:
        with anyio.fail_after(30):
            await manager.wait_ready()
            assert "booked 2 seat(s) for Ada, window=True" in await book(manager)
    assert asked[0].server == "travel" and asked[0].message == "Who is travelling?"


async def test_a_stdio_server_of_protocol_2025_elicits() -> None:
    """``ctx.elicit`` sends a server request, as servers of 2025-11-25 (most today) do; on
    2026-07-28 a server asks through an ``input_required`` result instead, which the SDK's
    client hands to the same callback."""
    travel = ServerConfig(
        name="travel", transport="stdio", command=sys.executable, args=(str(FEATURES),)
    )

    async def elicitor(request: Elicitation) -> ElicitAnswer:
        return ElicitAnswer(action="accept", content={"name": "Lin", "seats": 1})

    async with McpManager([travel], elicitor=elicitor, connect_mode="legacy") as manager:
        with anyio.fail_after(60):
            [status] = await manager.wait_ready()
            assert status.state == "connected", status.error
            assert "booked 1 seat(s) for Lin, window=False" in await book(manager)


async def test_a_failing_elicitor_declines_instead_of_failing_the_call() -> None:
    async def broken(request: Elicitation) -> ElicitAnswer:
        raise RuntimeError("the terminal went away")

    async with McpManager(
        in_process={"travel": build()}, connect_mode="legacy", elicitor=broken
    ) as manager:
        with anyio.fail_after(30):
            await manager.wait_ready()
            assert "booking declined" in await book(manager)


def test_form_fields_and_typed_answers() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "seats": {"type": "integer"},
            "class": {"type": "string", "enum": ["economy", "business"]},
            "window": {"type": "boolean", "default": False},
        },
        "required": ["name", "seats"],
    }
    name, seats, klass, window = form_fields(schema)
    assert (name.title, name.required, seats.kind, klass.choices) == (
        "Name",
        True,
        "integer",
        ("economy", "business"),
    )
    assert parse_answer(seats, " 3 ") == 3 and parse_answer(klass, "2") == "business"
    assert parse_answer(window, "") is False and parse_answer(window, "yes") is True
    for field, text in ((name, ""), (seats, "many"), (klass, "first"), (window, "maybe")):
        with pytest.raises(ValueError):
            parse_answer(field, text)
    assert isinstance(name, FormField)


# ---------------------------------------------------------------------------- instructions


async def test_instructions_reach_the_system_prompt_with_eager_loading_and_are_cached(
    tmp_path: Path,
) -> None:
    travel = ServerConfig(
        name="travel", transport="stdio", command=sys.executable, args=(str(FEATURES),)
    )
    cache = CatalogCache(tmp_path)
    async with McpManager([travel], catalog_cache=cache) as manager:
        with anyio.fail_after(60):
            await manager.wait_ready()
        addendum = McpToolset(manager).system_addendum()
    assert addendum.startswith("# MCP server instructions")
    assert '## travel\n<mcp-data server="travel">\nAlways confirm the date' in addendum
    # The next session knows them before the server starts: turn 1's prompt is the same.
    later = McpManager([travel], catalog_cache=cache)
    assert McpToolset(later).system_addendum() == addendum


async def test_lazily_instructions_come_with_the_first_activated_tool_of_a_server() -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode="legacy") as manager:
        with anyio.fail_after(30):
            await manager.wait_ready()
        box = LazyBox(catalog=manager)
        box.lazy.servers = manager
        prompt = box.system_addendum()
        assert "Always confirm" not in prompt  # the system prompt stays as it was
        first = format_outcome(box.search_tools("select:mcp__travel__fares", 5))
        assert "# MCP server instructions" in first and "Always confirm the date" in first
        again = format_outcome(box.search_tools("select:mcp__travel__book", 5))
        assert "Always confirm" not in again
        assert box.system_addendum() == prompt
