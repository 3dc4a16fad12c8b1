"""Background shell commands (Bash ``run_in_background``) and the tools that follow them.

Claude Code 2.1.197 names the companions ``TaskOutput`` (read a task's output, optionally
waiting for it to finish) and ``TaskStop`` (stop it); their inputs, texts and structured
results follow the recording in ``tests/fixtures/claude_code/bash_background``.

A :class:`BackgroundTasks` registry belongs to one session: Bash starts tasks in it, the two
tools look them up, and the session stops whatever still runs when it closes. Each task runs
in its own process group with stdout and stderr appended to one output file, which the model
may also Read while the task runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import string
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from caliban.events import BackgroundTaskUpdate
from caliban.exec import Child, stop_group
from caliban.tools._process import spawn_shell
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.sandbox.runtime import SandboxRuntime

TaskStatus = Literal["running", "completed", "failed", "killed"]
MAX_OUTPUT_CHARS: Final = 30_000
"""The most of a task's output TaskOutput returns (the end is kept; the file has it all)."""
_ID_CHARS = string.ascii_lowercase + string.digits


def _new_id() -> str:
    return "b" + "".join(secrets.choice(_ID_CHARS) for _ in range(8))


def output_dir() -> Path:
    """Where task output files go: ``<tmp>/caliban-<uid>/tasks``."""
    return Path(tempfile.gettempdir()) / f"caliban-{os.getuid()}" / "tasks"


@dataclass(kw_only=True)
class BackgroundTask:
    """One command started with ``run_in_background``."""

    id: str
    command: str
    description: str
    output_path: Path
    tool_use_id: str
    process: Child
    emit: Callable[[AgentEvent], None]
    status: TaskStatus = "running"
    exit_code: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def output(self) -> str:
        """The output so far (its last :data:`MAX_OUTPUT_CHARS` characters)."""
        try:
            with self.output_path.open("rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(0, size - MAX_OUTPUT_CHARS * 4))
                text = file.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text[-MAX_OUTPUT_CHARS:]

    def _announce(self) -> None:
        self.emit(
            BackgroundTaskUpdate(
                task_id=self.id,
                tool_use_id=self.tool_use_id,
                status=self.status,
                description=self.description,
                command=self.command,
                end_time_ms=None if self.status == "running" else int(time.time() * 1000),
            )
        )


class BackgroundTasks:
    """The background tasks of one session."""

    def __init__(self) -> None:
        self._tasks: dict[str, BackgroundTask] = {}
        self._watchers: set[asyncio.Task[None]] = set()

    def get(self, task_id: str) -> BackgroundTask | None:
        return self._tasks.get(task_id)

    async def start(
        self,
        command: str,
        *,
        cwd: Path,
        description: str,
        ctx: CallContext,
        sandbox: SandboxRuntime | None = None,
    ) -> BackgroundTask:
        """Start ``command`` (a ``bash -c`` script) detached from the call, confined by
        ``sandbox`` when given; raises OSError."""
        task_id = _new_id()
        directory = output_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{task_id}.output"
        with path.open("wb") as out:
            process = await spawn_shell(command, cwd=cwd, output=out, sandbox=sandbox)
        task = BackgroundTask(
            id=task_id,
            command=command,
            description=description,
            output_path=path,
            tool_use_id=ctx.call_id,
            process=process,
            emit=ctx.emit,
        )
        self._tasks[task_id] = task
        task._announce()
        watcher = asyncio.ensure_future(self._watch(task))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return task

    async def _watch(self, task: BackgroundTask) -> None:
        code = await task.process.wait()
        if task.status == "running":
            task.exit_code = code
            task.status = "completed" if code == 0 else "failed"
            task._announce()
        task.done.set()

    async def stop(self, task: BackgroundTask) -> None:
        """Stop ``task``'s whole process group: SIGTERM, then SIGKILL."""
        if task.status != "running":
            return
        task.status = "killed"
        await stop_group(task.process)
        task._announce()

    async def aclose(self) -> None:
        """Stop every task still running (the session is closing)."""
        for task in list(self._tasks.values()):
            await self.stop(task)
        for watcher in list(self._watchers):
            watcher.cancel()


# ---------------------------------------------------------------------------- TaskOutput


TASK_OUTPUT_DESCRIPTION = """\
- Retrieves output from a running or completed background task (a Bash command started \
with run_in_background)
- Takes a task_id parameter identifying the task
- Returns the task output along with status information
- Use block=true (default) to wait for task completion
- Use block=false for non-blocking check of current status
- The task's full output is also in the file named when it started: you can Read it"""


class TaskOutputInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="The task ID to get output from")
    block: bool = Field(default=True, description="Whether to wait for completion")
    timeout: int = Field(default=30_000, ge=0, le=600_000, description="Max wait time in ms")


class TaskOutput(BuiltinTool[TaskOutputInput]):
    name = "TaskOutput"
    description = TASK_OUTPUT_DESCRIPTION
    input_model = TaskOutputInput
    # Reads what a task this session started wrote; changes nothing.
    read_only = True

    def __init__(self, tasks: BackgroundTasks) -> None:
        self.tasks = tasks

    async def run(self, args: TaskOutputInput, ctx: CallContext) -> ToolOutput:
        task = self.tasks.get(args.task_id)
        if task is None:
            return ToolOutput.error(f"No task found with ID: {args.task_id}")
        retrieval = "success"
        if args.block and task.status == "running":
            try:
                await asyncio.wait_for(task.done.wait(), args.timeout / 1000)
            except TimeoutError:
                retrieval = "timeout"
        elif task.status == "running":
            retrieval = "not_ready"
        status = task.status
        output = task.output() if status != "running" or retrieval == "timeout" else ""
        sections = [
            f"<retrieval_status>{retrieval}</retrieval_status>",
            f"<task_id>{task.id}</task_id>",
            "<task_type>local_bash</task_type>",
            f"<status>{status}</status>",
        ]
        if task.exit_code is not None:
            sections.append(f"<exit_code>{task.exit_code}</exit_code>")
        if output:
            sections.append(f"<output>\n{output.rstrip()}\n</output>")
        return ToolOutput.text(
            "\n\n".join(sections),
            summary=f"{task.id}: {status}",
            data={
                "retrieval_status": retrieval,
                "task": {
                    "task_id": task.id,
                    "task_type": "local_bash",
                    "status": status,
                    "description": task.description,
                    "output": output,
                    "exitCode": task.exit_code,
                },
            },
        )


# ---------------------------------------------------------------------------- TaskStop


TASK_STOP_DESCRIPTION = """\
- Stops a running background task by its ID
- Takes a task_id parameter identifying the task to stop
- Returns a success or failure status
- Use this tool when you need to terminate a long-running task"""


class TaskStopInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str | None = Field(default=None, description="The ID of the background task to stop")
    shell_id: str | None = Field(default=None, description="Deprecated: use task_id instead")


class TaskStop(BuiltinTool[TaskStopInput]):
    name = "TaskStop"
    description = TASK_STOP_DESCRIPTION
    input_model = TaskStopInput
    # Stops only a process this session started in the background (Claude Code asks no
    # permission for it either).
    read_only = True

    def __init__(self, tasks: BackgroundTasks) -> None:
        self.tasks = tasks

    async def run(self, args: TaskStopInput, ctx: CallContext) -> ToolOutput:
        task_id = args.task_id or args.shell_id
        if not task_id:
            return ToolOutput.error("Missing required parameter: task_id")
        task = self.tasks.get(task_id)
        if task is None:
            return ToolOutput.error(f"No task found with ID: {task_id}")
        if task.status != "running":
            return ToolOutput.error(f"Task {task_id} is not running (status: {task.status})")
        await self.tasks.stop(task)
        result = {
            "message": f"Successfully stopped task: {task.id} ({task.command})",
            "task_id": task.id,
            "task_type": "local_bash",
            "command": task.command,
        }
        return ToolOutput.text(
            json.dumps(result, ensure_ascii=False, separators=(",", ":")),
            summary=f"stopped {task.id}",
            data=result,
        )


__all__ = [
    "BackgroundTask",
    "BackgroundTasks",
    "TaskOutput",
    "TaskOutputInput",
    "TaskStop",
    "TaskStopInput",
    "output_dir",
]
