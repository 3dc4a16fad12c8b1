"""The Landlock backend (Linux, no bubblewrap): the command starts under the launcher
(:mod:`caliban.exec.launch`), which restricts itself with Landlock and seccomp and then
``exec``s it, in the same process and process group.

What it enforces: writes only under the writable roots (and ``/dev/null``); reads
everywhere but the unreadable paths outside the writable roots; TCP connections only to the
proxy's port (Landlock ABI 4) and no other sockets but TCP and netlink (seccomp); no new
unix sockets; no signals to processes outside the sandbox (ABI 6).

What it cannot: Landlock only grants, so a protected path *inside* a writable root
(``.git/config``) cannot be made read-only, nor a missing one (``.mcp.json``) kept from
being created, nor an unreadable one there hidden, without taking from the command the
right to create files next to it; those are left to the permission rules and reported by
:meth:`LandlockSandbox.limits`. The proxy's port is allowed on every address, not only
``127.0.0.1`` (Landlock rules name ports, not hosts).
"""

from __future__ import annotations

import os
from pathlib import Path

from caliban.exec import Availability, Command, NoNetwork, ProxyNetwork, SandboxProfile, launch
from caliban.sandbox import landlock, seccomp
from caliban.sandbox.bubblewrap import proxy_environment

__all__ = ["LandlockSandbox"]


class LandlockSandbox:
    """Commands confined by Landlock and seccomp, applied by the launcher."""

    name = "landlock"
    keeps_protected_paths = False
    """Landlock only grants: a protected path inside a writable folder stays writable."""

    def __init__(self) -> None:
        self._availability: Availability | None = None

    def available(self) -> Availability:
        """Whether the kernel has Landlock with TCP rules (ABI 4, Linux 6.7) and seccomp
        works for this architecture; a probe runs ``true`` through the launcher once."""
        if self._availability is None:
            self._availability = self._probe()
        return self._availability

    def _probe(self) -> Availability:
        version = landlock.abi()
        if version < 1:
            return Availability(usable=False, detail="Landlock is not enabled in this kernel")
        if version < 4:
            return Availability(
                usable=False,
                detail=f"Landlock ABI {version} cannot restrict the network (needs 4, Linux 6.7)",
            )
        if not seccomp.supported():
            return Availability(usable=False, detail=f"no seccomp filter for {os.uname().machine}")
        from caliban.sandbox.probe import failure

        if (broken := failure(self, "Landlock")) is not None:
            return broken
        return Availability(usable=True, detail=f"Landlock ABI {version} and seccomp")

    def limits(self, profile: SandboxProfile) -> list[str]:
        """What of ``profile`` this backend does not enforce, one phrase each."""
        notes = []
        kept = [p for p in profile.read_only if _under_any(p, profile.writable)]
        if kept:
            notes.append(
                "protected paths inside writable folders are not kept read-only by Landlock, "
                "and those missing may be created "
                f"({', '.join(map(str, kept[:3]))}{', …' if len(kept) > 3 else ''}): "
                "install bubblewrap for that"
            )
        shown = [p for p in profile.unreadable if _under_any(p, profile.writable)]
        if shown:
            notes.append(
                "unreadable paths inside writable folders are readable under Landlock "
                f"({', '.join(map(str, shown[:3]))}{', …' if len(shown) > 3 else ''})"
            )
        return notes

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        network = profile.network
        env = command.environment()
        ports: tuple[int, ...] = ()
        if isinstance(network, NoNetwork):
            net = "none"
        elif isinstance(network, ProxyNetwork):
            net, ports = "tcp", (network.port,)
            env.update(proxy_environment(network.port))
        else:
            net = "all"
        hidden = [str(p) for p in profile.unreadable if not _under_any(p, profile.writable)]
        argv = launch.invocation(
            landlock=True,
            hide=tuple(os.path.realpath(p) for p in hidden),
            write=tuple(os.path.realpath(p) for p in profile.writable),
            net=net,
            ports=ports,
            unix=profile.all_unix_sockets,
        )
        return Command(
            argv=(*argv, *command.argv),
            cwd=command.cwd,
            env=env,
            pass_fds=command.pass_fds,
            by_launcher=True,
        )


def _under_any(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or root in path.parents for root in roots)
