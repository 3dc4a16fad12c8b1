"""The interactive approver: asks the user, inline, whether a tool call may run.

It shows what the call would do (the file change as a coloured diff for Edit and Write, the
command for Bash, the input otherwise), why caliban asks, and three answers::

    1. Yes
    2. Yes, and don't ask again for Bash(git status:*) in this project
    3. No, and tell caliban what to do differently

For a file edit that acceptEdits mode would allow, the second is Claude Code's "Yes, allow
all edits during this session (shift+tab)", which switches the session to acceptEdits.

Keys ``1``/``2``/``3`` answer at once (also ``y``, ``a``, ``n``); the arrows and Enter work
too. "No" asks for an optional instruction, which the model reads. Esc and Ctrl-C refuse and
interrupt the whole turn, as Esc does in Claude Code: the next prompt says what to do instead.

Only keys pressed after the question is drawn answer it: keys typed ahead while the model
was working (``also add tests``: its ``a`` would be "don't ask again") are handed back to
the REPL's draft, never read as an answer.

A plan (ExitPlanMode, in plan mode) is shown whole, as Markdown left in the scrollback, and
asks "Would you like to proceed?": yes with edits accepted (``acceptEdits``), yes asking before
each edit (``default``), or no, keep planning, with what to change, which the model reads.

On a terminal the question is a transient prompt-toolkit dialog: once answered it
disappears and the renderer's line for the tool call (with its diff or output) takes its
place. Elsewhere (tests, a console that is not a terminal) the request is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, assert_never

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, get_app_session
from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples
from prompt_toolkit.input.typeahead import get_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import FormattedTextControl, HSplit, Layout, Window
from prompt_toolkit.styles import Style
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from caliban.repl.render import (
    ELBOW,
    TerminalConsole,
    display_name,
    head_tail,
    markdown_text,
    relative,
    render_diff,
    shorten,
)
from caliban.tools.diff import FileChange, diff_lines
from caliban.util.text import visible

if TYPE_CHECKING:
    from caliban.config.settings import PermissionMode
    from caliban.permissions.approval import PermissionAnswer, PermissionRequest

Choice = Literal["once", "session", "edits", "deny"]
T = TypeVar("T")
EarlyKeys = Callable[[list[KeyPress]], None]
"""Where keys typed before a question was drawn go (the REPL's draft)."""
DIALOG_STYLE = Style.from_dict(
    {"selected": "bold #5fafff", "question": "bold", "footer": "#8a8a8a"}
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    choice: Choice
    said: str | None = None
    """What the user typed after choosing "No"."""
    interrupted: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanVerdict:
    """The answer about a plan, and whether the user interrupted the turn (Esc)."""

    answer: PermissionAnswer
    interrupted: bool = False


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def preview_text(preview: str, *, max_lines: int) -> Text:
    """A text preview (a command, the input) cut to fit: its head and tail."""
    out = Text()
    half = max(1, max_lines // 2)
    # split on "\n" only: splitlines() would also break at characters visible() shows
    for index, line in enumerate(head_tail(preview.rstrip("\n").split("\n"), half, half)):
        if index:
            out.append("\n")
        out.append(visible(line), style="dim" if line.startswith("… +") else "")
    return out


def title(request: PermissionRequest, cwd: Path | None) -> str:
    """``Bash command``, ``Edit caliban/cli.py``, ``github - search (MCP)``."""
    match request.tool_name:
        case "Bash":
            return "Bash command"
        case "Edit" | "Write" if request.subject:
            return f"{request.tool_name} {relative(request.subject, cwd)}"
        case _:
            subject = f"({shorten(relative(request.subject, cwd), 60)})" if request.subject else ""
            return f"{display_name(request.tool_name, request.origin)}{subject}"


class TerminalApprover:
    """An ``Approver`` that asks at the terminal, one question at a time.

    The REPL sets :attr:`pause` (hide the spinner while asking), :attr:`on_interrupt`
    (cancel the turn on Esc or Ctrl-C), :attr:`early_keys` (keys typed before the question
    was drawn: they go to its draft) and :attr:`on_shown` (a question is on the screen,
    reading keys).
    """

    def __init__(self, console: Console, *, cwd: Path | None = None) -> None:
        self.console = console
        self.cwd = cwd
        self.pause: Callable[[], AbstractContextManager[None]] = _nothing
        self.on_interrupt: Callable[[], None] = lambda: None
        self.early_keys: EarlyKeys = lambda keys: None
        self.on_shown: Callable[[], object] = lambda: None
        self.shown = 0
        """Questions drawn so far, the line asking what to do instead of a refused call
        among them (each reads keys from then on)."""
        self._lock = asyncio.Lock()

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        from caliban.permissions.approval import PermissionAnswer, user_denial

        if request.effects.leaves_plan_mode:
            async with self._lock:
                with self.pause():
                    verdict = await self.approve_plan(request)
            if verdict.interrupted:
                self.on_interrupt()
            return verdict.answer
        async with self._lock:
            with self.pause():
                decision = await self.ask(request)
        if decision.interrupted:
            self.on_interrupt()
        match decision.choice:
            case "once":
                return PermissionAnswer.allow_once()
            case "session":
                return PermissionAnswer.allow_session()
            case "edits":
                return PermissionAnswer.allow_once(mode="acceptEdits")
            case "deny":
                return PermissionAnswer.deny(user_denial(request.tool_name, decision.said))
            case _:
                assert_never(decision.choice)

    async def ask(self, request: PermissionRequest) -> Decision:
        """Show the request and read the answer."""
        options: list[tuple[Choice, str]] = [("once", "Yes")]
        if request.edits_mode_allows:
            options.append(("edits", "Yes, allow all edits during this session (shift+tab)"))
        elif request.suggestions:
            where = "in this project" if request.saved_in else "this session"
            rules = _listed(request.suggestions)
            options.append(("session", f"Yes, and don't ask again for {rules} {where}"))
        options.append(("deny", "No, and tell caliban what to do differently"))
        rows = get_app_session().output.get_size().rows
        panel = self._panel(request, max_preview=max(4, rows - len(options) - 9))
        on_terminal = self.console.is_terminal
        if not on_terminal:
            self.console.print(panel)
        shortcuts: dict[str, Choice] = {"y": "once", "n": "deny"}
        if len(options) == 3:
            shortcuts["a"] = options[1][0]
        try:
            choice = await choose(
                options,
                header=self._ansi(panel) if on_terminal else None,
                shortcuts=shortcuts,
                footer="Esc to refuse and interrupt",
                early_keys=self.early_keys,
                on_shown=self._shown,
            )
        except (KeyboardInterrupt, EOFError):
            self.console.print(Text(f"  {ELBOW}  Refused; interrupting.", style="red"))
            return Decision(choice="deny", interrupted=True)
        if (confirmation := _confirmation(choice, request)) is not None:
            self.console.print(Text(f"  ✓ {confirmation}", style="dim"))
        if choice != "deny":
            return Decision(choice=choice)
        try:
            said = await PromptSession[str]().prompt_async(
                [("", "  What should caliban do instead? (Enter to just refuse) ")],
                pre_run=self._follow_up_shown,
            )
        except (KeyboardInterrupt, EOFError):
            return Decision(choice="deny", interrupted=True)
        return Decision(choice="deny", said=said.strip() or None)

    async def approve_plan(self, request: PermissionRequest) -> PlanVerdict:
        """Show the model's plan (rendered Markdown, left in the scrollback) and ask: start
        with edits accepted, start asking before each edit, or keep planning (with what to
        change, which the model reads)."""
        from caliban.permissions.approval import PermissionAnswer
        from caliban.tools.exit_plan_mode import rejected

        plan = str(request.arguments.get("plan", ""))
        self.console.print(
            Panel(
                markdown_text(plan),
                title=Text("Here is caliban's plan", style="bold"),
                title_align="left",
                border_style="cyan",
                expand=True,
            )
        )
        options: list[tuple[PermissionMode | None, str]] = [
            ("acceptEdits", "Yes, and auto-accept edits"),
            ("default", "Yes, and manually approve edits"),
            (None, "No, keep planning"),
        ]
        try:
            mode = await choose(
                options,
                question="Would you like to proceed?",
                shortcuts={"n": None},
                footer="Esc to keep planning and interrupt",
                early_keys=self.early_keys,
                on_shown=self._shown,
            )
        except (KeyboardInterrupt, EOFError):
            self.console.print(Text(f"  {ELBOW}  Kept planning; interrupting.", style="red"))
            return PlanVerdict(answer=PermissionAnswer.deny(rejected(None)), interrupted=True)
        if mode is not None:
            return PlanVerdict(answer=PermissionAnswer.allow_once(mode=mode))
        try:
            said = await PromptSession[str]().prompt_async(
                [("", "  What should change in the plan? (Enter to just keep planning) ")],
                pre_run=self._follow_up_shown,
            )
        except (KeyboardInterrupt, EOFError):
            return PlanVerdict(answer=PermissionAnswer.deny(rejected(None)), interrupted=True)
        return PlanVerdict(answer=PermissionAnswer.deny(rejected(said.strip() or None)))

    def _shown(self) -> None:
        self.shown += 1
        self.on_shown()

    def _follow_up_shown(self) -> None:
        self.shown += 1  # no second ring: the user is answering already

    def _panel(self, request: PermissionRequest, *, max_preview: int) -> RenderableType:
        parts: list[RenderableType] = []
        preview = request.preview()
        if isinstance(preview, FileChange):
            diff = diff_lines(preview.before or "", preview.after)
            parts.append(render_diff(diff.lines, indent=0, max_lines=max_preview))
        elif preview.strip():
            parts.append(preview_text(preview, max_lines=max_preview))
        parts.append(Text(f"caliban asks because {visible(request.reason)}", style="dim"))
        return Panel(
            Group(*parts),
            title=Text(visible(title(request, self.cwd)), style="bold"),
            title_align="left",
            border_style="yellow",
            expand=True,
        )

    def _ansi(self, renderable: RenderableType) -> ANSI:
        return to_ansi(self.console, renderable)


def _confirmation(choice: Choice, request: PermissionRequest) -> str | None:
    """The line left on the screen by an answer that lasts past the call."""
    match choice:
        case "session" if request.saved_in:
            rules = _listed(request.suggestions)
            return f"{rules} allowed in this project (saved to {request.saved_in})"
        case "session":
            return f"{_listed(request.suggestions)} allowed for the rest of this session"
        case "edits":
            return "accept edits on: file edits in the project run without asking (shift+tab)"
        case _:
            return None


def to_ansi(console: Console, renderable: RenderableType) -> ANSI:
    """``renderable`` drawn for a prompt-toolkit dialog, in ``console``'s colours. Drawn by a
    :class:`TerminalConsole`: prompt-toolkit's ANSI parser would act on escapes in the text
    (``\\x01…\\x02`` is written to the terminal as it is)."""
    columns = get_app_session().output.get_size().columns
    buffer = io.StringIO()
    system = console.color_system
    TerminalConsole(
        file=buffer,
        width=columns,
        force_terminal=True,
        color_system="truecolor" if system == "truecolor" else "256" if system else None,
    ).print(renderable)
    return ANSI("\n" + buffer.getvalue())


Choose = Callable[[str, Sequence[str]], Awaitable[int | None]]
"""Asks the user to pick one of the options: its index, ``None`` when cancelled (the
REPL's menu for a command, :meth:`caliban.repl.app.Repl._menu`)."""


async def pick(chooser: Choose | None, question: str, options: Sequence[str]) -> int | None:
    """The index of the option the user picks with ``chooser``, or on a :func:`choose` menu
    of the terminal without one; ``None`` when cancelled (Esc, Ctrl-C, Ctrl-D)."""
    try:
        if chooser is not None:
            return await chooser(question, options)
        return await choose(list(enumerate(options)), question=question)
    except (KeyboardInterrupt, EOFError):
        return None


async def choose(
    options: Sequence[tuple[T, str]],
    *,
    header: ANSI | None = None,
    question: str = "Do you want to proceed?",
    shortcuts: Mapping[str, T] | None = None,
    footer: str | None = None,
    early_keys: EarlyKeys | None = None,
    on_shown: Callable[[], object] | None = None,
) -> T:
    """A transient numbered menu: a number picks its option at once, the arrows and Enter
    choose, ``shortcuts`` maps more keys (``y``, or ``escape``) to options; raises
    KeyboardInterrupt on Ctrl-C, Ctrl-D, and Esc unless a shortcut takes it.

    Only keys pressed once the menu is on the screen count: what was typed before it (the
    terminal's buffer, prompt-toolkit's type-ahead) is read away unanswered, before and
    right after the first draw, and given to ``early_keys``; ``on_shown`` is called then.
    """
    selected = 0

    def fragments() -> StyleAndTextTuples:
        lines: StyleAndTextTuples = [("class:question", f" {question}\n")]
        for index, (_, shown) in enumerate(options):
            label = visible(shown)  # a suggested rule quotes the command
            if index == selected:
                lines.append(("class:selected", f" ❯ {index + 1}. {label}\n"))
            else:
                lines.append(("", f"   {index + 1}. {label}\n"))
        if footer:
            lines.append(("class:footer", f" {footer}\n"))
        return lines

    keys = KeyBindings()

    @keys.add("up")
    def _up(event: KeyPressEvent) -> None:
        nonlocal selected
        selected = (selected - 1) % len(options)

    @keys.add("down")
    @keys.add("tab")
    def _down(event: KeyPressEvent) -> None:
        nonlocal selected
        selected = (selected + 1) % len(options)

    @keys.add("enter")
    def _accept(event: KeyPressEvent) -> None:
        event.app.exit(result=options[selected][0])

    @keys.add("c-c")
    @keys.add("c-d")
    @keys.add("escape")
    def _interrupt(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt())

    picks: dict[str, T] = dict(shortcuts or {})
    for number, (choice, _) in enumerate(options[:9], start=1):  # one key each: 1 to 9
        picks[str(number)] = choice
    for key, choice in picks.items():

        def pick(event: KeyPressEvent, choice: T = choice) -> None:
            event.app.exit(result=choice)

        keys.add(key)(pick)

    body = Window(  # wrapped: on a narrow terminal the options stay readable
        FormattedTextControl(fragments, focusable=True, show_cursor=False), wrap_lines=True
    )
    windows = [Window(FormattedTextControl(header), dont_extend_height=True)] if header else []
    app: Application[T] = Application(
        layout=Layout(HSplit([*windows, body])),
        key_bindings=keys,
        style=DIALOG_STYLE,
        erase_when_done=True,
        full_screen=False,
    )

    def read_away() -> None:
        early = [*get_typeahead(app.input), *app.input.read_keys(), *app.input.flush_keys()]
        # The terminal's answer to the menu's own cursor position request is not a key.
        answers = [key for key in early if key.key == Keys.CPRResponse]
        if answers:
            app.key_processor.feed_multiple(answers)
            app.key_processor.process_keys()
        typed = [key for key in early if key.key != Keys.CPRResponse]
        if typed and early_keys is not None:
            early_keys(typed)

    def after_first_draw(_app: object) -> None:
        app.after_render -= after_first_draw
        read_away()  # typed while the menu was being drawn, before anyone could see it
        if on_shown is not None:
            on_shown()

    app.after_render += after_first_draw
    return await app.run_async(pre_run=read_away)


def _listed(rules: tuple[str, ...]) -> str:
    """Rules as Claude Code lists commands in its option: ``a``, ``a and b``, ``a, b, and c``."""
    if len(rules) <= 2:
        return " and ".join(rules)
    return f"{', '.join(rules[:-1])}, and {rules[-1]}"
