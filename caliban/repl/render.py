"""The terminal renderer: agent events in, rich output out.

:class:`Renderer` is a session listener. It streams the assistant's markdown (completed
blocks are printed for good, the block still being written is shown in a live region under
a spinner), shows each tool call compactly (``● Read(caliban/cli.py)`` / ``⎿  120 lines``),
Edit and Write as a coloured diff, Bash with the head and tail of its output, and a
sub-agent's tool calls indented under its ``Agent`` call.

The console is injected. On a terminal the live region (spinner, partial block) is a rich
``Live``; elsewhere (tests, pipes) only finished output is printed, so it can be asserted on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, assert_never

from rich.console import (
    Console,
    ConsoleDimensions,
    ConsoleOptions,
    Group,
    RenderableType,
    RenderResult,
)
from rich.live import Live
from rich.padding import Padding
from rich.segment import Segment
from rich.spinner import Spinner
from rich.style import Style
from rich.table import Table
from rich.text import Text

from caliban.events import (
    ActivationChanged,
    AgentEvent,
    ApiRetryEvent,
    AssistantDelta,
    AssistantMessage,
    AssistantThinkingDelta,
    BackgroundTaskUpdate,
    ConversationCleared,
    ConversationCompacted,
    ConversationRewound,
    HistoryAppended,
    ModelChanged,
    ModelFallback,
    Notice,
    PermissionModeChanged,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.mcp.tools import unmark
from caliban.messages import Message, ServerToolPart, ToolCall
from caliban.tools.base import McpOrigin, ToolOrigin
from caliban.tools.diff import DiffLine, FileChange, diff_lines
from caliban.util.text import plural, visible
from caliban.util.tokens import format_tokens

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rich.markdown import Markdown

BULLET = "●"
ELBOW = "⎿"
DIFF_MAX_LINES = 40
DIFF_LINE_CHARS = 1000
OUTPUT_HEAD = 6
OUTPUT_TAIL = 6
ARG_WIDTH = 80
REFRESH_PER_SECOND = 12
PRIMARY_ARGS = ("file_path", "command", "pattern", "query", "url", "description", "path")


# ---------------------------------------------------------------------------- the terminal


class TerminalConsole(Console):
    """The REPL's console: every piece of text it writes passes through
    :func:`~caliban.util.text.visible`, however it got there (the model's markdown, a TodoWrite
    item, an MCP server's name, a hook's output, an error quoting a server). Such text
    cannot then drive the terminal: an OSC 52 sequence writes the clipboard, SGR 8 conceals
    what follows it, ``\\x01…\\x02`` reaches the terminal raw through a prompt-toolkit
    dialog. rich's own control codes (colours, the live region's cursor moves) are not
    text and pass; markup and ``:emoji:`` codes in a plain string are not interpreted
    either, so a name like ``[conceal]`` or ``[link=…]`` is shown as written.

    The renderer escapes outside text before layout too (so wrapping counts the escapes'
    width); this is the step that holds for text it did not think of.

    Drawing to a terminal with no size given, it takes the terminal's size at each use, as
    prompt-toolkit does: rich would honour ``$COLUMNS`` and ``$LINES`` over it, and a value
    a parent exported (or one left from before a resize) would wrap every line at the wrong
    width. Into a pipe or a file, ``$COLUMNS`` still counts, as rich has it.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._follows_terminal = kwargs.get("width") is None and kwargs.get("height") is None
        kwargs = {"markup": False, "emoji": False, "highlight": False, **kwargs}
        super().__init__(**kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        if self._follows_terminal and (measured := _terminal_size(self.file)) is not None:
            return measured
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._follows_terminal = False
        width, height = new_size
        self._width, self._height = width, height

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text, style, control = segment
            # isprintable() is False for every character visible() escapes (and for
            # newlines, tabs and some spaces): a fast path for the common segment
            if control or (text.isprintable() and not (style and style.link)):
                yield segment
                continue
            if style is not None and style.link and visible(style.link) != style.link:
                style = style + Style(link=visible(style.link))
            yield Segment(visible(text), style)


def _terminal_size(file: IO[str]) -> ConsoleDimensions | None:
    """The size of the terminal ``file`` writes to, or None: not a terminal (or one that
    says 0 x 0, as a pseudo-terminal nobody sized does)."""
    try:
        if not file.isatty():
            return None
        columns, lines = os.get_terminal_size(file.fileno())
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError
        return None
    if columns <= 0 or lines <= 0:
        return None
    return ConsoleDimensions(columns, lines)


# ---------------------------------------------------------------------------- markdown blocks

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def split_blocks(text: str) -> tuple[list[str], str]:
    """Split streamed markdown into finished blocks and the block still being written.

    A block ends at a blank line outside a code fence once a line starting at column 0
    follows (an indented line may continue a list item), or at a closing fence. Each
    finished block renders on its own exactly as it would inside the whole text.
    """
    blocks: list[str] = []
    *complete, partial = text.split("\n")
    current: list[str] = []
    fence: str | None = None

    def flush() -> None:
        block = "\n".join(current).strip("\n")
        if block.strip():
            blocks.append(block)
        current.clear()

    def after_blank() -> bool:
        return bool(current) and not current[-1].strip()

    for line in complete:
        if fence is not None:
            current.append(line)
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
                flush()
            continue
        if line[:1].strip() and after_blank():
            flush()
        if match := _FENCE.match(line):
            flush()
            fence = match.group(1)
        current.append(line)
    if fence is None and partial[:1].strip() and after_blank():
        flush()
    rest = "\n".join([*current, partial])
    return blocks, rest if rest.strip() else ""


@functools.cache
def _markdown_class() -> type[Markdown]:
    """rich's Markdown with every heading left-aligned (a centred h1 looks lost in a
    transcript). Built on first use: rich.markdown pulls in markdown-it and pygments,
    which the prompt does not need to appear."""
    from rich.markdown import Heading, Markdown

    class LeftHeading(Heading):
        LEVEL_ALIGN = dict.fromkeys(("h1", "h2", "h3", "h4", "h5", "h6"), "left")

    class LeftMarkdown(Markdown):
        elements = {**Markdown.elements, "heading_open": LeftHeading}  # noqa: RUF012

    return LeftMarkdown


class _Trimmed:
    """A renderable without its leading and trailing blank lines."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        blank = [not "".join(segment.text for segment in line).strip() for line in lines]
        start = blank.index(False) if False in blank else len(lines)
        end = len(lines) - blank[::-1].index(False) if False in blank else start
        for line in lines[start:end]:
            yield from line
            yield Segment.line()


def outside_text(text: str, style: str = "") -> Text:
    """Text that did not come from caliban (a name, a description, a server's message) as
    a :class:`Text`, its control characters made :func:`visible` before rich lays it out."""
    return Text(visible(text), style=style)


def markdown_text(text: str) -> RenderableType:
    """Markdown the model wrote (an answer's block, a plan), its control characters made
    :func:`visible`, without blank lines around it."""
    return _Trimmed(_markdown_class()(visible(text.strip("\n"))))


def markdown_block(text: str, *, first: bool) -> RenderableType:
    """One finished markdown block: the first of a message behind a bullet, later ones
    indented under it with a blank line between."""
    markdown = markdown_text(text)
    if not first:
        return Padding(markdown, (1, 0, 0, 2))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=1, no_wrap=True)
    grid.add_column()
    grid.add_row(Text(BULLET), markdown)
    return grid


class _Tail:
    """The bottom ``max_lines`` of a renderable (the live region must fit the screen)."""

    def __init__(self, renderable: RenderableType, max_lines: int) -> None:
        self.renderable = renderable
        self.max_lines = max_lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        for line in lines[-self.max_lines :]:
            yield from line
            yield Segment.line()


# ---------------------------------------------------------------------------- tool display


def display_name(name: str, origin: ToolOrigin | None) -> str:
    """An MCP tool as ``github - search_issues (MCP)``; a built-in by its name."""
    if isinstance(origin, McpOrigin):
        return f"{origin.server} - {origin.tool} (MCP)"
    return name


def shorten(text: str, width: int = ARG_WIDTH) -> str:
    """The first line of ``text``, made :func:`visible`, cut to ``width``."""
    first, *more = visible(text).strip().splitlines() or [""]
    if more:
        first += " …"
    return first if len(first) <= width else first[: width - 1] + "…"


def describe_call(call: ToolCall, cwd: Path | None = None, origin: ToolOrigin | None = None) -> str:
    """``Read(caliban/cli.py)``: the tool and its most telling argument."""
    args = call.arguments
    name = visible(display_name(call.name, origin))
    if call.name == "TodoWrite":
        return "Update Todos"
    for key in PRIMARY_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value:
            if key in ("file_path", "path"):
                value = relative(value, cwd)
            return f"{name}({shorten(value)})"
    shown = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"{name}({shorten(shown)})"


def relative(path: str, cwd: Path | None) -> str:
    if cwd is None:
        return path
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(cwd)) if Path(path).is_absolute() else path
    return path


def count_lines(text: str) -> int:
    return len(text.splitlines())


def head_tail(lines: list[str], head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL) -> list[str]:
    """The first and last lines, with a marker for what was cut."""
    if len(lines) <= head + tail + 1:
        return lines
    return [*lines[:head], f"… +{len(lines) - head - tail} lines", *lines[-tail:]]


def _lines(text: str) -> list[str]:
    """Lines of tool output to show, control characters made :func:`visible`."""
    return visible(text).split("\n") if text else []


def render_diff(lines: Sequence[DiffLine], *, indent: int, max_lines: int = DIFF_MAX_LINES) -> Text:
    """Diff lines as coloured text (``  12 - old`` red, ``  12 + new`` green)."""
    out = Text()
    width = max((len(str(line.number)) for line in lines if line.number), default=1)
    pad = " " * indent
    for line in lines[:max_lines]:
        if line.kind == "…":
            out.append(f"{pad}{'':>{width}}   ⋮\n", style="dim")
            continue
        style = {"+": "green", "-": "red"}.get(line.kind, "dim")
        text = line.text
        if len(text) > DIFF_LINE_CHARS:  # a minified file's one line must not flood the screen
            text = f"{text[:DIFF_LINE_CHARS]} … (+{len(text) - DIFF_LINE_CHARS:,} characters)"
        out.append(f"{pad}{line.number:>{width}} {line.kind} {visible(text)}\n", style=style)
    if len(lines) > max_lines:
        out.append(f"{pad}… +{len(lines) - max_lines} more diff lines\n", style="dim")
    out.rstrip()
    return out


# ---------------------------------------------------------------------------- the renderer


@dataclass(kw_only=True)
class _Running:
    call: ToolCall
    origin: ToolOrigin | None
    depth: int
    started: float


class Renderer:
    """Renders agent events to ``console``. Call it with each event (it is a listener)."""

    def __init__(self, console: Console, *, cwd: Path | None = None) -> None:
        self.console = console
        self.cwd = cwd
        self.live_enabled = console.is_terminal and not console.is_dumb_terminal
        self._live: Live | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._spinner = Spinner("dots", style="cyan")
        self._buffer = ""
        self._blocks_printed = 0
        self._turn_started = time.monotonic()
        self._waiting = False
        self._running: dict[str, _Running] = {}
        self._depth: dict[str, int] = {}
        self._header_printed: set[str] = set()
        self._after_tool: list[tuple[int, str]] = []
        """Activation notices raised inside a running tool call, shown after its result."""
        self._thinking = ""
        """Reasoning not printed yet (it is printed dimmed, a line at a time)."""
        self._thinking_shown = False
        self._preloaded: set[str] = set()
        """MCP tools pre-activation loaded for the prompt and the model has not called yet."""
        self.typed: Callable[[], tuple[str, Sequence[str], bool]] | None = None
        """What the user is typing during the turn, the messages queued, and whether Ctrl-D
        asked to leave: shown under the spinner (set by the REPL)."""

    # -- turn lifecycle, driven by the REPL

    def begin_turn(self) -> None:
        """A prompt was submitted: show the spinner until the answer streams in."""
        self._turn_started = time.monotonic()
        self._waiting = True
        self._start_live()

    def end_turn(self) -> None:
        """The prompt finished (or was cancelled): flush text, remove the live region."""
        self._flush_text()
        self._waiting = False
        self._running.clear()
        self._stop_live()

    def interrupted(self) -> None:
        self._flush_text()
        message = f"  {ELBOW}  Interrupted · what should caliban do instead?"
        self.console.print(Text(message, style="yellow"))

    def replay(self, messages: Sequence[Message], *, prompts: int = 3) -> None:
        """Show the end of a resumed conversation: its last ``prompts`` user prompts and
        what followed each, compactly (text as markdown, tool calls as one line)."""
        starts = [i for i, m in enumerate(messages) if m.role == "user" and m.text.strip()]
        if not starts:
            return
        first = starts[-prompts] if len(starts) >= prompts else starts[0]
        if first:
            self.console.print(Text(f"  … {first} earlier messages", style="dim"))
        for message in messages[first:]:
            if message.role == "user":
                if message.text.strip():
                    self.console.print()
                    self.console.print(Text(f"> {shorten(message.text, 200)}", style="dim"))
                continue
            if message.text.strip():
                self.console.print()
                self.console.print(markdown_block(message.text, first=True))
            for call in message.tool_calls:
                self.console.print(Text(f"{BULLET} {describe_call(call, self.cwd)}", style="dim"))

    def shell_output(self, text: str, *, failed: bool) -> None:
        """The output of ``!command``, as a Bash call's: its head and tail under an elbow."""
        lines = head_tail(_lines(text.rstrip("\n"))) or ["(no output)"]
        first = f"  {ELBOW}  "
        body = Text(f"{first}{lines[0]}", style="red" if failed else "")
        for line in lines[1:]:
            style = "dim" if line.startswith("… +") else "red" if failed else ""
            body.append(f"\n{' ' * len(first)}{line}", style=style)
        self.console.print(body)

    def error(self, text: str) -> None:
        self._flush_text()
        self.console.print()
        self.console.print(Text(f"{BULLET} {visible(text)}", style="red"))

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Remove the live region while something else uses the terminal (a permission prompt)."""
        was_live = self._live is not None
        self._flush_text()
        self._stop_live()
        try:
            yield
        finally:
            if was_live:
                self._start_live()

    # -- events

    def __call__(self, event: AgentEvent) -> None:
        depth = self._depth_for(event.parent_tool_use_id)
        parent = event.parent_tool_use_id
        if parent and isinstance(event, ApiRetryEvent | ActivationChanged | Notice):
            self._ensure_header(parent)
        match event:
            case UserPrompt():
                if depth == 0:
                    self._waiting = True
            case AssistantThinkingDelta(text=text):
                if depth == 0:
                    self._thinking += text
                    self._commit_thinking(final=False)
            case AssistantDelta(text=text):
                if depth == 0:
                    self._commit_thinking(final=True)
                    self._waiting = False
                    self._buffer += text
                    self._commit_blocks(final=False)
            case AssistantMessage():
                if depth == 0:
                    self._flush_text()
                self._server_tools(event.message, depth)
            case ToolStarted(call=call, origin=origin):
                self._tool_started(call, origin, depth, event.parent_tool_use_id)
            case ToolFinished():
                self._tool_finished(event, depth)
            case ToolResultsMessage():
                if depth == 0:
                    self._waiting = True
            case ApiRetryEvent():
                status = f" ({event.status})" if event.status else ""
                self._line(
                    depth,
                    f"{ELBOW}  API error{status}: {shorten(event.error, 60)} · retrying in "
                    f"{event.delay_s:.1f}s (attempt {event.attempt}/{event.max_attempts})",
                    style="yellow dim",
                )
            case ActivationChanged(preactivated=True):
                # Guesses for the prompt: shown only if the model calls one (_tool_started).
                self._preloaded.update(event.activated)
                self._preloaded.difference_update(event.evicted)
            case ActivationChanged():
                text = f"MCP tools activated: {', '.join(event.activated) or 'none'}"
                if event.evicted:
                    text += f" (evicted {', '.join(event.evicted)})"
                if any(r.depth == depth for r in self._running.values()):
                    # Activations happen inside a tool call: show them under its line.
                    self._after_tool.append((depth, text))
                else:
                    self._line(depth, f"{ELBOW}  {text}", style="dim")
            case ModelFallback():
                self._line(
                    depth,
                    f"⚠  {event.original_model} is overloaded; switched to "
                    f"{event.fallback_model} for this prompt",
                    style="yellow",
                )
            case Notice(level=level, text=text):
                style = {"info": "dim", "warning": "yellow", "error": "red"}[level]
                mark = {"info": ELBOW, "warning": "⚠", "error": "✗"}[level]
                self._line(depth, f"{mark}  {text}", style=style)
            case ConversationCompacted():
                what = (
                    "the summary replaces it"
                    if event.trigger == "manual"
                    else "the earlier part is summarised"
                )
                self._line(
                    depth,
                    f"{ELBOW}  Conversation compacted ({event.trigger}): about "
                    f"{format_tokens(event.pre_tokens)} → {format_tokens(event.post_tokens)} "
                    f"tokens; {what}",
                    style="dim",
                )
            case BackgroundTaskUpdate(status=status) if status != "running":
                self._line(depth, f"{ELBOW}  background task {event.task_id} {status}", style="dim")
            case (
                HistoryAppended()
                | ModelChanged()
                | PermissionModeChanged()
                | ConversationCleared()
                | ConversationRewound()
                | BackgroundTaskUpdate()
            ):
                pass  # nothing to show: the REPL prints its own lines for /model and /clear
            case _:
                assert_never(event)

    # -- tools

    def _server_tools(self, message: Message, depth: int) -> None:
        """The web searches the provider ran within a response: ``● Web Search("query")``
        and how many results came back."""
        results = {
            str(part.block.get("tool_use_id")): part.block.get("content")
            for part in message.parts
            if isinstance(part, ServerToolPart) and part.kind.endswith("_tool_result")
        }
        for part in message.parts:
            if not isinstance(part, ServerToolPart) or part.kind != "server_tool_use":
                continue
            query = (part.block.get("input") or {}).get("query", "")
            found = results.get(str(part.block.get("id")))
            count = len(found) if isinstance(found, list) else 0
            outcome = plural(count, "result") if isinstance(found, list) else "no results"
            if depth == 0:
                self.console.print()
            header = Text("    " * depth)
            header.append(f"{BULLET} ", style="green")
            header.append(f"Web Search({shorten(str(query), 60)})", style="bold")
            self.console.print(header)
            self._line(depth, f"{ELBOW}  {outcome}", style="dim")

    def _depth_for(self, parent_id: str | None) -> int:
        if parent_id is None:
            return 0
        return self._depth.get(parent_id, 0) + 1

    def _tool_started(
        self, call: ToolCall, origin: ToolOrigin | None, depth: int, parent_id: str | None
    ) -> None:
        self._flush_text()
        self._depth[call.id] = depth
        self._running[call.id] = _Running(
            call=call, origin=origin, depth=depth, started=time.monotonic()
        )
        if parent_id is not None:
            self._ensure_header(parent_id)
        if call.name in self._preloaded:
            self._preloaded.discard(call.name)
            self._line(depth, f"{ELBOW}  MCP tool loaded for your prompt: {call.name}", style="dim")

    def _ensure_header(self, call_id: str) -> None:
        """Show the header of a running call before output nested under it (its sub-agent)."""
        running = self._running.get(call_id)
        if running is not None and call_id not in self._header_printed:
            self._header_printed.add(call_id)
            self._print_header(running.call, running.origin, running.depth)

    def _print_header(self, call: ToolCall, origin: ToolOrigin | None, depth: int) -> None:
        if depth == 0:
            self.console.print()  # a blank line between entries, as in a chat transcript
        header = Text("    " * depth)
        header.append(f"{BULLET} ", style="green" if depth == 0 else "dim green")
        header.append(describe_call(call, self.cwd, origin), style="bold" if depth == 0 else "dim")
        self.console.print(header)

    def _tool_finished(self, event: ToolFinished, depth: int) -> None:
        self._print_tool_result(event, depth)
        pending, self._after_tool = self._after_tool, []
        for line_depth, text in pending:
            self._line(line_depth, f"{ELBOW}  {text}", style="dim")

    def _print_tool_result(self, event: ToolFinished, depth: int) -> None:
        self._flush_text()
        call = event.call
        self._running.pop(call.id, None)
        header_shown = call.id in self._header_printed
        self._header_printed.discard(call.id)
        if depth == 0:
            if not header_shown:
                self._print_header(call, event.origin, depth)
            self.console.print(self._result(event, depth))
            return
        # A sub-agent's calls are one compact line each.
        failed = event.result.is_error
        line = Text("    " * depth)
        if header_shown:
            line.append(f"  {ELBOW}  ", style="dim")
        else:
            line.append(f"{BULLET} ", style="red" if failed else "dim green")
            line.append(describe_call(call, self.cwd, event.origin), style="dim")
            line.append(" · ", style="dim")
        if failed:
            line.append("error", style="red dim")
        else:
            line.append(self._summary(event), style="dim")
        self.console.print(line)

    def _summary(self, event: ToolFinished) -> str:
        if event.summary:
            return visible(event.summary)
        text = event.result.text
        if not text.strip():
            return "(no output)"
        n = count_lines(text)
        return f"{n} line{'s' if n != 1 else ''}"

    def _result(self, event: ToolFinished, depth: int) -> RenderableType:
        pad = "    " * depth + "  "
        first = f"{pad}{ELBOW}  "
        cont = " " * len(first)
        text = event.result.text
        if event.result.is_error:
            if isinstance(event.origin, McpOrigin):
                text = unmark(text)
            lines = head_tail(_lines(text.strip()) or ["(no message)"], 4, 2)
            body = Text(f"{first}Error: {lines[0]}", style="red")
            for line in lines[1:]:
                body.append(f"\n{cont}{line}", style="red")
            return body
        call = event.call
        if event.change is not None:
            return _change_result(event.change, first, cont, self.cwd)
        if call.name == "TodoWrite" and (todos := _todos(event)) is not None:
            return _checklist(todos, first, cont)
        if call.name == "Bash":
            lines = head_tail(_lines(text.rstrip("\n")))
            if not lines:
                return Text(f"{first}(no output)", style="dim")
            body = Text(f"{first}{lines[0]}")
            for line in lines[1:]:
                body.append(f"\n{cont}{line}", style="dim" if line.startswith("… +") else "")
            return body
        return Text(f"{first}{self._summary(event)}", style="dim")

    # -- text

    def _line(self, depth: int, text: str, *, style: str) -> None:
        self._flush_text()
        self.console.print(Text("    " * depth + "  " + visible(text), style=style))

    def _commit_blocks(self, *, final: bool) -> None:
        blocks, rest = split_blocks(self._buffer)
        if final and rest:
            blocks.append(rest)
            rest = ""
        if not blocks:
            return
        self._buffer = rest
        for block in blocks:
            self.console.print(self._block(block))

    def _block(self, block: str) -> RenderableType:
        first = self._blocks_printed == 0
        if first:
            self.console.print()
        self._blocks_printed += 1
        return markdown_block(block, first=first)

    def _commit_thinking(self, *, final: bool) -> None:
        """Print the finished lines of reasoning dimmed (all of it once the answer starts)."""
        done, _, rest = self._thinking.rpartition("\n")
        if final:
            done, rest = self._thinking, ""
        if done.strip():
            if not self._thinking_shown:  # a blank line before it, as before a message
                self.console.print()
            self._thinking_shown = True
            thought = outside_text(done.strip("\n"), style="dim italic")
            self.console.print(Padding(thought, (0, 0, 0, 2)))
        if done or final:
            self._thinking = rest
        if final:
            self._thinking_shown = False

    def _flush_text(self) -> None:
        """Print whatever text is buffered; the next text starts a new message."""
        self._commit_thinking(final=True)
        if self._buffer.strip():
            self._commit_blocks(final=True)
        self._buffer = ""
        self._blocks_printed = 0

    # -- the live region (terminals only)

    def _start_live(self) -> None:
        if not self.live_enabled or self._live is not None:
            return
        # No auto-refresh thread: rich's refresher racing our prints from the event loop
        # can move the cursor twice and overwrite lines. Refresh from the loop instead.
        self._live = Live(
            console=self.console,
            get_renderable=self._live_renderable,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)
        with contextlib.suppress(RuntimeError):  # no running loop: static live region
            self._ticker = asyncio.get_running_loop().create_task(self._tick(self._live))

    async def _tick(self, live: Live) -> None:
        while True:
            await asyncio.sleep(1 / REFRESH_PER_SECOND)
            live.refresh()

    def _stop_live(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _live_renderable(self) -> RenderableType:
        parts: list[RenderableType] = []
        buffer = self._buffer
        height = max(3, self.console.size.height - 4)
        if buffer.strip():
            first = not self._blocks_printed
            if first:
                parts.append(Text(""))  # where the blank line before a message will be
            parts.append(_Tail(markdown_block(buffer, first=first), height))
        status = self._status_text()
        if status is not None:
            if parts:
                parts.append(Text(""))
            self._spinner.update(text=Text(status, style="cyan"))
            parts.append(self._spinner)
        parts.extend(self._typed_lines())
        return Group(*parts)

    def _typed_lines(self) -> list[RenderableType]:
        """The messages queued during the turn and the line being typed."""
        draft, queued, leaving = self.typed() if self.typed is not None else ("", (), False)
        if leaving:
            return [Text(""), Text("  Ctrl-D: caliban exits when this answer ends", style="dim")]
        if not draft and not queued:
            return []
        lines: list[RenderableType] = [Text("")]
        for message in queued:
            lines.append(outside_text(f"  ❯ {shorten(message, 200)}", "dim"))
        if queued:
            lines.append(Text("    (sent when this answer ends)", style="dim"))
        if draft:
            lines.append(outside_text(f"> {draft.rsplit(chr(10), 1)[-1][-200:]}▌", "bold"))
        return lines

    def todo_list(self, todos: list[dict[str, Any]]) -> None:
        """The conversation's todo list (Ctrl-T)."""
        if not todos:
            self.console.print(Text(f"  {ELBOW}  No todo list in this conversation yet", "dim"))
            return
        self.console.print(_checklist(todos, f"  {ELBOW}  ", "     "))

    def _status_text(self) -> str | None:
        elapsed = int(time.monotonic() - self._turn_started)
        hint = f"({elapsed}s · ctrl-c to interrupt)"
        running = [r for r in list(self._running.values()) if r.depth == 0]
        if running:
            what = describe_call(running[0].call, self.cwd, running[0].origin)
            more = f" +{len(running) - 1}" if len(running) > 1 else ""
            return f"Running {shorten(what, 50)}{more}… {hint}"
        if self._waiting:
            return f"Thinking… {hint}"
        if self._buffer:
            return f"Writing… {hint}"
        return None


TODO_MARKS = {"completed": "☒", "in_progress": "☐", "pending": "☐"}


def _todos(event: ToolFinished) -> list[dict[str, Any]] | None:
    """The list a TodoWrite call left, from its structured result."""
    data = event.data
    todos = data.get("newTodos") if isinstance(data, dict) else None
    if not isinstance(todos, list) or not all(isinstance(t, dict) for t in todos):
        return None
    return todos


def _checklist(todos: list[dict[str, Any]], first: str, cont: str) -> RenderableType:
    """``☒ Write the code`` (done, struck through), ``☐ Run the tests`` (in progress, bold)."""
    if not todos:
        return Text(f"{first}(empty list)", style="dim")
    out = Text()
    for index, todo in enumerate(todos):
        status = str(todo.get("status", "pending"))
        out.append(first if index == 0 else f"\n{cont}")
        style = {"completed": "dim strike", "in_progress": "bold"}.get(status, "")
        content = visible(str(todo.get("content", "")))
        out.append(f"{TODO_MARKS.get(status, '☐')} {content}", style=style)
    return out


def _change_result(change: FileChange, first: str, cont: str, cwd: Path | None) -> RenderableType:
    """``Updated a.py (+2 -1)`` and the diff under it."""
    diff = diff_lines(change.before or "", change.after)
    verb = "Created" if change.created else "Updated"
    head = Text(f"{first}{verb} {visible(relative(str(change.path), cwd))}")
    head.append(f" (+{diff.added} -{diff.removed})", style="dim")
    if not diff.lines:
        return head
    return Group(head, render_diff(diff.lines, indent=len(cont)))
