"""What servers offer beyond tools, listed once they connect and followed as they change:
prompts and resources, against a real SDK server (``tests/mcp_servers/features.py``) in both
protocol generations (notifications, and a ``subscriptions/listen`` stream)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp_servers.features import build

from caliban.mcp.client import McpManager
from caliban.mcp.offers import PromptOffer, ResourceOffer

pytestmark = pytest.mark.anyio


async def offered(manager: McpManager, done: Callable[[], bool]) -> None:
    """Wait (bounded) until ``done()`` holds of the manager's offers."""
    with anyio.fail_after(60):
        while True:
            version = manager.offers_version
            if done():
                return
            await manager.wait_for_offers(version)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_prompts_and_resources_follow_list_changed(mode: Any) -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode=mode) as manager:
        await manager.wait_ready(timeout=60)
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
