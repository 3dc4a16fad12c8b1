"""Bounds on what a model server may stream to us, checked before anything parses it.

:class:`ByteCheck` checks the raw bytes of a response stream as they arrive, and the
event-stream decoder (:mod:`caliban.providers.sse`) reads only what it passed:

- they must be UTF-8, else :class:`StreamRejected` ("not valid UTF-8 at byte N");
- one event may hold at most :attr:`StreamLimits.max_event_bytes`, a whole response at most
  :attr:`StreamLimits.max_stream_bytes`.

What the events add up to — a text block, a thinking block, one tool call's arguments — is
bounded by the accumulators, with :func:`check_part` and :attr:`StreamLimits.max_part_chars`.
A Chat Completions stream that ends without ``data: [DONE]`` was cut short
(:mod:`caliban.providers.openai_http` raises
:class:`~caliban.providers.retry.IncompleteStream`).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from caliban.providers.retry import StreamRejected


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamLimits:
    """Generous ceilings: a real response stays far below each (16k output tokens are about
    64k characters of text and a few MB of events)."""

    max_event_bytes: int = 16 * 1024 * 1024
    max_stream_bytes: int = 256 * 1024 * 1024
    max_part_chars: int = 2_000_000
    """One text or thinking block, or one tool call's arguments."""
    max_parts: int = 1_000
    """Content blocks (or tool calls) in one response."""


DEFAULT_LIMITS = StreamLimits()


def check_part(size: int, what: str, limits: StreamLimits) -> None:
    """Raise :class:`StreamRejected` when a part of ``size`` characters is over the limit."""
    if size > limits.max_part_chars:
        raise StreamRejected(
            f"the response was discarded: {what} grew past {limits.max_part_chars:,} "
            "characters (a runaway or hostile server)"
        )


def check_parts(count: int, limits: StreamLimits) -> None:
    """Raise :class:`StreamRejected` when a response has more parts than allowed."""
    if count > limits.max_parts:
        raise StreamRejected(
            f"the response was discarded: it has more than {limits.max_parts:,} content blocks"
        )


class ByteCheck:
    """The checks on raw bytes, fed chunk by chunk; :meth:`feed` returns them decoded."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        self.total = 0
        self.event = 0
        self.tail = b""
        self.utf8 = codecs.getincrementaldecoder("utf-8")()

    def feed(self, chunk: bytes) -> str:
        """The text of ``chunk`` (a character cut at its end waits for the next chunk)."""
        try:
            text = self.utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            raise self._not_utf8(self.total + exc.start) from None
        self.total += len(chunk)
        if self.total > self.limits.max_stream_bytes:
            raise StreamRejected(
                f"the response was discarded: the stream grew past "
                f"{self.limits.max_stream_bytes:,} bytes"
            )
        # Bytes since the last blank line (an event boundary), looking across chunk edges.
        window = self.tail + chunk
        boundary = _last_boundary(window)
        self.event = len(window) - boundary if boundary >= 0 else self.event + len(chunk)
        self.tail = window[-3:]
        if self.event > self.limits.max_event_bytes:
            raise StreamRejected(
                f"the response was discarded: one server-sent event grew past "
                f"{self.limits.max_event_bytes:,} bytes"
            )
        return text

    def finish(self) -> None:
        try:
            self.utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise self._not_utf8(self.total) from None

    def _not_utf8(self, offset: int) -> StreamRejected:
        return StreamRejected(
            f"the server sent bytes that are not valid UTF-8 (at byte {offset:,} of the "
            "response stream); the response was discarded"
        )


def _last_boundary(window: bytes) -> int:
    """The offset just past the last blank line in ``window``, or -1."""
    best = -1
    for separator in (b"\n\n", b"\r\r", b"\r\n\r\n"):
        if (at := window.rfind(separator)) >= 0:
            best = max(best, at + len(separator))
    return best
