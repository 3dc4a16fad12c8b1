"""Bounds on what a model server may stream to us, checked before anything parses it.

:class:`ByteCheck` checks the raw bytes of a response stream as they arrive; the Anthropic
provider's decoder (:mod:`caliban.providers.sse`) reads only what it passed. The ``openai``
SDK decodes server-sent events "without imposing a line or event size limit" and raises a
bare ``UnicodeDecodeError`` on bytes that are not UTF-8, so :class:`GuardedSSEDecoder` wraps
its decoder (the SDK asks its client for one per stream, through ``_make_sse_decoder``) and
puts the same checks first:

- they must be UTF-8, else :class:`StreamRejected` ("not valid UTF-8 at byte N");
- one event may hold at most :attr:`StreamLimits.max_event_bytes`, a whole response at most
  :attr:`StreamLimits.max_stream_bytes`;
- with ``require_done`` (Chat Completions), a stream that ends without ``data: [DONE]`` is
  an :class:`IncompleteStream`: the server or a proxy cut it short.

What the events add up to — a text block, a thinking block, one tool call's arguments — is
bounded by the accumulators, with :func:`check_part` and :attr:`StreamLimits.max_part_chars`.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from caliban.providers.retry import IncompleteStream, StreamRejected


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


class _Event(Protocol):
    @property
    def data(self) -> str: ...


EventT = TypeVar("EventT", bound=_Event)
EventT_co = TypeVar("EventT_co", bound=_Event, covariant=True)


class _SdkDecoder(Protocol[EventT_co]):
    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[EventT_co]: ...

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[EventT_co]: ...


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


class GuardedSSEDecoder(Generic[EventT]):
    """An SDK's SSE decoder behind the checks above (the SDKs' ``SSEBytesDecoder``)."""

    def __init__(
        self,
        inner: _SdkDecoder[EventT],
        *,
        require_done: bool = False,
        limits: StreamLimits = DEFAULT_LIMITS,
    ) -> None:
        self.inner = inner
        self.require_done = require_done
        self.limits = limits

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[EventT]:
        check = ByteCheck(self.limits)

        def checked() -> Iterator[bytes]:
            for chunk in iterator:
                check.feed(chunk)
                yield chunk
            check.finish()

        done = False
        for event in self.inner.iter_bytes(checked()):
            done = done or event.data.startswith("[DONE]")
            yield event
        self._check_done(done)

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[EventT]:
        check = ByteCheck(self.limits)

        async def checked() -> AsyncIterator[bytes]:
            async for chunk in iterator:
                check.feed(chunk)
                yield chunk
            check.finish()

        done = False
        async for event in self.inner.aiter_bytes(checked()):
            done = done or event.data.startswith("[DONE]")
            yield event
        # The SDK stops reading at [DONE]; getting here means the bytes ran out.
        self._check_done(done)

    def _check_done(self, done: bool) -> None:
        if self.require_done and not done:
            raise IncompleteStream("the stream ended without [DONE]")
