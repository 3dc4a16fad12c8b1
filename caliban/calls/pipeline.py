"""The life of one tool call, as ordered stages:

resolve → bind → pre-tool hooks → authorize → checkpoint → execute → post-tool hooks

Each stage returns what the next one needs, or ends the call by raising :class:`Refused`
with the result the model reads. A new concern is one more stage here, not another ``if``
in the agent loop. The pipeline knows the loop's collaborators (the toolset, the hooks, the
authorizer) only through their protocols, and never imports the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, assert_never

from caliban.calls.bound import BoundCall, bind
from caliban.calls.resolve import RepeatGuard, invalid_arguments, repeated, unknown_tool
from caliban.calls.verdict import Allow, AllowWith, Authorizer, Deny, authorize
from caliban.events import AgentEvent, ToolFinished, ToolStarted
from caliban.hooks import LoopHooks
from caliban.messages import ToolCall, ToolResult
from caliban.tools.base import AskModel, CallContext, PendingTool, Tool, ToolEnv, ToolOutput
from caliban.toolsets.base import Toolset


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What a call leaves for the loop."""

    result: ToolResult
    stop: str | None = None
    """A PreToolUse hook said ``continue: false``: end the turn once the results are in."""
    ends_turn: bool = False
    """The call's result is the turn's answer (StructuredOutput)."""


class Refused(Exception):
    """Ends a call before it runs: a mistake in the call (the error the model reads), or a
    :class:`~caliban.calls.verdict.Deny`."""

    def __init__(self, why: str | Deny) -> None:
        super().__init__(why if isinstance(why, str) else why.reason)
        self.why = why


class CallPipeline:
    """Runs the tool calls of one agent, each on its own (the loop runs them concurrently)."""

    def __init__(
        self,
        *,
        toolset: Toolset,
        env: ToolEnv,
        authorizer: Authorizer,
        hooks: LoopHooks,
        repeat_guard: RepeatGuard,
        emit: Callable[[AgentEvent], None],
        ask_model: AskModel | None = None,
    ) -> None:
        self.toolset = toolset
        self.env = env
        self.authorizer = authorizer
        self.hooks = hooks
        self.repeat_guard = repeat_guard
        self.emit = emit
        """The agent's emit: events are stamped with its parent call's id."""
        self.ask_model = ask_model

    async def run(self, call: ToolCall) -> Outcome:
        """Run ``call`` through every stage; announced by ``ToolStarted``/``ToolFinished``."""
        found = self.toolset.find(call.name)
        origin = found.origin if found is not None and not isinstance(found, PendingTool) else None
        self.emit(ToolStarted(call=call, origin=origin))
        started = time.perf_counter()
        stop: str | None = None
        denied = False
        try:
            tool = self.resolve(call, await self.arrived(call, found))
            origin = tool.origin
            bound = self.bind(call, tool)
            bound, stop = await self.before_tool(bound)
            bound, approved_input = await self.authorize(bound)
            await self.checkpoint(bound)
            output = await self.execute(bound)
            output = await self.after_tool(bound, output, approved_input or call.arguments)
        except Refused as refused:
            output, denied = _refusal(call, refused.why), isinstance(refused.why, Deny)
        result = ToolResult(tool_call_id=call.id, content=output.content, is_error=output.is_error)
        self.emit(
            ToolFinished(
                call=call,
                result=result,
                origin=origin,
                summary=output.summary,
                change=output.change,
                data=output.data,
                duration_ms=int((time.perf_counter() - started) * 1000),
                denied=denied,
            )
        )
        return Outcome(result=result, stop=stop, ends_turn=output.ends_turn and not output.is_error)

    # -- the stages, in order

    async def arrived(self, call: ToolCall, tool: Tool | None) -> Tool | None:
        """The tool once known: one of an MCP server still starting is waited for (within
        the server's start-up timeout) and looked up again."""
        if not isinstance(tool, PendingTool):
            return tool
        if (problem := await tool.arrival()) is not None:
            raise Refused(problem)
        found = self.toolset.find(call.name)
        return None if isinstance(found, PendingTool) else found

    def resolve(self, call: ToolCall, tool: Tool | None) -> Tool:
        """The tool asked for, with arguments that are a JSON object, and not a read-only
        call the model made in its previous turn."""
        if tool is None:
            raise Refused(unknown_tool(call.name, self.toolset))
        if (raw := call.invalid_arguments) is not None:
            raise Refused(invalid_arguments(call, raw))
        if tool.read_only and self.repeat_guard.repeats(call):
            raise Refused(repeated(call))
        return tool

    def bind(self, call: ToolCall, tool: Tool) -> BoundCall:
        """The input validated by the tool, and the call's effects computed (once). A call
        that would overwrite a file the session has not read (or that changed since) fails
        here, before anyone is asked: approving it could only end in that error."""
        bound = bind(call_id=call.id, tool=tool, arguments=call.arguments, env=self.env)
        if isinstance(bound, str):
            raise Refused(bound)
        for path in bound.effects.replaces:
            if path.is_file() and (problem := self.env.staleness(path)) is not None:
                raise Refused(problem)
        return bound

    async def before_tool(self, call: BoundCall) -> tuple[BoundCall, str | None]:
        """PreToolUse hooks: they may refuse the call, change its input, give their word on
        the permission check, or end the turn after it (the second value)."""
        verdict = await self.hooks.before_tool(call.tool.name, call.arguments, call.id)
        if verdict.blocked is not None:
            raise Refused(Deny(reason=verdict.blocked, by="hook"))
        if verdict.updated_input is not None:
            changed = call.rebound(verdict.updated_input)
            if isinstance(changed, str):
                raise Refused(f"A PreToolUse hook changed the input: {changed}")
            call = changed
        if verdict.decision is not None:
            call = replace(call, hook=verdict.decision)
        return call, verdict.stop

    async def authorize(self, call: BoundCall) -> tuple[BoundCall, Mapping[str, Any] | None]:
        """The authorizer's verdict: the call to run, and the input an approver gave
        instead (None: as bound).

        A call running beside this one (Bash's ``cd``) may move the working directory
        while this one is decided or its question is on screen: a relative path then names
        another file, so the call's effects are computed for the new directory and it is
        decided again. Nothing awaits between the last decision and the run.
        """
        approved_input: Mapping[str, Any] | None = None
        while True:
            cwd = self.env.cwd
            if call.cwd != cwd:
                call = call.moved(cwd)
            verdict = await authorize(self.authorizer, call)
            match verdict:
                case Allow():
                    pass
                case AllowWith(call=changed):
                    call, approved_input = changed, changed.arguments
                case Deny():
                    raise Refused(verdict)
                case _:
                    assert_never(verdict)
            if self.env.cwd == cwd:
                return call, approved_input

    async def checkpoint(self, call: BoundCall) -> None:
        """Where the files the call may change are saved before it runs, so a rewind can
        restore them (issue 25: ``call.effects`` names them; a Bash line that is not
        understood, ``effects.unknown``, needs a snapshot of the project). Nothing yet."""

    async def execute(self, call: BoundCall) -> ToolOutput:
        """Run the call; a raised exception becomes an error result the model reads.

        The sandbox decides here (issue 24): a command refused by the sandbox may run again
        outside it only after ``self.authorizer.ask`` settles a question saying why
        (headless: denied unless a rule allows it).
        """
        if (event := self.toolset.note_call(call.tool.name)) is not None:
            self.emit(event)
        ctx = CallContext(env=self.env, call_id=call.id, emit=self.emit, ask_model=self.ask_model)
        try:
            return await call.invocation.run(ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool failure is a result the model reads
            return ToolOutput.error(f"{call.tool.name} failed: {type(exc).__name__}: {exc}")

    async def after_tool(
        self, call: BoundCall, output: ToolOutput, tool_input: Mapping[str, Any]
    ) -> ToolOutput:
        """PostToolUse hooks, shown ``tool_input`` (the model's input, or the approver's);
        what they say is added to the result."""
        response = output.data if output.data is not None else output.as_text
        note = await self.hooks.after_tool(
            call.tool.name, tool_input, call.id, response, failed=output.is_error
        )
        return output.with_note(note) if note else output


def _refusal(call: ToolCall, why: str | Deny) -> ToolOutput:
    """The result of a call that did not run: the error, a hook's reason as it wrote it, or
    a permission's reason."""
    if isinstance(why, str):
        return ToolOutput.error(why)
    if why.by == "hook":
        return ToolOutput.error(why.reason)
    return ToolOutput.error(f"Permission denied for {call.name}: {why.reason}")


__all__ = ["CallPipeline", "Outcome", "Refused"]
