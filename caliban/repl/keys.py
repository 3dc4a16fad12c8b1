"""The prompt's keys, as a Claude Code user has them in their fingers.

| key | does |
|---|---|
| Enter / Alt-Enter, Ctrl-J, ``\\`` at the end | send / a new line |
| Shift-Tab | cycle the permission mode |
| Ctrl-C | clear the line; twice on an empty line: exit |
| Ctrl-S | stash the line (it comes back after the next prompt is sent) |
| Ctrl-G | edit the line in ``$EDITOR`` |
| Ctrl-V | paste an image from the clipboard |
| Ctrl-T | show the todo list |
| Alt-P | pick a model |
| Ctrl-Z | suspend caliban (``fg`` brings it back) |

The REPL supplies what the keys do through :class:`PromptActions`; this module only binds.
"""

from __future__ import annotations

import time
from typing import Protocol

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import has_completions
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from caliban.repl.terminal import FOCUS_IN, FOCUS_OUT

EXIT_ARM_SECONDS = 2.0
"""A second Ctrl-C on an empty prompt within this many seconds exits."""
PASTE_COLLAPSE_LINES = 12
PASTE_COLLAPSE_CHARS = 2_000
"""A paste longer than this shows as ``[Pasted text #1 +240 lines]`` in the input line (its
whole text is sent): a long log would otherwise fill the screen and the scrollback twice."""


class PromptActions(Protocol):
    """What the REPL does for the keys."""

    exit_armed_until: float
    """Until when a Ctrl-C on an empty line exits (``time.monotonic()``)."""

    def cycle_mode(self) -> object: ...

    def collapsed_paste(self, data: str) -> str:
        """The placeholder standing for a long paste in the input line."""
        ...

    def stash(self, buffer: Buffer) -> None: ...

    def edit_in_editor(self, buffer: Buffer) -> None: ...

    def paste_image(self, buffer: Buffer) -> None: ...

    def show_todos(self) -> None: ...

    def pick_model(self) -> None: ...

    def focus(self, focused: bool) -> None:
        """The terminal reported that it gained or lost focus."""
        ...


def prompt_key_bindings(actions: PromptActions) -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    @bindings.add("c-j")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.complete_state = None  # the chosen completion is already in the text
            if not buffer.text.startswith("/"):
                return
        before = buffer.document.text_before_cursor
        if before.endswith("\\") and not before.endswith("\\\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
            return
        buffer.validate_and_handle()

    @bindings.add(Keys.BracketedPaste)
    def _paste(event: KeyPressEvent) -> None:
        # As prompt-toolkit's own handler: a terminal may send \r\n or \r for newlines.
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        lines = data.count("\n") + 1
        if lines <= PASTE_COLLAPSE_LINES and len(data) <= PASTE_COLLAPSE_CHARS:
            event.current_buffer.insert_text(data)
        else:
            event.current_buffer.insert_text(actions.collapsed_paste(data))

    @bindings.add("s-tab", filter=~has_completions)
    def _cycle_mode(event: KeyPressEvent) -> None:
        actions.cycle_mode()
        event.app.invalidate()

    @bindings.add("c-c")
    def _ctrl_c(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
            actions.exit_armed_until = 0.0
        elif time.monotonic() < actions.exit_armed_until:
            event.app.exit(exception=EOFError())
        else:
            actions.exit_armed_until = time.monotonic() + EXIT_ARM_SECONDS
        event.app.invalidate()

    @bindings.add("c-s")
    def _stash(event: KeyPressEvent) -> None:
        actions.stash(event.current_buffer)
        event.app.invalidate()

    @bindings.add("c-g")
    def _editor(event: KeyPressEvent) -> None:
        actions.edit_in_editor(event.current_buffer)

    @bindings.add("c-v")
    def _paste_image(event: KeyPressEvent) -> None:
        actions.paste_image(event.current_buffer)

    @bindings.add("c-t")
    def _todos(event: KeyPressEvent) -> None:
        actions.show_todos()

    @bindings.add("escape", "escape")
    def _rewind(event: KeyPressEvent) -> None:
        # Esc Esc on an empty prompt: the /rewind picker, as in Claude Code.
        if not event.current_buffer.text:
            event.current_buffer.text = "/rewind"
            event.current_buffer.validate_and_handle()

    @bindings.add("escape", "p")
    def _model(event: KeyPressEvent) -> None:
        actions.pick_model()

    @bindings.add(FOCUS_IN)
    def _focus_in(event: KeyPressEvent) -> None:
        actions.focus(True)

    @bindings.add(FOCUS_OUT)
    def _focus_out(event: KeyPressEvent) -> None:
        actions.focus(False)

    return bindings
