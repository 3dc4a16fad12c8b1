"""Compaction on a long session: context tokens before and after, and how often it happens.

Run: ``python benchmarks/compaction.py [--turns 60] [--window 200000]``

A scripted model works through a long task: every turn it reads a file (about 16 KB of source
each, an ordinary Read result) and says what it saw. It reports as input tokens what caliban's
offline estimate of the request is (system prompt, tool definitions, history), so compaction
triggers exactly when a real provider's figure would cross ``context.auto_compact_at`` (85% of
the window). A summary request is answered with a 1,500-word summary. Printed: every
compaction (tokens before → after, messages before → after, local time spent) and, at the end,
the context the next request would carry with and without compaction.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from caliban.compaction import SUMMARY_INSTRUCTIONS
from caliban.config.settings import Settings
from caliban.events import AgentEvent, ConversationCompacted
from caliban.messages import Message, TextPart, ToolCall, Usage
from caliban.providers.base import ProviderEvent, ProviderRequest, ResponseDone, TextDelta
from caliban.session.session import Session
from caliban.tools.base import ToolEnv
from caliban.tools.builtin import builtin_tools
from caliban.util.tokens import estimate_json_tokens, estimate_tokens, message_tokens

SOURCE = "\n".join(f"def handler_{n}(event):\n    return process(event, {n})\n" for n in range(400))
SUMMARY = (
    "<summary>" + " ".join(["The user asked for a refactor of the handlers."] * 180) + "</summary>"
)


def request_tokens(request: ProviderRequest) -> int:
    tools = sum(estimate_json_tokens(spec.as_dict()) for spec in request.tools)
    return estimate_tokens(request.system) + tools + sum(map(message_tokens, request.messages))


class LongTask:
    """Reads ``turns`` files one per turn, then answers; summarises when asked to."""

    name = "bench"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.reads = 0

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        usage = Usage(input_tokens=request_tokens(request), output_tokens=50)
        if request.messages[-1].text.startswith(SUMMARY_INSTRUCTIONS):
            message = Message(role="assistant", parts=(TextPart(text=SUMMARY),))
        elif self.reads < self.turns:
            self.reads += 1
            call = ToolCall(
                id=f"r{self.reads}", name="Read", arguments={"file_path": f"f{self.reads}.py"}
            )
            message = Message(role="assistant", parts=(TextPart(text="Reading."), call))
        else:
            message = Message(role="assistant", parts=(TextPart(text="All handlers read."),))
        yield TextDelta(text=message.text)
        yield ResponseDone(message=message, usage=usage, stop_reason="end_turn")


async def main(turns: int, window: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="caliban-compaction-"))
    for n in range(1, turns + 1):
        (root / f"f{n}.py").write_text(SOURCE)
    provider = LongTask(turns)
    events: list[AgentEvent] = []
    session = Session(
        settings=Settings.model_validate({"max_turns": turns + 5}),
        provider=provider,  # type: ignore[arg-type]
        model="bench",
        system_prompt="You are a benchmark.",
        env=ToolEnv(cwd=root, project_root=root),
        builtins=builtin_tools(),
        listeners=[events.append],
    )
    session.context_window = lambda: window  # type: ignore[method-assign]
    started = time.perf_counter()
    result = await session.run("Read every handler file and tell me what they do.")
    elapsed = time.perf_counter() - started
    compactions = [e for e in events if isinstance(e, ConversationCompacted)]
    print(f"{turns} turns, each reading {len(SOURCE):,} characters; window {window:,} tokens")
    print(f"run: {result.subtype}, {elapsed:.2f} s in all (no model latency)\n")
    print("| # | tokens before | tokens after | messages after |")
    print("|---|---|---|---|")
    for n, event in enumerate(compactions, start=1):
        print(f"| {n} | {event.pre_tokens:,} | {event.post_tokens:,} | {len(event.messages)} |")
    without = sum(estimate_tokens(SOURCE) for _ in range(turns))
    final = request_tokens(session.agent().build_request())
    print(f"\nnext request: {final:,} tokens (without compaction it would be over {without:,})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--window", type=int, default=200_000)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.window))
