"""Sessions end to end: the real ``caliban`` executable against the fake model server.

``kill -9`` in the middle of a tool call, then ``--continue``; activations restored while an
MCP server's tools changed; a transcript in use by another process; bad ids; ``caliban
sessions list`` / ``rm``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import HANG_S
from typer.testing import CliRunner

from caliban.cli.app import app
from caliban.events import AssistantMessage, UserPrompt
from caliban.messages import Message, Usage
from caliban.permissions.trust import trust
from caliban.providers.scripted import reply
from caliban.session.store import INTERRUPTED_BY_EXIT, list_sessions, load_session, transcript_path
from caliban.session.transcript import Transcript, header_json

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
CATALOG_SERVER = HERE / "mcp_servers" / "catalog_server.py"


def caliban_env(server: FakeModelServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    return env


def caliban(
    server: FakeModelServer, cwd: Path, *args: str, timeout: float = HANG_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        env=caliban_env(server),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_until(condition: Callable[[], Any], what: str, timeout: float = HANG_S) -> Any:
    """Poll ``condition`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry.name))
    return pids


def messages_sent(server: FakeModelServer, request: int) -> list[dict[str, Any]]:
    body = server.requests[request].body
    assert isinstance(body, dict)
    messages: list[dict[str, Any]] = body["messages"]
    return messages


def test_kill_9_mid_tool_then_continue_restores_everything_up_to_that_turn(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    marker = f"caliban-e2e-{uuid.uuid4().hex[:12]}"
    command = f"sleep 30 && echo {marker}"
    fake_model_server.add(
        {
            "text": "Waiting.",
            "tool_calls": [
                {"id": "toolu_sleep", "name": "Bash", "arguments": {"command": command}}
            ],
        },
    )
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "caliban",
            "-p",
            "wait for it",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
        ],
        cwd=project,
        env=caliban_env(fake_model_server),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None
        init = json.loads(first.stdout.readline())
        session_id = init["session_id"]
        tool_pids = wait_until(lambda: processes_with(marker), "the Bash tool to start")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=HANG_S)
    finally:
        first.kill()
        first.communicate(timeout=HANG_S)
        for pid in processes_with(marker):
            os.killpg(pid, signal.SIGKILL)  # the tool's own process group, orphaned by -9
    assert first.returncode == -signal.SIGKILL and tool_pids

    path = transcript_path(project, session_id)
    record = load_session(path)
    assert [m.role for m in record.messages] == ["user", "assistant", "user"]
    assert "marked as interrupted" in record.warnings[0]

    fake_model_server.add({"text": "Picking up where we left off."})
    second = caliban(
        fake_model_server, project, "-p", "-c", "what happened?", "--output-format", "json"
    )
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    assert result["session_id"] == session_id
    assert result["result"] == "Picking up where we left off."
    assert "marked as interrupted" in second.stderr

    sent = messages_sent(fake_model_server, 1)
    # The Anthropic provider merges the two user turns (results, then the new prompt).
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "wait for it"
    assert sent[1]["content"][-1]["input"] == {"command": command}
    interrupted, prompt = sent[2]["content"]
    assert interrupted["tool_use_id"] == "toolu_sleep" and interrupted["is_error"] is True
    assert INTERRUPTED_BY_EXIT in json.dumps(interrupted)
    assert prompt["type"] == "text" and prompt["text"] == "what happened?"

    # The same file grew; a third load needs no repair and sees both turns.
    assert [s.id for s in list_sessions(project)] == [session_id]
    final = load_session(path)
    assert final.warnings == () and final.turns == 2
    assert final.messages[-1].text == "Picking up where we left off."


def write_catalog(path: Path, *names: str) -> None:
    tools = [
        {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object"}}
        for name in names
    ]
    path.write_text(json.dumps({"server": "cat", "tools": tools}), encoding="utf-8")


def test_resume_restores_activations_and_drops_tools_a_server_no_longer_has(
    fake_model_server: FakeModelServer, project: Path, tmp_path: Path
) -> None:
    catalog = tmp_path / "catalog.json"
    write_catalog(catalog, "alpha", "beta", "gamma")
    (project / ".caliban" / "config.toml").write_text("[tools]\nlazy_mcp = true\n")
    args = json.dumps([str(CATALOG_SERVER), "--catalog", str(catalog)])
    trust(project)
    (project / ".caliban" / "mcp.toml").write_text(
        f"[server.cat]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
    )
    select = "select:mcp__cat__alpha mcp__cat__beta"
    fake_model_server.add(
        {"tool_calls": [{"name": "ToolSearch", "arguments": {"query": select}}]},
        {"text": "Found them."},
    )
    first = caliban(fake_model_server, project, "-p", "find the tools", "--output-format", "json")
    assert first.returncode == 0, first.stderr
    assert {"mcp__cat__alpha", "mcp__cat__beta"} <= set(fake_model_server.requests[1].tool_names)

    write_catalog(catalog, "alpha", "gamma")  # the server dropped beta
    fake_model_server.add({"text": "Still here."})
    second = caliban(fake_model_server, project, "-p", "--continue", "go on")
    assert second.returncode == 0, second.stderr
    assert "dropped from the active set: mcp__cat__beta" in second.stderr
    offered = fake_model_server.requests[2].tool_names
    assert "mcp__cat__alpha" in offered
    assert "mcp__cat__beta" not in offered and "mcp__cat__gamma" not in offered


def save_session(root: Path, *prompts: str) -> str:
    """A finished session written in-process, as a caliban run would have left it."""
    session_id = str(uuid.uuid4())
    header = header_json(
        session_id=session_id, cwd=root, project_root=root, model="m", provider="anthropic"
    )
    transcript = Transcript.create(transcript_path(root, session_id), header=header)
    for prompt in prompts:
        transcript(UserPrompt(message=Message.user(prompt)))
        transcript(AssistantMessage(message=reply("ok"), usage=Usage(), model="m"))
    transcript.close()
    return session_id


def test_resume_errors_exit_2_with_a_clear_message(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    session_id = save_session(project, "hello")
    unknown = caliban(fake_model_server, project, "-p", "--resume", "deadbeef", "again")
    assert unknown.returncode == 2
    assert "no session 'deadbeef'" in unknown.stderr and session_id[:8] in unknown.stderr

    holder = Transcript.reopen(transcript_path(project, session_id))
    try:
        busy = caliban(fake_model_server, project, "-p", "--resume", session_id, "again")
    finally:
        holder.close()
    assert busy.returncode == 2
    assert "in use by another caliban process" in busy.stderr
    assert load_session(transcript_path(project, session_id)).turns == 1


def test_sessions_list_and_rm(
    fake_model_server: FakeModelServer, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [save_session(project, "first task"), save_session(project, "second", "task")]
    os.utime(transcript_path(project, ids[0]), (1_700_000_000, 1_700_000_000))

    listed = caliban(fake_model_server, project, "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert rows[0].split()[:2] == ["ID", "LAST"]
    assert rows[1].startswith(ids[1][:8]) and rows[1].endswith("2 turns  second")
    assert rows[2].startswith(ids[0][:8]) and rows[2].endswith("1 turn  first task")

    monkeypatch.chdir(project)  # in-process: the executable's `sessions list` ran above
    as_json = json.loads(CliRunner().invoke(app, ["sessions", "list", "--json"]).stdout)
    assert [(s["id"], s["turns"]) for s in as_json] == [(ids[1], 2), (ids[0], 1)]

    removed = caliban(fake_model_server, project, "sessions", "rm", ids[0][:8])
    assert removed.returncode == 0 and ids[0] in removed.stderr
    gone = caliban(fake_model_server, project, "sessions", "rm", ids[0][:8])
    assert gone.returncode == 2 and "no session" in gone.stderr
    assert [s.id for s in list_sessions(project)] == [ids[1]]
