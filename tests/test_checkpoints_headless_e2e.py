"""Headless checkpoints: the real Python Agent SDK drives ``caliban`` with
``enable_file_checkpointing`` and ``rewind_files``; and Claude Code's recorded answers to
``rewind_files`` (tests/fixtures/claude_code/rewind_files) are caliban's too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import HANG_S, hang_guard

from caliban.permissions.trust import trust

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code" / "rewind_files"
ORIGINAL = {"b.txt": "one\ntwo\n", "c.txt": "original c\n"}


def script(project: Path) -> list[dict[str, Any]]:
    """Prompt 1: Read, Write a new file and Edit one, change two files through Bash; prompt
    2: Edit again."""
    p = str(project)
    return [
        {"tool_calls": [{"id": "r1", "name": "Read", "arguments": {"file_path": f"{p}/b.txt"}}]},
        {
            "tool_calls": [
                {
                    "id": "w1",
                    "name": "Write",
                    "arguments": {"file_path": f"{p}/new.txt", "content": "new file\n"},
                },
                {
                    "id": "e1",
                    "name": "Edit",
                    "arguments": {
                        "file_path": f"{p}/b.txt",
                        "old_string": "two",
                        "new_string": "TWO",
                    },
                },
            ]
        },
        {
            "tool_calls": [
                {
                    "id": "b1",
                    "name": "Bash",
                    "arguments": {"command": "echo changed > c.txt && echo made > d.txt"},
                }
            ]
        },
        {"text": "Done."},
        {
            "tool_calls": [
                {
                    "id": "e2",
                    "name": "Edit",
                    "arguments": {
                        "file_path": f"{p}/b.txt",
                        "old_string": "one",
                        "new_string": "ONE",
                    },
                }
            ]
        },
        {"text": "Edited again."},
    ]


def files(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.iterdir()) if p.is_file()}


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    for name, text in ORIGINAL.items():
        (project / name).write_text(text)
    trust(project)
    return project


def caliban_env(server: FakeModelServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    return env


async def test_the_agent_sdk_rewinds_write_edit_and_bash_changes(tmp_path: Path) -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, UserMessage

    project = make_project(tmp_path)
    with FakeModelServer(script(project)) as server:
        options = ClaudeAgentOptions(
            cli_path=str(Path(sys.executable).parent / "caliban"),
            cwd=str(project),
            env=caliban_env(server),
            enable_file_checkpointing=True,
            permission_mode="bypassPermissions",
            extra_args={"replay-user-messages": None},
        )
        prompts: list[str] = []
        with hang_guard():
            async with ClaudeSDKClient(options) as client:
                for prompt in ("change the files", "edit again"):
                    await client.query(prompt)
                    async for message in client.receive_response():
                        if isinstance(message, UserMessage) and isinstance(message.content, str):
                            assert message.uuid
                            prompts.append(message.uuid)
                        if isinstance(message, ResultMessage):
                            assert not message.is_error, message.result
                assert files(project) == {
                    "b.txt": "ONE\nTWO\n",
                    "c.txt": "changed\n",
                    "d.txt": "made\n",
                    "new.txt": "new file\n",
                }
                assert len(prompts) == 2
                await client.rewind_files(prompts[1])
                assert files(project)["b.txt"] == "one\nTWO\n"
                await client.rewind_files(prompts[0])
                assert files(project) == ORIGINAL  # the new files gone, Bash's undone too


def test_claude_code_s_rewind_files_answers_are_caliban_s(tmp_path: Path) -> None:
    recorded = [json.loads(line) for line in (FIXTURE / "stdout.jsonl").read_text().splitlines()]
    expected = [f["response"] for f in recorded if f["type"] == "control_response"][1:]
    command = json.loads((FIXTURE / "command.json").read_text())
    project = make_project(tmp_path)
    steps = json.loads(json.dumps(command["script"]).replace("/tmp/ccrec/proj", str(project)))
    with FakeModelServer(steps) as server:
        env = {**caliban_env(server), **command["env"]}
        child = subprocess.Popen(
            [sys.executable, "-m", "caliban", *command["argv"][1:]],
            cwd=project,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        sent = iter(command["stdin"])
        init, user, rewind, unknown = next(sent), next(sent), next(sent), next(sent)
        answers: list[dict[str, Any]] = []
        try:
            for line in (json.dumps(init), json.dumps(user)):
                child.stdin.write(line + "\n")
            child.stdin.flush()
            for line in child.stdout:
                frame = json.loads(line)
                if frame["type"] == "user" and frame.get("isReplay"):
                    rewind["request"]["user_message_id"] = frame["uuid"]
                if frame["type"] == "result":
                    assert files(project) == {**command["files_after_turn"]}
                    child.stdin.write(json.dumps(rewind) + "\n")
                    child.stdin.write(json.dumps(unknown) + "\n")
                    child.stdin.flush()
                if frame["type"] == "control_response" and frame["response"]["request_id"] != (
                    "req_init"
                ):
                    answers.append(frame["response"])
                    if len(answers) == 2:
                        child.stdin.close()
        finally:
            child.wait(timeout=HANG_S)
    assert answers == expected
    # Claude Code left Bash's changes (c.txt, d.txt); caliban undoes them too.
    assert command["files_after_rewind"] != ORIGINAL
    assert files(project) == ORIGINAL
