"""A session: the one mutable owner of a conversation and everything around it.

It holds the settings, the provider, the toolset (built once, here), the conversation
history, the lazy-MCP activation set and the session id, and builds an
:class:`~caliban.agent.Agent` for each prompt — and for each sub-agent an ``Agent`` call
starts. The REPL and headless mode drive a session; they never reach into the loop. Events
from the loop fan out to the session's listeners (renderer, transcript, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caliban.agent import Agent, Conversation, RunResult
from caliban.calls.verdict import ALLOW_ALL, Authorizer
from caliban.compaction import CompactionPolicy
from caliban.config.settings import LoadedConfig, Settings
from caliban.events import (
    AgentEvent,
    ConversationCleared,
    ConversationRewound,
    HistoryAppended,
    ModelChanged,
    Notice,
    PermissionModeChanged,
)
from caliban.hooks import NO_HOOKS, LoopHooks
from caliban.mcp.lazy.activation import ActivationCell, McpActivationSet
from caliban.mcp.lazy.policy import LazyPolicy, resolve_policy
from caliban.messages import Message, TextPart
from caliban.providers.base import Provider
from caliban.session.ledger import SpendingLimit, UsageLedger
from caliban.tools.base import BUILTIN, CallContext, Tool, ToolEnv
from caliban.toolsets.base import Toolset
from caliban.toolsets.combined import CombinedToolset
from caliban.toolsets.tool_list import ToolList

if TYPE_CHECKING:
    from caliban.checkpoints.manager import Checkpoints
    from caliban.mcp.client import McpManager
    from caliban.mcp.lazy.toolset import LazyMcpToolset
    from caliban.permissions.policy import PermissionPolicy
    from caliban.permissions.rules import Rule
    from caliban.sandbox.runtime import SandboxRuntime
    from caliban.skills.catalog import Skill
    from caliban.subagents import AgentDefinition

Listener = Callable[[AgentEvent], None]


class _NoMcp:
    """The MCP catalog of a session without servers: lazy loading still reports its state."""

    def tools(self) -> tuple[Tool, ...]:
        return ()

    def server_instructions(self) -> tuple[tuple[str, str], ...]:
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
    hooks: LoopHooks = NO_HOOKS
    """The user's hooks (see :mod:`caliban.hooks`), given to every agent of the session."""
    skills: Sequence[Skill] = ()
    """Custom commands and skills (``/name``; listed for the model, loaded with ``Skill``)."""
    permissions: PermissionPolicy | None = None
    """The policy behind ``authorizer``, when there is one: its mode (Shift+Tab) and rules."""
    id: str = field(default_factory=new_session_id)
    conversation: Conversation = field(default_factory=Conversation)
    ledger: UsageLedger = field(default_factory=UsageLedger)
    """What the session's requests used and cost, per model (sub-agents' and side requests'
    included); a new conversation (``/clear``) starts a new one."""
    authorizer: Authorizer = ALLOW_ALL
    listeners: list[Listener] = field(default_factory=list)
    max_turns: int = 100
    config: LoadedConfig | None = None
    """The settings files this session was built from (for ``/config``)."""
    mcp: McpManager | None = None
    """MCP server connections, when any are configured."""
    permission_mode_name: str | None = None
    """The permission mode in Claude Code's names (``dontAsk``), for headless output; ``None``:
    ``settings.permissions.mode``."""
    lazy_policy: LazyPolicy | None = None
    """Lazy MCP loading settings; resolved from ``settings`` and ``mcp.toml`` when not given."""
    activation: ActivationCell | None = None
    """The lazily loaded MCP tools now active; ``None`` when lazy loading cannot apply
    (``tools.lazy_mcp = false`` and no server with ``lazy = true``)."""
    main_agent: AgentDefinition | None = None
    """``--agent``'s definition: the main agent's tools are already its; this limits the
    provider's own web search too."""
    fallback_models: tuple[str, ...] = ()
    """``--fallback-model``: the main agent's models when its own stays overloaded."""
    status_line: Mapping[str, Any] | None = None
    """Claude Code's ``statusLine`` setting, for the REPL (:mod:`caliban.repl.statusline`)."""
    over_budget: Callable[[], str | None] | None = None
    """Asked after each of the main agent's responses: why the turn must stop
    (``--max-budget-usd``); ``None``: no budget."""
    sandbox: SandboxRuntime | None = None
    """The OS sandbox under Bash commands (:mod:`caliban.sandbox`); ``None``: none."""
    checkpoints: Checkpoints | None = None
    """The project's files before each user prompt (``/rewind``); ``None``: not taken."""
    toolset: Toolset = field(init=False)
    """Every tool the session's agent may call, composed once (see :mod:`caliban.toolsets`)."""
    _lazy: LazyMcpToolset | None = field(default=None, init=False, repr=False)
    _told_planning: bool = field(default=False, init=False, repr=False)
    """The last prompt carried the plan mode reminder, and no approved plan ended it since."""

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

            tools.append(AgentTool(self.agents, self.spawn_child))
        parts: list[Toolset] = [ToolList(tools)]
        if self.permissions is not None:
            from caliban.tools.exit_plan_mode import ExitPlanMode
            from caliban.toolsets.plan_mode import PlanModeToolset

            parts.append(PlanModeToolset(ExitPlanMode(self._leave_plan_mode), self.planning))
        if any(skill.model_invocable for skill in self.skills):
            from caliban.skills.toolset import SkillToolset

            parts.append(SkillToolset(self.skills))
        if self.activation is not None and self.lazy_policy is not None:
            from caliban.mcp.lazy.toolset import LazyMcpToolset
            from caliban.mcp.toolset import McpToolset

            lazy = self._lazy = LazyMcpToolset(
                McpToolset(
                    self.mcp if self.mcp is not None else NO_MCP,
                    resources=self.mcp,
                    order_settled=self._mcp_order_settled,
                ),
                activation=self.activation,
                policy=self.lazy_policy,
                context_window=self.context_window,
                servers=self.mcp,
            )
            if self.mcp is None:
                parts.append(lazy)
            else:
                from caliban.mcp.wait import StartingServersToolset, WaitToolset

                # Before the MCP tools, whose list grows at its end as servers list late.
                def searching() -> bool:
                    return lazy.tool_search in lazy.offered()

                wait = WaitToolset(self.mcp, tool_search_offered=searching)
                parts += [wait, lazy, StartingServersToolset(self.mcp)]
        elif self.mcp is not None:
            from caliban.mcp.toolset import McpToolset
            from caliban.mcp.wait import StartingServersToolset, WaitToolset

            mcp = McpToolset(self.mcp, resources=self.mcp, order_settled=self._mcp_order_settled)
            parts += [WaitToolset(self.mcp), mcp, StartingServersToolset(self.mcp)]
        return CombinedToolset(parts)

    def _mcp_order_settled(self) -> bool:
        return self.mcp is None or self.mcp.order_settled

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

    def planning(self) -> bool:
        """Whether the session is in plan mode (read-only; ExitPlanMode offered)."""
        return self.permissions is not None and self.permissions.mode == "plan"

    def _leave_plan_mode(self) -> None:
        """An approved plan: plan mode ends (for the default mode, unless the approval chose
        another); the tool's result tells the model, so no reminder follows."""
        if self.permissions is None:
            return
        if self.permissions.mode == "plan":
            self.permissions.mode = "default"
        self._told_planning = False
        self.emit(PermissionModeChanged(mode=self.permissions.mode))

    def _mode_reminder(self) -> str | None:
        """What a user prompt carries about plan mode: its reminder while it lasts, and once
        that it ended (Shift-Tab out of it) — never in the system prompt, which stays
        byte-stable for prompt caches."""
        from caliban.tools.exit_plan_mode import EXITED_PLAN_MODE_REMINDER, PLAN_MODE_REMINDER

        if self.planning():
            self._told_planning = True
            return PLAN_MODE_REMINDER
        if self._told_planning:
            self._told_planning = False
            return EXITED_PLAN_MODE_REMINDER
        return None

    @property
    def lazy(self) -> bool:
        """Whether MCP tools are loaded lazily now (``"auto"`` follows the catalog's size)."""
        return self._lazy is not None and self._lazy.lazy

    def search_index_builder(self) -> Callable[[], object] | None:
        """What builds the lazy catalog's search index, for a background thread, so the first
        ToolSearch does not pay for it; ``None`` when no MCP tool is loaded lazily."""
        return self._lazy.warm_index() if self._lazy is not None else None

    def context_window(self) -> int:
        """The current model's context window in tokens, as well as known now (the provider
        may have asked its server: see ``refresh_context_window``)."""
        from caliban.providers.select import context_window

        return context_window(self.provider, self.model)

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

    def compaction(self) -> CompactionPolicy:
        """When this session's conversations are compacted (``[context] auto_compact_at``)."""
        return CompactionPolicy(
            auto_at=self.settings.context.auto_compact_at, window=self.context_window
        )

    async def compact(self, instructions: str | None = None) -> None:
        """Compact the conversation now (``/compact``); raises
        :class:`~caliban.compaction.CompactionFailed` when there is nothing to compact."""
        await self.agent().compact("manual", instructions)

    def agent(self) -> Agent:
        return Agent(
            provider=self.provider,
            model=self.model,
            system_prompt=self.system_prompt,
            toolset=self.toolset,
            env=self.env,
            conversation=self.conversation,
            ledger=self.ledger,
            authorizer=self.authorizer,
            emit=self.emit,
            max_turns=self.max_turns,
            compaction=self.compaction(),
            web_search=self.offers_web_search(),
            hooks=self.hooks,
            prompt_tools=self._lazy.preactivate if self._lazy is not None else None,
            over_budget=self.over_budget,
            fallback_models=self.fallback_models,
        )

    def offers_web_search(self, scope: AgentDefinition | None = None) -> bool:
        """Whether the model gets the provider's own web search: only Anthropic has one, and
        a ``WebSearch`` deny rule (or a sub-agent's tool list) turns it off."""
        if self.provider.name != "anthropic":
            return False
        scope = scope if scope is not None else self.main_agent
        if scope is not None and not scope.allows("WebSearch"):
            return False
        if self.permissions is None:
            return True
        decision = self.permissions.decide("WebSearch", None, read_only=True, origin=BUILTIN)
        return decision.behavior != "deny"

    async def run(
        self, prompt: str | Message, *, model: str | None = None, allow: Sequence[Rule] = ()
    ) -> RunResult:
        """Run one prompt to completion on this session's conversation; ``model`` and the
        ``allow`` rules apply to this prompt only (a custom command's frontmatter)."""
        message = Message.user(prompt) if isinstance(prompt, str) else prompt
        if gc.get_freeze_count() == 0:
            # Start-up is over (the first prompt, headless or in the REPL): the imported
            # modules' objects go to the permanent generation, so a full collection no
            # longer walks them (10-50 ms each, late in a long session). A frozen object
            # is still freed by reference counting, only never as part of a cycle: they
            # live as long as the process anyway.
            gc.freeze()
        if (reminder := self._mode_reminder()) is not None:
            message = dataclasses.replace(message, parts=(*message.parts, TextPart(text=reminder)))
        agent = self.agent()
        if model:
            agent.model = model
        async with self._checkpointed(message):
            if not allow or self.permissions is None:
                return await agent.run(message)
            with self.permissions.allowing(allow):
                return await agent.run(message)

    @contextlib.asynccontextmanager
    async def _checkpointed(self, message: Message) -> AsyncIterator[None]:
        """Snapshot the project's files before ``message`` runs and after (see
        :mod:`caliban.checkpoints`); a failing store only warns."""
        if self.checkpoints is None:
            yield
            return
        active = self.activation.get().in_activation_order() if self.activation else None
        await self.checkpoints.before_prompt(message.id, message.text, active)
        try:
            yield
        finally:
            await asyncio.shield(self.checkpoints.after_prompt(message.id))

    def add_context(self, message: Message) -> None:
        """Append a message without a request (``!command``'s output, a stream-json
        ``assistant`` line, a resume's repair); the next prompt carries it. Announced like
        every history change, so transcripts keep it."""
        self.conversation.messages.append(message)
        self.emit(HistoryAppended(message=message))

    def spawn_child(self, definition: AgentDefinition, ctx: CallContext) -> Agent:
        """The sub-agent for one ``Agent`` call: its own history, env and toolset (derived
        from this session's, with its own activation set), this session's provider and
        permission policy; its events reach the listeners stamped with the call's id."""
        from caliban.subagents import DEFAULT_MAX_TURNS, child_system_prompt

        env = ctx.env.fork()
        return Agent(
            provider=self.provider,
            model=self._child_model(definition.model, ctx),
            system_prompt=child_system_prompt(definition, env.cwd, env.project_root),
            toolset=self.toolset.for_child(definition),
            env=env,
            ledger=self.ledger,
            authorizer=self.authorizer,
            emit=ctx.emit,
            # --max-turns bounds a sub-agent too: a looping child must not outrun its parent.
            max_turns=min(definition.max_turns or DEFAULT_MAX_TURNS, self.max_turns),
            parent_tool_use_id=ctx.call_id,
            compaction=self.compaction(),
            web_search=self.offers_web_search(definition),
            hooks=self.hooks,
        )

    def _child_model(self, wanted: str | None, ctx: CallContext) -> str:
        """The model a sub-agent runs on: the definition's (or the Agent call's), else
        ``$CLAUDE_CODE_SUBAGENT_MODEL``, else this session's; Claude Code aliases resolved
        for this session's provider."""
        import os

        from caliban.claude_code.model_aliases import resolve_alias

        wanted = wanted or os.environ.get("CLAUDE_CODE_SUBAGENT_MODEL") or None
        if wanted is None:
            return self.model
        resolved = resolve_alias(wanted, self.provider.name, os.environ)
        if resolved is None:
            ctx.emit(
                Notice(
                    level="warning",
                    text=f"model {wanted!r} is a Claude Code alias with no meaning for "
                    f"{self.provider.name}; the sub-agent uses {self.model} (set "
                    f"ANTHROPIC_DEFAULT_{wanted.upper()}_MODEL to choose one)",
                )
            )
            return self.model
        return resolved

    # -- changing state

    def limit_spending(self, limit_usd: float) -> None:
        """``--max-budget-usd``: from now on, a turn stops after the response that brings
        what the ledger says was spent to ``limit_usd``."""
        self.over_budget = SpendingLimit(
            self.ledger,
            limit_usd,
            warn=lambda text: self.emit(Notice(level="warning", text=text)),
        )

    def set_model(self, model: str, *, announce: bool = True) -> None:
        """Use ``model`` from the next prompt on (``/model``); the transcript records it."""
        self.model = model
        if announce:
            self.emit(ModelChanged(model=model))

    def clear(self) -> None:
        """Start a new conversation (``/clear``)."""
        self.conversation = Conversation()
        self.ledger = UsageLedger()
        self.env.state.clear()  # the todo list belongs to the conversation
        self._told_planning = False
        if self.activation is not None:
            self.activation.swap(lambda current: McpActivationSet.empty(current.cap))
        if self._lazy is not None:
            self._lazy.forget_preactivated()
        self.emit(ConversationCleared())

    def rewind_conversation(self, message_id: str) -> Message:
        """Cut the conversation back to before the user prompt ``message_id`` (``/rewind``):
        the prompt and all after it go, the lazily loaded MCP tools active then come back.
        Returns the prompt, whose text goes back to the input. Raises LookupError when the
        conversation holds no such message."""
        messages = self.conversation.messages
        index = next((i for i, m in enumerate(messages) if m.id == message_id), None)
        if index is None:
            raise LookupError(f"no message {message_id} in this conversation")
        prompt = messages[index]
        self.conversation = Conversation(messages=messages[:index])
        active: tuple[str, ...] | None = None
        if self.checkpoints is not None and self.activation is not None:
            from caliban.checkpoints.manager import CheckpointNotFound

            try:
                active = self.checkpoints.find(message_id).active
            except CheckpointNotFound:
                active = None
            if active is not None:
                names = active
                self.activation.swap(
                    lambda current: McpActivationSet.empty(current.cap).activate(names)[0]
                )
        self.emit(
            ConversationRewound(
                to=message_id, messages=tuple(self.conversation.messages), active=active
            )
        )
        return prompt

    def adopt(
        self, session_id: str, conversation: Conversation, ledger: UsageLedger | None = None
    ) -> None:
        """Continue a saved session: its id, history and usage (``--continue``, ``/resume``)."""
        self.id = session_id
        self.conversation = conversation
        if self.checkpoints is not None:
            self.checkpoints.adopt(session_id)
        if ledger is not None:
            self.ledger = ledger

    def restore_activation(self, active: McpActivationSet) -> None:
        """Replace the active MCP tools (a resumed session's)."""
        if self.activation is not None:
            self.activation.swap(lambda _current: active)
