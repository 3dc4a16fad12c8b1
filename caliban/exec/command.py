"""What a child process is started as (:class:`Command`) and what a sandbox lets it do
(:class:`SandboxProfile`): frozen values, built by the caller and read by a
:class:`~caliban.exec.sandbox.Sandbox` backend."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

__all__ = [
    "AllNetwork",
    "Command",
    "Network",
    "NoNetwork",
    "ProxyNetwork",
    "SandboxProfile",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """A program to start: ``argv[0]`` is looked up on ``PATH`` (of ``env`` when given)."""

    argv: tuple[str, ...]
    cwd: Path | None = None
    """Where it starts; None: caliban's working directory."""
    env: Mapping[str, str] | None = None
    """Its whole environment (copied, read-only); None: caliban's own."""
    pass_fds: tuple[int, ...] = ()
    """File descriptors kept open in the child besides stdin, stdout and stderr (a sandbox
    launcher reading its profile from a pipe, say); every other one is closed."""
    by_launcher: bool = False
    """``argv`` is the sandbox launcher's (:func:`caliban.exec.launch.invocation`, then the
    command): :func:`caliban.exec.spawn` may have the launch server fork it rather than
    start a new Python (:mod:`caliban.exec.launch_server`). Same arguments, same code."""
    started: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    """What to do once it has started and before it is handed out (bubblewrap: make the
    proxy's socket in its network namespace, then let the command run). Blocking: it runs
    in a thread. When it raises, the process group is killed and the start fails."""
    on_exit: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    """What to undo once it has exited, or failed to start: called once, by whoever started
    it (:func:`caliban.exec.spawn`, :func:`caliban.exec.run`). A sandbox backend sets it
    (bubblewrap's placeholders for protected paths that did not exist)."""

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a Command needs at least a program name")
        object.__setattr__(self, "argv", tuple(self.argv))
        if self.env is not None:
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    def environment(self) -> dict[str, str]:
        """The environment it starts with, as a new dict (a backend adding variables starts
        from this)."""
        return dict(os.environ if self.env is None else self.env)


@dataclass(frozen=True, slots=True)
class NoNetwork:
    """No network at all (loopback included): the sandbox's default."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyNetwork:
    """Only the filtering proxy on ``127.0.0.1:port`` (HTTP and HTTPS ``CONNECT``), which
    lets through the domains the rules allow; the backend points ``HTTP(S)_PROXY`` at it."""

    port: int
    serve: Callable[[socket.socket], Callable[[], None]] | None = field(
        default=None, compare=False, repr=False
    )
    """How the proxy also serves a socket listening on ``127.0.0.1:port`` in a network of
    the command's own (bubblewrap's namespace has no route to the host's ``127.0.0.1``):
    given it, it serves it until the function it returns is called
    (:meth:`caliban.sandbox.proxy.DomainProxy.serve`)."""


@dataclass(frozen=True, slots=True)
class AllNetwork:
    """The host's network, unfiltered."""


Network = NoNetwork | ProxyNetwork | AllNetwork


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxProfile:
    """What a sandboxed command may touch (issue 24). Everything not granted is denied: the
    default profile reads the file system, writes nowhere, and reaches no network.

    Paths are absolute; a backend resolves symbolic links itself, at the time it wraps a
    command, since a path that is a link now may not be one when the command runs.
    """

    writable: tuple[Path, ...] = ()
    """Directories the command may write under: the project, ``--add-dir`` folders, a
    private temporary directory."""
    read_only: tuple[Path, ...] = ()
    """Paths inside ``writable`` that stay read-only: the protected files and directories
    (``.git/config`` and ``.git/hooks``, ``.caliban/``, ``.claude/``, ``.mcp.json``, shell
    rc files, …), which would widen permissions or run code later."""
    unreadable: tuple[Path, ...] = ()
    """Paths the command may not read at all (those a ``Read`` deny rule covers, such as
    ``~/.ssh``); a directory hides everything under it."""
    network: Network = field(default_factory=NoNetwork)
    unix_sockets: tuple[Path, ...] = ()
    """Unix socket paths the command may connect to; creating or connecting to any other
    unix socket is blocked (the Docker socket is the classic way out of a sandbox). Only
    macOS can tell one socket from another: on Linux, seccomp cannot read a path, so these
    are not reachable there unless ``all_unix_sockets``."""
    all_unix_sockets: bool = False
    """Unix sockets are not blocked at all (Claude Code's ``allowAllUnixSockets``)."""

    def __post_init__(self) -> None:
        for name in ("writable", "read_only", "unreadable", "unix_sockets"):
            paths = tuple(Path(p) for p in getattr(self, name))
            relative = [str(p) for p in paths if not p.is_absolute()]
            if relative:
                raise ValueError(f"SandboxProfile.{name} needs absolute paths: {relative}")
            object.__setattr__(self, name, paths)
