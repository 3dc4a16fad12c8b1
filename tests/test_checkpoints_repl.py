"""``/rewind``, Esc Esc and ``/undo`` in the REPL (prompt-toolkit pipe input, the scripted
provider, real files, real Bash), and ``/context``'s line on checkpoint storage."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from hang import hang_guard
from test_repl import CTRL_C, CTRL_D, ENTER, Harness, harness, wait_until

from caliban.checkpoints.manager import Checkpoints
from caliban.providers.scripted import reply, tool_call
from caliban.repl.commands import CommandContext, run_command

pytestmark = pytest.mark.anyio

ESC_ESC = "\x1b\x1b"
ORIGINAL = {"b.txt": "one\n", "c.txt": "c\n"}


def files(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.iterdir()) if p.is_file()}


def two_prompts(project: Path) -> list[object]:
    """Prompt 1 Writes a new file and changes two through Bash; prompt 2 changes one more."""
    return [
        reply(
            tool_call("Write", {"file_path": str(project / "new.txt"), "content": "new\n"}),
            tool_call("Bash", {"command": "echo changed > c.txt && echo made > d.txt"}),
        ),
        "Changed them.",
        reply(tool_call("Bash", {"command": "echo again >> b.txt"})),
        "Again.",
    ]


def setup(project: Path) -> Checkpoints:
    for name, text in ORIGINAL.items():
        (project / name).write_text(text)
    return Checkpoints(project=project, session_id="s1")


async def start(h: Harness, keys: str, *, done: str) -> asyncio.Future[int]:
    """Run the REPL on ``keys``; return it once ``done`` is on the screen and the prompt
    reads keys again."""
    h.input.send_text(keys)
    task = asyncio.ensure_future(h.repl.run())
    await wait_until(lambda: done in h.text and h.repl.prompt.app.is_running)
    return task


async def answer_menus(h: Harness, keys: str, *answers: str, done: str) -> None:
    """Send ``keys``; answer each menu with the next of ``answers`` once it is drawn (keys
    typed earlier would not answer it); wait for ``done`` and the prompt again."""
    shown = h.repl.menus_shown
    h.input.send_text(keys)
    for number, answer in enumerate(answers, start=shown + 1):
        await wait_until(lambda number=number: h.repl.menus_shown >= number)  # type: ignore[misc]
        h.input.send_text(answer)
    await wait_until(lambda: done in h.text and h.repl.prompt.app.is_running)


async def leave(h: Harness, task: asyncio.Future[int], keys: str = CTRL_D) -> None:
    h.input.send_text(keys)
    with hang_guard():
        await task


AFTER_BOTH = {"b.txt": "one\nagain\n", "c.txt": "changed\n", "d.txt": "made\n", "new.txt": "new\n"}


@pytest.mark.parametrize("opener", ["/rewind" + ENTER, ESC_ESC], ids=["slash", "esc-esc"])
@pytest.mark.parametrize("choice", ["1", "2", "3"], ids=["both", "conversation", "code"])
async def test_rewind_to_the_first_prompt(project: Path, opener: str, choice: str) -> None:
    checkpoints = setup(project)
    steps = [*two_prompts(project), "Ran it again."]
    async with harness(steps, project, checkpoints=checkpoints, id="s1") as h:
        # The older prompt is the second line of the picker (newest first); after a
        # conversation rewind its text is back in the input: Enter sends it again.
        resend = choice in ("1", "2")
        task = await start(h, "make changes" + ENTER + "again" + ENTER, done="Again.")
        done = "Conversation rewound" if resend else "Restored 4 files"
        await answer_menus(h, opener, "2", choice, done=done)
        if resend:
            h.input.send_text(ENTER)
            await wait_until(lambda: "Ran it again." in h.text and h.repl.prompt.app.is_running)
        await leave(h, task)
        prompts = [m.text for m in h.session.conversation.messages if m.role == "user"]
    code_restored = choice in ("1", "3")
    assert files(project) == (ORIGINAL if code_restored else AFTER_BOTH)
    if resend:  # the conversation was cut before "make changes", which was sent again
        assert prompts[0] == "make changes" and "again" not in prompts
        assert h.sent(-1) == "make changes"
        assert "Conversation rewound to before: make changes" in h.text
    else:
        assert [p for p in prompts if p in ("make changes", "again")] == ["make changes", "again"]
    if code_restored:
        assert "Restored 4 files" in h.text
    assert "Changed them." in h.text


async def test_the_picker_lists_prompts_newest_first_with_their_changes(project: Path) -> None:
    checkpoints = setup(project)
    asked: list[tuple[str, list[str]]] = []

    async def choose(question: str, options: Sequence[str]) -> int | None:
        asked.append((question, list(options)))
        return None if len(asked) > 1 else 1

    async with harness(two_prompts(project), project, checkpoints=checkpoints, id="s1") as h:
        await h.run("make changes" + ENTER + "again" + ENTER + CTRL_D)
        context = CommandContext(session=h.session, console=h.repl.console, choose=choose)
        await run_command("/rewind", context)
    (_, prompts), (_, restore) = asked
    assert prompts == ["again  · 1 file +1 -0", "make changes  · 3 files +3 -1"]
    assert restore == [
        "Restore code and conversation",
        "Restore conversation",
        "Restore code",
        "Never mind",
    ]
    assert "Restoring the code changes 4 files" in h.text
    assert files(project) == AFTER_BOTH  # cancelled: nothing changed


async def test_undo_restores_the_last_prompt_s_files(project: Path) -> None:
    checkpoints = setup(project)
    async with harness(two_prompts(project), project, checkpoints=checkpoints, id="s1") as h:
        await h.run("make changes" + ENTER + "again" + ENTER + "/undo" + ENTER + CTRL_D)
    assert files(project) == {**AFTER_BOTH, "b.txt": "one\n"}
    assert len([m for m in h.session.conversation.messages if m.role == "user"]) >= 2


async def test_outside_edits_are_named_and_asked_about(project: Path) -> None:
    checkpoints = setup(project)
    async with harness(two_prompts(project)[:2], project, checkpoints=checkpoints, id="s1") as h:
        # The user changes c.txt between the prompt and /undo (a shell command of theirs).
        keys = "make changes" + ENTER + "!echo mine > c.txt" + ENTER
        task = await start(h, keys, done="mine")
        await answer_menus(h, "/undo" + ENTER, "2", done="Undo cancelled.")
        await leave(h, task)
    assert "changed outside caliban since" in h.text and "c.txt" in h.text
    assert "Undo cancelled." in h.text
    assert (project / "c.txt").read_text() == "mine\n"


async def test_esc_cancels_the_picker_and_context_shows_storage(project: Path) -> None:
    checkpoints = setup(project)
    async with harness(two_prompts(project)[:2], project, checkpoints=checkpoints, id="s1") as h:
        task = await start(h, "make changes" + ENTER, done="Changed them.")
        await answer_menus(h, "/rewind" + ENTER, "\x1b", done="Rewind cancelled.")
        await leave(h, task, "/context" + ENTER + CTRL_D)
    assert "Rewind cancelled." in h.text
    assert files(project)["c.txt"] == "changed\n"
    assert "Checkpoints: 1 checkpoint this session;" in h.text


async def test_keys_typed_before_restore_what_is_drawn_restore_nothing(project: Path) -> None:
    checkpoints = setup(project)
    async with harness(two_prompts(project)[:2], project, checkpoints=checkpoints, id="s1") as h:
        # "1" picks the prompt; the second "1" ("Restore code and conversation") is typed
        # before "Restore what?" is drawn: it goes to the draft, and Esc cancels the menu.
        task = await start(h, "make changes" + ENTER, done="Changed them.")
        await answer_menus(h, "/rewind" + ENTER, "11", "\x1b", done="Rewind cancelled.")
        assert h.repl.prompt.app.current_buffer.text == "1"
        await leave(h, task, CTRL_C + CTRL_D)
    assert files(project)["c.txt"] == "changed\n" and "Restored" not in h.text
    assert [m.text for m in h.session.conversation.messages][:1] == ["make changes"]


async def test_without_checkpoints_only_the_conversation_rewinds(project: Path) -> None:
    setup(project)
    async with harness(two_prompts(project)[:2], project) as h:
        task = await start(h, "make changes" + ENTER, done="Changed them.")
        await answer_menus(h, "/rewind" + ENTER, "1", "1", done="Conversation rewound")
        await leave(h, task, CTRL_C + CTRL_D)
    assert h.session.conversation.messages == []
    assert files(project)["c.txt"] == "changed\n"


async def test_a_rewound_conversation_is_what_a_resume_restores(project: Path) -> None:
    from test_sessions import recorded_session

    from caliban.session.resume import close_transcript
    from caliban.session.store import load_session, transcript_path

    session = await recorded_session(project, "one", "two", "three", prompts=("a", "b", "c"))
    second = next(m for m in session.conversation.messages if m.text == "b")
    session.rewind_conversation(second.id)
    close_transcript(session)
    record = load_session(transcript_path(project, session.id))
    assert [m.text for m in record.messages] == ["a", "one"]
    assert record.messages[0].id == session.conversation.messages[0].id
    assert record.turns == 1


async def test_a_conversation_rewind_brings_back_the_active_mcp_tools(project: Path) -> None:
    from test_repl import LAZY_SETTINGS, MODEL

    from caliban.providers.scripted import ScriptedProvider
    from caliban.session.session import Session
    from caliban.tools.base import ToolEnv

    session = Session(
        settings=LAZY_SETTINGS,
        provider=ScriptedProvider(["first", "second"]),
        model=MODEL,
        system_prompt="t",
        env=ToolEnv(cwd=project, project_root=project),
        builtins=[],
        checkpoints=Checkpoints(project=project, session_id="s1"),
    )
    assert session.activation is not None
    session.activation.activate(["mcp__a__one"])
    await session.run("p1")
    first = session.conversation.messages[0]
    session.activation.activate(["mcp__b__two"])
    await session.run("p2")
    assert session.rewind_conversation(first.id).text == "p1"
    assert session.conversation.messages == []
    assert session.activation.get().in_activation_order() == ("mcp__a__one",)
