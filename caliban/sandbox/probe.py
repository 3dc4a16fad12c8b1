"""Whether a backend works on this machine: run ``true`` through its whole wrap once."""

from __future__ import annotations

from pathlib import Path

from caliban.exec import Availability, Command, Sandbox, SandboxProfile, run

__all__ = ["PROBE_TIMEOUT_S", "failure"]

PROBE_TIMEOUT_S = 10.0


def failure(backend: Sandbox, what: str) -> Availability | None:
    """Why ``backend`` cannot confine ``true`` here (``what`` names it in the message:
    "bwrap", "Landlock"), or None when it can. Runs a process: call it once, off the event
    loop."""
    wrapped = backend.wrap(Command(argv=("true",), cwd=Path("/")), SandboxProfile())
    try:
        result = run(wrapped, timeout=PROBE_TIMEOUT_S)
    except OSError as exc:
        return Availability(usable=False, detail=f"{what} cannot start: {exc}")
    if result.ok:
        return None
    said = result.stderr.decode(errors="replace").strip().splitlines()
    why = said[-1] if said else f"exit status {result.returncode}"
    return Availability(usable=False, detail=f"{what} does not work here: {why}")
