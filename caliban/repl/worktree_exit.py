"""Leaving a ``caliban -w`` session: keep the worktree, or remove it with its branch.

As in Claude Code: a worktree with no changes goes without a question; otherwise caliban
says what would be lost and asks (Esc keeps it).
"""

from __future__ import annotations

import asyncio

from rich.console import Console
from rich.text import Text

from caliban.repl.approve import choose
from caliban.repl.render import outside_text
from caliban.session.worktree import Changes, Worktree, changes, remove_worktree
from caliban.util.git import GitError
from caliban.util.text import plural


async def leave_worktree(console: Console, worktree: Worktree) -> bool:
    """Ask what becomes of ``worktree``; returns whether it was kept."""
    try:
        found = await asyncio.to_thread(changes, worktree)
    except GitError as exc:
        console.print(outside_text(f"Worktree {worktree.path} kept: {exc}", "yellow"))
        return True
    if not found.none:
        console.print(Text("Leaving the worktree session", style="bold"))
        console.print(outside_text(f"  {describe(found)} in {worktree.path}.", "dim"))
        options = [
            ("keep", f"Keep the worktree (it stays at {worktree.path})"),
            ("remove", f"Remove the worktree and branch {worktree.branch}: the changes are lost"),
        ]
        try:
            choice = await choose(options, question="Keep it?", shortcuts={"escape": "keep"})
        except (KeyboardInterrupt, EOFError):
            choice = "keep"
        if choice == "keep":
            console.print(
                outside_text(f"Worktree kept: {worktree.path} (branch {worktree.branch})", "dim")
            )
            return True
    try:
        await asyncio.to_thread(remove_worktree, worktree)
    except GitError as exc:
        console.print(outside_text(f"Worktree {worktree.path} not removed: {exc}", "yellow"))
        return True
    why = "no changes" if found.none else "as asked"
    console.print(outside_text(f"Worktree {worktree.path} removed ({why}).", "dim"))
    return False


def describe(found: Changes) -> str:
    """``2 uncommitted files and 1 commit``."""
    parts = []
    if found.uncommitted:
        parts.append(plural(found.uncommitted, "uncommitted file"))
    if found.commits:
        parts.append(plural(found.commits, "new commit"))
    return " and ".join(parts)
