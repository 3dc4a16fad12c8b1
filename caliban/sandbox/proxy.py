"""The domain-filtering proxy: the only way out of the sandbox's network.

Sandboxed commands reach the network through ``HTTP_PROXY``/``HTTPS_PROXY`` pointed here:
HTTPS and anything else tunnelled with ``CONNECT host:port``, plain HTTP as absolute-form
requests (``GET http://host/path``). Each names its host before a byte goes anywhere, and
only a host the rules allow is connected to; any other gets ``403`` with a body saying why,
and is remembered so a failed command can be explained to the model
(:meth:`DomainProxy.blocked_since`). One request per plain-HTTP connection: a second request
on it could name another host, so the proxy asks the server to close after the first.

It listens on ``127.0.0.1`` (a random port) and, for backends whose commands have a network
namespace of their own, also on a socket made in that namespace for the command
(:meth:`DomainProxy.serve`: bubblewrap's ``127.0.0.1:PORT``), so no process relays inside the
sandbox. It runs its own event loop in a daemon thread, so a busy agent loop never stalls a
download.

Bounded: a request head is at most :data:`MAX_HEAD_BYTES` and must arrive within
:data:`HEAD_TIMEOUT_S`; connecting upstream gives up after :data:`CONNECT_TIMEOUT_S`; at most
:data:`MAX_CONNECTIONS` are served at once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["DomainPolicy", "DomainProxy"]

MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 256
_REMEMBERED = 64
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")
_HOP_HEADERS = frozenset(
    {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}
)


@dataclass(frozen=True, kw_only=True, slots=True)
class DomainPolicy:
    """Which hosts sandboxed commands may reach: Claude Code's ``allowedDomains`` and
    ``deniedDomains`` (``example.com``: that host; ``*.example.com``: its subdomains, not
    itself), with ``WebFetch(domain:…)`` rules folded in. A denied pattern beats an allowed
    one; a host no pattern allows is blocked."""

    allowed: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()

    def refusal(self, host: str) -> str | None:
        """Why ``host`` may not be reached, or None when it may."""
        from caliban.permissions.rules import domain_matches

        if any(domain_matches(f"domain:{p}", host) for p in self.denied):
            return f"{host} is a denied domain"
        if any(domain_matches(f"domain:{p}", host) for p in self.allowed):
            return None
        return f"{host} is not in the sandbox's allowed domains"


class DomainProxy:
    """An HTTP proxy that connects only to hosts ``refusal`` has nothing against."""

    def __init__(self, refusal: Callable[[str], str | None]) -> None:
        self._refusal = refusal
        self.port = 0
        """Its TCP port on 127.0.0.1, once started."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._blocked: collections.deque[tuple[int, str]] = collections.deque(maxlen=_REMEMBERED)
        self._count = 0
        self._lock = threading.Lock()
        self._slots: asyncio.Semaphore | None = None

    def start(self) -> None:
        """Listen (blocks until it does); raises OSError when it cannot."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._thread = threading.Thread(target=serve, name="caliban-sandbox-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise OSError(f"the sandbox's proxy cannot listen: {failure[0]}")

    async def _listen(self) -> None:
        limit = MAX_HEAD_BYTES
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=limit)
        self._servers.append(server)
        self.port = server.sockets[0].getsockname()[1]
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        """Stop listening and drop open connections; waits for the thread."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join()

    def serve(self, listener: socket.socket) -> Callable[[], None]:
        """Serve the connections made to ``listener`` (a listening TCP socket, made in a
        sandboxed command's network namespace) as those to its own port, until the function
        returned is called (once the command has exited); the socket is then closed. Raises
        OSError when the proxy is not running."""
        loop = self._loop
        if loop is None or self._thread is None or not self._thread.is_alive():
            listener.close()
            raise OSError("the sandbox's proxy is not running")
        listening = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, sock=listener, limit=MAX_HEAD_BYTES), loop
        )
        server = listening.result()

        def stop() -> None:
            with contextlib.suppress(RuntimeError):  # the proxy's loop has stopped: closed
                loop.call_soon_threadsafe(server.close)

        return stop

    def mark(self) -> int:
        """A point in the record of blocked hosts, for :meth:`blocked_since`."""
        with self._lock:
            return self._count

    def blocked_since(self, mark: int) -> list[str]:
        """The refusals (``"example.com is not in the sandbox's allowed domains"``) since
        ``mark``, oldest first, each once."""
        with self._lock:
            return list(dict.fromkeys(why for number, why in self._blocked if number >= mark))

    def _remember(self, why: str) -> None:
        with self._lock:
            self._blocked.append((self._count, why))
            self._count += 1

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._slots is not None
        async with self._slots:
            try:
                await self._relay(reader, writer)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass  # the client went away, sent too much, or too slowly
            finally:
                writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        target = _target(head)
        if target is None:
            await _answer(writer, 400, "caliban's sandbox proxy: a request it cannot read")
            return
        host, port, forwarded = target
        why = self._refusal(host.strip("[]"))
        if why is not None:
            self._remember(why)
            await _answer(writer, 403, f"blocked by caliban's sandbox: {why}")
            return
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            await _answer(writer, 502, f"caliban's sandbox proxy: cannot reach {host}: {exc}")
            return
        try:
            if forwarded is None:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                upstream_writer.write(forwarded)
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            upstream_writer.close()


def _target(head: bytes) -> tuple[str, int, bytes | None] | None:
    """``(host, port, request to send upstream)`` of a request head; the request is None
    for ``CONNECT`` (a tunnel: nothing is sent). None when it cannot be read."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        return None
    method, target, version = (p.decode("latin-1") for p in parts)
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not _HOST.fullmatch(host) or not port.isdigit():
            return None
        return host, int(port), None
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        return None
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    try:
        number = url.port or 80
    except ValueError:
        return None
    if not _HOST.fullmatch(host):
        return None
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    headers = [
        line
        for line in lines[1:]
        if line and line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS
    ]
    request = [f"{method} {path} {version}".encode("latin-1"), *headers, b"Connection: close"]
    return host, number, b"\r\n".join(request) + b"\r\n\r\n"


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    blocked = "X-Proxy-Error: blocked-by-allowlist\r\n" if status == 403 else ""
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n{blocked}Connection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


async def _pipe(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            target.write(data)
            await target.drain()
        if target.can_write_eof():
            target.write_eof()
    except OSError:
        target.close()
