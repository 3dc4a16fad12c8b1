"""MCP prompts as slash commands: ``/mcp__<server>__<prompt> arg1 arg2`` (Claude Code's form).

The words after the name are the prompt's arguments in the order the server lists them
(quote one that has spaces: ``/mcp__travel__plan "New York" 5``); a missing required one is a
usage message, not a request. The server's messages become the user's prompt, after the same
``<command-message>`` header a custom command gets.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from caliban.mcp.offers import PromptOffer, fetch
from caliban.mcp.resources import ServerRequests
from caliban.mcp.results import CALL_FAILURES
from caliban.mcp.tools import failure_text

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["PROMPT_PREFIX", "PromptExpanded", "expand_prompt", "split_prompt_name"]

PROMPT_PREFIX = "mcp__"


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptExpanded:
    """The prompt's text for the user message, or why there is none."""

    text: str | None = None
    error: str | None = None


def split_prompt_name(name: str, servers: list[str]) -> tuple[str, str] | None:
    """``mcp__travel__plan`` → ``("travel", "plan")`` for a configured server ``travel``
    (the longest server name that fits, so a server ``a__b`` is found too)."""
    if not name.startswith(PROMPT_PREFIX):
        return None
    rest = name[len(PROMPT_PREFIX) :]
    for server in sorted(servers, key=len, reverse=True):
        if rest.startswith(f"{server}__") and len(rest) > len(server) + 2:
            return server, rest[len(server) + 2 :]
    return None


async def expand_prompt(servers: ServerRequests, name: str, arguments: str) -> PromptExpanded:
    """Ask the server for prompt ``name`` (``mcp__<server>__<prompt>``) with ``arguments``."""
    split = split_prompt_name(name, servers.server_names())
    if split is None:
        return PromptExpanded(error=f"Unknown command: /{name}")
    server, prompt = split

    async def listed(client: Client) -> tuple[PromptOffer, ...]:
        # every page, as completion offers them: a prompt it offers is one this finds
        return await fetch(client, server, "prompts")

    prompts = await servers.request(server, "prompts/list", listed)
    if isinstance(prompts, CALL_FAILURES):
        return PromptExpanded(error=failure_text(prompts))
    found = next((p for p in prompts if p.name == prompt), None)
    if found is None:
        known = ", ".join(f"/{p.command}" for p in prompts) or "none"
        return PromptExpanded(error=f"MCP server {server!r} has no prompt {prompt!r} ({known})")
    try:
        words = shlex.split(arguments)
    except ValueError as exc:
        return PromptExpanded(error=f"/{name}: {exc}")
    params = found.arguments
    if len(words) > len(params) or any(required for _, required in params[len(words) :]):
        return PromptExpanded(error=f"Usage: /{name} {found.usage}".rstrip())
    values = {param: word for (param, _), word in zip(params, words, strict=False)}

    async def get(client: Client) -> Any:
        return await client.get_prompt(prompt, values)

    result = await servers.request(server, "prompts/get", get)
    if isinstance(result, CALL_FAILURES):
        return PromptExpanded(error=failure_text(result))
    return PromptExpanded(text="\n\n".join(_text(m.content) for m in result.messages))


def _text(content: Any) -> str:
    kind = getattr(content, "type", None)
    if kind == "text":
        return str(content.text)
    if kind == "resource" and getattr(content.resource, "text", None) is not None:
        return str(content.resource.text)
    return f"[{kind} content of the prompt, not shown]"
