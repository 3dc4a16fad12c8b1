"""The real ``caliban`` executable in a pseudo-terminal, against the fake model server.

What a user does in a terminal: type a prompt and see the streamed answer, approve a
command, run ``/context``, interrupt a long answer with Ctrl-C and carry on, leave with
Ctrl-D.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from hang import HANG_S

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

CALIBAN = Path(sys.executable).parent / "caliban"
WAIT = int(HANG_S)  # seconds (also a count of one-second tries)


class Caliban(pexpect.spawn):  # type: ignore[misc, name-defined]
    """caliban in a pseudo-terminal; one that does not end when awaited is made to say
    where each of its threads is (``PYTHONFAULTHANDLER``: SIGABRT dumps their stacks), and
    the timeout names it: a hang at exit is diagnosed the first time it happens."""

    def __init__(self, *args: Any, env: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, env={**(env or os.environ), "PYTHONFAULTHANDLER": "1"}, **kwargs)

    def expect(self, pattern: Any, *args: Any, **kwargs: Any) -> int:
        try:
            return int(super().expect(pattern, *args, **kwargs))
        except pexpect.TIMEOUT:
            if pattern is not pexpect.EOF or not self.isalive():
                raise
            self.kill(signal.SIGABRT)
            with contextlib.suppress(pexpect.TIMEOUT, pexpect.EOF):
                super().expect(pexpect.EOF, timeout=30)
            raise pexpect.TIMEOUT(f"caliban did not exit; its threads:\n{self.before}") from None


class Screen(io.StringIO):
    """Everything caliban wrote, kept as the child's ``logfile_read``; it also answers the
    cursor position requests (``ESC [ 6 n``) a real terminal answers. Without an answer
    prompt-toolkit cannot tell how much room is below the prompt and draws no toolbar."""

    def __init__(self, child: Any) -> None:
        super().__init__()
        self.child = child

    def write(self, text: str) -> int:
        for _ in range(text.count("\x1b[6n")):
            self.child.send("\x1b[1;1R")
        return super().write(text)


def spawn(
    project: Path,
    server: Any,
    dimensions: tuple[int, int] = (40, 120),
    args: tuple[str, ...] = (),
    **extra_env: str,
) -> Any:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": server.url,
        "TERM": "xterm-256color",
        **extra_env,
    }
    child = Caliban(
        str(CALIBAN),
        list(args),
        cwd=str(project),
        env=env,
        dimensions=dimensions,
        encoding="utf-8",
        timeout=WAIT,
    )
    child.logfile_read = Screen(child)
    return child


def expect_prompt(child: Any) -> None:
    child.expect("─{20}")  # the rule above the input line
    child.expect(">")


DOWN = "\x1b[B"
SELECTION_MOVED = r"❯ [23]\."


def answer(child: Any, key: str) -> None:
    """Answer the question on the screen once it reads keys, with ``key``.

    A key that reaches caliban in the instant a question is drawn counts as typed ahead,
    not as an answer (issue 27: keys typed while the model worked answered a question the
    user never saw). So Down is pressed until the selection visibly moves (to option 2, or
    3 when two presses are drawn at once), then ``key`` is sent (a number picks its option
    wherever the selection is). The first press usually comes too early: it is pressed
    again every quarter second, not every second."""
    for _ in range(WAIT * 4):
        child.send(DOWN)
        if child.expect([SELECTION_MOVED, pexpect.TIMEOUT], timeout=0.25) == 0:
            child.send(key)
            return
    raise AssertionError("the question never read a key")


def test_a_session_in_a_terminal(project: Path, fake_model_server: Any) -> None:
    (project / ".git").mkdir()
    fake_model_server.add(
        {"text": "Hello from the fake model.", "chunk_delay": 0.01},
        {
            "text": "Running it.",
            "tool_calls": [{"name": "Bash", "arguments": {"command": "echo pty-ok"}}],
        },
        {"text": "It printed pty-ok."},
        {"hang": True, "text": "Once upon a time"},
        {"text": "Carrying on."},
    )
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)

        child.send("say hello\r")
        child.expect("Hello from the fake model.")
        expect_prompt(child)

        child.send("run echo\r")
        child.expect("Do you want to proceed?")
        answer(child, "1")
        child.expect("pty-ok")
        child.expect("It printed pty-ok.")
        expect_prompt(child)

        child.send("/context\r")
        child.expect("Free space")
        expect_prompt(child)

        child.send("tell me a long story\r")
        child.expect("Once upon a time")
        child.sendintr()  # Ctrl-C: SIGINT, the terminal keeps its signal keys during a turn
        child.expect("Interrupted")
        expect_prompt(child)

        child.send("go on\r")
        child.expect("Carrying on.")
        expect_prompt(child)

        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    history = fake_model_server.bodies[-1]["messages"]
    assert "Once upon a time" in json.dumps(history[-2])  # the interrupted answer is kept
    assert "go on" in json.dumps(history[-1])


def test_esc_interrupts_and_bang_runs_a_command(project: Path, fake_model_server: Any) -> None:
    fake_model_server.add({"hang": True, "text": "A very long answer"}, {"text": "Seen it."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("tell me everything\r")
        child.expect("A very long answer")
        child.send("\x1b")  # Esc: the terminal is non-canonical during a turn
        child.expect("Interrupted")
        expect_prompt(child)

        child.send("!echo from-$((40+2))\r")
        child.expect("from-42")
        expect_prompt(child)

        child.send("what did it print?\r")
        child.expect("Seen it.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    history = json.dumps(fake_model_server.bodies[-1]["messages"])
    assert "<bash-stdout>from-42</bash-stdout>" in history


def test_without_a_terminal_caliban_says_to_use_p(project: Path) -> None:
    import subprocess

    result = subprocess.run(
        [str(CALIBAN)],
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert result.returncode == 2
    assert "caliban -p" in result.stderr


def test_first_question_while_the_mcp_server_starts(project: Path, fake_model_server: Any) -> None:
    """Typed as soon as the prompt appears, before the server has listed its tools (none are
    cached yet): ToolSearch waits for it, finds the tool, the model calls it, and /context
    shows it active."""
    gate = project / "gate"
    server = Path(__file__).parent / "mcp_servers" / "catalog_server.py"
    (project / ".git").mkdir()
    (project / ".caliban" / "config.toml").write_text("[tools]\nlazy_mcp = true\n")
    (project / ".caliban" / "mcp.toml").write_text(
        "[server.catalog]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(server))}]\n"
        f"env = {{ CATALOG_GATE = {json.dumps(str(gate))} }}\n"
    )
    issue = "mcp__catalog__search_issues"
    fake_model_server.add(
        {"tool_calls": [{"name": "ToolSearch", "arguments": {"query": "search issues by text"}}]},
        {"tool_calls": [{"name": issue, "arguments": {"query": "assignee:me"}}]},
        {"text": "You have one open issue."},
    )
    # wide enough that the trust question's file lines never wrap, however long the temporary
    # folder's path (xdist's are longer)
    child = spawn(project, fake_model_server, dimensions=(40, 300))
    try:
        # A project's mcp.toml starts servers only in a trusted folder: caliban asks first.
        child.expect(f"Do you trust the files in {project.resolve()}")
        child.expect("MCP server catalog")
        answer(child, "1")
        child.expect("Trusted")
        expect_prompt(child)
        child.send("find my issues\r")
        child.expect("waiting for catalog…")
        gate.touch()
        child.expect(r"MCP tools activated: [^\r\n]*search_issues")
        child.expect("Do you want to proceed?")  # an MCP tool asks first, in default mode
        answer(child, "1")
        child.expect("You have one open issue.")
        expect_prompt(child)
        child.send("/context\r")
        child.expect(r"MCP active: \d+/24 \([^)]*mcp__catalog__search_issues")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    first, _found, answered = fake_model_server.bodies
    assert "Servers still starting (ToolSearch waits for them): catalog" in json.dumps(
        first["system"]
    )
    result = json.dumps(answered["messages"][-1])
    assert "tool_result" in result and "assignee:me" in result


def test_a_dumb_terminal_still_gets_answers(project: Path, fake_model_server: Any) -> None:
    """TERM=dumb (Emacs shell buffers, some CI consoles): prompt-toolkit falls back to its
    plain prompt; the session still opens and the prompt is answered."""
    fake_model_server.add({"text": "Plain answer."})
    child = spawn(project, fake_model_server, TERM="dumb")
    try:
        child.expect("> ")
        child.send("hello\r")
        child.expect("Plain answer.")
        child.expect("> ")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_an_unwritable_state_dir_loses_only_the_prompt_history(
    project: Path, fake_model_server: Any
) -> None:
    """A read-only home: the prompt history cannot be saved; caliban says so and goes on."""
    fake_model_server.add({"text": "Answered anyway."})
    child = spawn(project, fake_model_server, CALIBAN_STATE_DIR="/dev/null/state")
    try:
        expect_prompt(child)
        child.send("hello\r")
        child.expect("prompt history is not saved:")
        child.expect("/dev/null/state/prompt-history/")
        child.expect("Answered anyway.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_output_redirected_to_a_file_says_to_use_p(project: Path, tmp_path: Path) -> None:
    """`caliban > log.txt` from a terminal: everything would go into the file and the
    terminal would sit blank; caliban says what to do instead."""
    log = tmp_path / "log.txt"
    child = pexpect.spawn(
        "/bin/sh",
        ["-c", f'exec "{CALIBAN}" > "{log}"'],
        cwd=str(project),
        env={**os.environ, "ANTHROPIC_API_KEY": "test", "TERM": "xterm-256color"},
        encoding="utf-8",
        timeout=WAIT,
    )
    try:
        child.expect("stdout is not a terminal")
        child.expect("caliban -p PROMPT > FILE")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 2
    assert log.read_text() == ""


def test_a_mistyped_at_path_is_noted_and_the_rest_attached(
    project: Path, fake_model_server: Any
) -> None:
    (project / "notes.txt").write_text("the real notes\n")
    fake_model_server.add({"text": "Read them."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("compare @note.txt with @notes.txt, ask @alice\r")
        child.expect("Attached @notes.txt")
        child.expect("@note.txt not attached: no such file or directory")
        child.expect("Read them.")
        assert "@alice" not in child.before  # a handle, not a path: no note
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    sent = json.dumps(fake_model_server.bodies[-1]["messages"][-1])
    assert "the real notes" in sent and "compare @note.txt with" in sent


def test_model_takes_claude_code_aliases_and_refuses_two_words(
    project: Path, fake_model_server: Any
) -> None:
    fake_model_server.add({"text": "Opus here."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("/model claude opus\r")
        child.expect("A model name has no spaces")
        expect_prompt(child)
        child.send("/model opus\r")
        child.expect("→ ")
        child.expect("claude-opus-")
        child.expect(r"\(opus\) \(from the next prompt\)")
        expect_prompt(child)
        child.send("hi\r")
        child.expect("Opus here.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    from caliban.claude_code.model_aliases import ANTHROPIC_ALIASES

    assert fake_model_server.bodies[-1]["model"] == ANTHROPIC_ALIASES["opus"]


def test_a_cleared_conversation_can_be_resumed(project: Path, fake_model_server: Any) -> None:
    """/clear starts a new session; the old conversation stays in /resume's list, as in
    Claude Code."""
    fake_model_server.add({"text": "About apples."}, {"text": "About pears."}, {"text": "Back."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("tell me about apples\r")
        child.expect("About apples.")
        expect_prompt(child)
        child.send("/clear\r")
        child.expect("Conversation cleared")
        expect_prompt(child)
        child.send("tell me about pears\r")
        child.expect("About pears.")
        expect_prompt(child)
        child.send("/resume\r")
        child.expect(r"1\. \S+ .*tell me about pears.*\(this session\)")
        child.expect(r"2\. \S+ .*tell me about apples")
        expect_prompt(child)
        child.send("/resume 2\r")
        child.expect("Resumed session")
        expect_prompt(child)
        child.send("and again\r")
        child.expect("Back.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    history = json.dumps(fake_model_server.bodies[-1]["messages"])
    assert "tell me about apples" in history and "About apples." in history
    assert "pears" not in history


def test_a_command_without_arguments_refuses_them_and_keeps_the_conversation(
    project: Path, fake_model_server: Any
) -> None:
    """`/clear extra` is a typo, not a /clear: it says so and clears nothing."""
    fake_model_server.add({"text": "About apples."}, {"text": "Still apples."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("tell me about apples\r")
        child.expect("About apples.")
        expect_prompt(child)
        child.send("/clear extra\r")
        child.expect(r"/clear takes no arguments \(nothing was done\)")
        expect_prompt(child)
        child.send("/cost now\r")
        child.expect("/cost takes no arguments")
        expect_prompt(child)
        child.send("/resume zzzz\r")
        child.expect("no session 'zzzz' in this project")
        child.expect(r"\(see\s+/resume\)")
        expect_prompt(child)
        child.send("and more\r")
        child.expect("Still apples.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    history = json.dumps(fake_model_server.bodies[-1]["messages"])
    assert "tell me about apples" in history and "About apples." in history


def test_ctrl_d_during_an_answer_does_not_end_the_session(
    project: Path, fake_model_server: Any
) -> None:
    fake_model_server.add({"hang": True, "text": "Thinking aloud"}, {"text": "Still here."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("go\r")
        child.expect("Thinking aloud")
        child.sendcontrol("d")  # by habit, while the answer streams
        child.send("\x1b")  # then Esc to stop it
        child.expect("Interrupted")
        expect_prompt(child)
        child.send("are you there?\r")
        child.expect("Still here.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_ctrl_c_at_the_resume_picker_exits(project: Path, fake_model_server: Any) -> None:
    """`caliban --resume` lists the sessions and asks which; Ctrl-C there leaves at once
    (it used to wait for Enter)."""
    import subprocess

    fake_model_server.add({"text": "Saved."})
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_model_server.url}
    done = subprocess.run(
        [str(CALIBAN), "-p", "remember this"], cwd=project, env=env, capture_output=True
    )
    assert done.returncode == 0
    child = Caliban(
        str(CALIBAN), ["--resume"], cwd=str(project), env=env, encoding="utf-8", timeout=WAIT
    )
    try:
        child.expect("remember this")
        child.expect("Resume which session?")
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 130


def test_permission_options_wrap_on_a_narrow_terminal(
    project: Path, fake_model_server: Any
) -> None:
    """40 columns: each option is read to its end (it used to be cut at the edge)."""
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo narrow"}}]},
        {"text": "Done."},
    )
    child = spawn(project, fake_model_server, dimensions=(24, 40))
    try:
        expect_prompt(child)
        child.send("run it\r")
        child.expect("Do you want to proceed?")
        child.expect("fferently")  # the end of option 3, on its own row
        child.expect("Esc to refuse and interrupt")
        answer(child, "1")
        child.expect("Done.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_a_long_paste_is_collapsed_in_the_input_and_sent_whole(
    project: Path, fake_model_server: Any
) -> None:
    log = "\n".join(f"error {n}: disk full" for n in range(300))
    fake_model_server.add({"text": "The disk is full."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("why? ")
        child.send(f"\x1b[200~{log}\x1b[201~")  # bracketed paste, as a terminal sends it
        child.expect(r"\[Pasted text #1 \+300 lines\]")
        child.send("\r")
        child.expect("The disk is full.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    [sent] = fake_model_server.bodies[-1]["messages"][-1]["content"]
    assert sent["text"] == f"why? {log}"


def test_ctrl_c_during_compact_cancels_it_not_the_session(
    project: Path, fake_model_server: Any
) -> None:
    fake_model_server.add(
        {"text": "First answer."},
        {"hang": True, "text": "Summary so f"},  # the summary request, never finished
        {"text": "Still here."},
    )
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("hello\r")
        child.expect("First answer.")
        expect_prompt(child)
        child.send("/compact\r")
        child.expect("Compacting the conversation")
        child.sendintr()
        child.expect("Interrupted: compact")
        expect_prompt(child)
        child.send("go on\r")
        child.expect("Still here.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    history = fake_model_server.bodies[-1]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]  # not compacted
    assert "First answer." in json.dumps(history)


def test_trust_that_cannot_be_saved_starts_untrusted(project: Path, fake_model_server: Any) -> None:
    """A read-only state directory: answering Yes to the trust question cannot be remembered;
    caliban says so and starts without the project's servers instead of a traceback."""
    (project / ".git").mkdir()
    (project / ".mcp.json").write_text('{"mcpServers": {"tool": {"command": "true"}}}')
    fake_model_server.add({"text": "Working untrusted."})
    child = spawn(project, fake_model_server, CALIBAN_STATE_DIR="/dev/null/state")
    try:
        child.expect("Do you trust the files")
        answer(child, "1")
        child.expect("Could not remember the trust")
        expect_prompt(child)
        child.send("hello\r")
        child.expect("Working untrusted.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_hangup_stops_the_running_command(
    project: Path, fake_model_server: Any, signum: int
) -> None:
    """`kill`, or closing the terminal window, during a long Bash call: the command is
    stopped with caliban (it used to keep running, orphaned) and the transcript says the
    call was interrupted."""
    import subprocess
    import time

    pid_file = project / "pid"
    command = f"echo $$ > {pid_file}; sleep 600"
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]},
        {"text": "Resumed."},
    )
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("start the server\r")
        child.expect("Do you want to proceed?")
        answer(child, "1")
        deadline = time.monotonic() + WAIT
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        shell = int(pid_file.read_text())
        child.kill(signum)
        child.expect(pexpect.EOF)
        child.wait()
    finally:
        child.close(force=True)
    assert child.exitstatus == 128 + signum
    deadline = time.monotonic() + WAIT
    while _running(shell):
        assert time.monotonic() < deadline, "the Bash command outlived caliban"
        time.sleep(0.05)
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_model_server.url}
    resumed = subprocess.run(
        [str(CALIBAN), "-p", "-c", "go on"], cwd=project, env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    result = json.dumps(fake_model_server.bodies[-1]["messages"][-1])
    assert "The user interrupted this tool call" in result


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_tab_completes_a_path_with_spaces_escaped(project: Path, fake_model_server: Any) -> None:
    """`@my<Tab>` inserts `@my\\ notes\\ ü.txt`, which attaches the file (the completion
    used to insert the bare spaces, and the file was not attached)."""
    (project / "my notes ü.txt").write_text("the unicode notes\n")
    fake_model_server.add({"text": "Read."})
    child = spawn(project, fake_model_server)
    try:
        expect_prompt(child)
        child.send("summarise @my")
        child.expect("my notes ü.txt")  # the completion menu
        child.send("\t")
        child.send("\r")  # closes the completion menu
        child.send("\r")  # sends
        child.expect("Attached @my notes ü.txt")
        child.expect("Read.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert "the unicode notes" in json.dumps(
        fake_model_server.bodies[-1]["messages"][-1], ensure_ascii=False
    )


def test_a_model_s_escape_sequences_are_shown_not_sent_to_the_terminal(
    project: Path, fake_model_server: Any
) -> None:
    """A hostile file can steer the model into echoing bytes that drive the terminal: OSC 52
    writes the clipboard in many terminals, SGR 8 hides what follows. The REPL shows them."""
    hostile = "copy \x1b]52;c;ZXZpbA==\x07 done \x1b[8mhidden\x1b[0m"
    todos = [{"content": f"plan {hostile}", "status": "pending", "activeForm": "Planning"}]
    fake_model_server.add(
        {"text": "Planning.", "tool_calls": [{"name": "TodoWrite", "arguments": {"todos": todos}}]},
        {"text": f"Answer: {hostile} end.", "chunk_delay": 0.02},
    )
    child = spawn(project, fake_model_server)
    seen = child.logfile_read
    try:
        expect_prompt(child)
        child.send("summarise the file\r")
        child.expect_exact("plan copy \\x1b]52;c;ZXZpbA==\\x07 done \\x1b[8mhidden\\x1b[0m")
        child.expect_exact("Answer: copy \\x1b]52;c;ZXZpbA==\\x07 done \\x1b[8mhidden\\x1b[0m end.")
        expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    output = seen.getvalue()
    assert "\x1b]52" not in output and "\x07" not in output
    assert "\x1b[8mhidden" not in output
