"""The macOS backend: ``sandbox-exec -p PROFILE -- COMMAND…`` with a Seatbelt profile
generated from the :class:`~caliban.exec.SandboxProfile` (:func:`profile_text`).

Seatbelt rules are matched on paths when a file is touched, and the last matching rule
wins, so the profile reads: deny everything; allow processes, reading everything, and
writing the writable roots; then deny reading the unreadable paths, writing the protected
ones (whether they exist yet or not), and moving a protected path or a folder above it
away (which would let a new one be put in its place). The network is the proxy's port on
``localhost`` only, or nothing, or everything; unix sockets only those named.

Paths are resolved first: ``/tmp`` is ``/private/tmp`` to the kernel. The text is tested on
every platform; it runs only on macOS.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from caliban.exec import (
    AllNetwork,
    Availability,
    Command,
    NoNetwork,
    ProxyNetwork,
    SandboxProfile,
)
from caliban.sandbox.bubblewrap import proxy_environment

__all__ = ["SeatbeltSandbox", "profile_text"]

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

_BASE = """\
(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow process-info* (target same-sandbox))
(allow signal (target same-sandbox))
(allow sysctl-read)
(allow user-preference-read)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.SecurityServer"))
(allow ipc-posix-shm)
(allow ipc-posix-sem)
(allow pseudo-tty)
(allow file-ioctl)
(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))
(allow file-read*)
(allow file-write-data
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (regex #"^/dev/ttys[0-9]+$"))
"""


class SeatbeltSandbox:
    """Commands confined by macOS's ``sandbox-exec`` (deprecated by Apple, still the
    mechanism Claude Code and Codex use there)."""

    name = "seatbelt"
    keeps_protected_paths = True
    """Protected paths inside writable folders stay read-only (deny rules after the allows)."""

    def available(self) -> Availability:
        if sys.platform != "darwin":
            return Availability(usable=False, detail="sandbox-exec exists only on macOS")
        if shutil.which(SANDBOX_EXEC) is None:
            return Availability(usable=False, detail=f"{SANDBOX_EXEC} is missing")
        return Availability(usable=True, detail="macOS Seatbelt (sandbox-exec)")

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        env = command.environment()
        if isinstance(profile.network, ProxyNetwork):
            env.update(proxy_environment(profile.network.port))
        argv = (SANDBOX_EXEC, "-p", profile_text(profile), "--", *command.argv)
        return Command(argv=argv, cwd=command.cwd, env=env, pass_fds=command.pass_fds)


def profile_text(profile: SandboxProfile) -> str:
    """The Seatbelt profile for ``profile``."""
    lines = [_BASE]
    writable = [_real(p) for p in profile.writable]
    if writable:
        lines.append(_rule("allow file-write*", (f"(subpath {_quote(p)})" for p in writable)))
    unreadable = [_real(p) for p in profile.unreadable]
    if unreadable:
        lines.append(_rule("deny file-read*", (f"(subpath {_quote(p)})" for p in unreadable)))
    protected = [_real(p) for p in profile.read_only]
    if protected:
        lines.append(_rule("deny file-write*", (f"(subpath {_quote(p)})" for p in protected)))
    # Moving a folder above a protected path away would let a new one take its place.
    above = sorted({a for p in [*protected, *unreadable] for a in _ancestors(p)})
    if above:
        lines.append(_rule("deny file-write-unlink", (f"(literal {_quote(p)})" for p in above)))
    lines.append(_network(profile))
    return "\n".join(line.rstrip("\n") for line in lines) + "\n"


def _network(profile: SandboxProfile) -> str:
    network = profile.network
    rules: list[str] = []
    if isinstance(network, AllNetwork):
        rules.append("(allow network*)")
    elif isinstance(network, ProxyNetwork):
        rules.append(f'(allow network-outbound (remote ip "localhost:{network.port}"))')
    else:
        assert isinstance(network, NoNetwork)
    if profile.all_unix_sockets:
        rules.append('(allow network* (remote unix-socket (subpath "/")))')
    else:
        for path in profile.unix_sockets:
            literal = f"(path-literal {_quote(_real(path))})"
            rules.append(f"(allow network-outbound (remote unix-socket {literal}))")
    return "\n".join(rules)


def _rule(head: str, filters: Iterable[str]) -> str:
    body = "\n".join(f"  {f}" for f in filters)
    return f"({head}\n{body})"


def _quote(path: str) -> str:
    """A Seatbelt string literal (a path may hold quotes and backslashes)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parents
    return [str(p) for p in parts if str(p) != "/"]
