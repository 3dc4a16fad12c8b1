"""``@path`` mentions: the one grammar for a prompt's attachments (the REPL), a custom
command's file Reads (skills) and the REPL's path completion.

A mention is ``@`` not preceded by a word character, another ``@`` or a backtick (an email
address, ``@@``, a `` `@decorator` `` in a code span are not mentions), followed by the path:
up to whitespace or a backtick, ``\\ `` escaping a space. Trailing sentence punctuation
(``see @a.py.``) is not part of the path.
"""

from __future__ import annotations

import re

_MENTION = r"(?<![\w@`])@((?:\\ |[^\s`])"
MENTION = re.compile(_MENTION + "+)")
MENTION_BEING_TYPED = re.compile(_MENTION + "*)$")
TRAILING_PUNCTUATION = ".,;:!?)'\""


def mentions(text: str) -> list[str]:
    """The paths ``text`` mentions, unescaped, in order, without duplicates."""
    found: list[str] = []
    for match in MENTION.finditer(text):
        path = match.group(1).replace("\\ ", " ").rstrip(TRAILING_PUNCTUATION)
        if path and path not in found:
            found.append(path)
    return found


def mention_being_typed(text: str) -> str | None:
    """The mention ``text`` ends with, as written so far (escapes kept; ``""`` right after
    the ``@``), or ``None`` when it does not end in one."""
    match = MENTION_BEING_TYPED.search(text)
    return match.group(1) if match is not None else None
