"""Shell command lines as permission rules see them: the simple commands they run.

This splitter only knows quotes and separators, so it refuses (for allow rules) every line
with syntax it does not model, and over-splits (for deny and ask rules) ignoring quotes. The
tree-sitter analysis that replaces it understands bash itself.
"""

from __future__ import annotations

import re

__all__ = ["split_command"]

# What the splitter cannot read safely: comments (a quote inside one fooled it), ANSI-C and
# locale quoting ($'…', $"…"), escapes, redirections (they write files the rules must see),
# substitutions, control characters. An allow rule never vouches for such a line.
_UNCLEAR = re.compile(r"[#\\<>`\r\x00]|\$['\"(]")
# Deny and ask rules also see the line cut at every separator, quotes or not: over-matching
# is the safe mistake there.
_RAW_SPLIT = re.compile(r"\$\(|[<>]\(|[\n;&|(){}`]")


def split_command(command: str, *, lenient: bool = False) -> list[str] | None:
    """The simple commands of a shell command line, split at ``&&``, ``||``, ``;``, ``|``,
    ``&`` and newlines outside quotes.

    Returns None when an allow rule cannot vouch for the line: it substitutes commands
    (``$(…)``, backticks, ``<(…)``) or has syntax this splitter does not model (comments,
    ``$'…'``, backslashes, redirections, an unclosed quote). With ``lenient`` (used for deny
    and ask rules, where over-matching is safe) substitutions and parentheses split too, and
    the pieces of the raw line cut at every separator, inside quotes or not, are added.
    """
    if lenient:
        pieces = _split(command, lenient=True) or []
        raw = [" ".join(part.split()) for part in _RAW_SPLIT.split(command)]
        return list(dict.fromkeys([*pieces, *(part for part in raw if part)]))
    if _UNCLEAR.search(command):
        return None
    return _split(command, lenient=False)


def _split(command: str, *, lenient: bool) -> list[str] | None:
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0

    def cut() -> None:
        if text := "".join(current).strip():
            segments.append(text)
        current.clear()

    while i < len(command):
        char = command[i]
        pair = command[i : i + 2]
        if quote == "'":
            current.append(char)
            quote = None if char == "'" else quote
        elif char == "\\" and i + 1 < len(command):
            current.append(pair)
            i += 1
        elif pair in ("$(", "<(", ">(") or char == "`":
            if not lenient:
                return None
            cut()
            i += 2 if char != "`" else 1
            continue
        elif quote == '"':
            current.append(char)
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
            current.append(char)
        elif pair in ("&&", "||", "|&"):
            cut()
            i += 1
        elif char in ";|\n" or (lenient and char in "()"):
            cut()
        elif char == "&":
            previous = "".join(current).rstrip()[-1:]
            if previous in ("<", ">") or command[i + 1 : i + 2] == ">":
                current.append(char)  # a redirection: 2>&1, &>file
            else:
                cut()
        else:
            current.append(char)
        i += 1
    if quote is not None and not lenient:
        return None  # an unclosed quote: where the command ends is unknown
    cut()
    return segments
