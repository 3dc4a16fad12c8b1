"""ExitPlanMode: the model presents its plan and the user approves it before anything changes.

In plan mode (Shift-Tab, ``--permission-mode plan``) only read-only tools run, and each user
prompt carries :data:`PLAN_MODE_REMINDER`. The model ends its planning with this tool; the
call's effect is :attr:`~caliban.calls.effects.Effects.leaves_plan_mode`, which the
permission policy always asks about: the REPL shows the plan and its choices, the Agent SDK's
``can_use_tool`` callback sees ``{"plan": …}`` as it does from Claude Code, and a headless run
with nobody to ask stays read-only. Once approved, the tool leaves plan mode (for the default
mode, unless the answer chose another) and tells the model to start.

The texts the model reads follow Claude Code 2.1.197's (recorded in
``tests/fixtures/claude_code/plan_mode``); Claude Code also keeps the plan in a file under
``~/.claude/plans``, which caliban does not: the plan is the call's input.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from caliban.calls.effects import Effects
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput

NAME: Final = "ExitPlanMode"

DESCRIPTION = """\
Use this tool when you are in plan mode and have finished planning: it shows your plan to \
the user and asks them to approve it before you change anything.

## How This Tool Works
- Pass the whole plan, in Markdown, as `plan`. Make it concise enough to scan quickly and \
detailed enough to carry out: the files to change, the steps, and how to verify the result.
- If the user approves, plan mode ends and you can start working; if not, their feedback \
comes back as the result: revise the plan and call this tool again.

## When to Use This Tool
IMPORTANT: Only use this tool when the task requires planning the implementation steps of a \
task that requires writing code. For research tasks where you're gathering information, \
searching files, reading files or in general trying to understand the codebase - do NOT use \
this tool: just answer.

## Before Using This Tool
Ensure your plan is complete and unambiguous: if you have unresolved questions about \
requirements or approach, ask the user first. Do NOT ask "Is this plan okay?" or "Should I \
proceed?" in text - that's exactly what THIS tool does."""

PLAN_MODE_REMINDER = """\
<system-reminder>
Plan mode is active. The user indicated that they do not want you to execute yet -- you MUST \
NOT make any edits, run any non-readonly tools (including changing configs or making \
commits), or otherwise make any changes to the system. This supersedes any other \
instructions you have received. Tools that would change something (Write, Edit, Bash, …) \
are refused while plan mode lasts.

## Plan Workflow
1. Understand the request: read the code it concerns with read-only tools (Read, Glob, \
Grep), and look for existing functions and patterns to reuse.
2. Design an approach; if requirements are unclear, ask the user.
3. Call ExitPlanMode with your final plan: the recommended approach only, the critical \
files to change, and how to verify the result.

Your turn should end either with a question to the user or with ExitPlanMode. Do not ask \
for plan approval in any other way - phrases like "Is this plan okay?" or "Should I \
proceed?" MUST use ExitPlanMode.
</system-reminder>"""

EXITED_PLAN_MODE_REMINDER = """\
<system-reminder>
## Exited Plan Mode

You have exited plan mode. You can now make edits, run tools, and take actions.
</system-reminder>"""


def approved(plan: str) -> str:
    """The result the model reads once the user approved ``plan`` (Claude Code's, without
    the plan file's lines)."""
    return (
        "User has approved your plan. You can now start coding. Start with updating your todo "
        f"list if applicable\n\n## Approved Plan:\n{plan}"
    )


def rejected(feedback: str | None) -> str:
    """The model's message when the user keeps planning, with their feedback if any."""
    text = (
        "The user did not approve the plan and wants to keep planning: stay in plan mode "
        "(change nothing), revise the plan, and call ExitPlanMode again when it is ready."
    )
    return f"{text} The user said: {feedback}" if feedback else text


UNATTENDED = (
    "Nobody can approve a plan: caliban is running headless (-p) without a permission "
    "prompt tool (--permission-prompt-tool stdio, as the Agent SDK passes), so plan mode "
    "stays read-only. Give your plan as your answer instead."
)
"""The model's message for ExitPlanMode when nobody can be asked."""


class ExitPlanModeInput(BaseModel):
    # Claude Code's own schema accepts more (allowedPrompts); a model used to it may send it.
    model_config = ConfigDict(extra="ignore")

    plan: str = Field(
        min_length=1,
        description="The plan to show the user for approval, in Markdown: concise, but "
        "complete enough to carry out.",
    )


class ExitPlanMode(BuiltinTool[ExitPlanModeInput]):
    """Asks the user to approve a plan; ``leave`` ends plan mode once they did (the
    session's permission policy, which the approval may already have moved on)."""

    name = NAME
    description = DESCRIPTION
    input_model = ExitPlanModeInput

    def __init__(self, leave: Callable[[], None]) -> None:
        self._leave = leave

    def effects(self, args: ExitPlanModeInput, cwd: Path) -> Effects:
        return Effects(leaves_plan_mode=True)

    def preview(self, args: ExitPlanModeInput, env: ToolEnv) -> str:
        return args.plan

    async def run(self, args: ExitPlanModeInput, ctx: CallContext) -> ToolOutput:
        self._leave()
        return ToolOutput.text(
            approved(args.plan), summary="plan approved", data={"plan": args.plan, "isAgent": False}
        )


__all__ = [
    "EXITED_PLAN_MODE_REMINDER",
    "NAME",
    "PLAN_MODE_REMINDER",
    "UNATTENDED",
    "ExitPlanMode",
    "ExitPlanModeInput",
    "approved",
    "rejected",
]
