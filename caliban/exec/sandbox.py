"""The seam an OS sandbox plugs into: a :class:`Sandbox` turns the :class:`Command` a caller
asked for into the command actually started, confined by a :class:`SandboxProfile`.

Every backend is an argv rewrite, so one door (:func:`caliban.exec.spawn`) serves them all
and nothing runs in the child between ``fork`` and ``exec`` (no ``preexec_fn``, unsafe in a
program with threads):

- **bubblewrap**: ``bwrap --die-with-parent --unshare-net … -- argv``, the profile as bind
  mounts; seccomp (the unix-socket filter) applied by the launcher below inside it.
- **Landlock + seccomp**: ``python -m caliban.exec.<launcher> <profile> -- argv``, a small
  launcher that restricts itself (Landlock rules, a seccomp filter, ``no_new_privs``) and
  then ``exec``s the command; the profile may travel on a pipe named in ``pass_fds``.
- **macOS**: ``sandbox-exec -p <generated profile> argv``.

A backend keeps the command in the process group it was started in, or makes it die with
its launcher (bubblewrap's ``--die-with-parent`` and a PID namespace), so
:func:`caliban.exec.stop_group` still stops everything. ``wrap`` runs on the event loop: it
may not block (probe the system in ``available``, once, and keep the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from caliban.exec.command import Command, SandboxProfile

__all__ = ["Availability", "Confinement", "NoSandbox", "Sandbox", "confine"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Availability:
    """Whether a backend can confine commands on this machine."""

    usable: bool
    detail: str
    """Why not ("bwrap: setting up uid map: Permission denied"), or what confines them."""


class Sandbox(Protocol):
    """An OS sandbox backend."""

    @property
    def name(self) -> str:
        """Short and stable, for ``/sandbox`` and logs: ``none``, ``bubblewrap``, …"""
        ...

    def available(self) -> Availability:
        """Whether it works here, and if not why (said once to the user; with
        ``failIfUnavailable`` commands are refused rather than run unconfined)."""
        ...

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        """The command to start so that ``command`` runs confined by ``profile``."""
        ...


class Confinement(Protocol):
    """Where a process that asks to be sandboxed (an MCP server or a hook with ``sandbox =
    true``) gets its confinement: the session's sandbox
    (:class:`caliban.sandbox.runtime.SandboxRuntime`)."""

    def confinement(self) -> tuple[SandboxProfile, Sandbox]:
        """The profile and the backend to start it under; raises OSError when no backend
        works here (it then does not start: it asked not to run unconfined)."""
        ...

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` for a sandboxed process (its temporary folder)."""
        ...


class NoSandbox:
    """No confinement: the command starts as given and the profile is not enforced. What
    runs when sandboxing is off (the only backend so far)."""

    name = "none"

    def available(self) -> Availability:
        return Availability(usable=True, detail="commands run without an OS sandbox")

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        return command


def confine(command: Command, profile: SandboxProfile | None, sandbox: Sandbox | None) -> Command:
    """What to start for ``command``: wrapped by ``sandbox`` (:class:`NoSandbox` when None)
    under ``profile``, or as it is without a profile. A sandbox without a profile is an
    error, not an unconfined start."""
    if profile is not None:
        return (sandbox or NoSandbox()).wrap(command, profile)
    if sandbox is not None:
        raise ValueError("a sandbox confines a command by a profile: pass profile= too")
    return command
