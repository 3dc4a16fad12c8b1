"""The interactive session: a prompt-toolkit prompt driving a :class:`~caliban.session.Session`.

:func:`run_interactive` is what ``caliban`` (no ``-p``) runs. The prompt appears at once: MCP
servers connect in the background and the provider SDK loads in a worker thread. Each
prompt runs as an asyncio task; Ctrl-C (SIGINT: the terminal keeps its signal keys while a
turn runs) or Esc cancels it and the session goes on with the partial answer kept. ``!command``
runs a shell command into the conversation; Shift-Tab cycles the permission mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session, get_app_session, run_in_terminal
from prompt_toolkit.filters import has_completions
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory, History
from prompt_toolkit.input import Input
from prompt_toolkit.input.typeahead import store_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import Output
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import is_dumb_terminal
from rich.console import Console
from rich.text import Text

from caliban import __version__
from caliban.cli.options import EXIT_INTERRUPTED, EXIT_USAGE, CliOptions
from caliban.config import paths
from caliban.events import AgentEvent
from caliban.messages import Message, TextPart
from caliban.repl.approve import TerminalApprover
from caliban.repl.attach import attach
from caliban.repl.commands import (
    CommandContext,
    ExitRepl,
    find_command,
    run_command,
)
from caliban.repl.complete import ReplCompleter
from caliban.repl.render import ELBOW, Renderer, TerminalConsole, outside_text
from caliban.repl.toolbar import toolbar_text
from caliban.repl.trust_prompt import settle_trust
from caliban.skills.slash import parse_slash
from caliban.util.background import start_in_daemon_thread

if TYPE_CHECKING:
    from caliban.config.settings import PermissionMode
    from caliban.permissions.rules import Rule
    from caliban.session.session import Session
    from caliban.skills.catalog import Skill

EXIT_ARM_SECONDS = 2.0
"""A second Ctrl-C on an empty prompt within this many seconds exits."""
PASTE_COLLAPSE_LINES = 12
PASTE_COLLAPSE_CHARS = 2_000
"""A paste longer than this shows as ``[Pasted text #1 +240 lines]`` in the input line (its
whole text is sent): a long log would otherwise fill the screen and the scrollback twice."""
ESC_WAIT_SECONDS = 0.05
"""A lone Esc is told from the start of an escape sequence (an arrow key) by this pause."""
MODE_CYCLE: tuple[PermissionMode, ...] = ("default", "acceptEdits", "plan")
"""What Shift-Tab steps through (bypassPermissions too when the session started in it)."""

STYLE = Style.from_dict(
    {
        "rule": "#5f5f5f",
        "prompt": "bold",
        "continuation": "#5f5f5f",
        "bottom-toolbar": "noreverse #8a8a8a",
        "bottom-toolbar.text": "",
        "hint": "#d7af00",
    }
)


def run_interactive(options: CliOptions) -> int:
    """``caliban`` on a terminal: the REPL. Returns the exit code."""
    if not sys.stdin.isatty():
        print(
            "caliban: stdin is not a terminal, so there is no interactive session; "
            "run `caliban -p PROMPT` (or pipe the prompt: `echo PROMPT | caliban -p`).",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not sys.stdout.isatty():
        # The prompt, answers and permission questions would all go into the pipe or file,
        # leaving the terminal blank while caliban waits for input.
        print(
            "caliban: stdout is not a terminal, so the interactive session would not be seen; "
            "run `caliban -p PROMPT > FILE` to save an answer, or start caliban without the "
            "redirection.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        return asyncio.run(_run_until_signalled(options))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


async def _run_until_signalled(options: CliOptions) -> int:
    """The REPL, ended cleanly by SIGTERM or SIGHUP (the terminal window closed): the running
    turn is cancelled as by Ctrl-C, so its commands are stopped rather than left running and
    the transcript records how the turn ended. Returns 128 + the signal number then."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        main.cancel()

    hangups = (signal.SIGTERM, signal.SIGHUP)
    for signum in hangups:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await run_repl(options)
    except BaseException:
        if not received:
            raise
        # Whatever tearing down a closed terminal raised: caliban was told to stop.
        return 128 + received[0]
    finally:
        for signum in hangups:
            loop.remove_signal_handler(signum)


Opener = Callable[..., AbstractAsyncContextManager["Session"]]
"""``caliban.session.assemble.open_session``'s shape (injectable for tests)."""


def _import_open_session() -> Opener:
    from caliban.session.assemble import open_session, preload

    preload()
    return open_session


async def run_repl(
    options: CliOptions,
    *,
    console: Console | None = None,
    input: Input | None = None,
    output: Output | None = None,
    history: History | None = None,
    opener: Opener | None = None,
) -> int:
    """Run the REPL for ``options`` until the user exits; returns the exit code.

    The prompt is drawn first. The session opens meanwhile in a background task, with its
    heavy imports (settings models, provider selection, the MCP SDK) in a worker thread, so
    typing can start while caliban loads; a prompt submitted early waits for it.
    """
    console = console or TerminalConsole()
    renderer = Renderer(console, cwd=options.cwd)
    approver = TerminalApprover(console, cwd=options.cwd)
    with create_app_session(input=input, output=output):
        # Before anything loads: the answer decides which project servers may start.
        await settle_trust(console, options.cwd)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Session] = loop.create_future()
        repl = Repl(
            ready,
            cwd=options.cwd,
            resumed=options.continue_session or options.resume is not None,
            console=console,
            renderer=renderer,
            approver=approver,
            input=input,
            output=output,
            history=history,
        )
        host = _SessionHost(options, opener, ready, approver=approver, listener=repl.listener)
        try:
            if options.resume == "":
                # The resume picker reads the terminal itself: open the session first.
                host.start()
                await asyncio.wait({ready})
                ready.result()  # a failure (no such session) ends here
            return await repl.run(first_prompt=options.prompt, when_shown=host.start)
        finally:
            await host.close()


class _SessionHost:
    """Holds the session open in its own task: an async context manager must be entered
    and left in one task, and the REPL's task must not wait for it to open."""

    def __init__(
        self,
        options: CliOptions,
        opener: Opener | None,
        ready: asyncio.Future[Session],
        *,
        approver: TerminalApprover,
        listener: Callable[[AgentEvent], None],
    ) -> None:
        self._closing = asyncio.Event()
        self._ready = ready
        self._args = (options, opener, approver, listener)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(*self._args))

    async def _run(
        self,
        options: CliOptions,
        opener: Opener | None,
        approver: TerminalApprover,
        listener: Callable[[AgentEvent], None],
    ) -> None:
        try:
            if opener is None:
                opener = await start_in_daemon_thread(_import_open_session, name="caliban-import")
            async with opener(
                options, approver=approver, listeners=[listener], interactive=True
            ) as session:
                self._ready.set_result(session)
                await self._closing.wait()
        except Exception as exc:
            if self._ready.done():
                raise
            self._ready.set_exception(exc)

    async def close(self) -> None:
        self._closing.set()
        if self._task is None:
            return
        if not self._ready.done():
            self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            if not self._task.cancelled():
                raise
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # retrieved: the REPL has reported it already


class Repl:
    """The read-eval-print loop over one session. Input and output are injectable for tests."""

    def __init__(
        self,
        session: Session | asyncio.Future[Session],
        *,
        cwd: Path | None = None,
        resumed: bool = False,
        console: Console,
        renderer: Renderer,
        approver: TerminalApprover | None = None,
        input: Input | None = None,
        output: Output | None = None,
        history: History | None = None,
    ) -> None:
        if isinstance(session, asyncio.Future):
            self._ready = session
        else:
            self._ready = asyncio.get_running_loop().create_future()
            self._ready.set_result(session)
        self._resumed = resumed
        self._ready.add_done_callback(self._session_opened)
        self.cwd = cwd if cwd is not None else self._ready.result().cwd
        self._pending_output: set[asyncio.Future[None]] = set()
        self.console = console
        self.renderer = renderer
        self.approver = approver
        self._real_terminal = input is None
        self._turn: asyncio.Task[object] | None = None
        self._when_shown: Callable[[], None] | None = None
        self._pastes: dict[str, str] = {}
        """Collapsed pastes of this session by placeholder (see :data:`PASTE_COLLAPSE_LINES`)."""
        self._exit_armed_until = 0.0
        self._cycle: tuple[PermissionMode, ...] = MODE_CYCLE
        if approver is not None:
            approver.pause = self.paused
            approver.on_interrupt = self.interrupt
        self.prompt: PromptSession[str] = PromptSession(
            message=self._message,
            history=history if history is not None else _file_history(self._warn),
            completer=ReplCompleter(self.cwd, custom=self._custom_commands),
            complete_while_typing=True,
            key_bindings=self._key_bindings(),
            bottom_toolbar=self._toolbar,
            prompt_continuation=lambda width, line, wrap: [("class:continuation", "  ")],
            style=STYLE,
            refresh_interval=0.5,
            reserve_space_for_menu=6,
            input=input,
            output=output,
        )

    # -- the session

    @property
    def session(self) -> Session:
        """The session (only once open: see :meth:`wait_for_session`)."""
        return self._ready.result()

    async def wait_for_session(self) -> Session:
        return await asyncio.shield(self._ready)

    def _start_session(self) -> None:
        """Start opening the session (once): see ``when_shown`` in :meth:`run`."""
        start, self._when_shown = self._when_shown, None
        if start is not None:
            start()

    def _session_opened(self, ready: asyncio.Future[Session]) -> None:
        if ready.cancelled():
            return
        if (failure := ready.exception()) is not None:
            # e.g. no API key: leave the prompt, report it (the running app is another one
            # than ``self.prompt.app`` on a dumb terminal)
            app = get_app_session().app
            if app is not None and app.is_running:
                app.exit(exception=failure)
            return
        policy = ready.result().permissions
        if policy is not None and policy.mode == "bypassPermissions":
            self._cycle = (*MODE_CYCLE, "bypassPermissions")
        if self._resumed:  # --continue / --resume: show where the conversation was
            messages = list(ready.result().conversation.messages)
            self._show(lambda: self.renderer.replay(messages))

    def listener(self, event: AgentEvent) -> None:
        """The session's listener: render, above the prompt when one is on the screen
        (a notice from MCP start-up while the user types)."""
        self._show(lambda: self.renderer(event))

    def _show(self, render: Callable[[], None]) -> None:
        app = get_app_session().app
        if app is None or not app.is_running:
            render()
            return
        shown = asyncio.ensure_future(run_in_terminal(render))
        self._pending_output.add(shown)
        shown.add_done_callback(self._pending_output.discard)

    # -- the loop

    async def run(
        self, *, first_prompt: str | None = None, when_shown: Callable[[], None] | None = None
    ) -> int:
        """Prompt, run, repeat; returns the exit code when the user leaves.

        ``when_shown`` is called once the first prompt is on the screen (the session host
        starts loading then, so its imports do not delay the prompt).
        """
        self._welcome()
        self._when_shown = when_shown
        if first_prompt or (self._real_terminal and is_dumb_terminal()):
            # A dumb terminal's prompt (TERM=dumb) runs no pre_run callbacks: start now.
            self._start_session()
        if first_prompt:
            await self.submit(first_prompt)
        while True:
            if self._ready.done() and not self._ready.cancelled():
                self._ready.result()  # the session failed to open: raise why
            pre_run = None
            if self._when_shown is not None:
                pre_run = _soon(self._start_session)  # after the first draw of the prompt
            try:
                text = await self.prompt.prompt_async(pre_run=pre_run)
            except EOFError:
                break
            except KeyboardInterrupt:
                continue
            try:
                await self.submit(self._expand_pastes(text))
            except ExitRepl:
                break
        return 0

    async def submit(self, text: str) -> None:
        """Handle one line of input: a slash command or a prompt for the model."""
        text = text.strip()
        if not text:
            return
        self._start_session()  # in case the prompt never called it back
        session = await self.wait_for_session()
        if text.startswith("!"):
            if command := text[1:].strip():
                await self.run_shell(command)
            return
        if (parsed := parse_slash(text)) is not None:
            from caliban.skills.catalog import find_skill

            if find_command(parsed[0]) is None and (skill := find_skill(session.skills, parsed[0])):
                await self.run_custom(skill, parsed[1])
                return
            context = CommandContext(
                session=session, console=self.console, replay=self.renderer.replay
            )
            # Interruptible like a turn: /compact waits for the model, /resume for servers.
            task = await self._interruptible(run_command(text, context))
            if task.cancelled():
                self.console.print(Text(f"  {ELBOW}  Interrupted: {parsed[0]}", style="yellow"))
            elif (failure := task.exception()) is not None:
                raise failure
            return
        message, attachments, problems = attach(text, session.cwd, session.env.read_denied)
        for attachment in attachments:
            self.console.print(
                outside_text(f"  {ELBOW}  Attached @{attachment.path} ({attachment.note})", "dim")
            )
        for problem in problems:
            self.console.print(outside_text(f"  ⚠  {problem}", style="yellow"))
        await self.run_turn(message if attachments else text)

    async def run_custom(self, skill: Skill, arguments: str) -> None:
        """``/name args`` of a custom command or skill: expanded, then run as a prompt."""
        from caliban.skills.invoke import CommandRefused, expand_invocation

        try:
            expanded = await expand_invocation(self.session, skill, arguments)
        except CommandRefused as exc:
            self.renderer.error(str(exc))
            return
        for note in expanded.notes:
            self.console.print(outside_text(f"  ⚠  {note}", style="yellow"))
        await self.run_turn(expanded.message, model=expanded.model, allow=expanded.allow)

    async def run_turn(
        self, prompt: str | Message, *, model: str | None = None, allow: Sequence[Rule] = ()
    ) -> None:
        """Run one prompt to the end, or until Ctrl-C (:meth:`interrupt`) cancels it."""
        self.renderer.begin_turn()
        try:
            task = await self._interruptible(self.session.run(prompt, model=model, allow=allow))
        finally:
            self.renderer.end_turn()
        if task.cancelled():
            self.renderer.interrupted()
            return
        if (exc := task.exception()) is not None:
            self.renderer.error(_describe_error(exc))
            return
        error = getattr(task.result(), "error", None)
        if error:
            self.renderer.error(str(error))

    async def run_shell(self, command: str) -> None:
        """``!command``: run it in the session's shell (no permission asked: the user typed
        it) and put the command and its output into the conversation for the next prompt,
        as Claude Code's bash mode does. Esc or Ctrl-C stops it."""
        from caliban.tools.base import CallContext, ToolOutput, call_tool
        from caliban.tools.bash import Bash

        session = self.session
        self.console.print(Text(f"! {command}", style="bold magenta"))
        context = CallContext(env=session.env, call_id="bash-mode")
        task = await self._interruptible(call_tool(Bash(), {"command": command}, context))
        if task.cancelled():
            self.renderer.interrupted()
            return
        output = task.result()
        assert isinstance(output, ToolOutput)
        self.renderer.shell_output(output.as_text, failed=output.is_error)
        session.add_context(
            Message(
                role="user",
                parts=(
                    TextPart(text=f"<bash-input>{command}</bash-input>"),
                    TextPart(text=f"<bash-stdout>{output.as_text}</bash-stdout>"),
                ),
            )
        )

    async def _interruptible(self, work: Awaitable[object]) -> asyncio.Task[object]:
        """Run ``work`` as the current turn until it ends or Ctrl-C / Esc cancels it."""
        task: asyncio.Task[object] = asyncio.ensure_future(work)
        self._turn = task
        try:
            with self._sigint_interrupts(), self._no_echo(), self._esc_interrupts():
                await asyncio.wait({task})
        except asyncio.CancelledError:
            # caliban itself is stopping (SIGTERM, SIGHUP): let the turn end first, so its
            # interrupted tool results reach the transcript before the session closes.
            task.cancel()
            await asyncio.wait({task})
            raise
        finally:
            self._turn = None
        return task

    def cycle_mode(self) -> PermissionMode | None:
        """Shift-Tab: the next permission mode (default → acceptEdits → plan → …); ``None``
        when the session has no permission policy (yet)."""
        if not self._ready.done() or self._ready.cancelled() or self._ready.exception():
            return None
        policy = self.session.permissions
        if policy is None:
            return None
        index = self._cycle.index(policy.mode) if policy.mode in self._cycle else -1
        policy.mode = self._cycle[(index + 1) % len(self._cycle)]
        return policy.mode

    def interrupt(self) -> None:
        """Cancel the running turn (Ctrl-C, Esc); nothing happens at the prompt."""
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Lend the terminal to a permission prompt in the middle of a turn."""
        with self.renderer.suspended():
            yield
        if self._turn is not None:
            # prompt-toolkit removed our SIGINT handler when its prompt ended.
            self._add_sigint_handler()

    # -- prompt pieces

    def _custom_commands(self) -> list[tuple[str, str]]:
        if not self._ready.done() or self._ready.cancelled() or self._ready.exception():
            return []
        return [(skill.name, skill.description) for skill in self.session.skills]

    def _message(self) -> StyleAndTextTuples:
        width = self.prompt.app.output.get_size().columns
        return [("", "\n"), ("class:rule", "─" * max(10, width) + "\n"), ("class:prompt", "> ")]

    def _toolbar(self) -> StyleAndTextTuples:
        hint = None
        if time.monotonic() < self._exit_armed_until:
            hint = "Press Ctrl-C again to exit"
        if not self._ready.done():
            text = "starting…"
        elif self._ready.cancelled() or self._ready.exception() is not None:
            text = "could not start"
        else:
            text = toolbar_text(self.session)
        if hint:
            return [("class:hint", f" {hint}"), ("", f"   {text}")]
        return [("", f" {text}")]

    def _key_bindings(self) -> KeyBindings:
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
                return
            size = f"+{lines} lines" if lines > 1 else f"{len(data):,} characters"
            placeholder = f"[Pasted text #{len(self._pastes) + 1} {size}]"
            self._pastes[placeholder] = data
            event.current_buffer.insert_text(placeholder)

        @bindings.add("s-tab", filter=~has_completions)
        def _cycle_mode(event: KeyPressEvent) -> None:
            self.cycle_mode()
            event.app.invalidate()

        @bindings.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
                self._exit_armed_until = 0.0
            elif time.monotonic() < self._exit_armed_until:
                event.app.exit(exception=EOFError())
            else:
                self._exit_armed_until = time.monotonic() + EXIT_ARM_SECONDS
            event.app.invalidate()

        return bindings

    def _expand_pastes(self, text: str) -> str:
        """The input with each collapsed paste's placeholder replaced by what was pasted."""
        for placeholder, pasted in self._pastes.items():
            text = text.replace(placeholder, pasted)
        return text

    def _warn(self, text: str) -> None:
        self._show(lambda: self.console.print(Text(f"  ⚠  {text}", style="yellow")))

    def _welcome(self) -> None:
        title = Text("✻ ", style="bold magenta")
        title.append(f"caliban {__version__}", style="bold")
        title.append(f"  {_home(self.cwd)}", style="dim")
        self.console.print(title)
        self.console.print(
            Text(
                "  /help for commands · @ attaches files · !runs a command · Esc interrupts · "
                "Shift-Tab: mode",
                style="dim",
            )
        )

    # -- signals and the terminal while a turn runs

    def _add_sigint_handler(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self.interrupt)

    @contextlib.contextmanager
    def _sigint_interrupts(self) -> Iterator[None]:
        self._add_sigint_handler()
        try:
            yield
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)

    @contextlib.contextmanager
    def _esc_interrupts(self) -> Iterator[None]:
        """While a turn runs, Esc interrupts it; other keys are kept for the next prompt."""
        keys_in = self.prompt.app.input
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None

        def take(keys: list[KeyPress]) -> None:
            kept = [key for key in keys if key.key not in (Keys.Escape, Keys.ControlC)]
            if len(kept) < len(keys):
                self.interrupt()
            # Ctrl-D typed during a turn would end the session at the next prompt.
            kept = [key for key in kept if key.key != Keys.ControlD]
            if kept:
                store_typeahead(keys_in, kept)

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

    @contextlib.contextmanager
    def _no_echo(self) -> Iterator[None]:
        """Keys typed during a turn are not echoed into the output and reach caliban one by
        one (Esc interrupts; the rest is type-ahead). Ctrl-C still raises SIGINT."""
        if not self._real_terminal or not sys.stdin.isatty():
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
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        try:
            yield
        finally:
            with contextlib.suppress(termios.error):  # the terminal may be gone (SIGHUP)
                termios.tcsetattr(fd, termios.TCSANOW, saved)


def _soon(callback: Callable[[], None]) -> Callable[[], None]:
    def schedule() -> None:
        asyncio.get_running_loop().call_soon(callback)

    return schedule


class _PromptHistory(FileHistory):
    """The prompt history file, kept in memory when it cannot be read or written (a
    read-only home): a history is a convenience, never a reason to stop."""

    def __init__(self, path: Path, warn: Callable[[str], None]) -> None:
        super().__init__(str(path))
        self._path = path
        self._warn: Callable[[str], None] | None = warn

    def load_history_strings(self) -> Iterator[str]:
        try:
            yield from list(super().load_history_strings())
        except OSError as exc:
            self._failed(exc)

    def store_string(self, string: str) -> None:
        if self._warn is None:
            return  # failed before: this session's history stays in memory
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            super().store_string(string)
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if self._warn is not None:
            self._warn(
                f"prompt history is not saved: {self._path} ({exc.strerror or exc}); "
                "set CALIBAN_STATE_DIR to a writable directory"
            )
            self._warn = None


def _file_history(warn: Callable[[str], None] = lambda text: None) -> History:
    return _PromptHistory(paths.state_dir() / "history", warn)


def _home(path: Path) -> str:
    text, home = str(path), str(Path.home())
    return "~" + text[len(home) :] if text == home or text.startswith(home + os.sep) else text


def _describe_error(exc: BaseException) -> str:
    from caliban.providers.base import ProviderError

    if isinstance(exc, ProviderError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
