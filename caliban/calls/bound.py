"""A tool call bound to valid input: :class:`BoundCall`, what the stages after bind share."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from caliban.calls.effects import Effects
from caliban.tools.base import Invocation, Tool, ToolEnv

HookWord = Literal["allow", "ask"]
"""A PreToolUse hook's word on the permission check: ``allow`` spares a question, ``ask``
forces one; a deny (a rule, plan mode) stands either way."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BoundCall:
    """One call whose input passed its tool's validation, with what it will do
    (:class:`~caliban.calls.effects.Effects`, computed here once). The authorizer decides on
    it; checkpoint and execute run it."""

    id: str
    """The model's id for the call (``tool_use_id``)."""
    tool: Tool
    invocation: Invocation
    arguments: Mapping[str, Any]
    """The input it is bound to: the model's, or as a PreToolUse hook or an approver
    changed it (what an approver is shown)."""
    effects: Effects
    cwd: Path
    """The working directory :attr:`effects` were computed for."""
    env: ToolEnv
    hook: HookWord | None = None

    def rebound(self, arguments: Mapping[str, Any]) -> BoundCall | str:
        """The same call with another input (validated, its effects computed anew), or
        the tool's message saying what is wrong with it."""
        return bind(
            call_id=self.id,
            tool=self.tool,
            arguments=arguments,
            env=self.env,
            cwd=self.cwd,
            hook=self.hook,
        )

    def moved(self, cwd: Path) -> BoundCall:
        """The same call with its effects for another working directory (a ``cd`` running
        beside it moved the shell while it waited). The invocation is kept: a Bash line is
        not analysed again."""
        return dataclasses.replace(self, effects=self.invocation.effects(cwd), cwd=cwd)


def bind(
    *,
    call_id: str,
    tool: Tool,
    arguments: Mapping[str, Any],
    env: ToolEnv,
    cwd: Path | None = None,
    hook: HookWord | None = None,
) -> BoundCall | str:
    """Validate ``arguments`` for ``tool`` and compute the call's effects for ``cwd``
    (default: the working directory now); the tool's message when the input is invalid."""
    invocation = tool.bind(arguments)
    if isinstance(invocation, str):
        return invocation
    where = cwd if cwd is not None else env.cwd
    return BoundCall(
        id=call_id,
        tool=tool,
        invocation=invocation,
        arguments=arguments,
        effects=invocation.effects(where),
        cwd=where,
        env=env,
        hook=hook,
    )


__all__ = ["BoundCall", "HookWord", "bind"]
