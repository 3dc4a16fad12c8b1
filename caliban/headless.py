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
from typing import IO, Any

from caliban.agent import RunResult
from caliban.cli.options import EXIT_INTERRUPTED, EXIT_USAGE, CliOptions
from caliban.events import (
    ActivationChanged,
    AgentEvent,
    ApiRetryEvent,
    AssistantMessage,
    Notice,
    ToolResultsMessage,
)
from caliban.messages import Usage
from caliban.pricing import cost_usd
from caliban.serialize import message_to_json

EXIT_OK = 0
EXIT_ERROR = 1


def read_prompt(options: CliOptions, stdin: IO[str]) -> str | None:
    """The prompt argument, stdin when it is piped, or both (stdin first, as context)."""
    piped = None if stdin.isatty() else stdin.read()
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
            case ActivationChanged() if self.output_format == "stream-json":
                self.line(
                    {
                        "type": "system",
                        "subtype": "mcp_activation",
                        "activated": list(event.activated),
                        "evicted": list(event.evicted),
                        "active": list(event.active),
                        "parent_tool_use_id": event.parent_tool_use_id,
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
    prompt = read_prompt(options, sys.stdin)
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
            result = await session.run(prompt)
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
