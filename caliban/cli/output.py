"""What the ``caliban`` subcommands print.

What they list (a server's command and stderr, tool descriptions, config values, saved
prompts) may come from a cloned repository or an MCP server, so every line is written with
its control and invisible characters escaped (:func:`caliban.util.text.visible`): a listing the
user reads before trusting a folder cannot hide part of itself or drive the terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO

from caliban.util.text import visible


def out(text: str = "") -> None:
    """Print a line on stdout, escaped."""
    write_or_discard(sys.stdout, visible(text) + "\n")


def err(text: str) -> None:
    """Print a line on stderr, escaped."""
    write_or_discard(sys.stderr, visible(text) + "\n")


def write_or_discard(stream: IO[str], text: str) -> None:
    """Write and flush ``text``. When the reader has gone (``caliban -p … | head -1``), the
    stream is pointed at /dev/null instead, so this and every later write, and the
    interpreter's last flush, are dropped quietly: the run goes on and ends with its own exit
    code, whatever the output format and whenever the pipe closed."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        with contextlib.suppress(OSError, ValueError):
            stream.flush()  # what was buffered when the pipe broke goes to /dev/null
