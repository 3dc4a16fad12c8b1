"""TodoWrite: the model's working plan, a checklist the user sees.

Claude Code's schema and answers: each call sends the whole list, which replaces the previous
one. The list belongs to the agent that wrote it (a sub-agent keeps its own, in its
:class:`~caliban.tools.base.ToolEnv`); once every item is completed it is cleared. The
structured result (``{"oldTodos", "newTodos"}``) is what the REPL draws and what stream-json
reports as ``tool_use_result``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from caliban.tools.base import BuiltinTool, CallContext, ToolOutput
from caliban.util.text import plural

STATE_KEY: Final = "TodoWrite"
RESULT: Final = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to "
    "track your progress. Please proceed with the current tasks if applicable"
)

DESCRIPTION = """\
Create and update the task list for this session: your working plan, shown to the user as a \
checklist.

- Each todo has `content` (what to do, imperative: "Run the tests"), `status` ("pending", \
"in_progress" or "completed") and `activeForm` (the same in the present continuous, shown \
while it is in progress: "Running the tests").
- Send the whole list on every call; it replaces the previous one.
- Use it for tasks of three or more steps, or when the user gives several things to do. Skip \
it for a single, simple step.
- Keep exactly one item in_progress while you work; mark an item completed as soon as it is \
done (not in batches), and add items you discover along the way."""

Status = Literal["pending", "in_progress", "completed"]


class Todo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    content: str = Field(min_length=1)
    status: Status
    activeForm: str = Field(min_length=1)  # Claude Code's field name


class TodoWriteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    todos: list[Todo] = Field(description="The updated todo list")


class TodoWrite(BuiltinTool[TodoWriteInput]):
    name = "TodoWrite"
    description = DESCRIPTION
    input_model = TodoWriteInput
    read_only = True  # changes nothing outside this session (allowed in plan mode)

    async def run(self, args: TodoWriteInput, ctx: CallContext) -> ToolOutput:
        old: list[dict[str, Any]] = ctx.env.state.get(STATE_KEY, [])
        new = [todo.model_dump() for todo in args.todos]
        done = all(todo.status == "completed" for todo in args.todos)
        ctx.env.state[STATE_KEY] = [] if done else new
        finished = sum(todo.status == "completed" for todo in args.todos)
        summary = f"{finished}/{plural(len(new), 'todo')} done"
        return ToolOutput.text(RESULT, summary=summary, data={"oldTodos": old, "newTodos": new})


def current_todos(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's todo list now (``[]`` before the first call and once all are done)."""
    return list(state.get(STATE_KEY, []))


__all__ = ["TodoWrite", "TodoWriteInput", "current_todos"]
