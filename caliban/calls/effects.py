"""What one tool call does to the world, known before it runs: :class:`Effects`.

Each tool's :class:`~caliban.tools.base.Invocation` says what it reads, writes, runs and
reaches (``Invocation.effects(cwd)``); the pipeline computes this once, when the call is
bound, and every later stage reads the same value: the permission policy decides from it,
and the sandbox and checkpoints will scope themselves by it. A Bash line is analysed once,
at bind time (:func:`command_effects`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from caliban.shell import Analysis, line_effects
from caliban.util.fsutil import resolved


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """A command line a call runs, analysed, and the directory it starts in."""

    analysis: Analysis
    cwd: Path
    outside_sandbox: bool = False
    """The call asks to run outside the OS sandbox (Bash's ``dangerouslyDisableSandbox``)."""

    @property
    def line(self) -> str:
        return self.analysis.command


@dataclass(frozen=True, slots=True)
class Host:
    """A network host a call reaches (WebFetch's)."""

    name: str


@dataclass(frozen=True, slots=True)
class McpServer:
    """The MCP server a call goes to; what the tool does there is the server's business."""

    name: str


Reach = Host | McpServer


@dataclass(frozen=True, kw_only=True, slots=True)
class Effects:
    """What a call reads, writes, runs and reaches — or why that cannot be known.

    Paths are absolute, with symlinks followed. A call that runs a command line
    (:attr:`runs`) reads and writes through it: ``reads`` and ``writes`` are then the files
    its redirections name; for any other call they are the files the tool itself reads or
    writes.
    """

    reads: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()
    runs: Command | None = None
    reaches: tuple[Reach, ...] = ()
    repositories: tuple[Path, ...] = ()
    """Git directories the command line's ``git`` commands may use that are not a ``.git``
    directory (a bare repository git finds by its shape): their configuration runs
    commands (:func:`caliban.shell.git.repositories`)."""
    replaces: tuple[Path, ...] = ()
    """Files among :attr:`writes` whose content the call rewrites from what the model saw
    (Write, Edit): where one exists, this session must have read it as it is now, or the
    call fails before anyone is asked (:meth:`~caliban.tools.base.ToolEnv.staleness`)."""
    unknown: str | None = None
    """Why what the call reads and writes cannot be known (a command line that is not
    understood, a redirection only the shell could resolve); ``reads`` and ``writes`` then
    say nothing."""
    leaves_plan_mode: bool = False
    """The call asks the user to approve a plan and end plan mode (ExitPlanMode): the policy
    always asks, and only in plan mode."""
    destructive: bool = False
    """The tool says the call may destroy or overwrite data (an MCP tool's
    ``destructiveHint``): it asks unless a rule allows it, whatever the mode would allow."""


NO_EFFECTS = Effects()
"""A call that touches nothing outside the session (TodoWrite, ToolSearch, a sub-agent)."""


def path_at(cwd: Path, path: str) -> Path:
    """``path`` as a file tool names it (``~`` expanded, relative to ``cwd``), absolute and
    with symlinks followed."""
    return resolved(cwd / Path(path).expanduser())


def command_effects(
    analysis: Analysis, cwd: Path, *, home: Path | None = None, outside_sandbox: bool = False
) -> Effects:
    """The effects of running an analysed command line in ``cwd``: the files its
    redirections read and write, following its ``cd`` s (:func:`caliban.shell.line_effects`);
    ``outside_sandbox``: the call asks to leave the OS sandbox."""
    files = line_effects(analysis, cwd=cwd, home=home)
    return Effects(
        reads=files.reads,
        writes=files.writes,
        runs=Command(analysis=analysis, cwd=cwd, outside_sandbox=outside_sandbox),
        repositories=files.repositories,
        unknown=files.unknown,
    )


__all__ = [
    "NO_EFFECTS",
    "Command",
    "Effects",
    "Host",
    "McpServer",
    "Reach",
    "command_effects",
    "path_at",
]
