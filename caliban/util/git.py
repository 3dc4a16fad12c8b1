"""Running git for caliban's own needs (worktrees, ``/diff``): bounded in time and output.

The one place this code starts git (it moves to ``caliban.exec`` with the other child
processes); the Bash tool's git is the model's, not this.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 30.0
MAX_OUTPUT_BYTES = 4 * 1024 * 1024


class GitError(Exception):
    """git is missing, timed out, or failed; the message says which and why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GitResult:
    stdout: str
    truncated: bool
    """Output past :data:`MAX_OUTPUT_BYTES` was dropped."""


def git(*args: str, cwd: Path, timeout: float = TIMEOUT_S, check: bool = True) -> GitResult:
    """``git args`` in ``cwd``; raises :class:`GitError` when it cannot run or (``check``)
    exits non-zero, with git's own message."""
    argv = ["git", "-c", "core.quotepath=off", *args]
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed (it is needed for this)") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} took longer than {timeout:.0f}s") from exc
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise GitError(f"git {args[0]}: {message}")
    out = done.stdout[:MAX_OUTPUT_BYTES]
    return GitResult(
        stdout=out.decode("utf-8", "replace"), truncated=len(done.stdout) > MAX_OUTPUT_BYTES
    )
