"""A stdio (or streamable HTTP) MCP test server with a realistic catalog of tools.

    python catalog_server.py                       # 40 tools: issues, CI/CD, storage,
                                                   # calendar, database, docs, utilities
    python catalog_server.py --catalog FILE.json   # serve {"server", "tools": [...]} instead
    python catalog_server.py --http PORT           # streamable HTTP on 127.0.0.1:PORT/mcp
    python catalog_server.py --spawn-child         # also start a child process (PID on stderr)

Most tools answer with a JSON echo of their arguments; a few behave for real (``wait_seconds``
sleeps, ``render_chart`` returns an image, ``get_doc_page`` an embedded resource,
``fail_validation`` an error result). The server writes ``pid=N`` (and ``child_pid=N``) to
stderr at start, so tests can check that no process outlives the client.

Two environment variables make it slow to start, for tests of what happens meanwhile:
``CATALOG_START_DELAY=SECONDS`` sleeps before serving; ``CATALOG_GATE=PATH`` waits until
that file exists (at most a minute). ``CATALOG_EXIT_CODE=N`` makes it fail instead: it exits
with that code before serving.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _i(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def _b(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def _e(values: list[str], description: str) -> dict[str, Any]:
    return {"type": "string", "enum": values, "description": description}


def _arr(items: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "description": description}


def _obj(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _tool(
    name: str, description: str, schema: dict[str, Any], *, read_only: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": schema,
        "annotations": {"readOnlyHint": read_only},
    }


PROJECT = _s("Project key, e.g. 'PLAT' or 'WEB'.")
ISSUE = _s("Issue key, e.g. 'PLAT-1423'.")
PIPELINE = _s("Pipeline identifier or slug, e.g. 'backend-deploy'.")
BUCKET = _s("Bucket name.")
KEY = _s("Object key (path inside the bucket), e.g. 'reports/2024/q3.csv'.")
CALENDAR = _s("Calendar id; 'primary' is the user's main calendar.", default="primary")
DATABASE = _s("Database connection name as configured on the server, e.g. 'analytics'.")

CATALOG: list[dict[str, Any]] = [
    # -- issue tracker
    _tool(
        "create_issue",
        "Create a new issue in a project of the issue tracker. Returns the new issue key and URL.",
        _obj(
            ["project", "title"],
            project=PROJECT,
            title=_s("One-line summary of the issue."),
            body=_s("Markdown description: steps to reproduce, expected and actual behaviour."),
            issue_type=_e(["bug", "task", "story", "epic"], "Kind of issue."),
            priority=_e(["lowest", "low", "medium", "high", "highest"], "Priority."),
            assignee=_s("Username to assign the issue to."),
            labels=_arr(_s("A label."), "Labels to attach."),
        ),
    ),
    _tool(
        "get_issue",
        "Fetch one issue with its status, assignee, labels, description and recent comments.",
        _obj(["issue"], issue=ISSUE, include_comments=_b("Also return the last 20 comments.")),
        read_only=True,
    ),
    _tool(
        "search_issues",
        "Search issues with a query language (JQL-like): "
        "'project = PLAT AND status = \"In Progress\" AND assignee = me'.",
        _obj(
            ["query"],
            query=_s("Search expression."),
            max_results=_i("Maximum number of issues to return.", minimum=1, maximum=100),
            order_by=_s("Field to sort by, e.g. 'updated DESC'."),
        ),
        read_only=True,
    ),
    _tool(
        "update_issue",
        "Change fields of an existing issue: title, description, priority, assignee or labels.",
        _obj(
            ["issue"],
            issue=ISSUE,
            title=_s("New summary."),
            body=_s("New description (replaces the old one)."),
            priority=_e(["lowest", "low", "medium", "high", "highest"], "New priority."),
            assignee=_s("New assignee username; empty string to unassign."),
            labels=_arr(_s("A label."), "Replacement label set."),
        ),
    ),
    _tool(
        "transition_issue",
        "Move an issue through its workflow, e.g. from 'To Do' to 'In Progress' or 'Done'.",
        _obj(
            ["issue", "status"],
            issue=ISSUE,
            status=_s("Target status name."),
            resolution=_s("Resolution when closing, e.g. 'Fixed' or \"Won't Fix\"."),
        ),
    ),
    _tool(
        "add_issue_comment",
        "Add a comment to an issue. Supports Markdown and @mentions.",
        _obj(["issue", "body"], issue=ISSUE, body=_s("Comment text.")),
    ),
    _tool(
        "list_sprint_issues",
        "List the issues in the active sprint of a board, grouped by status.",
        _obj(["board_id"], board_id=_i("Agile board id."), assignee=_s("Only this user's issues.")),
        read_only=True,
    ),
    # -- CI/CD
    _tool(
        "list_pipelines",
        "List CI/CD pipelines of a repository with the status of their latest run.",
        _obj(["repository"], repository=_s("Repository as 'owner/name'.")),
        read_only=True,
    ),
    _tool(
        "trigger_pipeline",
        "Start a new run of a CI/CD pipeline on a branch or commit, with optional variables.",
        _obj(
            ["pipeline", "ref"],
            pipeline=PIPELINE,
            ref=_s("Branch, tag or commit SHA to build."),
            variables={
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Pipeline variables, e.g. {'DEPLOY_ENV': 'staging'}.",
            },
        ),
    ),
    _tool(
        "get_pipeline_run",
        "Get the status, duration, stages and jobs of one pipeline run.",
        _obj(["pipeline", "run_id"], pipeline=PIPELINE, run_id=_i("Run number.")),
        read_only=True,
    ),
    _tool(
        "get_job_logs",
        "Download the log output of a CI job, optionally only the last lines.",
        _obj(
            ["job_id"],
            job_id=_i("Job id from get_pipeline_run."),
            tail_lines=_i("Only the last N lines.", minimum=1),
        ),
        read_only=True,
    ),
    _tool(
        "cancel_pipeline_run",
        "Cancel a running or queued pipeline run.",
        _obj(["pipeline", "run_id"], pipeline=PIPELINE, run_id=_i("Run number.")),
    ),
    _tool(
        "retry_failed_jobs",
        "Re-run only the failed jobs of a finished pipeline run.",
        _obj(["pipeline", "run_id"], pipeline=PIPELINE, run_id=_i("Run number.")),
    ),
    _tool(
        "list_deployments",
        "List recent deployments to an environment with their version, author and outcome.",
        _obj(
            ["environment"],
            environment=_e(["dev", "staging", "production"], "Deployment environment."),
            limit=_i("Maximum number of deployments.", minimum=1, maximum=50),
        ),
        read_only=True,
    ),
    # -- cloud storage
    _tool(
        "list_buckets",
        "List the storage buckets the credentials can see, with region and creation date.",
        _obj([], region=_s("Only buckets in this region, e.g. 'eu-west-1'.")),
        read_only=True,
    ),
    _tool(
        "list_objects",
        "List objects in a bucket under a prefix, with size and last-modified time.",
        _obj(
            ["bucket"],
            bucket=BUCKET,
            prefix=_s("Key prefix to list under, e.g. 'logs/2024-06/'."),
            max_keys=_i("Maximum number of keys.", minimum=1, maximum=1000),
        ),
        read_only=True,
    ),
    _tool(
        "upload_object",
        "Upload text or base64 content to a bucket under a key, replacing any existing object.",
        _obj(
            ["bucket", "key", "content"],
            bucket=BUCKET,
            key=KEY,
            content=_s("Object content (text, or base64 with encoding='base64')."),
            encoding=_e(["utf-8", "base64"], "How content is encoded."),
            content_type=_s("MIME type, e.g. 'text/csv'."),
        ),
    ),
    _tool(
        "download_object",
        "Download an object's content (text objects as text, binary ones as base64).",
        _obj(["bucket", "key"], bucket=BUCKET, key=KEY),
        read_only=True,
    ),
    _tool(
        "delete_object",
        "Delete an object from a bucket. This cannot be undone unless versioning is on.",
        _obj(["bucket", "key"], bucket=BUCKET, key=KEY),
    ),
    _tool(
        "create_presigned_url",
        "Create a time-limited URL that lets anyone download (or upload) one object.",
        _obj(
            ["bucket", "key"],
            bucket=BUCKET,
            key=KEY,
            expires_in=_i("Validity in seconds.", minimum=60, maximum=604800),
            method=_e(["GET", "PUT"], "Allowed HTTP method."),
        ),
    ),
    # -- calendar
    _tool(
        "list_events",
        "List calendar events between two times, with attendees and meeting links.",
        _obj(
            ["time_min", "time_max"],
            calendar_id=CALENDAR,
            time_min=_s("Start of the range, RFC 3339."),
            time_max=_s("End of the range, RFC 3339."),
            query=_s("Free-text filter on title and description."),
        ),
        read_only=True,
    ),
    _tool(
        "create_event",
        "Create a calendar event and send invitations to its attendees.",
        _obj(
            ["title", "start", "end"],
            calendar_id=CALENDAR,
            title=_s("Event title."),
            start=_s("Start time, RFC 3339."),
            end=_s("End time, RFC 3339."),
            attendees=_arr(_s("Email address."), "People to invite."),
            location=_s("Room or address."),
            add_video_call=_b("Attach a video-conference link."),
        ),
    ),
    _tool(
        "find_free_slots",
        "Find times when all the given people are free, within working hours.",
        _obj(
            ["attendees", "duration_minutes", "time_min", "time_max"],
            attendees=_arr(_s("Email address."), "People who must attend."),
            duration_minutes=_i("Meeting length in minutes.", minimum=5),
            time_min=_s("Search from, RFC 3339."),
            time_max=_s("Search until, RFC 3339."),
        ),
        read_only=True,
    ),
    _tool(
        "update_event",
        "Reschedule or edit an existing calendar event; attendees are notified.",
        _obj(
            ["event_id"],
            calendar_id=CALENDAR,
            event_id=_s("Event id."),
            title=_s("New title."),
            start=_s("New start, RFC 3339."),
            end=_s("New end, RFC 3339."),
        ),
    ),
    _tool(
        "delete_event",
        "Cancel a calendar event and notify its attendees.",
        _obj(["event_id"], calendar_id=CALENDAR, event_id=_s("Event id.")),
    ),
    _tool(
        "respond_to_invitation",
        "Accept, decline or tentatively accept a meeting invitation.",
        _obj(
            ["event_id", "response"],
            event_id=_s("Event id."),
            response=_e(["accepted", "declined", "tentative"], "Your answer."),
            comment=_s("Optional note to the organiser."),
        ),
    ),
    # -- database
    _tool(
        "run_sql_query",
        "Run a read-only SQL query against a database and return the rows as a table.",
        _obj(
            ["database", "sql"],
            database=DATABASE,
            sql=_s("A single SELECT statement."),
            max_rows=_i("Maximum rows to return.", minimum=1, maximum=10000),
        ),
        read_only=True,
    ),
    _tool(
        "list_tables",
        "List the tables and views of a database schema with their row counts.",
        _obj(["database"], database=DATABASE, schema=_s("Schema name, default 'public'.")),
        read_only=True,
    ),
    _tool(
        "describe_table",
        "Show a table's columns, types, nullability, indexes and foreign keys.",
        _obj(
            ["database", "table"],
            database=DATABASE,
            table=_s("Table name, optionally schema-qualified."),
        ),
        read_only=True,
    ),
    _tool(
        "explain_query",
        "Show the query plan of a SQL statement (EXPLAIN ANALYZE when analyze is true).",
        _obj(
            ["database", "sql"],
            database=DATABASE,
            sql=_s("The statement to explain."),
            analyze=_b("Actually run it to get real timings."),
        ),
        read_only=True,
    ),
    _tool(
        "create_db_snapshot",
        "Take a point-in-time snapshot (backup) of a database instance.",
        _obj(["database"], database=DATABASE, label=_s("Human-readable snapshot label.")),
    ),
    # -- documentation search
    _tool(
        "search_docs",
        "Full-text search of the internal documentation and runbooks; returns titles, URLs and "
        "matching snippets.",
        _obj(
            ["query"],
            query=_s("What to look for."),
            space=_s("Limit to one documentation space, e.g. 'SRE'."),
            limit=_i("Maximum results.", minimum=1, maximum=50),
        ),
        read_only=True,
    ),
    _tool(
        "get_doc_page",
        "Fetch a documentation page as Markdown by its id or URL.",
        _obj(["page"], page=_s("Page id or URL.")),
        read_only=True,
    ),
    _tool(
        "list_doc_sections",
        "List the sections (table of contents) of a documentation space.",
        _obj(["space"], space=_s("Documentation space key.")),
        read_only=True,
    ),
    # -- messaging and monitoring
    _tool(
        "send_chat_message",
        "Post a message to a team chat channel or a direct conversation.",
        _obj(
            ["channel", "text"],
            channel=_s("Channel name like '#deploys' or a user handle."),
            text=_s("Message text (Markdown)."),
            thread_id=_s("Reply inside this thread."),
        ),
    ),
    _tool(
        "query_metrics",
        "Query a time series from the monitoring system (PromQL) over a time range.",
        _obj(
            ["query"],
            query=_s("PromQL expression, e.g. 'rate(http_requests_total[5m])'."),
            start=_s("Range start, RFC 3339 or relative like '-1h'."),
            end=_s("Range end."),
            step=_s("Resolution, e.g. '30s'."),
        ),
        read_only=True,
    ),
    _tool(
        "list_active_alerts",
        "List alerts currently firing, with severity, service and since when.",
        _obj([], severity=_e(["critical", "warning", "info"], "Only this severity.")),
        read_only=True,
    ),
    # -- utilities with real behaviour (tests use them)
    _tool(
        "render_chart",
        "Render a small bar chart of the given values as a PNG image.",
        _obj(["values"], values=_arr({"type": "number"}, "Bar heights."), title=_s("Chart title.")),
        read_only=True,
    ),
    _tool(
        "wait_seconds",
        "Wait the given number of seconds, then answer (for timeouts).",
        _obj(["seconds"], seconds={"type": "number", "description": "How long to wait."}),
        read_only=True,
    ),
    _tool(
        "fail_validation",
        "Always fails with a tool error explaining what was wrong.",
        _obj([], reason=_s("The error text to return.")),
        read_only=True,
    ),
]

# A 1x1 transparent PNG.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
    "60e6kgAAAABJRU5ErkJggg=="
)


def build_server(name: str, catalog: list[dict[str, Any]]) -> Server[Any]:
    tools = [types.Tool.model_validate(t) for t in catalog]

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        match params.name:
            case "wait_seconds":
                await anyio.sleep(float(args.get("seconds", 0)))
                return _text(f"waited {args.get('seconds')}s")
            case "render_chart":
                return types.CallToolResult(
                    content=[
                        types.TextContent(text=f"chart: {args.get('title', 'untitled')}"),
                        types.ImageContent(data=PNG_1X1, mime_type="image/png"),
                    ]
                )
            case "get_doc_page":
                page = str(args.get("page", ""))
                resource = types.TextResourceContents(
                    uri=f"docs://pages/{page}", mime_type="text/markdown", text=f"# {page}\n\nBody."
                )
                return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])
            case "fail_validation":
                return types.CallToolResult(
                    content=[types.TextContent(text=str(args.get("reason", "invalid input")))],
                    is_error=True,
                )
        if not any(t.name == params.name for t in tools):
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True
            )
        return _text(json.dumps({"server": name, "tool": params.name, "arguments": args}))

    return Server(name, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(server: Server[Any], port: int) -> None:
    """Streamable HTTP on 127.0.0.1:PORT/mcp; with $CATALOG_REQUIRE_TOKEN set, requests need
    ``Authorization: Bearer <token>`` (to test configured headers)."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    token = os.environ.get("CATALOG_REQUIRE_TOKEN")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token:
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            if headers.get("authorization") != f"Bearer {token}":
                from starlette.responses import PlainTextResponse

                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalog", type=Path, help="serve the tools of this JSON catalog")
    parser.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on this port")
    parser.add_argument("--spawn-child", action="store_true", help="start a long-lived child")
    opts = parser.parse_args()
    name, catalog = "catalog", CATALOG
    if opts.catalog:
        data = json.loads(opts.catalog.read_text(encoding="utf-8"))
        name, catalog = data.get("server", "catalog"), data["tools"]
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
    if opts.spawn_child:
        child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
        print(f"child_pid={child.pid}", file=sys.stderr, flush=True)
    if code := os.environ.get("CATALOG_EXIT_CODE"):
        print("fatal: told to fail by CATALOG_EXIT_CODE", file=sys.stderr, flush=True)
        sys.exit(int(code))
    time.sleep(float(os.environ.get("CATALOG_START_DELAY") or 0))
    gate = os.environ.get("CATALOG_GATE")
    deadline = time.monotonic() + 60
    while gate and not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    server = build_server(name, catalog)
    if opts.http:
        serve_http(server, opts.http)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
