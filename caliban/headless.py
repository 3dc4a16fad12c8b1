"""``caliban -p``: run one prompt headless and print text, a JSON result, or stream-json.

The output follows Claude Code's headless format so existing scripts work. Diagnostics go
to stderr, never stdout. Exit codes: 0 success, 1 error during execution, 2 usage error,
78 config error, 130 interrupted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from caliban.agent import RunResult
from caliban.cli.options import EXIT_INTERRUPTED, EXIT_USAGE, CliOptions
from caliban.events import (
    AgentEvent,
    ApiRetryEvent,
    AssistantMessage,
    ConversationCompacted,
    Notice,
    ToolResultsMessage,
)
from caliban.messages import Usage
from caliban.pricing import cost_usd
from caliban.serialize import message_to_json

if TYPE_CHECKING:
    from caliban.session.session import Session

EXIT_OK = 0
EXIT_ERROR = 1


MAX_STDIN_CHARS = 4_000_000
"""About a million tokens: more than any model's context window takes in one prompt."""


class PromptTooLarge(Exception):
    """The prompt piped on stdin is over :data:`MAX_STDIN_CHARS`; the message says what to do."""


def read_prompt(options: CliOptions, stdin: IO[str]) -> str | None:
    """The prompt argument, stdin when it is piped, or both (stdin first, as context).

    Raises :class:`PromptTooLarge` rather than reading an endless or huge stream into memory.
    """
    piped = None if stdin.isatty() else stdin.read(MAX_STDIN_CHARS + 1)
    if piped is not None and len(piped) > MAX_STDIN_CHARS:
        raise PromptTooLarge(
            f"the prompt on stdin is over {MAX_STDIN_CHARS:,} characters (about a million "
            "tokens, more than a model takes in one prompt); save it to a file and ask "
            "caliban to Read or Grep the parts it needs"
        )
    parts = [p.strip() for p in (piped, options.prompt) if p and p.strip()]
    return "\n\n".join(parts) or None


@dataclass(kw_only=True)
class HeadlessPrinter:
    """Turns loop events into the chosen output format."""

    output_format: str
    out: IO[str]
    err: IO[str]
    session_id: str = ""
    started: float = field(default_factory=time.monotonic)

    def line(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()

    def init(
        self,
        *,
        cwd: str,
        model: str,
        tools: list[str],
        mcp_servers: list[dict[str, str]],
        permission_mode: str,
    ) -> None:
        if self.output_format == "stream-json":
            self.line(
                {
                    "type": "system",
                    "subtype": "init",
                    "session_id": self.session_id,
                    "cwd": cwd,
                    "model": model,
                    "tools": tools,
                    "mcp_servers": mcp_servers,
                    "permission_mode": permission_mode,
                }
            )

    def __call__(self, event: AgentEvent) -> None:
        match event:
            case ApiRetryEvent():
                info = {
                    "attempt": event.attempt,
                    "max_retries": event.max_attempts,
                    "retry_delay_ms": int(event.delay_s * 1000),
                    "error_status": event.status,
                    "error": event.error,
                }
                if self.output_format == "stream-json":
                    self.line(
                        {
                            "type": "system",
                            "subtype": "api_retry",
                            **info,
                            "session_id": self.session_id,
                        }
                    )
                else:
                    self.err.write(
                        f"caliban: API error ({event.error}); attempt {event.attempt} of "
                        f"{event.max_attempts} in {event.delay_s:.1f}s\n"
                    )
            case ConversationCompacted() if event.parent_tool_use_id is None:
                if self.output_format != "stream-json":
                    self.err.write(
                        f"caliban: compacted the conversation ({event.trigger}): "
                        f"~{event.pre_tokens:,} → ~{event.post_tokens:,} tokens\n"
                    )
                    return
                # Claude Code's boundary frame, then the summary as the user message it is.
                self.line(
                    {
                        "type": "system",
                        "subtype": "compact_boundary",
                        "session_id": self.session_id,
                        "compact_metadata": {
                            "trigger": event.trigger,
                            "pre_tokens": event.pre_tokens,
                            "post_tokens": event.post_tokens,
                        },
                    }
                )
                self.line(
                    {
                        "type": "user",
                        "message": message_to_json(event.messages[0]),
                        "parent_tool_use_id": None,
                        "session_id": self.session_id,
                    }
                )
            case Notice(level=level, text=text):
                self.err.write(f"caliban: {level}: {text}\n")
            case AssistantMessage() if self.output_format == "stream-json":
                message = message_to_json(event.message)
                message.update(type="message", model=event.model, usage=event.usage.as_dict())
                self.line(
                    {
                        "type": "assistant",
                        "message": message,
                        "parent_tool_use_id": event.parent_tool_use_id,
                        "session_id": self.session_id,
                    }
                )
            case ToolResultsMessage() if self.output_format == "stream-json":
                self.line(
                    {
                        "type": "user",
                        "message": message_to_json(event.message),
                        "parent_tool_use_id": event.parent_tool_use_id,
                        "session_id": self.session_id,
                    }
                )
            case _:
                pass

    def result(
        self,
        *,
        subtype: str,
        text: str,
        num_turns: int,
        usage: Usage,
        cost: float | None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        obj = {
            "type": "result",
            "subtype": subtype,
            "is_error": subtype != "success",
            "result": text,
            "num_turns": num_turns,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
            "session_id": self.session_id,
            "usage": usage.as_dict(),
            "total_cost_usd": cost,
            **(extra or {}),
        }
        if self.output_format in ("json", "stream-json"):
            self.line(obj)
        elif text:
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()


def run_headless(options: CliOptions) -> int:
    """Entry point for ``caliban -p``; returns the exit code."""
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
    printer = HeadlessPrinter(output_format=options.output_format, out=sys.stdout, err=sys.stderr)
    return asyncio.run(_run(options, prompt, printer))


async def _run(options: CliOptions, prompt: str, printer: HeadlessPrinter) -> int:
    from caliban.providers.base import ProviderError
    from caliban.session.assemble import open_session, result_extra, session_init_info

    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_sigint() -> None:
        nonlocal interrupted
        interrupted = True
        task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, on_sigint)
    session = None
    try:
        async with open_session(options, listeners=[printer], interactive=False) as session:
            printer.session_id = session.id
            printer.init(**session_init_info(session))
            before = session.conversation.usage
            result = await _run_prompt(session, prompt)
            # The session's usage also counts sub-agents; the run's only the main agent.
            result = dataclasses.replace(result, usage=session.conversation.usage - before)
            _finish(printer, session.model, result, extra=result_extra(session))
            return EXIT_OK if result.subtype == "success" else EXIT_ERROR
    except asyncio.CancelledError:
        if not interrupted:
            raise
        _fail(printer, session, "interrupted", "error_during_execution")
        return EXIT_INTERRUPTED
    except ProviderError as exc:
        _fail(printer, session, str(exc), "error_during_execution")
        return EXIT_ERROR
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)


async def _run_prompt(session: Session, prompt: str) -> RunResult:
    """``/name args`` runs a custom command or skill; anything else is the prompt."""
    from caliban.skills.invoke import run_command
    from caliban.skills.slash import parse_slash

    if (command := parse_slash(prompt)) is not None:
        return await run_command(session, *command)
    return await session.run(prompt)


def _finish(printer: HeadlessPrinter, model: str, result: RunResult, extra: dict[str, Any]) -> None:
    if result.error:
        printer.err.write(f"caliban: {result.error}\n")
    printer.result(
        subtype=result.subtype,
        text=result.text,
        num_turns=result.num_turns,
        usage=result.usage,
        cost=cost_usd(model, result.usage),
        extra=extra,
    )


def _fail(printer: HeadlessPrinter, session: Any, message: str, subtype: str) -> None:
    printer.err.write(f"caliban: {message}\n")
    usage = session.conversation.usage if session is not None else Usage()
    model = session.model if session is not None else ""
    turns = sum(1 for m in session.conversation.messages if m.role == "assistant") if session else 0
    printer.result(
        subtype=subtype,
        text="",
        num_turns=turns,
        usage=usage,
        cost=cost_usd(model, usage),
        extra={"error": message},
    )
