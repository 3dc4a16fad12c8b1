"""Bash permission rules matched against an analysed command line (:mod:`caliban.shell`),
never against its text alone.

- An allow rule covers one simple command of an understood line (:func:`allows`); the
  policy requires every simple command of the line to be covered.
- A deny or ask rule matches any part of the line, understood or not: the whole text, each
  simple command, what wrappers and ``find -exec`` run, and the strings ``bash -c`` or
  ``eval`` run (:func:`deny_matches`). Over-matching a deny rule is the safe mistake.
- :func:`suggest_rule` proposes the rule "don't ask again" adds.

Patterns are Claude Code's: ``*`` matches anything, ``prefix:*`` a command and its
arguments, everything else is literal (:func:`pattern_matches`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from caliban.shell import Analysis, NotUnderstood, SimpleCommand, Understood, analyze, render
from caliban.shell.commands import MAX_WRAPPED_WORDS, inner_scripts, wrapped

MAX_INNER_DEPTH = 3
"""How many levels of ``bash -c '…'`` / ``eval`` deny and ask rules look into."""

_RAW_SPLIT = re.compile(r"\$\(|[<>]\(|[\n;&|(){}`]")


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether a Bash rule pattern covers ``text``, in linear time.

    ``*`` matches anything (spaces and slashes included); everything else is literal;
    ``prefix:*`` matches ``prefix`` and ``prefix …``. Runs of whitespace in the pattern
    count as one space.
    """
    return _matches(" ".join(pattern.split()), text)


def _matches(pattern: str, text: str) -> bool:
    """:func:`pattern_matches` for a pattern whose whitespace is already normalised."""
    if pattern.endswith(":*"):
        prefix = pattern[:-2]
        return text == prefix or text.startswith(prefix + " ")
    first, *middle = pattern.split("*")
    if not middle:
        return text == pattern
    last = middle.pop()
    if len(text) < len(first) + len(last) or not text.startswith(first):
        return False
    if not text.endswith(last):
        return False
    position, stop = len(first), len(text) - len(last)
    for part in middle:  # leftmost matches are enough when * is the only wildcard
        found = text.find(part, position, stop)
        if found < 0:
            return False
        position = found + len(part)
    return True


def allows(pattern: str, command: SimpleCommand) -> bool:
    """Whether an allow rule's pattern covers one simple command of an understood line.

    Matched on the argv (:attr:`SimpleCommand.text`). A command with leading assignments
    (``GIT_EXTERNAL_DIFF=x git diff``, ``LD_PRELOAD=…``) or with no command word never
    matches: an assignment can make the command run other code.
    """
    if command.assignments or not command.argv:
        return False
    return pattern_matches(pattern, command.text)


@dataclass(frozen=True, slots=True)
class LineTexts:
    """Every text of a line that deny and ask patterns are tried on: the whole line, each
    simple command, what wrappers run, ``bash -c``/``eval`` strings (see
    :func:`deny_matches`). Collected once per line, whatever the number of rules."""

    texts: tuple[str, ...]
    unreadable: bool = False
    """The line was too long to parse, or nests shells deeper than caliban looks: every
    pattern matches it (over-matching a deny rule is the safe mistake)."""

    def matched_by(self, pattern: str) -> bool:
        """Whether a deny (or ask) rule's pattern covers any part of the line."""
        if self.unreadable:
            return True
        normal = " ".join(pattern.split())
        return any(_matches(normal, text) for text in self.texts)


def line_texts(analysis: Analysis) -> LineTexts:
    """What deny and ask patterns are tried on for ``analysis``, understood or not."""
    if isinstance(analysis, NotUnderstood) and analysis.unchecked:
        return LineTexts(texts=(), unreadable=True)
    texts: dict[str, None] = {}
    too_deep = _collect(analysis, texts, 0)
    return LineTexts(texts=tuple(texts), unreadable=too_deep)


def deny_matches(pattern: str, analysis: Analysis) -> bool:
    """Whether a deny (or ask) rule's pattern covers any part of the line: the whole
    text, any simple command, what wrappers run, ``bash -c``/``eval`` strings — also in
    lines that are not understood. Over-matching is the safe mistake here."""
    return line_texts(analysis).matched_by(pattern)


def _collect(analysis: Analysis, texts: dict[str, None], depth: int) -> bool:
    """Add the texts of ``analysis`` to ``texts``; True when a shell string was nested
    deeper than :data:`MAX_INNER_DEPTH` and not looked into."""
    texts[" ".join(analysis.command.split())] = None
    if isinstance(analysis, Understood):
        commands = analysis.commands
    else:
        commands = analysis.seen
        for segment in _RAW_SPLIT.split(analysis.command):
            words = segment.split()
            # Each word may start the command (`coproc rm x`, `! rm x`, a wrapper's).
            for start in range(min(len(words), MAX_WRAPPED_WORDS)):
                texts[" ".join(words[start:])] = None
    too_deep = False
    for command in commands:
        too_deep |= _command_texts(command, texts, depth)
    return too_deep


def _command_texts(command: SimpleCommand, texts: dict[str, None], depth: int) -> bool:
    argv = command.argv
    if not argv:
        return False
    if command.assignments:
        texts[" ".join((*command.assignments, render(argv)))] = None
    _variants(argv, texts)
    for inner in wrapped(argv):
        _variants(inner, texts)
    scripts = inner_scripts(command)
    if depth >= MAX_INNER_DEPTH:
        return next(scripts, None) is not None
    too_deep = False
    for script in scripts:
        too_deep |= _collect(analyze(script), texts, depth + 1)
    return too_deep


def _variants(argv: Sequence[str], texts: dict[str, None]) -> None:
    if not argv:
        return
    texts[render(argv)] = None
    texts[" ".join(" ".join(argv).split())] = None
    base = os.path.basename(argv[0])
    if base and base != argv[0]:
        texts[render((base, *argv[1:]))] = None


def suggest_rule(analysis: Analysis, tool_name: str = "Bash") -> str | None:
    """The rule "don't ask again" would add for a line: ``Bash(git commit:*)`` from the
    first command's first word (and its second when it looks like a subcommand).

    None when the line is not understood, starts with assignments, or has no command:
    no rule can allow it, so none is offered.
    """
    if not isinstance(analysis, Understood) or not analysis.commands:
        return None
    first = analysis.commands[0]
    if first.assignments or not first.argv:
        return None
    words = list(first.argv[:1])
    if len(first.argv) > 1 and re.fullmatch(r"[A-Za-z][\w.:-]*", first.argv[1]):
        words.append(first.argv[1])
    prefix = render(words)
    if "*" in prefix:
        return None
    return f"{tool_name}({prefix}:*)"


__all__ = [
    "MAX_INNER_DEPTH",
    "LineTexts",
    "allows",
    "deny_matches",
    "line_texts",
    "pattern_matches",
    "suggest_rule",
]
