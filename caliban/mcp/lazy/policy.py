"""Whether MCP tools are loaded lazily, and which servers stay on the wire.

Three inputs decide it: ``[tools] lazy_mcp`` (``false``, ``true`` or ``"auto"``),
``[tools] max_active_schemas`` (the activation cap; ``0`` turns lazy loading off with a
warning) and each server's ``lazy`` flag in ``mcp.toml`` (``false`` pins the server eager,
``true`` makes it lazy even when ``lazy_mcp`` is off). ``"auto"`` is lazy when the MCP tool
definitions would take more than :data:`AUTO_FRACTION` of the model's context window, which can
only be known once the servers have listed their tools, so :func:`decide` is asked again
whenever the catalog changes.

Pure: nothing here does I/O or imports the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

from caliban.config.settings import ToolsSettings
from caliban.tools.base import Tool
from caliban.util.tokens import tool_tokens

__all__ = [
    "AUTO_FRACTION",
    "LazyDecision",
    "LazyPolicy",
    "decide",
    "resolve_policy",
]

AUTO_FRACTION = 0.10
"""``lazy_mcp = "auto"`` turns lazy loading on above this share of the context window."""

Mode = Literal["off", "on", "auto"]


@dataclass(frozen=True, kw_only=True)
class LazyPolicy:
    """The lazy-loading settings of one session, resolved (see :func:`resolve_policy`)."""

    mode: Mode
    cap: int
    """Soft cap on active lazily loaded tools (``tools.max_active_schemas``)."""
    pinned_eager: frozenset[str] = frozenset()
    """Servers with ``lazy = false``: always on the wire, never counted toward the cap."""
    forced_lazy: frozenset[str] = frozenset()
    """Servers with ``lazy = true``: lazy whatever ``tools.lazy_mcp`` says."""
    warning: str | None = None
    """Something the user should be told (shown once, at start-up)."""
    search_model: str = "auto"
    """``tools.search_model``: the semantic models ToolSearch fuses with BM25."""
    preactivate: int = 0
    """``tools.preactivate``: tools loaded for a prompt before the model sees it (at most)."""

    @property
    def may_be_lazy(self) -> bool:
        """Whether any MCP tool can be deferred in this session (it then needs a cell)."""
        return self.mode != "off" or bool(self.forced_lazy)


@dataclass(frozen=True, kw_only=True)
class LazyDecision:
    """What the wire filter needs: lazy or not, and which servers stay eager."""

    lazy: bool
    eager_servers: frozenset[str] = frozenset()
    """Servers pinned eager (``lazy = false``)."""
    lazy_servers: frozenset[str] | None = None
    """When set, only these servers are lazy (``lazy = true`` while ``lazy_mcp`` is off)."""

    def is_eager(self, server: str) -> bool:
        """Whether ``server``'s tools are always on the wire."""
        if server in self.eager_servers:
            return True
        return self.lazy_servers is not None and server not in self.lazy_servers


OFF = LazyDecision(lazy=False)


def resolve_policy(
    tools: ToolsSettings, server_lazy: Mapping[str, bool | None] | None = None
) -> LazyPolicy:
    """Resolve ``[tools]`` settings and the per-server ``lazy`` flags of ``mcp.toml``."""
    flags = server_lazy or {}
    pinned = frozenset(name for name, lazy in flags.items() if lazy is False)
    forced = frozenset(name for name, lazy in flags.items() if lazy is True)
    match tools.lazy_mcp:
        case True:
            mode: Mode = "on"
        case False:
            mode = "off"
        case "auto":
            mode = "auto"
        case _:
            assert_never(tools.lazy_mcp)
    cap = tools.max_active_schemas
    if cap < 1:
        wanted = mode != "off" or bool(forced)
        warning = (
            "tools.max_active_schemas = 0 turns lazy MCP loading off: every MCP tool is sent "
            "with every request. Set it to 1 or more (default 24) to load MCP tools lazily."
            if wanted
            else None
        )
        return LazyPolicy(
            mode="off",
            cap=1,
            pinned_eager=pinned,
            warning=warning,
            search_model=tools.search_model,
            preactivate=tools.preactivate,
        )
    return LazyPolicy(
        mode=mode,
        cap=cap,
        pinned_eager=pinned,
        forced_lazy=forced,
        search_model=tools.search_model,
        preactivate=tools.preactivate,
    )


def decide(policy: LazyPolicy, mcp_tools: Sequence[Tool], *, context_window: int) -> LazyDecision:
    """Lazy or eager for the current catalog (``"auto"`` weighs its size against the window)."""
    match policy.mode:
        case "on":
            return LazyDecision(lazy=True, eager_servers=policy.pinned_eager)
        case "auto":
            tokens = tool_tokens(mcp_tools)
            if tokens > AUTO_FRACTION * context_window:
                return LazyDecision(lazy=True, eager_servers=policy.pinned_eager)
        case "off":
            pass
        case _:
            assert_never(policy.mode)
    if not policy.forced_lazy:
        return OFF
    return LazyDecision(lazy=True, lazy_servers=policy.forced_lazy)
