"""Plan mode through the real ``caliban`` executable against the fake model server: what
``-p --permission-mode plan`` sends, the Agent SDK approving a plan (its stdio protocol
compared with Claude Code 2.1.197's recordings in ``tests/fixtures/claude_code/plan_mode``,
and the real ``claude-agent-sdk`` client's ``can_use_tool``), and the REPL's plan dialog in a
pseudo-terminal.
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
from claude_code_recordings import compare
from fake_model_server import FakeModelServer
from hang import hang_guard
from test_permission_prompt_stdio_e2e import (
    LOOSE,
    Answer,
    Run,
    allow,
    recorded,
    sdk_session,
    success,
)
from test_repl_pty import WAIT, answer, expect_prompt, spawn

from caliban.tools.exit_plan_mode import PLAN_MODE_REMINDER, UNATTENDED

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

PLAN = "# Plan\n\n1. Create `a.txt` containing `hello`.\n2. Check it."
RECORDED = "plan_mode"
P_PLAN = (sys.executable, "-m", "caliban", "-p", "--permission-mode", "plan")
APPROVED = "User has approved your plan. You can now start coding."


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """Stands for the recordings' /tmp/ccrec; the project is its ``proj``."""
    (tmp_path / "proj").mkdir()
    return tmp_path


def caliban_env(server: FakeModelServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    return env


def exit_plan_step(plan: str = PLAN, call_id: str = "toolu_p1") -> dict[str, Any]:
    return {
        "text": "Here is my plan.",
        "tool_calls": [{"id": call_id, "name": "ExitPlanMode", "arguments": {"plan": plan}}],
    }


# ---------------------------------------------------------------------------- -p


def test_p_in_plan_mode_names_plan_mode_offers_exit_plan_mode_and_stays_read_only(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    target = project / "a.txt"
    fake_model_server.add(
        {
            "text": "Writing early.",
            "tool_calls": [
                {"name": "Write", "arguments": {"file_path": str(target), "content": "x"}}
            ],
        },
        exit_plan_step(),
        {"text": "The plan: create a.txt."},
    )
    run = subprocess.run(
        [*P_PLAN, "--output-format", "stream-json", "--verbose", "plan a.txt"],
        cwd=project,
        env=caliban_env(fake_model_server),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert run.returncode == 0, run.stderr
    first = fake_model_server.requests[0].body
    prompt = first["messages"][-1]["content"]
    assert [block["text"] for block in prompt] == ["plan a.txt", PLAN_MODE_REMINDER]
    assert "ExitPlanMode" in [tool["name"] for tool in first["tools"]]
    assert "plan mode" not in json.dumps(first["system"]).lower()  # the prompt stays stable
    frames = [json.loads(line) for line in run.stdout.splitlines()]
    results = [
        block
        for frame in frames
        if frame["type"] == "user"
        for block in frame["message"]["content"]
        if block["type"] == "tool_result"
    ]
    write, plan = results
    assert write["is_error"] and "ExitPlanMode" in write["content"]
    assert plan["is_error"] and UNATTENDED in plan["content"]
    assert not target.exists()
    assert frames[0]["permissionMode"] == "plan"
    assert "ExitPlanMode" not in run.stderr  # no --allowed-tools advice could approve a plan


# ---------------------------------------------------------------------------- the Agent SDK


def check_against(name: str, run: Run, base: Path) -> None:
    """caliban's frames key by key against Claude Code's, but for the plan file Claude Code
    keeps (``filePath``, ``planWasEdited`` in its ``tool_use_result``): caliban has none."""
    theirs, _, _ = recorded(name, base)
    for frame in theirs:
        if isinstance(result := frame.get("tool_use_result"), dict) and "plan" in result:
            result.pop("filePath", None)
            result.pop("planWasEdited", None)
    problems = compare(theirs, run.frames, loose=LOOSE)
    assert problems == [], "\n".join(problems)


def sdk_planning(server: FakeModelServer, base: Path, reply: Answer) -> Run:
    """The Agent SDK's session in plan mode, each question answered by ``reply``."""
    run = sdk_session(
        server, base / "proj", reply, "--permission-mode", "plan", "--model", "claude-opus-4-8"
    )
    assert run.code == 0, run.stderr
    return run


def plan_then_write(base: Path) -> list[dict[str, Any]]:
    _, script, _ = recorded(f"{RECORDED}/stdio_approve", base)
    return script


def test_an_sdk_approval_leaves_plan_mode_as_claude_code_does(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    """Approved without a mode: the default mode, so the Write that follows is asked
    about; the frames match Claude Code's key by key (its status frame included)."""
    fake_model_server.add(*plan_then_write(base))
    asked: list[dict[str, Any]] = []

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["request"])
        return allow(request)

    run = sdk_planning(fake_model_server, base, reply)
    assert [r["tool_name"] for r in asked] == ["ExitPlanMode", "Write"]
    assert asked[0]["input"] == {"plan": PLAN}
    assert "permission_suggestions" not in asked[0] and "description" not in asked[0]
    result = run.of("user")[0]["message"]["content"][0]
    assert result["content"].startswith(APPROVED) and PLAN in result["content"]
    assert (base / "proj" / "a.txt").read_text() == "hello\n"
    check_against(f"{RECORDED}/stdio_approve", run, base)


def test_an_sdk_approval_setting_accept_edits_runs_the_write_unasked(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    fake_model_server.add(*plan_then_write(base))
    asked: list[str] = []

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["request"]["tool_name"])
        mode = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        body = {
            "behavior": "allow",
            "updatedInput": request["request"]["input"],
            "updatedPermissions": [mode],
        }
        return success(request, body)

    run = sdk_planning(fake_model_server, base, reply)
    assert asked == ["ExitPlanMode"]
    assert (base / "proj" / "a.txt").read_text() == "hello\n"
    check_against(f"{RECORDED}/stdio_approve_accept_edits", run, base)


def test_an_sdk_rejection_keeps_planning_with_its_message(
    fake_model_server: FakeModelServer, base: Path
) -> None:
    _, script, _ = recorded(f"{RECORDED}/stdio_reject", base)
    fake_model_server.add(*script)
    message = "Keep planning: add a test first."
    run = sdk_planning(
        fake_model_server, base, lambda r: success(r, {"behavior": "deny", "message": message})
    )
    result = run.tool_result()
    assert result["is_error"] is True and message in result["content"]
    [denial] = run.of("result")[0]["permission_denials"]
    assert denial["tool_name"] == "ExitPlanMode"
    assert not [f for f in run.of("system") if f.get("subtype") == "status"]
    check_against(f"{RECORDED}/stdio_reject", run, base)


@pytest.mark.anyio
async def test_the_agent_sdk_approves_a_plan_through_can_use_tool(project: Path) -> None:
    from claude_agent_sdk import (
        ClaudeAgentOptions,
        ClaudeSDKClient,
        PermissionResultAllow,
        PermissionUpdate,
        ResultMessage,
        SystemMessage,
        ToolPermissionContext,
    )

    target = project / "a.txt"
    script = [
        exit_plan_step(),
        {
            "text": "Writing.",
            "tool_calls": [
                {"name": "Write", "arguments": {"file_path": str(target), "content": "hello\n"}}
            ],
        },
        {"text": "Done."},
        {"text": "Carried on."},
    ]
    seen: list[tuple[str, dict[str, Any]]] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        seen.append((name, tool_input))
        accept = PermissionUpdate(type="setMode", mode="acceptEdits", destination="session")
        return PermissionResultAllow(updated_permissions=[accept])

    with FakeModelServer(script) as server:
        options = ClaudeAgentOptions(
            cli_path=str(Path(sys.executable).parent / "caliban"),
            cwd=str(project),
            env=caliban_env(server),
            permission_mode="plan",
            can_use_tool=can_use_tool,
        )
        results: list[ResultMessage] = []
        modes: list[str] = []
        with hang_guard():
            async with ClaudeSDKClient(options) as client:
                for prompt in ("plan writing a.txt", "carry on"):
                    await client.query(prompt)
                    async for message in client.receive_response():
                        if isinstance(message, ResultMessage):
                            results.append(message)
                        if isinstance(message, SystemMessage) and message.subtype == "init":
                            modes.append(message.data["permissionMode"])
        first, second = server.requests[0].body, server.requests[3].body
    assert seen == [("ExitPlanMode", {"plan": PLAN})]  # the Write ran unasked: acceptEdits
    assert [r.is_error for r in results] == [False, False]
    assert modes == ["plan", "acceptEdits"]
    # Out of plan mode: no reminder on the next prompt, no ExitPlanMode offered.
    assert [block["text"] for block in second["messages"][-1]["content"]] == ["carry on"]
    assert "ExitPlanMode" not in [tool["name"] for tool in second["tools"]]
    assert target.read_text() == "hello\n"
    assert first["messages"][-1]["content"][-1]["text"] == PLAN_MODE_REMINDER


# ---------------------------------------------------------------------------- the REPL


def test_a_plan_approved_in_the_terminal_lets_the_edit_through(
    project: Path, fake_model_server: FakeModelServer
) -> None:
    """The plan is drawn as Markdown and asked about with the REPL's menu (keys typed
    before it was drawn do not answer it); "keep planning" sends the feedback back, "Yes,
    and auto-accept edits" ends plan mode and the Edit runs without a question."""
    target = project / "a.txt"
    target.write_text("one\n")
    read = {"name": "Read", "arguments": {"file_path": str(target)}}
    edit = {
        "name": "Edit",
        "arguments": {"file_path": str(target), "old_string": "one", "new_string": "two"},
    }
    fake_model_server.add(
        {"text": "Reading.", "tool_calls": [read]},
        exit_plan_step("# First plan\n\n- replace **one**"),
        exit_plan_step("# Second plan\n\n- replace **one** with *two*", "toolu_p2"),
        {"text": "Editing.", "tool_calls": [edit]},
        {"text": "All done."},
    )
    child = spawn(project, fake_model_server, args=("--permission-mode", "plan"))
    try:
        expect_prompt(child)
        child.send("plan the change\r")
        child.expect("First plan")
        child.expect("Would you like to proceed")
        answer(child, "3")  # No, keep planning
        child.expect("What should change in the plan")
        child.send("say what two is\r")
        child.expect("Second plan")
        child.expect("Would you like to proceed")
        answer(child, "1")  # Yes, and auto-accept edits
        child.expect("All done.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert target.read_text() == "two\n"
    bodies = fake_model_server.bodies
    assert bodies[0]["messages"][-1]["content"][-1]["text"] == PLAN_MODE_REMINDER
    rejected = bodies[2]["messages"][-1]["content"][0]
    assert rejected["is_error"] and "The user said: say what two is" in json.dumps(rejected)
    approved = bodies[3]["messages"][-1]["content"][0]
    assert APPROVED in json.dumps(approved)
    assert "ExitPlanMode" not in [t["name"] for t in bodies[3]["tools"]]
    screen = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", child.logfile_read.getvalue())
    assert "• replace one" in screen  # drawn as Markdown, not shown as its source
    assert "Do you want to proceed?" not in screen  # the Edit was not asked about
