"""A stdio MCP test server whose prompts come two to a page (``nextCursor``), as a server
with many prompts lists them: five prompts, so ``deploy`` and ``review`` are on page 2 and
``retro`` on page 3.

    python paged_prompts.py

``build()`` is the same server for ``McpManager(in_process=…)``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

PAGE_SIZE = 2
PROMPTS = {
    "standup": "Write today's standup.",
    "triage": "Triage the open issues.",
    "deploy": "Deploy {target} to production.",
    "review": "Review the last commit.",
    "retro": "Run the sprint retro.",
}


def build() -> Server[Any]:
    async def list_prompts(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        names = list(PROMPTS)[start : start + PAGE_SIZE]
        prompts = [
            types.Prompt(
                name=name,
                description=PROMPTS[name],
                arguments=(
                    [types.PromptArgument(name="target", required=True)]
                    if "{target}" in PROMPTS[name]
                    else None
                ),
            )
            for name in names
        ]
        following = start + PAGE_SIZE
        return types.ListPromptsResult(
            prompts=prompts, next_cursor=str(following) if following < len(PROMPTS) else None
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        text = PROMPTS[params.name].format(**(params.arguments or {}))
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(messages=[message])

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    return Server(
        "paged",
        version="1.0",
        on_list_tools=list_tools,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve() -> None:
    async with stdio_server() as (read_stream, write_stream):
        server = build()
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
