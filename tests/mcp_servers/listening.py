"""Start an MCP test server on a free port of 127.0.0.1 and wait (bounded) until it listens;
stop it afterwards, killing it if it will not stop."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import pytest
from hang import HANG_S


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def listening(
    argv: Callable[[int], list[str]],
    *,
    env: Mapping[str, str] | None = None,
    wait_s: float = HANG_S,
) -> Iterator[int]:
    """Run ``python`` with ``argv(port)``; yields the port once the server accepts connections
    (fails the test if it exits or ``wait_s`` passes first)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *argv(port)],
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + wait_s
        while True:  # bounded: until it listens, exits, or wait_s pass
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the test server {argv(port)[0]} did not start listening")
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
