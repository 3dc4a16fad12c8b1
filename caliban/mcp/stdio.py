"""A stdio MCP server: its process, started and stopped through :mod:`caliban.exec` in a
process group of its own, its stderr copied to its log, and the transport the SDK's
``Client`` talks through.

The process is launched before the MCP SDK is imported (the server boots meanwhile). The
transport reads JSON-RPC lines from stdout (a line longer than the message bound stops the
server: its result could never be shown whole, and the buffer would grow without bound) and
notices when the server exits. On shutdown stdin is closed, the server gets a grace period,
then its whole process group is stopped, so no server or child of one outlives it.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from caliban.exec import PIPE, Child, Command, Confinement, spawn, stop_group
from caliban.mcp.config import ServerConfig
from caliban.mcp.logs import STDERR_RUN_BYTES, ServerLog, drain_stderr
from caliban.util.text import clipped

__all__ = ["IGNORED_LINE", "KILL_WAIT", "NOTED_LINES", "STOP_GRACE", "StdioServer", "server_env"]

STOP_GRACE = 2.0
"""Seconds a connected stdio server gets to exit after its stdin closes."""
KILL_WAIT = 2.0
"""Seconds between SIGTERM and SIGKILL for the server's process group."""
NOTED_LINES = 100
"""Lines on a server's stdout that are not JSON-RPC noted in its log, one by one, per run;
the rest are counted in one note (a server printing a line at a time must not grow its log
without bound)."""
IGNORED_LINE = "ignored a line on stdout that is not JSON-RPC"
_INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What a stdio server inherits from caliban's environment (the MCP SDK's choice)."""
_EXTRA_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")


def server_env(config: ServerConfig) -> dict[str, str]:
    """A server's environment: a few of caliban's variables, then its configured ``env``."""
    env = {}
    for key in _INHERITED_ENV:
        value = os.environ.get(key)
        if value is not None and not value.startswith("()"):  # not an exported shell function
            env[key] = value
    for key in _EXTRA_ENV:
        if key in os.environ:
            env[key] = os.environ[key]
    return env | dict(config.env)


class StdioServer:
    """One run of a stdio server's process."""

    def __init__(self, child: Child, log: ServerLog, *, stderr_run_bytes: int) -> None:
        assert child.stderr is not None
        self._child = child
        self._log = log
        self.grace = STOP_GRACE
        """Seconds it gets to exit after stdin closes (none for one that never started)."""
        self.exited = False
        """It closed its stdout (or stopped reading) before caliban stopped it."""
        self._closing = False
        self._stopped = False
        self._drained = asyncio.Event()
        self._drain = asyncio.get_running_loop().create_task(
            drain_stderr(child.stderr, log.file, self._drained, run_bytes=stderr_run_bytes)
        )

    @classmethod
    async def start(
        cls,
        config: ServerConfig,
        log: ServerLog,
        *,
        stderr_run_bytes: int = STDERR_RUN_BYTES,
        sandbox: Confinement | None = None,
    ) -> StdioServer:
        """Start the server's command, its stderr copied to ``log``, confined by ``sandbox``
        when its entry says ``sandbox = true``; raises OSError (also when it asks for a
        sandbox and none works here)."""
        env = server_env(config)
        profile = backend = None
        if config.sandbox:
            if sandbox is None:
                raise OSError("sandbox = true, but this session has no sandbox")
            # The first use probes the backend (it runs a command): not on the event loop.
            profile, backend = await asyncio.to_thread(sandbox.confinement)
            env = sandbox.environment(env)
        command = Command(argv=(config.command or "", *config.args), cwd=config.cwd, env=env)
        child = await spawn(
            command, stdin=PIPE, stdout=PIPE, stderr=PIPE, profile=profile, sandbox=backend
        )
        return cls(child, log, stderr_run_bytes=stderr_run_bytes)

    @property
    def pid(self) -> int:
        return self._child.pid

    def exit_reason(self) -> str | None:
        """How it ended on its own (``exited with code 3``, ``killed by signal 9``); None
        while it runs or when caliban stopped it."""
        code = self._child.returncode
        if not self.exited or code is None:
            return None
        return f"killed by signal {-code}" if code < 0 else f"exited with code {code}"

    async def stop(self) -> None:
        """Close stdin, give it :attr:`grace` seconds, then stop its whole process group
        (children it left behind too); once, and not cut short by a cancellation."""
        if self._stopped:
            return
        self._stopped = True
        with anyio.CancelScope(shield=True):
            if self._child.stdin is not None:
                with contextlib.suppress(OSError):
                    self._child.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._child.wait(), self.grace)
            await stop_group(self._child, grace=KILL_WAIT)
            with anyio.move_on_after(1.0):  # its last stderr lines, before the pipe closes
                await self._drained.wait()
            self._child.close()

    async def drained(self) -> None:
        """Wait (briefly) until its stderr is in its log, so the tail can be read."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            await self._drained.wait()
        self._drain.cancel()  # a grandchild outside the group may hold stderr open

    @asynccontextmanager
    async def transport(
        self,
        *,
        max_message: int,
        on_exit: Callable[[], None],
        on_violation: Callable[[str], None],
    ) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK's read and write streams over the server's stdout and stdin. ``on_exit``
        is called when the server goes away, after ``on_violation`` when caliban cut it off
        for breaking the protocol; leaving the context stops the server."""
        import mcp_types
        from mcp.shared.message import SessionMessage

        stdin, stdout = self._child.stdin, self._child.stdout
        assert stdin is not None and stdout is not None
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        writer_done = anyio.Event()

        async def reader() -> None:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            pending: list[str] = []  # the unfinished line, in pieces: joined once, not per chunk
            size = 0
            delivering = True
            ignored = 0
            try:
                while data := await stdout.read(65536):
                    *lines, rest = decoder.decode(data).split("\n")
                    if lines:
                        lines[0] = "".join([*pending, lines[0]])
                        pending, size = [], 0
                    if rest:
                        pending.append(rest)
                        size += len(rest)
                    if size > max_message or any(len(ln) > max_message for ln in lines):
                        violation = f"sent a message over {max_message // 2**20} MB on stdout"
                        on_violation(violation)
                        self._log.note(f"{violation}: stopping the server")
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
                                self._log.note(f"{IGNORED_LINE}: {line[:200]}")
                            message = _error_for_malformed_answer(line)
                            if message is None:
                                continue
                        try:
                            await read_send.send(SessionMessage(message))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            delivering = False  # keep draining: the server never blocks on stdout
            except OSError:
                pass
            finally:
                if ignored > NOTED_LINES:
                    self._log.note(f"{IGNORED_LINE}: {ignored - NOTED_LINES:,} more in this run")
                if not self._closing:
                    self.exited = True
                    on_exit()
                read_send.close()

        async def writer() -> None:
            try:
                async with write_recv:
                    async for message in write_recv:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        stdin.write((data + "\n").encode())
                        await stdin.drain()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                if not self._closing:
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
                self._closing = True
                with anyio.CancelScope(shield=True):
                    read_recv.close()
                    write_send.close()
                    with anyio.move_on_after(0.5):
                        await writer_done.wait()
                    await self.stop()
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
            message=f"the server's answer is not valid JSON-RPC: {clipped(line, 200)}",
        ),
    )
