"""caliban beside Claude Code: start-up, time to the first request, whole run, peak RSS.

    python benchmarks/vs_claude_code.py --claude PATH [--pairs 5] [--only NAME,...] [--cpu]

``PATH`` is Claude Code's binary, installed from npm into a scratch prefix (never into the
repository)::

    npm install --prefix /tmp/cc @anthropic-ai/claude-code
    python benchmarks/vs_claude_code.py \\
        --claude /tmp/cc/node_modules/@anthropic-ai/claude-code-linux-x64/claude

Both run headless against one local fake Anthropic endpoint (tests/fake_model_server.py,
answering "ok" to everything), each in a home of its own, for: ``--version``; ``--help``;
``-p "say ok"`` with no MCP server (also with caliban on its OpenAI provider, the same fake
server answering Chat Completions); with the five public reference servers
(``$CALIBAN_REFERENCE_SERVERS``, see tests/mcp_servers/reference.py) *cold* (caliban's
tool-list cache empty) and *warm* (filled before the scenario by a run told to wait for the
servers, ``tools.wait_for_mcp = true``); and with one server of 1,000
and of 10,000 tools (benchmarks/_static_mcp_server.py, which answers at once, so the
clients are what is compared), warm; and the 10,000 with caliban's ``tools.lazy_mcp = true``
(Claude Code defers them by itself). Claude Code keeps no tool-list cache: its cold and warm
runs are the same command. Each scenario runs ``--pairs`` alternating pairs (which one goes
first alternates too) after one warm-up pair, and prints, per metric, the medians and the
ratio caliban / Claude Code (below 1.0: caliban is ahead):

* *first request*: from the process's start until the fake endpoint receives the first
  request carrying the prompt;
* *whole run*: until the process has exited;
* *peak RSS*: the process's own maximum resident set (GNU ``time``'s ``%M``), not its MCP
  servers';
* *MCP tools sent*: how many MCP tools the first request carried. Neither waits for servers
  still starting (docs/mcp.md, *Start-up*): Claude Code 2.1.197 sends what has connected by
  then (the static server's tools, which answer at once) and offers ``WaitForMcpServers`` for
  the rest, and so does caliban, which also sends every tool its cache knows (warm: all of
  them). Cold, the two send what happened to be listed: a race, not a wait. The row
  ``5 servers cold (both wait)`` compares the wait itself: caliban with ``tools.wait_for_mcp =
  true`` and Claude Code with ``MCP_CONNECTION_NONBLOCKING=0`` (which waits up to
  ``MCP_CONNECT_TIMEOUT_MS``, 5 s, for every server). The rows ``5 servers cold (Claude Code
  waits)`` and ``… warm (Claude Code waits)`` are issue 30's own comparison ("5 servers:
  against Claude Code waiting for its servers"): Claude Code waits, caliban runs as it
  ships (its first request does not wait for servers it does not need, which is what the
  issue asks of it; warm, both send all 52 tools).

``--cpu`` adds, per run, the CPU time (user + system) of the client's own process and of
everything it started (its MCP servers: *children*), read from ``/proc`` every 20 ms: on two cores a
run that waits for five servers is CPU-bound, so these say where its time goes.

caliban runs as its console script next to this interpreter, with its package compiled to
bytecode first (``--no-compile`` skips it), as a user's ``pip install`` leaves it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_model_server import FakeModelServer  # noqa: E402

PROMPT = "say ok"
STATIC_SERVER = ROOT / "benchmarks" / "_static_mcp_server.py"
GNU_TIME = "/usr/bin/time"  # Debian's `time` package


@dataclass(frozen=True, kw_only=True)
class Sample:
    first_request: float | None
    whole: float
    rss_mb: float
    mcp_tools: int = 0
    """MCP tools in the first request (Claude Code sends only those of servers connected by
    then, and offers ``WaitForMcpServers`` for the rest)."""
    client_cpu: float | None = None
    """``--cpu``: seconds of CPU of the client's own process."""
    children_cpu: float | None = None
    """``--cpu``: seconds of CPU of the processes it started: its MCP servers (and Claude
    Code's helpers, ``rg`` and ``ps``, a few hundredths)."""


class TreeCpu:
    """The CPU time of the client under GNU time (``pid``) and of the processes it started,
    each read from ``/proc`` every 20 ms until it exits (a process's last reading counts:
    at most 20 ms short)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seconds: dict[int, float] = {}
        self.clients: set[int] = set()
        """GNU time's children: the client's own process."""
        self._tick = os.sysconf("SC_CLK_TCK")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> tuple[float, float]:
        """Stop polling; the client's own seconds and those of the processes it started."""
        self._done.set()
        self._thread.join()
        own = sum(self.seconds.get(pid, 0.0) for pid in self.clients)
        return own, sum(self.seconds.values()) - own

    def _poll(self) -> None:
        while not self._done.wait(0.02):
            clients = _children(self.pid)
            self.clients.update(clients)
            todo = list(clients)
            while todo:
                pid = todo.pop()
                if (seconds := self._cpu(pid)) is not None:
                    self.seconds[pid] = seconds
                todo += _children(pid)

    def _cpu(self, pid: int) -> float | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime + stime, its own


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            found += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    except OSError:
        pass
    return found


@dataclass(kw_only=True)
class Scenario:
    name: str
    args: list[str]
    mcp: str | None = None
    """``ref5``, or a tool count for the static server; ``None``: no MCP."""
    warm: bool = True
    provider: str = "anthropic"
    """caliban's provider (both speak to the same fake server); Claude Code's is Anthropic."""
    lazy: bool = False
    """caliban with ``tools.lazy_mcp = true`` (Claude Code defers MCP tools by itself above a
    tenth of its context window)."""
    waits: bool = False
    """Both wait for every MCP server before the first request: caliban with
    ``tools.wait_for_mcp = true``, Claude Code with ``MCP_CONNECTION_NONBLOCKING=0``
    (issue 30 compares a cold start with Claude Code waiting for its servers)."""
    claude_waits: bool = False
    """Only Claude Code waits (``MCP_CONNECTION_NONBLOCKING=0``); caliban runs as it ships:
    issue 30's own comparison, "5 servers: against Claude Code waiting for its servers"."""
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {"caliban": [], "claude": []})


SCENARIOS = [
    Scenario(name="--version", args=["--version"]),
    Scenario(name="--help", args=["--help"]),
    Scenario(name="-p no MCP", args=["-p", PROMPT]),
    Scenario(name="-p no MCP openai", args=["-p", PROMPT], provider="openai"),
    Scenario(name="-p 5 servers cold", args=["-p", PROMPT], mcp="ref5", warm=False),
    Scenario(
        name="-p 5 servers cold (both wait)",
        args=["-p", PROMPT],
        mcp="ref5",
        warm=False,
        waits=True,
    ),
    Scenario(
        name="-p 5 servers cold (Claude Code waits)",
        args=["-p", PROMPT],
        mcp="ref5",
        warm=False,
        claude_waits=True,
    ),
    Scenario(name="-p 5 servers warm", args=["-p", PROMPT], mcp="ref5"),
    Scenario(
        name="-p 5 servers warm (Claude Code waits)",
        args=["-p", PROMPT],
        mcp="ref5",
        claude_waits=True,
    ),
    Scenario(name="-p 1000 tools", args=["-p", PROMPT], mcp="1000"),
    Scenario(name="-p 10000 tools", args=["-p", PROMPT], mcp="10000"),
    Scenario(name="-p 10000 tools lazy", args=["-p", PROMPT], mcp="10000", lazy=True),
]


class Bench:
    def __init__(
        self, claude: Path, scratch: Path, refservers: Path | None, *, cpu: bool = False
    ) -> None:
        self.claude = claude
        self.cpu = cpu
        self.caliban = Path(sys.executable).parent / "caliban"
        self.scratch = scratch
        self.refservers = refservers
        self.project = scratch / "project"
        self.project.mkdir()
        self.server = FakeModelServer([{"text": "ok"}] * 100_000)
        self.server.start()

    def close(self) -> None:
        self.server.stop()

    def mcp_config(self, mcp: str) -> str:
        path = self.scratch / f"mcp-{mcp}.json"
        if not path.exists():
            servers = self._reference() if mcp == "ref5" else self._static(int(mcp))
            path.write_text(json.dumps({"mcpServers": servers}))
        return str(path)

    def _reference(self) -> dict[str, dict[str, object]]:
        if self.refservers is None:
            raise SystemExit("the 5-server scenarios need $CALIBAN_REFERENCE_SERVERS")
        npm, venv = self.refservers / "npm/node_modules/.bin", self.refservers / "venv/bin"
        memory = str(self.scratch / "memory.jsonl")
        return {
            "everything": {"command": str(npm / "mcp-server-everything")},
            "filesystem": {
                "command": str(npm / "mcp-server-filesystem"),
                "args": [str(self.project)],
            },
            "memory": {
                "command": str(npm / "mcp-server-memory"),
                "env": {"MEMORY_FILE_PATH": memory},
            },
            "time": {
                "command": str(venv / "mcp-server-time"),
                "args": ["--local-timezone", "UTC"],
            },
            "git": {"command": str(venv / "mcp-server-git")},
        }

    def _static(self, count: int) -> dict[str, dict[str, object]]:
        from _catalogs import synthetic_catalog

        tools, seen = [], set()
        for doc in synthetic_catalog(count):
            name = f"{doc.server}_{doc.tool}"[:56]
            if name not in seen:
                seen.add(name)
                tools.append(
                    {"name": name, "description": doc.description, "inputSchema": doc.input_schema}
                )
        path = self.scratch / f"tools-{count}.json"
        path.write_text(json.dumps(tools))
        return {"many": {"command": sys.executable, "args": [str(STATIC_SERVER), str(path)]}}

    def prime(self, scenario: Scenario) -> None:
        """Fill caliban's tool-list cache for a warm MCP scenario: one run that waits for
        every server (``tools.wait_for_mcp``), not timed."""
        if scenario.mcp is None or not scenario.warm or scenario.args[0] != "-p":
            return
        cmd, env = self.command("caliban", scenario)
        config = self.scratch / "config-prime"
        config.mkdir(exist_ok=True)
        lazy = "lazy_mcp = true\n" if scenario.lazy else ""
        (config / "config.toml").write_text(f"[tools]\nwait_for_mcp = true\n{lazy}")
        env["CALIBAN_CONFIG_DIR"] = str(config)
        subprocess.run(
            cmd,
            cwd=self.project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
        )

    def command(self, who: str, scenario: Scenario) -> tuple[list[str], dict[str, str]]:
        home = self.scratch / f"home-{who}"
        home.mkdir(exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "CALIBAN_"))
        }
        env.update(
            HOME=str(home),
            ANTHROPIC_API_KEY="bench",
            ANTHROPIC_BASE_URL=self.server.url,
        )
        args = list(scenario.args)
        if scenario.mcp is not None:
            args += ["--mcp-config", self.mcp_config(scenario.mcp), "--strict-mcp-config"]
        if who == "claude":
            env.update(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
            if scenario.waits or scenario.claude_waits:
                env["MCP_CONNECTION_NONBLOCKING"] = "0"
            return [str(self.claude), *args], env
        cache = home / "cache"
        if not scenario.warm:
            cache = Path(tempfile.mkdtemp(dir=self.scratch))
        settings = ["lazy_mcp = true"] * scenario.lazy + ["wait_for_mcp = true"] * scenario.waits
        config = home / "-".join(["config", *(line.split(" ")[0] for line in settings)])
        if settings:
            config.mkdir(exist_ok=True)
            (config / "config.toml").write_text(
                "[tools]\n" + "".join(f"{line}\n" for line in settings)
            )
        env.update(
            CALIBAN_CONFIG_DIR=str(config),
            CALIBAN_STATE_DIR=str(home / "state"),
            CALIBAN_DATA_DIR=str(home / "data"),
            CALIBAN_CACHE_DIR=str(cache),
            CLAUDE_CONFIG_DIR=str(home / ".claude"),
        )
        if scenario.provider == "openai":
            env.update(OPENAI_API_KEY="bench", OPENAI_BASE_URL=f"{self.server.url}/v1")
            args += ["--provider", "openai"]
        return [str(self.caliban), *args], env

    def run(self, who: str, scenario: Scenario) -> Sample:
        cmd, env = self.command(who, scenario)
        with self.server._lock:
            self.server.requests.clear()
        errors, peak = self.scratch / "stderr.txt", self.scratch / "peak.txt"
        # GNU time reports the peak: wait4's own figure would count the pages of this big
        # process, which the child shares until it execs.
        timed = [GNU_TIME, "-f", "%M", "-o", str(peak), *cmd]
        cpu: tuple[float, float] | None = None
        with errors.open("w") as stderr:
            started = time.time()
            proc = subprocess.Popen(
                timed,
                cwd=self.project,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            tree = TreeCpu(proc.pid) if self.cpu else None
            proc.wait()
            whole = time.time() - started
            if tree is not None:
                cpu = tree.stop()
        if proc.returncode != 0:
            tail = errors.read_text(errors="replace")[-2000:]
            raise SystemExit(f"{who} {scenario.name} exited {proc.returncode}:\n{tail}")
        with self.server._lock:
            prompted = [r for r in self.server.requests if PROMPT in r.text]
        if scenario.args[0] == "-p" and not prompted:
            raise SystemExit(f"{who} {scenario.name}: no request carried the prompt")
        first = min(prompted, key=lambda r: r.received_at) if prompted else None
        rss_kb = int(peak.read_text().split()[-1])
        return Sample(
            first_request=first.received_at - started if first else None,
            whole=whole,
            rss_mb=rss_kb / 1024,
            mcp_tools=sum(1 for n in first.tool_names if n and n.startswith("mcp__"))
            if first
            else 0,
            client_cpu=cpu[0] if cpu else None,
            children_cpu=cpu[1] if cpu else None,
        )


def median(samples: list[Sample], metric: Callable[[Sample], float | None]) -> float | None:
    values = [v for s in samples if (v := metric(s)) is not None]
    return statistics.median(values) if values else None


def report(scenario: Scenario) -> list[str]:
    metrics: list[tuple[str, Callable[[Sample], float | None], str]] = [
        ("first request", lambda s: s.first_request, "s"),
        ("whole run", lambda s: s.whole, "s"),
        ("peak RSS", lambda s: s.rss_mb, "MB"),
        ("CPU, own", lambda s: s.client_cpu, "s"),
        ("CPU, children", lambda s: s.children_cpu, "s"),
    ]
    lines = []
    for label, metric, unit in metrics:
        if label == "CPU, children" and scenario.mcp is None:
            continue
        ours = median(scenario.samples["caliban"], metric)
        theirs = median(scenario.samples["claude"], metric)
        if ours is None or theirs is None:
            continue
        ratio = f"  ratio {ours / theirs:5.2f}" if theirs else ""
        lines.append(
            f"  {scenario.name:<22} {label:<14} caliban {ours:8.3f} {unit:<2}  "
            f"Claude Code {theirs:8.3f} {unit:<2}{ratio}"
        )
    if scenario.mcp is not None:
        ours_mcp = median(scenario.samples["caliban"], lambda s: s.mcp_tools)
        theirs_mcp = median(scenario.samples["claude"], lambda s: s.mcp_tools)
        lines.append(
            f"  {scenario.name:<22} {'MCP tools sent':<14} caliban {ours_mcp or 0:8.0f}     "
            f"Claude Code {theirs_mcp or 0:8.0f}     (in the first request)"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--claude", type=Path, required=True, help="Claude Code's binary")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "--only", help='comma-separated scenario names, e.g. "--version,-p no MCP" (default: all)'
    )
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument(
        "--cpu", action="store_true", help="also the CPU of each client and of its MCP servers"
    )
    args = parser.parse_args()
    if not args.no_compile:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(ROOT / "caliban")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    wanted = {n.strip() for n in args.only.split(",")} if args.only else None
    scenarios = [s for s in SCENARIOS if wanted is None or s.name in wanted]
    if not scenarios:
        raise SystemExit(f"no such scenario; known: {', '.join(s.name for s in SCENARIOS)}")
    refservers = os.environ.get("CALIBAN_REFERENCE_SERVERS")
    scratch = Path(tempfile.mkdtemp(prefix="vs-claude-code-"))
    bench = Bench(args.claude, scratch, Path(refservers) if refservers else None, cpu=args.cpu)
    print(f"caliban / Claude Code, medians of {args.pairs} alternating pairs (below 1.0: ahead)")
    try:
        for scenario in scenarios:
            bench.prime(scenario)
            for pair in range(args.pairs + 1):  # the first pair warms up
                order = ["caliban", "claude"] if pair % 2 else ["claude", "caliban"]
                for who in order:
                    sample = bench.run(who, scenario)
                    if pair:
                        scenario.samples[who].append(sample)
            for line in report(scenario):
                print(line, flush=True)
    finally:
        bench.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
