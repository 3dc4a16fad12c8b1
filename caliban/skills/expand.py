"""Turning a command's text into a prompt, as Claude Code does.

- ``$ARGUMENTS`` is the argument string as typed; ``$ARGUMENTS[N]`` and ``$N`` are single
  arguments, **0-based** (``/pos a b c``: ``$0`` is ``a``, ``$1`` is ``b``), split like a
  shell would. A body that uses none of them gets ``ARGUMENTS: …`` appended when there are
  arguments, so they are never lost.
- ``!`command``` is run in a shell and replaced by its output (see
  :mod:`caliban.skills.invoke` for when that is allowed).
- ``@path`` stays in the text; the file is attached as a Read of it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable
from typing import Final

_POSITIONAL = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS|\$(\d+)")
SHELL_SNIPPET: Final = re.compile(r"!`([^`\n]+)`")
_MENTION = re.compile(r"(?<![\w@`])@((?:\\ |[^\s`])+)")


def split_arguments(arguments: str) -> list[str]:
    """Arguments as a shell splits them; plain whitespace when quotes do not pair up."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def substitute_arguments(body: str, arguments: str) -> str:
    """``body`` with ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` filled in (0-based)."""
    words = split_arguments(arguments)
    used = False

    def fill(match: re.Match[str]) -> str:
        nonlocal used
        used = True
        index = match.group(1) or match.group(2)
        if index is None:
            return arguments
        return words[int(index)] if int(index) < len(words) else ""

    text = _POSITIONAL.sub(fill, body)
    if not used and arguments.strip():
        text = f"{text.rstrip()}\n\nARGUMENTS: {arguments}\n"
    return text


def shell_snippets(text: str) -> list[str]:
    """The commands of every ``!`command``` in ``text``, in order."""
    return [match.group(1) for match in SHELL_SNIPPET.finditer(text)]


async def run_snippets(text: str, run: Callable[[str], Awaitable[str]]) -> str:
    """``text`` with each ``!`command``` replaced by ``run(command)``'s output."""
    pieces: list[str] = []
    last = 0
    for match in SHELL_SNIPPET.finditer(text):
        pieces.append(text[last : match.start()])
        pieces.append(await run(match.group(1)))
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def file_mentions(text: str) -> list[str]:
    """Paths mentioned as ``@path`` (``\\ `` escapes a space), in order, no duplicates;
    an ``@`` right after a backtick (`` `@decorator` ``) is not a mention, and a path ends
    at a backtick."""
    found: list[str] = []
    for match in _MENTION.finditer(text):
        path = match.group(1).replace("\\ ", " ").rstrip(".,;:!?)'\"")
        if path and path not in found:
            found.append(path)
    return found


__all__ = [
    "SHELL_SNIPPET",
    "file_mentions",
    "run_snippets",
    "shell_snippets",
    "split_arguments",
    "substitute_arguments",
]
