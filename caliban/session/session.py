"""A session: the one mutable owner of a conversation and everything around it.

It holds the settings, the provider, the toolset (built once, here), the conversation
history, the lazy-MCP activation set and the session id, and builds an
:class:`~caliban.agent.Agent` for each prompt — and for each sub-agent an ``Agent`` call
starts. The REPL and headless mode drive a session; they never reach into the loop. Events
from the loop fan out to the session's listeners (renderer, transcript, ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from caliban.agent import Agent, Authorize, Conversation, RunResult, allow_all
from caliban.config import LoadedConfig, Settings
from caliban.events import AgentEvent, ConversationCleared, ModelChanged
from caliban.mcp.lazy.activation import ActivationCell, McpActivationSet
from caliban.mcp.lazy.policy import LazyPolicy, resolve_policy
from caliban.messages import Message, Usage
from caliban.providers.base import Provider
from caliban.tools.base import CallContext, Tool, ToolEnv
from caliban.toolsets.base import Toolset
from caliban.toolsets.combined import CombinedToolset
from caliban.toolsets.tool_list import ToolList

if TYPE_CHECKING:
    from caliban.mcp.client import McpManager
    from caliban.mcp.lazy.toolset import LazyMcpToolset
    from caliban.subagents import AgentDefinition

Listener = Callable[[AgentEvent], None]


class _NoMcp:
    """The MCP catalog of a session without servers: lazy loading still reports its state."""

    def tools(self) -> tuple[Tool, ...]:
        return ()


NO_MCP = _NoMcp()


def new_session_id() -> str:
    return str(uuid.uuid4())


@dataclass(kw_only=True)
class Session:
    settings: Settings
    provider: Provider
    model: str
    system_prompt: str
    env: ToolEnv
    builtins: Sequence[Tool]
    """Built-in tools, in the fixed order they are offered."""
    agents: Sequence[AgentDefinition] = ()
    """Sub-agents the ``Agent`` tool can start; none: no ``Agent`` tool."""
    id: str = field(default_factory=new_session_id)
    conversation: Conversation = field(default_factory=Conversation)
    authorize: Authorize = allow_all
    listeners: list[Listener] = field(default_factory=list)
    max_turns: int = 100
    config: LoadedConfig | None = None
    """The settings files this session was built from (for ``/config``)."""
    mcp: McpManager | None = None
    """MCP server connections, when any are configured."""
    lazy_policy: LazyPolicy | None = None
    """Lazy MCP loading settings; resolved from ``settings`` and ``mcp.toml`` when not given."""
    activation: ActivationCell | None = None
    """The lazily loaded MCP tools now active; ``None`` when lazy loading cannot apply
    (``tools.lazy_mcp = false`` and no server with ``lazy = true``)."""
    toolset: Toolset = field(init=False)
    """Every tool the session's agent may call, composed once (see :mod:`caliban.toolsets`)."""
    _lazy: LazyMcpToolset | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.lazy_policy is None:
            self.lazy_policy = resolve_policy(self.settings.tools, self._server_lazy_flags())
        if self.activation is None and self.lazy_policy.may_be_lazy:
            self.activation = ActivationCell(McpActivationSet.empty(self.lazy_policy.cap))
        self.toolset = self._build_toolset()

    def _build_toolset(self) -> Toolset:
        tools = list(self.builtins)
        if self.agents:
            from caliban.tools.agent import AgentTool

            tools.append(AgentTool(self.agents, self.spawn_child, on_usage=self._add_child_usage))
        parts: list[Toolset] = [ToolList(tools)]
        if self.activation is not None and self.lazy_policy is not None:
            from caliban.mcp.lazy.toolset import LazyMcpToolset
            from caliban.mcp.toolset import McpToolset

            self._lazy = LazyMcpToolset(
                McpToolset(self.mcp if self.mcp is not None else NO_MCP),
                activation=self.activation,
                policy=self.lazy_policy,
                context_window=self.context_window,
                servers=self.mcp,
            )
            parts.append(self._lazy)
        elif self.mcp is not None:
            from caliban.mcp.toolset import McpToolset

            parts.append(McpToolset(self.mcp))
        return CombinedToolset(parts)

    def _server_lazy_flags(self) -> dict[str, bool | None]:
        if self.mcp is None:
            return {}
        flags: dict[str, bool | None] = {}
        for name in self.mcp.server_names():
            config = self.mcp.server_config(name)
            flags[name] = config.lazy if config is not None else None
        return flags

    @property
    def cwd(self) -> Path:
        return self.env.cwd

    @property
    def lazy(self) -> bool:
        """Whether MCP tools are loaded lazily now (``"auto"`` follows the catalog's size)."""
        return self._lazy is not None and self._lazy.lazy

    def search_index_builder(self) -> Callable[[], object] | None:
        """What builds the lazy catalog's search index, for a background thread, so the first
        ToolSearch does not pay for it; ``None`` when no MCP tool is loaded lazily."""
        return self._lazy.warm_index() if self._lazy is not None else None

    def context_window(self) -> int:
        """The current model's context window in tokens."""
        from caliban.providers.select import context_window

        return context_window(self.provider.name, self.model)

    # -- listeners

    def emit(self, event: AgentEvent) -> None:
        for listener in self.listeners:
            listener(event)

    def add_listener(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    # -- running

    def agent(self) -> Agent:
        return Agent(
            provider=self.provider,
            model=self.model,
            system_prompt=self.system_prompt,
            toolset=self.toolset,
            env=self.env,
            conversation=self.conversation,
            authorize=self.authorize,
            emit=self.emit,
            max_turns=self.max_turns,
        )

    async def run(self, prompt: str | Message) -> RunResult:
        """Run one prompt to completion on this session's conversation."""
        return await self.agent().run(prompt)

    def spawn_child(self, definition: AgentDefinition, ctx: CallContext) -> Agent:
        """The sub-agent for one ``Agent`` call: its own history, env and toolset (derived
        from this session's, with its own activation set), this session's provider and
        permission policy; its events reach the listeners stamped with the call's id."""
        from caliban.subagents import DEFAULT_MAX_TURNS, child_system_prompt

        env = ctx.env.fork()
        return Agent(
            provider=self.provider,
            model=definition.model or self.model,
            system_prompt=child_system_prompt(definition, env.cwd, env.project_root),
            toolset=self.toolset.for_child(definition),
            env=env,
            authorize=self.authorize,
            emit=ctx.emit,
            max_turns=definition.max_turns or DEFAULT_MAX_TURNS,
            parent_tool_use_id=ctx.call_id,
        )

    def _add_child_usage(self, usage: Usage) -> None:
        """A sub-agent's tokens count toward the session's (``/cost``)."""
        self.conversation.usage += usage

    # -- changing state

    def set_model(self, model: str, *, announce: bool = True) -> None:
        """Use ``model`` from the next prompt on (``/model``); the transcript records it."""
        self.model = model
        if announce:
            self.emit(ModelChanged(model=model))

    def clear(self) -> None:
        """Start a new conversation (``/clear``)."""
        self.conversation = Conversation()
        if self.activation is not None:
            self.activation.swap(lambda current: McpActivationSet.empty(current.cap))
        self.emit(ConversationCleared())

    def adopt(self, session_id: str, conversation: Conversation) -> None:
        """Continue a saved session: its id and history (``--continue``, ``/resume``)."""
        self.id = session_id
        self.conversation = conversation

    def restore_activation(self, active: McpActivationSet) -> None:
        """Replace the active MCP tools (a resumed session's)."""
        if self.activation is not None:
            self.activation.swap(lambda _current: active)
