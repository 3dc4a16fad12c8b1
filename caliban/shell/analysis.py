"""Analysing a Bash line: :func:`analyze` parses it with tree-sitter's bash grammar and
walks the tree strictly (:mod:`caliban.shell.walk`), giving :class:`Understood` — every simple
command as bash would run it — or :class:`NotUnderstood` with a reason and, for deny and ask
rules, the commands a lenient walk could still see."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING

from caliban.shell.values import Analysis, NotUnderstood, Redirect, SimpleCommand, Understood
from caliban.shell.walk import WORD_NODES, Walker, node_text
from caliban.shell.words import Unclear, lex_word, snippet

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_COMMAND_CHARS = 100_000
"""Longer command lines are not parsed at all (see
:attr:`~caliban.shell.values.NotUnderstood.unchecked`)."""
MAX_NODES = 50_000
"""Syntax-tree size above which a line is not understood (bounds the walk's time)."""


@functools.cache
def _parser() -> Parser:
    # Imported here, not at module level: tree-sitter loads only when a Bash command is
    # checked, never at CLI start-up.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def analyze(command: str) -> Analysis:
    """Analyse one Bash command line (see the package docstring). Pure; a call binds its
    line once (:class:`~caliban.calls.effects.Effects`), so nothing here is cached."""
    if len(command) > MAX_COMMAND_CHARS:
        return NotUnderstood(
            command=command,
            reason=f"it is longer than {MAX_COMMAND_CHARS:,} characters",
            unchecked=True,
        )
    try:
        data = command.encode("utf-8")
    except UnicodeEncodeError:
        return NotUnderstood(command=command, reason="it is not valid text", unchecked=True)
    tree = _parser().parse(data)
    root = tree.root_node
    reason = _character_problem(command)
    if reason is None and root.descendant_count > MAX_NODES:
        reason = "it is too large to analyse"
    if reason is None and root.has_error:
        reason = f"it does not parse as bash ({_first_error(root, data)})"
    if reason is None:
        try:
            walker = Walker(data)
            flow = walker.program(root)
            return Understood(command=command, commands=walker.result(flow), flow=flow)
        except Unclear as exc:
            reason = str(exc)
        except RecursionError:  # pragma: no cover - MAX_DEPTH stops the walk first
            reason = "it is nested too deeply"
        except (ValueError, IndexError, KeyError, UnicodeDecodeError) as exc:
            # A case the walk did not foresee: refusing is the safe answer.
            reason = f"an unexpected shape ({type(exc).__name__}: {exc})"
    # A line the grammar cannot parse may still be bash (`{rm,-rf,x}` is): what it runs
    # cannot be read at all, so every deny and ask rule matches it.
    return NotUnderstood(
        command=command,
        reason=reason,
        seen=tuple(_lenient(root, data)),
        unchecked=root.has_error,
    )


_CHAR_NAMES = {"\0": "NUL byte", "\r": "carriage return", "\x1b": "escape"}


def _character_problem(command: str) -> str | None:
    """Characters that bash and the grammar may read differently, or that would show
    differently to the user than they run (carriage returns, bidi controls)."""
    for char in command:
        if char in "\t\n" or " " <= char <= "~":
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"):
            name = _CHAR_NAMES.get(char) or unicodedata.name(char, "control character").lower()
            return f"it contains U+{ord(char):04X} ({name})"
    return None


def _first_error(root: Node, data: bytes) -> str:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            return f"missing {node.type!r}"
        if node.type == "ERROR":
            return f"near {snippet(node_text(data, node))!r}"
        if node.has_error:
            stack.extend(reversed(node.children))
    return "syntax error"  # pragma: no cover - has_error implies one of the above


def _lenient(root: Node, data: bytes) -> Iterator[SimpleCommand]:
    """Every command node anywhere in the tree, words resolved where possible and kept as
    written otherwise. For deny and ask rules only."""
    stack: list[tuple[Node, Node | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        if node.type == "command":
            yield _lenient_command(node, parent, data)
        # Node.parent walks down from the root each time: carry it instead.
        stack.extend((child, node) for child in reversed(node.children))


def _lenient_word(node: Node, data: bytes) -> tuple[str, bool]:
    """A word resolved where possible, else as written; and whether bash expands it into
    something the analysis cannot read."""
    text = node_text(data, node)
    try:
        word = lex_word(text)
    except Unclear:
        return text, True
    return word.value, word.expands


def _lenient_command(node: Node, parent: Node | None, data: bytes) -> SimpleCommand:
    argv: list[str] = []
    opaque: list[bool] = []
    assignments: list[str] = []
    redirects: list[Redirect] = []

    def add(word: Node) -> None:
        value, expands = _lenient_word(word, data)
        argv.append(value)
        opaque.append(expands)

    for child in node.children:
        if child.type == "command_name" and child.named_children:
            add(child.named_children[0])
        elif child.type == "variable_assignment":
            assignments.append(node_text(data, child))
        elif child.is_named and child.type in WORD_NODES:
            add(child)
    siblings = (
        parent.children if parent is not None and parent.type == "redirected_statement" else []
    )
    for sibling in (*node.children, *siblings):
        words = [c for c in sibling.named_children if c.type in WORD_NODES]
        if sibling.type == "file_redirect":
            # The grammar files words after a redirection's target under it: `>f rm -rf /`.
            for word in words[1:]:
                add(word)
        elif sibling.type == "herestring_redirect" and words:
            body, _ = _lenient_word(words[0], data)
            redirects.append(Redirect(operator="<<<", fd=None, target="", kind="input", body=body))
        elif sibling.type == "heredoc_redirect":
            for part in sibling.named_children:
                if part.type == "heredoc_body":
                    body = node_text(data, part)
                    redirects.append(
                        Redirect(operator="<<", fd=None, target="", kind="input", body=body)
                    )
    return SimpleCommand(
        argv=tuple(argv),
        assignments=tuple(assignments),
        redirects=tuple(redirects),
        opaque_from=opaque.index(True) if True in opaque else None,
    )


__all__ = ["MAX_COMMAND_CHARS", "MAX_NODES", "analyze"]
