"""The built-in tools, in the fixed order they are offered to the model."""

from __future__ import annotations

from caliban.tools.base import Tool
from caliban.tools.bash import Bash
from caliban.tools.edit import Edit
from caliban.tools.glob import Glob
from caliban.tools.grep import Grep
from caliban.tools.read import Read
from caliban.tools.tasks import BackgroundTasks, TaskOutput, TaskStop
from caliban.tools.todo_write import TodoWrite
from caliban.tools.web_fetch import WebFetch
from caliban.tools.write import Write


def builtin_tools(tasks: BackgroundTasks | None = None) -> list[Tool]:
    """Read, Write, Edit, Glob, Grep, Bash, TodoWrite and WebFetch, fresh instances in that
    order (WebFetch's page cache is per session); with ``tasks`` (the session's background
    commands) also TaskOutput and TaskStop, and Bash may run commands in the background."""
    tools: list[Tool] = [
        Read(),
        Write(),
        Edit(),
        Glob(),
        Grep(),
        Bash(tasks),
        TodoWrite(),
        WebFetch(),
    ]
    if tasks is not None:
        tools += [TaskOutput(tasks), TaskStop(tasks)]
    return tools


__all__ = ["builtin_tools"]
