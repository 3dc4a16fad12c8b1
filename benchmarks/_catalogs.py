"""Tool catalogs shared by the benchmarks.

* The evaluation data (GitHub catalog, MCPToolBench++ tools and queries) lives outside the
  repository in ``../shared/eval/`` relative to the repo root; it is read, never copied.
* ``reference_tools.json`` beside this file is our own capture of the tool lists of the five
  public reference MCP servers. Re-capture it with::

      python benchmarks/_catalogs.py capture --npm-dir /tmp/refsrv --venv /tmp/refvenv

  after ``npm install @modelcontextprotocol/server-{everything,filesystem,memory}`` in
  ``--npm-dir`` and ``pip install mcp-server-time mcp-server-git`` into ``--venv``.
* :func:`synthetic_catalog` makes large, realistic-looking catalogs for latency tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caliban.mcp.search import SearchDoc

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / "benchmarks"
EVAL_DIR = REPO_ROOT.parent / "shared" / "eval"
REFERENCE_TOOLS = BENCH_DIR / "reference_tools.json"
USER_QUERIES = BENCH_DIR / "queries_user.jsonl"


def wire_name(server: str, tool: str) -> str:
    """The ``mcp__<server>__<tool>`` name a tool has on the wire."""
    return f"mcp__{server}__{tool}"


def make_doc(server: str, tool: Mapping[str, Any]) -> SearchDoc:
    """A :class:`SearchDoc` from an MCP tool definition (``name``/``description``/schema)."""
    schema = tool.get("inputSchema") or tool.get("input_schema") or {}
    return SearchDoc(
        name=wire_name(server, tool["name"]),
        server=server,
        tool=tool["name"],
        description=tool.get("description") or "",
        input_schema=schema,
    )


def eval_dir_or_exit() -> Path:
    """Return the eval data directory, or exit with a message when it is absent."""
    path = Path(os.environ.get("CALIBAN_EVAL_DIR", EVAL_DIR))
    if not (path / "mcptoolbench_queries.jsonl").is_file():
        print(f"skipped: evaluation data not found in {path} (see shared/eval/README.md)")
        sys.exit(0)
    return path


def load_github_catalog(eval_dir: Path) -> list[SearchDoc]:
    """The 117 tools of the GitHub MCP server (server ``github``)."""
    data = json.loads((eval_dir / "catalog_github.json").read_text())
    return [make_doc(data.get("server", "github"), t) for t in data["tools"]]


def load_mcptoolbench_tools(
    eval_dir: Path, rename: Mapping[str, str] | None = None
) -> list[SearchDoc]:
    """The 49 MCPToolBench++ tools; each gets its ``category`` as server name.

    ``rename`` maps a category to another server name (to avoid clashing with a real server).
    """
    rename = rename or {}
    data = json.loads((eval_dir / "mcptoolbench_tools.json").read_text())
    return [make_doc(rename.get(t["category"], t["category"]), t) for t in data]


def load_reference_tools(path: Path = REFERENCE_TOOLS) -> list[SearchDoc]:
    """The tools of the reference servers, from our committed snapshot."""
    data = json.loads(path.read_text())
    return [make_doc(srv["server"], t) for srv in data["servers"] for t in srv["tools"]]


def pooled_catalog(eval_dir: Path) -> list[SearchDoc]:
    """Reference servers + GitHub + MCPToolBench++ tools, as one catalog.

    MCPToolBench++'s ``filesystem`` category is an older copy of the reference filesystem
    server; it is kept (queries score on bare tool names, so either copy counts) but served
    as ``files`` so every wire name stays unique.
    """
    docs = [
        *load_reference_tools(),
        *load_github_catalog(eval_dir),
        *load_mcptoolbench_tools(eval_dir, rename={"filesystem": "files"}),
    ]
    names = [d.name for d in docs]
    assert len(names) == len(set(names)), "duplicate wire names in the pooled catalog"
    return docs


@dataclass(frozen=True, kw_only=True)
class Query:
    """One benchmark query and the tools that count as correct answers.

    An entry of ``relevant`` containing ``__`` is a full wire name; otherwise it is a bare
    tool name and matches that tool on any server.
    """

    text: str
    relevant: frozenset[str]
    source: str
    split: str = "all"
    """For our own queries: ``dev`` (seen while tuning) or ``holdout`` (never tuned on)."""

    def is_relevant(self, doc: SearchDoc) -> bool:
        """Whether ``doc`` answers this query."""
        return doc.tool in self.relevant or doc.name in self.relevant


def load_mcptoolbench_queries(eval_dir: Path) -> list[Query]:
    """MCPToolBench++ queries; ``gold`` plus ``also_correct`` are relevant."""
    out = []
    with (eval_dir / "mcptoolbench_queries.jsonl").open() as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                relevant = frozenset([row["gold"], *row.get("also_correct", [])])
                out.append(Query(text=row["query"], relevant=relevant, source="mcptoolbench"))
    return out


def load_user_queries(path: Path = USER_QUERIES, split: str | None = None) -> list[Query]:
    """Our own queries in users' words (``query``, a ``gold`` list and a ``split``).

    ``split`` keeps only ``dev`` or ``holdout`` queries; ``None`` keeps all.
    """
    out = []
    with path.open() as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if split is None or row.get("split") == split:
                    out.append(
                        Query(
                            text=row["query"],
                            relevant=frozenset(row["gold"]),
                            source="user",
                            split=row.get("split", "all"),
                        )
                    )
    return out


# --- synthetic catalogs ----------------------------------------------------------------------

_DOMAINS: dict[str, tuple[list[str], list[str]]] = {
    # server stem: (nouns, extra description words)
    "jira": (["issue", "sprint", "board", "epic", "comment", "worklog", "project"], ["agile"]),
    "slack": (["message", "channel", "thread", "reaction", "user", "file", "reminder"], ["chat"]),
    "postgres": (["table", "row", "schema", "index", "query", "view", "role"], ["sql"]),
    "k8s": (["pod", "deployment", "service", "namespace", "secret", "node", "log"], ["cluster"]),
    "notion": (["page", "database", "block", "comment", "property", "workspace"], ["notes"]),
    "stripe": (["customer", "invoice", "charge", "refund", "subscription", "price"], ["billing"]),
    "gdrive": (["file", "folder", "permission", "revision", "comment", "drive"], ["document"]),
    "calendar": (["event", "calendar", "attendee", "reminder", "availability"], ["schedule"]),
    "sentry": (["issue", "event", "release", "project", "alert", "team"], ["error"]),
    "aws": (["bucket", "object", "instance", "volume", "lambda", "queue", "stack"], ["cloud"]),
    "linear": (["issue", "cycle", "label", "project", "comment", "team"], ["tracker"]),
    "figma": (["file", "frame", "component", "comment", "style", "image"], ["design"]),
    "mail": (["email", "draft", "label", "thread", "attachment", "contact"], ["inbox"]),
    "docker": (["container", "image", "volume", "network", "log"], ["runtime"]),
    "weather": (["forecast", "alert", "station", "observation"], ["climate"]),
}
_VERBS = [
    ("get", "Get details of a"),
    ("list", "List all"),
    ("create", "Create a new"),
    ("update", "Update an existing"),
    ("delete", "Delete a"),
    ("search", "Search for"),
    ("archive", "Archive a"),
    ("export", "Export a"),
    ("move", "Move a"),
    ("restore", "Restore a deleted"),
]
_PARAMS = [
    ("id", "string", "The unique identifier of the {noun}"),
    ("query", "string", "Free-text search query to filter {noun}s"),
    ("limit", "integer", "Maximum number of {noun}s to return"),
    ("cursor", "string", "Pagination cursor from a previous call"),
    ("name", "string", "Display name of the {noun}"),
    ("description", "string", "Longer description of the {noun}"),
    ("tags", "array", "Tags to attach to the {noun}"),
    ("created_after", "string", "Only {noun}s created after this ISO 8601 timestamp"),
    ("owner", "string", "User or team that owns the {noun}"),
    ("dryRun", "boolean", "Validate the request without changing the {noun}"),
]
_FILLERS = [
    "Returns the result as JSON.",
    "Requires write access.",
    "Results are paginated.",
    "Use this when the user asks about {noun}s in {domain}.",
    "Fields not given are left unchanged.",
    "The operation is idempotent.",
]


def synthetic_catalog(n: int, seed: int = 0) -> list[SearchDoc]:
    """``n`` realistic-looking, distinct tools over many servers (deterministic per ``seed``).

    Servers are domain stems numbered per shard (``jira``, ``jira_2``, ...), tool names are
    verb_noun with an occasional qualifier, descriptions and parameters vary per tool.
    """
    rng = random.Random(seed)
    docs: list[SearchDoc] = []
    seen: set[str] = set()
    shard = 0
    while len(docs) < n:
        shard += 1
        for domain, (nouns, extra) in _DOMAINS.items():
            server = domain if shard == 1 else f"{domain}_{shard}"
            for noun in nouns:
                for verb, phrase in rng.sample(_VERBS, k=rng.randint(3, len(_VERBS))):
                    qualifier = rng.choice(["", "", "", "_batch", "_by_name", "_v2", "_summary"])
                    tool = f"{verb}_{noun}{qualifier}"
                    name = wire_name(server, tool)
                    if name in seen:
                        continue
                    seen.add(name)
                    desc = " ".join(
                        [
                            f"{phrase} {noun} in {domain} ({extra[0]}).",
                            *(
                                f.format(noun=noun, domain=domain)
                                for f in rng.sample(_FILLERS, k=rng.randint(1, 3))
                            ),
                        ]
                    )
                    props = {
                        pname: {"type": ptype, "description": pdesc.format(noun=noun)}
                        for pname, ptype, pdesc in rng.sample(_PARAMS, k=rng.randint(1, 6))
                    }
                    docs.append(
                        SearchDoc(
                            name=name,
                            server=server,
                            tool=tool,
                            description=desc,
                            input_schema={"type": "object", "properties": props},
                        )
                    )
                    if len(docs) == n:
                        return docs
    return docs


# --- capturing the reference servers' tools ---------------------------------------------------


async def _list_tools(command: str, args: Iterable[str]) -> list[dict[str, Any]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=command, args=list(args))
    tools: list[dict[str, Any]] = []
    async with Client(params, read_timeout_seconds=60) as client:
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                entry: dict[str, Any] = {
                    "name": tool.name,
                    "description": tool.description or "",
                    "inputSchema": tool.input_schema,
                }
                tools.append(entry)
            cursor = page.next_cursor
            if cursor is None:
                return tools


async def capture_reference_tools(npm_dir: Path, venv: Path) -> dict[str, Any]:
    """Connect to the five reference servers over stdio and return their tool lists."""
    bin_dir = npm_dir / "node_modules" / ".bin"
    with tempfile.TemporaryDirectory() as scratch:
        servers: list[tuple[str, str, str, list[str]]] = [
            (
                "everything",
                "@modelcontextprotocol/server-everything",
                str(bin_dir / "mcp-server-everything"),
                ["stdio"],
            ),
            (
                "filesystem",
                "@modelcontextprotocol/server-filesystem",
                str(bin_dir / "mcp-server-filesystem"),
                [scratch],
            ),
            (
                "memory",
                "@modelcontextprotocol/server-memory",
                str(bin_dir / "mcp-server-memory"),
                [],
            ),
            (
                "time",
                "mcp-server-time",
                str(venv / "bin" / "mcp-server-time"),
                ["--local-timezone", "UTC"],
            ),
            ("git", "mcp-server-git", str(venv / "bin" / "mcp-server-git"), []),
        ]
        out = []
        for server, package, command, args in servers:
            tools = await _list_tools(command, args)
            version = _package_version(package, npm_dir, venv)
            print(f"{server}: {len(tools)} tools ({package} {version})", file=sys.stderr)
            out.append({"server": server, "package": package, "version": version, "tools": tools})
    return {
        "about": "Tool lists of the public MCP reference servers, captured by "
        "benchmarks/_catalogs.py with the mcp Python SDK client (tools/list over stdio).",
        "servers": out,
    }


def _package_version(package: str, npm_dir: Path, venv: Path) -> str:
    if package.startswith("@"):
        meta = npm_dir / "node_modules" / package / "package.json"
        return str(json.loads(meta.read_text())["version"])
    for dist in (venv / "lib").glob(
        f"python3*/site-packages/{package.replace('-', '_')}-*.dist-info"
    ):
        return dist.name.split("-")[1].removesuffix(".dist")
    return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="capture reference_tools.json from installed servers")
    cap.add_argument("--npm-dir", type=Path, default=Path("/tmp/refsrv"))
    cap.add_argument("--venv", type=Path, default=Path("/tmp/refvenv"))
    cap.add_argument("--out", type=Path, default=REFERENCE_TOOLS)
    args = parser.parse_args()
    if args.command == "capture":
        data = asyncio.run(capture_reference_tools(args.npm_dir, args.venv))
        args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
