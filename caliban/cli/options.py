"""What the top-level command line asked for, handed to the REPL or the headless runner.

Kept apart from :mod:`caliban.cli.main` so that the runners can import it without importing
the command line (and the command line imports the runners only when it runs them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from caliban.session.worktree import Worktree

EXIT_USAGE = 2
EXIT_CONFIG = 78
EXIT_INTERRUPTED = 130

OutputFormat = Literal["text", "json", "stream-json"]
InputFormat = Literal["text", "stream-json"]
PermissionModeName = Literal[
    "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"
]
"""Claude Code's modes. ``dontAsk`` is ``default`` without asking (what would ask is denied);
``auto`` (Claude Code's classifier) is not implemented and runs as ``default``."""
EffortName = Literal["low", "medium", "high"]
SandboxModeName = Literal["off", "read-only", "workspace-write"]
"""``--sandbox``, as Codex's: where sandboxed commands may write (``off``: no sandbox)."""


@dataclass(frozen=True, kw_only=True)
class CliOptions:
    """What the top-level flags asked for."""

    prompt: str | None
    print_mode: bool
    output_format: OutputFormat
    model: str | None
    provider: str | None
    max_turns: int | None
    permission_mode: str | None
    allowed_tools: tuple[str, ...]
    disallowed_tools: tuple[str, ...]
    continue_session: bool
    resume: str | None
    """A session id, ``""`` for the picker, or ``None``."""
    cwd: Path
    agent: str | None = None
    """``--agent NAME``: the main agent is that sub-agent definition (its prompt, tools and
    model)."""
    bare: bool = False
    """``--bare``: no memory files, hooks or MCP servers but ``--mcp-config``'s (the flag also
    narrows the tools and turns off commands and skills)."""
    disable_slash_commands: bool = False
    """``--disable-slash-commands``: no custom commands or skills (and no Skill tool)."""
    fork_session: bool = False
    """``--fork-session``: with ``-c``/``--resume``, continue under a new session id."""
    verbose: bool = False
    input_format: InputFormat = "text"
    include_partial_messages: bool = False
    replay_user_messages: bool = False
    system_prompt: str | None = None
    """Replaces caliban's system prompt (environment and memory included)."""
    append_system_prompt: str | None = None
    mcp_config: tuple[str, ...] = ()
    """``--mcp-config`` values: files or JSON objects of the form ``{"mcpServers": {…}}``."""
    strict_mcp_config: bool = False
    add_dirs: tuple[Path, ...] = ()
    session_id: str | None = None
    settings: str | None = None
    """``--settings``: a Claude Code settings file or JSON object."""
    setting_sources: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    """``--tools``: exactly these built-in tools (``()`` for none); ``None``: all."""
    agents_json: str | None = None
    no_session_persistence: bool = False
    effort: str | None = None
    """``--effort``: low, medium or high (the ``model_effort`` setting)."""
    fallback_models: tuple[str, ...] = ()
    """``--fallback-model``: models (ids or aliases) to switch to when the model is
    overloaded."""
    max_budget_usd: float | None = None
    """``--max-budget-usd``: end the turn once the requests cost this much."""
    permission_prompt_tool: str | None = None
    """``--permission-prompt-tool``: ``stdio`` (with stream-json input) asks the Agent SDK;
    anything else is accepted and what would ask is denied."""
    sandbox: SandboxModeName | None = None
    """``--sandbox``: the OS sandbox's mode, beating the ``sandbox`` settings."""
    json_schema: Mapping[str, Any] | None = None
    """``--json-schema``: the main agent answers through a StructuredOutput tool with this
    input schema (:mod:`caliban.tools.structured_output`)."""
    worktree: Worktree | None = None
    """``-w``: the worktree the session runs in (``cwd`` is in it), made before it starts."""
