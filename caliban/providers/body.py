"""A request body as the chunks of bytes it is sent in, never joined into one.

A request carries the whole history. Joining every message's JSON into one string, wrapping
it in the body's object and encoding that to UTF-8 copied the whole history several times a
turn (and each fresh megabyte cost the kernel page faults), so a turn's CPU grew with the
session. Instead, JSON text that does not change from one request to the next is encoded once
and kept (:class:`Encoded`: the tool list, chunks of the history), and a body is a list of
chunks: those kept ones, shared with the previous request, and one new chunk for each run of
new text between them. ``httpx2`` sends the chunks one after another (:class:`RequestBody` is
an async iterable, replayed afresh for each attempt), with a ``Content-Length`` computed from
them: some OpenAI-compatible servers reject a chunked upload.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


def dumps(value: object) -> str:
    """Compact JSON, as the SDKs encode a request body (UTF-8, no ASCII escapes)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True, slots=True)
class Encoded:
    """JSON text encoded once and kept: sent as these bytes, never copied."""

    data: bytes
    chars: int
    """Characters of the text it encodes (usage estimates count characters)."""

    @classmethod
    def of(cls, text: str) -> Encoded:
        return cls(data=text.encode(), chars=len(text))


Piece = str | Encoded
"""JSON text in a body: new text (encoded when the body is built), or kept bytes."""


def chars(pieces: Iterable[Piece]) -> int:
    """Characters of the JSON text in ``pieces``."""
    return sum(len(piece) if isinstance(piece, str) else piece.chars for piece in pieces)


def json_object(fields: Iterable[tuple[str, Piece | Sequence[Piece]]]) -> list[Piece]:
    """A JSON object from keys and values already encoded as JSON (in pieces)."""
    pieces: list[Piece] = []
    for key, value in fields:
        pieces.append(f"{',' if pieces else '{'}{dumps(key)}:")
        if isinstance(value, (str, Encoded)):
            pieces.append(value)
        else:
            pieces.extend(value)
    pieces.append("}" if pieces else "{}")
    return pieces


@dataclass(frozen=True, eq=False, slots=True)
class RequestBody:
    """A request body in the chunks it is sent in: compare ``bytes(body)``, not the chunks."""

    chunks: tuple[bytes, ...]
    size: int = field(init=False)
    """Its length in bytes: the request's ``Content-Length``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", sum(map(len, self.chunks)))

    @classmethod
    def of(cls, pieces: Iterable[Piece]) -> RequestBody:
        """The body of ``pieces``: each run of new text becomes one chunk, each kept piece
        is a chunk as it is."""
        chunks: list[bytes] = []
        text: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                text.append(piece)
                continue
            if text:
                chunks.append("".join(text).encode())
                text.clear()
            chunks.append(piece.data)
        if text:
            chunks.append("".join(text).encode())
        return cls(chunks=tuple(chunks))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # A fresh iterator each time: a retried request sends the same chunks again.
        for chunk in self.chunks:
            yield chunk

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks)

    def decoded(self) -> Any:
        """The body's JSON, decoded (for tests and tools that read a request)."""
        return json.loads(bytes(self))
