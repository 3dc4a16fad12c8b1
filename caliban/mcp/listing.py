"""Asking a connected server for its tools (every page, leaving out the tools it defined
badly) and following its announcements that they (or its prompts or resources) changed."""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING

from caliban.util.text import clipped

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client
    from mcp.client.subscriptions import ServerEvent, Subscription

    from caliban.mcp.connection import Attempt

__all__ = ["fetch_tools", "follow", "subscribe"]

MAX_TOOL_PAGES = 100

logger = logging.getLogger(__name__)


async def fetch_tools(client: Client) -> tuple[list[mcp_types.Tool], list[str]]:
    """Every tool the server lists, and the ones left out for invalid definitions
    (``'name': where: why``)."""
    from pydantic import ValidationError

    listed: list[mcp_types.Tool] = []
    skipped: list[str] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        try:
            page = await client.list_tools(cursor=cursor)
        except ValidationError:
            # One malformed tool must not take the server's other tools with it.
            lenient = await _lenient_tools_page(client, cursor, skipped)
            if lenient is None:
                raise
            page = lenient
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return listed, skipped


async def _lenient_tools_page(
    client: Client, cursor: str | None, skipped: list[str]
) -> mcp_types.ListToolsResult | None:
    """A ``tools/list`` page with the tools the SDK would reject left out (and described in
    ``skipped``), or None when this SDK's internals are not the ones this relies on.

    The SDK validates a listing whole, so a page is fetched raw, each tool is validated on its
    own, and the valid ones are handed back to the session (which records their output
    schemas, as its own listing does)."""
    import mcp_types
    from mcp_types.methods import validate_server_result
    from pydantic import ValidationError

    session = client.session
    dispatcher = getattr(session, "_dispatcher", None)
    absorb = getattr(session, "_absorb_tool_listing", None)
    if dispatcher is None or absorb is None:
        return None
    raw = await dispatcher.send_raw_request("tools/list", {"cursor": cursor} if cursor else None)
    items = raw.get("tools") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        return None
    tools: list[mcp_types.Tool] = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        label = repr(clipped(name, 80)) if isinstance(name, str) else f"#{index + 1}"
        try:
            # The protocol version's own shape (an input schema of type "object"), then the
            # SDK's model, as the SDK validates a whole listing.
            validate_server_result("tools/list", client.protocol_version, {"tools": [item]})
            tools.append(mcp_types.Tool.model_validate(item, by_name=False))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = first["loc"][2:] if first["loc"][:1] == ("tools",) else first["loc"]
            where = ".".join(str(part) for part in loc)
            skipped.append(f"{label}: {where}: {first['msg']}")
    next_cursor = raw.get("nextCursor")
    page = mcp_types.ListToolsResult(
        tools=tools, next_cursor=next_cursor if isinstance(next_cursor, str) else None
    )
    absorbed: mcp_types.ListToolsResult = absorb(page, complete=cursor is None and not next_cursor)
    return absorbed


def _listen(client: Client) -> AbstractAsyncContextManager[Subscription]:
    """A ``subscriptions/listen`` stream of tool-list changes, and of prompt and resource
    list changes of a server that offers them."""
    capabilities = client.server_capabilities
    return client.listen(
        tools_list_changed=True,
        prompts_list_changed=capabilities is not None and capabilities.prompts is not None,
        resources_list_changed=capabilities is not None and capabilities.resources is not None,
    )


async def subscribe(stack: AsyncExitStack, server: str, client: Client) -> Subscription | None:
    """A ``subscriptions/listen`` stream of tool-, prompt- and resource-list changes
    (protocol 2026-07-28, where change events only come that way), held open by ``stack``;
    None for older servers, which send ``notifications/…/list_changed`` unasked, and for
    those that refuse."""
    from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    try:
        subscription = await stack.enter_async_context(_listen(client))
    except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError) as exc:
        logger.info("%s: no list-change subscription: %s", server, exc)
        return None
    honored = subscription.honored
    kinds = (honored.tools_list_changed, honored.prompts_list_changed)
    return subscription if any(kinds) or honored.resources_list_changed else None


async def follow(client: Client, subscription: Subscription, attempt: Attempt) -> None:
    """Mark what each event of ``subscription`` says changed (tools, prompts, resources)
    as stale in ``attempt``; when the stream is lost, listen again (a few times) and mark
    everything stale once more, since events in between are not replayed."""
    from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
    from mcp.shared.exceptions import MCPError

    try:
        async for event in subscription:
            _changed(attempt, event)
        return
    except SubscriptionLost:
        pass
    for _ in range(3):
        try:
            async with _listen(client) as again:
                _changed(attempt, None)
                async for event in again:
                    _changed(attempt, event)
            return
        except SubscriptionLost:
            continue
        except (ListenNotSupportedError, MCPError, TimeoutError):
            return


def _changed(attempt: Attempt, event: ServerEvent | None) -> None:
    """``event`` (None: anything may have changed) marks the lists it names stale."""
    from mcp.client.subscriptions import PromptsListChanged, ResourcesListChanged

    if event is None or isinstance(event, PromptsListChanged):
        attempt.stale["prompts"].set()
    if event is None or isinstance(event, ResourcesListChanged):
        attempt.stale["resources"].set()
    if event is None or not isinstance(event, PromptsListChanged | ResourcesListChanged):
        attempt.refresh.set()
