"""Does a long session cost more per turn than a short one? caliban's own CPU time per turn.

    python benchmarks/long_session.py [--turns 500] [--provider anthropic|openai|both]

One agent run of ``--turns`` tool-calling turns through the real provider and SDK, against
the fake model server (tests/fake_model_server.py) in its own process, so the server's work
(parsing a body that grows with the history) is not counted. Each turn the model calls a
no-op tool with a 300-character argument and gets a ~800-character result back, so the
history grows (to ~0.6 MB at 500 turns) as a real session's does. caliban's time per turn
is the CPU time of this process from one request leaving to the next
(``time.process_time``): the response's parsing, the loop, the tool, and building,
encoding and sending the next request.

Prints the mean and the median of the first 10 and of the last 10 turns and their ratios per
provider (the median is the steadier on a busy machine); the target is a ratio within 1.2
(the bytes sent still grow with the history; nothing else should). ``PYTHONPATH=OTHER_TREE``
measures another checkout (e.g. ``git archive main``).
"""

from __future__ import annotations

import argparse
import asyncio
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
    """Wraps a provider: the process's CPU time when each request leaves."""

    def __init__(self, inner: AnthropicProvider | OpenAIProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.sent: list[float] = []

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.sent.append(time.process_time())
        return self.inner.stream(request)

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


def per_turn_ms(provider_name: str, turns: int) -> list[float]:
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

        asyncio.run(run())
    finally:
        server.terminate()
        server.wait()
    sent = provider.sent
    return [(b - a) * 1000 for a, b in itertools.pairwise(sent)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--provider", choices=["anthropic", "openai", "both"], default="both")
    args = parser.parse_args()
    providers = ["anthropic", "openai"] if args.provider == "both" else [args.provider]
    print(f"caliban CPU ms per turn over {args.turns} turns (fake server in its own process)")
    for name in providers:
        samples = per_turn_ms(name, args.turns)
        assert len(samples) == args.turns, f"{name}: the run ended after {len(samples)} turns"
        for label, average in (("mean", statistics.mean), ("median", statistics.median)):
            first, last = average(samples[:10]), average(samples[-10:])
            print(
                f"  {name:<10} {label:<6} first 10 {first:6.2f} ms   last 10 {last:6.2f} ms   "
                f"ratio {last / first:4.2f} (target <= 1.2)"
            )


if __name__ == "__main__":
    main()
