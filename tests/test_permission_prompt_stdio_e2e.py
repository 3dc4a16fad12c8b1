"""``--permission-prompt-tool stdio`` through the real ``caliban`` executable, as the Claude
Agent SDKs drive it: stream-json both ways, a ``can_use_tool`` control_request on stdout for
each call that would ask, the SDK's control_response on stdin.

Claude Code 2.1.197's frames for the same conversations are in
``tests/fixtures/claude_code/permission_stdio_*`` (recorded interactively: the answer was
written after the request was read); caliban's are compared with them key by key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from claude_code_recordings import FIXTURES, RECORDED_BASE, compare, substitute
from fake_model_server import FakeModelServer
from hang import HANG_S

pytestmark = pytest.mark.slow

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Given caliban's control_request, the line to write back (``None``: close stdin)."""

CALIBAN_P = (
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--input-format",
    "stream-json",
    "--permission-prompt-tool",
    "stdio",
)
SDK_ARGV = (
    "--output-format",
    "stream-json",
    "--verbose",
    "--system-prompt",
    "",
    "--permission-prompt-tool",
    "stdio",
    "--input-format",
    "stream-json",
)
"""What claude-agent-sdk 0.2.188 (Python) passes with a can_use_tool callback: no -p (Claude
Code runs headless whenever stdout is not a terminal)."""
RECORDED = "permission_stdio"
WAIT_S = HANG_S


@dataclass(frozen=True)
class Run:
    code: int
    frames: list[dict[str, Any]]
    stderr: str

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == kind]

    def tool_result(self) -> dict[str, Any]:
        [frame] = [
            f
            for f in self.of("user")
            if isinstance(c := f["message"]["content"], list) and c[0].get("type") == "tool_result"
        ]
        block: dict[str, Any] = frame["message"]["content"][0]
        return block


def sdk_session(
    server: FakeModelServer,
    project: Path,
    answer: Answer,
    *args: str,
    close_after_answer: bool = False,
    argv: tuple[str, ...] = CALIBAN_P,
) -> Run:
    """Run caliban as the Agent SDK does: send one user message, answer each can_use_tool
    request with ``answer``, close stdin after the result (or after the first answer)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "caliban", *argv, *args],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(WAIT_S, proc.kill)  # a hang fails the test, not the suite
    timer.start()
    frames: list[dict[str, Any]] = []
    try:
        user = {"type": "user", "message": {"role": "user", "content": "write"}}
        proc.stdin.write(json.dumps(user) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            frame = json.loads(line)
            frames.append(frame)
            if frame.get("type") == "result" and not proc.stdin.closed:
                proc.stdin.close()
            if frame.get("type") != "control_request" or proc.stdin.closed:
                continue
            reply = answer(frame)
            if reply is not None:
                proc.stdin.write(json.dumps(reply) + "\n")
                proc.stdin.flush()
            if reply is None or close_after_answer:
                proc.stdin.close()
        code = proc.wait()
        stderr = proc.stderr.read()
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return Run(code=code, frames=frames, stderr=stderr)


def success(request: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request["request_id"], "response": body},
    }


def allow(request: dict[str, Any]) -> dict[str, Any]:
    """The Python SDK's answer for ``PermissionResultAllow()``: the input as it was."""
    return success(request, {"behavior": "allow", "updatedInput": request["request"]["input"]})


def write_call(path: Path, content: str = "hello\n") -> dict[str, Any]:
    return {
        "text": "Writing.",
        "tool_calls": [
            {
                "id": "toolu_w1",
                "name": "Write",
                "arguments": {"file_path": str(path), "content": content},
            }
        ],
    }


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """Stands for the recordings' /tmp/ccrec; the project is its ``proj``."""
    (tmp_path / "proj").mkdir()
    return tmp_path


def recorded(name: str, base: Path) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
    """Claude Code's frames, the model's script and the argv tail, moved to ``base``."""
    folder = FIXTURES / name
    command = json.loads((folder / "command.json").read_text())
    frames = [json.loads(line) for line in (folder / "stdout.jsonl").read_text().splitlines()]
    tail = [a for a in command["argv"][1:] if a != "-p"]
    extra = tail[tail.index("--model") :]
    return substitute(frames, str(base)), substitute(command["script"], str(base)), extra


# Claude Code's frames differ from caliban's in wording only here: the tool's own result
# text and its tool_use_result (caliban's Write reports its own way), the denial text
# (caliban prefixes "Permission denied for Write:"), the description (caliban: "Write on
# PATH"), the suggestions (Claude Code offers acceptEdits mode, caliban a rule).
LOOSE = ("content", "tool_use_result", "description", "permission_suggestions")


def check_against(name: str, run: Run, base: Path) -> None:
    theirs, _, _ = recorded(name, base)
    problems = compare(theirs, run.frames, loose=LOOSE)
    assert problems == [], "\n".join(problems)
    assert RECORDED_BASE not in json.dumps(run.frames)


def test_allow_runs_the_call_and_frames_match_claude_code(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    _, script, extra = recorded(f"{RECORDED}_allow", base)
    fake_model_server.add(*script)
    asked: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return allow(request)

    run = sdk_session(fake_model_server, base / "proj", answer, *extra)
    assert (run.code, (base / "proj" / "a.txt").read_text()) == (0, "hello\n"), run.stderr
    [request] = asked
    assert request["request"]["tool_use_id"] == "toolu_w1"
    assert request["request"]["input"] == {
        "file_path": str(base / "proj/a.txt"),
        "content": "hello\n",
    }
    assert run.tool_result().get("is_error") is not True
    assert run.of("result")[0]["permission_denials"] == []
    check_against(f"{RECORDED}_allow", run, base)


def test_allow_with_updated_input_runs_the_new_input(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    _, script, extra = recorded(f"{RECORDED}_allow_updated", base)
    fake_model_server.add(*script)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        changed = {**request["request"]["input"], "content": "changed\n"}
        return success(request, {"behavior": "allow", "updatedInput": changed})

    run = sdk_session(fake_model_server, base / "proj", answer, *extra)
    assert (run.code, (base / "proj" / "a.txt").read_text()) == (0, "changed\n"), run.stderr
    check_against(f"{RECORDED}_allow_updated", run, base)


def test_deny_gives_the_model_the_sdk_message(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    _, script, extra = recorded(f"{RECORDED}_deny", base)
    fake_model_server.add(*script)
    run = sdk_session(
        fake_model_server,
        base / "proj",
        lambda r: success(r, {"behavior": "deny", "message": "not today"}),
        *extra,
    )
    assert run.code == 0, run.stderr
    assert not (base / "proj" / "a.txt").exists()
    result = run.tool_result()
    assert result["is_error"] is True and "not today" in json.dumps(result["content"])
    sent = json.dumps(fake_model_server.requests[-1].body["messages"][-1])
    assert "not today" in sent
    [denial] = run.of("result")[0]["permission_denials"]
    assert (denial["tool_name"], denial["tool_use_id"]) == ("Write", "toolu_w1")
    # Nothing on stderr about -p being unable to ask: the SDK was asked.
    assert "cannot ask" not in run.stderr and "not supported" not in run.stderr
    check_against(f"{RECORDED}_deny", run, base)


@pytest.mark.parametrize(
    "name, reply",
    [
        ("malformed", lambda r: success(r, {"behavior": "maybe"})),
        (
            "error",
            lambda r: {
                "type": "control_response",
                "response": {
                    "subtype": "error",
                    "request_id": r["request_id"],
                    "error": "sdk broke",
                },
            },
        ),
    ],
)
def test_a_malformed_or_failed_answer_denies(
    name: str, reply: Answer, fake_model_server: FakeModelServer, base: Path
) -> None:
    _, script, extra = recorded(f"{RECORDED}_{name}", base)
    fake_model_server.add(*script)
    run = sdk_session(fake_model_server, base / "proj", reply, *extra)
    assert run.code == 0, run.stderr
    assert not (base / "proj" / "a.txt").exists()
    assert run.tool_result()["is_error"] is True
    assert len(run.of("result")[0]["permission_denials"]) == 1
    check_against(f"{RECORDED}_{name}", run, base)


def test_an_allow_without_updated_input_denies_as_in_claude_code(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # Claude Code 2.1.197 rejects {"behavior": "allow"} alone (its schema wants updatedInput).
    fake_model_server.add(write_call(project / "a.txt"), {"text": "Done."})
    run = sdk_session(fake_model_server, project, lambda r: success(r, {"behavior": "allow"}))
    assert run.code == 0 and not (project / "a.txt").exists()
    assert run.tool_result()["is_error"] is True


def test_an_answer_with_an_unknown_request_id_allows_nothing(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(write_call(project / "a.txt"), {"text": "Done."})

    def answer(request: dict[str, Any]) -> dict[str, Any] | None:
        return allow({**request, "request_id": "someone-else"})

    # The stray allow is ignored; the question waits until stdin closes, which denies it.
    run = sdk_session(fake_model_server, project, answer, close_after_answer=True)
    assert run.code == 0 and not (project / "a.txt").exists()
    assert run.tool_result()["is_error"] is True


def test_stdin_closing_while_waiting_denies_and_ends_cleanly(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    _, script, extra = recorded(f"{RECORDED}_eof", base)
    fake_model_server.add(*script)
    run = sdk_session(fake_model_server, base / "proj", lambda r: None, *extra)
    assert run.code == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert not (base / "proj" / "a.txt").exists()
    assert run.tool_result()["is_error"] is True
    assert run.of("result")[0]["subtype"] == "success"
    check_against(f"{RECORDED}_eof", run, base)


def test_a_deny_rule_wins_over_an_sdk_allow_of_a_changed_input(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # The SDK allows, but swaps the harmless command for one a deny rule forbids.
    fake_model_server.add(
        {
            "text": "",
            "tool_calls": [
                {"id": "toolu_b1", "name": "Bash", "arguments": {"command": "echo hi > ok.txt"}}
            ],
        },
        {"text": "Done."},
    )

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        changed = {**request["request"]["input"], "command": "touch forbidden.txt"}
        return success(request, {"behavior": "allow", "updatedInput": changed})

    run = sdk_session(fake_model_server, project, answer, "--disallowed-tools", "Bash(touch:*)")
    assert run.code == 0, run.stderr
    assert not (project / "forbidden.txt").exists() and not (project / "ok.txt").exists()
    assert run.tool_result()["is_error"] is True
    assert len(run.of("control_request")) == 1


def test_an_updated_input_the_tool_rejects_denies(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(write_call(project / "a.txt"), {"text": "Done."})

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return success(request, {"behavior": "allow", "updatedInput": {"file_path": 7}})

    run = sdk_session(fake_model_server, project, answer)
    assert run.code == 0 and not (project / "a.txt").exists()
    assert "not valid for Write" in json.dumps(run.tool_result()["content"])


def test_what_needs_no_question_is_not_asked(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    (project / "notes.txt").write_text("hi\n")
    fake_model_server.add(
        {
            "text": "",
            "tool_calls": [
                {"id": "toolu_r1", "name": "Read", "arguments": {"file_path": "notes.txt"}}
            ],
        },
        {"text": "Done."},
    )
    run = sdk_session(fake_model_server, project, allow)
    assert run.code == 0 and run.of("control_request") == []


def test_without_stream_json_input_it_warns_and_denies(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(write_call(project / "a.txt"), {"text": "Done."})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake_model_server.anthropic_base_url)
    done = subprocess.run(
        [sys.executable, "-m", "caliban", "-p", "write", "--permission-prompt-tool", "stdio"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0
    assert "--permission-prompt-tool stdio is not supported" in done.stderr
    assert "control_request" not in done.stdout and not (project / "a.txt").exists()


def test_an_interrupt_while_the_question_waits_ends_the_turn(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(write_call(project / "a.txt"))

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        # The SDK's user interrupts instead of answering.
        return {
            "type": "control_request",
            "request_id": "int_1",
            "request": {"subtype": "interrupt"},
        }

    run = sdk_session(fake_model_server, project, answer)
    assert "Traceback" not in run.stderr
    assert not (project / "a.txt").exists()
    [cancel] = run.of("control_cancel_request")
    assert cancel["request_id"] == run.of("control_request")[0]["request_id"]
    [result] = run.of("result")
    assert result["is_error"] is True
    assert any(f["response"]["request_id"] == "int_1" for f in run.of("control_response"))


def test_the_sdks_own_command_line_runs_headless_without_p(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(write_call(project / "a.txt"), {"text": "Done."})
    run = sdk_session(fake_model_server, project, allow, argv=SDK_ARGV)
    assert (run.code, run.stderr) == (0, "")
    assert (project / "a.txt").read_text() == "hello\n"
    assert len(run.of("control_request")) == 1


def test_a_deny_that_asks_to_interrupt_ends_the_turn(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # PermissionResultDeny(message=..., interrupt=True): the model is not asked again (a
    # second request would fail the fake server's teardown check).
    fake_model_server.add(write_call(project / "a.txt"))
    run = sdk_session(
        fake_model_server,
        project,
        lambda r: success(r, {"behavior": "deny", "message": "stop", "interrupt": True}),
    )
    assert "Traceback" not in run.stderr
    assert not (project / "a.txt").exists()
    [result] = run.of("result")
    assert result["is_error"] is True
    assert len(fake_model_server.requests) == 1
