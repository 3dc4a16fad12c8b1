"""Tool catalogs shared by the benchmarks.

* The evaluation data (GitHub catalog, MCPToolBench++ tools and queries) lives outside the
  repository in ``../shared/eval/`` relative to the repo root; it is read, never copied.
* ``reference_tools.json`` beside this file is our own capture of the tool lists of the five
  public reference MCP servers. Re-capture it with::

      python benchmarks/_catalogs.py capture --npm-dir /tmp/refsrv --venv /tmp/refvenv

  after ``npm install @modelcontextprotocol/server-{everything,filesystem,memory}`` in
  ``--npm-dir`` and ``pip install mcp-server-time mcp-server-git`` into ``--venv``.
* ``extra_tools.json`` is our capture of 20 more public MCP servers (Slack, GitLab, Notion,
  Playwright, Kubernetes, Sentry, Grafana, Jira/Confluence, Gmail, Google Calendar, Todoist,
  ...), started with dummy credentials; :func:`large_catalog` adds them to the pooled
  catalog. Re-capture it with ``python benchmarks/_catalogs.py capture-extra --npm-dir DIR
  --venv V1 --venv V2`` after installing the packages named in ``_EXTRA_SERVERS``.
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

from caliban.search.index import SearchDoc

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / "benchmarks"
EVAL_DIR = REPO_ROOT.parent / "shared" / "eval"
REFERENCE_TOOLS = BENCH_DIR / "reference_tools.json"
EXTRA_TOOLS = BENCH_DIR / "extra_tools.json"
TASK_QUERIES = BENCH_DIR / "queries_tasks.jsonl"
USER_QUERIES = BENCH_DIR / "queries_user.jsonl"
SHORT_QUERIES = BENCH_DIR / "queries_short.jsonl"


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


def load_toollens(eval_dir: Path) -> tuple[list[SearchDoc], list[Query]]:
    """ToolLens: 464 RapidAPI endpoints on 19 servers and 957 dev requests needing 1-3 each.

    The whole request is the query; every gold tool is relevant.
    """
    root = eval_dir / "toollens"
    data = json.loads((root / "catalog.json").read_text())
    docs = [make_doc(srv["server"], t) for srv in data["servers"] for t in srv["tools"]]
    queries = []
    with (root / "queries_dev.jsonl").open() as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                queries.append(
                    Query(
                        text=row["question"],
                        relevant=frozenset(row["gold"]),
                        source="toollens",
                        split="dev",
                    )
                )
    return docs, queries


def load_extra_tools(path: Path = EXTRA_TOOLS) -> list[SearchDoc]:
    """The tools of more public MCP servers, from our committed snapshot (``capture-extra``)."""
    return load_reference_tools(path)


def large_catalog(eval_dir: Path) -> list[SearchDoc]:
    """The pooled catalog plus the extra servers' tools: about 570 real tools on 30 servers."""
    docs = [*pooled_catalog(eval_dir), *load_extra_tools()]
    names = [d.name for d in docs]
    assert len(names) == len(set(names)), "duplicate wire names in the large catalog"
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


def load_task_queries(path: Path = TASK_QUERIES, split: str | None = None) -> list[Query]:
    """Task descriptions as a developer types them, for :func:`large_catalog`.

    Each line has ``query``, ``gold`` and ``also_correct`` (both count as relevant) and a
    ``split``: ``dev`` (tuned on) or ``holdout`` (written before tuning, never tuned on).
    """
    out = []
    with path.open() as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if split is None or row.get("split") == split:
                    relevant = frozenset([*row["gold"], *row.get("also_correct", [])])
                    out.append(
                        Query(
                            text=row["query"],
                            relevant=relevant,
                            source="tasks",
                            split=row.get("split", "all"),
                        )
                    )
    return out


def _short_rows(path: Path, catalog: str) -> list[dict[str, Any]]:
    with path.open() as f:
        rows = [json.loads(line) for line in f if line.strip() and not line.startswith("#")]
    return [row for row in rows if row["set"] == catalog and row["gold"]]


def load_short_queries(catalog: str, path: Path = SHORT_QUERIES) -> list[Query]:
    """Our short capability queries for one dev catalog (``toollens``, ``mcptoolbench`` or
    ``github``), one capability each, as a model writes them in a ToolSearch call; those
    no tool answers (``"gold": []``) are left out."""
    return [
        Query(text=row["query"], relevant=frozenset(row["gold"]), source=f"short {catalog}")
        for row in _short_rows(path, catalog)
    ]


def load_joined_queries(catalog: str, path: Path = SHORT_QUERIES) -> list[Query]:
    """The short queries of each source request joined into one ToolSearch query, the way a
    model asks for several capabilities at once (``"weather by coordinates; star
    information"``); relevant: every tool one of the parts asks for."""
    parts: dict[str, list[dict[str, Any]]] = {}
    for row in _short_rows(path, catalog):
        parts.setdefault(str(row["source"]), []).append(row)
    return [
        Query(
            text="; ".join(row["query"] for row in rows),
            relevant=frozenset(g for row in rows for g in row["gold"]),
            source=f"joined {catalog}",
        )
        for rows in parts.values()
        if len(rows) > 1
    ]


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


async def _list_tools(
    command: str, args: Iterable[str], env: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=command, args=list(args), env=dict(env) if env else None)
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


# server name, package, executable (relative to node_modules/.bin or the venv's bin), args and
# dummy credentials: servers only check a token when a tool is called, if at all. Tried and
# left out: server-redis and obsidian-mcp-server (connect at start), @stripe/mcp (a remote
# proxy), mcp-server-fetch (needs a newer mcp than mcp-server-sqlite; one tool)
_EXTRA_SERVERS: list[tuple[str, str, str, list[str], dict[str, str]]] = [
    ("puppeteer", "@modelcontextprotocol/server-puppeteer", "mcp-server-puppeteer", [], {}),
    (
        "postgres",
        "@modelcontextprotocol/server-postgres",
        "mcp-server-postgres",
        ["postgresql://localhost/db"],
        {},
    ),
    (
        "slack",
        "@modelcontextprotocol/server-slack",
        "mcp-server-slack",
        [],
        {"SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T0"},
    ),
    (
        "brave",
        "@modelcontextprotocol/server-brave-search",
        "mcp-server-brave-search",
        [],
        {"BRAVE_API_KEY": "dummy"},
    ),
    (
        "thinking",
        "@modelcontextprotocol/server-sequential-thinking",
        "mcp-server-sequential-thinking",
        [],
        {},
    ),
    (
        "gitlab",
        "@modelcontextprotocol/server-gitlab",
        "mcp-server-gitlab",
        [],
        {"GITLAB_PERSONAL_ACCESS_TOKEN": "dummy"},
    ),
    (
        "maps",
        "@modelcontextprotocol/server-google-maps",
        "mcp-server-google-maps",
        [],
        {"GOOGLE_MAPS_API_KEY": "dummy"},
    ),
    ("notion", "@notionhq/notion-mcp-server", "notion-mcp-server", [], {"NOTION_TOKEN": "d"}),
    ("context7", "@upstash/context7-mcp", "context7-mcp", [], {}),
    ("playwright", "@playwright/mcp", "playwright-mcp", [], {}),
    ("kubernetes", "mcp-server-kubernetes", "mcp-server-kubernetes", [], {}),
    ("sentry", "@sentry/mcp-server", "sentry-mcp", ["--access-token=dummy"], {}),
    ("linear", "linear-mcp-server", "linear-mcp-server", [], {"LINEAR_API_KEY": "dummy"}),
    (
        "calendar",
        "@cocal/google-calendar-mcp",
        "google-calendar-mcp",
        [],
        {"GOOGLE_OAUTH_CREDENTIALS": "{scratch}/gcp-oauth.keys.json"},
    ),
    (
        "gmail",
        "@gongrzhe/server-gmail-autoauth-mcp",
        "gmail-mcp",
        [],
        {
            "GMAIL_OAUTH_PATH": "{scratch}/gcp-oauth.keys.json",
            "GMAIL_CREDENTIALS_PATH": "{scratch}/credentials.json",
        },
    ),
    ("todoist", "todoist-mcp", "todoist-mcp", [], {"API_KEY": "dummy"}),
    (
        "grafana",
        "@leval/mcp-grafana",
        "mcp-grafana",
        [],
        {"GRAFANA_URL": "http://localhost:3000", "GRAFANA_API_KEY": "dummy"},
    ),
    ("figma", "figma-developer-mcp", "figma-developer-mcp", ["--stdio"], {"FIGMA_API_KEY": "d"}),
    (
        "atlassian",
        "mcp-atlassian",
        "mcp-atlassian",
        [],
        {
            "JIRA_URL": "https://x.atlassian.net",
            "JIRA_USERNAME": "a@b.c",
            "JIRA_API_TOKEN": "d",
            "CONFLUENCE_URL": "https://x.atlassian.net/wiki",
            "CONFLUENCE_USERNAME": "a@b.c",
            "CONFLUENCE_API_TOKEN": "d",
        },
    ),
    ("sqlite", "mcp-server-sqlite", "mcp-server-sqlite", ["--db-path", "{scratch}/x.db"], {}),
]


async def capture_extra_tools(npm_dir: Path, venvs: list[Path]) -> dict[str, Any]:
    """Tool lists of more public MCP servers (those that list tools without real credentials).

    Python servers are looked up in each of ``venvs`` in turn (mcp-server-sqlite needs an
    older ``mcp`` than the others). A server that fails to start or list within a minute is
    reported and skipped.
    """
    bin_dir = npm_dir / "node_modules" / ".bin"
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        _write_dummy_oauth_files(Path(scratch))
        for server, package, exe, args, env in _EXTRA_SERVERS:
            command = bin_dir / exe
            argv = [a.format(scratch=scratch) for a in args]
            if exe.endswith(".js"):
                command, argv = Path("node"), [str(bin_dir / exe), *argv]
            elif not command.exists():
                command = next(
                    (v / "bin" / exe for v in venvs if (v / "bin" / exe).exists()), command
                )
            full_env = {"PATH": os.environ.get("PATH", ""), "HOME": scratch}
            full_env.update({k: v.format(scratch=scratch) for k, v in env.items()})
            try:
                with anyio_fail_after(60):
                    tools = await _list_tools(str(command), argv, full_env)
            except Exception as exc:  # report any failure and go on
                print(f"{server}: skipped ({type(exc).__name__}: {exc})", file=sys.stderr)
                continue
            version = next(
                (
                    v
                    for venv in venvs
                    if (v := _package_version(package, npm_dir, venv)) != "unknown"
                ),
                "unknown",
            )
            print(f"{server}: {len(tools)} tools ({package} {version})", file=sys.stderr)
            out.append({"server": server, "package": package, "version": version, "tools": tools})
    return {
        "about": "Tool lists of more public MCP servers, captured by benchmarks/_catalogs.py "
        "capture-extra with the mcp Python SDK client (tools/list over stdio, dummy tokens).",
        "servers": out,
    }


def _write_dummy_oauth_files(scratch: Path) -> None:
    """OAuth servers refuse to start without a client file; they never use it to list."""
    client = {"client_id": "x", "client_secret": "x", "redirect_uris": ["http://localhost"]}
    (scratch / "gcp-oauth.keys.json").write_text(json.dumps({"installed": client}))
    (scratch / "credentials.json").write_text(
        json.dumps({"access_token": "x", "refresh_token": "x", "expiry_date": 9e12})
    )


def _compact_json(data: Mapping[str, Any]) -> str:
    """One tool per line: small, yet diffs stay readable."""

    def dump(value: object) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    servers = []
    for srv in data["servers"]:
        head = {k: v for k, v in srv.items() if k != "tools"}
        tools = ",\n".join(dump(t) for t in srv["tools"])
        servers.append(dump(head)[:-1] + ',"tools":[\n' + tools + "\n]}")
    return '{"about":' + dump(data["about"]) + ',"servers":[\n' + ",\n".join(servers) + "\n]}\n"


def anyio_fail_after(seconds: float) -> Any:
    """``anyio.fail_after``, imported late (the benchmarks import this module for data)."""
    import anyio

    return anyio.fail_after(seconds)


def _package_version(package: str, npm_dir: Path, venv: Path) -> str:
    meta = npm_dir / "node_modules" / package / "package.json"
    if meta.is_file():
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
    extra = sub.add_parser("capture-extra", help="capture extra_tools.json")
    extra.add_argument("--npm-dir", type=Path, default=Path("/tmp/xsrv"))
    extra.add_argument(
        "--venv", type=Path, action="append", help="a venv with Python servers (repeatable)"
    )
    extra.add_argument("--out", type=Path, default=EXTRA_TOOLS)
    args = parser.parse_args()
    if args.command in ("capture", "capture-extra"):
        if args.command == "capture":
            data = asyncio.run(capture_reference_tools(args.npm_dir, args.venv))
            args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        else:
            venvs = args.venv or [Path("/tmp/xvenv")]
            data = asyncio.run(capture_extra_tools(args.npm_dir, venvs))
            args.out.write_text(_compact_json(data))
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
