"""`caliban -p` end to end: the real executable, the real SDKs, the fake model server.

Both providers run the same scenarios (issue 3): a text reply; one tool call; two parallel
tool calls; a 429 then success; a 401; max turns; SIGINT. stream-json lines are checked
against the documented shapes (docs/headless.md), which are Claude Code's: the recorded
comparison with Claude Code itself is tests/test_claude_code_e2e.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import HANG_S

from caliban.permissions.trust import trust

pytestmark = pytest.mark.slow
PROVIDERS = ["anthropic", "openai"]


def caliban_env(server: FakeModelServer, provider: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    if provider == "anthropic":
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    else:
        env.update(OPENAI_API_KEY="test-key", OPENAI_BASE_URL=server.openai_base_url)
    return env


def run(
    server: FakeModelServer, provider: str, cwd: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caliban", "-p", *args],
        cwd=cwd,
        env=caliban_env(server, provider),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


RESULT_KEYS = {
    "type",
    "subtype",
    "is_error",
    "result",
    "num_turns",
    "duration_ms",
    "duration_api_ms",
    "session_id",
    "usage",
    "modelUsage",
    "total_cost_usd",
    "permission_denials",
    "stop_reason",
    "terminal_reason",
}


def check_stream_shapes(objs: list[dict[str, Any]]) -> None:
    """Every line has the documented shape: init first, result last, one content block per
    message frame between."""
    init, *middle, result = objs
    assert init["type"] == "system" and init["subtype"] == "init"
    assert {"session_id", "cwd", "model", "tools", "mcp_servers", "permissionMode"} <= init.keys()
    assert isinstance(init["tools"], list) and "Read" in init["tools"]
    for obj in middle:
        assert obj["type"] in ("assistant", "user", "system"), obj
        assert obj["session_id"] == init["session_id"]
        if obj["type"] == "system" and obj["subtype"] == "mcp_activation":
            assert {"activated", "evicted", "active", "parent_tool_use_id"} <= obj.keys()
            continue
        if obj["type"] == "system":
            assert obj["subtype"] == "api_retry" and {"attempt", "retry_delay_ms"} <= obj.keys()
            continue
        message = obj["message"]
        assert message["role"] == obj["type"] and "parent_tool_use_id" in obj
        [block] = message["content"]
        assert block["type"] in (
            "text",
            "tool_use",
            "tool_result",
            "image",
            "thinking",
            "redacted_thinking",
        ), block
        if block["type"] == "tool_result":
            assert "tool_use_result" in obj
    assert result.keys() >= RESULT_KEYS and result["type"] == "result"
    assert result["session_id"] == init["session_id"]


STREAM = ("--output-format", "stream-json", "--verbose")


def blocks(objs: list[dict[str, Any]]) -> list[str]:
    """``assistant:text``, ``user:tool_result``… for each message frame, in order."""
    return [
        f"{o['type']}:{o['message']['content'][0]['type']}"
        for o in objs
        if o["type"] in ("assistant", "user")
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_text_reply_in_every_format(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    fake_model_server.add(
        {"text": "Hello from the model."}, {"text": "Hi again."}, {"text": "Third."}
    )
    text = run(fake_model_server, provider, project, "say hello")
    assert (text.returncode, text.stdout) == (0, "Hello from the model.\n")
    assert text.stderr == ""

    as_json = run(fake_model_server, provider, project, "--output-format", "json", "again")
    [result] = lines(as_json.stdout)
    assert result.keys() >= RESULT_KEYS
    assert (result["subtype"], result["is_error"], result["result"], result["num_turns"]) == (
        "success",
        False,
        "Hi again.",
        1,
    )
    assert result["usage"]["output_tokens"] == 5

    streamed = run(fake_model_server, provider, project, *STREAM, "x")
    objs = lines(streamed.stdout)
    check_stream_shapes(objs)
    assert [o["type"] for o in objs] == ["system", "assistant", "result"]
    # The prompt really went to the model, after the system prompt.
    body = fake_model_server.requests[0].body
    assert "say hello" in json.dumps(body["messages"])


@pytest.mark.parametrize(
    ("output", "reader"),
    [
        (("--output-format", "text"), "has gone"),
        (("--output-format", "json"), "has gone"),
        (("--output-format", "json", "--verbose"), "has gone"),
        (STREAM, "has gone"),
        (STREAM, "reads one line"),
    ],
    ids=["text", "json", "json-verbose", "stream-json", "stream-json-head-1"],
)
def test_a_closed_stdout_is_quiet_and_exits_0_in_every_format(
    fake_model_server: FakeModelServer, project: Path, output: tuple[str, ...], reader: str
) -> None:
    """``caliban -p … | head -1``: the reader leaves after its first line, or before it."""
    fake_model_server.add({"text": "line one\nline two\nline three"})
    caliban = Path(sys.executable).with_name("caliban")
    proc = subprocess.Popen(
        [str(caliban), "-p", *output, "hi"],
        cwd=project,
        env=caliban_env(fake_model_server, "anthropic"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    if reader == "reads one line":
        assert proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=HANG_S) == 0
    assert stderr == ""  # no traceback, no "Exception ignored … BrokenPipeError"
    assert len(fake_model_server.requests) == 1  # the run went on to its end


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prompt_from_stdin(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    fake_model_server.add({"text": "ok"})
    result = run(fake_model_server, provider, project, "what is this?", stdin="piped context\n")
    assert result.returncode == 0
    sent = json.dumps(fake_model_server.requests[0].body["messages"])
    assert "what is this?\\npiped context" in sent  # the argument, then stdin (Claude Code's order)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_and_two_parallel_tool_calls(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    (project / "notes.txt").write_text("alpha\nbeta\n")
    (project / "todo.txt").write_text("gamma\n")
    fake_model_server.add(
        {
            "text": "Reading.",
            "tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}],
        },
        {
            "tool_calls": [
                {"name": "Read", "arguments": {"file_path": "todo.txt"}},
                {"name": "Glob", "arguments": {"pattern": "*.txt"}},
            ]
        },
        {"text": "Both files read."},
    )
    result = run(fake_model_server, provider, project, *STREAM, "read them")
    assert result.returncode == 0, result.stderr
    objs = lines(result.stdout)
    check_stream_shapes(objs)
    assert blocks(objs) == [
        "assistant:text",
        "assistant:tool_use",
        "user:tool_result",
        "assistant:tool_use",
        "assistant:tool_use",
        "user:tool_result",
        "user:tool_result",
        "assistant:text",
    ]
    # The blocks of one response share its message id.
    assert objs[1]["message"]["id"] == objs[2]["message"]["id"] != objs[4]["message"]["id"]
    first_result = objs[3]
    assert "alpha" in first_result["message"]["content"][0]["content"]  # a string
    assert first_result["tool_use_result"]["file"]["content"] == "alpha\nbeta"
    parallel = {o["message"]["content"][0]["tool_use_id"]: o for o in objs[6:8]}
    calls = [o["message"]["content"][0] for o in objs[4:6]]
    assert "gamma" in parallel[calls[0]["id"]]["message"]["content"][0]["content"]
    assert "notes.txt" in parallel[calls[1]["id"]]["message"]["content"][0]["content"]
    # Claude Code's count: the prompt, then each tool result.
    assert objs[-1]["num_turns"] == 4 and objs[-1]["result"] == "Both files read."
    # The model saw the tool results on the next request.
    assert "alpha" in json.dumps(fake_model_server.requests[1].body["messages"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_is_retried_and_reported(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    fake_model_server.add(
        {"status": 429, "retry_after": 0, "message": "slow down"}, {"text": "made it"}
    )
    result = run(fake_model_server, provider, project, *STREAM, "go")
    assert result.returncode == 0, result.stderr
    objs = lines(result.stdout)
    check_stream_shapes(objs)
    retries = [o for o in objs if o.get("subtype") == "api_retry"]
    assert len(retries) == 1 and retries[0]["error_status"] == 429
    assert objs[-1]["result"] == "made it"

    fake_model_server.add({"status": 429, "retry_after": 0}, {"text": "text mode"})
    plain = run(fake_model_server, provider, project, "go")
    assert plain.stdout == "text mode\n" and "attempt 2 of 4" in plain.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_401_says_which_key_to_set(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    fake_model_server.add({"status": 401, "message": "invalid x-api-key"})
    result = run(fake_model_server, provider, project, "--output-format", "json", "go")
    assert result.returncode == 1
    env_var = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    assert f"invalid API key for {provider}: set {env_var}" in result.stderr
    assert "Traceback" not in result.stderr
    [obj] = lines(result.stdout)
    # Claude Code reports API errors as subtype "success" with is_error and the status.
    assert (obj["subtype"], obj["is_error"], obj["api_error_status"]) == ("success", True, 401)
    assert obj["result"].startswith(f"invalid API key for {provider}")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_turns(fake_model_server: FakeModelServer, provider: str, project: Path) -> None:
    call = {"tool_calls": [{"name": "Glob", "arguments": {"pattern": "*"}}]}
    fake_model_server.add(call, call)
    result = run(
        fake_model_server, provider, project, "--max-turns", "2", "--output-format", "json", "loop"
    )
    assert result.returncode == 1
    [obj] = lines(result.stdout)
    # num_turns counts the prompt and each tool result, as Claude Code counts them.
    assert (obj["subtype"], obj["is_error"], obj["num_turns"]) == ("error_max_turns", True, 3)
    assert obj["errors"] == ["Reached maximum number of turns (2)"] and "result" not in obj


def test_a_run_that_ends_with_tools_denied_says_which_flag_would_allow_them(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    """The model keeps trying commands nobody can approve in -p until --max-turns: stderr
    names them and the --allowed-tools rules that would let them run."""
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "npm test"}}]},
        {"tool_calls": [{"name": "Write", "arguments": {"file_path": "a.txt", "content": "x"}}]},
    )
    result = run(
        fake_model_server, "anthropic", project, "--max-turns", "2", "--output-format", "json", "go"
    )
    assert result.returncode == 1
    [obj] = lines(result.stdout)
    assert [d["tool_name"] for d in obj["permission_denials"]] == ["Bash", "Write"]
    assert (
        "caliban: 2 tool calls needed approval and were denied (-p cannot ask): "
        "Bash(npm test), Write(a.txt). To allow them, run again with "
        "--allowed-tools 'Bash(npm test:*)' 'Edit(./*)'"
    ) in result.stderr
    assert "Reached the maximum number of turns (2)" in result.stderr
    assert not (project / "a.txt").exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sigint_cancels_and_exits_130(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    fake_model_server.add({"hang": True, "text": "thinking"})
    process = subprocess.Popen(
        [sys.executable, "-m", "caliban", "-p", "--output-format", "json", "wait"],
        cwd=project,
        env=caliban_env(fake_model_server, provider),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + HANG_S
    while not fake_model_server.requests and time.monotonic() < deadline:
        time.sleep(0.05)  # polling another process: no event to wait on
    assert fake_model_server.requests, "caliban never sent its request"
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=HANG_S)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    [obj] = lines(stdout)
    assert obj["is_error"]


def test_no_prompt_is_a_usage_error(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "caliban", "-p"],
        cwd=project,
        input="",
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert result.returncode == 2 and "needs a prompt" in result.stderr


def test_no_key_no_base_url_exits_78_with_instructions(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    result = subprocess.run(
        [sys.executable, "-m", "caliban", "-p", "hi"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert result.returncode == 78
    assert "ANTHROPIC_API_KEY" in result.stderr and "base_url" in result.stderr
    assert "Traceback" not in result.stderr


def test_dead_mcp_server_is_reported_and_the_run_goes_on(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    servers = Path(__file__).parent / "mcp_servers"
    entries = {"broken": "exit_at_once.py", "catalog": "catalog_server.py"}
    trust(project)
    (project / ".caliban" / "mcp.toml").write_text(
        "".join(
            f'[server.{name}]\ncommand = "{sys.executable}"\nargs = ["{servers / script}"]\n'
            for name, script in entries.items()
        )
    )
    # The first request waits for the servers, so the failure is there to report.
    (project / ".caliban" / "config.toml").write_text("[tools]\nwait_for_mcp = true\n")
    fake_model_server.add({"text": "still here"})
    result = run(fake_model_server, "anthropic", project, *STREAM, "hi")
    assert result.returncode == 0, result.stderr
    assert "MCP server 'broken' is unavailable" in result.stderr
    assert "EXAMPLE_API_TOKEN is not set" in result.stderr  # the server's own stderr tail
    init = lines(result.stdout)[0]
    statuses = {s["name"]: s["status"] for s in init["mcp_servers"]}
    assert statuses == {"broken": "failed", "catalog": "connected"}
    assert any(name.startswith("mcp__catalog__") for name in init["tools"])
    assert lines(result.stdout)[-1]["result"] == "still here"


@pytest.mark.parametrize("how", ["a file in the way", "a read-only directory"])
def test_servers_start_without_a_log_file_when_the_log_cannot_be_written(
    fake_model_server: FakeModelServer, project: Path, isolated_dirs: Path, how: str
) -> None:
    logs = isolated_dirs / "state" / "mcp-logs"
    if how == "a file in the way":
        logs.parent.mkdir(parents=True, exist_ok=True)
        logs.write_text("not a directory\n")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        logs.mkdir(parents=True)
        logs.chmod(0o555)
    servers = Path(__file__).parent / "mcp_servers"
    entries = {"broken": "exit_at_once.py", "catalog": "catalog_server.py"}
    trust(project)
    (project / ".caliban" / "mcp.toml").write_text(
        "".join(
            f'[server.{name}]\ncommand = "{sys.executable}"\nargs = ["{servers / script}"]\n'
            for name, script in entries.items()
        )
    )
    # The first request waits for the servers, so the failure is there to report.
    (project / ".caliban" / "config.toml").write_text("[tools]\nwait_for_mcp = true\n")
    fake_model_server.add({"text": "still here"})
    result = run(fake_model_server, "anthropic", project, *STREAM, "hi")
    logs.chmod(0o755)
    assert result.returncode == 0, result.stderr
    init = lines(result.stdout)[0]
    statuses = {s["name"]: s["status"] for s in init["mcp_servers"]}
    assert statuses == {"broken": "failed", "catalog": "connected"}
    assert "cannot run" not in result.stderr and "command not found" not in result.stderr
    # One warning for both servers, naming where the logs should have gone.
    assert result.stderr.count("cannot write MCP server logs") == 1
    assert f"cannot write MCP server logs in {logs}" in result.stderr
    # The failed server's own last words are still reported, kept in memory.
    assert "exited with code 3 while starting" in result.stderr
    assert "EXAMPLE_API_TOKEN is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_model_usage_reports_the_configured_context_window(
    fake_model_server: FakeModelServer, project: Path, isolated_dirs: Path
) -> None:
    config = isolated_dirs / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[providers.openai]\ncontext_window = 32768\n")
    fake_model_server.add({"text": "ok"})
    result = run(fake_model_server, "openai", project, "--output-format", "json", "hi")
    [obj] = lines(result.stdout)
    [usage] = obj["modelUsage"].values()
    # The same window as `context` (and /context): the override, not the built-in table.
    assert usage["contextWindow"] == obj["context"]["context_window"] == 32768
