"""Completion at the prompt: slash commands (with their descriptions), ``@path`` mentions and
``@server:uri`` MCP resources."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from caliban.mcp.offers import PromptOffer, ResourceOffer
from caliban.repl.commands import COMMANDS
from caliban.util.mentions import mention_being_typed
from caliban.util.text import visible

MAX_PATH_COMPLETIONS = 200
MAX_RESOURCE_COMPLETIONS = 50
SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", ".mypy_cache"})


def prompt_commands(prompts: Iterable[PromptOffer]) -> list[tuple[str, str]]:
    """``(mcp__server__prompt, description)`` of MCP prompts, for :class:`ReplCompleter`'s
    ``custom``."""
    return [
        (prompt.command, " ".join(filter(None, (prompt.usage, prompt.description, "(MCP)"))))
        for prompt in prompts
    ]


def resource_mentions(resources: Iterable[ResourceOffer]) -> list[tuple[str, str]]:
    """``(server:uri, description)`` of MCP resources, for :class:`ReplCompleter`'s
    ``resources``."""
    return [(r.mention, r.description or r.name) for r in resources]


class ReplCompleter(Completer):
    """``/` completes command names (built-in, then ``custom()``'s ``(name, description)``
    pairs: custom commands, skills, MCP prompts); ``@`` completes ``resources()``'
    ``(server:uri, description)`` pairs, then paths relative to ``cwd``. Both lists are
    read from memory: a keystroke never waits for a server."""

    def __init__(
        self,
        cwd: Path,
        *,
        custom: Callable[[], Sequence[tuple[str, str]]] = lambda: (),
        resources: Callable[[], Sequence[tuple[str, str]]] = lambda: (),
    ) -> None:
        self.cwd = cwd
        self.custom = custom
        self.resources = resources

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and not any(c.isspace() for c in before):
            yield from self._commands(before[1:])
            return
        if (mention := mention_being_typed(before)) is not None:
            yield from self._resources(mention)
            yield from self._paths(mention)

    def _resources(self, typed: str) -> Iterable[Completion]:
        found = (entry for entry in self.resources() if entry[0].startswith(typed))
        for mention, description in itertools.islice(found, MAX_RESOURCE_COMPLETIONS):
            yield Completion(
                mention,
                start_position=-len(typed),
                display=visible(mention),
                display_meta=visible(description),
            )

    def _commands(self, typed: str) -> Iterable[Completion]:
        entries = [(command.name, command.description) for command in COMMANDS.values()]
        entries += [(name, text) for name, text in self.custom() if name not in COMMANDS]
        for name, description in entries:
            if name.startswith(typed):
                yield Completion(
                    f"/{name}",
                    start_position=-(len(typed) + 1),
                    # prompt-toolkit shows ESC as ^[ but not a bidi override
                    display=visible(f"/{name}"),
                    display_meta=visible(description),
                )

    def _paths(self, written: str) -> Iterable[Completion]:
        typed = written.replace("\\ ", " ")
        folder, _, prefix = typed.rpartition("/")
        if folder or typed.startswith("/"):
            base = Path(os.path.expanduser(folder or "/"))
            shown_folder = f"{folder}/"
        else:
            base, shown_folder = Path("."), ""
        directory = base if base.is_absolute() else self.cwd / base
        try:
            entries = sorted(os.scandir(directory), key=lambda e: (not e.is_dir(), e.name))
        except OSError:
            return
        count = 0
        for entry in entries:
            if not entry.name.startswith(prefix) or entry.name in SKIP_DIRS:
                continue
            if entry.name.startswith(".") and not prefix.startswith("."):
                continue
            is_dir = entry.is_dir()
            name = entry.name + ("/" if is_dir else "")
            yield Completion(
                (shown_folder + name).replace(" ", "\\ "),
                start_position=-len(written),
                display=visible(name),
                display_meta="directory" if is_dir else "",
            )
            count += 1
            if count >= MAX_PATH_COMPLETIONS:
                return
