"""What a Bash command line does, as far as permission rules need to know — or why not.

:func:`analyze` parses a command line with tree-sitter's bash grammar and returns either
:class:`Understood` — every simple command as the argv bash would run (quotes removed,
escapes resolved), its leading assignments and its redirections — or :class:`NotUnderstood`
with a short reason. Rule matching sits on top (:func:`allows`, :func:`deny_matches`,
:func:`suggest_rule`), as do the files a line writes and reads (:func:`written_paths`,
:func:`read_paths`).

tree-sitter's grammar is an approximation of bash, so its tree is not trusted blindly:

- the walk accepts only node kinds listed here; anything else is not understood;
- every word is re-read from the source with bash's quoting rules (:func:`_lex_word`), and
  any expansion, or any disagreement about where the word ends, is not understood;
- every byte of the line must belong to a token the walk accepted, or be plain whitespace
  between tokens (this catches text the grammar silently skipped, e.g. ``\\ #``, which it
  reads as a comment while bash reads a word);
- heredoc bodies are checked against bash's own delimiter rule.

The cases that are not understood, and how wrappers (``env``, ``sudo``, ``bash -c``…) are
treated, are listed in ``docs/permissions.md`` (section "How Bash rules are matched").
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from caliban.util.fsutil import resolved

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_COMMAND_CHARS = 100_000
"""Longer command lines are not parsed at all (see :attr:`NotUnderstood.unchecked`)."""
MAX_NODES = 50_000
"""Syntax-tree size above which a line is not understood (bounds the walk's time)."""
MAX_DEPTH = 64
"""Nesting (subshells, groups, lists, ``if``…) beyond which a line is not understood."""
MAX_INNER_DEPTH = 3
"""How many levels of ``bash -c '…'`` / ``eval`` deny and ask rules look into."""
MAX_WRAPPED_WORDS = 32
"""Deny rules look for a wrapped command (``sudo … rm``) among this many leading words."""

RedirectKind = Literal["write", "read", "dup", "input"]

BENIGN_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
"""Write targets that change no file; :func:`written_paths` leaves them out."""

WRAPPERS = frozenset(
    {
        "builtin", "busybox", "caffeinate", "chroot", "chrt", "command", "doas", "env",
        "exec", "fakeroot", "firejail", "flock", "ionice", "ltrace", "nice", "nohup",
        "nsenter", "parallel", "pkexec", "proxychains", "proxychains4", "runuser", "setpriv",
        "setsid", "sg", "ssh", "stdbuf", "strace", "sudo", "systemd-run", "taskset", "time",
        "timeout", "torsocks", "unbuffer", "unshare", "watch", "xargs",
    }
)  # fmt: skip
"""Commands that run another command given in their arguments. Deny and ask rules look
through them; allow rules must match the whole command, wrapper included."""
SHELLS = frozenset(
    {
        "ash", "bash", "busybox", "csh", "dash", "fish", "ksh", "ksh93", "mksh", "posh",
        "powershell", "pwsh", "rbash", "sh", "tcsh", "yash", "zsh",
    }
)  # fmt: skip
"""Shells whose ``-c`` string (or heredoc/herestring on stdin) deny and ask rules look into."""
_RUNS_A_STRING = frozenset({"script", "sg", "ssh", "su", "runuser"})
"""Besides shells, commands whose arguments are a command line a shell runs."""
_APPENDS_ARGUMENTS = frozenset({"xargs"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})

# Reserved words that never name a command; seeing one as a command name means the grammar
# and bash disagree (e.g. ``time { rm x; }``).
_RESERVED = frozenset(
    {"!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi",
     "for", "function", "if", "in", "select", "then", "until", "while"}
)  # fmt: skip
# Builtins that run text as code, or change what later commands in the line mean.
_UNSAFE_BUILTINS = {
    "eval": "`eval` runs its arguments as a command",
    "exec": "`exec` replaces the shell (and `exec >file` redirects what follows)",
    "source": "`source` runs a script file",
    ".": "`.` runs a script file",
    "trap": "`trap` runs a string as a command later",
    "alias": "`alias` changes what later commands mean",
    "enable": "`enable` loads or switches off shell builtins",
    "hash": "`hash` changes where later commands are found",
    "shopt": "`shopt` changes how the shell parses and expands",
    "coproc": "`coproc` starts a coprocess",
    "fc": "`fc` re-runs commands from history",
    "bind": "`bind` can run commands",
    "complete": "`complete` can run commands",
    "compgen": "`compgen` can run commands",
}
_ASSIGNING_BUILTINS = frozenset(
    {"declare", "export", "getopts", "let", "local", "mapfile", "read", "readarray",
     "readonly", "typeset", "unset"}
)  # fmt: skip
_SAFE_SET_LETTERS = frozenset("euxv")
_SAFE_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "verbose", "xtrace"})
_CD = frozenset({"cd", "pushd", "popd"})

_META = frozenset(" \t\n|&;()<>")
_ANSI_C = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip
_HEX = frozenset("0123456789abcdefABCDEF")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_RAW_SPLIT = re.compile(r"\$\(|[<>]\(|[\n;&|(){}`]")
_WORD_NODES = frozenset(
    {"word", "string", "raw_string", "ansi_c_string", "concatenation", "number",
     "translated_string", "simple_expansion", "expansion", "command_substitution",
     "process_substitution", "arithmetic_expansion", "brace_expression"}
)  # fmt: skip
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


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True, slots=True)
class Redirect:
    """One redirection: ``2>>log`` is ``Redirect(operator=">>", fd=2, target="log")``."""

    operator: str
    """``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``<``, ``>&``, ``<&``, ``>&-``, ``<&-``,
    ``<<``, ``<<-`` or ``<<<``."""
    fd: int | None
    """The descriptor written before the operator (``2`` in ``2>``); None when implied."""
    target: str
    """The word after the operator, quotes removed: a path, a descriptor (``1`` in
    ``2>&1``), ``-`` (close), or ``""`` for ``>&-``, heredocs and herestrings."""
    kind: RedirectKind
    """``write`` (a file is created, truncated or appended to), ``read`` (a file is read),
    ``dup`` (descriptors are copied or closed: no file), ``input`` (heredoc or herestring:
    text on stdin, in :attr:`body`)."""
    tilde: bool = False
    """The target starts with an unquoted ``~``: bash puts the home directory there."""
    body: str | None = None
    """The text a heredoc or herestring feeds to stdin."""

    @property
    def benign(self) -> bool:
        """True when it touches no file: a descriptor copy, a heredoc, or ``/dev/null`` and
        friends."""
        return self.kind in ("dup", "input") or (not self.tilde and self.target in BENIGN_TARGETS)


@dataclass(frozen=True, kw_only=True, slots=True)
class SimpleCommand:
    """One simple command: what bash passes to ``execve`` (or runs as a builtin)."""

    argv: tuple[str, ...]
    """The words, quotes removed and escapes resolved: ``"git" 'status'`` is
    ``("git", "status")``. Empty for a line that only assigns or only redirects."""
    assignments: tuple[str, ...] = ()
    """Leading ``NAME=value`` assignments (quotes removed from the value)."""
    redirects: tuple[Redirect, ...] = ()
    """Its own redirections, then those of every group it is in (``{ a; } >f``)."""
    separator: str = ""
    """What follows it: ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, ``\\n``, or ``""`` at
    the end. Subshells and ``{ }`` groups are flattened, so this is approximate there."""
    text: str = field(init=False, repr=False, compare=False)
    """The argv as rules see it (:func:`render`): words joined by spaces, a word quoted
    only when it is empty or contains whitespace, quotes or backslashes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", render(self.argv))


@dataclass(frozen=True, kw_only=True, slots=True)
class Understood:
    """A command line analysed completely: every simple command it can run is here."""

    command: str
    commands: tuple[SimpleCommand, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class NotUnderstood:
    """A command line with something the analysis cannot resolve. Allow rules never
    match it; deny and ask rules still look at what could be seen."""

    command: str
    reason: str
    """A short noun phrase: ``command substitution `$(date)```."""
    seen: tuple[SimpleCommand, ...] = ()
    """Best-effort commands for deny and ask rules only: found anywhere in the tree
    (substitutions, functions, loops, around parse errors), unresolvable words kept as
    written (``$HOME``)."""
    unchecked: bool = False
    """True when the line was too long to parse at all: every Bash deny and ask rule
    then matches it (over-matching a deny rule is the safe mistake)."""


Analysis = Understood | NotUnderstood


class _Unclear(Exception):
    """Raised inside the strict walk; the message is the :attr:`NotUnderstood.reason`."""


# ---------------------------------------------------------------------------- analysis


@functools.cache
def _parser() -> Parser:
    # Imported here, not at module level: tree-sitter loads only when a Bash command is
    # checked, never at CLI start-up.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def analyze(command: str) -> Analysis:
    """Analyse one Bash command line (see the module docstring). Pure and cached."""
    return _analyze(command)


@functools.lru_cache(maxsize=64)  # decide() asks up to three times per call
def _analyze(command: str) -> Analysis:
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
            walker = _Walker(data)
            walker.program(root)
            return Understood(command=command, commands=walker.result())
        except _Unclear as exc:
            reason = str(exc)
        except RecursionError:  # pragma: no cover - MAX_DEPTH stops the walk first
            reason = "it is nested too deeply"
        except (ValueError, IndexError, KeyError, UnicodeDecodeError) as exc:
            # A case the walk did not foresee: refusing is the safe answer.
            reason = f"an unexpected shape ({type(exc).__name__}: {exc})"
    return NotUnderstood(command=command, reason=reason, seen=tuple(_lenient(root, data)))


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
            return f"near {_snippet(_text(data, node))!r}"
        if node.has_error:
            stack.extend(reversed(node.children))
    return "syntax error"  # pragma: no cover - has_error implies one of the above


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8")


def _snippet(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------- words


@dataclass(frozen=True, kw_only=True, slots=True)
class _Word:
    raw: str
    """As written."""
    value: str
    """Quotes removed, escapes resolved."""
    quoted: bool
    """Some of it is quoted or escaped."""
    glob: bool
    """An unquoted ``*``, ``?`` or ``[``: bash may replace it with file names."""
    brace: bool
    """An unquoted ``{…,…}`` or ``{a..b}``: bash turns it into several words."""
    tilde: bool
    """Starts with an unquoted ``~``: bash puts a home directory there."""
    inner_tilde: bool
    """An unquoted ``~`` further in (bash expands ``x=~/a`` too)."""


_QUOTED = "\0"  # stands for a quoted piece in a word's shape (NUL never reaches the lexer)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,+=@%^-]+")  # nothing bash would quote or expand
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def _lex_word(text: str) -> _Word:
    """One bash word read with bash's quoting rules; raises :class:`_Unclear` on any
    expansion, or when ``text`` is not exactly one word."""
    if _PLAIN_WORD.fullmatch(text):
        return _Word(
            raw=text,
            value=text,
            quoted=False,
            glob=False,
            brace=False,
            tilde=False,
            inner_tilde=False,
        )
    out: list[str] = []
    shape: list[str] = []  # the unquoted characters, with _QUOTED for each quoted piece
    quoted = False
    if text.startswith("#"):
        raise _Unclear(f"a word the parser and bash read differently ({_snippet(text)!r})")
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\\":
            if i + 1 >= end:
                raise _Unclear("a trailing backslash")
            if text[i + 1] != "\n":  # backslash-newline is removed
                out.append(text[i + 1])
                shape.append(_QUOTED)
            quoted = True
            i += 2
        elif char == "'":
            close = text.find("'", i + 1)
            if close < 0:
                raise _Unclear("an unterminated single quote")
            out.append(text[i + 1 : close])
            shape.append(_QUOTED)
            quoted = True
            i = close + 1
        elif char == '"':
            i = _double_quoted(text, i + 1, out)
            shape.append(_QUOTED)
            quoted = True
        elif char == "$":
            if text.startswith("$'", i):
                i = _ansi_c(text, i + 2, out)
                shape.append(_QUOTED)
                quoted = True
            else:
                raise _Unclear(_dollar(text, i))
        elif char == "`":
            raise _Unclear(f"command substitution `…` ({_snippet(text[i:])!r})")
        elif char in _META:
            if char in "<>" and text.startswith("(", i + 1):
                raise _Unclear(f"process substitution ({_snippet(text[i:])!r})")
            raise _Unclear(f"a word the parser and bash read differently ({_snippet(text)!r})")
        else:
            out.append(char)
            shape.append(char)
            i += 1
    bare = "".join(shape)
    return _Word(
        raw=text,
        value="".join(out),
        quoted=quoted,
        glob=any(char in bare for char in "*?["),
        brace=_BRACE_EXPANSION.search(bare) is not None,
        # `~` expands only when nothing up to the first `/` is quoted: `~""` stays `~`.
        tilde=bare.startswith("~") and _QUOTED not in bare.partition("/")[0],
        inner_tilde="~" in bare[1:],
    )


def _dollar(text: str, i: int) -> str:
    rest = text[i:]
    shown = _snippet(rest, 24)
    if rest.startswith(("$((", "$[")):
        return f"arithmetic expansion ({shown!r})"
    if rest.startswith("$("):
        return f"command substitution ({shown!r})"
    if rest.startswith('$"'):
        return f'a $"…" locale-translated string ({shown!r})'
    return f"parameter expansion ({shown!r})"


def _double_quoted(text: str, i: int, out: list[str]) -> int:
    """Read a ``"…"`` body from ``i``; returns the index after the closing quote."""
    end = len(text)
    while i < end:
        char = text[i]
        if char == '"':
            return i + 1
        if char == "\\" and i + 1 < end and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
        elif char == "$":
            raise _Unclear(_dollar(text, i) + " inside double quotes")
        elif char == "`":
            raise _Unclear("command substitution `…` inside double quotes")
        else:
            out.append(char)
            i += 1
    raise _Unclear("an unterminated double quote")


def _ansi_c(text: str, i: int, out: list[str]) -> int:
    """Decode a ``$'…'`` body from ``i`` as bash does; returns the index after it.

    Escapes whose result depends on the locale (``\\u``/``\\x`` beyond ASCII), that cut
    the string (a NUL), or that bash keeps literally (unknown ones, ``\\c``) are refused.
    """
    end = len(text)
    while i < end:
        char = text[i]
        if char == "'":
            return i + 1
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= end:
            break
        escape = text[i + 1]
        if escape in _ANSI_C:
            out.append(_ANSI_C[escape])
            i += 2
            continue
        if escape in "01234567":
            digits = _take(text, i + 1, 3, "01234567")
            base = 8
        elif escape in "xuU":
            digits = _take(text, i + 2, {"x": 2, "u": 4, "U": 8}[escape], _HEX)
            base = 16
            i += 1
        else:
            raise _Unclear(f"an escape $'…' does not define (\\{escape})")
        value = int(digits, base) if digits else -1
        if not 0 < value < 0x80:
            raise _Unclear(f"a $'…' escape that is not plain ASCII (\\{escape}{digits})")
        out.append(chr(value))
        i += 1 + len(digits)
    raise _Unclear("an unterminated $'…' string")


def _take(text: str, start: int, most: int, allowed: frozenset[str] | str) -> str:
    stop = start
    while stop < len(text) and stop - start < most and text[stop] in allowed:
        stop += 1
    return text[start:stop]


# ---------------------------------------------------------------------------- the walk

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
_CLAUSES = frozenset({"elif_clause", "else_clause", "do_group"})
_JOINERS = frozenset({"&&", "||", "|", "|&"})
_FILE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<", ">&", "<&", ">&-", "<&-"})


@dataclass(frozen=True, kw_only=True, slots=True)
class _Tail:
    redirects: tuple[Redirect, ...] = ()
    words: tuple[_Word, ...] = ()


_NO_TAIL = _Tail()


@dataclass(kw_only=True, slots=True)
class _Pending:
    """A simple command being built (the walk's only mutable record)."""

    argv: list[_Word] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    separator: str = ""
    start: int = 0
    end: int = 0


class _Walker:
    """The strict walk: whitelisted node kinds only; records every token it accepts."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.atoms: list[tuple[int, int, _AtomKind]] = []
        self.pending: list[_Pending] = []

    # -- entry and exit

    def program(self, root: Node) -> None:
        self.statements(root, (), 0)
        self.check_coverage()

    def result(self) -> tuple[SimpleCommand, ...]:
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
                )
            )
        _check_directories(commands)
        return tuple(commands)

    # -- helpers

    def text(self, node: Node) -> str:
        return _text(self.data, node)

    def atom(self, node: Node, kind: _AtomKind) -> None:
        self.atoms.append((node.start_byte, node.end_byte, kind))

    def word(self, node: Node) -> _Word:
        if node.type not in _WORD_NODES:
            raise _Unclear(f"unexpected {node.type.replace('_', ' ')} ({self.snip(node)!r})")
        self.atom(node, "word")
        return _lex_word(self.text(node))

    def snip(self, node: Node) -> str:
        return _snippet(self.text(node))

    def descriptor(self, node: Node) -> int:
        text = self.text(node)
        if not text.isascii() or not text.isdigit():
            raise _Unclear(f"a descriptor bash reads differently ({text!r})")
        self.atom(node, "word")
        return int(text)

    def comment(self, node: Node) -> None:
        self.atom(node, "comment")

    def separate(self, token: str) -> None:
        if self.pending:
            self.pending[-1].separator = token

    def same_line(self, start: int, end: int) -> None:
        """Bash ends a command at a newline; the grammar sometimes reads on."""
        gap = self.data[start:end].replace(b"\\\n", b"")
        if b"\n" in gap:
            raise _Unclear("a command the parser continues past the end of its line")

    # -- statements

    def statements(self, node: Node, group: tuple[Redirect, ...], depth: int) -> None:
        allowed = _LIST_TOKENS[node.type]
        for child in node.children:
            if child.type == "comment":
                self.comment(child)
            elif not child.is_named:
                if child.type == "((":
                    raise _Unclear(f"an arithmetic command `(( … ))` ({self.snip(node)!r})")
                if child.type not in allowed:
                    raise _Unclear(f"{child.type!r} where bash does not allow it")
                self.atom(child, "op")
                if child.type in (";", "&", "\n"):
                    self.separate(child.type)
            elif child.type in _CLAUSES:
                self.statements(child, group, depth + 1)
            else:
                self.statement(child, group, depth + 1)

    def statement(
        self, node: Node, group: tuple[Redirect, ...], depth: int, tail: _Tail = _NO_TAIL
    ) -> None:
        """One statement. ``tail`` holds redirections (and stray words) the grammar hung on
        an enclosing list or pipeline; bash binds them to its last command."""
        if depth > MAX_DEPTH:
            raise _Unclear(f"it is nested more than {MAX_DEPTH} levels deep")
        kind = node.type
        if kind == "command":
            self.command(node, group, tail)
        elif kind == "redirected_statement":
            self.redirected(node, group, depth, tail)
        elif kind in ("list", "pipeline", "negated_command"):
            last = node.named_children[-1] if node.named_children else None
            for child in node.children:
                if child.type == "comment":
                    self.comment(child)
                elif not child.is_named:
                    if child.type not in (*_JOINERS, "!") or (child.type == "!") != (
                        kind == "negated_command"
                    ):
                        raise _Unclear(f"{child.type!r} where bash does not allow it")
                    self.atom(child, "op")
                    if child.type != "!":
                        self.separate(child.type)
                else:
                    inner = tail if last is not None and child.id == last.id else _NO_TAIL
                    self.statement(child, group, depth + 1, inner)
        elif tail.words:
            raise _Unclear(f"words after a redirection ({self.snip(node)!r})")
        elif tail.redirects:
            self.statement(node, (*group, *tail.redirects), depth)
        elif kind in _LIST_TOKENS:
            self.statements(node, group, depth + 1)
        elif kind in ("variable_assignment", "variable_assignments"):
            children = [node] if kind == "variable_assignment" else node.named_children
            pending = _Pending(start=node.start_byte, end=node.end_byte)
            for child in children:
                if child.type == "comment":
                    self.comment(child)
                else:
                    pending.assignments.append(self.assignment(child))
            pending.redirects.extend(group)
            self.pending.append(pending)
        elif kind == "test_command":
            self.test_command(node, group)
        else:
            reason = _REFUSED.get(kind, kind.replace("_", " "))
            raise _Unclear(f"{reason} ({self.snip(node)!r})")

    def redirected(self, node: Node, group: tuple[Redirect, ...], depth: int, tail: _Tail) -> None:
        body = node.child_by_field_name("body")
        redirects: list[Redirect] = []
        words: list[_Word] = []
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
        tail = _Tail(redirects=(*redirects, *tail.redirects), words=(*words, *tail.words))
        if body is None:
            if tail.words:
                raise _Unclear(f"words after a redirection ({self.snip(node)!r})")
            # `> file` alone: truncates (creates) the file and runs nothing.
            pending = _Pending(start=node.start_byte, end=node.end_byte)
            pending.redirects.extend([*tail.redirects, *group])
            self.pending.append(pending)
        else:
            self.statement(body, group, depth + 1, tail)

    def command(self, node: Node, group: tuple[Redirect, ...], tail: _Tail) -> None:
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
                    raise _Unclear(f"an assignment after the command name ({self.snip(child)!r})")
                pending.assignments.append(self.assignment(child))
            elif kind == "command_name":
                if len(child.children) != 1:
                    raise _Unclear(f"an unusual command name ({self.snip(child)!r})")
                pending.argv.append(self.word(child.children[0]))
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                found, extra = self.redirect(child)
                if extra:
                    raise _Unclear(f"words after a redirection ({self.snip(child)!r})")
                pending.redirects.extend(found)
                if kind == "heredoc_redirect":
                    previous = None
            elif child.is_named and kind in _WORD_NODES:
                if not pending.argv:
                    raise _Unclear(f"an argument before the command name ({self.snip(child)!r})")
                pending.argv.append(self.word(child))
            elif kind == "$":  # the grammar splits `$"…"` into `$` and a string
                rest = self.data[child.start_byte : node.end_byte].decode("utf-8")
                raise _Unclear(_dollar(rest, 0))
            else:
                raise _Unclear(f"{kind!r} in a command ({self.snip(node)!r})")
        pending.argv.extend(tail.words)
        pending.redirects.extend((*tail.redirects, *group))
        _check_command(pending)
        self.pending.append(pending)

    def assignment(self, node: Node) -> str:
        if node.type != "variable_assignment":
            raise _Unclear(f"unexpected {node.type.replace('_', ' ')} ({self.snip(node)!r})")
        text = self.text(node)
        match = _ASSIGNMENT.match(text)
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is not None and name.type == "subscript":
            raise _Unclear(f"an array assignment ({_snippet(text)!r})")
        if match is None or name is None or name.type != "variable_name":
            raise _Unclear(f"an assignment the parser and bash read differently ({text!r})")
        if value is not None and value.type == "array":
            raise _Unclear(f"an array assignment ({_snippet(text)!r})")
        self.atom(node, "word")
        rest = text[match.end() :]
        return match.group() + (_lex_word(rest).value if rest else "")

    def redirect(self, node: Node) -> tuple[list[Redirect], list[_Word]]:
        """A redirection node → its redirects (a heredoc may carry more) and any words the
        grammar put after its target (``>f status`` → the word ``status``)."""
        kind = node.type
        if kind == "heredoc_redirect":
            return self.heredoc(node), []
        if kind not in ("file_redirect", "herestring_redirect"):
            raise _Unclear(f"unexpected {kind.replace('_', ' ')} ({self.snip(node)!r})")
        fd: int | None = None
        fd_end = -1
        operator = ""
        words: list[_Word] = []
        for child in node.children:
            if child.type == "file_descriptor" and fd is None and not operator:
                fd, fd_end = self.descriptor(child), child.end_byte
            elif child.type == "comment":
                self.comment(child)
            elif not child.is_named:
                if operator or child.type not in (*_FILE_OPS, "<<<"):
                    raise _Unclear(f"{child.type!r} in a redirection ({self.snip(node)!r})")
                if fd is not None and child.start_byte != fd_end:
                    raise _Unclear(f"a descriptor apart from its operator ({self.snip(node)!r})")
                self.atom(child, "op")
                operator = child.type
            else:
                if operator and not words:
                    self.same_line(self.atoms[-1][1], child.start_byte)
                words.append(self.word(child))
        if operator in (">&-", "<&-"):
            return [Redirect(operator=operator, fd=fd, target="", kind="dup")], words
        if not words:
            raise _Unclear(f"a redirection without a target ({self.snip(node)!r})")
        target, *extra = words
        if operator == "<<<":
            return [Redirect(operator="<<<", fd=fd, target="", kind="input", body=target.value)], (
                extra
            )
        return [_file_redirect(operator, fd, target, self.snip(node))], extra

    def heredoc(self, node: Node) -> list[Redirect]:
        fd: int | None = None
        operator = ""
        delimiter: _Word | None = None
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
                delimiter = _lex_word(self.text(child))
            elif kind == "file_redirect" and delimiter is not None and body is None:
                found, extra = self.redirect(child)
                if extra:
                    raise _Unclear(f"words after a redirection ({self.snip(child)!r})")
                more.extend(found)
            elif kind == "heredoc_body" and delimiter is not None and body is None:
                body = child
            elif kind == "heredoc_end" and body is not None and end is None:
                end = child
            elif kind == "comment":
                self.comment(child)
            else:
                raise _Unclear(f"a heredoc followed by {kind!r} on its line ({self.snip(node)!r})")
        if delimiter is None or body is None or end is None:
            raise _Unclear(f"an incomplete heredoc ({self.snip(node)!r})")
        start_end = next(stop for _, stop, kind in reversed(self.atoms) if kind == "word")
        if self.data[start_end : body.start_byte].replace(b"\\\n", b"").count(b"\n") != 1:
            raise _Unclear("a heredoc whose body starts elsewhere (one heredoc per line)")
        text = self.heredoc_body(operator, delimiter, body, end)
        heredoc = Redirect(operator=operator, fd=fd, target="", kind="input", body=text)
        return [heredoc, *more]

    def heredoc_body(self, operator: str, delimiter: _Word, body: Node, end: Node) -> str:
        """Check a heredoc against bash's rule (it ends at the first line that is exactly
        the delimiter, after leading tabs for ``<<-``) and return its text."""
        data = self.data
        word = delimiter.value
        if not word or "\n" in word or (delimiter.glob and not delimiter.quoted):
            raise _Unclear(f"a heredoc delimiter bash reads differently ({word!r})")
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
            raise _Unclear("a heredoc whose end bash finds elsewhere")
        text = data[begin:end_line].decode("utf-8")
        for line in text.split("\n")[:-1]:
            if (line.lstrip("\t") if strip else line) == word:
                raise _Unclear("a heredoc whose end bash finds elsewhere")
        if not delimiter.quoted and any(char in text for char in "$`\\"):
            raise _Unclear(
                "a heredoc with an unquoted delimiter whose body expands `$`, `` ` `` or `\\` "
                f"(quote the delimiter: <<'{word}')"
            )
        self.atoms.append((begin, end.end_byte, "body"))
        if strip:
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        return text

    def test_command(self, node: Node, group: tuple[Redirect, ...]) -> None:
        children = node.children
        if not children or children[0].type != "[" or children[-1].type != "]":
            raise _Unclear(f"{_REFUSED['test_command']} ({self.snip(node)!r})")
        # Re-read `[ … ]` as bash does: tokens with no space between them are one word.
        spans: list[tuple[int, int]] = []
        stack = list(reversed(children))
        while stack:
            child = stack.pop()
            if child.type in _WORD_NODES or not child.is_named or child.type == "test_operator":
                spans.append((child.start_byte, child.end_byte))
            elif child.type in ("unary_expression", "binary_expression"):
                stack.extend(reversed(child.children))
            else:
                raise _Unclear(f"{child.type.replace('_', ' ')} in a test ({self.snip(node)!r})")
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
            pending.argv.append(_lex_word(self.data[start:stop].decode("utf-8")))
        _check_test([word.value for word in pending.argv])
        pending.redirects.extend(group)
        self.pending.append(pending)

    # -- every byte accounted for

    def check_coverage(self) -> None:
        """Everything between accepted tokens must be plain whitespace, and two words must
        not touch (bash would read them as one)."""
        data = self.data
        position = 0
        previous: _AtomKind | None = None
        for start, stop, kind in sorted(self.atoms):
            if start < position:
                raise _Unclear("tokens the parser read twice")
            _check_gap(data[position:start], previous, kind)
            position, previous = stop, kind
        _check_gap(data[position:], previous, None)


def _check_gap(gap: bytes, previous: _AtomKind | None, kind: _AtomKind | None) -> None:
    if gap.strip(b" \t\n\\"):
        raise _Unclear(f"text the parser skipped ({_snippet(gap.decode('utf-8'))!r})")
    joined = gap.replace(b"\\\n", b"")
    if b"\\" in joined:
        raise _Unclear("a backslash between words (bash reads it as part of a word)")
    if gap and not joined and previous is not None and kind is not None:
        raise _Unclear("a line continuation that joins two words")
    if not joined and previous in ("word", "body") and kind in ("word", "comment", "body"):
        raise _Unclear("two words the parser split that bash reads as one")
    if kind == "body" and not joined.endswith(b"\n"):
        raise _Unclear("a heredoc whose body starts elsewhere")


def _file_redirect(operator: str, fd: int | None, target: _Word, shown: str) -> Redirect:
    value = target.value
    if operator in (">&", "<&"):
        if target.raw == value and re.fullmatch(r"-|[0-9]+-?", value):
            return Redirect(operator=operator, fd=fd, target=value, kind="dup")
        # `>&file` is `&>file`, but bash reads `>& --` as `>&-` and a word `-`, and removes
        # quotes from a `>&'file'` name twice: only plain descriptors are understood.
        raise _Unclear(f"a descriptor copy to something else than a descriptor ({shown!r})")
    if target.glob or target.brace or target.inner_tilde:
        raise _Unclear(f"a redirection to a pattern bash would expand ({shown!r})")
    if value.startswith("~") and target.tilde and not (value == "~" or value.startswith("~/")):
        raise _Unclear(f"a redirection to another user's home ({shown!r})")
    if not value:
        raise _Unclear(f"a redirection to an empty name ({shown!r})")
    kind: RedirectKind = "read" if operator == "<" else "write"
    return Redirect(operator=operator, fd=fd, target=value, kind=kind, tilde=target.tilde)


def _unwrap_builtins(argv: Sequence[str]) -> Sequence[str]:
    """Skip ``command``, ``builtin`` and ``time``, which run a builtin in this shell."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word not in ("command", "builtin", "time"):
            break
        i += 1
        while i < len(argv) and argv[i].startswith("-") and word != "builtin":
            i += 1
            if argv[i - 1] == "--":
                break
    return argv[i:]


def _check_command(pending: _Pending) -> None:
    """Refuse command names bash would expand or read as syntax, and builtins that run
    text or change what later commands mean."""
    if not pending.argv:
        return
    name = pending.argv[0]
    if name.glob or name.brace or name.tilde or name.inner_tilde:
        raise _Unclear(f"a command name bash would expand ({name.raw!r})")
    for word in pending.argv[1:]:
        if word.brace:
            raise _Unclear(f"brace expansion, which makes several words of one ({word.raw!r})")
    if name.value in _RESERVED or _ASSIGNMENT.match(name.raw):
        raise _Unclear(f"a command name bash reads as syntax ({name.raw!r})")
    argv = [word.value for word in pending.argv]
    if argv[0] == "time" and any(word in _RESERVED for word in argv[1:3]):
        raise _Unclear("`time` before a compound command")
    inner = _unwrap_builtins(argv)
    if not inner:
        return
    head = inner[0]
    if head in _UNSAFE_BUILTINS:
        raise _Unclear(_UNSAFE_BUILTINS[head])
    if head in _ASSIGNING_BUILTINS:
        raise _Unclear(f"`{head}` (it assigns variables later commands may use)")
    if head == "printf" and any(word.startswith("-v") for word in _options(inner[1:])):
        raise _Unclear("`printf -v` (it assigns a variable)")
    if head == "set":
        _check_set(inner[1:])
    _check_test(inner)
    if head in ("cd", "pushd"):
        offset = len(argv) - len(inner)
        target = _cd_argument(inner)
        if target is not None:
            word = pending.argv[offset + inner.index(target, 1)]
            if word.glob or word.brace or word.inner_tilde:
                raise _Unclear(f"`cd` to a pattern bash would expand ({word.value!r})")
            if word.value.startswith("~") and not word.tilde:
                raise _Unclear(f"`cd` to a directory named ~ ({word.value!r})")


def _check_test(argv: Sequence[str]) -> None:
    # `test -v 'a[$(cmd)]'` evaluates the subscript, and so runs cmd.
    if argv and argv[0] in ("test", "[") and "-v" in argv[1:]:
        raise _Unclear(f"`{argv[0]} -v` (it evaluates array subscripts, which can run commands)")


def _options(words: Sequence[str]) -> Iterator[str]:
    for word in words:
        if word == "--" or not word.startswith("-"):
            return
        yield word


def _check_set(arguments: Sequence[str]) -> None:
    expected = 0  # -o flags waiting for their option name
    for word in arguments:
        if expected:
            if word not in _SAFE_SET_OPTIONS:
                raise _Unclear(f"`set -o {word}` (only {', '.join(sorted(_SAFE_SET_OPTIONS))})")
            expected -= 1
        elif re.fullmatch(r"[-+][A-Za-z]+", word) and set(word[1:]) <= _SAFE_SET_LETTERS | {"o"}:
            expected = word.count("o")
        else:
            raise _Unclear(f"`set {word}` (only -e, -u, -x, -v and -o with a safe option)")
    if expected:
        raise _Unclear("`set -o` without an option name")


def _cd_argument(argv: Sequence[str]) -> str | None:
    """The directory argument of ``cd``/``pushd`` (None when there is none)."""
    words = argv[1:]
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        i += 1
        if words[i - 1] == "--":
            break
    return words[i] if i < len(words) else None


def _chdir(argv: Sequence[str], cwd: Path | None, home: Path) -> Path | None:
    """The working directory after a ``cd``/``pushd``/``popd`` (None: cannot be known).

    ``cd NAME`` is taken as ``./NAME``: CDPATH is not consulted (the Bash tool runs with it
    unset). ``..`` is read as bash's default ``cd -L`` reads it, lexically; with another
    option (``cd -P`` follows symlinks first, ``pushd -n`` does not move) the directory
    is unknown.
    """
    name = argv[0]
    target = _cd_argument(argv) if name != "popd" else None
    rest = argv[argv.index(target) + 1 :] if target is not None else ()
    options = argv[1 : argv.index(target)] if target is not None else argv[1:]
    if name == "popd" or rest or any(option not in ("-L", "--") for option in options):
        return None
    if target is None:
        return home if name == "cd" else None  # pushd alone swaps with an unknown dir
    if target == "-" or (name == "pushd" and re.fullmatch(r"[-+]\d+", target)):
        return None
    if target == "~" or target.startswith("~/"):
        return Path(os.path.normpath(home / target[2:]))
    if target.startswith("~"):
        return None
    if target.startswith("/"):
        return Path(os.path.normpath(target))
    return None if cwd is None else Path(os.path.normpath(cwd / target))


def _check_directories(commands: Sequence[SimpleCommand]) -> None:
    """After a ``cd`` whose directory cannot be known (``cd -``, ``popd``), a relative
    redirection's file cannot be known either."""
    cwd: Path | None = Path("/")
    for command in commands:
        for redirect in command.redirects:
            relative = not (redirect.tilde or redirect.target.startswith("/"))
            if redirect.kind in ("read", "write") and relative and cwd is None:
                raise _Unclear(
                    f"a relative redirection ({redirect.operator}{redirect.target}) after a "
                    "`cd` whose directory cannot be known"
                )
        inner = _unwrap_builtins(command.argv)
        if inner and inner[0] in _CD:
            cwd = _chdir(inner, cwd, Path("/home"))


# ---------------------------------------------------------------------------- lenient


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


def _lenient_word(node: Node, data: bytes) -> str:
    text = _text(data, node)
    try:
        return _lex_word(text).value
    except _Unclear:
        return text


def _lenient_command(node: Node, parent: Node | None, data: bytes) -> SimpleCommand:
    argv: list[str] = []
    assignments: list[str] = []
    redirects: list[Redirect] = []
    for child in node.children:
        if child.type == "command_name" and child.named_children:
            argv.append(_lenient_word(child.named_children[0], data))
        elif child.type == "variable_assignment":
            assignments.append(_text(data, child))
        elif child.is_named and child.type in _WORD_NODES:
            argv.append(_lenient_word(child, data))
    siblings = (
        parent.children if parent is not None and parent.type == "redirected_statement" else []
    )
    for sibling in (*node.children, *siblings):
        words = [c for c in sibling.named_children if c.type in _WORD_NODES]
        if sibling.type == "file_redirect":
            # The grammar files words after a redirection's target under it: `>f rm -rf /`.
            argv.extend(_lenient_word(word, data) for word in words[1:])
        elif sibling.type == "herestring_redirect" and words:
            body = _lenient_word(words[0], data)
            redirects.append(Redirect(operator="<<<", fd=None, target="", kind="input", body=body))
        elif sibling.type == "heredoc_redirect":
            for part in sibling.named_children:
                if part.type == "heredoc_body":
                    body = _text(data, part)
                    redirects.append(
                        Redirect(operator="<<", fd=None, target="", kind="input", body=body)
                    )
    return SimpleCommand(
        argv=tuple(argv), assignments=tuple(assignments), redirects=tuple(redirects)
    )


# ---------------------------------------------------------------------------- matching


def render(argv: Sequence[str]) -> str:
    """Words joined by spaces, each quoted only when it is empty or contains whitespace,
    quotes or backslashes — so ``python 'script.py x'`` never reads as ``python script.py x``."""
    return " ".join(
        word if word and not _NEEDS_QUOTES.search(word) else shlex.quote(word) for word in argv
    )


_NEEDS_QUOTES = re.compile(r"[\s'\"\\]")


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether a Bash rule pattern covers ``text``, in linear time.

    ``*`` matches anything (spaces and slashes included); everything else is literal;
    ``prefix:*`` matches ``prefix`` and ``prefix …``. Runs of whitespace in the pattern
    count as one space.
    """
    pattern = " ".join(pattern.split())
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


def deny_matches(pattern: str, analysis: Analysis) -> bool:
    """Whether a deny (or ask) rule's pattern covers any part of the line: the whole
    text, any simple command, what wrappers run, ``bash -c``/``eval`` strings — also in
    lines that are not understood. Over-matching is the safe mistake here."""
    if isinstance(analysis, NotUnderstood) and analysis.unchecked:
        return True
    texts: dict[str, None] = {}
    if _collect(analysis, texts, 0):
        return True  # shells nested deeper than caliban looks: whatever it is, it matches
    return any(pattern_matches(pattern, text) for text in texts)


def deny_texts(analysis: Analysis) -> tuple[str, ...]:
    """Every text a deny or ask rule is matched against (see :func:`deny_matches`)."""
    texts: dict[str, None] = {}
    _collect(analysis, texts, 0)
    return tuple(texts)


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
    name = os.path.basename(argv[0])
    if name in WRAPPERS:
        for start in range(1, min(len(argv), MAX_WRAPPED_WORDS)):
            _variants(argv[start:], texts)
            if name in _APPENDS_ARGUMENTS:
                _variants((*argv[start:], "…"), texts)
            if name == "env" and (split := _split_string(argv[start])) is not None:
                _variants((split, *argv[start + 1 :]), texts)
    for start, word in enumerate(argv[:MAX_WRAPPED_WORDS] if name == "find" else ()):
        if word in _FIND_EXEC:
            end = next((i for i in range(start + 1, len(argv)) if argv[i] in (";", "+")), None)
            _variants(argv[start + 1 : end], texts)
    scripts = _inner_scripts(command, name)
    if depth >= MAX_INNER_DEPTH:
        return next(scripts, None) is not None
    too_deep = False
    for script in scripts:
        too_deep |= _collect(_analyze(script), texts, depth + 1)
    return too_deep


def _variants(argv: Sequence[str], texts: dict[str, None]) -> None:
    if not argv:
        return
    texts[render(argv)] = None
    texts[" ".join(" ".join(argv).split())] = None
    base = os.path.basename(argv[0])
    if base and base != argv[0]:
        texts[render((base, *argv[1:]))] = None


def _split_string(word: str) -> str | None:
    """What ``env --split-string=STR`` (or ``-SSTR``) splits into a command, else None."""
    for prefix in ("--split-string=", "-S"):
        if word.startswith(prefix) and len(word) > len(prefix):
            return word[len(prefix) :]
    return None


def _inner_scripts(command: SimpleCommand, name: str) -> Iterator[str]:
    """Command lines a command runs from its arguments or stdin: ``bash -c STR``,
    ``eval …``, ``su -c STR``, ``sg GROUP STR``, ``ssh HOST STR``, ``bash <<EOF``; also after
    a wrapper (``sudo sh -c …``). Over-matches: after a shell's ``-c`` every word that is
    not an option may be its command (``bash -o errexit -c STR``, ``bash -c -- STR``)."""
    argv = command.argv
    if name == "eval":
        yield " ".join(argv[1:])
    for start in range(min(len(argv), MAX_WRAPPED_WORDS)):
        head = os.path.basename(argv[start])
        if head not in SHELLS and head not in _RUNS_A_STRING:
            continue
        rest = argv[start + 1 : start + MAX_WRAPPED_WORDS]
        if head in ("sg", "ssh"):  # the command line is the words after the group or host
            for index in range(1, len(rest)):
                yield " ".join(rest[index:])
            continue
        c_option = next(
            (
                index
                for index, word in enumerate(rest)
                if word.lower() in ("--command", "-command")
                or (word.startswith(("-", "+")) and not word.startswith("--") and "c" in word[1:])
            ),
            None,
        )
        if c_option is not None:
            yield from (word for word in rest[c_option + 1 :] if not word.startswith("-"))
        elif head in SHELLS and start == 0:
            for redirect in command.redirects:
                if redirect.kind == "input" and redirect.body:
                    yield redirect.body


# ---------------------------------------------------------------------------- suggestions


def suggest_rule(command: str) -> str | None:
    """The rule "don't ask again" would add for ``command``: ``Bash(git commit:*)`` from
    the first command's first word (and its second when it looks like a subcommand).

    None when the line is not understood, starts with assignments, or has no command:
    no rule can allow it, so none is offered.
    """
    analysis = analyze(command)
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
    return f"Bash({prefix}:*)"


# ---------------------------------------------------------------------------- paths


def written_paths(analysis: Understood, *, cwd: Path, home: Path | None = None) -> tuple[Path, ...]:
    """The files an understood line's redirections write (``>``, ``>>``, ``&>``…),
    absolute and resolved (symlinks followed), following ``cd`` through the line;
    ``/dev/null`` and descriptor copies left out. Run each through the Write path rules.
    Raises :class:`UnknownTarget` for a target only the shell's process could resolve."""
    return _paths(analysis, cwd, home, "write")


def read_paths(analysis: Understood, *, cwd: Path, home: Path | None = None) -> tuple[Path, ...]:
    """The files an understood line's ``<`` redirections read, like :func:`written_paths`."""
    return _paths(analysis, cwd, home, "read")


class UnknownTarget(ValueError):
    """A redirection's file depends on the shell process that opens it (``/proc/self/cwd``,
    ``/dev/fd``): caliban, another process, cannot resolve it for the shell."""


def _through_this_process(path: Path) -> bool:
    """Whether resolving ``path`` goes through caliban's own ``/proc/PID`` entry, as
    ``/proc/self``, ``/proc/thread-self`` and ``/dev/fd`` do: the shell would find its own
    there (its working directory after a ``cd``, its descriptors), not caliban's."""
    own = Path(f"/proc/{os.getpid()}")
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = resolved(current / part)
        if current == own or own in current.parents:
            return True
    return False


def _paths(
    analysis: Understood, cwd: Path, home: Path | None, kind: RedirectKind
) -> tuple[Path, ...]:
    home = home if home is not None else Path.home()
    found: dict[Path, None] = {}
    current: Path | None = cwd
    for command in analysis.commands:
        for redirect in command.redirects:
            if redirect.kind != kind or redirect.benign:
                continue
            target = redirect.target
            if redirect.tilde:
                path = home / target[2:] if target != "~" else home
            elif target.startswith("/"):
                path = Path(target)
            elif current is None:  # pragma: no cover - analyze() refuses this line
                raise ValueError(f"cannot resolve {target!r} after an unknown cd")
            else:
                path = current / target
            if _through_this_process(path):
                raise UnknownTarget(
                    f"a redirection through the shell's own /proc entry "
                    f"({redirect.operator}{target}), which caliban cannot resolve for it"
                )
            found[resolved(path)] = None
        inner = _unwrap_builtins(command.argv)
        if inner and inner[0] in _CD:
            current = _chdir(inner, current, home)
    return tuple(found)


__all__ = [
    "BENIGN_TARGETS",
    "MAX_COMMAND_CHARS",
    "SHELLS",
    "WRAPPERS",
    "Analysis",
    "NotUnderstood",
    "Redirect",
    "SimpleCommand",
    "Understood",
    "UnknownTarget",
    "allows",
    "analyze",
    "deny_matches",
    "deny_texts",
    "pattern_matches",
    "read_paths",
    "render",
    "suggest_rule",
    "written_paths",
]
