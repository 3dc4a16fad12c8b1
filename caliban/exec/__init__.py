"""The one door for child processes: every process caliban starts (Bash commands and
background tasks, hooks, ripgrep, git, MCP stdio servers) starts and stops here.

- :func:`spawn` starts a :class:`Command` on asyncio in a new session (its own process
  group), optionally confined by a :class:`SandboxProfile` through a :class:`Sandbox`
  backend (:mod:`caliban.exec.sandbox`: the protocol and :class:`NoSandbox`; the
  bubblewrap, Landlock and macOS Seatbelt backends live in :mod:`caliban.sandbox`). A
  cancellation while it starts stops the whole group it started.
- :func:`stop_group` stops a child's whole group: SIGTERM, a grace period for its live
  members, SIGKILL for the rest, safe against a second cancellation.
- :func:`run_main` is ``asyncio.run`` for an entry point: starts in flight finish before
  the tasks left are cancelled (a cancelled start can hang Python 3.11's ``asyncio.run``).
- :func:`run` runs a quick helper synchronously, bounded in time and output;
  :func:`run_attached` a program the user works in (an editor) on caliban's terminal.

``tests/test_architecture.py`` fails when anything outside this package starts a process.
"""

from caliban.exec.command import (
    AllNetwork,
    Command,
    Network,
    NoNetwork,
    ProxyNetwork,
    SandboxProfile,
)
from caliban.exec.process import (
    DEVNULL,
    PIPE,
    Child,
    Stdio,
    group_alive,
    run_main,
    spawn,
    stop_group,
)
from caliban.exec.sandbox import Availability, Confinement, NoSandbox, Sandbox
from caliban.exec.sync import RunResult, run, run_attached

__all__ = [
    "DEVNULL",
    "PIPE",
    "AllNetwork",
    "Availability",
    "Child",
    "Command",
    "Confinement",
    "Network",
    "NoNetwork",
    "NoSandbox",
    "ProxyNetwork",
    "RunResult",
    "Sandbox",
    "SandboxProfile",
    "Stdio",
    "group_alive",
    "run",
    "run_attached",
    "run_main",
    "spawn",
    "stop_group",
]
