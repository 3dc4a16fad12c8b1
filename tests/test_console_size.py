"""The REPL's console takes the terminal's size, not a stale ``$COLUMNS``: rich honours an
exported ``COLUMNS`` over the terminal (prompt-toolkit does not), so a value a parent
exported, or one left from before a resize, wrapped every answer at the wrong width. Into
a pipe or a file ``$COLUMNS`` still counts, as rich has it."""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import termios
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from caliban.repl.render import TerminalConsole

STALE = {"COLUMNS": "200", "LINES": "70"}


def _set_size(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


@pytest.fixture
def terminal() -> Iterator[tuple[int, IO[str]]]:
    """A pseudo-terminal 60 x 20: its controlling side, and its terminal side to write to."""
    controller, side = os.openpty()
    _set_size(side, 20, 60)
    with os.fdopen(side, "w", encoding="utf-8") as file:
        yield controller, file
    os.close(controller)


def test_a_terminal_is_measured_whatever_columns_says(terminal: tuple[int, IO[str]]) -> None:
    _, file = terminal
    console = TerminalConsole(file=file, _environ=STALE)
    assert (console.width, console.height) == (60, 20)
    _set_size(file.fileno(), 30, 100)  # a resize
    assert (console.width, console.height) == (100, 30)
    assert console.options.max_width == 100


def test_a_size_given_or_set_wins(terminal: tuple[int, IO[str]]) -> None:
    _, file = terminal
    assert TerminalConsole(file=file, width=42, _environ=STALE).width == 42
    console = TerminalConsole(file=file, _environ=STALE)
    console.size = (33, 11)
    assert (console.width, console.height) == (33, 11)


def test_a_pipe_or_a_file_keeps_columns_as_rich_has_it() -> None:
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as pipe:
        assert TerminalConsole(file=pipe, _environ=STALE).width == 200
    assert TerminalConsole(file=io.StringIO(), _environ=STALE).width == 200
    assert TerminalConsole(file=io.StringIO(), _environ={}).width == 80


# ---------------------------------------------------------------------------- the real REPL

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _row_with(screen: str, first: str) -> str:
    """The printed row holding the word ``first`` from its bullet on (escape sequences
    dropped; the live status line erased before it may still be in the text)."""
    rows = [row for row in _ANSI.sub("", screen).split("\n") if first in row]
    assert rows, f"{first} was not printed"
    return "●" + rows[-1].rpartition("●")[2].rstrip()


@pytest.mark.slow
def test_the_repl_wraps_at_the_terminals_width_and_follows_a_resize(
    project: Path, fake_model_server: Any
) -> None:
    """The real ``caliban`` in a 60-column pseudo-terminal with ``COLUMNS=200`` exported:
    an answer wraps at 60; after the terminal grows to 100 columns, the next one at 100."""
    pexpect = pytest.importorskip("pexpect")
    from test_repl_pty import expect_prompt, spawn

    words = " ".join(f"a{n:02}" for n in range(40))  # 4 columns a word
    fake_model_server.add({"text": words}, {"text": words.replace("a", "b")})
    child = spawn(project, fake_model_server, dimensions=(30, 60), **STALE)
    try:
        expect_prompt(child)
        child.send("first\r")
        child.expect("a39")
        expect_prompt(child)
        child.setwinsize(30, 100)
        child.send("second\r")
        child.expect("b39")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    screen = child.logfile_read.getvalue()
    narrow, wide = _row_with(screen, "a00"), _row_with(screen, "b00")
    assert len(narrow) <= 60 and "a10" in narrow, narrow
    assert len(wide) <= 100 and "b20" in wide, wide
