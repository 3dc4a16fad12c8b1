"""The ``Agent`` tool: hand a task to a sub-agent with its own context window and tools.

The tool knows nothing about sessions: it is given the definitions and a factory that builds
the child :class:`~caliban.agent.Agent` for one call (a session's
:meth:`~caliban.session.Session.spawn_child`). It runs the child to completion and returns
its final text, cut at :data:`MAX_RESULT_CHARS`, followed by a one-line summary of turns and
tokens. Several calls in
one turn run concurrently because the loop gathers tool calls; cancelling the parent's turn
cancels the child's run, which is awaited here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, Field

from caliban.messages import ToolSpec
from caliban.subagents import AGENT_TOOL_NAME, DEFAULT_SUBAGENT, AgentDefinition
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput

if TYPE_CHECKING:
    from caliban.agent import Agent, RunResult
    from caliban.messages import Usage

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
        on_usage: Callable[[Usage], None] = lambda usage: None,
    ) -> None:
        self.definitions = {d.name: d for d in definitions}
        self.spawn = spawn
        self.max_result_chars = max_result_chars
        self.on_usage = on_usage

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
        child = self.spawn(definition, ctx)
        result = await child.run(args.prompt)
        self.on_usage(child.conversation.usage)  # its side requests (WebFetch) included
        return self.format_result(kind, result)

    def format_result(self, kind: str, result: RunResult) -> ToolOutput:
        """The child's answer (cut at ``max_result_chars``) and a summary line."""
        text = result.text.strip() or "(the sub-agent returned no text)"
        if len(text) > self.max_result_chars:
            text = (
                f"{text[: self.max_result_chars]}\n[… answer cut: the sub-agent wrote "
                f"{len(text):,} characters; the first {self.max_result_chars:,} are shown]"
            )
        counts = _counts(result.num_turns, result.usage)
        lines = [text]
        if result.error:
            lines.append(f"[sub-agent stopped before finishing: {result.error}]")
        lines.append(f"[sub-agent {kind}: {counts}]")
        return ToolOutput(
            content=ToolOutput.text("\n\n".join(lines)).content,
            is_error=result.is_error,
            summary=f"{kind}: {counts}",
        )


def _counts(turns: int, usage: Usage) -> str:
    plural = "turn" if turns == 1 else "turns"
    return f"{turns} {plural}, {usage.context_tokens:,} in / {usage.output_tokens:,} out tokens"


__all__ = [
    "MAX_RESULT_CHARS",
    "AgentInput",
    "AgentTool",
    "ChildFactory",
]
