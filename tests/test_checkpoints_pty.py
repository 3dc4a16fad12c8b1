"""``/rewind`` and Esc Esc in a real terminal: the ``caliban`` executable in a pseudo-terminal
against the fake model server, and a rewind after ``caliban -c`` in a new process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_repl_pty import CALIBAN, WAIT, Caliban, answer, expect_prompt

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

ORIGINAL = {"b.txt": "one\n", "c.txt": "c\n"}


def spawn(project: Path, server: Any, *args: str) -> Any:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": server.url,
        "TERM": "xterm-256color",
    }
    return Caliban(
        str(CALIBAN),
        ["--permission-mode", "bypassPermissions", *args],
        cwd=str(project),
        env=env,
        dimensions=(40, 120),
        encoding="utf-8",
        timeout=2 * WAIT,  # two processes, each taking checkpoints, on a busy machine
    )


def files(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.iterdir()) if p.is_file()}


def changes(project: Path) -> dict[str, Any]:
    return {
        "text": "Changing them.",
        "tool_calls": [
            {
                "name": "Write",
                "arguments": {"file_path": str(project / "new.txt"), "content": "n\n"},
            },
            {"name": "Bash", "arguments": {"command": "echo changed > c.txt && echo x >> b.txt"}},
        ],
    }


@pytest.fixture
def repo(project: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    for name, text in ORIGINAL.items():
        (project / name).write_text(text)
    return project


def test_rewind_code_only_then_esc_esc_after_continue(repo: Path, fake_model_server: Any) -> None:
    fake_model_server.add(changes(repo), {"text": "Changed."}, {"text": "Hi."})
    child = spawn(repo, fake_model_server)
    try:
        expect_prompt(child)
        child.send("make changes\r")
        child.expect("Changed.")
        expect_prompt(child)
        assert files(repo)["c.txt"] == "changed\n"
        child.send("hello\r")  # a second prompt: `answer` moves the selection to option 2
        child.expect("Hi.")
        expect_prompt(child)

        child.send("/rewind\r")
        child.expect("Rewind to before which prompt")
        child.expect(r"make changes  · 3 files \+3 -1")
        answer(child, "2")  # the older prompt, "make changes"
        child.expect("Restore what")
        answer(child, "3")  # code only
        child.expect("Restored 3 files")
        expect_prompt(child)
        assert files(repo) == ORIGINAL
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)

    # The agent changes them again in a new process that continues the session, and Esc Esc
    # takes code and conversation back to before the first prompt (a checkpoint of the first
    # process).
    fake_model_server.add(changes(repo), {"text": "Changed again."}, {"text": "Sent again."})
    child = spawn(repo, fake_model_server, "-c")
    try:
        expect_prompt(child)
        child.send("change them again\r")
        child.expect("Changed again.")
        expect_prompt(child)
        child.send("\x1b\x1b")
        child.expect("Rewind to before which prompt")
        answer(child, "3")  # the oldest prompt: "make changes", from the first process
        child.expect("Restore what")
        answer(child, "1")  # code and conversation
        child.expect("Conversation rewound to before: make changes")
        child.expect("make changes")  # back in the input
        assert files(repo) == ORIGINAL
        child.send("\r")
        child.expect("Sent again.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    last = fake_model_server.bodies[-1]["messages"]
    assert len(last) == 1 and "make changes" in str(last[0])  # the conversation was cut
