"""Turning a command's text into a prompt, as Claude Code does.

- ``$ARGUMENTS`` is the argument string as typed; ``$ARGUMENTS[N]`` and ``$N`` are single
  arguments, **0-based** (``/pos a b c``: ``$0`` is ``a``, ``$1`` is ``b``), split like a
  shell would. A body that uses none of them gets ``ARGUMENTS: …`` appended when there are
  arguments, so they are never lost.
- ``!`command``` is run in a shell and replaced by its output (see
  :mod:`caliban.skills.invoke` for when that is allowed). Only the command file's own
  snippets run: a ``!`…``` that arrives in the arguments is text, and a snippet an argument
  was filled into is marked (:class:`Snippet`), because arguments may come from anywhere
  (``caliban -p "/triage $ISSUE_TITLE"`` in CI).
- ``@path`` stays in the text; the file is attached as a Read of it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

_POSITIONAL = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS|\$(\d+)")
SHELL_SNIPPET: Final = re.compile(r"!`([^`\n]+)`")


def split_arguments(arguments: str) -> list[str]:
    """Arguments as a shell splits them; plain whitespace when quotes do not pair up."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


@dataclass(frozen=True, kw_only=True, slots=True)
class Snippet:
    """A ``!`command``` of a command file, its arguments filled in."""

    command: str
    with_arguments: bool
    """An argument was filled into it: the command is no longer only what the file says."""


def substitute_arguments(body: str, arguments: str) -> str:
    """``body`` with ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` filled in (0-based)."""
    return "".join(
        piece if isinstance(piece, str) else f"!`{piece.command}`"
        for piece in expand_body(body, arguments)
    )


def expand_body(body: str, arguments: str) -> list[str | Snippet]:
    """``body`` with its arguments filled in, as text and the snippets ``body`` itself has.

    Snippets are found before anything is filled in, so an argument can never become one.
    """
    words = split_arguments(arguments)
    used = False

    def fill(match: re.Match[str]) -> str:
        nonlocal used
        used = True
        index = match.group(1) or match.group(2)
        if index is None:
            return arguments
        return words[int(index)] if int(index) < len(words) else ""

    pieces: list[str | Snippet] = []
    last = 0
    for match in SHELL_SNIPPET.finditer(body):
        pieces.append(_POSITIONAL.sub(fill, body[last : match.start()]))
        written = match.group(1)
        command = _POSITIONAL.sub(fill, written)
        pieces.append(Snippet(command=command, with_arguments=command != written))
        last = match.end()
    tail = _POSITIONAL.sub(fill, body[last:])
    if not used and arguments.strip():
        tail = f"{tail.rstrip()}\n\nARGUMENTS: {arguments}\n"
    return [*pieces, tail]


def shell_snippets(text: str) -> list[str]:
    """The commands of every ``!`command``` in ``text``, in order."""
    return [match.group(1) for match in SHELL_SNIPPET.finditer(text)]


async def run_snippets(pieces: list[str | Snippet], run: Callable[[str], Awaitable[str]]) -> str:
    """The text of ``pieces`` with each snippet replaced by ``run(command)``'s output."""
    return "".join([p if isinstance(p, str) else await run(p.command) for p in pieces])


__all__ = [
    "SHELL_SNIPPET",
    "Snippet",
    "expand_body",
    "run_snippets",
    "shell_snippets",
    "split_arguments",
    "substitute_arguments",
]
