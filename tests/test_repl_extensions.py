"""REPL conveniences: Esc interrupts a turn, ``!command`` runs a shell command into the
conversation, Shift-Tab cycles permission modes; custom commands in /help, completion and at
the prompt. Keys go in through prompt-toolkit's pipe input, as in tests/test_repl.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hang import hang_guard
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from test_repl import CTRL_D, ENTER, harness, wait_until

from caliban.messages import TextPart
from caliban.permissions.approval import PolicyAuthorizer
from caliban.permissions.policy import PermissionPolicy
from caliban.providers.scripted import HANG, reply, tool_call
from caliban.repl.complete import ReplCompleter
from caliban.repl.toolbar import toolbar_text
from caliban.skills.catalog import load_catalog

pytestmark = pytest.mark.anyio

ESC = "\x1b"
SHIFT_TAB = "\x1b[Z"


async def test_esc_interrupts_the_turn_and_keeps_what_was_typed(project: Path) -> None:
    async with harness([HANG, "Recovered."], project) as h:
        h.input.send_text("long task" + ENTER)
        task = asyncio.ensure_future(h.repl.run())
        await wait_until(lambda: len(h.provider.requests) == 1)
        h.input.send_text("go on")  # typed while the turn runs: kept for the next prompt
        await asyncio.sleep(0.1)
        h.input.send_text(ESC)
        await wait_until(lambda: "Interrupted" in h.out.getvalue())
        h.input.send_text(ENTER + CTRL_D)
        with hang_guard():
            assert await task == 0
    assert "  ⎿  Interrupted · what should caliban do instead?" in h.lines
    assert h.lines[-1] == "● Recovered."
    assert h.sent(1) == "go on"


async def test_an_arrow_key_during_a_turn_does_not_interrupt(project: Path) -> None:
    gate = asyncio.Event()

    def answer(request: Any) -> str:
        gate.set()
        return "Done."

    async with harness([reply(tool_call("Bash", {"command": "sleep 0.3"})), answer], project) as h:
        h.input.send_text("go" + ENTER)
        task = asyncio.ensure_future(h.repl.run())
        await wait_until(lambda: len(h.provider.requests) == 1)
        h.input.send_text("\x1b[A")  # Up: an escape sequence, not Esc
        with hang_guard():
            await gate.wait()
        await wait_until(lambda: "● Done." in h.lines)
        h.input.send_text(CTRL_D)
        with hang_guard():
            await task
    assert "Interrupted" not in h.text and h.lines[-1] == "● Done."


async def test_bang_runs_a_command_into_the_conversation(project: Path) -> None:
    async with harness(["I see the output."], project) as h:
        await h.run("!echo bang-$((6*7))" + ENTER + "what did it print?" + ENTER + CTRL_D)
        [request] = h.provider.requests  # the command itself made no request
    assert "! echo bang-$((6*7))" in h.lines and "  ⎿  bang-42" in h.lines
    texts = [p.text for m in request.messages for p in m.parts if isinstance(p, TextPart)]
    assert texts == [
        "<bash-input>echo bang-$((6*7))</bash-input>",
        "<bash-stdout>bang-42</bash-stdout>",
        "what did it print?",
    ]


async def test_bang_output_of_a_failing_command_is_kept_too(project: Path) -> None:
    async with harness([], project) as h:
        await h.run("!ls no-such-dir" + ENTER + CTRL_D)
        messages = h.session.conversation.messages
    assert "No such file" in messages[-1].text and "[exit code" in messages[-1].text


async def test_shift_tab_cycles_the_permission_mode_shown_in_the_toolbar(project: Path) -> None:
    async with harness(["ok"], project) as h:
        policy = PermissionPolicy(project_root=project)
        h.session.permissions = policy
        h.session.authorizer = PolicyAuthorizer(policy, h.repl.approver)  # type: ignore[arg-type]
        seen: list[str] = []
        for _ in range(4):
            seen.append(policy.mode)
            h.repl.cycle_mode()
        assert seen == ["default", "acceptEdits", "plan", "default"]
        assert policy.mode == "acceptEdits"
        assert toolbar_text(h.session).startswith("⏵⏵ accept edits on (shift-tab to cycle) · ")
        await h.run(SHIFT_TAB + SHIFT_TAB + CTRL_D)  # acceptEdits → plan → default
        assert policy.mode == "default"
        assert "accept edits" not in toolbar_text(h.session)


async def test_bypass_permissions_is_in_the_cycle_only_when_the_session_started_in_it(
    project: Path,
) -> None:
    async with harness([], project) as h:
        h.session.permissions = PermissionPolicy(project_root=project, mode="bypassPermissions")
        h.repl._session_opened(h.repl._ready)  # as when the session opens
        modes = [h.repl.cycle_mode() for _ in range(4)]
    assert modes == ["default", "acceptEdits", "plan", "bypassPermissions"]


# ---------------------------------------------------------------------------- custom commands


def commands_project(project: Path) -> None:
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "greet.md").write_text(
        "---\ndescription: Greet someone\nargument-hint: NAME\n---\nSay hello to $0.\n"
    )


async def test_custom_commands_in_help_completion_and_at_the_prompt(project: Path) -> None:
    commands_project(project)
    skills = load_catalog(project).items
    async with harness(["Hello, Ada!"], project, skills=skills) as h:
        await h.run("/help" + ENTER + "/greet Ada" + ENTER + CTRL_D)
        completer = h.repl.prompt.completer
        assert isinstance(completer, ReplCompleter)
        found = [
            (c.text, c.display_meta_text)
            for c in completer.get_completions(Document("/gr"), CompleteEvent())
        ]
    assert "Custom commands and skills" in h.text
    assert any(line.split()[:2] == ["/greet", "NAME"] for line in h.lines)
    assert found == [("/greet", "Greet someone")]
    assert h.sent(0).endswith("Say hello to Ada.\n")
    assert "<command-name>/greet</command-name>" in h.sent(0)
    assert h.lines[-1] == "● Hello, Ada!"
