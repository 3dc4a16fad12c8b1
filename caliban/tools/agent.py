"""The ``Agent`` tool: hand a task to a sub-agent with its own context window and tools.

The tool knows nothing about sessions: it is given the definitions and a factory that builds
the child :class:`~caliban.agent.Agent` for one call (a session's
:meth:`~caliban.session.Session.spawn_child`). It runs the child to completion and returns
its final text, cut at :data:`MAX_RESULT_CHARS`, followed by a one-line summary of turns and
tokens. Several calls in one turn run concurrently because the loop gathers tool calls;
cancelling the parent's turn cancels the child's run, which is awaited here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, Field

from caliban.errors import UsageError
from caliban.messages import TextPart, ToolSpec
from caliban.session.serialize import usage_to_api_json
from caliban.subagents import AGENT_TOOL_NAME, DEFAULT_SUBAGENT, AgentDefinition
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput
from caliban.util.text import plural

if TYPE_CHECKING:
    from caliban.agent import Agent, RunResult
    from caliban.events import AgentEvent
    from caliban.messages import Usage
    from caliban.session.worktree import Worktree

MAX_RESULT_CHARS: Final = 20_000
"""The longest sub-agent answer passed back to the parent; the rest is cut with a note."""

ChildFactory = Callable[[AgentDefinition, CallContext], "Agent"]
"""Builds the child agent for one call (see :meth:`caliban.session.Session.spawn_child`)."""

DESCRIPTION = """\
Launch a sub-agent to carry out a task on its own, with its own context window and tools, \
then return one final answer. You see only that answer, not its intermediate steps, so \
sub-agents keep this conversation short.

Use it for open-ended searches that may take several attempts, research across many files, \
or self-contained parts of a larger task. Launch several in one response (several Agent calls \
in one message) to run them in parallel. Do not use it for a single file read or a simple \
search you can do directly.

The sub-agent does not see this conversation: the prompt must contain everything it needs - \
the goal, relevant paths and facts, and exactly what to report back. Its answer is not shown \
to the user; summarise what matters. Sub-agents cannot start sub-agents.

Available agent types (subagent_type; default: general-purpose):"""


class AgentInput(BaseModel):
    description: str = Field(description="A short (3-5 word) label for the task.")
    prompt: str = Field(description="The full task for the sub-agent, with all context it needs.")
    subagent_type: str | None = Field(
        default=None,
        description="Which agent type to use (see the list above); default general-purpose.",
    )
    model: str | None = Field(
        default=None,
        description="Optional model for this sub-agent: an alias (sonnet, opus, haiku) or a "
        "model id. Beats the agent type's own model; default: the agent type's, else yours.",
    )


class AgentTool(BuiltinTool[AgentInput]):
    """Runs a sub-agent in-process; see the module docstring."""

    name = AGENT_TOOL_NAME
    description = DESCRIPTION
    input_model = AgentInput
    # Starting a sub-agent changes nothing; each of the child's calls is authorized itself.
    read_only = True

    def __init__(
        self,
        definitions: Sequence[AgentDefinition],
        spawn: ChildFactory,
        *,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> None:
        self.definitions = {d.name: d for d in definitions}
        self.spawn = spawn
        self.max_result_chars = max_result_chars

    @functools.cached_property
    def spec(self) -> ToolSpec:
        base = super().spec
        listing = "\n".join(
            f"- {d.name}: {d.description} (Tools: {d.tools_label})"
            for d in self.definitions.values()
        )
        return ToolSpec(
            name=base.name, description=f"{DESCRIPTION}\n{listing}", input_schema=base.input_schema
        )

    async def run(self, args: AgentInput, ctx: CallContext) -> ToolOutput:
        kind = args.subagent_type or DEFAULT_SUBAGENT
        definition = self.definitions.get(kind)
        if definition is None:
            available = ", ".join(self.definitions) or "(none)"
            return ToolOutput.error(
                f"Unknown subagent_type '{kind}'. Available agent types: {available}."
            )
        if args.model:
            definition = dataclasses.replace(definition, model=args.model)
        stats = _ToolStats(call_id=ctx.call_id, forward=ctx.emit)
        started = time.perf_counter()
        worktree = None
        if definition.isolation == "worktree":
            try:
                worktree, ctx = await _in_worktree(ctx)
            except UsageError as exc:
                return ToolOutput.error(f"The {kind} agent runs in a git worktree: {exc}")
        child = self.spawn(definition, dataclasses.replace(ctx, emit=stats))
        try:
            result = await child.run(args.prompt)
        finally:
            kept = worktree is not None and await _keep_worktree(worktree)
        output = self.format_result(kind, result)
        if kept and worktree is not None:
            where = (
                f"[its changes are in the git worktree {worktree.path}, on branch "
                f"{worktree.branch}]"
            )
            output = dataclasses.replace(output, content=(*output.content, TextPart(text=where)))
        data = {
            "status": "completed",
            "prompt": args.prompt,
            "agentId": agent_id(ctx.call_id),
            "agentType": kind,
            "content": [{"type": "text", "text": text}] if (text := result.text.strip()) else [],
            "resolvedModel": child.model,
            "totalDurationMs": int((time.perf_counter() - started) * 1000),
            "totalTokens": result.usage.context_tokens + result.usage.output_tokens,
            "totalToolUseCount": stats.total,
            "usage": usage_to_api_json(result.usage),
            "toolStats": stats.as_dict(),
        }
        if kept and worktree is not None:
            data |= {"worktreePath": str(worktree.path), "worktreeBranch": worktree.branch}
        return dataclasses.replace(output, data=data)

    def format_result(self, kind: str, result: RunResult) -> ToolOutput:
        """The child's answer (cut at ``max_result_chars``), then a summary line: two text
        blocks, as Claude Code returns them."""
        text = result.text.strip() or "(the sub-agent returned no text)"
        if len(text) > self.max_result_chars:
            text = (
                f"{text[: self.max_result_chars]}\n[… answer cut: the sub-agent wrote "
                f"{len(text):,} characters; the first {self.max_result_chars:,} are shown]"
            )
        counts = _counts(result.num_turns, result.usage)
        notes = []
        if result.error:
            notes.append(f"[sub-agent stopped before finishing: {result.error}]")
        notes.append(f"[sub-agent {kind}: {counts}]")
        return ToolOutput(
            content=(TextPart(text=text), TextPart(text="\n\n".join(notes))),
            is_error=result.is_error,
            summary=f"{kind}: {counts}",
        )


async def _in_worktree(ctx: CallContext) -> tuple[Worktree, CallContext]:
    """A new worktree for one isolated sub-agent call, and the context that works in it."""
    from caliban.session.worktree import create_worktree

    name = f"agent-{agent_id(ctx.call_id)[1:9]}"
    worktree = await asyncio.to_thread(create_worktree, ctx.env.project_root, name)
    env = dataclasses.replace(ctx.env.fork(), cwd=worktree.path, project_root=worktree.path)
    return worktree, dataclasses.replace(ctx, env=env)


async def _keep_worktree(worktree: Worktree) -> bool:
    """Remove an isolated sub-agent's worktree when it changed nothing; whether it stays."""
    from caliban.session.worktree import changes, remove_worktree
    from caliban.util.git import GitError

    try:
        if (await asyncio.to_thread(changes, worktree)).none:
            await asyncio.to_thread(remove_worktree, worktree)
            return False
    except GitError:
        pass  # kept: what is in it is the user's to look at
    return True


def agent_id(call_id: str) -> str:
    """The id of the sub-agent an ``Agent`` call starts (Claude Code's ``agentId`` and the
    ``task_id`` of its task frames), derived from the call id so every reader agrees."""
    return "a" + hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:16]


_STAT_KINDS: Final = {
    "Read": "read",
    "Glob": "search",
    "Grep": "search",
    "ToolSearch": "search",
    "Bash": "bash",
    "Edit": "edit",
    "Write": "edit",
    "NotebookEdit": "edit",
}


class _ToolStats:
    """Counts the child's finished tool calls by kind (Claude Code's ``toolStats``) and
    passes every event on."""

    def __init__(self, *, call_id: str, forward: Callable[[AgentEvent], None]) -> None:
        self.call_id = call_id
        self.forward = forward
        self.counts = {"read": 0, "search": 0, "bash": 0, "edit": 0, "other": 0}
        self.added = self.removed = 0

    def __call__(self, event: AgentEvent) -> None:
        from caliban.events import ToolFinished

        if isinstance(event, ToolFinished) and event.parent_tool_use_id == self.call_id:
            self.counts[_STAT_KINDS.get(event.call.name, "other")] += 1
            if event.change is not None:
                from caliban.tools.diff import diff_lines

                diff = diff_lines(event.change.before or "", event.change.after)
                self.added += diff.added
                self.removed += diff.removed
        self.forward(event)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, int]:
        return {
            "readCount": self.counts["read"],
            "searchCount": self.counts["search"],
            "bashCount": self.counts["bash"],
            "editFileCount": self.counts["edit"],
            "linesAdded": self.added,
            "linesRemoved": self.removed,
            "otherToolCount": self.counts["other"],
        }


def _counts(turns: int, usage: Usage) -> str:
    return (
        f"{plural(turns, 'turn')}, {usage.context_tokens:,} in / {usage.output_tokens:,} out tokens"
    )


__all__ = [
    "MAX_RESULT_CHARS",
    "AgentInput",
    "AgentTool",
    "ChildFactory",
    "agent_id",
]
