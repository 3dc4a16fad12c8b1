"""A session: the one mutable owner of a conversation and everything around it.

It holds the settings, the provider, the built-in and MCP tools, the conversation history,
the lazy-MCP activation set and the session id, and builds an :class:`~caliban.agent.Agent`
for each prompt. The REPL and headless mode drive a session; they never reach into the loop.
Events from the loop fan out to the session's listeners (renderer, transcript, ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from caliban.agent import Agent, Authorize, Conversation, RunResult, allow_all
from caliban.config import LoadedConfig, Settings
from caliban.events import AgentEvent, ConversationCleared, ModelChanged
from caliban.messages import Message
from caliban.providers.base import Provider
from caliban.toolbox import StaticToolbox, Toolbox
from caliban.tools.base import Tool, ToolEnv

if TYPE_CHECKING:
    from caliban.mcp.client import McpManager

Listener = Callable[[AgentEvent], None]


def new_session_id() -> str:
    return str(uuid.uuid4())


@dataclass(kw_only=True)
class Session:
    settings: Settings
    provider: Provider
    model: str
    system_prompt: str
    env: ToolEnv
    tools: list[Tool]
    """Built-in tools, in the fixed order they are offered."""
    id: str = field(default_factory=new_session_id)
    conversation: Conversation = field(default_factory=Conversation)
    authorize: Authorize = allow_all
    listeners: list[Listener] = field(default_factory=list)
    max_turns: int = 100
    config: LoadedConfig | None = None
    """The settings files this session was built from (for ``/config``)."""
    mcp: McpManager | None = None
    """MCP server connections, when any are configured."""

    @property
    def cwd(self) -> Path:
        return self.env.cwd

    def emit(self, event: AgentEvent) -> None:
        for listener in self.listeners:
            listener(event)

    def toolbox(self) -> Toolbox:
        """The tools for the next prompt: built-ins, then MCP tools."""
        mcp_tools = self.mcp.tools() if self.mcp is not None else []
        return StaticToolbox([*self.tools, *mcp_tools])

    def agent(self) -> Agent:
        return Agent(
            provider=self.provider,
            model=self.model,
            system_prompt=self.system_prompt,
            toolbox=self.toolbox(),
            env=self.env,
            conversation=self.conversation,
            authorize=self.authorize,
            emit=self.emit,
            max_turns=self.max_turns,
        )

    async def run(self, prompt: str | Message) -> RunResult:
        """Run one prompt to completion on this session's conversation."""
        return await self.agent().run(prompt)

    def set_model(self, model: str) -> None:
        """Use ``model`` from the next prompt on (``/model``); the transcript records it."""
        self.model = model
        self.emit(ModelChanged(model=model))

    def clear(self) -> None:
        """Start a new conversation (``/clear``)."""
        self.conversation = Conversation()
        self.emit(ConversationCleared())
