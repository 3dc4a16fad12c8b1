"""Slash commands: one registry, filled by the :func:`command` decorator.

A handler receives a :class:`CommandContext` (the session, the console, and what the REPL
lends a command: running a prompt, restarting the session, the prompt's keys) and the text
after the command name. ``/exit`` raises :class:`ExitRepl`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from caliban.skills.slash import parse_slash

if TYPE_CHECKING:
    from caliban.messages import Message
    from caliban.session.session import Session


class ExitRepl(Exception):
    """Leave the REPL (``/exit``)."""


@dataclass(kw_only=True)
class CommandContext:
    session: Session
    console: Console
    replay: Callable[[Sequence[Message]], None] | None = None
    """Shows the end of a conversation (after ``/resume``)."""
    run_prompt: Callable[[Message], Awaitable[None]] | None = None
    """Runs a prompt as a turn, shown like one the user typed (``/init``)."""
    restart: Callable[[], Awaitable[None]] | None = None
    """Closes the session and opens it again, conversation kept (``/trust``)."""
    toggle_vi: Callable[[], bool] | None = None
    """Switches the prompt between Emacs and vi keys; returns whether vi is on (``/vim``)."""
    set_input: Callable[[str], None] | None = None
    """Puts text in the next prompt's input, for editing (``/rewind``)."""
    choose: Callable[[str, Sequence[str]], Awaitable[int | None]] | None = None
    """Asks the user to pick one of the options (its index; ``None``: cancelled); ``None``:
    a menu on the terminal (``/rewind``)."""


Handler = Callable[[CommandContext, str], Awaitable[None]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    name: str
    description: str
    handler: Handler
    usage: str = ""
    """Its arguments (``[name]``); a command without takes none, and refuses any."""
    aliases: tuple[str, ...] = ()


COMMANDS: dict[str, Command] = {}
"""Every slash command by name, in registration order (the order ``/help`` shows)."""
ALIASES: dict[str, str] = {}


def command(
    name: str, description: str, *, usage: str = "", aliases: tuple[str, ...] = ()
) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as ``/name``."""

    def register(handler: Handler) -> Handler:
        COMMANDS[name] = Command(
            name=name, description=description, handler=handler, usage=usage, aliases=aliases
        )
        for alias in aliases:
            ALIASES[alias] = name
        return handler

    return register


def find_command(name: str) -> Command | None:
    return COMMANDS.get(ALIASES.get(name, name))


async def run_command(text: str, ctx: CommandContext) -> None:
    """Run the slash command in ``text``; an unknown one prints a hint."""
    parsed = parse_slash(text)
    found = find_command(parsed[0]) if parsed else None
    if parsed is None or found is None:
        name = text.split()[0] if text.split() else text
        ctx.console.print(Text(f"unknown command {name} — type /help", style="yellow"))
        return
    if parsed[1].strip() and not found.usage:
        # Not ignored: `/clear extra` may be a typo, and clearing is not undone.
        ctx.console.print(
            Text(f"/{parsed[0]} takes no arguments (nothing was done)", style="yellow")
        )
        return
    await found.handler(ctx, parsed[1])
