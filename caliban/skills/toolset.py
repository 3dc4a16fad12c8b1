"""Skills loaded lazily: names and descriptions in the system prompt, bodies on use.

:class:`SkillToolset` is one part of a session's toolset. Its system-prompt paragraph lists
each model-invocable command and skill by name and description (built once: byte-stable);
its one tool, ``Skill``, returns a body when the model asks for it — as deferred MCP tools
stay off the wire until ToolSearch finds them. The body comes back as the tool's result,
after ``Launching skill: NAME``, with the skill's directory and the files beside it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, Field

from caliban.skills.catalog import Skill, find_skill, listing
from caliban.skills.expand import shell_snippets, substitute_arguments
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput
from caliban.toolsets.base import ChildScope, SkillsView, ToolsetView
from caliban.util.tokens import estimate_tokens

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.tools.base import Tool

SKILL_TOOL: Final = "Skill"
MAX_LISTED_FILES: Final = 50

DESCRIPTION = """\
Load a skill into this conversation: its full instructions, for a task its description \
matches.

- Skills available now are listed in the system prompt ("The following skills are available \
…"), by name and description only. When a request matches one, call this tool first, then \
follow the instructions it returns.
- `skill` is the exact name from that list (no leading slash); `args` are optional \
arguments for it. Never guess a name that is not listed.
- When the user types `/name`, that command has already been expanded in their message: \
follow it instead of calling this tool.
- Do not load a skill that is already loaded in this conversation."""


class SkillInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    skill: str = Field(
        description="The name of a skill from the available-skills list. Do not guess names."
    )
    args: str | None = Field(default=None, description="Optional arguments for the skill")


class SkillTool(BuiltinTool[SkillInput]):
    """``Skill``: returns a command's or skill's instructions (see the module docstring)."""

    name = SKILL_TOOL
    description = DESCRIPTION
    input_model = SkillInput
    read_only = True  # it only reads instructions into the conversation

    def __init__(self, skills: Sequence[Skill]) -> None:
        self.skills = tuple(skills)

    def subject(self, args: SkillInput) -> str | None:
        return args.skill.removeprefix("/")

    async def run(self, args: SkillInput, ctx: CallContext) -> ToolOutput:
        skill = find_skill(self.skills, args.skill)
        if skill is None:
            names = [s.name for s in self.skills]
            text = f"Unknown skill: {args.skill}."
            if close := difflib.get_close_matches(args.skill, names, n=1, cutoff=0.3):
                text += f" Did you mean {close[0]}?"
            return ToolOutput.error(text)
        data = {
            "success": True,
            "commandName": skill.name,
            "allowedTools": [rule.text for rule in skill.allowed_tools],
        }
        return ToolOutput.text(load_text(skill, args.args or ""), summary="loaded", data=data)


def load_text(skill: Skill, arguments: str) -> str:
    """What the model reads when it loads ``skill``."""
    body = substitute_arguments(skill.body, arguments).strip("\n")
    parts = [f"Launching skill: {skill.name}"]
    if skill.kind == "skill":
        parts.append(f"Base directory for this skill: {skill.base_dir}")
    parts.append(body)
    if shell_snippets(body):
        parts.append(
            "(The !`…` shell snippets above were not run: they run when the user types "
            f"/{skill.name}. Run what you need with Bash.)"
        )
    if skill.kind == "skill" and (files := beside(skill)):
        shown = "\n".join(f"- {name}" for name in files[:MAX_LISTED_FILES])
        more = len(files) - MAX_LISTED_FILES
        if more > 0:
            shown += f"\n- … and {more} more"
        parts.append(
            "Files in the skill's directory (Read them when the instructions refer to them):\n"
            + shown
        )
    return "\n\n".join(parts)


def beside(skill: Skill) -> list[str]:
    """Files in the skill's directory other than SKILL.md, relative, hidden ones left out."""
    try:
        found = sorted(
            path.relative_to(skill.base_dir).as_posix()
            for path in skill.base_dir.rglob("*")
            if path.is_file() and path != skill.path
        )
    except OSError:
        return []
    return [name for name in found if not any(p.startswith(".") for p in name.split("/"))]


class SkillToolset:
    """The ``Skill`` tool and the skills paragraph; empty when nothing is model-invocable."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        self.skills = tuple(skill for skill in skills if skill.model_invocable)
        self._tool = SkillTool(self.skills)
        self._offered: tuple[Tool, ...] = (self._tool,) if self.skills else ()
        self._addendum = listing(self.skills)

    def offered(self) -> tuple[Tool, ...]:
        return self._offered

    def find(self, name: str) -> Tool | None:
        return self._tool if self._offered and name == SKILL_TOOL else None

    def names(self) -> tuple[str, ...]:
        return (SKILL_TOOL,) if self._offered else ()

    def system_addendum(self) -> str:
        return self._addendum

    def note_call(self, name: str) -> AgentEvent | None:
        return None

    def describe(self) -> ToolsetView:
        deferred = sum(estimate_tokens(skill.body) for skill in self.skills)
        view = SkillsView(
            listed=len(self.skills),
            listing=self._addendum,
            deferred_tokens=deferred,
        )
        return ToolsetView(offered=self._offered, addendum=self._addendum, skills=view)

    def for_child(self, scope: ChildScope) -> SkillToolset:
        return self if scope.allows(SKILL_TOOL) else SkillToolset(())


__all__ = ["SKILL_TOOL", "SkillInput", "SkillTool", "SkillToolset", "beside", "load_text"]
