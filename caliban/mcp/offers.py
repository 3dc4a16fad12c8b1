"""What a connected server offers beyond tools, as last listed: its prompts and resources.

The REPL completes ``/mcp__server__prompt`` and ``@server:uri`` from these lists, so a
keystroke never waits for a server. When a front door follows them
(:meth:`caliban.mcp.client.McpManager.follow_offers`: the REPL does, ``-p`` has no use for
them) they are listed once a server has connected (after it counts as ready, so start-up does
not wait for them) and again when the server says they changed
(``notifications/prompts/list_changed`` and ``…/resources/list_changed``, or the same events
of a ``subscriptions/listen`` stream). Both are bounded: a few pages, a few hundred entries,
short descriptions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from caliban.util.text import clipped, visible

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["MAX_OFFERS", "Kind", "Offers", "PromptOffer", "ResourceOffer", "fetch"]

Kind = Literal["prompts", "resources"]

MAX_OFFERS = 500
"""Prompts (or resources) kept of one server; a server that lists more is cut here."""
MAX_PAGES = 20
MAX_DESCRIPTION = 200


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptOffer:
    """A prompt, run as ``/mcp__<server>__<name> args``."""

    server: str
    name: str
    description: str = ""
    arguments: tuple[tuple[str, bool], ...] = ()
    """``(name, required)`` in the server's order."""

    @property
    def command(self) -> str:
        """The slash command's name, without its ``/``."""
        return f"mcp__{self.server}__{self.name}"

    @property
    def usage(self) -> str:
        """``city [days]``: its arguments, optional ones in brackets."""
        return " ".join(name if required else f"[{name}]" for name, required in self.arguments)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourceOffer:
    """A resource, attached as ``@<server>:<uri>``."""

    server: str
    uri: str
    name: str = ""
    description: str = ""

    @property
    def mention(self) -> str:
        """The mention without its ``@``."""
        return f"{self.server}:{self.uri}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Offers:
    """One server's prompts and resources, swapped whole when either changes."""

    prompts: tuple[PromptOffer, ...] = ()
    resources: tuple[ResourceOffer, ...] = ()


async def fetch(client: Client, server: str, kind: Kind) -> tuple[Any, ...]:
    """Server ``server``'s prompts or resources (empty when it does not offer them)."""
    capabilities = client.server_capabilities
    if kind == "prompts":
        if capabilities is None or capabilities.prompts is None:
            return ()
        prompts = await _pages(client.list_prompts, "prompts")
        return tuple(_prompt(server, p) for p in prompts if _typable(p.name))
    if capabilities is None or capabilities.resources is None:
        return ()
    resources = await _pages(client.list_resources, "resources")
    return tuple(
        ResourceOffer(
            server=server,
            uri=str(resource.uri),
            name=clipped(resource.name or "", MAX_DESCRIPTION),
            description=clipped(resource.description or "", MAX_DESCRIPTION),
        )
        for resource in resources
        if _typable(str(resource.uri))
    )


def _typable(word: str) -> bool:
    """Whether ``word`` can be typed as one word of a prompt: no space, no control or
    format character (a name a server chose is shown and completed only then)."""
    return bool(word) and not any(c.isspace() for c in word) and visible(word) == word


def _prompt(server: str, prompt: Any) -> PromptOffer:
    return PromptOffer(
        server=server,
        name=prompt.name,
        description=clipped(prompt.description or "", MAX_DESCRIPTION),
        arguments=tuple((a.name, bool(a.required)) for a in prompt.arguments or ()),
    )


async def _pages(fetch_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch_page(cursor=cursor)
        found += getattr(page, field)
        cursor = page.next_cursor
        if not cursor or len(found) >= MAX_OFFERS:
            break
    return found[:MAX_OFFERS]
