"""What the user types while a turn runs: a draft line and the messages queued with Enter.

While the model works the terminal reads keys one at a time and nothing is echoed over the
answer. Every key goes through :class:`TypeAhead`: printable keys and pastes extend the
draft (Ctrl-J: a new line), Backspace / Ctrl-U / Ctrl-W edit it, Enter queues the draft as
a message for the end of the turn (as Claude Code does), Esc and Ctrl-C ask to interrupt.
The REPL shows the draft and the queue under the spinner, sends the queue as the next prompt
when the turn ends, and puts an unsent draft back into the input line.

Ctrl-D is not lost either: pressed on an empty draft with nothing queued, and not followed
by more typing, it leaves caliban once the turn ends, as it would at the prompt — the user
cannot tell whether the turn was still ending when the key arrived.

Keys never reach a permission question through here: a question reads only keys pressed
after it is drawn (see :func:`caliban.repl.approve.choose`), and what was typed before it
lands in the draft.
"""

from __future__ import annotations

from collections.abc import Iterable

from prompt_toolkit.key_binding import KeyPress
from prompt_toolkit.keys import Keys

INTERRUPT_KEYS = frozenset({Keys.Escape, Keys.ControlC})
_NEWLINE = "\n"


class TypeAhead:
    """The keys of one turn, read into a draft and a queue of messages."""

    def __init__(self) -> None:
        self.draft = ""
        self.queued: list[str] = []
        self.leaving = False
        """The last key that meant something was Ctrl-D on an empty draft and queue."""

    def feed(self, keys: Iterable[KeyPress]) -> bool:
        """Take ``keys``; returns whether one of them asks to interrupt the turn."""
        interrupt = False
        for press in keys:
            key = press.key
            if key == Keys.ControlD:
                self.leaving = not self.draft and not self.queued
                continue
            before = (self.draft, len(self.queued))
            if key in INTERRUPT_KEYS:
                interrupt = True
            elif key == Keys.ControlM:  # Enter (the terminal keeps its CR: quiet_keys)
                self._queue()
            elif key == Keys.ControlJ:  # a new line, as at the prompt
                self.draft += _NEWLINE
            elif key in (Keys.ControlH, Keys.Backspace):
                self.draft = self.draft[:-1]
            elif key == Keys.ControlU:
                self.draft = self.draft.rpartition(_NEWLINE)[0]
            elif key == Keys.ControlW:
                self.draft = _without_last_word(self.draft)
            elif key == Keys.BracketedPaste:
                self.draft += press.data.replace("\r\n", _NEWLINE).replace("\r", _NEWLINE)
            elif isinstance(key, str) and len(key) == 1 and key.isprintable():
                self.draft += key
            # Anything else (arrows, function keys) means nothing here.
            if (self.draft, len(self.queued)) != before or key in INTERRUPT_KEYS:
                self.leaving = False
        return interrupt

    def take_leaving(self) -> bool:
        """Whether the user pressed Ctrl-D to leave during the turn (then forgotten)."""
        leaving, self.leaving = self.leaving, False
        return leaving

    def take_queued(self) -> str | None:
        """The queued messages as one prompt (one paragraph each), emptying the queue."""
        if not self.queued:
            return None
        text, self.queued = "\n\n".join(self.queued), []
        return text

    def take_draft(self) -> str:
        draft, self.draft = self.draft, ""
        return draft

    def _queue(self) -> None:
        if self.draft.strip():
            self.queued.append(self.draft.strip())
        self.draft = ""


def _without_last_word(text: str) -> str:
    stripped = text.rstrip()
    cut = max(stripped.rfind(" "), stripped.rfind(_NEWLINE))
    return stripped[: cut + 1]
