"""Does a long session cost more per turn than a short one? caliban's own CPU time per turn.

    python benchmarks/long_session.py [--turns 500] [--window 25] [--runs 3]
        [--provider anthropic|openai|both]

One agent run of ``--turns`` tool-calling turns through the real provider and SDK, against
the fake model server (tests/fake_model_server.py) in its own process, so the server's work
(parsing a body that grows with the history) is not counted. Each turn the model calls a
no-op tool with a 300-character argument and gets a ~800-character result back, so the
history grows (to ~0.6 MB at 500 turns) as a real session's does. caliban's time per turn
is the CPU time of this process from one request leaving to the next
(``time.process_time``): the response's parsing, the loop, the tool, and building,
encoding and sending the next request.

Prints, per provider and run, the mean and the median of an early window of turns and of the
last one, and their ratios; the target is a ratio within 1.2 by both (the bytes sent still
grow with the history; nothing else should). The early window starts at the second turn:
the first opens the connection and runs code paths for the first time, which made the old
"first 10 turns" mean look slower than a steady short session and flattered the ratio.
Windows are ``--window`` turns (default 25): a 10-turn mean on a busy machine moved by
±20% from run to run. CPU spent in the garbage collector's full (generation 2) collections
is counted like any other, and also printed per window: one costs 10-50 ms, mostly walking
the objects of the imported modules (not the history), and comes every few hundred turns,
so a window that holds one has a higher mean for a reason other than the history's
length. ``PYTHONPATH=OTHER_TREE`` measures another checkout (e.g. ``git archive main``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
FAKE_SERVER = ROOT / "tests" / "fake_model_server.py"
if "PYTHONPATH" not in os.environ:
    sys.path.insert(0, str(ROOT))

from caliban.agent import Agent  # noqa: E402
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
    of full garbage collections during each turn."""

    def __init__(self, inner: AnthropicProvider | OpenAIProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.sent: list[float] = []
        self.full_gc: list[float] = [0.0]
        self._gc_started = 0.0

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.sent.append(time.process_time())
        self.full_gc.append(0.0)
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


def per_turn_ms(provider_name: str, turns: int) -> tuple[list[float], list[float]]:
    """caliban's CPU ms per turn, and the part of it in full garbage collections."""
    server, url = fake_server(turns)
    try:
        inner = (
            AnthropicProvider(api_key="bench", base_url=url)
            if provider_name == "anthropic"
            else OpenAIProvider(api_key="bench", base_url=f"{url}/v1")
        )
        provider = Timed(inner)
        agent = Agent(
            provider=provider,  # type: ignore[arg-type]
            model="bench-model",
            system_prompt="You are a benchmark. " * 200,
            toolset=ToolList([Noop()]),
            env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()),
            max_turns=turns + 5,
        )

        async def run() -> None:
            await provider.inner.prepare()
            await agent.run("go")
            await provider.inner.aclose()

        gc.callbacks.append(provider.on_gc)
        try:
            asyncio.run(run())
        finally:
            gc.callbacks.remove(provider.on_gc)
    finally:
        server.terminate()
        server.wait()
    sent = provider.sent
    per_turn = [(b - a) * 1000 for a, b in itertools.pairwise(sent)]
    return per_turn, [t * 1000 for t in provider.full_gc[1 : len(sent)]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=25, help="turns in each window")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--provider", choices=["anthropic", "openai", "both"], default="both")
    args = parser.parse_args()
    providers = ["anthropic", "openai"] if args.provider == "both" else [args.provider]
    window = args.window
    print(
        f"caliban CPU ms per turn over {args.turns} turns (fake server in its own process): "
        f"turns 2-{window + 1} against the last {window}; load average "
        + " ".join(f"{load:.2f}" for load in os.getloadavg())
    )
    for run in range(1, args.runs + 1):
        for name in providers:
            samples, full_gc = per_turn_ms(name, args.turns)
            assert len(samples) == args.turns, f"{name}: the run ended after {len(samples)} turns"
            early, late = slice(1, window + 1), slice(-window, None)
            for label, average in (("mean", statistics.mean), ("median", statistics.median)):
                first, last = average(samples[early]), average(samples[late])
                print(
                    f"  run {run} {name:<10} {label:<6} early {first:6.2f} ms   "
                    f"last {last:6.2f} ms   ratio {last / first:4.2f} (target <= 1.2)"
                )
            print(
                f"  run {run} {name:<10} full GC: early {sum(full_gc[early]):5.1f} ms, "
                f"last {sum(full_gc[late]):5.1f} ms, whole run {sum(full_gc):5.1f} ms"
            )


if __name__ == "__main__":
    main()
