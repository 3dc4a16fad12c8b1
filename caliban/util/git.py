"""Running git for caliban's own needs (worktrees, ``/diff``): bounded in time and output.

git starts through :mod:`caliban.exec`, like every child process; the Bash tool's git is
the model's, not this.
"""

from __future__ import annotations

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
    from caliban.exec import Command, run

    argv = ("git", "-c", "core.quotepath=off", *args)
    try:
        done = run(Command(argv=argv, cwd=cwd), timeout=timeout, max_output=MAX_OUTPUT_BYTES)
    except FileNotFoundError as exc:
        raise GitError("git is not installed (it is needed for this)") from exc
    except OSError as exc:
        raise GitError(f"git {args[0]}: {exc.strerror or exc}") from exc
    if done.timed_out:
        raise GitError(f"git {args[0]} took longer than {timeout:.0f}s")
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise GitError(f"git {args[0]}: {message}")
    return GitResult(stdout=done.stdout.decode("utf-8", "replace"), truncated=done.truncated)
