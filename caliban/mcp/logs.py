"""Each MCP server's log: ``<state dir>/mcp-logs/<server>.log``, where a stdio server's stderr
and caliban's notes about the server (``[caliban …] starting``, ``stopped: …``) are appended.

A server's stderr is bounded per run (:func:`drain_stderr`), the file is rotated past
:data:`LOG_ROTATE_BYTES`, and when it cannot be written at all the server starts anyway with
a :class:`MemoryLog` keeping the last 64 KB, so its last words can still be shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import time
from pathlib import Path
from typing import IO, Any

from caliban.config import paths

__all__ = [
    "LOG_ROTATE_BYTES",
    "STDERR_RUN_BYTES",
    "STDERR_TAIL_LINES",
    "TAIL_BYTES",
    "MemoryLog",
    "ServerLog",
    "drain_stderr",
    "log_dir",
    "log_path",
    "read_tail",
]

STDERR_TAIL_LINES = 10
LOG_ROTATE_BYTES = 1_000_000
TAIL_BYTES = 65536
"""How much of the end of a log its tail is read from (and a :class:`MemoryLog` keeps)."""
STDERR_RUN_BYTES = 10 * 2**20
"""How much of a stdio server's stderr one run keeps in its log before only the latest
:data:`TAIL_BYTES` are kept."""


def log_dir() -> Path:
    return paths.state_dir() / "mcp-logs"


def log_path(server: str) -> Path:
    """Where a server's stderr (and caliban's notes about it) are appended."""
    return log_dir() / f"{server}.log"


class MemoryLog(io.BytesIO):
    """Stands in for a log file that cannot be written: it keeps only the latest
    :data:`TAIL_BYTES` (plus as much again before trimming), enough for a tail."""

    def write(self, data: Any) -> int:
        written = super().write(data)
        if self.tell() > 2 * TAIL_BYTES:
            kept = self.getvalue()[-TAIL_BYTES:]
            self.seek(0)
            self.truncate()
            super().write(kept)
        return written

    def close(self) -> None:
        """Kept open: the run's tail stays readable after it ends (at most 128 KB)."""


class ServerLog:
    """One run's log of one server: its file opened for appending, or a :class:`MemoryLog`."""

    def __init__(self, server: str, file: IO[bytes], offset: int) -> None:
        self.server = server
        self.file = file
        """Where the server's stderr goes (:func:`drain_stderr`)."""
        self._offset = offset

    @classmethod
    def open(cls, server: str) -> tuple[ServerLog, str | None]:
        """The server's log, rotated when large; when it cannot be written, one in memory
        and why not (so the server still starts)."""
        path = log_path(server)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                if path.stat().st_size > LOG_ROTATE_BYTES:
                    path.replace(path.with_suffix(".log.1"))
            file = path.open("ab")
        except OSError as exc:
            return cls(server, MemoryLog(), 0), exc.strerror or type(exc).__name__
        return cls(server, file, file.tell()), None

    @property
    def in_memory(self) -> bool:
        return isinstance(self.file, MemoryLog)

    def note(self, text: str) -> None:
        """Append one of caliban's own lines (left out of the tail)."""
        _note(self.file, text)

    def tail(self) -> tuple[str, ...]:
        """The server's last stderr lines of this run."""
        if isinstance(self.file, MemoryLog):
            return _tail_lines(self.file.getvalue())
        return read_tail(log_path(self.server), self._offset)

    def close(self) -> None:
        self.file.close()


def _note(log: IO[bytes], text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with contextlib.suppress(OSError, ValueError):
        log.write(f"[caliban {stamp}] {text}\n".encode())
        log.flush()


def read_tail(path: Path, offset: int = 0, lines: int = STDERR_TAIL_LINES) -> tuple[str, ...]:
    """The last ``lines`` non-empty lines of ``path`` after byte ``offset``, without caliban's
    own notes."""
    try:
        with path.open("rb") as f:
            # Only the end: a server can write gigabytes to stderr.
            f.seek(max(offset, f.seek(0, os.SEEK_END) - TAIL_BYTES))
            data = f.read(TAIL_BYTES)
    except OSError:
        return ()
    return _tail_lines(data, lines)


def _tail_lines(data: bytes, lines: int = STDERR_TAIL_LINES) -> tuple[str, ...]:
    text = data[-TAIL_BYTES:].decode("utf-8", errors="replace")
    kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("[caliban ")]
    return tuple(kept[-lines:])


async def drain_stderr(
    stream: asyncio.StreamReader,
    log: IO[bytes],
    done: asyncio.Event,
    *,
    run_bytes: int = STDERR_RUN_BYTES,
) -> None:
    """Copy a server's stderr to its log: the first ``run_bytes`` of the run, then only the
    latest :data:`TAIL_BYTES` (written at the end, after a note of what was dropped), so a
    server that floods stderr neither fills the disk nor hides its last words."""
    written = dropped = 0
    recent = bytearray()
    try:
        while chunk := await stream.read(65536):
            if written < run_bytes:
                kept = chunk[: run_bytes - written]
                with contextlib.suppress(OSError, ValueError):
                    log.write(kept)
                    log.flush()
                written += len(kept)
                chunk = chunk[len(kept) :]
            if chunk:
                recent += chunk
                if len(recent) > TAIL_BYTES:
                    dropped += len(recent) - TAIL_BYTES
                    del recent[: len(recent) - TAIL_BYTES]
    except OSError:
        pass
    finally:
        if dropped:
            _note(log, f"dropped {dropped:,} bytes of stderr past {run_bytes:,} in this run")
        if recent:
            with contextlib.suppress(OSError, ValueError):
                log.write(bytes(recent))
                log.flush()
        done.set()
