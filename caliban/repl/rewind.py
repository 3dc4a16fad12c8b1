"""``/rewind`` (also Esc Esc on an empty prompt) and ``/undo``: take back what the agent did.

``/rewind`` lists the conversation's prompts, newest first, each with what changed after it
(files, +/- lines); for the chosen one it offers, as Claude Code does: restore the code and
the conversation, the conversation only, the code only, or nothing. Restoring the
conversation cuts it before that prompt (the active MCP tools as they were come back) and
puts the prompt's text back in the input. Files changed outside caliban since the
checkpoint are named before anything is overwritten. ``/undo`` restores the files of the
last prompt's checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rich.console import Console
from rich.text import Text

from caliban.checkpoints.manager import Checkpoint, CheckpointNotFound, RewindPlan
from caliban.checkpoints.store import Change, StoreError
from caliban.messages import Message, ToolResult
from caliban.repl.approve import Choose, pick
from caliban.repl.render import ELBOW, outside_text
from caliban.session.store import user_words
from caliban.util.text import plural

if TYPE_CHECKING:
    from caliban.session.session import Session

Restore = Literal["both", "conversation", "code", "cancel"]
RESTORE_CHOICES: tuple[tuple[Restore, str], ...] = (
    ("both", "Restore code and conversation"),
    ("conversation", "Restore conversation"),
    ("code", "Restore code"),
    ("cancel", "Never mind"),
)
PROMPT_WIDTH = 60


def prompts_in(messages: Sequence[Message]) -> list[Message]:
    """The user's prompts of a conversation, oldest first: not tool results, nor context
    with no words of the user's (a ``/add-dir`` or SessionStart hook's reminder)."""
    return [
        m
        for m in messages
        if m.role == "user"
        and not any(isinstance(p, ToolResult) for p in m.parts)
        and user_words(m.text)
    ]


def change_summary(changes: Sequence[Change]) -> str:
    if not changes:
        return "no file changes"
    added = sum(c.added_lines for c in changes)
    removed = sum(c.removed_lines for c in changes)
    return f"{plural(len(changes), 'file')} +{added} -{removed}"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= PROMPT_WIDTH else line[: PROMPT_WIDTH - 1] + "…"


@dataclass(kw_only=True)
class RewindContext:
    """What ``/rewind`` and ``/undo`` work with (the REPL's command context, in short)."""

    session: Session
    console: Console
    choose: Choose | None = None
    """None: :func:`caliban.repl.approve.choose` on the terminal, which reads only keys
    pressed once the menu is drawn."""
    set_input: Callable[[str], None] | None = None


async def rewind(ctx: RewindContext) -> None:
    """``/rewind``: pick a prompt, then what to restore."""
    session = ctx.session
    checkpoints = session.checkpoints
    prompts = list(reversed(prompts_in(session.conversation.messages)))
    taken = {c.id: c for c in checkpoints.entries()} if checkpoints is not None else {}
    if not prompts:
        ctx.console.print(Text("Nothing to rewind: no prompt yet.", style="dim"))
        return
    labels = []
    for prompt in prompts:
        checkpoint = taken.get(prompt.id)
        if checkpoint is None:
            what = "no checkpoint: conversation only"
        else:
            what = change_summary(await _changes_after(ctx, checkpoint))
        labels.append(f"{_one_line(user_words(prompt.text))}  · {what}")
    index = await pick(ctx.choose, "Rewind to before which prompt?", labels)
    if index is None:
        ctx.console.print(Text("Rewind cancelled.", style="dim"))
        return
    prompt = prompts[index]
    checkpoint = taken.get(prompt.id)
    choices = [c for c in RESTORE_CHOICES if checkpoint is not None or c[0] != "code"]
    if checkpoint is None:
        choices = [c for c in choices if c[0] != "both"]
    plan = await _plan(ctx, prompt.id) if checkpoint is not None else None
    if plan is not None:
        _show_plan(ctx, plan)
    picked = await pick(ctx.choose, "Restore what?", [label for _, label in choices])
    restore: Restore = choices[picked][0] if picked is not None else "cancel"
    if restore == "cancel":
        ctx.console.print(Text("Rewind cancelled.", style="dim"))
        return
    if restore in ("both", "code") and not await _restore_files(ctx, prompt.id):
        return
    if restore in ("both", "conversation"):
        session.rewind_conversation(prompt.id)
        typed = user_words(prompt.text)  # without the reminders it carried (plan mode)
        ctx.console.print(
            outside_text(f"  {ELBOW}  Conversation rewound to before: {_one_line(typed)}", "dim")
        )
        if ctx.set_input is not None:
            ctx.set_input(typed)


async def undo(ctx: RewindContext) -> None:
    """``/undo``: restore the files to before the last prompt."""
    session = ctx.session
    checkpoints = session.checkpoints
    prompts = prompts_in(session.conversation.messages)
    ids = {c.id for c in checkpoints.entries()} if checkpoints is not None else set()
    last = next((p for p in reversed(prompts) if p.id in ids), None)
    if last is None:
        ctx.console.print(Text("Nothing to undo: no checkpoint in this conversation.", style="dim"))
        return
    plan = await _plan(ctx, last.id)
    if plan is None:
        return
    if not plan.changes:
        ctx.console.print(Text("Nothing to undo: the files are as they were.", style="dim"))
        return
    if plan.outside_edits:
        _show_plan(ctx, plan)
        if await pick(ctx.choose, "Restore the files anyway?", ["Yes", "No"]) != 0:
            ctx.console.print(Text("Undo cancelled.", style="dim"))
            return
    await _restore_files(ctx, last.id)


async def _changes_after(ctx: RewindContext, checkpoint: Checkpoint) -> list[Change]:
    assert ctx.session.checkpoints is not None
    try:
        return await ctx.session.checkpoints.changes_after(checkpoint)
    except StoreError:
        return []


async def _plan(ctx: RewindContext, message_id: str) -> RewindPlan | None:
    assert ctx.session.checkpoints is not None
    try:
        return await ctx.session.checkpoints.plan(message_id)
    except (CheckpointNotFound, StoreError) as exc:
        ctx.console.print(outside_text(f"  ⚠  cannot restore the files: {exc}", "yellow"))
        return None


def _show_plan(ctx: RewindContext, plan: RewindPlan) -> None:
    ctx.console.print(
        Text(f"  Restoring the code changes {change_summary(plan.changes)}.", style="dim")
    )
    for paths, why in (
        (plan.outside_edits, "changed outside caliban since; restoring the code loses those edits"),
        (plan.unrestorable, "too large to have been captured; left as they are"),
    ):
        if paths:
            ctx.console.print(outside_text(f"  ⚠  {why}: {', '.join(paths)}", "yellow"))


async def _restore_files(ctx: RewindContext, message_id: str) -> bool:
    assert ctx.session.checkpoints is not None
    try:
        result = await ctx.session.checkpoints.rewind_files(message_id)
    except (CheckpointNotFound, StoreError) as exc:
        ctx.console.print(outside_text(f"  ⚠  the files were not restored: {exc}", "yellow"))
        return False
    names = ", ".join(c.path for c in result.changes[:8])
    more = f" and {len(result.changes) - 8} more" if len(result.changes) > 8 else ""
    summary = f"Restored {plural(len(result.changes), 'file')}"
    ctx.console.print(
        outside_text(f"  {ELBOW}  {summary}{': ' + names + more if names else ''}", "dim")
    )
    if result.unrestorable:
        skipped = ", ".join(result.unrestorable)
        ctx.console.print(outside_text(f"  ⚠  not captured, left as they are: {skipped}", "yellow"))
    return True
