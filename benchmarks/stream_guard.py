"""What reading a stream costs: the ``openai`` SDK's SSE decoder (no checks) versus caliban's
decoder behind the stream guard (``caliban.providers.sse.server_sent_events``).

    python benchmarks/stream_guard.py [--events 50000] [--runs 5]

Feeds ``--events`` Chat Completions chunks (about one per token, as servers stream them) in
4 KiB reads, as the HTTP client delivers them, and prints the best of ``--runs`` for each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from openai._streaming import SSEDecoder

from caliban.providers.sse import server_sent_events


def body(events: int) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "hello wo"}, "finish_reason": None}],
    }
    return (b"data: " + json.dumps(chunk).encode() + b"\n\n") * events + b"data: [DONE]\n\n"


async def seconds(decode: Any, reads: list[bytes]) -> float:
    async def source() -> AsyncIterator[bytes]:
        for read in reads:
            yield read

    started = time.perf_counter()
    async for _ in decode(source()):
        pass
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    data = body(args.events)
    reads = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    results = {}
    for name, decode in (
        ("SDK decoder", lambda reads: SSEDecoder().aiter_bytes(reads)),
        ("caliban", server_sent_events),
    ):
        results[name] = min([await seconds(decode, reads) for _ in range(args.runs)])
        print(f"{name:>12}: {len(data) / 1e6:.1f} MB, {results[name] * 1000:.0f} ms")
    extra = results["caliban"] - results["SDK decoder"]
    print(f"{'difference':>12}: {extra * 1e9 / args.events:.0f} ns per event")


if __name__ == "__main__":
    asyncio.run(main())
