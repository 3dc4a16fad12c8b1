"""``caliban -p``: run headless and print text, a JSON result, or stream-json frames.

The output is Claude Code's (2.1.197, recorded in ``tests/fixtures/claude_code``), so its
scripts work unchanged: :mod:`caliban.headless.frames` builds the frames; this module validates the
flags as Claude Code does, reads the prompt (an argument and/or stdin, or stream-json user
messages, one turn each), runs the turns and picks the exit code. Diagnostics go to stderr.

Exit codes: 0 success, 1 error during execution (an API error, max turns), 2 usage error
(Claude Code uses 1 here too), 78 config error, 130 interrupted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import signal
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from caliban.cli.options import EXIT_INTERRUPTED, EXIT_USAGE, CliOptions
from caliban.cli.output import write_or_discard
from caliban.events import (
    AgentEvent,
    ApiRetryEvent,
    ConversationCompacted,
    ModelFallback,
    Notice,
)
from caliban.headless.frames import Frame, FrameBuilder, TurnOutcome
from caliban.util.text import encodable

if TYPE_CHECKING:
    from caliban.agent import RunResult
    from caliban.mcp.connection import Phase
    from caliban.mcp.sdk_elicit import StdioElicitor
    from caliban.messages import Message, Part, Role
    from caliban.permissions.approval import Approver, DenyingApprover
    from caliban.permissions.sdk_prompt import StdioApprover
    from caliban.session.session import Session

EXIT_OK = 0
EXIT_ERROR = 1


MAX_STDIN_CHARS = 4_000_000
"""About a million tokens: more than any model's context window takes in one prompt."""
MAX_INPUT_LINE_CHARS = 64 * 1024 * 1024
"""A stream-json input line may be this long (images come base64-encoded in it)."""
STDIN_WAIT_S = 3.0
"""With a prompt argument, how long stdin may stay silent before it is taken to have nothing
to say (Claude Code's wait: a parent that spawns ``claude -p PROMPT`` with a pipe it never
writes to or closes, as Node's ``spawn`` does by default, must not hang the run)."""
NO_STDIN_WARNING = (
    "Warning: no stdin data received in 3s, proceeding without it. If piping from a slow "
    "command, redirect stdin explicitly: < /dev/null to skip, or wait longer."
)


class PromptTooLarge(Exception):
    """The prompt piped on stdin is over :data:`MAX_STDIN_CHARS`; the message says what to do."""


def validate(options: CliOptions) -> str | None:
    """Claude Code's checks of the headless flags: the message of the first that fails."""
    stream_out = options.output_format == "stream-json"
    if stream_out and not options.verbose:
        return "Error: When using --print, --output-format=stream-json requires --verbose"
    if options.include_partial_messages and not stream_out:
        return "Error: --include-partial-messages requires --print and --output-format=stream-json."
    if options.input_format == "stream-json" and not stream_out:
        return "Error: --input-format=stream-json requires output-format=stream-json."
    if options.replay_user_messages and not (stream_out and options.input_format == "stream-json"):
        return (
            "Error: --replay-user-messages requires --input-format=stream-json and "
            "--output-format=stream-json."
        )
    if options.session_id is not None:
        try:
            uuid.UUID(options.session_id)
        except ValueError:
            return "Error: Invalid session ID. Must be a valid UUID."
    return None


def read_prompt(options: CliOptions, stdin: IO[str]) -> str | None:
    """The prompt: the argument, stdin when it is piped, or both (``"<arg>\\n<stdin>"``, as
    Claude Code joins them).

    Raises :class:`PromptTooLarge` rather than reading an endless or huge stream into memory.
    """
    piped = None
    if not stdin.isatty() and (not options.prompt or _stdin_speaks(stdin, STDIN_WAIT_S)):
        piped = stdin.read(MAX_STDIN_CHARS + 1)
    if piped is not None and len(piped) > MAX_STDIN_CHARS:
        raise PromptTooLarge(
            f"the prompt on stdin is over {MAX_STDIN_CHARS:,} characters (about a million "
            "tokens, more than a model takes in one prompt); save it to a file and ask "
            "caliban to Read or Grep the parts it needs"
        )
    parts = [p.strip("\n") for p in (options.prompt, piped) if p and p.strip()]
    return "\n".join(parts) or None


def _stdin_speaks(stdin: IO[str], timeout: float) -> bool:
    """Whether ``stdin`` has data (or its end) within ``timeout`` seconds; says so on stderr
    when it has not. A stream without a file descriptor is read as it is."""
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):
        return True
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        write_or_discard(sys.stderr, NO_STDIN_WARNING + "\n")
    return bool(ready)


@dataclass(kw_only=True)
class Output:
    """Where frames go: a line each (stream-json), an array at the end (``json --verbose``),
    or only the result (``json``, ``text``)."""

    output_format: str
    verbose: bool
    out: IO[str]
    collected: list[Frame] = field(default_factory=list)

    def frame(self, frame: Frame) -> None:
        if self.output_format == "stream-json":
            self._line(frame)
        elif self.output_format == "json" and self.verbose:
            self.collected.append(frame)

    def result(self, frame: Frame) -> None:
        match self.output_format:
            case "stream-json":
                self._line(frame)
            case "json" if self.verbose:
                self.collected.append(frame)
            case "json":
                self._line(frame)
            case _:
                text = encodable(frame.get("result") or "")
                if text:
                    write_or_discard(self.out, text if text.endswith("\n") else text + "\n")

    def finish(self) -> None:
        if self.output_format == "json" and self.verbose:
            self._line(self.collected)

    def _line(self, obj: Any) -> None:
        line = encodable(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
        write_or_discard(self.out, line + "\n")


@dataclass(kw_only=True)
class StderrNotes:
    """Diagnostics for stderr: notices, and retries and compactions when no frames show
    them (``text`` and ``json`` output)."""

    err: IO[str]
    stream_json: bool
    """stream-json output: its ``api_retry`` and ``compact_boundary`` frames say those."""

    def __call__(self, event: AgentEvent) -> None:
        match event:
            case Notice(level="info", text=text):
                # Claude Code prints nothing on stderr when all goes well, and scripts read
                # `2>&1` as output: information goes to the debug log (--debug) only.
                logging.getLogger("caliban.notice").info(text)
            case Notice(level=level, text=text):
                write_or_discard(self.err, f"caliban: {level}: {text}\n")
            case ModelFallback() if not self.stream_json and not event.parent_tool_use_id:
                write_or_discard(
                    self.err,
                    f"caliban: {event.original_model} is overloaded ({event.error}); "
                    f"switched to {event.fallback_model}\n",
                )
            case ApiRetryEvent() if not self.stream_json:
                write_or_discard(
                    self.err,
                    f"caliban: API error ({event.error}); attempt {event.attempt} of "
                    f"{event.max_attempts} in {event.delay_s:.1f}s\n",
                )
            case ConversationCompacted() if not self.stream_json and not event.parent_tool_use_id:
                write_or_discard(
                    self.err,
                    f"caliban: conversation compacted ({event.trigger}): about "
                    f"{event.pre_tokens:,} → {event.post_tokens:,} tokens\n",
                )
            case _:
                pass


def run_headless(options: CliOptions) -> int:
    """Entry point for ``caliban -p``; returns the exit code."""
    if (problem := validate(options)) is not None:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    prompt: str | None = None
    if options.input_format == "text":
        try:
            prompt = read_prompt(options, sys.stdin)
        except PromptTooLarge as exc:
            print(f"caliban: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if prompt is None:
            print(
                "caliban: -p needs a prompt: pass it as an argument or pipe it on stdin",
                file=sys.stderr,
            )
            return EXIT_USAGE
    output = Output(output_format=options.output_format, verbose=options.verbose, out=sys.stdout)
    from caliban.exec import run_main

    return run_main(_run(options, prompt, output))


async def _run(options: CliOptions, prompt: str | None, output: Output) -> int:
    from caliban.permissions.approval import DenyingApprover
    from caliban.session.assemble import open_session

    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    state = _RunState(denier=DenyingApprover())
    approver: Approver = state.denier
    if asks_over_stdio(options):
        from caliban.permissions.sdk_prompt import StdioApprover

        state.prompter = StdioApprover(send=output.frame, on_interrupt=lambda: _interrupt(state))
        approver = state.prompter

    def on_signal() -> None:
        state.interrupted = True
        task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_signal)
    loop.add_signal_handler(signal.SIGTERM, on_signal)
    builder = FrameBuilder(sink=output.frame, partial=options.include_partial_messages)
    notes = StderrNotes(err=sys.stderr, stream_json=options.output_format == "stream-json")
    try:
        async with open_session(
            options, approver=approver, listeners=[builder, notes], interactive=False
        ) as session:
            _bind(builder, session)
            if options.max_budget_usd is not None:
                session.limit_spending(options.max_budget_usd)
            if options.input_format == "stream-json":
                if session.mcp is not None:  # the Agent SDK answers servers' questions
                    from caliban.mcp.sdk_elicit import StdioElicitor

                    state.elicitor = StdioElicitor(send=output.frame)
                    session.mcp.set_elicitor(state.elicitor)
                code = await _stream_input(session, options, builder, output, state)
            else:
                assert prompt is not None
                code = await _turn(session, prompt, options, builder, output, state)
    except asyncio.CancelledError:
        if not state.interrupted:
            raise
        code = EXIT_INTERRUPTED
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
    output.finish()
    return code


@dataclass(kw_only=True)
class _RunState:
    denier: DenyingApprover
    """Denies what would ask (nobody can answer in -p) and remembers it for the summary."""
    interrupted: bool = False
    """SIGINT or SIGTERM: the run ends."""
    interrupt_requested: bool = False
    """A control_request ``interrupt``: the running turn ends, the session goes on."""
    turn: asyncio.Task[Any] | None = None
    prompter: StdioApprover | None = None
    """``--permission-prompt-tool stdio``: the Agent SDK answers what would ask."""
    elicitor: StdioElicitor | None = None
    """stream-json input: the Agent SDK answers MCP servers' elicitations."""


def asks_over_stdio(options: CliOptions) -> bool:
    """``--permission-prompt-tool stdio`` with stream-json input: questions go to the Agent
    SDK as ``control_request`` frames (without stream-json input nothing could answer)."""
    return options.permission_prompt_tool == "stdio" and options.input_format == "stream-json"


def _interrupt(state: _RunState) -> None:
    """End the running turn; the session goes on (a control_request ``interrupt``)."""
    if state.turn is not None and not state.turn.done():
        state.interrupt_requested = True
        state.turn.cancel()


def _bind(builder: FrameBuilder, session: Session) -> None:
    from caliban.providers.select import context_window

    builder.session_id = session.id
    builder.model = session.model
    # This run's requests (a resumed session's earlier ones were reported by earlier runs).
    before = session.ledger.by_model()
    builder.usage_by_model = lambda: session.ledger.by_model(since=before)
    builder.tool_origin = lambda name: tool.origin if (tool := session.toolset.find(name)) else None
    # The provider object, not its name: it knows the configured override and what its
    # server reported, as /context and the result's ``context`` do.
    builder.context_window = lambda model: context_window(session.provider, model)


def init_info(session: Session) -> dict[str, Any]:
    """The values of a turn's ``system/init`` frame."""
    from caliban import __version__
    from caliban.claude_code.compat import caliban_mode
    from caliban.subagents import AGENT_TOOL_NAME

    phases = session.mcp.phases() if session.mcp is not None else {}
    # Claude Code lists the Agent tool under its older name, Task.
    tools = [
        "Task" if tool.name == AGENT_TOOL_NAME else tool.name for tool in session.toolset.offered()
    ]
    if session.offers_web_search():
        tools.append("WebSearch")
    mode = session.permission_mode_name or session.settings.permissions.mode
    if session.permissions is not None and session.permissions.mode != caliban_mode(mode):
        mode = session.permissions.mode  # changed since the start: an approved plan
    return {
        "cwd": str(session.cwd),
        "tools": tools,
        "mcp_servers": [
            {"name": name, "status": _server_status(phase)} for name, phase in phases.items()
        ],
        "model": session.model,
        "permissionMode": mode,
        "slash_commands": [skill.name for skill in session.skills],
        "apiKeySource": _api_key_source(session),
        "claude_code_version": __version__,
        "output_style": "default",
        "agents": sorted(d.name for d in session.agents),
        "skills": [skill.name for skill in session.skills if skill.kind == "skill"],
        "plugins": [],
        "analytics_disabled": True,
        "product_feedback_disabled": True,
        "memory_paths": {},  # caliban keeps no auto-memory directory
        "fast_mode_state": "off",
        # caliban's own names, kept for scripts written against earlier versions
        "permission_mode": mode,
        "caliban_version": __version__,
    }


def _server_status(phase: Phase) -> str:
    """A server's ``status`` in the init frame, in Claude Code's words: ``pending`` while it
    starts, ``needs-auth`` for a login."""
    from caliban.mcp.connection import Connecting, Failed

    if isinstance(phase, Connecting):
        return "pending"
    return "needs-auth" if isinstance(phase, Failed) and phase.needs_login else phase.state


def _api_key_source(session: Session) -> str:
    """The environment variable the API key came from (``apiKeySource``), or ``none``."""
    from caliban.providers.base import KEY_ENVS

    keys = {str(name): env for name, env in KEY_ENVS.items()}
    key_env = getattr(session.provider, "key_env", None) or keys.get(session.provider.name)
    return key_env or "none"


async def _turn(
    session: Session,
    prompt: str | Message,
    options: CliOptions,
    builder: FrameBuilder,
    output: Output,
    state: _RunState,
) -> int:
    """Run one turn: its init frame, the session's work, its result frame; the exit code."""
    from caliban.errors import ConfigError, UsageError
    from caliban.providers.base import ProviderError
    from caliban.session.assemble import result_extra

    builder.begin_turn()
    builder.init(init_info(session))
    extra: dict[str, Any] = {}
    denied_before = len(state.denier.denied)
    if options.json_schema is not None:
        from caliban.tools.structured_output import STATE_KEY

        session.env.state.pop(STATE_KEY, None)  # each turn gives its own answer
    try:
        state.turn = asyncio.ensure_future(_run_prompt(session, prompt))
        try:
            result = await state.turn
        finally:
            state.turn = None
    except asyncio.CancelledError:
        if not state.interrupted and not _cancelled_by_request(state):
            raise
        write_or_discard(sys.stderr, "caliban: interrupted\n")
        outcome = TurnOutcome(kind="interrupted", error="interrupted")
        code = EXIT_INTERRUPTED if state.interrupted else EXIT_ERROR
    except ProviderError as exc:
        write_or_discard(sys.stderr, f"caliban: {exc}\n")
        builder.api_error(str(exc), exc.status)
        outcome = TurnOutcome(kind="api_error", error=str(exc), status=exc.status)
        code = EXIT_ERROR
    except (ConfigError, UsageError):
        raise  # the user's to fix, with its own exit code
    except Exception as exc:
        # Whatever went wrong inside the loop, a script still gets its result frame, and
        # no traceback: the turn ends as an error (the traceback is in the --debug log).
        logging.getLogger(__name__).debug("the turn failed", exc_info=True)
        error = f"{type(exc).__name__}: {exc}"
        write_or_discard(sys.stderr, f"caliban: error: {error}\n")
        outcome = TurnOutcome(kind="error", error=error)
        code = EXIT_ERROR
    else:
        if options.output_format != "text":  # only the JSON result frames carry the report
            extra = result_extra(session)
        if result.error:
            write_or_discard(sys.stderr, f"caliban: {result.error}\n")
        if result.subtype == "error_max_turns":
            outcome = TurnOutcome(kind="max_turns", max_turns=session.max_turns)
            code = EXIT_ERROR
        elif result.subtype == "error_max_budget_usd":
            outcome = TurnOutcome(kind="max_budget", error=result.error)
            code = EXIT_ERROR
        elif result.subtype == "error_during_execution":  # a refused /command, a looping model
            outcome = TurnOutcome(kind="error", error=result.error)
            code = EXIT_ERROR
        elif (
            options.json_schema is not None
            and (structured := _structured(session, extra)) is not None
        ):
            outcome, code = structured
        elif result.num_turns == 0:  # answered without a request: an unknown /command
            builder.synthetic(result.text)
            outcome = TurnOutcome(kind="success", text=result.text, requested=False)
            code = EXIT_OK
        else:
            outcome = TurnOutcome(kind="success")
            code = EXIT_OK
    if denied := state.denier.denied[denied_before:]:
        from caliban.permissions.approval import denials_summary

        write_or_discard(sys.stderr, f"caliban: {denials_summary(denied)}\n")
    output.result(builder.result(outcome, extra=extra))
    if state.interrupted:
        raise asyncio.CancelledError
    return code


def _structured(session: Session, extra: dict[str, Any]) -> tuple[TurnOutcome, int] | None:
    """``--json-schema``: the answer goes in ``structured_output`` and, as JSON text, in
    ``result`` (``None``: it came); without one the turn failed, as in Claude Code."""
    from caliban.tools.structured_output import MAX_ATTEMPTS, provided

    value = provided(session.env)
    if value is not None:
        extra["result"] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        extra["structured_output"] = value
        return None
    error = f"Failed to provide valid structured output after {MAX_ATTEMPTS} attempts"
    write_or_discard(sys.stderr, f"caliban: {error}\n")
    extra["subtype"] = "error_max_structured_output_retries"
    return TurnOutcome(kind="error", error=error), EXIT_ERROR


async def _run_prompt(session: Session, prompt: str | Message) -> RunResult:
    """``/name args`` runs a custom command or skill (as in Claude Code); anything else is
    the prompt."""
    from caliban.skills.invoke import run_command
    from caliban.skills.slash import parse_slash

    text = prompt if isinstance(prompt, str) else _only_text(prompt)
    if text is not None and (command := parse_slash(text)) is not None:
        message_id = None if isinstance(prompt, str) else prompt.id
        return await run_command(session, *command, message_id=message_id)
    return await session.run(prompt)


def _only_text(message: Message) -> str | None:
    from caliban.messages import TextPart

    [*parts] = message.parts
    return parts[0].text if len(parts) == 1 and isinstance(parts[0], TextPart) else None


def _cancelled_by_request(state: _RunState) -> bool:
    """A control_request ``interrupt`` cancelled the turn (the session goes on)."""
    requested, state.interrupt_requested = state.interrupt_requested, False
    return requested


# ---------------------------------------------------------------------------- stream-json in


class InputError(Exception):
    """A stream-json input line Claude Code would reject; the message is Claude Code's."""


@dataclass(frozen=True, kw_only=True)
class InputMessage:
    """A user or assistant message read from stream-json input."""

    parts: tuple[Part, ...]
    content: str | list[Any]
    """The content as sent (echoed back as is by ``--replay-user-messages``)."""
    id: str | None = None
    """The line's ``uuid`` (the Agent SDK's name for the message), when it is a UUID: the
    message's id, echoed back and recorded."""


async def _stream_input(
    session: Session,
    options: CliOptions,
    builder: FrameBuilder,
    output: Output,
    state: _RunState,
) -> int:
    """One turn per stdin user message, in order; the session is shared. An ``assistant``
    line joins the history before the next turn; ``control_request`` lines are answered at
    once; unknown types are ignored (all as Claude Code does)."""
    lines = _stdin_lines()
    work: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()

    async def dispatch() -> None:
        # Control requests are answered at once, even while a turn runs (an interrupt must
        # reach it); everything else is queued in order for the turns. Whatever happens
        # here, the turns are told the input ended: a dispatcher that died silently left
        # caliban waiting forever.
        try:
            while (line := await lines.get()) is not None:
                if isinstance(line, InputError):
                    await work.put(("error", str(line)))
                    break
                try:
                    kind, payload = parse_input_line(line)
                except InputError as exc:
                    await work.put(("error", str(exc)))
                    break
                if kind == "control":
                    output.frame(await _control_response(payload, session, state))
                elif kind == "control_response":
                    for waiter in (state.prompter, state.elicitor):
                        if waiter is not None and waiter.answer(payload):
                            break
                elif kind != "ignored":
                    await work.put((kind, payload))
        except Exception as exc:
            await work.put(("error", f"Error: cannot read the input: {exc!r}"))
        finally:
            if state.prompter is not None:
                state.prompter.close()  # a question still waiting is denied
            if state.elicitor is not None:
                state.elicitor.close()  # and an elicitation cancelled
            work.put_nowait(None)

    reader = asyncio.ensure_future(dispatch())
    code = EXIT_OK
    try:
        while (item := await work.get()) is not None:
            kind, payload = item
            match kind:
                case "error":
                    write_or_discard(sys.stderr, f"{payload}\n")
                    return EXIT_ERROR
                case "assistant":
                    session.add_context(_input_message("assistant", payload))
                case _:
                    message = _input_message("user", payload)
                    if options.replay_user_messages:
                        builder.user_echo(payload.content, message.id)
                    turn_code = await _turn(session, message, options, builder, output, state)
                    code = code or turn_code
    finally:
        reader.cancel()
    return code


def _input_message(role: Role, payload: InputMessage) -> Message:
    from caliban.messages import Message, new_message_id

    return Message(role=role, parts=payload.parts, id=payload.id or new_message_id())


def _stdin_lines() -> asyncio.Queue[str | InputError | None]:
    """Lines of stdin as they arrive (read in a daemon thread); ``None`` at EOF, after an
    :class:`InputError` when a line is over :data:`MAX_INPUT_LINE_CHARS` or stdin cannot
    be read."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | InputError | None] = asyncio.Queue()

    def put(item: str | InputError | None) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def read() -> None:
        try:
            while raw := sys.stdin.readline(MAX_INPUT_LINE_CHARS + 1):
                if len(raw) > MAX_INPUT_LINE_CHARS:
                    put(
                        InputError(
                            f"Error: an input line is over {MAX_INPUT_LINE_CHARS:,} characters"
                        )
                    )
                    break
                if raw.strip():
                    put(raw.rstrip("\n"))
        except (OSError, ValueError) as exc:  # ValueError: bytes that are not UTF-8
            put(InputError(f"Error: cannot read the input: {exc}"))
        finally:
            put(None)

    threading.Thread(target=read, name="caliban-stdin", daemon=True).start()
    return queue


def parse_input_line(line: str) -> tuple[str, Any]:
    """``(kind, payload)`` for one stream-json input line: ``("user", InputMessage)``,
    ``("assistant", InputMessage)``, ``("control", request)``, ``("control_response",
    response)`` or ``("ignored", None)``;
    raises :class:`InputError` with Claude Code's message for a line it rejects."""
    from caliban.session.serialize import part_from_json

    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"Error parsing streaming input line: {line}: SyntaxError: {exc}"
        ) from None
    except RecursionError:
        raise InputError(
            f"Error parsing streaming input line: {line[:200]}…: nested too deeply"
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"Error parsing streaming input line: {line}: expected an object")
    kind = data.get("type")
    if kind == "control_request":
        return "control", data
    if kind == "control_response":
        return "control_response", data
    if kind not in ("user", "assistant"):
        return "ignored", None
    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    if role != kind:
        raise InputError(f"Error: Expected message role '{kind}', got '{_js(role)}'")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        raise InputError(
            f"Error: Expected message content to be a string or a list, got {content!r}"
        )
    parts: list[Part] = []
    for block in blocks:
        # Tool calls and their results enter the history only from the loop: a tool_use
        # from the input has no result, and every later request would carry it (the API
        # rejects that). Documents and other types are not taken as input either.
        if not isinstance(block, dict) or block.get("type") not in ("text", "image"):
            continue
        try:
            parts.append(part_from_json(block))
        except (KeyError, ValueError, TypeError, AttributeError):  # a field of the wrong type
            raise InputError(f"Error: invalid content block: {json.dumps(block)}") from None
    return kind, InputMessage(parts=tuple(parts), content=content, id=_uuid_or_none(data))


def _uuid_or_none(data: dict[str, Any]) -> str | None:
    """The line's ``uuid`` as sent, when it is one."""
    value = data.get("uuid")
    if not isinstance(value, str):
        return None
    try:
        uuid.UUID(value)
    except ValueError:
        return None
    return value


def _js(value: Any) -> str:
    return "undefined" if value is None else str(value)


async def _control_response(request: dict[str, Any], session: Session, state: _RunState) -> Frame:
    """The answer to an Agent SDK ``control_request`` (``initialize``, ``interrupt``,
    ``rewind_files``)."""

    request_id = request.get("request_id")
    subtype = (request.get("request") or {}).get("subtype")
    if subtype == "initialize":
        agents = [
            {
                "name": d.name,
                "description": d.description,
                **({"model": d.model} if d.model else {}),
            }
            for d in session.agents
        ]
        response: dict[str, Any] = {
            "commands": [],
            "agents": agents,
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [
                {
                    "value": session.model,
                    "resolvedModel": session.model,
                    "displayName": session.model,
                }
            ],
            "account": {
                "tokenSource": "none",
                "apiKeySource": _api_key_source(session),
                "apiProvider": "firstParty" if session.provider.name == "anthropic" else "openai",
            },
            "pid": os.getpid(),
        }
        return _control_ok(request_id, response)
    if subtype == "interrupt":
        _interrupt(state)
        return _control_ok(request_id, {})
    if subtype == "rewind_files":
        from caliban.checkpoints.control import rewind_files

        answer = await rewind_files(session.checkpoints, request.get("request") or {})
        if isinstance(answer, str):
            return _control_error(request_id, answer)
        return _control_ok(request_id, answer)
    return _control_error(request_id, f"Unsupported control request subtype: {subtype}")


def _control_error(request_id: Any, error: str) -> Frame:
    return {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    }


def _control_ok(request_id: Any, response: dict[str, Any]) -> Frame:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    }


__all__: list[str] = [
    "EXIT_ERROR",
    "EXIT_OK",
    "InputError",
    "InputMessage",
    "Output",
    "init_info",
    "parse_input_line",
    "read_prompt",
    "run_headless",
    "validate",
]
