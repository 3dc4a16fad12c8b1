"""MCP beyond tools, against a real SDK server (``tests/mcp_servers/features.py``):
elicitation, server instructions, resources and prompts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hang import HANG_S, hang_guard
from lazy_fakes import LazyBox
from mcp_servers.features import build
from mcp_servers.paged_prompts import PROMPTS as PAGED_PROMPTS
from mcp_servers.paged_prompts import build as build_paged

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
from caliban.mcp.prompts import expand_prompt, split_prompt_name
from caliban.mcp.resources import attach_resources, resource_mention
from caliban.mcp.tools import call_output
from caliban.mcp.toolset import McpToolset
from caliban.tools.base import CallContext, ToolEnv

pytestmark = pytest.mark.anyio
FEATURES = Path(__file__).parent / "mcp_servers" / "features.py"
# In-process servers connect over framed JSON-RPC ("legacy"): the SDK's direct in-process
# dispatch has no channel for a server's own requests (elicitation).


async def book(manager: McpManager) -> str:
    outcome = await manager.call_tool("travel", "book", {})
    return call_output(outcome, server="travel", tool="book").as_text


async def test_headless_declines_an_elicitation_at_once() -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode="legacy") as manager:
        with hang_guard():
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
        with hang_guard():
            await manager.wait_ready()
            assert "booked 2 seat(s) for Ada, window=True" in await book(manager)
    assert asked[0].server == "travel" and asked[0].message == "Who is travelling?"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stdio_server_elicits_in_either_protocol_generation(mode: Any) -> None:
    """On 2025-11-25 the server sends a request (``ctx.elicit``); on 2026-07-28 it answers
    ``input_required`` and the SDK's client hands that to the same callback."""
    travel = ServerConfig(
        name="travel", transport="stdio", command=sys.executable, args=(str(FEATURES),)
    )

    async def elicitor(request: Elicitation) -> ElicitAnswer:
        return ElicitAnswer(action="accept", content={"name": "Lin", "seats": 1})

    async with McpManager([travel], elicitor=elicitor, connect_mode=mode) as manager:
        with hang_guard():
            [status] = await manager.wait_ready()
            assert status.state == "connected", status.error
            assert "booked 1 seat(s) for Lin, window=False" in await book(manager)


async def test_a_failing_elicitor_declines_instead_of_failing_the_call() -> None:
    async def broken(request: Elicitation) -> ElicitAnswer:
        raise RuntimeError("the terminal went away")

    async with McpManager(
        in_process={"travel": build()}, connect_mode="legacy", elicitor=broken
    ) as manager:
        with hang_guard():
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


@pytest.mark.slow
async def test_instructions_reach_the_system_prompt_with_eager_loading_and_are_cached(
    tmp_path: Path,
) -> None:
    travel = ServerConfig(
        name="travel", transport="stdio", command=sys.executable, args=(str(FEATURES),)
    )
    cache = CatalogCache(tmp_path)
    async with McpManager([travel], catalog_cache=cache) as manager:
        with hang_guard():
            await manager.wait_ready()
        addendum = McpToolset(manager).system_addendum()
    assert addendum.startswith("# MCP server instructions")
    assert '## travel\n<mcp-data server="travel">\nAlways confirm the date' in addendum
    # The next session knows them before the server starts: turn 1's prompt is the same.
    later = McpManager([travel], catalog_cache=cache)
    assert McpToolset(later).system_addendum() == addendum


async def test_lazily_instructions_come_with_the_first_activated_tool_of_a_server() -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode="legacy") as manager:
        with hang_guard():
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


# ---------------------------------------------------------------------------- resources


async def test_the_model_lists_and_reads_resources_and_templates() -> None:
    async with McpManager(in_process={"travel": build()}) as manager:
        with hang_guard():
            await manager.wait_ready()
            toolset = McpToolset(manager, resources=manager)
            assert toolset.names()[-2:] == ("ListMcpResourcesTool", "ReadMcpResourceTool")
            listing = await run_tool(toolset, "ListMcpResourcesTool", {})
            assert listing.startswith('<mcp-data server="travel">')
            assert '"uri": "travel://policy"' in listing and '"server": "travel"' in listing
            assert '"uriTemplate": "travel://trips/{trip_id}"' in listing
            policy = await run_tool(
                toolset, "ReadMcpResourceTool", {"server": "travel", "uri": "travel://policy"}
            )
            assert "Economy class for trips under 6 hours." in policy
            trip = await run_tool(
                toolset, "ReadMcpResourceTool", {"server": "travel", "uri": "travel://trips/42"}
            )
            assert '"id": "42"' in trip and "Lisbon" in trip
            missing = await run_tool(
                toolset, "ReadMcpResourceTool", {"server": "travel", "uri": "travel://nope"}
            )
            assert "travel://nope" in missing  # the server's error, as a result
            reader = toolset.find("ReadMcpResourceTool")
            assert reader is not None
            assert "no MCP server named 'hotel'" in str(
                reader.bind({"server": "hotel", "uri": "x"})
            )
            assert "'uri' is required" in str(reader.bind({"server": "travel"}))


async def test_an_at_server_uri_mention_attaches_the_resource() -> None:
    assert resource_mention("travel:travel://policy", ["travel"]) == ("travel", "travel://policy")
    assert resource_mention("alice", ["travel"]) is None
    assert resource_mention("hotel:x://y", ["travel"]) is None
    async with McpManager(in_process={"travel": build()}) as manager:
        with hang_guard():
            await manager.wait_ready()
            mentioned = ["travel:travel://policy", "src/a.py", "travel:travel://nope"]
            blocks, problems = await attach_resources(mentioned, manager)
    [(raw, block)] = blocks
    assert raw == "travel:travel://policy"
    assert block.startswith('<mcp-resource server="travel" uri="travel://policy">')
    assert "Economy class" in block and '<mcp-data server="travel"' in block
    assert problems and problems[0].startswith("@travel:travel://nope not attached: ")


async def test_resource_tools_are_deferred_under_lazy_loading() -> None:
    async with McpManager(in_process={"travel": build()}) as manager:
        with hang_guard():
            await manager.wait_ready()
        box = LazyBox(catalog=manager, resources=manager)
        assert "ListMcpResourcesTool" not in [t.name for t in box.offered()]
        assert "- resources of any server (2): ListMcpResourcesTool, ReadMcpResourceTool" in (
            box.system_addendum()
        )
        found = format_outcome(box.search_tools("list resources", 5))
        assert "ListMcpResourcesTool (newly activated)" in found
        assert "ListMcpResourcesTool" in [t.name for t in box.offered()]


async def run_tool(toolset: McpToolset, name: str, arguments: dict[str, Any]) -> str:
    tool = toolset.find(name)
    assert tool is not None
    bound = tool.bind(arguments)
    assert not isinstance(bound, str), bound
    output = await bound.run(
        CallContext(env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()), call_id="c1")
    )
    return output.as_text


# ---------------------------------------------------------------------------- prompts


async def test_a_prompt_expands_with_its_arguments_in_order() -> None:
    async with McpManager(in_process={"travel": build()}) as manager:
        with hang_guard():
            await manager.wait_ready()
            done = await expand_prompt(manager, "mcp__travel__plan", '"New York" 5')
            assert done.text == "Plan a 5-day trip to New York."
            default = await expand_prompt(manager, "mcp__travel__plan", "Lisbon")
            assert default.text == "Plan a 3-day trip to Lisbon."
            usage = await expand_prompt(manager, "mcp__travel__plan", "")
            assert usage.error == "Usage: /mcp__travel__plan city [days]"
            unknown = await expand_prompt(manager, "mcp__travel__nope", "")
            assert unknown.error is not None and "/mcp__travel__plan" in unknown.error
    assert split_prompt_name("mcp__a__b__c", ["a", "a__b"]) == ("a__b", "c")
    assert split_prompt_name("mcp__x__y", ["a"]) is None


async def test_a_prompt_on_a_later_page_expands() -> None:
    """``mcp_servers/paged_prompts.py`` lists two prompts a page: ``deploy`` (page 2) and
    ``retro`` (page 3) are found, and a miss names all five."""
    async with McpManager(in_process={"paged": build_paged()}) as manager:
        with hang_guard():
            await manager.wait_ready()
            deploy = await expand_prompt(manager, "mcp__paged__deploy", "staging")
            assert deploy.text == "Deploy staging to production."
            retro = await expand_prompt(manager, "mcp__paged__retro", "")
            assert retro.text == "Run the sprint retro."
            usage = await expand_prompt(manager, "mcp__paged__deploy", "")
            assert usage.error == "Usage: /mcp__paged__deploy target"
            unknown = await expand_prompt(manager, "mcp__paged__nope", "")
    assert unknown.error is not None
    assert all(f"/mcp__paged__{name}" in unknown.error for name in PAGED_PROMPTS)


# ---------------------------------------------------------------------------- -p end to end


def run_caliban(cwd: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real executable, run in ``cwd`` (bounded)."""
    return subprocess.run(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )


@pytest.mark.slow
def test_a_prompt_on_page_two_runs_and_completes_through_p(
    fake_model_server: Any, tmp_path: Path
) -> None:
    """``caliban -p "/mcp__paged__deploy staging"``: the server lists its prompts over three
    pages; the one on page 2 is found, its text is the turn's prompt, and the run ends."""
    (tmp_path / ".git").mkdir()
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_model_server.anthropic_base_url,
    }
    paged = Path(__file__).parent / "mcp_servers" / "paged_prompts.py"
    added = run_caliban(tmp_path, env, "mcp", "add", "paged", "--", sys.executable, str(paged))
    assert added.returncode == 0, added.stderr
    fake_model_server.add({"text": "Deployed."})
    run = run_caliban(tmp_path, env, "-p", "/mcp__paged__deploy staging")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Deployed."
    [request] = fake_model_server.requests
    assert "Deploy staging to production." in json.dumps(request.body["messages"])


def add_travel(cwd: Path, env: Mapping[str, str]) -> None:
    """``caliban mcp add travel -- python features.py``: added by hand (the local scope), so
    it starts in a folder nobody trusted."""
    added = run_caliban(cwd, env, "mcp", "add", "travel", "--", sys.executable, str(FEATURES))
    assert added.returncode == 0, added.stderr


@pytest.mark.slow
def test_prompt_resources_instructions_and_elicitation_through_p(
    fake_model_server: Any, tmp_path: Path
) -> None:
    (tmp_path / ".git").mkdir()
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_model_server.anthropic_base_url,
    }
    add_travel(tmp_path, env)
    fake_model_server.add(
        {
            "tool_calls": [
                {
                    "name": "ReadMcpResourceTool",
                    "arguments": {"server": "travel", "uri": "travel://policy"},
                },
                {"name": "mcp__travel__book", "arguments": {}},
            ]
        },
        {"text": "done"},
    )
    run = run_caliban(
        tmp_path, env, "-p", "/mcp__travel__plan Lisbon 2", "--allowedTools", "mcp__travel__book"
    )
    assert run.returncode == 0, run.stderr
    first, second = fake_model_server.requests
    assert "Always confirm the date before booking." in json.dumps(first.body["system"])
    assert "Plan a 2-day trip to Lisbon." in json.dumps(first.body["messages"])
    assert {"ListMcpResourcesTool", "ReadMcpResourceTool"} <= set(first.tool_names)
    results = json.dumps(second.body["messages"])
    assert "Economy class for trips under 6 hours." in results
    assert "booking declined" in results  # headless: the elicitation is declined at once


# ---------------------------------------------------------------------------- the REPL in a pty


@pytest.mark.slow
def test_prompt_resource_and_a_typed_elicitation_answer_in_the_repl(
    fake_model_server: Any, tmp_path: Path
) -> None:
    pexpect = pytest.importorskip("pexpect")
    (tmp_path / ".git").mkdir()
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_model_server.url}
    env["TERM"] = "xterm-256color"
    add_travel(tmp_path, env)
    fake_model_server.add(
        {"text": "Policy noted."},
        {"text": "Lisbon it is."},
        {
            "tool_calls": [
                {
                    "name": "ReadMcpResourceTool",
                    "arguments": {"server": "travel", "uri": "travel://policy"},
                },
                {"name": "mcp__travel__book", "arguments": {}},
            ]
        },
        {"text": "All booked."},
    )
    child = pexpect.spawn(
        str(Path(sys.executable).parent / "caliban"),
        cwd=str(tmp_path),
        env=env,
        dimensions=(40, 120),
        encoding="utf-8",
        timeout=HANG_S,
    )
    try:
        child.expect(">")
        child.send("mind @travel:travel://policy\r")
        child.expect("Attached @travel:travel://policy")
        child.expect("Policy noted.")
        child.send("/mcp__travel__plan Lisbon 2\r")
        child.expect("Lisbon it is.")
        child.send("book it\r")
        child.expect("Do you want to proceed?")  # the MCP tool asks first, in default mode
        child.send("1")
        child.expect("MCP server 'travel' asks: Who is travelling?")
        child.expect("Who is booking")
        child.send("Ada\r")
        child.expect("How many seats")
        child.send("two\r")
        child.expect("a whole number, please")
        child.expect("How many seats")
        child.send("2\r")
        child.expect("A window seat")
        child.send("y\r")
        child.expect("All booked.")
        child.expect("─{20}")  # the prompt is back
        child.expect(">")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    mentioned, planned, _, answered = fake_model_server.bodies
    assert '<mcp-resource server=\\"travel\\" uri=\\"travel://policy\\">' in json.dumps(
        mentioned["messages"]
    )
    assert "Economy class" in json.dumps(mentioned["messages"])
    assert "Plan a 2-day trip to Lisbon." in json.dumps(planned["messages"])
    results = json.dumps(answered["messages"][-1])
    assert "Economy class for trips under 6 hours." in results
    assert "booked 2 seat(s) for Ada, window=True" in results
