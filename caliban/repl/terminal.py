"""The terminal while a turn runs, and telling the user when caliban needs them.

While a turn runs no prompt is on the screen: :func:`quiet_keys` stops the terminal from
echoing keys over the answer (and from waiting for a whole line), and :func:`reading_keys`
hands every key to the REPL as it arrives (its :class:`~caliban.repl.typeahead.TypeAhead`).

:class:`Attention` rings for the user — an OSC 9 desktop notification where the terminal
shows them, else the bell — when a turn ends or a question waits while the terminal is not
focused. Focus comes from the terminal's focus reports (DEC mode 1004: ``ESC [ I`` / ``ESC
[ O``), which caliban turns on for the session; a terminal that never reports focus is taken
to be watched, and nothing rings.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TextIO

from prompt_toolkit.input import Input
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.input.typeahead import store_typeahead
from prompt_toolkit.key_binding import KeyPress
from prompt_toolkit.keys import Keys

ESC_WAIT_SECONDS = 0.05
"""A lone Esc is told from the start of an escape sequence (an arrow key) by this pause."""

FOCUS_IN = Keys.F23
FOCUS_OUT = Keys.F24
"""The focus reports, read as two keys no keyboard sends (prompt-toolkit knows no focus
events): prompt-toolkit ignores them wherever they are not bound."""
FOCUS_SEQUENCES = {"\x1b[I": FOCUS_IN, "\x1b[O": FOCUS_OUT}
FOCUS_REPORTS_ON = "\x1b[?1004h"
FOCUS_REPORTS_OFF = "\x1b[?1004l"

OSC9_TERMINALS = frozenset({"iTerm.app", "WezTerm", "ghostty", "vscode", "WarpTerminal"})
"""``$TERM_PROGRAM`` values of terminals that show OSC 9 as a desktop notification (kitty
and Windows Terminal are recognised by their own variables)."""


@contextlib.contextmanager
def quiet_keys(real_terminal: bool) -> Iterator[None]:
    """Keys typed during a turn are not echoed into the output and reach caliban one by
    one (Esc interrupts; the rest is type-ahead). Ctrl-C still raises SIGINT.

    Held for the whole session: prompt-toolkit's raw mode nests inside it, so between a
    turn and the next prompt the terminal is never in cooked mode, whose line discipline
    would swallow a Ctrl-D as end-of-file and turn Enter into Ctrl-J."""
    if not real_terminal or not sys.stdin.isatty():
        yield
        return
    try:
        import termios
    except ImportError:
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)
    # Enter stays CR, as in prompt-toolkit's raw mode: turned into LF it would reach the
    # prompt as Ctrl-J (a new line), not Enter, when typed just before the prompt reads.
    quiet[0] &= ~termios.ICRNL
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):  # the terminal may be gone (SIGHUP)
            termios.tcsetattr(fd, termios.TCSANOW, saved)


@contextlib.contextmanager
def reading_keys(keys_in: Input, take: Callable[[list[KeyPress]], None]) -> Iterator[None]:
    """Give every key read from ``keys_in`` to ``take`` while the block runs.

    Keys that were left over when the prompt ended (typed after Enter, in the same read)
    stay prompt-toolkit's type-ahead for the next prompt."""
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def ready() -> None:
        nonlocal timer
        take(keys_in.read_keys())
        if timer is not None:
            timer.cancel()
        # A lone Esc waits in the parser for what may follow it.
        timer = loop.call_later(ESC_WAIT_SECONDS, lambda: take(keys_in.flush_keys()))

    try:
        with keys_in.attach(ready):
            yield
    finally:
        if timer is not None:
            timer.cancel()


def put_back(keys_in: Input, keys: list[KeyPress]) -> None:
    """Make ``keys`` the next prompt's first keys."""
    if keys:
        store_typeahead(keys_in, keys)


class Attention:
    """Rings for the user while the terminal is not focused (see the module docstring)."""

    def __init__(self, write: Callable[[str], None], env: Mapping[str, str] | None = None):
        self._write = write
        env = os.environ if env is None else env
        self.osc9 = (
            env.get("TERM_PROGRAM", "") in OSC9_TERMINALS
            or bool(env.get("KITTY_WINDOW_ID"))
            or bool(env.get("WT_SESSION"))
        )
        self.focused: bool | None = None
        """``None`` until the terminal reports focus."""

    def start(self) -> None:
        """Ask the terminal for focus reports (and teach prompt-toolkit's parser them)."""
        for sequence, key in FOCUS_SEQUENCES.items():
            ANSI_SEQUENCES.setdefault(sequence, key)
        self._write(FOCUS_REPORTS_ON)

    def stop(self) -> None:
        self._write(FOCUS_REPORTS_OFF)

    def note_keys(self, keys: list[KeyPress]) -> list[KeyPress]:
        """Follow the focus reports among ``keys``; returns the other keys."""
        kept = []
        for key in keys:
            if key.key == FOCUS_IN:
                self.focused = True
            elif key.key == FOCUS_OUT:
                self.focused = False
            else:
                kept.append(key)
        return kept

    def ring(self, message: str) -> bool:
        """Notify when the terminal reported it lost focus; returns whether it did."""
        if self.focused is not False:
            return False
        if self.osc9:
            text = "".join(c for c in message if c.isprintable())[:200]
            self._write(f"\x1b]9;caliban: {text}\x07")
        else:
            self._write("\x07")
        return True


def write_to_terminal(output: TextIO | None = None) -> Callable[[str], None]:
    """A writer of control sequences to the terminal (stdout, flushed at once)."""
    stream = output if output is not None else sys.stdout

    def write(sequence: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            stream.write(sequence)
            stream.flush()

    return write
