"""Lazy MCP loading end to end: the real ``caliban`` executable, the real SDKs, the fake model
server and the 40-tool stdio catalog server configured in a project's ``.caliban/mcp.toml``.

For both providers: turn 1 carries ToolSearch and the deferred paragraph but no catalog tool;
the model searches; turn 2 carries the found tool's schema; the model calls it; the result
flows back. With ``lazy_mcp = false`` every catalog tool is sent and nothing is added.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import HANG_S

from caliban.permissions.trust import trust

pytestmark = pytest.mark.slow
PROVIDERS = ["anthropic", "openai"]
SERVERS = Path(__file__).parent / "mcp_servers"
GET_ISSUE = "mcp__catalog__get_issue"


def configure(project: Path, *, lazy: bool | None, cap: int | None = None) -> None:
    trust(project)  # its mcp.toml servers start only in a trusted folder
    (project / ".caliban" / "mcp.toml").write_text(
        "[server.catalog]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVERS / 'catalog_server.py'))}]\n"
    )
    # These tests are about the tools once the server is up: the first request waits for it
    # (test_mcp_start_e2e.py is about not waiting).
    config = "[tools]\nwait_for_mcp = true\n"
    if lazy is not None:
        # The model finds tools with ToolSearch here: pre-activation (which would load the
        # issue tools for "what is PLAT-7?") has its own tests, test_preactivate*.py.
        config += f"lazy_mcp = {'true' if lazy else 'false'}\npreactivate = 0\n"
        if cap is not None:
            config += f"max_active_schemas = {cap}\n"
    (project / ".caliban" / "config.toml").write_text(config)


def caliban(
    *args: str, cwd: Path, server: FakeModelServer | None = None, provider: str = "anthropic"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    if server is not None and provider == "anthropic":
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    elif server is not None:
        env.update(OPENAI_API_KEY="test-key", OPENAI_BASE_URL=server.openai_base_url)
    return subprocess.run(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


def tools_sent(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name → JSON Schema, in the order sent (Anthropic or OpenAI shape); Anthropic's
    server tools (web search), which have no schema, are left out."""
    out = {}
    for tool in body.get("tools", []):
        if "function" in tool:
            out[tool["function"]["name"]] = tool["function"]["parameters"]
        elif "input_schema" in tool:
            out[tool["name"]] = tool["input_schema"]
    return out


def system_sent(body: dict[str, Any]) -> str:
    if "system" in body:
        return "".join(block["text"] for block in body["system"])
    first = body["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def catalog_schema(tool: str) -> dict[str, Any]:
    sys.path.insert(0, str(SERVERS))
    try:
        from catalog_server import CATALOG
    finally:
        sys.path.remove(str(SERVERS))
    return next(t["inputSchema"] for t in CATALOG if t["name"] == tool)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_search_then_call_a_deferred_tool(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    configure(project, lazy=True)
    fake_model_server.add(
        {
            "text": "Let me find a tool.",
            "tool_calls": [
                {"name": "ToolSearch", "arguments": {"query": "fetch one issue with its comments"}}
            ],
        },
        {"tool_calls": [{"name": GET_ISSUE, "arguments": {"issue": "PLAT-7"}}]},
        {"text": "PLAT-7 is open."},
    )
    done = caliban(
        "-p",
        "--output-format",
        "json",
        "--allowed-tools",
        "mcp__catalog",
        "what is PLAT-7?",
        cwd=project,
        server=fake_model_server,
        provider=provider,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "PLAT-7 is open." and result["num_turns"] == 3

    first, second, third = (r.body for r in fake_model_server.requests)
    offered = tools_sent(first)
    assert "ToolSearch" in offered and not [n for n in offered if n.startswith("mcp__")]
    system = system_sent(first)
    assert "# Deferred MCP tools\n40 MCP tools from 1 server are loaded on demand." in system
    assert "- catalog (40): create_issue, get_issue, search_issues" in system

    found = json.dumps(second["messages"][-1])
    assert f"{GET_ISSUE} (newly activated)" in found
    assert tools_sent(second)[GET_ISSUE] == catalog_schema("get_issue")
    activated = found.count("(newly activated)")
    assert system_sent(second) == system  # activations never touch the system prompt
    assert len([n for n in tools_sent(second) if n.startswith("mcp__")]) == activated

    answer = json.dumps(third["messages"][-1])
    assert '\\"tool\\": \\"get_issue\\"' in answer and "PLAT-7" in answer
    assert list(tools_sent(third)) == list(tools_sent(second))

    context = result["context"]["mcp"]
    assert context["lazy"] is True and GET_ISSUE in context["active"]
    assert context["deferred_tools"] == 40 - len(context["active"])
    assert context["saved_percent"] > 50


@pytest.mark.parametrize(
    ("provider", "cap"), [("anthropic", None), ("openai", None), ("openai", 0)]
)
def test_lazy_off_sends_every_tool_and_no_paragraph(
    fake_model_server: FakeModelServer, provider: str, cap: int | None, project: Path
) -> None:
    """lazy_mcp = false, or lazy_mcp = true with max_active_schemas = 0 (a warning)."""
    from caliban.config.paths import project_root
    from caliban.prompts import system_prompt

    configure(project, lazy=cap is not None, cap=cap)
    fake_model_server.add({"text": "eager"})
    eager = caliban("-p", "hi", cwd=project, server=fake_model_server, provider=provider)
    assert eager.returncode == 0, eager.stderr
    warned = "tools.max_active_schemas = 0 turns lazy MCP loading off" in eager.stderr
    assert warned == (cap == 0)
    [body] = (r.body for r in fake_model_server.requests)
    sent = list(tools_sent(body))
    assert "ToolSearch" not in sent and len(sent) > 40
    assert all(not n.startswith("mcp__") for n in sent[:-40])
    assert all(n.startswith("mcp__catalog__") for n in sent[-40:])
    assert tools_sent(body)[GET_ISSUE] == catalog_schema("get_issue")
    assert system_sent(body) == system_prompt(project, project_root(project))


def test_mcp_search_command(project: Path) -> None:
    configure(project, lazy=None)
    found = caliban("mcp", "search", "run a sql query against the analytics db", cwd=project)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].startswith(" 1. mcp__catalog__run_sql_query ")
    assert found.stdout.rstrip().endswith("(40 tools searched)")

    missing = caliban("mcp", "search", "kubernetes", "--json", cwd=project)
    assert missing.returncode == 1
    data = json.loads(missing.stdout)
    assert data["results"] == [] and data["searched"] == 40
    assert data["no_match"].startswith("No MCP tools matched 'kubernetes'.")


def test_mcp_search_answers_from_the_cache_without_starting_a_server(project: Path) -> None:
    configure(project, lazy=None)
    first = caliban("mcp", "search", "create an issue", cwd=project)  # lists and caches
    assert first.returncode == 0, first.stderr
    assert first.stdout.rstrip().endswith("(40 tools searched)")
    log = Path(os.environ["CALIBAN_STATE_DIR"]) / "mcp-logs" / "catalog.log"
    starts = log.read_text().count("starting stdio server")

    cached = caliban("mcp", "search", "create an issue", cwd=project)
    assert cached.returncode == 0, cached.stderr
    # the same first tool; its score may differ: the first run ranks with the static model
    # when the transformer's embeddings are not ready within its wait (a busy machine)
    assert (
        cached.stdout.split()[:2]
        == first.stdout.split()[:2]
        == ["1.", "mcp__catalog__create_issue"]
    )
    assert cached.stdout.rstrip().endswith(
        "(40 tools searched; cached lists of catalog: --connect lists them again)"
    )
    assert log.read_text().count("starting stdio server") == starts  # nothing was started

    again = caliban("mcp", "search", "create an issue", "--connect", cwd=project)
    assert again.returncode == 0 and again.stdout.rstrip().endswith("(40 tools searched)")
    assert log.read_text().count("starting stdio server") == starts + 1


# ---------------------------------------------------------------------------- complete from turn 1


def configure_slow(project: Path, *extra: str) -> None:
    """The catalog server, held back at start by $CATALOG_START_DELAY (its value is not part
    of the cache key, so a slow run uses the catalog a fast one cached), and ``extra``
    tables."""
    trust(project)  # its mcp.toml servers start only in a trusted folder
    (project / ".caliban" / "mcp.toml").write_text(
        "[server.catalog]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVERS / 'catalog_server.py'))}]\n"
        'env = { CATALOG_START_DELAY = "${CATALOG_START_DELAY:-0}", '
        'CATALOG_EXIT_CODE = "${CATALOG_EXIT_CODE:-}" }\n' + "".join(extra)
    )
    # A first run fills the cache: it waits for the server (servers still starting when a
    # run ends are stopped before they list); later runs do not wait for a cached server.
    (project / ".caliban" / "config.toml").write_text(
        "[tools]\nlazy_mcp = true\npreactivate = 0\nwait_for_mcp = true\n"
    )


def stream(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_cached_catalog_serves_turn_one_while_its_server_starts(
    fake_model_server: FakeModelServer, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_slow(project)
    fake_model_server.add({"text": "first run"})
    warm = caliban("-p", "hi", cwd=project, server=fake_model_server)  # lists and caches
    assert warm.returncode == 0, warm.stderr

    monkeypatch.setenv("CATALOG_START_DELAY", "3")
    fake_model_server.add(
        {"tool_calls": [{"name": "ToolSearch", "arguments": {"query": "fetch one issue"}}]},
        {"tool_calls": [{"name": GET_ISSUE, "arguments": {"issue": "PLAT-7"}}]},
        {"text": "PLAT-7 is open."},
    )
    done = caliban(
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowed-tools",
        "mcp__catalog",
        "what is PLAT-7?",
        cwd=project,
        server=fake_model_server,
    )
    objs = stream(done)
    init = objs[0]
    # The first request went out while the server was still starting...
    assert init["mcp_servers"] == [{"name": "catalog", "status": "pending"}]
    cached_run, first, second, third = (r.body for r in fake_model_server.requests)
    # ...with the complete catalog, byte for byte what the first session sent.
    assert system_sent(first) == system_sent(cached_run)
    assert "40 MCP tools from 1 server are loaded on demand." in system_sent(first)
    found = json.dumps(second["messages"][-1])
    assert f"{GET_ISSUE} (newly activated)" in found  # searched in the cached catalog
    answer = json.dumps(third["messages"][-1])
    assert "PLAT-7" in answer and '"is_error": true' not in answer  # the call waited
    assert system_sent(second) == system_sent(third) == system_sent(first)
    [frame] = [o for o in objs if o.get("subtype") == "mcp_activation"]
    assert GET_ISSUE in frame["activated"] and set(frame["activated"]) <= set(frame["active"])
    assert frame["session_id"] == init["session_id"] and frame["parent_tool_use_id"] is None
    assert objs[-1]["result"] == "PLAT-7 is open."


def test_a_server_that_failed_is_named_in_the_toolsearch_answer(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    configure_slow(
        project,
        "[server.tracker]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVERS / 'exit_at_once.py'))}]\n",
    )
    fake_model_server.add(
        {"tool_calls": [{"name": "ToolSearch", "arguments": {"query": "kubernetes pods"}}]},
        {"text": "No such tool; the tracker server is down."},
    )
    done = caliban("-p", "list my pods", cwd=project, server=fake_model_server)
    assert done.returncode == 0, done.stderr
    assert "MCP server 'tracker' is unavailable" in done.stderr
    answer = json.dumps(fake_model_server.requests[1].body["messages"][-1])
    assert "No MCP tools matched 'kubernetes pods'." in answer
    assert (
        "MCP server 'tracker' is not available (exited with code 3 while starting): its tools "
        "could not be searched, so the tool you need may be there. Tell the user."
    ) in answer


def test_a_cached_server_that_fails_is_reported_and_forgotten(
    fake_model_server: FakeModelServer, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its tools cached, a headless run starts a server only when a tool of it is
    called; one that fails then is reported, and not announced again."""
    # The call waits for the MCP SDK's import too: a busy machine must not turn the exit
    # into a start-up timeout (which would keep the cached list).
    configure_slow(project, "startup_timeout = 120\n")
    fake_model_server.add({"text": "first run"})
    assert caliban("-p", "hi", cwd=project, server=fake_model_server).returncode == 0
    cache = Path(os.environ["CALIBAN_CACHE_DIR"]) / "mcp-tools"
    assert len(list(cache.glob("catalog-*.json"))) == 1

    monkeypatch.setenv("CATALOG_EXIT_CODE", "4")  # the same configuration, failing now
    fake_model_server.add(
        {"tool_calls": [{"name": "ToolSearch", "arguments": {"query": "fetch one issue"}}]},
        {"tool_calls": [{"name": GET_ISSUE, "arguments": {"issue": "PLAT-7"}}]},
        {"text": "The catalog server is down."},
    )
    done = caliban(
        "-p",
        "--allowed-tools",
        "mcp__catalog",
        "what is PLAT-7?",
        cwd=project,
        server=fake_model_server,
    )
    assert done.returncode == 0, done.stderr
    searched = json.dumps(fake_model_server.requests[2].body["messages"][-1])
    assert GET_ISSUE in searched  # searched from the cached list, no server started for it
    called = json.dumps(fake_model_server.requests[3].body["messages"][-1])
    assert "exited with code 4" in called  # the call started it, and says why it failed
    assert "MCP server 'catalog' is unavailable" in done.stderr
    assert list(cache.glob("catalog-*.json")) == []  # not announced again next time


def test_no_server_outlives_a_quick_cached_run(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    """With every list cached a headless run that calls no MCP tool starts no server; no
    run leaves one behind."""
    configure_slow(project)
    fake_model_server.add({"text": "one"}, {"text": "two"}, {"text": "three"})
    for _ in range(3):
        done = caliban("-p", "hi", cwd=project, server=fake_model_server)
        assert done.returncode == 0, done.stderr
    log = (Path(os.environ["CALIBAN_STATE_DIR"]) / "mcp-logs" / "catalog.log").read_text()
    pids = [int(pid) for pid in re.findall(r"^pid=(\d+)$", log, re.M)]
    assert pids  # the first run started it (nothing was cached)
    assert not [pid for pid in pids if running(pid)]


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def tool_list_text(body_text: str) -> str:
    """The ``tools`` value of a request body exactly as it was sent."""
    match = re.search(r'"tools"\s*:\s*', body_text)
    assert match is not None, body_text[:200]
    _, end = json.JSONDecoder().raw_decode(body_text, match.end())
    return body_text[match.end() : end]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_activation_only_appends_to_the_tool_list(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    """Prompt caches (Anthropic's, OpenAI's, llama.cpp's prefix cache) survive an activation:
    the server tool (Anthropic's web search) and every built-in come before the MCP tools, so
    the request after a ToolSearch starts with the previous request's tool list, byte for
    byte, and only adds the found tools at its end."""
    configure(project, lazy=True)
    fake_model_server.add(
        {"tool_calls": [{"name": "ToolSearch", "arguments": {"query": "select:" + GET_ISSUE}}]},
        {"text": "Found it."},
    )
    done = caliban(
        "-p", "find the issue tool", cwd=project, server=fake_model_server, provider=provider
    )
    assert done.returncode == 0, done.stderr
    before, after = (tool_list_text(r.text) for r in fake_model_server.requests)
    assert after.startswith(before[:-1]) and len(after) > len(before)
    added = json.loads("[" + after[len(before) :])
    assert [tool.get("name") or tool["function"]["name"] for tool in added] == [GET_ISSUE]
    if provider == "anthropic":
        assert json.loads(before)[0]["name"] == "web_search"
