"""Does a long session cost more per turn than a short one? caliban's own CPU time per turn.

    python benchmarks/long_session.py [--turns 500] [--window 25] [--runs 3] [--pairs 12]
        [--provider anthropic|openai|both] [--no-freeze]

One agent run of ``--turns`` tool-calling turns through the real provider and HTTP client,
against the fake model server (tests/fake_model_server.py) in its own process, so the
server's work (parsing a body that grows with the history) is not counted. Each turn the
model calls a no-op tool with a 300-character argument and gets a ~800-character result
back, so the history grows (to ~0.6 MB at 500 turns) as a real session's does.

Two figures per turn, both the CPU time of this process (``time.process_time``):

- **total**: from one request leaving (the provider's ``stream`` called) to the next: the
  response's parsing, the loop, the tool, building the next request's body, and sending it.
- **excluding the send**: the total minus the CPU spent inside the HTTP transport's
  ``handle_async_request`` (wrapped here, from the benchmark's side: the product is not
  changed for it), which runs from the moment the body is handed to the transport until
  the response's head arrives: writing the body to the socket (its bytes grow with the
  history, which the issue allows: "beyond the bytes sent") and the event loop's wake-ups
  while the server reads it. What is left is caliban's own work.

Prints, per provider and run, the mean and the median of an early window of turns and of the
last one, and their ratios, for both figures; the target is a ratio within 1.2 by both for
the figure excluding the send (the total is printed beside it, nothing hidden). The early
window starts at the second turn: the first opens the connection and runs code paths for the
first time, which made the old "first 10 turns" mean look slower than a steady short session
and flattered the ratio. Windows are ``--window`` turns (default 25): a 10-turn mean on a
busy machine moved by ±20% from run to run. CPU spent in the garbage collector's full
(generation 2) collections is counted like any other, and also printed per window: before
caliban froze its start-up objects (``gc.freeze``), one cost 10-50 ms, mostly walking the
objects of the imported modules (not the history). The benchmark freezes where caliban does
(``Session.run``'s first prompt: imports done, before the first request); ``--no-freeze``
measures without.

A 500-turn run lasts long enough for the machine's load to change between its first window
and its last: on a shared 2-core machine (load 4.5) single runs' ratios ranged 0.66-1.85.
``--pairs N`` cancels that drift: after each run, N pairs of short sessions of ``--window``
+ 1 turns, one started fresh and one after the run's whole history (500 turns and its
answer, the message objects the loop made: a second prompt in a long session), alternately,
so both halves of the ratio are measured under the same load; turns 2 to ``--window`` + 1 of each
are pooled. ``PYTHONPATH=OTHER_TREE`` measures another checkout (e.g. ``git archive main``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
FAKE_SERVER = ROOT / "tests" / "fake_model_server.py"
if "PYTHONPATH" not in os.environ:
    sys.path.insert(0, str(ROOT))

from caliban.agent import Agent, Conversation  # noqa: E402
from caliban.messages import Message  # noqa: E402
from caliban.providers.anthropic import AnthropicProvider  # noqa: E402
from caliban.providers.base import ProviderEvent, ProviderRequest  # noqa: E402
from caliban.providers.openai import OpenAIProvider  # noqa: E402
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput  # noqa: E402
from caliban.toolsets.tool_list import ToolList  # noqa: E402

RESULT = "line of tool output that a real tool would print, more or less\n" * 12
ARGUMENT = "x" * 300


class NoopInput(BaseModel):
    note: str = ""


class Noop(BuiltinTool[NoopInput]):
    name = "Noop"
    description = "Does nothing and says so at length."
    input_model = NoopInput
    read_only = False  # the loop stops a read-only call repeated turn after turn

    async def run(self, args: NoopInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text(RESULT)


class Timed:
    """Wraps a provider: the process's CPU time when each request leaves, and the CPU time
    of full garbage collections and of the transport's send during each turn."""

    def __init__(self, inner: AnthropicProvider | OpenAIProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.sent: list[float] = []
        self.full_gc: list[float] = [0.0]
        self.in_send: list[float] = [0.0]
        self._gc_started = 0.0

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.sent.append(time.process_time())
        self.full_gc.append(0.0)
        self.in_send.append(0.0)
        return self.inner.stream(request)

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_started = time.process_time()
        else:
            self.full_gc[-1] += time.process_time() - self._gc_started

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@contextlib.contextmanager
def sends_timed(timed: Timed) -> Iterator[None]:
    """Adds to ``timed.in_send`` the CPU time each request spends in the HTTP transport,
    from the body handed over to the response's head (see the module's docstring)."""
    transport = httpx2.AsyncHTTPTransport
    original = transport.handle_async_request

    async def handle_async_request(self: Any, request: httpx2.Request) -> httpx2.Response:
        started = time.process_time()
        try:
            return await original(self, request)
        finally:
            timed.in_send[-1] += time.process_time() - started

    transport.handle_async_request = handle_async_request  # type: ignore[method-assign]
    try:
        yield
    finally:
        transport.handle_async_request = original  # type: ignore[method-assign]


def fake_server(turns: int) -> tuple[subprocess.Popen[str], str]:
    steps = [
        {"tool_calls": [{"name": "Noop", "arguments": {"note": ARGUMENT}}], "repeat": turns},
        {"text": "done"},
    ]
    script = Path(tempfile.mkdtemp()) / "steps.json"
    script.write_text(json.dumps(steps))
    server = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


@dataclass(frozen=True, kw_only=True)
class Turns:
    """CPU ms per turn: in all, without the send, and in full garbage collections."""

    total: list[float]
    excluding_send: list[float]
    full_gc: list[float]
    history: list[Message]
    """The conversation at the end."""


def measure(
    provider_name: str, turns: int, *, freeze: bool, history: Sequence[Message] = ()
) -> Turns:
    """One session of ``turns`` turns against a fresh fake server, after ``history``."""
    server, url = fake_server(turns)
    try:
        inner = (
            AnthropicProvider(api_key="bench", base_url=url)
            if provider_name == "anthropic"
            else OpenAIProvider(api_key="bench", base_url=f"{url}/v1")
        )
        provider = Timed(inner)
        agent = Agent(
            provider=provider,
            model="bench-model",
            system_prompt="You are a benchmark. " * 200,
            toolset=ToolList([Noop()]),
            env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()),
            max_turns=turns + 5,
            conversation=Conversation(messages=list(history)),
        )

        async def run() -> None:
            await provider.inner.prepare()
            if freeze:  # where caliban freezes: imports done, before the first request
                gc.freeze()
            await agent.run("go")
            await provider.inner.aclose()

        gc.callbacks.append(provider.on_gc)
        try:
            with sends_timed(provider):
                asyncio.run(run())
        finally:
            gc.callbacks.remove(provider.on_gc)
            gc.unfreeze()  # the next session starts from the same heap
    finally:
        server.terminate()
        server.wait()
    sent = provider.sent
    total = [(b - a) * 1000 for a, b in itertools.pairwise(sent)]
    in_send = [t * 1000 for t in provider.in_send[1 : len(sent)]]
    return Turns(
        total=total,
        excluding_send=[t - s for t, s in zip(total, in_send, strict=True)],
        full_gc=[t * 1000 for t in provider.full_gc[1 : len(sent)]],
        history=agent.conversation.messages,
    )


def paired(
    provider_name: str, history: Sequence[Message], *, pairs: int, window: int, freeze: bool
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Turns 2 to ``window + 1`` of ``pairs`` short sessions, each started fresh or after
    ``history``, alternately: the per-turn samples of each (excluding the send, total)."""
    fresh_excl: list[float] = []
    fresh_total: list[float] = []
    long_excl: list[float] = []
    long_total: list[float] = []
    for _ in range(pairs):
        for start, excl, total in (((), fresh_excl, fresh_total), (history, long_excl, long_total)):
            turns = measure(provider_name, window + 1, freeze=freeze, history=start)
            excl.extend(turns.excluding_send[1:])
            total.extend(turns.total[1:])
    return fresh_excl, fresh_total, long_excl, long_total


def ratios(prefix: str, figure: str, early: list[float], late: list[float]) -> None:
    for label, average in (("mean", statistics.mean), ("median", statistics.median)):
        first, last = average(early), average(late)
        print(
            f"{prefix} {figure:<10} {label:<6} early {first:6.2f} ms   last {last:6.2f} ms"
            f"   ratio {last / first:4.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=25, help="turns in each window")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--provider", choices=["anthropic", "openai", "both"], default="both")
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="then this many pairs of short sessions, fresh and after the first run's history",
    )
    parser.add_argument(
        "--no-freeze", action="store_true", help="do not gc.freeze() before the first request"
    )
    args = parser.parse_args()
    providers = ["anthropic", "openai"] if args.provider == "both" else [args.provider]
    window = args.window
    print(
        f"caliban CPU ms per turn over {args.turns} turns (fake server in its own process): "
        f"turns 2-{window + 1} against the last {window}; gc.freeze "
        f"{'off' if args.no_freeze else 'on'}; load average "
        + " ".join(f"{load:.2f}" for load in os.getloadavg())
    )
    early, late = slice(1, window + 1), slice(-window, None)
    for run in range(1, args.runs + 1):
        for name in providers:
            turns = measure(name, args.turns, freeze=not args.no_freeze)
            assert len(turns.total) == args.turns, (
                f"{name}: the run ended after {len(turns.total)} turns"
            )
            prefix = f"  run {run} {name:<10}"
            ratios(prefix, "excl. send", turns.excluding_send[early], turns.excluding_send[late])
            ratios(prefix, "total", turns.total[early], turns.total[late])
            print(
                f"{prefix} full GC: early {sum(turns.full_gc[early]):5.1f} ms, "
                f"last {sum(turns.full_gc[late]):5.1f} ms, whole run {sum(turns.full_gc):5.1f} ms"
            )
            if args.pairs:
                fresh_excl, fresh_total, long_excl, long_total = paired(
                    name,
                    turns.history,
                    pairs=args.pairs,
                    window=window,
                    freeze=not args.no_freeze,
                )
                prefix = f"  run {run} {name:<10} {args.pairs} pairs"
                ratios(prefix, "excl. send", fresh_excl, long_excl)
                ratios(prefix, "total", fresh_total, long_total)
    print("target: the excl. send ratio <= 1.2 by mean and by median")


if __name__ == "__main__":
    main()
