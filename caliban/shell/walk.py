"""The strict walk over tree-sitter's bash tree: every simple command of a line as bash
would run it, or :class:`~caliban.shell.words.Unclear` at the first thing it cannot vouch for.

tree-sitter's grammar is an approximation of bash, so its tree is not trusted blindly:

- the walk accepts only node kinds listed here; anything else is not understood;
- every word is re-read from the source with bash's quoting rules
  (:func:`~caliban.shell.words.lex_word`), and any expansion, or any disagreement about where
  the word ends, is not understood;
- every byte of the line must belong to a token the walk accepted, or be plain whitespace
  between tokens (this catches text the grammar silently skipped, e.g. ``\\ #``, which it
  reads as a comment while bash reads a word);
- heredoc bodies are checked against bash's own delimiter rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from caliban.shell.commands import check_command, check_test
from caliban.shell.effects import check_directories
from caliban.shell.values import (
    Apart,
    Both,
    Choice,
    Flow,
    Loop,
    Negated,
    Redirect,
    RedirectKind,
    Run,
    Series,
    SimpleCommand,
)
from caliban.shell.words import ASSIGNMENT, Unclear, Word, dollar, lex_word, snippet

if TYPE_CHECKING:
    from tree_sitter import Node

MAX_DEPTH = 64
"""Nesting (subshells, groups, lists, ``if``…) beyond which a line is not understood."""

WORD_NODES = frozenset(
    {"word", "string", "raw_string", "ansi_c_string", "concatenation", "number",
     "translated_string", "simple_expansion", "expansion", "command_substitution",
     "process_substitution", "arithmetic_expansion", "brace_expression"}
)  # fmt: skip
"""Node kinds that stand for one word (which may hold an expansion)."""
# Node kinds the walk refuses, with the reason given to the user.
_REFUSED = {
    "function_definition": "a function definition",
    "for_statement": "a `for` or `select` loop (it assigns a variable)",
    "c_style_for_statement": "a C-style `for` loop",
    "case_statement": "a `case` statement",
    "declaration_command": "`export`/`declare`/`local`/`readonly`/`typeset` (it assigns "
    "variables later commands may use)",
    "unset_command": "`unset` (it changes variables later commands may use)",
    "test_command": "a `[[ … ]]` or `(( … ))` test (its arithmetic can run commands)",
    "arithmetic_expansion": "an arithmetic command `(( … ))`",
}


def node_text(data: bytes, node: Node) -> str:
    """The source text of ``node``."""
    return data[node.start_byte : node.end_byte].decode("utf-8")


_AtomKind = Literal["word", "op", "comment", "body"]
# Anonymous tokens each statement-list node may contain (keywords and separators).
_LIST_TOKENS = {
    "program": frozenset({";", "&", "\n"}),
    "subshell": frozenset({"(", ")", ";", "&", "\n"}),
    "compound_statement": frozenset({"{", "}", ";", "&", "\n"}),
    "do_group": frozenset({"do", "done", ";", "&", "\n"}),
    "if_statement": frozenset({"if", "then", "fi", ";", "&", "\n"}),
    "elif_clause": frozenset({"elif", "then", ";", "&", "\n"}),
    "else_clause": frozenset({"else", ";", "&", "\n"}),
    "while_statement": frozenset({"while", "until", ";", "&", "\n"}),
}
_MOVING_VARIABLES = frozenset({"HOME", "CDPATH"})
"""Variables that decide where ``cd`` and ``~`` lead: a line assigning them is not understood."""
_CLAUSES = frozenset({"elif_clause", "else_clause", "do_group"})
_JOINERS = frozenset({"&&", "||", "|", "|&"})
_CHAINS = frozenset({"list", "pipeline", "negated_command"})
"""Node kinds of an and-or list of pipelines, which :meth:`Walker.compound` reads flat."""
_FILE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<", ">&", "<&", ">&-", "<&-"})


@dataclass(frozen=True, kw_only=True, slots=True)
class _Tail:
    redirects: tuple[Redirect, ...] = ()
    words: tuple[Word, ...] = ()


_NO_TAIL = _Tail()


@dataclass(kw_only=True, slots=True)
class _Pending:
    """A simple command being built (the walk's only mutable record)."""

    argv: list[Word] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    separator: str = ""
    start: int = 0
    end: int = 0


class Walker:
    """The strict walk: whitelisted node kinds only; records every token it accepts."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.atoms: list[tuple[int, int, _AtomKind]] = []
        self.pending: list[_Pending] = []

    # -- entry and exit

    def program(self, root: Node) -> Flow:
        """Walk the whole line; how its simple commands run (:meth:`result` lists them)."""
        flow = self.statements(root, (), 0)
        self.check_coverage()
        return flow

    def result(self, flow: Flow) -> tuple[SimpleCommand, ...]:
        commands: list[SimpleCommand] = []
        for index, item in enumerate(self.pending):
            separator = item.separator
            if not separator and index + 1 < len(self.pending):
                between = self.data[item.end : self.pending[index + 1].start]
                separator = "\n" if b"\n" in between else ";"
            commands.append(
                SimpleCommand(
                    argv=tuple(word.value for word in item.argv),
                    assignments=tuple(item.assignments),
                    redirects=tuple(item.redirects),
                    separator=separator,
                    opaque_from=next(
                        (index for index, word in enumerate(item.argv) if word.expands), None
                    ),
                )
            )
        check_directories(commands, flow)
        return tuple(commands)

    # -- helpers

    def text(self, node: Node) -> str:
        return node_text(self.data, node)

    def atom(self, node: Node, kind: _AtomKind) -> None:
        self.atoms.append((node.start_byte, node.end_byte, kind))

    def word(self, node: Node) -> Word:
        if node.type not in WORD_NODES:
            raise Unclear(f"unexpected {node.type.replace('_', ' ')} ({self.snip(node)!r})")
        self.atom(node, "word")
        return lex_word(self.text(node))

    def snip(self, node: Node) -> str:
        return snippet(self.text(node))

    def descriptor(self, node: Node) -> int:
        text = self.text(node)
        if not text.isascii() or not text.isdigit():
            raise Unclear(f"a descriptor bash reads differently ({text!r})")
        self.atom(node, "word")
        return int(text)

    def comment(self, node: Node) -> None:
        self.atom(node, "comment")

    def separate(self, token: str) -> None:
        if self.pending:
            self.pending[-1].separator = token

    def same_line(self, start: int, end: int) -> None:
        """Bash ends a command at a newline; the grammar sometimes reads on."""
        gap = self.data[start:end]
        if b"\n" in gap and b"\n" in gap.replace(b"\\\n", b""):
            raise Unclear("a command the parser continues past the end of its line")

    # -- statements

    def statements(self, node: Node, group: tuple[Redirect, ...], depth: int) -> Flow:
        """A list of statements (a program, a group, a clause), or an ``if`` or a loop,
        whose parts the keywords separate."""
        allowed = _LIST_TOKENS[node.type]
        segments: list[list[Flow]] = [[]]
        until = False
        for child in node.children:
            if child.type == "comment":
                self.comment(child)
            elif not child.is_named:
                if child.type == "((":
                    raise Unclear(f"an arithmetic command `(( … ))` ({self.snip(node)!r})")
                if child.type not in allowed:
                    raise Unclear(f"{child.type!r} where bash does not allow it")
                self.atom(child, "op")
                if child.type in (";", "&", "\n"):
                    self.separate(child.type)
                    if child.type == "&" and segments[-1]:  # a background job
                        segments[-1][-1] = Apart(segments[-1][-1])
                else:  # a keyword: the next part starts
                    segments.append([])
                    until = until or child.type == "until"
            elif child.type in _CLAUSES:
                segments.append([self.statements(child, group, depth + 1)])
            else:
                segments[-1].append(self.statement(child, group, depth + 1))
        return _shape(node.type, [Series(tuple(parts)) for parts in segments if parts], until)

    def statement(
        self, node: Node, group: tuple[Redirect, ...], depth: int, tail: _Tail = _NO_TAIL
    ) -> Flow:
        """One statement. ``tail`` holds redirections (and stray words) the grammar hung on
        an enclosing list or pipeline; bash binds them to its last command."""
        if depth > MAX_DEPTH:
            raise Unclear(f"it is nested more than {MAX_DEPTH} levels deep")
        kind = node.type
        if kind == "command":
            return self.command(node, group, tail)
        if kind in _CHAINS or (kind == "redirected_statement" and _is_chain(node)):
            return self.compound(node, group, depth, tail)
        if kind == "redirected_statement":
            return self.redirected(node, group, depth, tail)
        if tail.words:
            raise Unclear(f"words after a redirection ({self.snip(node)!r})")
        if tail.redirects:
            return self.statement(node, (*group, *tail.redirects), depth)
        if kind in _LIST_TOKENS:
            return self.statements(node, group, depth + 1)
        if kind in ("variable_assignment", "variable_assignments"):
            children = [node] if kind == "variable_assignment" else node.named_children
            pending = _Pending(start=node.start_byte, end=node.end_byte)
            for child in children:
                if child.type == "comment":
                    self.comment(child)
                else:
                    pending.assignments.append(self.assignment(child))
            pending.redirects.extend(group)
            return self.add(pending)
        if kind == "test_command":
            return self.test_command(node, group)
        reason = _REFUSED.get(kind, kind.replace("_", " "))
        raise Unclear(f"{reason} ({self.snip(node)!r})")

    def compound(self, node: Node, group: tuple[Redirect, ...], depth: int, tail: _Tail) -> Flow:
        """An and-or list of pipelines: ``a && b | c``, ``! a || b``. The grammar nests these
        its own way (``a && b >f | c`` as ``(a && b >f) | c``) while bash reads them flat,
        pipelines binding tighter than ``&&`` and ``||``: the flow is rebuilt from the
        operators in the order they come."""
        items: list[Flow | str] = []
        self.chain(node, group, depth, tail, items)
        return _and_or(items, self.snip(node))

    def chain(
        self,
        node: Node,
        group: tuple[Redirect, ...],
        depth: int,
        tail: _Tail,
        items: list[Flow | str],
    ) -> None:
        """Add ``node``'s statements and operators to ``items``, in order."""
        if depth > MAX_DEPTH:
            raise Unclear(f"it is nested more than {MAX_DEPTH} levels deep")
        kind = node.type
        if kind == "redirected_statement" and _is_chain(node):
            body, tail = self.redirections(node, tail)
            assert body is not None  # _is_chain
            self.chain(body, group, depth + 1, tail, items)
            return
        if kind not in _CHAINS:
            items.append(self.statement(node, group, depth + 1, tail))
            return
        last = node.named_children[-1] if node.named_children else None
        for child in node.children:
            if child.type == "comment":
                self.comment(child)
            elif not child.is_named:
                if child.type not in (*_JOINERS, "!") or (child.type == "!") != (
                    kind == "negated_command"
                ):
                    raise Unclear(f"{child.type!r} where bash does not allow it")
                self.atom(child, "op")
                if child.type != "!":
                    self.separate(child.type)
                items.append(child.type)
            else:
                inner = tail if last is not None and child.id == last.id else _NO_TAIL
                self.chain(child, group, depth + 1, inner, items)

    def add(self, pending: _Pending) -> Run:
        """Record a simple command; its place in the line's flow."""
        self.pending.append(pending)
        return Run(len(self.pending) - 1)

    def redirected(self, node: Node, group: tuple[Redirect, ...], depth: int, tail: _Tail) -> Flow:
        body, tail = self.redirections(node, tail)
        if body is None:
            if tail.words:
                raise Unclear(f"words after a redirection ({self.snip(node)!r})")
            # `> file` alone: truncates (creates) the file and runs nothing.
            pending = _Pending(start=node.start_byte, end=node.end_byte)
            pending.redirects.extend([*tail.redirects, *group])
            return self.add(pending)
        return self.statement(body, group, depth + 1, tail)

    def redirections(self, node: Node, tail: _Tail) -> tuple[Node | None, _Tail]:
        """A redirected statement's body, and its redirections added to ``tail``."""
        body = node.child_by_field_name("body")
        redirects: list[Redirect] = []
        words: list[Word] = []
        previous = body.end_byte if body is not None else None
        for child in node.children:
            if body is not None and child.id == body.id:
                continue
            if previous is not None:
                self.same_line(previous, child.start_byte)
            if child.type == "comment":
                self.comment(child)
                continue
            found, extra = self.redirect(child)
            redirects.extend(found)
            words.extend(extra)
            previous = child.end_byte if child.type != "heredoc_redirect" else None
        return body, _Tail(redirects=(*redirects, *tail.redirects), words=(*words, *tail.words))

    def command(self, node: Node, group: tuple[Redirect, ...], tail: _Tail) -> Run:
        pending = _Pending(start=node.start_byte, end=node.end_byte)
        previous: int | None = None
        for child in node.children:
            if previous is not None:
                self.same_line(previous, child.start_byte)
            previous = child.end_byte
            kind = child.type
            if kind == "comment":
                self.comment(child)
            elif kind == "variable_assignment":
                if pending.argv:
                    raise Unclear(f"an assignment after the command name ({self.snip(child)!r})")
                pending.assignments.append(self.assignment(child))
            elif kind == "command_name":
                if len(child.children) != 1:
                    raise Unclear(f"an unusual command name ({self.snip(child)!r})")
                pending.argv.append(self.word(child.children[0]))
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                found, extra = self.redirect(child)
                if extra:
                    raise Unclear(f"words after a redirection ({self.snip(child)!r})")
                pending.redirects.extend(found)
                if kind == "heredoc_redirect":
                    previous = None
            elif child.is_named and kind in WORD_NODES:
                if not pending.argv:
                    raise Unclear(f"an argument before the command name ({self.snip(child)!r})")
                pending.argv.append(self.word(child))
            elif kind == "$":  # the grammar splits `$"…"` into `$` and a string
                rest = self.data[child.start_byte : node.end_byte].decode("utf-8")
                raise Unclear(dollar(rest, 0))
            else:
                raise Unclear(f"{kind!r} in a command ({self.snip(node)!r})")
        pending.argv.extend(tail.words)
        pending.redirects.extend((*tail.redirects, *group))
        check_command(pending.argv)
        return self.add(pending)

    def assignment(self, node: Node) -> str:
        if node.type != "variable_assignment":
            raise Unclear(f"unexpected {node.type.replace('_', ' ')} ({self.snip(node)!r})")
        text = self.text(node)
        match = ASSIGNMENT.match(text)
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is not None and name.type == "subscript":
            raise Unclear(f"an array assignment ({snippet(text)!r})")
        if match is None or name is None or name.type != "variable_name":
            raise Unclear(f"an assignment the parser and bash read differently ({text!r})")
        if value is not None and value.type == "array":
            raise Unclear(f"an array assignment ({snippet(text)!r})")
        if (variable := self.text(name)) in _MOVING_VARIABLES:
            raise Unclear(f"an assignment to {variable} (it changes where `cd` and ~ lead)")
        self.atom(node, "word")
        rest = text[match.end() :]
        return match.group() + (lex_word(rest).value if rest else "")

    def redirect(self, node: Node) -> tuple[list[Redirect], list[Word]]:
        """A redirection node → its redirects (a heredoc may carry more) and any words the
        grammar put after its target (``>f status`` → the word ``status``)."""
        kind = node.type
        if kind == "heredoc_redirect":
            return self.heredoc(node), []
        if kind not in ("file_redirect", "herestring_redirect"):
            raise Unclear(f"unexpected {kind.replace('_', ' ')} ({self.snip(node)!r})")
        fd: int | None = None
        fd_end = -1
        operator = ""
        words: list[Word] = []
        for child in node.children:
            if child.type == "file_descriptor" and fd is None and not operator:
                fd, fd_end = self.descriptor(child), child.end_byte
            elif child.type == "comment":
                self.comment(child)
            elif not child.is_named:
                if operator or child.type not in (*_FILE_OPS, "<<<"):
                    raise Unclear(f"{child.type!r} in a redirection ({self.snip(node)!r})")
                if fd is not None and child.start_byte != fd_end:
                    raise Unclear(f"a descriptor apart from its operator ({self.snip(node)!r})")
                self.atom(child, "op")
                operator = child.type
            else:
                if operator and not words:
                    self.same_line(self.atoms[-1][1], child.start_byte)
                words.append(self.word(child))
        if operator in (">&-", "<&-"):
            return [Redirect(operator=operator, fd=fd, target="", kind="dup")], words
        if not words:
            raise Unclear(f"a redirection without a target ({self.snip(node)!r})")
        target, *extra = words
        if operator == "<<<":
            return [Redirect(operator="<<<", fd=fd, target="", kind="input", body=target.value)], (
                extra
            )
        return [_file_redirect(operator, fd, target, self.snip(node))], extra

    def heredoc(self, node: Node) -> list[Redirect]:
        fd: int | None = None
        operator = ""
        delimiter: Word | None = None
        body: Node | None = None
        end: Node | None = None
        more: list[Redirect] = []
        for child in node.children:
            kind = child.type
            if kind == "file_descriptor" and fd is None and not operator:
                fd = self.descriptor(child)
            elif kind in ("<<", "<<-") and not operator:
                self.atom(child, "op")
                operator = kind
            elif kind == "heredoc_start" and operator and delimiter is None:
                self.atom(child, "word")
                delimiter = lex_word(self.text(child))
            elif kind == "file_redirect" and delimiter is not None and body is None:
                found, extra = self.redirect(child)
                if extra:
                    raise Unclear(f"words after a redirection ({self.snip(child)!r})")
                more.extend(found)
            elif kind == "heredoc_body" and delimiter is not None and body is None:
                body = child
            elif kind == "heredoc_end" and body is not None and end is None:
                end = child
            elif kind == "comment":
                self.comment(child)
            else:
                raise Unclear(f"a heredoc followed by {kind!r} on its line ({self.snip(node)!r})")
        if delimiter is None or body is None or end is None:
            raise Unclear(f"an incomplete heredoc ({self.snip(node)!r})")
        start_end = next(stop for _, stop, kind in reversed(self.atoms) if kind == "word")
        if self.data[start_end : body.start_byte].replace(b"\\\n", b"").count(b"\n") != 1:
            raise Unclear("a heredoc whose body starts elsewhere (one heredoc per line)")
        text = self.heredoc_body(operator, delimiter, body, end)
        heredoc = Redirect(operator=operator, fd=fd, target="", kind="input", body=text)
        return [heredoc, *more]

    def heredoc_body(self, operator: str, delimiter: Word, body: Node, end: Node) -> str:
        """Check a heredoc against bash's rule (it ends at the first line that is exactly
        the delimiter, after leading tabs for ``<<-``) and return its text."""
        data = self.data
        word = delimiter.value
        if not word or "\n" in word or (delimiter.glob and not delimiter.quoted):
            raise Unclear(f"a heredoc delimiter bash reads differently ({word!r})")
        strip = operator == "<<-"
        begin = data.rfind(b"\n", 0, body.start_byte) + 1
        end_line = data.rfind(b"\n", 0, end.start_byte) + 1
        lead = data[begin : body.start_byte]
        end_lead = data[end_line : end.start_byte]
        after = data[end.end_byte : end.end_byte + 1]
        if (
            begin == 0
            or end_line < begin
            or lead.strip(b"\t" if strip else b"")
            or end_lead.strip(b"\t" if strip else b"")
            or self.text(end) != word
            or after not in (b"", b"\n")
        ):
            raise Unclear("a heredoc whose end bash finds elsewhere")
        text = data[begin:end_line].decode("utf-8")
        for line in text.split("\n")[:-1]:
            if (line.lstrip("\t") if strip else line) == word:
                raise Unclear("a heredoc whose end bash finds elsewhere")
        if not delimiter.quoted and any(char in text for char in "$`\\"):
            raise Unclear(
                "a heredoc with an unquoted delimiter whose body expands `$`, `` ` `` or `\\` "
                f"(quote the delimiter: <<'{word}')"
            )
        self.atoms.append((begin, end.end_byte, "body"))
        if strip:
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        return text

    def test_command(self, node: Node, group: tuple[Redirect, ...]) -> Run:
        children = node.children
        if not children or children[0].type != "[" or children[-1].type != "]":
            raise Unclear(f"{_REFUSED['test_command']} ({self.snip(node)!r})")
        # Re-read `[ … ]` as bash does: tokens with no space between them are one word.
        spans: list[tuple[int, int]] = []
        stack = list(reversed(children))
        while stack:
            child = stack.pop()
            if child.type in WORD_NODES or not child.is_named or child.type == "test_operator":
                spans.append((child.start_byte, child.end_byte))
            elif child.type in ("unary_expression", "binary_expression"):
                stack.extend(reversed(child.children))
            else:
                raise Unclear(f"{child.type.replace('_', ' ')} in a test ({self.snip(node)!r})")
        words: list[tuple[int, int]] = []
        for start, stop in spans:
            if words and words[-1][1] == start:
                words[-1] = (words[-1][0], stop)
            else:
                words.append((start, stop))
        pending = _Pending(start=node.start_byte, end=node.end_byte)
        for index, (start, stop) in enumerate(words):
            if index:
                self.same_line(words[index - 1][1], start)
            self.atoms.append((start, stop, "word"))
            pending.argv.append(lex_word(self.data[start:stop].decode("utf-8")))
        check_test([word.value for word in pending.argv])
        pending.redirects.extend(group)
        return self.add(pending)

    # -- every byte accounted for

    def check_coverage(self) -> None:
        """Everything between accepted tokens must be plain whitespace, and two words must
        not touch (bash would read them as one)."""
        data = self.data
        position = 0
        previous: _AtomKind | None = None
        for start, stop, kind in sorted(self.atoms):
            if start < position:
                raise Unclear("tokens the parser read twice")
            _check_gap(data[position:start], previous, kind)
            position, previous = stop, kind
        _check_gap(data[position:], previous, None)


def _is_chain(node: Node) -> bool:
    """A redirected statement whose body is an and-or list or a pipeline: the grammar hangs
    the redirections of its last command there."""
    body = node.child_by_field_name("body")
    return body is not None and body.type in _CHAINS


def _and_or(items: list[Flow | str], shown: str) -> Flow:
    """The flow of ``[! ] stage | stage … && [! ] stage …`` read as bash reads it: pipelines
    (each stage in a child shell, no ``lastpipe``) joined left to right by ``&&``/``||``."""
    pipelines: list[Flow] = []
    operators: list[str] = []
    stages: list[Flow] = []
    negated = False
    expecting = True  # a stage must come next
    for item in items:
        if item == "!" and expecting and not stages and not negated:
            negated = True
        elif item in ("|", "|&", "&&", "||") and not expecting:
            if item in ("&&", "||"):
                pipelines.append(_pipeline(stages, negated))
                operators.append(item)
                stages, negated = [], False
            expecting = True
        elif isinstance(item, str) or not expecting:
            raise Unclear(f"an and-or list bash reads differently ({shown!r})")
        else:
            stages.append(item)
            expecting = False
    if expecting:
        raise Unclear(f"an and-or list bash reads differently ({shown!r})")
    pipelines.append(_pipeline(stages, negated))
    flow = pipelines[0]
    for operator, pipeline in zip(operators, pipelines[1:], strict=True):
        flow = Both(flow, "&&" if operator == "&&" else "||", pipeline)
    return flow


def _pipeline(stages: list[Flow], negated: bool) -> Flow:
    flow = stages[0] if len(stages) == 1 else Series(tuple(Apart(stage) for stage in stages))
    return Negated(flow) if negated else flow


def _shape(kind: str, parts: list[Series], until: bool) -> Flow:
    """The flow of a statement list from its parts (the statements between keywords)."""
    if kind == "subshell":
        return Apart(_joined(parts))
    if kind in ("if_statement", "elif_clause"):
        condition, then, *rest = parts
        otherwise: Flow | None = None
        for part in reversed(rest):  # elif clauses, then an else clause
            [clause] = part.parts
            if isinstance(clause, Choice):
                otherwise = Choice(clause.condition, clause.then, otherwise)
            else:
                otherwise = clause
        return Choice(condition, then, otherwise)
    if kind == "while_statement":
        condition, body = parts
        return Loop(condition, body, until=until)
    return _joined(parts)


def _joined(parts: list[Series]) -> Series:
    return Series(tuple(flow for part in parts for flow in part.parts))


def _check_gap(gap: bytes, previous: _AtomKind | None, kind: _AtomKind | None) -> None:
    if gap == b" " and kind != "body":  # the usual gap, which the checks below all pass
        return
    if gap.strip(b" \t\n\\"):
        raise Unclear(f"text the parser skipped ({snippet(gap.decode('utf-8'))!r})")
    joined = gap.replace(b"\\\n", b"")
    if b"\\" in joined:
        raise Unclear("a backslash between words (bash reads it as part of a word)")
    if gap and not joined and previous is not None and kind is not None:
        raise Unclear("a line continuation that joins two words")
    if not joined and previous in ("word", "body") and kind in ("word", "comment", "body"):
        raise Unclear("two words the parser split that bash reads as one")
    if kind == "body" and not joined.endswith(b"\n"):
        raise Unclear("a heredoc whose body starts elsewhere")


def _file_redirect(operator: str, fd: int | None, target: Word, shown: str) -> Redirect:
    value = target.value
    if operator in (">&", "<&"):
        if target.raw == value and re.fullmatch(r"-|[0-9]+-?", value):
            return Redirect(operator=operator, fd=fd, target=value, kind="dup")
        # `>&file` is `&>file`, but bash reads `>& --` as `>&-` and a word `-`, and removes
        # quotes from a `>&'file'` name twice: only plain descriptors are understood.
        raise Unclear(f"a descriptor copy to something else than a descriptor ({shown!r})")
    if target.glob or target.brace or target.inner_tilde:
        raise Unclear(f"a redirection to a pattern bash would expand ({shown!r})")
    if value.startswith("~") and target.tilde and not (value == "~" or value.startswith("~/")):
        raise Unclear(f"a redirection to another user's home ({shown!r})")
    if not value:
        raise Unclear(f"a redirection to an empty name ({shown!r})")
    kind: RedirectKind = "read" if operator == "<" else "write"
    return Redirect(operator=operator, fd=fd, target=value, kind=kind, tilde=target.tilde)


__all__ = ["MAX_DEPTH", "WORD_NODES", "Walker", "node_text"]
