"""Text normalisation for tool search: split identifiers and prose into words, drop stop words,
stem with the Snowball English stemmer.

The same functions turn a tool's fields and a user's query into index terms, so the two meet
whatever their inflection (``commits``/``committed`` → ``commit``) or spelling of identifiers
(``getFileInfo``/``get_file_info`` → ``get``, ``file``, ``info``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

import snowballstemmer

__all__ = ["STOP_WORDS", "stem", "tokenize", "words"]

STOP_WORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves please also via
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""English function words: they say nothing about which tool a request needs."""

_WORD: Final = re.compile(r"[^\W_]+")
# "PRs"/"URLs" -> "PR"/"URL" (+ a dropped "s"); "HTTPServer" -> "HTTP", "Server"
_CAMEL: Final = re.compile(r"[A-Z]{2,}(?=s(?![a-z]))|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_STEMMER: Final = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball (Porter2) English stem of a lower-case word (``creating`` → ``creat``)."""
    return str(_STEMMER.stemWord(word))


@lru_cache(maxsize=65536)
def _split_chunk(chunk: str) -> tuple[str, ...]:
    """Lower-case words of one alphanumeric run; camelCase also yields the joined word."""
    if not chunk.isascii() or len(chunk) > 64:
        return (chunk.lower(),)  # long runs are data (hashes, base64), not identifiers
    parts = [p.lower() for p in _CAMEL.findall(chunk)] or [chunk.lower()]
    if sum(len(p) > 1 for p in parts) > 1 and not chunk.isupper() and not chunk.islower():
        # "GitHub" is also "github", "JavaScript" also "javascript": index both readings
        joined = "".join(p for p in parts if not p.isdigit())
        if joined not in parts:
            parts.append(joined)
    return tuple(parts)


def words(text: str) -> list[str]:
    """Split text or an identifier into lower-case words (``_ - .``, camelCase, digits).

    A camelCase word yields its parts and then the whole word (``GitHub`` → ``git``, ``hub``,
    ``github``).
    """
    out: list[str] = []
    for chunk in _WORD.findall(text):
        out.extend(_split_chunk(chunk))
    return out


def tokenize(text: str, *, keep_stop_words: bool = False) -> list[str]:
    """Normalise text to index terms: split, lower-case, drop stop words, stem."""
    return [stem(w) for w in words(text) if len(w) > 1 and (keep_stop_words or w not in STOP_WORDS)]
