"""Where the time goes in the agent loop and in a whole `caliban -p` run.

    python benchmarks/loop_overhead.py

1. Local overhead per turn: from the provider's last stream event to the next request,
   with a no-op tool (scripted provider, no network): append history, emit events, run the
   tool, build the next request. Target: < 5 ms.
2. `caliban -p` wall time against an instant fake model server (tests/fake_model_server.py)
   with no MCP servers, broken down into interpreter start, CLI import, config load, SDK
   import, and time to the first request as seen by the server.
"""

from __future__ import annotations

import asyncio
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from caliban.agent import Agent  # noqa: E402
from caliban.providers.base import ProviderEvent, ProviderRequest  # noqa: E402
from caliban.providers.scripted import ScriptedProvider, reply, tool_call  # noqa: E402
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput  # noqa: E402
from caliban.toolsets.tool_list import ToolList  # noqa: E402

TURNS = 300


class NoopInput(BaseModel):
    n: int = 0


class Noop(BuiltinTool[NoopInput]):
    name = "Noop"
    description = "Does nothing."
    input_model = NoopInput
    read_only = True

    async def run(self, args: NoopInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text("ok")


class TimedProvider(ScriptedProvider):
    """Records when each response ended and when the next request began."""

    def __init__(self, turns: int) -> None:
        super().__init__([reply(tool_call("Noop", {"n": i})) for i in range(turns)] + ["done"])
        self.ended: list[float] = []
        self.began: list[float] = []

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.began.append(time.perf_counter())
        async for event in super().stream(request):
            self.ended.append(
                time.perf_counter()
            ) if event.__class__.__name__ == "ResponseDone" else None
            yield event


def per_turn_overhead() -> list[float]:
    provider = TimedProvider(TURNS)
    agent = Agent(
        provider=provider,
        model="bench",
        system_prompt="bench " * 500,
        toolset=ToolList([Noop()]),
        env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()),
        max_turns=TURNS + 5,
    )
    asyncio.run(agent.run("go"))
    return [(b - e) * 1000 for e, b in zip(provider.ended, provider.began[1:], strict=False)]


def median_ms(cmd: list[str], runs: int = 7, env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def headless_breakdown() -> None:
    try:
        import fake_model_server  # type: ignore[import-not-found]
    except ImportError:
        print("\n(tests/fake_model_server.py not found: skipping the `caliban -p` part)")
        return
    caliban = str(Path(sys.executable).parent / "caliban")
    python = sys.executable
    print("\n`caliban -p` against an instant local fake model (anthropic provider, no MCP servers)")
    rows = [
        ("interpreter start (python -c pass)", median_ms([python, "-c", "pass"])),
        ("import caliban.cli.app", median_ms([python, "-c", "import caliban.cli.app"])),
        (
            "load config",
            median_ms(
                [
                    python,
                    "-c",
                    "from pathlib import Path; from caliban.config.settings import load_config; "
                    "load_config(Path.cwd())",
                ]
            ),
        ),
        ("import anthropic", median_ms([python, "-c", "import anthropic"])),
        ("import openai", median_ms([python, "-c", "import openai"])),
    ]
    walls, firsts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(7):
            server = fake_model_server.FakeModelServer([{"text": "Hello."}])
            server.start()
            try:
                env = {
                    **os.environ,
                    "ANTHROPIC_API_KEY": "bench",
                    "ANTHROPIC_BASE_URL": server.url,
                    "CALIBAN_CONFIG_DIR": tmp,
                    "CALIBAN_DATA_DIR": tmp,
                    "CALIBAN_CACHE_DIR": tmp,
                    "CALIBAN_STATE_DIR": tmp,
                }
                env.pop("OPENAI_API_KEY", None)
                start = time.time()
                subprocess.run(
                    [caliban, "-p", "hi"], check=True, capture_output=True, env=env, cwd=tmp
                )
                walls.append((time.time() - start) * 1000)
                firsts.append((server.requests[0].received_at - start) * 1000)
            finally:
                server.stop()
    rows.append(("first request reaches the server", statistics.median(firsts)))
    rows.append(("whole `caliban -p hi` run", statistics.median(walls)))
    for label, ms in rows:
        print(f"  {label:<40} {ms:8.0f} ms")
    print("  peers measured on this machine: Claude Code -p 630 ms, Codex 350 ms")


def main() -> None:
    samples = per_turn_overhead()
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[int(len(samples) * 0.99) - 1]
    print(f"Local loop overhead per turn ({len(samples)} turns, no-op tool, scripted provider)")
    print(f"  p50 {p50:.3f} ms   p99 {p99:.3f} ms   target < 5 ms")
    headless_breakdown()
    print(json.dumps({"per_turn_p50_ms": round(p50, 3), "per_turn_p99_ms": round(p99, 3)}))


if __name__ == "__main__":
    main()
