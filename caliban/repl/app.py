"""The interactive session: a prompt-toolkit prompt driving a :class:`~caliban.session.Session`.

:func:`run_interactive` is what ``caliban`` (no ``-p``) runs. The prompt appears at once: MCP
servers connect in the background and the provider SDK loads in a worker thread. Each
prompt runs as an asyncio task; Ctrl-C (SIGINT: the terminal keeps its signal keys while a
turn runs) or Esc cancels it and the session goes on with the partial answer kept. What is
typed while a turn runs is a draft shown under the answer; Enter queues it for the end of
the turn (:mod:`caliban.repl.typeahead`). ``!command`` runs a shell command into the
conversation; the keys are :mod:`caliban.repl.keys`'.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import (
    Application,
    create_app_session,
    get_app_session,
    in_terminal,
    run_in_terminal,
)
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.enums import EditingMode
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import History
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyPress
from prompt_toolkit.output import Output
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import is_dumb_terminal
from rich.console import Console
from rich.text import Text

from caliban import __version__
from caliban.cli.options import EXIT_INTERRUPTED, EXIT_USAGE, CliOptions
from caliban.events import AgentEvent
from caliban.messages import ImagePart, Message, TextPart
from caliban.repl.approve import TerminalApprover, choose
from caliban.repl.attach import Attachment, attach
from caliban.repl.clipboard import ClipboardError, paste_image
from caliban.repl.commands import CommandContext, ExitRepl, find_command, run_command
from caliban.repl.complete import ReplCompleter, prompt_commands, resource_mentions
from caliban.repl.editor import NoEditor, edit_text
from caliban.repl.history import project_history
from caliban.repl.host import Opener, SessionHost
from caliban.repl.keys import prompt_key_bindings
from caliban.repl.render import ELBOW, Renderer, TerminalConsole, outside_text
from caliban.repl.statusline import StatusLine
from caliban.repl.terminal import Attention, quiet_keys, reading_keys, write_to_terminal
from caliban.repl.toolbar import toolbar_text
from caliban.repl.trust_prompt import settle_trust
from caliban.repl.typeahead import TypeAhead
from caliban.skills.slash import parse_slash

if TYPE_CHECKING:
    from caliban.config.settings import PermissionMode
    from caliban.permissions.rules import Rule
    from caliban.session.session import Session
    from caliban.skills.catalog import Skill

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
    from caliban.exec import run_main

    try:
        return run_main(_run_until_signalled(options))
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
    typing can start while caliban loads; a prompt submitted early waits for it. On the way
    out caliban says how to resume the session, and offers to keep or remove the worktree
    ``-w`` made.
    """
    console = console or TerminalConsole()
    renderer = Renderer(console, cwd=options.cwd)
    approver = TerminalApprover(console, cwd=options.cwd)
    if options.resume:
        # A mistyped id fails before anything is drawn (Claude Code's --resume opens a
        # search instead; caliban names the recent sessions).
        from caliban.config.paths import project_root
        from caliban.session.store import find_session

        find_session(project_root(options.cwd), options.resume)
    with create_app_session(input=input, output=output):
        # Before anything loads: the answer decides which project servers may start.
        await settle_trust(console, options.cwd)
        if (worktree := options.worktree) is not None:
            console.print(
                outside_text(
                    f"  Worktree {worktree.path} (branch {worktree.branch}); on exit you keep "
                    "or remove it",
                    "dim",
                )
            )
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
        hosts = [SessionHost(options, opener, ready, approver=approver, listener=repl.listener)]

        async def restart() -> None:
            """Close the session and open it again, conversation and id kept (``/trust``:
            the project's servers, settings and hooks apply from then on)."""
            from caliban.session.store import transcript_path

            old = repl.session
            saved = transcript_path(old.env.project_root, old.id).exists()
            again = dataclasses.replace(
                hosts[-1].options,
                prompt=None,
                continue_session=False,
                resume=old.id if saved else None,
                session_id=None if saved else old.id,
            )
            await hosts[-1].close()
            reopened: asyncio.Future[Session] = loop.create_future()
            hosts.append(
                SessionHost(again, opener, reopened, approver=approver, listener=repl.listener)
            )
            hosts[-1].start()
            repl.use(reopened)
            await repl.wait_for_session()

        repl.restart = restart
        try:
            if options.resume == "":
                # The resume picker reads the terminal itself: open the session first.
                hosts[0].start()
                await asyncio.wait({ready})
                ready.result()  # a failure (no such session) ends here
            code = await repl.run(first_prompt=options.prompt, when_shown=hosts[0].start)
        finally:
            await hosts[-1].close()
        await farewell(repl, options)
        return code


async def farewell(repl: Repl, options: CliOptions) -> None:
    """The last lines: ``caliban --resume <id>`` when the session was saved, and the
    worktree question when ``-w`` made one."""
    from caliban.session.store import transcript_path

    session = repl.opened_session()
    console = repl.console
    command = None
    if session is not None and transcript_path(session.env.project_root, session.id).exists():
        command = f"caliban --resume {session.id}"
    if options.worktree is not None:
        from caliban.repl.worktree_exit import leave_worktree

        kept = await leave_worktree(console, options.worktree)
        if not kept:
            return
        if command is not None:
            command = f"cd {shlex.quote(str(options.worktree.path))} && {command}"
    if command is not None:
        console.print(Text("Resume this session with:", style="dim"))
        console.print(Text(command), soft_wrap=True)  # one line to copy, however long


class Repl:
    """The read-eval-print loop over one session. Input and output are injectable for tests."""

    restart: Callable[[], Awaitable[None]] | None = None
    """Close the session and open it again (``/trust``), when the REPL's host can."""

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
        self._images: dict[str, ImagePart] = {}
        """Images pasted with Ctrl-V, by their ``[Image #1]`` placeholder."""
        self.typeahead = TypeAhead()
        self._stashed: str | None = None
        self._hint: str | None = None
        """A short note in the toolbar (``stashed``, a failed Ctrl-V) until the next prompt."""
        self.exit_armed_until = 0.0
        self._cycle: tuple[PermissionMode, ...] = MODE_CYCLE
        self.menus_shown = 0
        """A command's menus (``/rewind``) drawn so far, each reading keys from then on."""
        self.attention = Attention(write_to_terminal() if self._real_terminal else _no_write)
        self.status_line = StatusLine()
        self.renderer.typed = lambda: (
            self.typeahead.draft,
            self.typeahead.queued,
            self.typeahead.leaving,
        )
        if approver is not None:
            approver.pause = self.paused
            approver.on_interrupt = self.interrupt
            approver.early_keys = self._take_keys
            approver.on_shown = lambda: self.attention.ring("a question is waiting")
        self.prompt: PromptSession[str] = PromptSession(
            message=self._message,
            history=history if history is not None else project_history(self.cwd, self._warn),
            completer=ReplCompleter(
                self.cwd, custom=self._custom_commands, resources=self._resource_mentions
            ),
            complete_while_typing=True,
            key_bindings=prompt_key_bindings(self),
            bottom_toolbar=self._toolbar,
            prompt_continuation=lambda width, line, wrap: [("class:continuation", "  ")],
            style=STYLE,
            refresh_interval=0.5,
            reserve_space_for_menu=6,
            enable_suspend=True,
            input=input,
            output=output,
        )

    # -- the session

    @property
    def session(self) -> Session:
        """The session (only once open: see :meth:`wait_for_session`)."""
        return self._ready.result()

    def opened_session(self) -> Session | None:
        """The session, when it opened."""
        ready = self._ready
        if not ready.done() or ready.cancelled() or ready.exception() is not None:
            return None
        return ready.result()

    async def wait_for_session(self) -> Session:
        return await asyncio.shield(self._ready)

    def use(self, ready: asyncio.Future[Session]) -> None:
        """Drive the session ``ready`` resolves to from now on (a restarted one)."""
        self._resumed = False
        self._ready = ready
        ready.add_done_callback(self._session_opened)

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
        session = ready.result()
        if session.mcp is not None:
            from caliban.repl.elicit import TerminalElicitor

            session.mcp.set_elicitor(TerminalElicitor(self.console, pause=self.paused))
            session.mcp.follow_offers()  # prompts and resources, for completion and /help
        policy = session.permissions
        if policy is not None and policy.mode == "bypassPermissions":
            self._cycle = (*MODE_CYCLE, "bypassPermissions")
        self.status_line.configure(session, refreshed=self._redraw)
        if self._resumed:  # --continue / --resume: show where the conversation was
            messages = list(session.conversation.messages)
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

    def _redraw(self) -> None:
        app = get_app_session().app
        if app is not None and app.is_running:
            app.invalidate()

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
        self.attention.start()
        # The terminal never goes back to cooked mode between a turn and the prompt: there
        # the line discipline would take a Ctrl-D as end-of-file, and nobody would read it.
        with quiet_keys(self._real_terminal):
            return await self._loop(first_prompt)

    async def _loop(self, first_prompt: str | None) -> int:
        try:
            if first_prompt:
                await self._submit_and_queued(first_prompt)
            while not self.typeahead.take_leaving():
                if self._ready.done() and not self._ready.cancelled():
                    self._ready.result()  # the session failed to open: raise why
                pre_run = None
                if self._when_shown is not None:
                    pre_run = _soon(self._start_session)  # after the first draw of the prompt
                try:
                    text = await self.prompt.prompt_async(
                        default=self._next_default(), pre_run=pre_run
                    )
                except EOFError:
                    break
                except KeyboardInterrupt:
                    continue
                finally:
                    self._hint = None
                await self._submit_and_queued(text)
        except ExitRepl:
            pass
        finally:
            self.attention.stop()
        return 0

    async def _submit_and_queued(self, text: str) -> None:
        """Submit ``text``, then what was queued with Enter while it ran (as Claude Code
        sends queued messages together, once the turn is over)."""
        await self.submit(self._expand_pastes(text))
        while (queued := self.typeahead.take_queued()) is not None:
            self.console.print()
            self.console.print(outside_text(f"> {queued}", "bold"))
            await self.submit(queued)

    async def _menu(self, question: str, options: Sequence[str]) -> int | None:
        """A command's menu (``/rewind``): the chosen index; Esc and Ctrl-C raise
        KeyboardInterrupt. Keys typed before it was drawn go to the draft, never answer it."""

        def shown() -> None:
            self.menus_shown += 1

        return await choose(
            list(enumerate(options)),
            question=question,
            early_keys=self._take_keys,
            on_shown=shown,
        )

    def _prefill(self, text: str) -> None:
        """Start the next prompt with ``text`` (a rewound prompt's, to edit and resend)."""
        self._stashed = text

    def _next_default(self) -> str:
        """What the next prompt starts with: a draft typed during the turn, else the line
        stashed with Ctrl-S."""
        if draft := self.typeahead.take_draft():
            return draft
        stashed, self._stashed = self._stashed, None
        return stashed or ""

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
            if find_command(parsed[0]) is None and await self.run_mcp_prompt(*parsed):
                return
            context = CommandContext(
                session=session,
                console=self.console,
                replay=self.renderer.replay,
                run_prompt=self.run_turn,
                toggle_vi=self.toggle_vi,
                restart=self.restart,
                set_input=self._prefill,
                choose=self._menu,
            )
            # Interruptible like a turn: /compact waits for the model, /resume for servers.
            task = await self._interruptible(run_command(text, context))
            if task.cancelled():
                self.console.print(Text(f"  {ELBOW}  Interrupted: {parsed[0]}", style="yellow"))
            elif (failure := task.exception()) is not None:
                raise failure
            self.status_line.refresh()
            return
        images = [image for marker, image in self._images.items() if marker in text]
        self._images.clear()
        message, attachments, problems = await self._attach(session, text, images)
        for attachment in attachments:
            self.console.print(
                outside_text(f"  {ELBOW}  Attached @{attachment.path} ({attachment.note})", "dim")
            )
        for problem in problems:
            self.console.print(outside_text(f"  ⚠  {problem}", style="yellow"))
        await self.run_turn(message if attachments or images else text)

    async def _attach(
        self, session: Session, text: str, images: Sequence[ImagePart]
    ) -> tuple[Message, list[Attachment], list[str]]:
        """``text`` with its ``@file`` and ``@server:uri`` (MCP resource) mentions attached."""
        mcp = session.mcp
        if mcp is None:
            return attach(text, session.env, images=images)
        from caliban.mcp.resources import attach_resources, resource_mention
        from caliban.util.mentions import mentions

        servers = mcp.server_names()
        message, attachments, problems = attach(
            text,
            session.env,
            images=images,
            skip=lambda raw: resource_mention(raw, servers) is not None,
        )
        blocks, more = await attach_resources(mentions(text), mcp)
        for raw, block in blocks:
            part = TextPart(text=block)
            attachments.append(Attachment(path=raw, part=part, note="MCP resource"))
        parts = (*message.parts, *(TextPart(text=block) for _, block in blocks))
        return Message(role="user", parts=parts), attachments, [*problems, *more]

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

    async def run_mcp_prompt(self, name: str, arguments: str) -> bool:
        """``/mcp__server__prompt args``: run the server's prompt; False when ``name`` is not
        an MCP prompt's."""
        from caliban.skills.invoke import mcp_prompt

        prompt = await mcp_prompt(self.session, name, arguments)
        if prompt is None:
            return False
        if isinstance(prompt, str):
            self.renderer.error(prompt)
        else:
            await self.run_turn(prompt)
        return True

    async def run_turn(
        self, prompt: str | Message, *, model: str | None = None, allow: Sequence[Rule] = ()
    ) -> None:
        """Run one prompt to the end, or until Ctrl-C (:meth:`interrupt`) cancels it."""
        self.renderer.begin_turn()
        try:
            task = await self._interruptible(self.session.run(prompt, model=model, allow=allow))
        finally:
            self.renderer.end_turn()
            self.status_line.refresh()
        if task.cancelled():
            self.renderer.interrupted()
            return
        self.attention.ring("the answer is ready")
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
            with (
                self._sigint_interrupts(),
                reading_keys(self.prompt.app.input, self._take_keys),
            ):
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

    def _take_keys(self, keys: list[KeyPress]) -> None:
        """Keys typed while a turn runs (or before a question was drawn): the draft, the
        queue, Esc."""
        if self.typeahead.feed(self.attention.note_keys(keys)):
            self.interrupt()

    def cycle_mode(self) -> PermissionMode | None:
        """Shift-Tab: the next permission mode (default → acceptEdits → plan → …); ``None``
        when the session has no permission policy (yet)."""
        if (session := self.opened_session()) is None or session.permissions is None:
            return None
        policy = session.permissions
        index = self._cycle.index(policy.mode) if policy.mode in self._cycle else -1
        policy.mode = self._cycle[(index + 1) % len(self._cycle)]
        self.status_line.refresh()
        return policy.mode

    @property
    def busy(self) -> bool:
        """Whether a turn or a command is running (keys go to the draft, not the prompt)."""
        return self._turn is not None and not self._turn.done()

    def interrupt(self) -> None:
        """Cancel the running turn (Ctrl-C, Esc); nothing happens at the prompt."""
        if self._turn is not None and self.busy:
            self._turn.cancel()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Lend the terminal to a permission prompt in the middle of a turn."""
        with self.renderer.suspended():
            yield
        if self._turn is not None:
            # prompt-toolkit removed our SIGINT handler when its prompt ended.
            self._add_sigint_handler()

    # -- what the keys do (see caliban.repl.keys)

    def collapsed_paste(self, data: str) -> str:
        lines = data.count("\n") + 1
        size = f"+{lines} lines" if lines > 1 else f"{len(data):,} characters"
        placeholder = f"[Pasted text #{len(self._pastes) + 1} {size}]"
        self._pastes[placeholder] = data
        return placeholder

    def stash(self, buffer: Buffer) -> None:
        """Ctrl-S: put the line aside (it comes back after the next prompt is sent), or
        bring a stashed line back on an empty one."""
        if buffer.text.strip():
            self._stashed = buffer.text
            buffer.reset()
            self._hint = "› stashed (back after the next prompt; Ctrl-S on an empty line)"
        elif self._stashed is not None:
            buffer.text, self._stashed = self._stashed, None
            buffer.cursor_position = len(buffer.text)
            self._hint = None

    def edit_in_editor(self, buffer: Buffer) -> None:
        """Ctrl-G: the line in ``$EDITOR``; what the editor saves replaces it."""

        def edit() -> str | None:
            try:
                return edit_text(buffer.text)
            except NoEditor as exc:
                self.console.print(Text(f"  ⚠  {exc}", style="yellow"))
                return None

        async def run() -> None:
            edited = await run_in_terminal(edit)
            if edited is not None:
                buffer.text = edited.rstrip("\n")
                buffer.cursor_position = len(buffer.text)

        self._in_background(run())

    def paste_image(self, buffer: Buffer) -> None:
        """Ctrl-V: the clipboard's image, attached to this prompt as ``[Image #1]``."""

        async def paste() -> None:
            try:
                image = await asyncio.to_thread(paste_image)
            except ClipboardError as exc:
                problem = str(exc)
                self._hint = f"⚠ {problem}"
                self._show(lambda: self.console.print(outside_text(f"  ⚠  {problem}", "yellow")))
                return
            marker = f"[Image #{len(self._images) + 1}]"
            data = base64.b64encode(image.data).decode("ascii")
            self._images[marker] = ImagePart(media_type=image.media_type, data=data)
            buffer.insert_text(marker)

        self._in_background(paste())

    def show_todos(self) -> None:
        """Ctrl-T: the todo list of this conversation, above the prompt."""
        if (session := self.opened_session()) is not None:
            todos = session.env.state.get("TodoWrite")
            self._show(lambda: self.renderer.todo_list(todos if isinstance(todos, list) else []))

    def pick_model(self) -> None:
        """Alt-P: choose the model for the next prompts."""
        if (session := self.opened_session()) is None:
            return

        async def pick() -> None:
            from caliban.repl.commands import model_choices, switch_model

            choices = model_choices(session)
            async with in_terminal():
                try:
                    picked = await choose(choices, question="Switch the model (Esc: keep it)")
                except (KeyboardInterrupt, EOFError):
                    return
                if picked != session.model:
                    await switch_model(session, self.console, picked)
            self.status_line.refresh()

        self._in_background(pick())

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` beside the prompt (a key's action that waits)."""
        app = get_app_session().app
        if app is not None and app.is_running:
            app.create_background_task(work)
        else:
            work.close()

    def focus(self, focused: bool) -> None:
        self.attention.focused = focused

    def toggle_vi(self) -> bool:
        """``/vim``: vi keys at the prompt, or back to Emacs keys; returns whether vi is on."""
        vi = self.prompt.editing_mode != EditingMode.VI
        self.prompt.editing_mode = EditingMode.VI if vi else EditingMode.EMACS
        return vi

    # -- prompt pieces

    def _custom_commands(self) -> list[tuple[str, str]]:
        if (session := self.opened_session()) is None:
            return []
        commands = [(skill.name, skill.description) for skill in session.skills]
        if session.mcp is not None:
            commands += prompt_commands(session.mcp.prompts())
        return commands

    def _resource_mentions(self) -> list[tuple[str, str]]:
        if (session := self.opened_session()) is None or session.mcp is None:
            return []
        return resource_mentions(session.mcp.resources())

    def _message(self) -> StyleAndTextTuples:
        width = self.prompt.app.output.get_size().columns
        return [("", "\n"), ("class:rule", "─" * max(10, width) + "\n"), ("class:prompt", "> ")]

    def _toolbar(self) -> StyleAndTextTuples:
        hint = self._hint
        if time.monotonic() < self.exit_armed_until:
            hint = "Press Ctrl-C again to exit"
        if not self._ready.done():
            text = "starting…"
        elif self._ready.cancelled() or self._ready.exception() is not None:
            text = "could not start"
        else:
            text = toolbar_text(self.session)
        if self.prompt.editing_mode == EditingMode.VI:
            text = f"-- {_vi_state(self.prompt.app)} -- · {text}"
        line: StyleAndTextTuples = (
            [("class:hint", f" {hint}"), ("", f"   {text}")] if hint else [("", f" {text}")]
        )
        return [*self.status_line.fragments(), *line]

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

    # -- SIGINT while a turn runs

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


def _soon(callback: Callable[[], None]) -> Callable[[], None]:
    def schedule() -> None:
        asyncio.get_running_loop().call_soon(callback)

    return schedule


def _no_write(sequence: str) -> None:
    """Tests' pipes and dummy outputs get no control sequences."""


def _vi_state(app: Application[str]) -> str:
    from prompt_toolkit.key_binding.vi_state import InputMode

    return "NORMAL" if app.vi_state.input_mode == InputMode.NAVIGATION else "INSERT"


def _home(path: Path) -> str:
    text, home = str(path), str(Path.home())
    return "~" + text[len(home) :] if text == home or text.startswith(home + os.sep) else text


def _describe_error(exc: BaseException) -> str:
    from caliban.providers.base import ProviderError

    if isinstance(exc, ProviderError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
