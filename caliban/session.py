"""A session: the one mutable owner of a conversation and everything around it.

It holds the settings, the provider, the built-in and MCP tools, the conversation history,
the lazy-MCP activation set and the session id, and builds an :class:`~caliban.agent.Agent`
for each prompt. The REPL and headless mode drive a session; they never reach into the loop.
Events from the loop fan out to the session's listeners (renderer, transcript, ...).
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
from caliban.mcp.activation import ActivationCell, McpActivationSet
from caliban.mcp.lazy_settings import OFF, LazyDecision, LazyPolicy, decide, resolve_policy
from caliban.messages import Message
from caliban.providers.base import Provider
from caliban.toolbox import StaticToolbox, Toolbox
from caliban.tools.base import Tool, ToolEnv

if TYPE_CHECKING:
    from caliban.context import ContextReport
    from caliban.mcp.client import McpManager
    from caliban.mcp.wire import CatalogCache

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
    lazy_policy: LazyPolicy | None = None
    """Lazy MCP loading settings; resolved from ``settings`` and ``mcp.toml`` when not given."""
    activation: ActivationCell | None = None
    """The lazily loaded MCP tools now active; ``None`` when lazy loading cannot apply
    (``tools.lazy_mcp = false`` and no server with ``lazy = true``)."""
    _lazy_cache: tuple[object, tuple[str, int], LazyDecision] | None = field(
        default=None, init=False, repr=False
    )
    _catalog_cache: CatalogCache | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.lazy_policy is None:
            self.lazy_policy = resolve_policy(self.settings.tools, self._server_lazy_flags())
        if self.activation is None and self.lazy_policy.may_be_lazy:
            self.activation = ActivationCell(McpActivationSet.empty(self.lazy_policy.cap))

    @property
    def cwd(self) -> Path:
        return self.env.cwd

    # -- lazy MCP loading

    def _server_lazy_flags(self) -> dict[str, bool | None]:
        if self.mcp is None:
            return {}
        flags: dict[str, bool | None] = {}
        for name in self.mcp.server_names():
            config = self.mcp.server_config(name)
            flags[name] = config.lazy if config is not None else None
        return flags

    def _lazy_decision(self) -> LazyDecision:
        if self.activation is None or self.lazy_policy is None:
            return OFF
        from caliban.providers.select import context_window

        tools = self.mcp.tools() if self.mcp is not None else ()
        window = context_window(self.provider, self.model)  # may grow once the server says
        cached = self._lazy_cache
        if cached is not None and cached[0] is tools and cached[1] == (self.model, window):
            return cached[2]
        decision = decide(
            self.lazy_policy,
            tools,
            servers=self.mcp.server_names() if self.mcp is not None else (),
            context_window=window,
        )
        self._lazy_cache = (tools, (self.model, window), decision)
        return decision

    @property
    def lazy(self) -> bool:
        """Whether MCP tools are loaded lazily now (``"auto"`` follows the catalog's size)."""
        return self._lazy_decision().lazy

    @property
    def eager_servers(self) -> frozenset[str]:
        """Servers whose tools are always sent while lazy loading is on."""
        return self._lazy_decision().eager_servers

    def make_toolbox(
        self,
        *,
        builtins: Sequence[Tool],
        activation: ActivationCell | None,
        allow: Callable[[str], bool] | None = None,
    ) -> Toolbox:
        """A toolbox over ``builtins`` and this session's MCP tools (only those ``allow``
        accepts): a lazy one on ``activation`` while lazy loading is on, else every tool."""
        mcp = self.mcp
        if activation is None or not self.lazy:
            mcp_tools = mcp.tools() if mcp is not None else []
            allowed = [t for t in mcp_tools if allow is None or allow(t.name)]
            return StaticToolbox([*builtins, *allowed])
        from caliban.mcp.wire import CatalogCache, LazyToolbox

        if self._catalog_cache is None:
            self._catalog_cache = CatalogCache()
        return LazyToolbox(
            builtins=builtins,
            mcp_tools=mcp.tools if mcp is not None else tuple,
            activation=activation,
            eager_servers=self.eager_servers,
            allow=allow,
            cache=self._catalog_cache,
        )

    def context_report(self) -> ContextReport:
        """What fills the context window now (``/context``)."""
        from caliban.context import context_report

        return context_report(self)

    def emit(self, event: AgentEvent) -> None:
        for listener in self.listeners:
            listener(event)

    def toolbox(self) -> Toolbox:
        """The tools for the next prompt: built-ins, then MCP tools (filtered when lazy)."""
        return self.make_toolbox(builtins=self.tools, activation=self.activation)

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
        if self.activation is not None:
            self.activation.swap(lambda current: McpActivationSet.empty(current.cap))
        self.emit(ConversationCleared())
