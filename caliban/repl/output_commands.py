"""Slash commands that take something out of the session: /diff, /export, /copy, and /vim
(the prompt's keys)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from rich.text import Text

from caliban.messages import Message, TextPart, ToolCall, ToolResult
from caliban.repl.registry import CommandContext, command
from caliban.repl.render import describe_call, head_tail, outside_text

DIFF_MAX_LINES = 2_000
RESULT_LINES = 6
"""Lines of each tool result in an export (its head and tail)."""


def _dim(text: str) -> Text:
    return Text(text, style="dim")


@command("diff", "Show the project's uncommitted changes (git diff)")
async def _diff(ctx: CommandContext, arg: str) -> None:
    from caliban.util.git import GitError, git

    root = ctx.session.env.project_root
    try:
        diff = git("diff", "HEAD", "--no-color", "--no-ext-diff", cwd=root)
        untracked = git("ls-files", "--others", "--exclude-standard", cwd=root).stdout.split("\n")
    except GitError as exc:
        ctx.console.print(outside_text(f"No diff: {exc}", "yellow"))
        return
    new = [name for name in untracked if name]
    if not diff.stdout.strip() and not new:
        ctx.console.print(_dim("No uncommitted changes."))
        return
    lines = diff.stdout.splitlines()
    if lines:
        shown = "\n".join(lines[:DIFF_MAX_LINES])
        from rich.syntax import Syntax  # pygments: ~40 ms, for /diff only

        ctx.console.print(Syntax(shown, "diff", theme="ansi_dark", background_color="default"))
    if len(lines) > DIFF_MAX_LINES or diff.truncated:
        ctx.console.print(_dim(f"… cut at {DIFF_MAX_LINES:,} lines: run git diff for the rest"))
    if new:
        ctx.console.print(outside_text(f"Untracked: {', '.join(new[:20])}", "dim"))
        if len(new) > 20:
            ctx.console.print(_dim(f"… and {len(new) - 20} more"))


@command("export", "Save the conversation as text (or copy it)", usage="[file]")
async def _export(ctx: CommandContext, arg: str) -> None:
    from caliban.util.fsutil import atomic_write_text

    session = ctx.session
    text = conversation_text(session.conversation.messages, session.cwd, title=session.id)
    name = arg.strip()
    if not name:
        stamp = datetime.now().strftime("%Y-%m-%d-%H%M%S")
        name = f"caliban-conversation-{stamp}.txt"
    path = _export_path(session.cwd, name)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        ctx.console.print(outside_text(f"Not exported: {path}: {exc.strerror or exc}", "yellow"))
        return
    ctx.console.print(outside_text(f"Conversation exported to {path}", "dim"))


@command("copy", "Copy the last answer to the clipboard")
async def _copy(ctx: CommandContext, arg: str) -> None:
    from caliban.repl.clipboard import ClipboardError, copy_text, osc52

    answer = next(
        (m.text for m in reversed(ctx.session.conversation.messages) if m.role == "assistant"),
        "",
    )
    if not answer.strip():
        ctx.console.print(_dim("Nothing to copy yet: no answer in this conversation."))
        return
    try:
        tool = await copy_text(answer)
    except ClipboardError as exc:
        ctx.console.print(outside_text(f"Not copied: {exc}", "yellow"))
        return
    if tool is None:
        if not ctx.console.is_terminal:
            ctx.console.print(_dim("Not copied: no clipboard tool, and no terminal to ask."))
            return
        # The terminal's own clipboard (OSC 52): our sequence, written past the console's
        # escaping of outside text.
        ctx.console.file.write(osc52(answer))
        ctx.console.file.flush()
        tool = "the terminal (OSC 52)"
    ctx.console.print(_dim(f"Copied the last answer ({len(answer):,} characters) with {tool}."))


@command("vim", "Switch the prompt between vi and Emacs keys")
async def _vim(ctx: CommandContext, arg: str) -> None:
    if ctx.toggle_vi is None:
        ctx.console.print(_dim("/vim needs the interactive prompt."))
        return
    vi = ctx.toggle_vi()
    ctx.console.print(
        Text(
            "Vi keys on (Esc: normal mode, i: insert); /vim again for Emacs keys."
            if vi
            else "Emacs keys on (the default)."
        )
    )


def _export_path(cwd: Path, name: str) -> Path:
    return cwd / Path(name).expanduser()  # an absolute name stays itself


def conversation_text(messages: Sequence[Message], cwd: Path, *, title: str) -> str:
    """The conversation as a reader sees it: prompts, answers, tool calls and the head and
    tail of their results."""
    out = [f"caliban conversation {title}", f"exported {datetime.now():%Y-%m-%d %H:%M}", ""]
    for message in messages:
        for part in message.parts:
            match part:
                case TextPart(text=text) if text.strip() and message.role == "user":
                    out += ["", *(f"> {line}" for line in text.strip().split("\n"))]
                case TextPart(text=text) if text.strip():
                    out += ["", f"● {text.strip()}"]
                case ToolCall():
                    out += ["", f"● {describe_call(part, cwd)}"]
                case ToolResult():
                    lines = part.text.rstrip("\n").split("\n") if part.text.strip() else []
                    shown = head_tail(lines, RESULT_LINES // 2, RESULT_LINES // 2) or ["(empty)"]
                    mark = "Error: " if part.is_error else ""
                    out.append(f"  ⎿  {mark}{shown[0]}")
                    out += [f"     {line}" for line in shown[1:]]
                case _:
                    pass
    return "\n".join(out).rstrip() + "\n"
