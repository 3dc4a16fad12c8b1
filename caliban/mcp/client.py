"""Connections to MCP servers: start them, list their tools, dispatch calls, shut them down.

:class:`McpManager` runs one long-lived asyncio task per server. That task enters the SDK's
:class:`mcp.Client` context, lists the tools, reports ``connected``, then waits until it is
told to stop or the server goes away, and leaves the context itself (the SDK's anyio scopes
must be entered and exited in one task). Starting never blocks the caller: :meth:`start`
launches the tasks and :meth:`wait_ready` awaits them.

Importing the MCP SDK takes most of a second, so this module does not import it: a stdio
server's process is launched first, and its task then waits for the SDK, imported once in a
daemon thread (:meth:`McpManager.import_sdk`). With a :class:`~caliban.mcp.catalog_cache.
CatalogCache`, each server's last tool list is known before it starts: :meth:`McpManager.tools`
serves it at once, and the server's own listing replaces it (and the cache) when it differs.

Stdio servers run in their own process group with stderr appended to
``<state dir>/mcp-logs/<server>.log`` (when that cannot be written, a server starts anyway:
its stderr's last 64 KB are kept in memory and one warning says so). On shutdown stdin is
closed, the server gets a grace period, then the whole process group is terminated, so no
server or child of one outlives the manager. Tool-list changes arrive as
``notifications/tools/list_changed`` (protocol 2025-11-25 and earlier) or through a
``subscriptions/listen`` stream (2026-07-28); either way the server's tools are listed again
and :attr:`McpManager.version` moves on when they changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import io
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, assert_never

import anyio
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.text import TextReceiveStream

from caliban import __version__
from caliban.config import paths
from caliban.mcp.config import DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, ServerConfig
from caliban.mcp.tools import (
    McpTool,
    convert_result,
    hashed_name,
    mark_data,
    tool_from_sdk,
    unique_wire_names,
)
from caliban.tools.base import ToolOutput
from caliban.util.tokens import estimate_json_tokens, json_size

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client
    from mcp.client.session import IncomingMessage
    from mcp.client.subscriptions import Subscription

    from caliban.mcp.catalog_cache import CatalogCache

State = Literal["connecting", "connected", "failed", "disabled"]
ConnectMode = Literal["auto", "legacy"]

STDERR_TAIL_LINES = 10
LOG_ROTATE_BYTES = 1_000_000
_TAIL_BYTES = 65536
STDERR_RUN_BYTES = 10 * 2**20
"""How much of a stdio server's stderr one run keeps in its log before only the latest
64 KB are kept."""
STOP_GRACE = 2.0
"""Seconds a connected stdio server gets to exit after its stdin closes."""
KILL_WAIT = 2.0
"""Seconds between SIGTERM and SIGKILL for the server's process group."""
_INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What a stdio server inherits from caliban's environment (the MCP SDK's choice)."""
_EXTRA_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
_MAX_TOOL_PAGES = 100
MAX_MESSAGE_CHARS = 64 * 2**20
"""The longest JSON-RPC message read from a stdio server; a server that writes more without
a newline is stopped (its result could never be shown whole, and the buffer would grow
without bound)."""
NOTED_LINES = 100
"""Lines on a server's stdout that are not JSON-RPC noted in its log, one by one, per run;
the rest are counted in one note (a server printing a line at a time must not grow its log
without bound)."""
IGNORED_LINE = "ignored a line on stdout that is not JSON-RPC"
MAX_ERROR_CHARS = 2_000
"""How much of a server's JSON-RPC error message reaches the model."""
REFRESH_QUIET_S = 0.25
"""After a tool-list change, wait this long before re-listing: a burst (or a flood) of
``tools/list_changed`` notifications costs one ``tools/list`` per period, not one each."""
_SDK_MODULES = (
    "mcp",
    "mcp.client.stdio",
    "mcp.client.subscriptions",
    "mcp.shared.exceptions",
    "mcp.shared.message",
    "mcp_types",
    "mcp_types.version",
)

logger = logging.getLogger(__name__)


class _SdkLoader:
    """Imports the MCP SDK once, in a daemon thread, and wakes the tasks waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = False
        self._done = False
        self._error: BaseException | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def start(self) -> None:
        """Begin the import (once); returns at once."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="caliban-mcp-sdk", daemon=True).start()

    def _load(self) -> None:
        error: BaseException | None = None
        try:
            for name in _SDK_MODULES:
                importlib.import_module(name)
        except BaseException as exc:  # handed to the waiting tasks
            error = exc
        with self._lock:
            self._done, self._error = True, error
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed by now
                loop.call_soon_threadsafe(_settle, future)

    async def wait(self, *, start: bool = True) -> None:
        """Return once the SDK is imported (starting the import unless ``start`` is False)."""
        if start:
            self.start()
        with self._lock:
            future = None
            if not self._done:
                future = asyncio.get_running_loop().create_future()
                self._waiters.append((asyncio.get_running_loop(), future))
        if future is not None:
            await future
        if self._error is not None:
            raise RuntimeError(f"the MCP SDK could not be imported: {self._error}")


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_SDK = _SdkLoader()


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """What ``caliban mcp list`` and ``/mcp`` show for one server."""

    name: str
    transport: str
    """stdio, http, sse or in-process."""
    state: State
    error: str | None = None
    """Why it failed (``exited with code 1``, ``did not start within 10s``, …)."""
    stderr_tail: tuple[str, ...] = ()
    """The last lines the server wrote to stderr in its latest run."""
    tool_count: int = 0
    tool_chars: int = 0
    """Characters of its tool definitions as sent to the model (compact JSON)."""
    tool_tokens: int = 0
    """Estimated tokens of those definitions (:mod:`caliban.util.tokens`)."""
    protocol_version: str | None = None
    pid: int | None = None
    log_path: Path | None = None
    connect_seconds: float | None = None
    """How long the latest successful connection took."""
    lazy: bool | None = None
    skipped: tuple[str, ...] = ()
    """Tools left out because their definitions are invalid (``'name': where: why``)."""


def log_dir() -> Path:
    return paths.state_dir() / "mcp-logs"


def log_path(server: str) -> Path:
    """Where a server's stderr (and caliban's notes about it) are appended."""
    return log_dir() / f"{server}.log"


# ---------------------------------------------------------------------------- stdio


@dataclass(kw_only=True)
class _Proc:
    """The live server process of one connection attempt."""

    process: Process | None = None
    grace: float = STOP_GRACE
    stopping: bool = False
    stopped: bool = False
    """Its stop has begun (by the transport, or by the connection task)."""
    exited: bool = False
    """The server closed its stdout before we asked it to stop."""
    violation: str | None = None
    """How the server broke the protocol so badly that caliban cut the connection."""
    drain: asyncio.Task[None] | None = None
    """Copies the server's stderr to its log."""
    drained: anyio.Event = field(default_factory=anyio.Event)


def _server_env(config: ServerConfig) -> dict[str, str]:
    env = {}
    for key in _INHERITED_ENV:
        value = os.environ.get(key)
        if value is not None and not value.startswith("()"):  # not an exported shell function
            env[key] = value
    for key in _EXTRA_ENV:
        if key in os.environ:
            env[key] = os.environ[key]
    return env | dict(config.env)


async def _wait_exit(process: Process, seconds: float) -> bool:
    # Not process.wait(): on asyncio it also waits for pipe EOF, which a child can hold open.
    deadline = anyio.current_time() + seconds
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True


def _group_has_live_members(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if not sys.platform.startswith("linux"):
        return True
    # Orphaned zombies wait for init to reap them, which can take a while; they are dead.
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def _terminate_group(pgid: int, seconds: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever still runs after ``seconds``."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        pass
    deadline = anyio.current_time() + seconds
    while _group_has_live_members(pgid):
        if anyio.current_time() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            return
        await anyio.sleep(0.02)


async def _stop_process(process: Process, grace: float, drained: anyio.Event | None = None) -> None:
    """Close stdin, wait ``grace`` seconds, then terminate the server's whole process group
    (its pgid is its pid: it was started in a new session). Children it leaves behind in its
    group are terminated too, so none becomes an orphan."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    await _wait_exit(process, grace)
    await _terminate_group(process.pid, KILL_WAIT)
    await _wait_exit(process, KILL_WAIT)
    if drained is not None:  # its last stderr lines, before the pipe is closed
        with anyio.move_on_after(1.0):
            await drained.wait()
    with anyio.move_on_after(1.0):
        await process.aclose()


async def _spawn(config: ServerConfig, errlog: IO[bytes], proc: _Proc) -> Process:
    """Start a stdio server in its own session (its process group is ours to terminate),
    its stderr copied to ``errlog`` by a task of its own."""
    process = await anyio.open_process(
        [config.command or "", *config.args],
        env=_server_env(config),
        cwd=config.cwd,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stderr is not None
    proc.drain = asyncio.get_running_loop().create_task(
        _drain_stderr(process.stderr, errlog, proc.drained)
    )
    return process


async def _drain_stderr(stream: ByteReceiveStream, log: IO[bytes], done: anyio.Event) -> None:
    """Copy a server's stderr to its log: the first ``STDERR_RUN_BYTES`` of the run, then only
    the latest ``_TAIL_BYTES`` (written at the end, after a note of what was dropped), so a
    server that floods stderr neither fills the disk nor hides its last words."""
    written = dropped = 0
    recent = bytearray()
    try:
        async for chunk in stream:
            if written < STDERR_RUN_BYTES:
                kept = chunk[: STDERR_RUN_BYTES - written]
                with contextlib.suppress(OSError, ValueError):
                    log.write(kept)
                    log.flush()
                written += len(kept)
                chunk = chunk[len(kept) :]
            if chunk:
                recent += chunk
                if len(recent) > _TAIL_BYTES:
                    dropped += len(recent) - _TAIL_BYTES
                    del recent[: len(recent) - _TAIL_BYTES]
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass
    finally:
        if dropped:
            _note(log, f"dropped {dropped:,} bytes of stderr past {STDERR_RUN_BYTES:,} in this run")
        if recent:
            with contextlib.suppress(OSError, ValueError):
                log.write(bytes(recent))
                log.flush()
        done.set()


async def _drained(proc: _Proc) -> None:
    """Wait (briefly) until the server's stderr is in its log, so its tail can be read."""
    if proc.drain is None:
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
        await proc.drained.wait()
    proc.drain.cancel()  # a grandchild outside the group may hold stderr open


async def _stop_spawned(proc: _Proc) -> None:
    """Stop a spawned server whose transport never took it over (or did not stop it)."""
    if proc.process is None or proc.stopped:
        return
    proc.stopped = True
    with anyio.CancelScope(shield=True):
        await _stop_process(proc.process, proc.grace, proc.drained)


@asynccontextmanager
async def _stdio_transport(
    process: Process, errlog: IO[bytes], proc: _Proc, on_exit: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """Like the SDK's ``stdio_client`` over an already running server: it exposes the process
    (for its PID and exit code), notices when the server exits, and always cleans up the
    server's process group."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        pending: list[str] = []  # the unfinished line, in pieces: joined once, not per chunk
        size = 0
        delivering = True
        ignored = 0
        try:
            async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                *lines, rest = chunk.split("\n")
                if lines:
                    lines[0] = "".join([*pending, lines[0]])
                    pending, size = [], 0
                if rest:
                    pending.append(rest)
                    size += len(rest)
                if size > MAX_MESSAGE_CHARS or any(len(ln) > MAX_MESSAGE_CHARS for ln in lines):
                    proc.violation = (
                        f"sent a message over {MAX_MESSAGE_CHARS // 2**20} MB on stdout"
                    )
                    _note(errlog, f"{proc.violation}: stopping the server")
                    break
                for line in lines:
                    if not delivering or not line.strip():
                        continue
                    try:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(
                            line, by_name=False
                        )
                    except ValueError:
                        ignored += 1
                        if ignored <= NOTED_LINES:
                            _note(errlog, f"{IGNORED_LINE}: {line[:200]}")
                        message = _error_for_malformed_answer(line)
                        if message is None:
                            continue
                    try:
                        await read_send.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        delivering = False  # keep draining so the server never blocks on stdout
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            if ignored > NOTED_LINES:
                _note(errlog, f"{IGNORED_LINE}: {ignored - NOTED_LINES:,} more in this run")
            if not proc.stopping:
                proc.exited = True
                on_exit()
            read_send.close()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            if not proc.stopping:
                on_exit()  # the server stopped reading: the connection is gone
            read_send.close()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            proc.stopping = True
            with anyio.CancelScope(shield=True):
                read_recv.close()
                write_send.close()
                with anyio.move_on_after(0.5):
                    await writer_done.wait()
                proc.stopped = True
                await _stop_process(process, proc.grace, proc.drained)
            tg.cancel_scope.cancel()


def _error_for_malformed_answer(line: str) -> Any:
    """An error answer for a line that names a request's id but is not a valid answer, so the
    request fails now instead of waiting for its timeout; None for other lines."""
    import mcp_types

    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not ("result" in data or "error" in data):
        return None
    ident = data.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return None
    return mcp_types.JSONRPCError(
        jsonrpc="2.0",
        id=ident,
        error=mcp_types.ErrorData(
            code=mcp_types.PARSE_ERROR,
            message=f"the server's answer is not valid JSON-RPC: {_clip(line, 200)}",
        ),
    )


@asynccontextmanager
async def _http_transport(config: ServerConfig, proc: _Proc) -> AsyncIterator[tuple[Any, Any]]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)
    transport = _bounded_http_transport(proc)
    async with (
        httpx2.AsyncClient(
            headers=dict(config.headers), timeout=timeout, transport=transport
        ) as http,
        streamable_http_client(config.url or "", http_client=http) as streams,
    ):
        yield streams


_EVENT_END = re.compile(rb"\r?\n\r?\n")


def _bounded_http_transport(proc: _Proc) -> Any:
    """An httpx transport that stops reading an answer past ``MAX_MESSAGE_CHARS`` bytes
    instead of reading it into memory whole: a whole body, or, for an event stream (which
    can last as long as the session), one event."""
    import httpx2

    class ResponseTooLarge(httpx2.StreamError, httpx2.SSEError):
        """Caught by the SDK both where it reads a JSON answer and where it reads SSE."""

    class Bounded(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, *, events: bool, stream: bool) -> None:
            self._inner = inner
            self._events = events
            self._stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            tail = b""  # an event's end may be split between chunks
            async for chunk in self._inner:
                if self._events:
                    ends = list(_EVENT_END.finditer(tail + chunk))
                    seen = len(tail) + len(chunk) - ends[-1].end() if ends else seen + len(chunk)
                    tail = chunk[-3:]
                else:
                    seen += len(chunk)
                if seen > MAX_MESSAGE_CHARS:
                    if self._stream:  # the GET stream: this ends the connection, so say why
                        proc.violation = f"sent a message over {MAX_MESSAGE_CHARS // 2**20} MB"
                    raise ResponseTooLarge(
                        f"the server's answer is over {MAX_MESSAGE_CHARS // 2**20} MB"
                    )
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            response.stream = Bounded(
                response.stream,
                events=kind == "text/event-stream",
                stream=request.method == "GET",
            )
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Transport()


def _bounded_http_client(proc: _Proc) -> Callable[..., Any]:
    """The SDK's HTTP client factory for the SSE transport, over
    :func:`_bounded_http_transport`."""
    import httpx2

    def create(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            transport=_bounded_http_transport(proc),
        )

    return create


def _note(log: IO[bytes], text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with contextlib.suppress(OSError, ValueError):
        log.write(f"[caliban {stamp}] {text}\n".encode())
        log.flush()


class _MemoryLog(io.BytesIO):
    """Stands in for a log file that cannot be written: it keeps only the latest
    ``_TAIL_BYTES`` (plus as much again before trimming), enough for :func:`_tail`."""

    def write(self, data: Any) -> int:
        written = super().write(data)
        if self.tell() > 2 * _TAIL_BYTES:
            kept = self.getvalue()[-_TAIL_BYTES:]
            self.seek(0)
            self.truncate()
            super().write(kept)
        return written

    def close(self) -> None:
        """Kept open: the run's tail stays readable after it ends (at most 128 KB)."""


def _open_log(server: str) -> tuple[IO[bytes], int, str | None]:
    """The server's log file opened for appending and its size; when it cannot be written,
    a :class:`_MemoryLog` and why (so the server still starts)."""
    path = log_path(server)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if path.stat().st_size > LOG_ROTATE_BYTES:
                path.replace(path.with_suffix(".log.1"))
        log = path.open("ab")
    except OSError as exc:
        return _MemoryLog(), 0, exc.strerror or type(exc).__name__
    return log, log.tell(), None


def _tail(log: IO[bytes], server: str, offset: int) -> tuple[str, ...]:
    """The server's last stderr lines of this run, from its log file or its memory log."""
    if isinstance(log, _MemoryLog):
        return _tail_lines(log.getvalue())
    return read_tail(log_path(server), offset)


def read_tail(path: Path, offset: int = 0, lines: int = STDERR_TAIL_LINES) -> tuple[str, ...]:
    """The last ``lines`` non-empty lines of ``path`` after byte ``offset``, without caliban's
    own notes."""
    try:
        with path.open("rb") as f:
            # Only the end: a server can write gigabytes to stderr.
            f.seek(max(offset, f.seek(0, os.SEEK_END) - _TAIL_BYTES))
            data = f.read(_TAIL_BYTES)
    except OSError:
        return ()
    return _tail_lines(data, lines)


def _tail_lines(data: bytes, lines: int = STDERR_TAIL_LINES) -> tuple[str, ...]:
    text = data[-_TAIL_BYTES:].decode("utf-8", errors="replace")
    kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("[caliban ")]
    return tuple(kept[-lines:])


def _describe_invalid_answer(exc: BaseException) -> str | None:
    """One line for a server answer the SDK's models rejected (pydantic's own text has a line
    per problem, each with a URL); None for other exceptions."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(exc, pydantic.ValidationError):
        return None
    problems = exc.errors()
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return f"invalid {exc.title} from the server: {where}: {first['msg']}{more}"


def _describe(exc: BaseException, config: ServerConfig | None) -> str:
    """One line saying why a connection failed."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        leaves = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (leaves or list(exc.exceptions))[0]
    if isinstance(exc, FileNotFoundError) and config is not None and config.command:
        return f"command not found: {config.command!r} (is it installed and on PATH?)"
    if isinstance(exc, PermissionError) and config is not None and config.command:
        return f"cannot run {config.command!r}: permission denied"
    if (invalid := _describe_invalid_answer(exc)) is not None:
        return invalid
    exceptions = sys.modules.get("mcp.shared.exceptions")  # only ever raised once imported
    if exceptions is not None and isinstance(exc, exceptions.MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    text = str(exc) or type(exc).__name__
    name = type(exc).__name__
    if "ConnectError" in name or isinstance(exc, ConnectionError):
        return f"cannot connect to {config.url if config else 'server'}: {text}"
    return f"{name}: {text}"


# ---------------------------------------------------------------------------- manager


def _set_tools(conn: _Conn, tools: tuple[McpTool, ...]) -> None:
    conn.tools = tools
    conn.tool_chars = sum(json_size(t.spec.as_dict()) for t in tools)
    conn.tool_tokens = sum(estimate_json_tokens(t.spec.as_dict()) for t in tools)


def _spawns_itself(conn: _Conn) -> bool:
    """Whether caliban launches this server's process itself (stdio, not on Windows, where
    the SDK's own transport runs it: no process groups there)."""
    config = conn.config
    return (
        conn.in_process is None
        and config is not None
        and config.transport == "stdio"
        and sys.platform != "win32"
    )


@dataclass(kw_only=True)
class _Conn:
    name: str
    config: ServerConfig | None
    in_process: Any = None
    state: State = "connecting"
    error: str | None = None
    stderr_tail: tuple[str, ...] = ()
    client: Client | None = None
    tools: tuple[McpTool, ...] = ()
    listed: bool = False
    """The server listed its tools in this session."""
    cached: bool = False
    """``tools`` came from the cache (until the server lists its own)."""
    tool_chars: int = 0
    tool_tokens: int = 0
    protocol_version: str | None = None
    pid: int | None = None
    connect_seconds: float | None = None
    task: asyncio.Task[None] | None = None
    scope: anyio.CancelScope | None = None
    attempt: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    refresh: asyncio.Event = field(default_factory=asyncio.Event)
    log: IO[bytes] | None = None
    """The latest run's log: its file, or a :class:`_MemoryLog` when that cannot be written."""
    log_offset: int = 0
    lost: bool = False
    skipped: tuple[str, ...] = ()
    stop: bool = False
    proc: _Proc | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def transport(self) -> str:
        if self.in_process is not None:
            return "in-process"
        return self.config.transport if self.config else "?"

    @property
    def startup_timeout(self) -> float:
        return self.config.startup_timeout if self.config else DEFAULT_STARTUP_TIMEOUT

    @property
    def tool_timeout(self) -> float:
        return self.config.tool_timeout if self.config else DEFAULT_TOOL_TIMEOUT


class McpManager:
    """Connections to a set of MCP servers, and the tools they offer.

    Use as ``async with McpManager(servers) as manager:`` (which starts the servers without
    waiting for them) or call :meth:`start` and :meth:`aclose` yourself, from one event loop.
    ``in_process`` maps server names to SDK server objects (``MCPServer`` or a lowlevel
    ``Server``) connected in-process, for tests and embedded servers. With ``catalog_cache``,
    each configured server's last tool list is served until the server lists its own.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig] = (),
        *,
        in_process: Mapping[str, Any] | None = None,
        connect_mode: ConnectMode = "auto",
        catalog_cache: CatalogCache | None = None,
    ) -> None:
        self._mode = connect_mode
        self._cache = catalog_cache
        self._conns: dict[str, _Conn] = {}
        for config in servers:
            conn = self._conns[config.name] = _Conn(name=config.name, config=config)
            if catalog_cache is not None and not config.disabled:
                cached = catalog_cache.load(config, dispatcher=self)
                if cached is not None:
                    _set_tools(conn, cached)
                    conn.cached = True
        for name, server in (in_process or {}).items():
            existing = self._conns.get(name)
            self._conns[name] = _Conn(
                name=name, config=existing.config if existing else None, in_process=server
            )
        for conn in self._conns.values():
            if conn.config is not None and conn.config.disabled:
                conn.state = "disabled"
                conn.ready.set()
        self._version = 0
        self._listeners: list[Callable[[int], None]] = []
        self._changed = asyncio.Event()
        self._tools_cache: tuple[int, tuple[McpTool, ...]] | None = None
        self._status_pulse = asyncio.Event()
        self._started = False
        self._closed = False
        self._hold_sdk = False
        self._warnings: list[str] = []
        self._warning_listeners: list[Callable[[str], None]] = []
        self._unlogged_warned = False

    # -- lifecycle

    async def __aenter__(self) -> McpManager:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self, *, import_sdk: bool = True) -> None:
        """Start every enabled server in the background; returns at once.

        Stdio servers' processes are launched first; their connections wait for the MCP SDK.
        ``import_sdk=False`` leaves its import to a later :meth:`import_sdk` (or to the
        first wait for a server or call of a tool), so it does not compete with more urgent
        start-up work while every tool is known from the cache. Waiting for a server or
        calling a tool starts a manager nobody started.
        """
        if self._started or self._closed:
            return
        self._started = True
        self._hold_sdk = not import_sdk
        _route_sdk_logging()
        for conn in self._conns.values():
            if conn.state != "disabled":
                self._launch(conn)

    def import_sdk(self) -> None:
        """Start importing the MCP SDK in a daemon thread, if nothing has yet."""
        self._hold_sdk = False
        _SDK.start()

    async def wait_ready(self, timeout: float | None = None) -> list[ServerStatus]:  # noqa: ASYNC109
        """Wait until every server is connected or has failed (or ``timeout`` passes)."""
        return await self.wait_listed(list(self._conns), timeout)

    def unlisted(self) -> tuple[str, ...]:
        """Servers still starting whose tools are not known yet (not listed, none cached)."""
        return tuple(
            conn.name
            for conn in self._conns.values()
            if conn.state == "connecting" and not conn.listed and not conn.cached
        )

    async def wait_listed(
        self,
        names: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109 - an overall bound, applied with anyio
    ) -> list[ServerStatus]:
        """Wait until each of ``names`` is connected or has failed (each is bounded by its
        own start-up timeout; ``timeout`` bounds the whole wait). Returns their statuses."""
        conns = [self._conns[name] for name in names]
        if any(conn.state == "connecting" for conn in conns):
            self.start()
            self.import_sdk()
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            for conn in conns:
                await conn.ready.wait()
        return [self.status(conn.name) for conn in conns]

    async def aclose(self) -> None:
        """Stop every server and wait until their processes are gone."""
        self._closed = True
        tasks = []
        for conn in self._conns.values():
            conn.stop = True
            conn.wake.set()
            if conn.state == "connecting":
                if conn.proc is not None:
                    conn.proc.grace = 0.0  # nothing to save in a server that never started
                if conn.scope is not None:
                    conn.scope.cancel()
            if conn.task is not None:
                tasks.append(conn.task)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE + 2 * KILL_WAIT + 3)
        for task in pending:  # only a wedged SDK gets here
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2)

    # -- state

    @property
    def version(self) -> int:
        """Moves on whenever the set of tools (or their definitions) changes."""
        return self._version

    def on_warning(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(text)`` with each warning for the user (those given before are
        replayed), such as a server log that cannot be written."""
        self._warning_listeners.append(callback)
        for text in self._warnings:
            callback(text)

    def _warn(self, text: str) -> None:
        self._warnings.append(text)
        for callback in list(self._warning_listeners):
            callback(text)

    def _warn_unlogged(self, problem: str) -> None:
        """Once per manager: the servers run without log files (they still start)."""
        if self._unlogged_warned:
            return
        self._unlogged_warned = True
        self._warn(
            f"cannot write MCP server logs in {log_dir()} ({problem}); servers run without "
            "a log file and only their last stderr lines are kept"
        )

    def on_change(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(version)`` after each tool-list change; returns an unsubscribe."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    async def wait_for_state(self, name: str, *states: State) -> ServerStatus:
        """Wait until server ``name`` is in one of ``states``."""
        while self._conns[name].state not in states:
            await self._status_pulse.wait()
        return self.status(name)

    async def wait_for_change(self, since: int) -> int:
        """Wait until :attr:`version` differs from ``since``; returns the new version."""
        while self._version == since:
            self._changed.clear()
            await self._changed.wait()
        return self._version

    def _bump(self) -> None:
        self._version += 1
        self._tools_cache = None
        self._changed.set()
        for callback in list(self._listeners):
            try:
                callback(self._version)
            except Exception:
                logger.exception("MCP tool-change listener failed")

    def tools(self) -> tuple[McpTool, ...]:
        """Tools of every server that has listed them: config order, then the server's order.

        A server that died keeps its last tool list, so calling one of its tools reconnects.
        """
        if self._tools_cache is None or self._tools_cache[0] != self._version:
            tools: list[McpTool] = []
            seen: set[str] = set()
            for conn in self._conns.values():
                for tool in conn.tools:
                    if tool.name in seen:  # server "a" tool "b__c" vs server "a__b" tool "c"
                        tool = dataclasses.replace(
                            tool, name=hashed_name(tool.name, tool.server, tool.tool_name)
                        )
                    seen.add(tool.name)
                    tools.append(tool)
            self._tools_cache = (self._version, tuple(tools))
        return self._tools_cache[1]

    def server_names(self) -> list[str]:
        return list(self._conns)

    def server_config(self, name: str) -> ServerConfig | None:
        conn = self._conns.get(name)
        return conn.config if conn else None

    def status(self, name: str) -> ServerStatus:
        conn = self._conns[name]
        return ServerStatus(
            name=conn.name,
            transport=conn.transport,
            state=conn.state,
            error=conn.error,
            stderr_tail=conn.stderr_tail,
            tool_count=len(conn.tools),
            tool_chars=conn.tool_chars,
            tool_tokens=conn.tool_tokens,
            protocol_version=conn.protocol_version,
            pid=conn.pid,
            log_path=(
                log_path(conn.name)
                if conn.transport == "stdio" and not isinstance(conn.log, _MemoryLog)
                else None
            ),
            connect_seconds=conn.connect_seconds,
            lazy=conn.config.lazy if conn.config else None,
            skipped=conn.skipped,
        )

    def statuses(self) -> list[ServerStatus]:
        return [self.status(name) for name in self._conns]

    # -- connections

    def _launch(self, conn: _Conn) -> None:
        conn.attempt += 1
        self._set_state(conn, "connecting")
        conn.lost = False
        conn.ready = asyncio.Event()
        conn.wake = asyncio.Event()
        conn.task = asyncio.get_running_loop().create_task(
            self._run(conn, conn.attempt), name=f"mcp-server-{conn.name}"
        )
        loop = asyncio.get_running_loop()
        loop.call_later(conn.startup_timeout, self._startup_expired, conn, conn.attempt)

    def _startup_expired(self, conn: _Conn, attempt: int) -> None:
        # Report at once; the runner task tears the attempt down in the background.
        if conn.attempt != attempt or conn.state != "connecting":
            return
        if conn.in_process is None and conn.log is not None:
            conn.stderr_tail = _tail(conn.log, conn.name, conn.log_offset)
        self._set_state(conn, "failed", f"did not finish starting within {conn.startup_timeout:g}s")
        if conn.proc is not None:
            conn.proc.grace = 0.0
        conn.ready.set()

    def _set_state(self, conn: _Conn, state: State, error: str | None = None) -> None:
        conn.state = state
        conn.error = error
        pulse, self._status_pulse = self._status_pulse, asyncio.Event()
        pulse.set()

    async def _run(self, conn: _Conn, attempt: int) -> None:
        if conn.stop:  # closed before this task got to run
            conn.ready.set()
            return
        started = time.perf_counter()
        log: IO[bytes] | None = None
        offset = 0
        proc = _Proc()
        conn.proc = proc
        reason: str | None = None
        timed_out = False
        try:
            if conn.in_process is None:
                log, offset, problem = _open_log(conn.name)
                conn.log, conn.log_offset = log, offset
                if problem is not None:
                    self._warn_unlogged(problem)
                assert conn.config is not None
                _note(log, f"starting {conn.config.transport} server: {conn.config.target}")
            with anyio.CancelScope() as scope:
                conn.scope = scope
                scope.deadline = anyio.current_time() + conn.startup_timeout
                async with AsyncExitStack() as stack:
                    config = conn.config
                    if log is not None and _spawns_itself(conn):
                        assert config is not None
                        # The server boots while the SDK is imported.
                        stack.push_async_callback(_stop_spawned, proc)
                        proc.process = await _spawn(config, log, proc)
                        conn.pid = proc.process.pid
                    await _SDK.wait(start=not self._hold_sdk)
                    client = await stack.enter_async_context(self._client(conn, log, proc))
                    conn.pid = proc.process.pid if proc.process else None
                    # Subscribe before listing, so no change can fall between the two.
                    subscription = await self._subscribe(stack, conn, client)
                    changed = await self._list_tools(conn, client)
                    scope.deadline = math.inf
                    if conn.attempt != attempt or conn.stop:
                        return
                    conn.client = client
                    conn.protocol_version = client.protocol_version
                    conn.connect_seconds = time.perf_counter() - started
                    conn.stderr_tail = ()
                    self._set_state(conn, "connected")
                    conn.ready.set()
                    if log is not None:
                        _note(
                            log, f"connected ({client.protocol_version}, {len(conn.tools)} tools)"
                        )
                    if changed:  # the same list as the cache's: the catalog stays as it is
                        self._bump()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._refresher, conn, client)
                        if subscription is not None:
                            tg.start_soon(self._follow, conn, client, subscription)
                        await conn.wake.wait()
                        tg.cancel_scope.cancel()
                    if conn.lost and not conn.stop:
                        reason = "the server closed the connection"
            if scope.cancelled_caught and not conn.stop:
                timed_out = True
                reason = f"did not finish starting within {conn.startup_timeout:g}s"
        except Exception as exc:
            reason = _describe(exc, conn.config)
        finally:
            if proc.violation is not None:
                reason = proc.violation
            elif proc.exited and proc.process is not None and proc.process.returncode is not None:
                code = proc.process.returncode
                how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                reason = how if conn.state == "connected" else f"{how} while starting"
            await _drained(proc)
            tail = _tail(log, conn.name, offset) if log is not None else ()
            if log is not None:
                _note(log, f"stopped: {reason}" if reason else "stopped")
                log.close()
            if conn.attempt == attempt:
                conn.client = None
                conn.scope = None
                if log is not None:
                    conn.stderr_tail = tail
                if conn.stop:
                    if conn.state == "connecting":
                        self._set_state(conn, "failed", "stopped before it finished starting")
                elif reason is not None:
                    # A timeout already reported keeps its message.
                    keep = conn.state == "failed" and conn.error is not None
                    if conn.state == "connecting" and not timed_out:
                        self._forget_cached(conn)
                    self._set_state(conn, "failed", conn.error if keep else reason)
                conn.ready.set()

    def _forget_cached(self, conn: _Conn) -> None:
        """A server that fails to start is not announced from the cache next time (a slow
        one is: it timed out, it may start next time)."""
        if self._cache is not None and conn.config is not None:
            self._cache.forget(conn.config)

    def _client(self, conn: _Conn, log: IO[bytes] | None, proc: _Proc) -> Client:
        import mcp_types
        from mcp import Client

        def lost() -> None:
            conn.lost = True
            conn.wake.set()

        async def handle(message: IncomingMessage) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                conn.refresh.set()

        server: Any
        if conn.in_process is not None:
            server = conn.in_process
        else:
            config = conn.config
            assert config is not None and log is not None
            match config.transport:
                case "stdio":
                    if not _spawns_itself(conn):  # pragma: no cover - no process groups there
                        from mcp.client.stdio import StdioServerParameters, stdio_client

                        params = StdioServerParameters(
                            command=config.command or "",
                            args=list(config.args),
                            env=dict(config.env),
                            cwd=config.cwd,
                        )
                        server = stdio_client(params, errlog=log)  # type: ignore[arg-type]
                    else:
                        assert proc.process is not None
                        server = _stdio_transport(proc.process, log, proc, lost)
                case "http":
                    server = _http_transport(config, proc)
                case "sse":
                    from mcp.client.sse import sse_client

                    server = sse_client(
                        config.url or "",
                        headers=dict(config.headers),
                        httpx_client_factory=_bounded_http_client(proc),
                    )
                case _:
                    assert_never(config.transport)
        return Client(
            server,
            mode=self._mode,
            cache=None,
            message_handler=handle,
            client_info=mcp_types.Implementation(name="caliban", version=__version__),
        )

    async def _list_tools(self, conn: _Conn, client: Client) -> bool:
        """List the server's tools into ``conn`` (and the cache); True when they changed."""
        from pydantic import ValidationError

        listed: list[mcp_types.Tool] = []
        skipped: list[str] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            try:
                page = await client.list_tools(cursor=cursor)
            except ValidationError:
                # One malformed tool must not take the server's other tools with it.
                lenient = await _lenient_tools_page(client, cursor, skipped)
                if lenient is None:
                    raise
                page = lenient
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        if skipped and skipped != list(conn.skipped):
            logger.warning("%s: skipped tools with invalid definitions: %s", conn.name, skipped)
        conn.skipped = tuple(skipped)
        names = unique_wire_names(conn.name, [t.name for t in listed])
        tools = tuple(
            tool_from_sdk(conn.name, t, wire=w, timeout=conn.tool_timeout, dispatcher=self)
            for t, w in zip(listed, names, strict=True)
        )
        first, conn.listed = not conn.listed, True
        changed = tools != conn.tools
        if changed:
            _set_tools(conn, tools)
        if (changed or first) and self._cache is not None and conn.config is not None:
            self._cache.store(conn.config, tools)
        return changed

    async def _refresher(self, conn: _Conn, client: Client) -> None:
        while True:
            await conn.refresh.wait()
            await asyncio.sleep(REFRESH_QUIET_S)
            conn.refresh.clear()
            try:
                with anyio.fail_after(conn.startup_timeout):
                    changed = await self._list_tools(conn, client)
            except Exception as exc:
                logger.warning("re-listing tools of %s failed: %s", conn.name, exc)
                continue
            if changed:
                self._bump()

    async def _subscribe(
        self, stack: AsyncExitStack, conn: _Conn, client: Client
    ) -> Subscription | None:
        """2026-07-28: change events only come through a ``subscriptions/listen`` stream."""
        from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
        from mcp.shared.exceptions import MCPError
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None  # older servers send notifications/tools/list_changed unasked
        try:
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError) as exc:
            logger.info("%s: no tool-list subscription: %s", conn.name, exc)
            return None
        return subscription if subscription.honored.tools_list_changed else None

    async def _follow(self, conn: _Conn, client: Client, subscription: Subscription) -> None:
        from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
        from mcp.shared.exceptions import MCPError

        try:
            async for _event in subscription:
                conn.refresh.set()
            return
        except SubscriptionLost:
            pass
        for _ in range(3):  # no replay after a lost stream: listen again, then refetch
            try:
                async with client.listen(tools_list_changed=True) as again:
                    conn.refresh.set()
                    async for _event in again:
                        conn.refresh.set()
                return
            except SubscriptionLost:
                continue
            except (ListenNotSupportedError, MCPError, TimeoutError):
                return

    async def _connected_client(self, conn: _Conn) -> Client | None:
        """The live client, reconnecting a server that died or failed."""
        if conn.client is not None and not conn.lost:
            return conn.client
        async with conn.lock:
            if conn.client is not None and not conn.lost:
                return conn.client
            if conn.state == "disabled" or self._closed:
                return None
            if not self._started:
                self.start()
            self.import_sdk()  # a call needs its server now
            if conn.state != "connecting":
                if conn.task is not None and not conn.task.done():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(conn.task), STOP_GRACE + KILL_WAIT)
                self._launch(conn)
            await conn.ready.wait()
            return conn.client if conn.state == "connected" else None

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,  # noqa: ASYNC109 - per-call limit, applied with fail_after
    ) -> ToolOutput:
        """Call ``tool`` (its original name) on ``server``. Failures become error results."""
        conn = self._conns.get(server)
        if conn is None:
            return ToolOutput.error(f"Unknown MCP server {server!r}.")
        if conn.state == "disabled":
            return ToolOutput.error(f"MCP server {server!r} is disabled in its configuration.")
        client = await self._connected_client(conn)
        if client is None:
            return ToolOutput.error(self._unavailable(conn))
        from mcp.shared.exceptions import MCPError

        limit = timeout if timeout is not None else conn.tool_timeout
        try:
            with anyio.fail_after(limit):
                result = await client.call_tool(tool, dict(arguments))
        except TimeoutError:
            return ToolOutput.error(
                f"Tool {tool!r} on MCP server {server!r} timed out after {limit:g}s; "
                "it may still be running on the server (the limit is tool_timeout in mcp.toml)."
            )
        except MCPError as exc:
            if _connection_closed(exc, conn):
                conn.lost = True
                conn.wake.set()
                violation = conn.proc.violation if conn.proc is not None else None
                if violation is not None:
                    how = (
                        "stopped it and will restart it"
                        if _spawns_itself(conn)
                        else "closed the connection and will open it again"
                    )
                    return ToolOutput.error(
                        f"MCP server {server!r} {violation} during the call to {tool!r}; "
                        f"caliban {how} on the next call."
                    )
                return ToolOutput.error(
                    f"MCP server {server!r} closed the connection during the call to {tool!r} "
                    "(it may have crashed); caliban will restart it on the next call."
                )
            # The message is the server's words: bounded, and marked as its data.
            return ToolOutput.error(
                f"MCP server {server!r} rejected {tool!r} (error {exc.code}):\n"
                + mark_data(_clip(exc.message, MAX_ERROR_CHARS), server=server, tool=tool)
            )
        except Exception as exc:
            detail = _describe_invalid_answer(exc) or str(exc)
            return ToolOutput.error(
                f"Calling {tool!r} on MCP server {server!r} failed: "
                + _clip(detail, MAX_ERROR_CHARS)
            )
        return convert_result(result, server=server, tool=tool)

    def _unavailable(self, conn: _Conn) -> str:
        lines = [f"MCP server {conn.name!r} is not available: {conn.error or conn.state}."]
        if conn.stderr_tail:
            lines.append("Its last stderr lines:")
            lines.extend(f"  {line}" for line in conn.stderr_tail[-5:])
        return "\n".join(lines)


def _connection_closed(exc: Any, conn: _Conn) -> bool:
    """Whether an SDK error means the connection is gone, not that the server answered with
    an error: -32000 is the SDK's code for a closed connection and also the first of JSON-RPC's
    server-defined codes, which servers use for their own failures."""
    import mcp_types

    if conn.lost:
        return True
    if exc.code != mcp_types.CONNECTION_CLOSED:
        return False
    if _spawns_itself(conn):
        return False  # our own transport sets conn.lost when the server goes away
    return bool(exc.message == "Connection closed")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"


async def _lenient_tools_page(
    client: Client, cursor: str | None, skipped: list[str]
) -> mcp_types.ListToolsResult | None:
    """A ``tools/list`` page with the tools the SDK would reject left out (and described in
    ``skipped``), or None when this SDK's internals are not the ones this relies on.

    The SDK validates a listing whole, so a page is fetched raw, each tool is validated on its
    own, and the valid ones are handed back to the session (which records their output
    schemas, as its own listing does)."""
    import mcp_types
    from mcp_types.methods import validate_server_result
    from pydantic import ValidationError

    session = client.session
    dispatcher = getattr(session, "_dispatcher", None)
    absorb = getattr(session, "_absorb_tool_listing", None)
    if dispatcher is None or absorb is None:
        return None
    raw = await dispatcher.send_raw_request("tools/list", {"cursor": cursor} if cursor else None)
    items = raw.get("tools") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        return None
    tools: list[mcp_types.Tool] = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        label = repr(_clip(name, 80)) if isinstance(name, str) else f"#{index + 1}"
        try:
            # The protocol version's own shape (an input schema of type "object"), then the
            # SDK's model, as the SDK validates a whole listing.
            validate_server_result("tools/list", client.protocol_version, {"tools": [item]})
            tools.append(mcp_types.Tool.model_validate(item, by_name=False))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = first["loc"][2:] if first["loc"][:1] == ("tools",) else first["loc"]
            where = ".".join(str(part) for part in loc)
            skipped.append(f"{label}: {where}: {first['msg']}")
    next_cursor = raw.get("nextCursor")
    page = mcp_types.ListToolsResult(
        tools=tools, next_cursor=next_cursor if isinstance(next_cursor, str) else None
    )
    absorbed: mcp_types.ListToolsResult = absorb(page, complete=cursor is None and not next_cursor)
    return absorbed


_sdk_logging_routed = False


def _route_sdk_logging() -> None:
    """The SDK logs warnings through ``logging``; send them to a file, never the terminal."""
    global _sdk_logging_routed
    if _sdk_logging_routed:
        return
    _sdk_logging_routed = True
    try:
        log_dir().mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(log_dir() / "caliban-sdk.log")
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("mcp", __name__):
        target = logging.getLogger(name)
        if not target.handlers:
            target.addHandler(handler)
            target.propagate = False


__all__ = [
    "McpManager",
    "ServerStatus",
    "State",
    "log_path",
    "read_tail",
]
