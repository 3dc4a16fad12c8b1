"""StructuredOutput: the final answer as JSON matching ``--json-schema`` (Claude Code's tool).

With ``caliban -p --json-schema SCHEMA`` the main agent gets this tool, whose input schema is
SCHEMA. A call whose input matches ends the turn: the result frame's ``structured_output``
holds the object and ``result`` its JSON text. Input that does not match is an error result
naming what is wrong, so the model can call again. Sub-agents never get it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from caliban.calls.effects import NO_EFFECTS, Effects
from caliban.hooks import LoopHooks, PromptVerdict, ToolVerdict
from caliban.messages import ToolSpec
from caliban.tools.base import CallContext, Preview, ToolEnv, ToolOutput, json_preview
from caliban.tools.origin import BUILTIN, ToolOrigin

NAME: Final = "StructuredOutput"
STATE_KEY: Final = "structured_output"
"""Where the accepted object is kept in the agent's :class:`ToolEnv` state."""
RESULT: Final = "Structured output provided successfully"
DESCRIPTION: Final = (
    "Use this tool to return your final response in the requested structured format. You "
    "MUST call this tool exactly once at the end of your response to provide the structured "
    "output."
)
REMINDER: Final = (
    f"You must call the {NAME} tool to give your final response in the requested format."
)
MAX_ATTEMPTS: Final = 5
"""Times the model is reminded before the turn fails (Claude Code's
``MAX_STRUCTURED_OUTPUT_RETRIES`` default)."""


class SchemaError(ValueError):
    """``--json-schema`` is not JSON, not an object, or not a valid JSON Schema."""


def parse_schema(text: str) -> dict[str, Any]:
    """The ``--json-schema`` value as a schema; raises :class:`SchemaError` saying why not."""
    from jsonschema.exceptions import SchemaError as InvalidSchema
    from jsonschema.validators import validator_for

    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(schema, dict):
        raise SchemaError('expected a JSON Schema object, e.g. {"type": "object", …}')
    try:
        validator_for(schema).check_schema(schema)
    except InvalidSchema as exc:
        raise SchemaError(f"not a valid JSON Schema: {exc.message}") from None
    return schema


def provided(env: ToolEnv) -> Any:
    """The object an accepted call gave, or ``None``."""
    return env.state.get(STATE_KEY)


@dataclass(frozen=True, slots=True)
class _Call:
    value: dict[str, Any]

    @property
    def subject(self) -> str | None:
        return None

    def effects(self, cwd: Path) -> Effects:
        return NO_EFFECTS

    def preview(self, env: ToolEnv) -> Preview:
        return json_preview(self.value)

    async def run(self, ctx: CallContext) -> ToolOutput:
        ctx.env.state[STATE_KEY] = self.value
        return ToolOutput.text(RESULT, data=RESULT, ends_turn=True)


class RequireStructuredOutput:
    """The session's hooks, and a reminder when the main agent stops without an answer in
    StructuredOutput: up to :data:`MAX_ATTEMPTS` times, then the turn ends without one."""

    def __init__(self, inner: LoopHooks, env: ToolEnv) -> None:
        self.inner = inner
        self.env = env
        self.reminders = 0

    async def prompt_submitted(self, prompt: str) -> PromptVerdict:
        self.reminders = 0
        return await self.inner.prompt_submitted(prompt)

    async def before_tool(
        self, tool_name: str, tool_input: Mapping[str, Any], call_id: str
    ) -> ToolVerdict:
        return await self.inner.before_tool(tool_name, tool_input, call_id)

    async def after_tool(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        call_id: str,
        response: Any,
        *,
        failed: bool,
    ) -> str | None:
        return await self.inner.after_tool(tool_name, tool_input, call_id, response, failed=failed)

    async def stopping(self, last_message: str, *, subagent: bool, again: bool) -> str | None:
        if not subagent and provided(self.env) is None and self.reminders < MAX_ATTEMPTS:
            self.reminders += 1
            return REMINDER
        return await self.inner.stopping(last_message, subagent=subagent, again=again)

    async def compacting(self, trigger: str, instructions: str | None) -> str | None:
        return await self.inner.compacting(trigger, instructions)


class StructuredOutputTool:
    """The tool for one schema (see the module docstring)."""

    origin: ToolOrigin = BUILTIN
    read_only = True  # it only hands the answer back

    def __init__(self, schema: Mapping[str, Any]) -> None:
        from jsonschema.validators import validator_for

        self._schema = dict(schema)
        self._validator = validator_for(self._schema)(self._schema)

    @property
    def name(self) -> str:
        return NAME

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=NAME, description=DESCRIPTION, input_schema=self._schema)

    def bind(self, arguments: Mapping[str, Any]) -> _Call | str:
        errors = sorted(self._validator.iter_errors(dict(arguments)), key=lambda e: e.path)
        if errors:
            # Claude Code's wording: "<path or root>: <message>", comma-separated.
            where = ", ".join(
                f"{'/' + '/'.join(map(str, e.absolute_path)) if e.absolute_path else 'root'}: "
                f"{e.message}"
                for e in errors[:10]
            )
            return f"Output does not match required schema: {where}"
        return _Call(dict(arguments))


__all__ = [
    "MAX_ATTEMPTS",
    "NAME",
    "REMINDER",
    "RequireStructuredOutput",
    "SchemaError",
    "StructuredOutputTool",
    "parse_schema",
    "provided",
]
