"""Approvals as a Claude Code user expects them (issue 27), through the real ``caliban`` in
a pseudo-terminal against the fake model server: an Edit of a file not read fails before
anyone is asked; "Yes, allow all edits during this session" switches to acceptEdits (the
toolbar says so); a Bash "don't ask again" is saved to ``.claude/settings.local.json`` and
holds after ``caliban -c`` and in a new session, one rule per command of a compound line;
a Ctrl-D pressed the moment an answer
ends leaves.

What Claude Code 2.1.197 shows in the same places (recorded in tmux against the harness's
fake API) is in ``tests/fixtures/claude_code/approval_dialog.txt``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_repl_pty import answer, expect_prompt, spawn

from caliban.permissions.trust import trust

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

QUESTION = "Do you want to proceed?"


def tool_step(text: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": name, "arguments": arguments}]}


def tool_results(body: dict[str, Any]) -> list[str]:
    return [
        json.dumps(block.get("content"))
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def choose_second(child: Any, prompt: str, option: str) -> None:
    """Send ``prompt``; at the question, see its second answer read ``option`` and take it."""
    expect_prompt(child)
    child.send(prompt + "\r")
    child.expect(QUESTION)
    child.expect(option)
    answer(child, "2")


def leave(child: Any) -> None:
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_an_edit_of_a_file_not_read_fails_before_asking(
    project: Path, fake_model_server: Any
) -> None:
    """Claude Code answers "File must be read first" with no dialog; caliban asked, and
    only after the user said yes did the Edit fail."""
    (project / "hello.py").write_text("print('hello')\n")
    fake_model_server.add(
        tool_step(
            "Editing.",
            "Edit",
            {"file_path": "hello.py", "old_string": "hello", "new_string": "hi"},
        ),
        {"text": "I will read it first."},
    )
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("change hello\r")
        assert child.expect([QUESTION, "I will read it first."]) == 1, "it asked"
        expect_prompt(child)
        leave(child)
    finally:
        child.close(force=True)
    [result] = tool_results(fake_model_server.bodies[-1])
    assert "has not been read in this session" in result
    assert (project / "hello.py").read_text() == "print('hello')\n"


def test_allow_all_edits_switches_the_session_to_accept_edits(
    project: Path, fake_model_server: Any
) -> None:
    (project / "hello.py").write_text("print('hello')\n")
    fake_model_server.add(
        tool_step("Reading.", "Read", {"file_path": "hello.py"}),
        tool_step(
            "Editing.",
            "Edit",
            {"file_path": "hello.py", "old_string": "hello", "new_string": "hi"},
        ),
        tool_step("Writing.", "Write", {"file_path": "sub/deep/new.py", "content": "x = 1\n"}),
        {"text": "All edited."},
    )
    child = spawn(project, fake_model_server)
    try:
        choose_second(
            child, "edit things", r"2\. Yes, allow all edits during this session \(shift\+tab\)"
        )
        child.expect("accept edits on")
        # the Write into a new directory runs without a second question
        assert child.expect([QUESTION, "All edited."]) == 1, "it asked again"
        expect_prompt(child)
        child.expect("⏵⏵ accept edits on")  # the toolbar
        leave(child)
    finally:
        child.close(force=True)
    assert (project / "hello.py").read_text() == "print('hi')\n"
    assert (project / "sub/deep/new.py").read_text() == "x = 1\n"


def test_a_bash_rule_is_saved_where_claude_code_saves_it_and_holds_next_time(
    project: Path, fake_model_server: Any
) -> None:
    """Choosing "don't ask again" for ``echo saved-rule …`` writes ``Bash(echo saved-rule:*)`` to
    ``.claude/settings.local.json`` (its other keys kept); ``caliban -c`` and a new session
    run the command without asking. The folder is trusted, as Claude Code's always is
    (in one that is not, a project's allow rules wait for trust: test_saved_rules)."""
    trust(project)
    (project / ".claude").mkdir()
    (project / ".claude/settings.local.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}, "model": "claude-sonnet-4-5"})
    )
    fake_model_server.add(
        tool_step("Running.", "Bash", {"command": "echo saved-rule one"}),
        {"text": "Ran once."},
        tool_step("Again.", "Bash", {"command": "echo saved-rule two"}),
        {"text": "Ran twice."},
        tool_step("Once more.", "Bash", {"command": "echo saved-rule three"}),
        {"text": "Ran three times."},
    )
    child = spawn(project, fake_model_server)
    try:
        choose_second(
            child, "run it", r"don't ask again for Bash\(echo saved-rule:\*\) in this project"
        )
        child.expect(r"saved to \.claude/settings\.local\.json")
        child.expect("Ran once.")
        expect_prompt(child)
        leave(child)
    finally:
        child.close(force=True)
    saved = json.loads((project / ".claude/settings.local.json").read_text())
    assert saved == {
        "permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(echo saved-rule:*)"]},
        "model": "claude-sonnet-4-5",
    }
    for args, done in ((("-c",), "Ran twice."), ((), "Ran three times.")):
        child = spawn(project, fake_model_server, args=args)
        try:
            expect_prompt(child)
            child.send("run it again\r")
            assert child.expect([QUESTION, done]) == 1, f"asked again with {args}"
            expect_prompt(child)
            leave(child)
        finally:
            child.close(force=True)
    assert "saved-rule three" in json.dumps(tool_results(fake_model_server.bodies[-1]))


def test_a_compound_line_saves_a_rule_per_command_and_runs_next_time(
    project: Path, fake_model_server: Any
) -> None:
    """``echo one-a && echo two-b | cat`` offers a rule per command, named in the option, as
    Claude Code 2.1.197 does (approval_dialog_compound.txt), and saves them all: the same
    line runs without asking afterwards. A line with a destructive part offers it exactly."""
    trust(project)
    fake_model_server.add(
        tool_step("Running.", "Bash", {"command": "echo one-a && echo two-b | cat"}),
        {"text": "Ran once."},
        tool_step("Again.", "Bash", {"command": "echo one-a x && echo two-b y | cat"}),
        {"text": "Ran twice."},
        tool_step("Clean.", "Bash", {"command": "echo one-a && rm -rf build"}),
        {"text": "Cleaned."},
    )
    child = spawn(project, fake_model_server)
    try:
        choose_second(
            child,
            "run it",
            r"don't ask again for Bash\(echo one-a:\*\), Bash\(echo two-b:\*\), and "
            r"Bash\(cat:\*\) in this project",
        )
        child.expect("Ran once.")
        expect_prompt(child)
        child.send("run it again\r")
        assert child.expect([QUESTION, "Ran twice."]) == 1, "asked again"
        expect_prompt(child)
        child.send("clean\r")
        child.expect(QUESTION)
        child.expect(r"don't ask again for Bash\(rm -rf build\) in this project")
        answer(child, "1")
        child.expect("Cleaned.")
        expect_prompt(child)
        leave(child)
    finally:
        child.close(force=True)
    saved = json.loads((project / ".claude/settings.local.json").read_text())
    assert saved == {
        "permissions": {"allow": ["Bash(echo one-a:*)", "Bash(echo two-b:*)", "Bash(cat:*)"]}
    }


def test_ctrl_d_the_moment_an_answer_ends_leaves(project: Path, fake_model_server: Any) -> None:
    """Pressed as soon as the answer is on the screen, Ctrl-D reached the turn's key reader
    (or the terminal between the turn and the prompt) and was lost: caliban stayed."""
    fake_model_server.add({"text": "The whole answer."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("answer me\r")
        child.expect("The whole answer.")
        leave(child)
    finally:
        child.close(force=True)
