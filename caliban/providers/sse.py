"""Server-sent events, decoded as the WHATWG specification says, behind the stream guard.

:func:`server_sent_events` turns a response's byte chunks into :class:`ServerSentEvent`
values. The bytes pass :class:`~caliban.providers.guard.ByteCheck` first (UTF-8 or a
:class:`~caliban.providers.retry.StreamRejected`, size limits per event and per stream), so
the decoder below only ever sees text.

Why not httpx2's own ``EventSource``: it decodes with ``errors="replace"`` (bytes that are
not UTF-8 would become U+FFFD inside a tool call's arguments instead of an error), requires a
``text/event-stream`` content type that some compatible servers do not send, and offers no
place for the checks above; its parser class is private.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterator
from dataclasses import dataclass

from caliban.providers.guard import DEFAULT_LIMITS, ByteCheck, StreamLimits


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerSentEvent:
    event: str = "message"
    """The ``event:`` field; ``message`` when the event has none."""
    data: str = ""
    id: str = ""
    """The last event ID seen on the stream."""


class SSEDecoder:
    """An incremental event-stream parser: feed it text, get the events it completes.

    Lines end at CRLF, LF or CR (also when a chunk ends between a CR and its LF); a line
    starting with ``:`` is a comment; an event is dispatched at a blank line when it has
    data; a stream's first character may be a byte-order mark; an event the stream ends
    in the middle of is dropped, as the specification says. ``retry:`` is read and ignored
    (a dropped stream is retried by the provider, not reconnected).
    """

    def __init__(self) -> None:
        self._pending = ""
        """The start of a line whose end has not arrived."""
        self._started = False
        self._after_cr = False
        """The last chunk ended with a CR, which ended a line: an LF next is its other half."""
        self._event = ""
        self._data: list[str] = []
        self._last_id = ""

    def feed(self, text: str) -> Iterator[ServerSentEvent]:
        if not text:
            return
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr:
            text = text.removeprefix("\n")
        buffer = self._pending + text
        self._after_cr = buffer.endswith("\r")
        *lines, self._pending = buffer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for line in lines:
            if (event := self._line(line)) is not None:
                yield event

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        match name:
            case "event":
                self._event = value
            case "data":
                self._data.append(value)
            case "id" if "\0" not in value:
                self._last_id = value
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        event, data = self._event, self._data
        self._event, self._data = "", []
        if not data:
            return None
        return ServerSentEvent(event=event or "message", data="\n".join(data), id=self._last_id)


async def server_sent_events(
    chunks: AsyncIterable[bytes], *, limits: StreamLimits = DEFAULT_LIMITS
) -> AsyncIterator[ServerSentEvent]:
    """The events of a response body, with its bytes checked as they arrive."""
    check = ByteCheck(limits)
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(check.feed(chunk)):
            yield event
    check.finish()
