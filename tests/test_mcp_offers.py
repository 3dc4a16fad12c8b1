"""What servers offer beyond tools, listed once they connect and followed as they change:
prompts and resources, against a real SDK server (``tests/mcp_servers/features.py``) in both
protocol generations (notifications, and a ``subscriptions/listen`` stream)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hang import HANG_S
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import TextResource
from mcp_servers.features import build
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from caliban.mcp.client import McpManager
from caliban.mcp.offers import PromptOffer, ResourceOffer
from caliban.repl.complete import ReplCompleter, prompt_commands, resource_mentions

pytestmark = pytest.mark.anyio


async def offered(manager: McpManager, done: Callable[[], bool]) -> None:
    """Follow the manager's offers and wait (bounded) until ``done()`` holds of them."""
    manager.follow_offers()
    with anyio.fail_after(HANG_S):
        while True:
            version = manager.offers_version
            if done():
                return
            await manager.wait_for_offers(version)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_prompts_and_resources_follow_list_changed(mode: Any) -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode=mode) as manager:
        await manager.wait_ready(timeout=HANG_S)
        assert manager.prompts() == ()  # nobody follows them yet: no request was made
        await offered(manager, lambda: bool(manager.prompts() and manager.resources()))
        assert manager.prompts() == (
            PromptOffer(
                server="travel",
                name="plan",
                description="Plan a trip.",
                arguments=(("city", True), ("days", False)),
            ),
        )
        assert manager.prompts()[0].usage == "city [days]"
        assert [r.mention for r in manager.resources()] == ["travel:travel://policy"]
        assert manager.resources()[0] == ResourceOffer(
            server="travel", uri="travel://policy", name="policy", description="The travel policy."
        )

        await manager.call_tool("travel", "extend", {})
        await offered(manager, lambda: len(manager.prompts()) == 2 == len(manager.resources()))
        assert [p.command for p in manager.prompts()] == ["mcp__travel__plan", "mcp__travel__pack"]
        assert manager.resources()[-1].mention == "travel:travel://visa"


async def test_the_repl_completes_prompts_and_resources_from_the_listed_offers(
    tmp_path: Path,
) -> None:
    (tmp_path / "travel-notes.md").write_text("x")
    async with McpManager(in_process={"travel": build()}, connect_mode="legacy") as manager:
        await manager.wait_ready(timeout=HANG_S)
        await offered(manager, lambda: bool(manager.prompts() and manager.resources()))
        completer = ReplCompleter(
            tmp_path,
            custom=lambda: prompt_commands(manager.prompts()),
            resources=lambda: resource_mentions(manager.resources()),
        )

        def complete(text: str) -> list[tuple[str, str]]:
            found = completer.get_completions(Document(text), CompleteEvent(text_inserted=True))
            return [(c.text, c.display_meta_text) for c in found]

        assert complete("/mcp__tr") == [("/mcp__travel__plan", "city [days] Plan a trip. (MCP)")]
        # Resources first, then files; each keystroke reads the lists in memory.
        assert complete("see @tra") == [
            ("travel:travel://policy", "The travel policy."),
            ("travel-notes.md", ""),
        ]
        assert complete("@travel:travel://p") == [("travel:travel://policy", "The travel policy.")]
        assert complete("@nothing") == []


async def test_offers_a_prompt_cannot_type_are_left_out() -> None:
    server = MCPServer("odd")

    @server.prompt(name="two words")
    def spaced() -> str:
        return "x"

    @server.prompt(name="fine")
    def fine() -> str:
        return "x"

    server.add_resource(TextResource(uri="odd://a\u202eb", name="bidi", text="x"))
    server.add_resource(TextResource(uri="odd://ok", name="ok", text="x"))
    async with McpManager(in_process={"odd": server}, connect_mode="legacy") as manager:
        await manager.wait_ready(timeout=HANG_S)
        await offered(manager, lambda: bool(manager.prompts() and manager.resources()))
        assert [p.name for p in manager.prompts()] == ["fine"]
        assert [r.uri for r in manager.resources()] == ["odd://ok"]
