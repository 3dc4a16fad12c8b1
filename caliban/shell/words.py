"""Reading one bash word as bash does: quotes removed, escapes resolved, and any expansion
refused (:class:`Unclear`), since only the shell that runs the line could resolve it."""

from __future__ import annotations

import re
from dataclasses import dataclass


class Unclear(Exception):
    """Raised inside the strict walk; the message is the
    :attr:`~caliban.shell.values.NotUnderstood.reason`."""


_META = frozenset(" \t\n|&;()<>")
_ANSI_C = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip
_HEX = frozenset("0123456789abcdefABCDEF")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
"""The ``NAME=`` or ``NAME+=`` that starts an assignment word."""


def snippet(text: str, limit: int = 40) -> str:
    """``text`` on one line, cut to ``limit`` characters: how a reason quotes the line."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, kw_only=True, slots=True)
class Word:
    """One word of a command line as bash reads it."""

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

    @property
    def expands(self) -> bool:
        """Bash turns it into words of its own choosing: a glob, braces, a ``~``."""
        return self.glob or self.brace or self.tilde or self.inner_tilde


_QUOTED = "\0"  # stands for a quoted piece in a word's shape (NUL never reaches the lexer)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,+=@%^-]+")  # nothing bash would quote or expand
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def lex_word(text: str) -> Word:
    """One bash word read with bash's quoting rules; raises :class:`Unclear` on any
    expansion, or when ``text`` is not exactly one word."""
    if _PLAIN_WORD.fullmatch(text):
        return Word(
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
        raise Unclear(f"a word the parser and bash read differently ({snippet(text)!r})")
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\\":
            if i + 1 >= end:
                raise Unclear("a trailing backslash")
            if text[i + 1] != "\n":  # backslash-newline is removed
                out.append(text[i + 1])
                shape.append(_QUOTED)
            quoted = True
            i += 2
        elif char == "'":
            close = text.find("'", i + 1)
            if close < 0:
                raise Unclear("an unterminated single quote")
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
                raise Unclear(dollar(text, i))
        elif char == "`":
            raise Unclear(f"command substitution `…` ({snippet(text[i:])!r})")
        elif char in _META:
            if char in "<>" and text.startswith("(", i + 1):
                raise Unclear(f"process substitution ({snippet(text[i:])!r})")
            raise Unclear(f"a word the parser and bash read differently ({snippet(text)!r})")
        else:
            out.append(char)
            shape.append(char)
            i += 1
    bare = "".join(shape)
    return Word(
        raw=text,
        value="".join(out),
        quoted=quoted,
        glob=any(char in bare for char in "*?["),
        brace=_BRACE_EXPANSION.search(bare) is not None,
        # `~` expands only when nothing up to the first `/` is quoted: `~""` stays `~`.
        tilde=bare.startswith("~") and _QUOTED not in bare.partition("/")[0],
        inner_tilde="~" in bare[1:],
    )


def dollar(text: str, i: int) -> str:
    """The reason for the expansion starting at ``text[i]`` (a ``$``)."""
    rest = text[i:]
    shown = snippet(rest, 24)
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
            raise Unclear(dollar(text, i) + " inside double quotes")
        elif char == "`":
            raise Unclear("command substitution `…` inside double quotes")
        else:
            out.append(char)
            i += 1
    raise Unclear("an unterminated double quote")


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
            raise Unclear(f"an escape $'…' does not define (\\{escape})")
        value = int(digits, base) if digits else -1
        if not 0 < value < 0x80:
            raise Unclear(f"a $'…' escape that is not plain ASCII (\\{escape}{digits})")
        out.append(chr(value))
        i += 1 + len(digits)
    raise Unclear("an unterminated $'…' string")


def _take(text: str, start: int, most: int, allowed: frozenset[str] | str) -> str:
    stop = start
    while stop < len(text) and stop - start < most and text[stop] in allowed:
        stop += 1
    return text[start:stop]


__all__ = ["ASSIGNMENT", "Unclear", "Word", "dollar", "lex_word", "snippet"]
