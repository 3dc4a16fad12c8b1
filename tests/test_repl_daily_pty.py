"""What a Claude Code user does every day, through the real ``caliban`` in a pseudo-terminal
against the fake model server (issue 27): typing ahead while the model works, a message
queued for the end of the turn, Esc at a question, Claude Code's keys, ``@file`` and
``@image``, ``--resume`` with a typo, session lists, ``/compact``, the exit hint, the
prompt history's home and mode, the commands (``/export``, ``/vim``, ``/status``, …), the
status line, worktrees.

A step can be *gated*: the server takes the request, then waits before answering, so the
test types while the model is "thinking" (every wait is on an event or on the screen).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_repl_daily import git, make_repository
from test_repl_pty import CALIBAN, DOWN, SELECTION_MOVED, WAIT, Screen, answer, expect_prompt, spawn

from caliban.permissions.trust import trust

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201a5e1f1c30000000049454e44ae426082"
)
"""A 1×1 PNG."""


class Gate:
    """A step the server answers only once the test opens the gate."""

    def __init__(self, step: Mapping[str, Any]) -> None:
        self.step = step
        self.arrived = threading.Event()
        self.open = threading.Event()

    def __call__(self, request: Any) -> Mapping[str, Any]:
        self.arrived.set()
        self.open.wait(WAIT)
        return self.step

    def wait_arrived(self) -> None:
        assert self.arrived.wait(WAIT), "the request never came"


def last_user_text(body: Mapping[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if block["type"] == "text")


def finish(child: Any) -> None:
    child.sendcontrol("d")
    child.expect(pexpect.EOF)


def run_p(project: Path, server: Any, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": server.url,
        **env,
    }
    return subprocess.run(
        [str(CALIBAN), *args],
        cwd=project,
        env=full,
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        stdin=subprocess.DEVNULL,
    )


# ---------------------------------------------------------------------------- item 1


def test_keys_typed_while_the_model_thinks_never_answer_the_question(
    project: Path, fake_model_server: Any
) -> None:
    """`ya1 also add tests` typed ahead holds every answer key (y, a, 1); the question
    that comes next stays open (Down still moves its selection) and the command has not run;
    what was typed waits in the next prompt."""
    marker = project / "ran"
    thinking = Gate({"tool_calls": [{"name": "Bash", "arguments": {"command": f"touch {marker}"}}]})
    fake_model_server.add(thinking, {"text": "Refused, fine."}, {"text": "Tests added."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("make a marker\r")
        thinking.wait_arrived()
        child.send("ya1 also add tests")
        child.expect("ya1 also add tests")  # the draft, shown under the spinner
        thinking.open.set()
        child.expect("Do you want to proceed?")
        for _ in range(WAIT * 4):  # the question reads keys from now on: Down moves the selection
            child.send(DOWN)
            if child.expect([SELECTION_MOVED, pexpect.TIMEOUT], timeout=0.25) == 0:
                break
        assert not marker.exists()
        child.send("3")
        child.expect("What should caliban do instead")
        child.send("\r")
        child.expect("Refused, fine.")
        child.expect(r"> ya1 also add tests")  # back in the input line, not lost
        child.send("\r")
        child.expect("Tests added.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    assert not marker.exists()
    assert last_user_text(fake_model_server.bodies[-1]) == "ya1 also add tests"


# ---------------------------------------------------------------------------- item 8


def test_a_message_sent_while_the_model_works_is_queued_for_the_end_of_the_turn(
    project: Path, fake_model_server: Any
) -> None:
    working = Gate({"text": "First answer."})
    fake_model_server.add(working, {"text": "Both queued, answered."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("start\r")
        working.wait_arrived()
        child.send("queued one\r")
        child.expect("❯ queued one")
        child.send("queued two\r")
        child.expect("❯ queued two")
        child.expect(r"sent when this answer ends")
        working.open.set()
        child.expect("First answer.")
        child.expect("Both queued, answered.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    first, second = fake_model_server.bodies
    assert last_user_text(first) == "start"
    assert last_user_text(second) == "queued one\n\nqueued two"


# ---------------------------------------------------------------------------- item 9


def test_esc_at_a_question_refuses_and_interrupts_without_a_second_question(
    project: Path, fake_model_server: Any
) -> None:
    marker = project / "ran"
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": f"touch {marker}"}}]},
        {"text": "Doing something else."},
    )
    child = spawn(project, fake_model_server)
    seen = child.logfile_read
    try:
        expect_prompt(child)
        child.send("make a marker\r")
        child.expect("Do you want to proceed?")
        answer(child, "\x1b")
        child.expect("Refused; interrupting.")
        child.expect("Interrupted · what should caliban do instead?")
        expect_prompt(child)
        assert "(Enter to just refuse)" not in seen.getvalue()  # no second question
        child.send("do something else\r")
        child.expect("Doing something else.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    assert not marker.exists()
    assert "do something else" in last_user_text(fake_model_server.bodies[-1])


def test_claude_code_keys_stash_edit_todos_model_and_suspend(
    project: Path, fake_model_server: Any, tmp_path: Path
) -> None:
    """Ctrl-S stashes the line (back after the next prompt), Ctrl-G edits it in $EDITOR,
    Ctrl-T shows the todo list, Alt-P switches the model."""
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "written in the editor" > "$1"\n')
    editor.chmod(0o755)
    fake_model_server.add({"text": "Other answered."}, {"text": "Editor answered."})
    child = spawn(project, fake_model_server, EDITOR=str(editor), VISUAL="")
    try:
        expect_prompt(child)
        child.send("draft to keep")
        child.expect("draft to keep")
        child.sendcontrol("s")
        child.expect("stashed")
        child.send("other question\r")
        child.expect("Other answered.")
        child.expect("draft to keep")  # restored after the prompt was sent
        child.sendcontrol("g")
        child.expect("in the editor")  # redrawn where it changed: "draft to keep" → "w…itten …"
        child.send("\r")
        child.expect("Editor answered.")
        expect_prompt(child)
        child.sendcontrol("t")
        child.expect("No todo list in this conversation yet")
        child.send("\x1bp")  # Alt-P
        child.expect("Switch the model")
        child.send("2")
        child.expect(r"Model: \S+ → ")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    sent = [last_user_text(body) for body in fake_model_server.bodies]
    assert sent == ["other question", "written in the editor"]


def test_ctrl_z_suspends_to_the_shell_and_fg_brings_it_back(
    project: Path, fake_model_server: Any
) -> None:
    """Under a shell with job control (a process group nobody controls ignores a stop)."""
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": fake_model_server.url,
        "TERM": "xterm-256color",
        "PS1": "shell$ ",
    }
    fake_model_server.add({"text": "Back again."})
    shell = pexpect.spawn(
        "bash", ["--norc", "--noprofile", "-i"], cwd=str(project), env=env, encoding="utf-8"
    )
    shell.logfile_read = Screen(shell)
    try:
        shell.expect("shell\\$ ", timeout=WAIT)
        shell.send(f"{CALIBAN}\r")
        expect_prompt(shell)
        shell.sendcontrol("z")
        shell.expect("Stopped", timeout=WAIT)
        shell.expect("shell\\$ ", timeout=WAIT)
        shell.send("fg\r")
        shell.send("still here?\r")
        shell.expect("Back again.", timeout=WAIT)
        expect_prompt(shell)
        shell.sendcontrol("d")
        shell.expect("shell\\$ ", timeout=WAIT)
        shell.send("exit\r")
        shell.expect(pexpect.EOF, timeout=WAIT)
    finally:
        shell.close(force=True)


def test_ctrl_v_pastes_the_clipboard_image_or_says_why_not(
    project: Path, fake_model_server: Any, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_model_server.add({"text": "A tiny image."})
    path = f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin"
    child = spawn(project, fake_model_server, PATH=path, WAYLAND_DISPLAY="")
    try:
        expect_prompt(child)
        if not any((Path(d) / "xclip").exists() for d in ("/usr/bin", "/bin")):
            child.sendcontrol("v")
            child.expect("no clipboard tool found to paste an image")
        image = tmp_path / "clip.png"
        image.write_bytes(PNG)
        xclip = bin_dir / "xclip"
        xclip.write_text(
            "#!/bin/sh\n"
            f'case "$*" in *TARGETS*) echo image/png ;; *image/png*) cat {image} ;; esac\n'
        )
        xclip.chmod(0o755)
        child.send("what is in ")
        child.sendcontrol("v")
        child.expect(r"\[Image #1\]")
        child.send("\r")
        child.expect("A tiny image.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    [text, image] = fake_model_server.bodies[-1]["messages"][-1]["content"]
    assert text["text"] == "what is in [Image #1]"
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"


# ---------------------------------------------------------------------------- item 2 + images


def test_an_at_mention_counts_as_a_read_and_an_image_is_sent_as_one(
    project: Path, fake_model_server: Any
) -> None:
    (project / "hello.py").write_text("print('hello')\n")
    (project / "shot.png").write_bytes(PNG)
    edit = {"file_path": "hello.py", "old_string": "'hello'", "new_string": "'hello, world'"}
    fake_model_server.add(
        {"tool_calls": [{"name": "Edit", "arguments": edit}]},
        {"text": "Friendlier now."},
        {"text": "A one-pixel image."},
    )
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("make @hello.py friendlier\r")
        child.expect("Attached @hello.py")
        child.expect("Do you want to proceed?")
        answer(child, "1")
        child.expect("Updated hello.py")  # not "has not been read"
        child.expect("Friendlier now.")
        expect_prompt(child)
        child.send("what is @shot.png\r")
        child.expect(r"Attached @shot.png \(PNG image")
        child.expect("A one-pixel image.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    assert (project / "hello.py").read_text() == "print('hello, world')\n"
    content = fake_model_server.bodies[-1]["messages"][-1]["content"]
    [image] = [block for block in content if block["type"] == "image"]
    assert image["source"]["media_type"] == "image/png"


# ---------------------------------------------------------------------------- item 5


def test_resume_with_a_mistyped_id_says_so_instead_of_starting_a_session(
    project: Path, fake_model_server: Any
) -> None:
    fake_model_server.add({"text": "Saved."})
    done = run_p(project, fake_model_server, "-p", "remember this")
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_model_server.url}
    child = pexpect.spawn(
        str(CALIBAN), ["--resume", "typo"], cwd=str(project), env=env, encoding="utf-8"
    )
    try:
        child.expect("no session 'typo' in this project", timeout=WAIT)
        child.expect("remember this", timeout=WAIT)  # the recent sessions, named
        child.expect(pexpect.EOF, timeout=WAIT)
    finally:
        child.close(force=True)
    assert child.exitstatus == 2
    headless = run_p(project, fake_model_server, "-p", "--resume", "nosuch", "hi")
    assert headless.returncode == 2
    assert "no session 'nosuch' in this project" in headless.stderr
    assert len(fake_model_server.bodies) == 1  # neither made a request


# ---------------------------------------------------------------------------- item 6


def test_session_lists_show_what_the_user_typed(project: Path, fake_model_server: Any) -> None:
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("Review $ARGUMENTS carefully.\n")
    fake_model_server.add({"text": "Reviewed."}, {"text": "Listed."})
    done = run_p(project, fake_model_server, "-p", "/review the parser")
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [str(CALIBAN), "sessions", "list"], cwd=project, capture_output=True, text=True
    )
    assert "/review the parser" in listed.stdout, listed.stdout
    assert "command-message" not in listed.stdout and "carefully" not in listed.stdout
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("/resume\r")
        child.expect(r"1\. \S+ .*/review the parser")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)


# ---------------------------------------------------------------------------- item 7


def test_compact_replaces_the_history_with_its_summary(
    project: Path, fake_model_server: Any
) -> None:
    long_answer = "The build has three stages, each writes a log and a report. " * 60
    fake_model_server.add(
        {"text": long_answer},
        {"text": "<summary>The user asked about the build; it has three stages.</summary>"},
        {"text": "Still with you."},
    )
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("explain the build\r")
        child.expect("three stages")
        expect_prompt(child)
        child.send("/compact\r")
        child.expect(r"Conversation compacted \(manual\): about ([\d.]+k?) → ([\d.]+k?)")
        before, after = (
            float(n.removesuffix("k")) * (1000 if n.endswith("k") else 1)
            for n in child.match.groups()
        )
        assert after < before
        child.expect("the summary replaces it")
        expect_prompt(child)
        child.send("and now?\r")
        child.expect("Still with you.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    [message] = fake_model_server.bodies[-1]["messages"]  # one user turn: summary, prompt
    summary, prompt = message["content"]
    assert "three stages" in summary["text"] and prompt["text"] == "and now?"
    assert long_answer not in json.dumps(message)


# ---------------------------------------------------------------------------- item 11


def test_exit_names_the_resume_command_and_the_history_is_private_per_project(
    project: Path, fake_model_server: Any, isolated_dirs: Path
) -> None:
    fake_model_server.add({"text": "Noted."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("remember the plan\r")
        child.expect("Noted.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect("Resume this session with:")
        child.expect(r"caliban --resume ([0-9a-f-]{36})")
        session_id = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    listed = subprocess.run(
        [str(CALIBAN), "sessions", "list", "--json"], cwd=project, capture_output=True, text=True
    )
    assert session_id in listed.stdout
    [history] = (isolated_dirs / "state" / "prompt-history").iterdir()
    assert "remember the plan" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_doctor_and_update_are_commands_not_prompts(project: Path, tmp_path: Path) -> None:
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"docs": {"command": "npx", "args": ["-y", "docs-mcp"]}}})
    )
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"}
    env.pop("ANTHROPIC_API_KEY", None)
    doctor = subprocess.run(
        [str(CALIBAN), "doctor"], cwd=project, env=env, capture_output=True, text=True
    )
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr  # no key: a failure
    assert "✓ install: caliban" in doctor.stdout
    assert "keys: no model provider is configured" in doctor.stdout
    assert "is not trusted" in doctor.stdout and "caliban trust" in doctor.stdout
    update = subprocess.run([str(CALIBAN), "update"], cwd=project, capture_output=True, text=True)
    assert update.returncode == 0 and "To update it:" in update.stdout


# ---------------------------------------------------------------------------- commands


def test_init_asks_the_model_to_write_the_memory_file(
    project: Path, fake_model_server: Any
) -> None:
    write = {"file_path": "CLAUDE.md", "content": "# CLAUDE.md\n\nRun make test.\n"}
    fake_model_server.add(
        {"tool_calls": [{"name": "Write", "arguments": write}]}, {"text": "Wrote CLAUDE.md."}
    )
    done = run_p(project, fake_model_server, "-p", "/init", "--allowedTools", "Write")
    assert done.returncode == 0, done.stderr
    assert (project / "CLAUDE.md").read_text().startswith("# CLAUDE.md")
    asked = last_user_text(fake_model_server.bodies[0])
    assert "<command-name>/init</command-name>" in asked
    assert f"write CLAUDE.md at its root ({project.resolve() / 'CLAUDE.md'})" in asked.replace(
        "\n", " "
    )


def test_export_status_vim_and_the_status_line(
    project: Path, fake_model_server: Any, isolated_dirs: Path, tmp_path: Path
) -> None:
    script = tmp_path / "status.sh"
    seen = tmp_path / "status-input.json"
    script.write_text(f"#!/bin/sh\ncat > {seen}\nprintf '\\033[32mSTATUS-OK\\033[0m line'\n")
    script.chmod(0o755)
    claude = isolated_dirs / "claude"
    claude.mkdir(parents=True, exist_ok=True)
    (claude / "settings.json").write_text(
        json.dumps({"statusLine": {"type": "command", "command": str(script)}})
    )
    fake_model_server.add({"text": "An answer to export."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.expect("STATUS-OK")  # the command's line, above the toolbar
        child.send("something to export\r")
        child.expect("An answer to export.")
        expect_prompt(child)
        child.send("/export notes/chat.txt\r")
        child.expect("Conversation exported to")
        expect_prompt(child)
        child.send("/status\r")
        child.expect("Session ID")
        child.expect("API key")
        child.expect(r"\$ANTHROPIC_API_KEY")
        expect_prompt(child)
        child.send("/vim\r")
        child.expect("Vi keys on")
        child.expect("-- INSERT --")
        child.send("\x1b")
        child.expect("NORMAL")  # the toolbar is redrawn where it changed: "-- INSERT --" → "NORMAL"
        child.send("i/vim\r")
        child.expect("Emacs keys on")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    exported = (project / "notes" / "chat.txt").read_text()
    assert "> something to export" in exported and "● An answer to export." in exported
    status_input = json.loads(seen.read_text())
    assert {"session_id", "cwd", "model", "workspace", "cost", "context_window"} <= set(
        status_input
    )


def test_trust_from_inside_starts_the_project_s_servers(
    project: Path, fake_model_server: Any
) -> None:
    server = Path(__file__).parent / "mcp_servers" / "catalog_server.py"
    (project / ".git").mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"catalog": {"command": sys.executable, "args": [str(server)]}}})
    )
    child = spawn(project, fake_model_server)
    try:
        child.expect("Do you trust the files")
        answer(child, "2")  # not yet
        expect_prompt(child)
        child.send("/mcp\r")
        child.expect("No MCP servers in this session")
        expect_prompt(child)
        child.send("/trust\r")
        child.expect("Trusted")
        child.expect("Reopening the session")
        expect_prompt(child)
        child.send("/mcp\r")
        child.expect("transport")
        child.expect("stdio")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)


# ---------------------------------------------------------------------------- worktrees


def test_worktree_runs_bash_in_the_new_worktree_and_goes_when_unchanged(
    project: Path, fake_model_server: Any
) -> None:
    make_repository(project)
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "pwd; cat .env"}}]},
        {"text": "Done."},
    )
    done = run_p(
        project, fake_model_server, "-p", "-w", "feat", "where am I?", "--allowedTools", "Bash"
    )
    assert done.returncode == 0, done.stderr
    result = json.dumps(fake_model_server.bodies[-1]["messages"][-1])
    worktree = project.resolve() / ".claude" / "worktrees" / "feat"
    assert str(worktree) in result and "TOKEN=local" in result
    assert not worktree.exists()  # nothing changed there: removed with its branch
    assert "worktree-feat" not in git(project, "branch")


def test_worktree_with_changes_asks_to_keep_or_remove_on_exit(
    project: Path, fake_model_server: Any
) -> None:
    make_repository(project)
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo more >> app.py"}}]},
        {"text": "Changed."},
    )
    child = spawn(project, fake_model_server, args=("-w", "feat"))
    worktree = project.resolve() / ".claude" / "worktrees" / "feat"
    try:
        child.expect("worktree-feat")
        expect_prompt(child)
        child.send("change the app\r")
        child.expect("Do you want to proceed?")  # a redirection writes: it asks
        answer(child, "1")
        child.expect("Changed.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect("1 uncommitted file")
        answer(child, "1")  # keep
        child.expect("Worktree kept")
        child.expect(re.escape(f"cd {worktree} && caliban --resume"))
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert "more" in (worktree / "app.py").read_text()
    assert "more" not in (project / "app.py").read_text()
    assert "worktree-feat" in git(project, "branch")
    assert ".claude/worktrees" not in git(project, "status", "--porcelain")


def test_stream_json_input_takes_image_blocks(project: Path, fake_model_server: Any) -> None:
    import base64

    fake_model_server.add({"text": "One pixel."})
    line = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": base64.b64encode(PNG).decode(),
                    },
                },
            ],
        },
    }
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_model_server.url}
    done = subprocess.run(
        [
            str(CALIBAN),
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ],
        cwd=project,
        env=env,
        input=json.dumps(line) + "\n",
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
    )
    assert done.returncode == 0, done.stderr
    [_text, image] = fake_model_server.bodies[-1]["messages"][-1]["content"]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"


# ---------------------------------------------------------------------------- item 10


WEATHER_CATALOG = {
    "server": "weather",
    "tools": [
        {
            "name": "get_weather",
            "description": "Current weather for a city: temperature, wind and rain.",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {
            "name": "convert_currency",
            "description": "Convert an amount of money from one currency to another.",
            "inputSchema": {"type": "object", "properties": {"amount": {"type": "number"}}},
        },
        {
            "name": "translate_text",
            "description": "Translate a text into another language.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    ],
}


def test_pre_activation_shows_a_tool_it_loaded_only_when_the_model_uses_it(
    project: Path, fake_model_server: Any, tmp_path: Path
) -> None:
    catalog = tmp_path / "weather.json"
    catalog.write_text(json.dumps(WEATHER_CATALOG))
    server = Path(__file__).parent / "mcp_servers" / "catalog_server.py"
    config = {
        "mcpServers": {
            "weather": {"command": sys.executable, "args": [str(server), "--catalog", str(catalog)]}
        }
    }
    trust(project)  # lazy loading is the user's choice: a project's config sets it if trusted
    (project / ".caliban" / "config.toml").write_text("[tools]\nlazy_mcp = true\npreactivate = 3\n")
    tool = "mcp__weather__get_weather"
    fake_model_server.add(
        {"text": "I would need a city."},  # whatever was loaded for this prompt goes unused
        {"tool_calls": [{"name": tool, "arguments": {"city": "Paris"}}]},
        {"text": "Sunny in Paris."},
    )
    child = spawn(project, fake_model_server, args=("--mcp-config", json.dumps(config)))
    try:
        expect_prompt(child)
        for _ in range(WAIT):  # pre-activation uses the tools known when the prompt is sent
            child.send("/mcp\r")
            connected = child.expect([r"connected", r"connecting|starting"], timeout=WAIT) == 0
            expect_prompt(child)  # a /mcp sent before this one ended would be typed ahead
            if connected:
                break
            child.expect(["servers 1/1", pexpect.TIMEOUT], timeout=1)  # poll, not too often
        child.send("the weather in Paris, please\r")
        child.expect("I would need a city.")
        expect_prompt(child)
        assert "MCP tool" not in child.before  # loaded or not, unused: nothing to say
        child.send("the weather in Paris, please\r")
        child.expect(f"MCP tool loaded for your prompt: {tool}")
        child.expect("Do you want to proceed?")
        answer(child, "1")
        child.expect("Sunny in Paris.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    calling = fake_model_server.bodies[1]
    assert tool in json.dumps(calling["tools"])  # loaded for the prompt, before the model


# ---------------------------------------------------------------------------- notifications


def test_a_question_or_an_answer_rings_when_the_terminal_is_not_focused(
    project: Path, fake_model_server: Any
) -> None:
    """Focus reports are asked for (DEC 1004); after ``ESC [ O`` (focus lost) a question and
    the end of a turn ring: OSC 9 in a terminal that shows it (iTerm2 here), else the bell."""
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "true"}}]},
        {"text": "Finished."},
        {"text": "Seen."},
    )
    child = spawn(project, fake_model_server, TERM_PROGRAM="iTerm.app")
    screen = child.logfile_read
    try:
        expect_prompt(child)
        assert "\x1b[?1004h" in screen.getvalue()
        child.send("\x1b[O")  # the user switched to another window
        child.send("run it\r")
        child.expect("Do you want to proceed?")
        child.expect("\x1b]9;caliban: a question is waiting\x07")
        answer(child, "1")
        child.expect("Finished.")
        child.expect("\x1b]9;caliban: the answer is ready\x07")
        expect_prompt(child)
        child.send("\x1b[I")  # back: nothing rings any more
        child.send("again\r")
        child.expect("Seen.")
        expect_prompt(child)
        finish(child)
    finally:
        child.close(force=True)
    assert screen.getvalue().count("\x1b]9;") == 2
    assert "\x1b[?1004l" in screen.getvalue()  # focus reports off again on the way out
