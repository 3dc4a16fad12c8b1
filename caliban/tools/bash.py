"""Bash: run a shell command in its own process group, with a working directory that persists.

Each call is a fresh ``bash -c``; an EXIT trap writes the final ``pwd`` to a temporary
file, so a ``cd`` carries over to the next call as in a terminal session. stdout and stderr
share one pipe, so they arrive interleaved as a user would see them. On timeout or
cancellation the whole process group is sent SIGTERM, then SIGKILL
(:func:`caliban.exec.stop_group`).

A call's line is analysed once, when it is bound (:mod:`caliban.shell`): its effects — what
its redirections read and write, where it runs — come from that one analysis.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shlex
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from caliban import shell
from caliban.calls.effects import Effects, command_effects
from caliban.exec import stop_group
from caliban.messages import TextPart
from caliban.tools import _files
from caliban.tools._process import spawn_shell
from caliban.tools.base import (
    BuiltinInvocation,
    BuiltinTool,
    CallContext,
    Preview,
    ToolEnv,
    ToolOutput,
    cap_preview,
)
from caliban.util.text import plural

if TYPE_CHECKING:
    from caliban.sandbox.runtime import SandboxRuntime
    from caliban.tools.tasks import BackgroundTasks

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_OUTPUT_CHARS = 30_000
DRAIN_S = 1.0
"""How long to wait for output after the shell exits (background jobs may hold the pipe)."""

DESCRIPTION = f"""\
Executes a bash command and returns its output (stdout and stderr, interleaved) and exit code.

Usage:
- The working directory persists between calls: `cd somewhere` affects later commands. \
Prefer absolute paths, or cd once; quote paths that contain spaces ("path with spaces").
- Each call is a new shell otherwise: variables, aliases and functions do not carry over.
- timeout is in milliseconds: default {DEFAULT_TIMEOUT_MS:,} ({DEFAULT_TIMEOUT_MS // 60_000} \
minutes), at most {MAX_TIMEOUT_MS:,} ({MAX_TIMEOUT_MS // 60_000} minutes). On timeout the \
command and every process it started are killed.
- stdin is /dev/null: interactive commands (editors, pagers, prompts, `git rebase -i`) \
cannot be used. Pass flags that avoid prompts (e.g. `-y`, `--no-edit`, `git commit -m`).
- Output over {MAX_OUTPUT_CHARS:,} characters is cut in the middle (the start and the end \
are kept); redirect long output to a file and search it with Grep, or pipe through `tail`.
- A non-zero exit code is reported with the output; it is not a crash.
- To run a long-lived process (a server, a watcher), set run_in_background: the call \
returns at once with a task ID and an output file; read the output with TaskOutput (or \
Read the file) and stop it with TaskStop. No `&` needed.
- Chain dependent commands with `&&`; use `;` only when later commands must run anyway.
- Do not use Bash for what the other tools do better: Read (not cat/head/tail), Edit and \
Write (not sed/awk/echo >), Glob (not find/ls for searching), Grep (not grep/rg).
- Give a short description (5–10 words) of what the command does, e.g. "Run the unit tests"."""


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="The command to execute.")
    timeout: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description=f"Optional timeout in milliseconds (default {DEFAULT_TIMEOUT_MS:,}, "
        f"max {MAX_TIMEOUT_MS:,}).",
    )
    description: str | None = Field(
        default=None,
        description="A short description of what the command does, in 5-10 words, e.g. "
        '"List files in the current directory" or "Install package dependencies".',
    )
    run_in_background: bool = Field(
        default=False,
        description="Set to true to run this command in the background. The result gives "
        "its task ID and output file; follow it with TaskOutput, stop it with TaskStop.",
    )
    dangerouslyDisableSandbox: bool = Field(
        default=False,
        description="Set to true to run this command outside the OS sandbox, only after it "
        "failed because of the sandbox (its result says so); the user is asked first. "
        "Default to running commands in the sandbox.",
    )


class _Output:
    """Captured output, bounded: the first and last halves of the limit are kept."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.half = limit // 2
        self.head = ""
        self.tail = ""
        self.total = 0
        self.dropped_lines = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        self.total += len(text)
        if len(self.head) < self.half:
            take = self.half - len(self.head)
            self.head, text = self.head + text[:take], text[take:]
        if text:
            self.tail += text
            if len(self.tail) > 4 * self.half:
                self._trim()

    def _trim(self) -> None:
        if len(self.tail) > self.half:
            dropped = self.tail[: -self.half]
            self.dropped_lines += dropped.count("\n")
            self.tail = self.tail[-self.half :]

    def render(self) -> str:
        if self.total <= 2 * self.half:
            text = self.head + self.tail
        else:
            self._trim()
            cut = self.total - len(self.head) - len(self.tail)
            text = (
                f"{self.head}\n\n[… {cut:,} characters ({self.dropped_lines:,} lines) cut from "
                f"the middle of the output: {self.total:,} characters in all. Redirect the "
                "output to a file and Read or Grep it to see everything.]\n\n"
                f"{self.tail}"
            )
        return text.replace("\r\n", "\n").rstrip()

    @property
    def line_count(self) -> int:
        return _files.count_lines(self.head + self.tail) + self.dropped_lines


class _Collector(asyncio.Protocol):
    def __init__(self, output: _Output, done: asyncio.Future[None]) -> None:
        self.output = output
        self.done = done

    def data_received(self, data: bytes) -> None:
        self.output.feed(data)

    def eof_received(self) -> bool | None:
        self._finish()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.output.feed(b"", final=True)
            self.done.set_result(None)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Finished:
    returncode: int | None
    timed_out: bool
    output: _Output
    background_held_output: bool


def _line(args: BashInput) -> str:
    """The command line as rules see it (surrounding whitespace removed)."""
    return args.command.strip()


@dataclass(frozen=True, slots=True)
class BashInvocation(BuiltinInvocation[BashInput]):
    """A Bash call bound to its input and to its line's analysis, made once: its effects
    for any working directory come from it."""

    tool: Bash
    line: shell.Analysis

    def effects(self, cwd: Path) -> Effects:
        return command_effects(self.line, cwd, outside_sandbox=self.args.dangerouslyDisableSandbox)

    async def run(self, ctx: CallContext) -> ToolOutput:
        return await self.tool.run_line(self.args, self.line, ctx)


class Bash(BuiltinTool[BashInput]):
    name = "Bash"
    description = DESCRIPTION
    input_model = BashInput

    def __init__(self, tasks: BackgroundTasks | None = None) -> None:
        self.tasks = tasks
        """Where ``run_in_background`` commands go; ``None``: they are refused."""

    def bind(self, arguments: Mapping[str, Any]) -> BuiltinInvocation[BashInput] | str:
        bound = super().bind(arguments)
        if isinstance(bound, str):
            return bound
        return BashInvocation(self, bound.args, shell.analyze(_line(bound.args)))

    def subject(self, args: BashInput) -> str | None:
        return _line(args)

    def effects(self, args: BashInput, cwd: Path) -> Effects:
        return BashInvocation(self, args, shell.analyze(_line(args))).effects(cwd)

    def preview(self, args: BashInput, env: ToolEnv) -> Preview:
        text = f"$ {args.command}"
        if args.description:
            text += f"\n# {args.description}"
        return cap_preview(text)

    async def run(self, args: BashInput, ctx: CallContext) -> ToolOutput:
        return await self.run_line(args, shell.analyze(_line(args)), ctx)

    async def run_line(self, args: BashInput, line: shell.Analysis, ctx: CallContext) -> ToolOutput:
        """Run the call whose command ``line`` was analysed when it was bound (the sandbox
        reads the analysis: ``excludedCommands``)."""
        notes: list[str] = []
        start_dir = _start_dir(ctx.env, notes)
        sandbox, refusal = _confinement(args, line, ctx.env.sandbox, notes)
        if refusal is not None:
            return ToolOutput.error(refusal)
        if args.run_in_background:
            return await self._start_background(args, start_dir, ctx, sandbox)
        # The shell reports where it ended up in a file it can write, sandboxed or not.
        fd, cwd_file = tempfile.mkstemp(
            prefix="caliban-cwd-", suffix=".txt", dir=sandbox.tmpdir if sandbox else None
        )
        os.close(fd)
        trap = f"pwd -P >| {shlex.quote(cwd_file)}"
        script = f"trap {shlex.quote(trap)} EXIT; {args.command}"
        timeout_s = (args.timeout or DEFAULT_TIMEOUT_MS) / 1000
        mark = sandbox.mark() if sandbox else 0
        try:
            finished = await _execute(script, cwd=start_dir, timeout_s=timeout_s, sandbox=sandbox)
            new_dir = _final_dir(cwd_file)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(cwd_file)
        if sandbox is not None:
            notes += _blocked(sandbox, finished.output.render(), start_dir, mark)
        if new_dir is not None and new_dir != start_dir.resolve():
            ctx.env.cwd = new_dir
            notes.append(f"[working directory is now {new_dir}]")
        return _result(finished, timeout_s, notes)

    async def _start_background(
        self, args: BashInput, start_dir: Path, ctx: CallContext, sandbox: SandboxRuntime | None
    ) -> ToolOutput:
        if self.tasks is None:
            return ToolOutput.error(
                "run_in_background is not available here; run the command in the foreground "
                "with its output redirected to a file."
            )
        try:
            task = await self.tasks.start(
                args.command,
                cwd=start_dir,
                description=args.description or args.command,
                ctx=ctx,
                sandbox=sandbox,
            )
        except OSError as exc:
            return ToolOutput.error(f"Could not start the command: {exc}")
        return ToolOutput.text(
            f"Command running in background with ID: {task.id}. Output is being written to: "
            f"{task.output_path}. Check on it with TaskOutput (task_id {task.id!r}) or Read "
            "that file; stop it with TaskStop.",
            summary=f"background task {task.id}",
            data={
                "stdout": "",
                "stderr": "",
                "interrupted": False,
                "isImage": False,
                "noOutputExpected": False,
                "backgroundTaskId": task.id,
            },
        )


def _confinement(
    args: BashInput, line: shell.Analysis, runtime: SandboxRuntime | None, notes: list[str]
) -> tuple[SandboxRuntime | None, str | None]:
    """The sandbox this call runs in (None: none), or why it may not run at all."""
    if runtime is None:
        return None, None
    placement = runtime.placement(line, outside_requested=args.dangerouslyDisableSandbox)
    if placement == "refused":
        return None, (
            "Not run: the sandbox is required here (sandbox.failIfUnavailable) but cannot "
            f"work on this machine: {runtime.availability.detail}."
        )
    if args.dangerouslyDisableSandbox and placement == "sandbox":
        notes.append(
            "[dangerouslyDisableSandbox was ignored: running outside the sandbox is turned "
            "off (sandbox.allowUnsandboxedCommands = false), so the command ran in it]"
        )
    return (runtime if placement == "sandbox" else None), None


def _blocked(sandbox: SandboxRuntime, output: str, cwd: Path, mark: int) -> list[str]:
    """A note saying what the sandbox refused the command, if its output shows any."""
    why = sandbox.explain(output, cwd=cwd, since=mark)
    if why is None:
        return []
    if sandbox.config.allow_unsandboxed:
        then = (
            "If the command needs this, run it again with dangerouslyDisableSandbox: true; "
            "the user will be asked"
        )
    else:
        then = (
            "Commands may not run outside the sandbox here (sandbox.allowUnsandboxedCommands "
            "= false): tell the user what the command needs (/sandbox shows the settings)"
        )
    return [f"[blocked by the sandbox: {why}. {then}.]"]


def _final_dir(cwd_file: str) -> Path | None:
    """Where the command left the shell, if it got to report it and it still exists."""
    try:
        text = Path(cwd_file).read_text(errors="replace").strip()
    except OSError:
        return None
    return Path(text) if text and Path(text).is_dir() else None


def _start_dir(env: ToolEnv, notes: list[str]) -> Path:
    """The working directory, or the nearest existing place if it was deleted."""
    if env.cwd.is_dir():
        return env.cwd
    fallback = env.project_root if env.project_root.is_dir() else Path.home()
    notes.append(f"[the working directory {env.cwd} no longer exists; ran in {fallback}]")
    env.cwd = fallback
    return fallback


async def _execute(
    script: str, *, cwd: Path, timeout_s: float, sandbox: SandboxRuntime | None
) -> _Finished:
    loop = asyncio.get_running_loop()
    output = _Output()
    read_fd, write_fd = os.pipe()
    try:
        proc = await spawn_shell(script, cwd=cwd, output=write_fd, sandbox=sandbox)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    done: asyncio.Future[None] = loop.create_future()
    transport: asyncio.ReadTransport | None = None
    timed_out = False
    held = False
    try:
        # Inside the try: a cancellation that lands here must stop the group too.
        transport, _ = await loop.connect_read_pipe(
            lambda: _Collector(output, done), os.fdopen(read_fd, "rb", buffering=0)
        )
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
            await stop_group(proc)
        try:
            await asyncio.wait_for(asyncio.shield(done), DRAIN_S)
        except TimeoutError:
            held = True  # a background job still holds the pipe; stop reading
    except asyncio.CancelledError:
        await stop_group(proc)
        raise
    finally:
        if transport is not None:
            transport.close()
    return _Finished(
        returncode=proc.returncode,
        timed_out=timed_out,
        output=output,
        background_held_output=held,
    )


def _result(finished: _Finished, timeout_s: float, notes: list[str]) -> ToolOutput:
    text = finished.output.render() or "(no output)"
    lines = finished.output.line_count
    code = finished.returncode
    is_error = finished.timed_out or code != 0
    tail: list[str] = []
    if finished.timed_out:
        tail.append(
            f"[Command timed out after {_seconds(timeout_s)} and was killed, with every "
            "process it started. Use a longer timeout (max 600000 ms) or run it in the "
            "background with output redirected to a file.]"
        )
        summary = f"timed out after {_seconds(timeout_s)}"
    elif code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        tail.append(f"[killed by signal {name}]")
        summary = f"killed by {name} · {plural(lines, 'line')}"
    else:
        if code:
            tail.append(f"[exit code {code}]")
        summary = f"exit {code} · {plural(lines, 'line')}"
    if finished.background_held_output:
        tail.append(
            "[a background process still holds the output; its later output is not captured. "
            "Redirect background jobs to a file: cmd > log 2>&1 &]"
        )
    tail += notes
    full = "\n".join([text, *tail])
    structured = {
        "stdout": finished.output.render(),
        "stderr": "",  # stdout and stderr share one pipe, interleaved as a terminal shows them
        "interrupted": finished.timed_out,
        "isImage": False,
        "noOutputExpected": False,
    }
    return ToolOutput(
        content=(TextPart(text=full),), is_error=is_error, summary=summary, data=structured
    )


def _seconds(value: float) -> str:
    return f"{value:g} s"


__all__ = ["DEFAULT_TIMEOUT_MS", "MAX_OUTPUT_CHARS", "MAX_TIMEOUT_MS", "Bash", "BashInput"]
