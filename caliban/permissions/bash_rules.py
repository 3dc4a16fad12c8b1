"""Bash permission rules matched against an analysed command line (:mod:`caliban.shell`),
never against its text alone.

- An allow rule covers one simple command of an understood line (:func:`allows`); the
  policy requires every simple command of the line to be covered.
- A deny or ask rule matches any part of the line, understood or not: the whole text, each
  simple command, what wrappers and ``find -exec`` run, and the strings ``bash -c`` or
  ``eval`` run (:func:`deny_matches`). Over-matching a deny rule is the safe mistake.
- :func:`suggest_rules` proposes the rules "don't ask again" adds.

Patterns are Claude Code's: ``*`` matches anything, ``prefix:*`` a command and its
arguments, everything else is literal (:func:`pattern_matches`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from caliban.shell import Analysis, NotUnderstood, SimpleCommand, Understood, analyze, render
from caliban.shell.commands import MAX_WRAPPED_WORDS, SHELLS, inner_scripts, wrapped

MAX_INNER_DEPTH = 3
"""How many levels of ``bash -c '…'`` / ``eval`` deny and ask rules look into."""

_EXPANDING = re.compile(r"[*?\[{$`\"'\\~\s]")
"""Where the words bash may make of a word start to be unknown (an expansion, a quote)."""
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


def _could_match(pattern: str, start: str) -> bool:
    """Whether some text starting with ``start`` matches ``pattern`` (whitespace normalised)."""
    if pattern.endswith(":*"):
        prefix = pattern[:-2] + " "
        return prefix.startswith(start) or start.startswith(prefix)
    first, star, _ = pattern.partition("*")
    return first.startswith(start) or (bool(star) and start.startswith(first))


@dataclass(frozen=True, slots=True)
class LineTexts:
    """Every text of a line that deny and ask patterns are tried on: the whole line, each
    simple command, what wrappers run, ``bash -c``/``eval`` strings (see
    :func:`deny_matches`). Collected once per line, whatever the number of rules."""

    texts: tuple[str, ...]
    starts: tuple[str, ...] = ()
    """How commands start before a word bash expands into words the analysis cannot read
    (:attr:`~caliban.shell.SimpleCommand.opaque_from`): ``r?`` starts ``r``, ``rm {-rf,x}``
    starts ``rm ``. A pattern that any continuation could match matches."""
    unreadable: bool = False
    """The line was too long to parse, or nests shells deeper than caliban looks: every
    pattern matches it (over-matching a deny rule is the safe mistake)."""

    def matched_by(self, pattern: str) -> bool:
        """Whether a deny (or ask) rule's pattern covers any part of the line."""
        if self.unreadable:
            return True
        normal = " ".join(pattern.split())
        return any(_matches(normal, text) for text in self.texts) or any(
            _could_match(normal, start) for start in self.starts
        )


def line_texts(analysis: Analysis) -> LineTexts:
    """What deny and ask patterns are tried on for ``analysis``, understood or not."""
    if isinstance(analysis, NotUnderstood) and analysis.unchecked:
        return LineTexts(texts=(), unreadable=True)
    texts: dict[str, None] = {}
    starts: dict[str, None] = {}
    too_deep = _collect(analysis, _Found(texts, starts), 0)
    return LineTexts(texts=tuple(texts), starts=tuple(starts), unreadable=too_deep)


def deny_matches(pattern: str, analysis: Analysis) -> bool:
    """Whether a deny (or ask) rule's pattern covers any part of the line: the whole
    text, any simple command, what wrappers run, ``bash -c``/``eval`` strings — also in
    lines that are not understood. Over-matching is the safe mistake here."""
    return line_texts(analysis).matched_by(pattern)


@dataclass(frozen=True, slots=True)
class _Found:
    """What :func:`line_texts` collects (dicts: ordered sets)."""

    texts: dict[str, None]
    starts: dict[str, None]


def _collect(analysis: Analysis, found: _Found, depth: int) -> bool:
    """Add the texts of ``analysis`` to ``found``; True when a shell string was nested
    deeper than :data:`MAX_INNER_DEPTH` and not looked into."""
    texts = found.texts
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
        too_deep |= _command_texts(command, found, depth)
    return too_deep


def _command_texts(command: SimpleCommand, found: _Found, depth: int) -> bool:
    argv = command.argv
    if not argv:
        return False
    texts = found.texts
    if command.assignments:
        texts[" ".join((*command.assignments, render(argv)))] = None
    opaque = argv[command.opaque_from] if command.opaque_from is not None else None
    _variants(argv, found, opaque)
    for inner in wrapped(argv):
        _variants(inner, found, opaque)
    scripts = inner_scripts(command)
    if depth >= MAX_INNER_DEPTH:
        return next(scripts, None) is not None
    too_deep = False
    for script in scripts:
        too_deep |= _collect(analyze(script), found, depth + 1)
    return too_deep


def _variants(argv: Sequence[str], found: _Found, opaque: str | None) -> None:
    """The texts of ``argv`` (and with its command's directory left out); and, when
    ``opaque`` (a word bash expands) is among its words, how they start before it."""
    if not argv:
        return
    texts = found.texts
    texts[render(argv)] = None
    texts[" ".join(" ".join(argv).split())] = None
    base = os.path.basename(argv[0])
    if base and base != argv[0]:
        texts[render((base, *argv[1:]))] = None
    if opaque is not None and opaque in argv:
        found.starts.update(dict.fromkeys(_starts(argv, opaque)))


def _starts(argv: Sequence[str], opaque: str) -> Iterator[str]:
    """How ``argv`` starts, whatever bash makes of the word ``opaque`` in it: the words
    before it, then its characters up to the first one bash may expand."""
    index = argv.index(opaque)
    if index == 0:
        yield _literal_start(opaque)
        yield _literal_start(os.path.basename(opaque))
        return
    for head in (argv[:index], (os.path.basename(argv[0]), *argv[1:index])):
        yield f"{render(head)} {_literal_start(opaque)}"


def _literal_start(word: str) -> str:
    match = _EXPANDING.search(word)
    return word[: match.start()] if match else word


DESTRUCTIVE_COMMANDS = frozenset(
    {
        "chattr", "chgrp", "chmod", "chown", "cp", "crontab", "dd", "fdisk", "halt",
        "install", "kill", "killall", "ln", "mkswap", "mv", "parted", "pkill", "poweroff",
        "reboot", "rm", "rmdir", "rsync", "sfdisk", "shred", "shutdown", "truncate",
        "unlink", "wipefs",
    }
)  # fmt: skip
"""Commands that delete, overwrite (``cp``/``mv`` onto any file) or stop something:
"don't ask again" offers the exact command, never ``rm:*`` (which would allow ``rm -rf ~``)."""
_INLINE_CODE = {
    "node": ("-e", "--eval", "-p", "--print"),
    "perl": ("-e", "-E"),
    "php": ("-r",),
    "python": ("-c",),
    "python3": ("-c",),
    "ruby": ("-e",),
}
"""Interpreters and the options that run the code in the next word."""
_GIT_DESTRUCTIVE = {
    "branch": ("-D", "--delete", "-d", "-M", "--force", "-f"),
    "checkout": ("--", ".", "-f", "--force"),
    "clean": (),
    "filter-branch": (),
    "gc": ("--prune",),
    "push": ("-f", "--force", "--force-with-lease", "--delete", "-d", "--mirror", "--prune"),
    "rebase": (),
    "reflog": ("expire", "delete"),
    "reset": ("--hard", "--merge", "--keep"),
    "restore": (),
    "stash": ("drop", "clear"),
    "update-ref": ("-d",),
}
"""git subcommands, and the words that make a use of them lose work (none: every use)."""


def _exact_only(argv: Sequence[str]) -> bool:
    """Whether a prefix rule for this command would allow more than the user can judge from
    the one call they see: a destructive command, a wrapper or shell running another
    command, inline code, a git command that discards work. Claude Code 2.1.197 offers the
    exact command for such lines too (``Bash(rm -rf x)``, ``Bash(sudo rm -rf /tmp/x)``,
    ``Bash(chmod -R 777 .)``; recorded in permission_updates/suggest_bash.json)."""
    name = os.path.basename(argv[0])
    arguments = argv[1:]
    if name in DESTRUCTIVE_COMMANDS or name.startswith("mkfs") or name in SHELLS:
        return True
    if next(wrapped(argv), None) is not None:  # sudo, env, xargs, timeout…
        return True
    if any(word in _INLINE_CODE.get(name, ()) for word in arguments):
        return True
    if name != "git" or not arguments:
        return False
    if arguments[0] not in _GIT_DESTRUCTIVE:
        return arguments[0].startswith("-")  # git -C dir …: the subcommand is not plain
    words = _GIT_DESTRUCTIVE[arguments[0]]
    # a listed word, a forced ref (+main), or a force flag (--force-if-includes, -fdx)
    return not words or any(
        word in words or word.startswith(("+", "--force", "-f")) for word in arguments[1:]
    )


MAX_SUGGESTED_RULES = 5
"""The most rules one "don't ask again" adds, as Claude Code 2.1.197 (the first five of a
line with more; the rest still ask)."""


def suggest_rules(
    analysis: Analysis,
    tool_name: str = "Bash",
    *,
    covered: Callable[[SimpleCommand], bool] = lambda command: False,
) -> tuple[str, ...]:
    """The rules "don't ask again" would add for a line: one per simple command that no
    allow rule ``covered`` yet, in order, as Claude Code 2.1.197 offers them for
    ``npm test && git push`` (``Bash(npm test:*)``, ``Bash(git push:*)``; each is
    :func:`command_rule`).

    Empty when the line is not understood or has no command, and when one command needing
    a rule can have none (an assignment, ``find -delete``, a ``*`` in an exact rule): no
    rule may name more than the user sees. At most :data:`MAX_SUGGESTED_RULES`, the first.
    """
    if not isinstance(analysis, Understood) or not analysis.commands:
        return ()
    found: list[str] = []
    for command in analysis.commands:
        if covered(command):
            continue
        rule = command_rule(command, tool_name)
        if rule is None:
            return ()
        if rule not in found:
            found.append(rule)
    return tuple(found[:MAX_SUGGESTED_RULES])


def command_rule(command: SimpleCommand, tool_name: str = "Bash") -> str | None:
    """The rule allowing one simple command: ``Bash(git commit:*)`` from its first word
    (and its second when it looks like a subcommand), or the command exactly
    (``Bash(rm -rf build)``) when a prefix would allow more than this call shows
    (:func:`_exact_only`).

    None when it starts with assignments or has no words (no rule can allow it), when the
    exact command could not be written as a rule that matches only itself (a ``*`` in it),
    and for ``find`` running or deleting files (as Claude Code, which offers nothing there).
    """
    if command.assignments or not command.argv:
        return None
    argv = command.argv
    if os.path.basename(argv[0]) == "find" and any(
        word == "-delete" or word.startswith(("-exec", "-ok", "-fprint", "-fls"))
        for word in argv[1:]
    ):
        return None
    if _exact_only(argv):
        exact = command.text
        if "*" in exact or "\n" in exact or not pattern_matches(exact, exact):
            return None
        return f"{tool_name}({exact})"
    words = list(argv[:1])
    if len(argv) > 1 and re.fullmatch(r"[A-Za-z][\w.:-]*", argv[1]):
        words.append(argv[1])
    prefix = render(words)
    if "*" in prefix:
        return None
    return f"{tool_name}({prefix}:*)"


__all__ = [
    "DESTRUCTIVE_COMMANDS",
    "MAX_INNER_DEPTH",
    "MAX_SUGGESTED_RULES",
    "LineTexts",
    "allows",
    "command_rule",
    "deny_matches",
    "line_texts",
    "pattern_matches",
    "suggest_rules",
]
