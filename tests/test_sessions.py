"""The session store: writing, loading with replay and repair, locking, listing, resuming."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hang import HANG_S, hang_guard
from pydantic import BaseModel

from caliban.config.settings import Settings
from caliban.errors import UsageError
from caliban.events import (
    ActivationChanged,
    AgentEvent,
    AssistantMessage,
    Notice,
    ToolStarted,
    UserPrompt,
)
from caliban.mcp.lazy.activation import ActivationCell, McpActivationSet
from caliban.messages import Message, ToolResult, Usage
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.session.resume import (
    attach_transcript,
    close_transcript,
    open_transcript,
    resume_session,
)
from caliban.session.session import Session
from caliban.session.store import (
    INTERRUPTED_BY_EXIT,
    SessionNotFound,
    find_session,
    list_sessions,
    load_session,
    newest_session,
    project_sessions_dir,
    project_slug,
    remove_session,
    repair_history,
    replay_activations,
    transcript_path,
)
from caliban.session.transcript import SessionLocked, Transcript, is_locked
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput

pytestmark = pytest.mark.anyio


class EchoInput(BaseModel):
    text: str = ""


class Echo(BuiltinTool[EchoInput]):
    name = "Echo"
    description = "Echo the text back."
    input_model = EchoInput
    read_only = True

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text(f"echo: {args.text}")


def make_session(root: Path, provider: ScriptedProvider | None = None, **kw: Any) -> Session:
    kw.setdefault("builtins", [Echo()])
    kw.setdefault("model", "model-a")
    return Session(
        settings=Settings(),
        provider=provider or ScriptedProvider([]),
        system_prompt="You are a test.",
        env=ToolEnv(cwd=root, project_root=root),
        **kw,
    )


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def recorded_session(
    root: Path, *steps: Any, prompts: tuple[str, ...] = ("hi",), **kw: Any
) -> Session:
    session = make_session(root, ScriptedProvider(list(steps)), **kw)
    attach_transcript(session)
    for prompt in prompts:
        await session.run(prompt)
    return session


# ---------------------------------------------------------------------------- writing


def test_project_slug_is_readable_and_safe() -> None:
    assert project_slug(Path("/work/main")) == "-work-main"
    assert project_slug(Path("/home/me/my proj.v2")) == "-home-me-my-proj-v2"
    long = project_slug(Path("/x" * 200))
    assert len(long) <= 100 and "/" not in long
    assert long != project_slug(Path("/x" * 201))


async def test_transcript_records_the_conversation_line_by_line(project: Path) -> None:
    session = await recorded_session(
        project, reply("Echoing.", tool_call("Echo", {"text": "a"}, id="t1")), "Done."
    )
    path = transcript_path(project, session.id)
    assert path.parent.name == project_slug(project)
    records = lines(path)
    assert [r["type"] for r in records] == [
        "header",
        "user_prompt",
        "assistant",
        "tool_started",
        "tool_finished",
        "tool_results",
        "assistant",
    ]
    header = records[0]
    assert header["session_id"] == session.id
    assert header["project_root"] == str(project)
    assert header["model"] == "model-a" and header["provider"] == "scripted"
    assert records[2]["message"]["content"][1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "Echo",
        "input": {"text": "a"},
    }
    assert records[2]["usage"]["input_tokens"] == 10
    assert all(r["parent_tool_use_id"] is None for r in records[1:])
    assert oct(path.stat().st_mode & 0o777) == "0o600"


async def test_the_first_prompt_freezes_start_up_objects_out_of_the_collectors_reach(
    project: Path,
) -> None:
    gc.unfreeze()
    session = make_session(project, ScriptedProvider(["one", "two"]))
    assert gc.get_freeze_count() == 0
    await session.run("first")
    frozen = gc.get_freeze_count()
    assert frozen > 0  # the imported modules' objects, among others
    await session.run("second")
    assert gc.get_freeze_count() <= frozen  # once: the session's own objects stay collectable


async def test_no_file_until_the_first_prompt(project: Path) -> None:
    session = make_session(project)
    transcript = attach_transcript(session)
    session.set_model("model-b")
    session.emit(Notice(level="warning", text="config warning"))
    path = transcript_path(project, session.id)
    assert not path.exists() and not transcript.started
    close_transcript(session)
    assert not path.exists()
    assert list_sessions(project) == []


async def test_a_failing_disk_stops_recording_with_one_notice(project: Path) -> None:
    session = await recorded_session(project, "ok")
    events: list[AgentEvent] = []
    session.listeners.append(events.append)
    transcript = next(x for x in session.listeners if isinstance(x, Transcript))
    os.close(transcript._fd)  # type: ignore[arg-type]  # simulate EIO/ENOSPC: writes fail
    session.provider = ScriptedProvider(["still works", "and again"])
    await session.run("next")
    await session.run("and next")
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and "no longer being saved" in notices[0].text
    assert session.conversation.messages[-1].text == "and again"
    transcript._fd = None  # already closed above


# ---------------------------------------------------------------------------- loading


async def test_load_restores_history_usage_and_model(project: Path) -> None:
    session = await recorded_session(
        project,
        reply("Echoing.", tool_call("Echo", {"text": "a"})),
        "Done.",
        "Second answer.",
        prompts=("first", "second"),
    )
    session.set_model("model-b")
    close_transcript(session)
    record = load_session(transcript_path(project, session.id))
    assert list(record.messages) == session.conversation.messages
    assert record.usage == session.ledger.by_model()
    assert session.ledger.total() == Usage(input_tokens=30, output_tokens=15)
    assert record.last_usage == session.conversation.last_usage
    assert record.model == "model-b"
    assert record.turns == 2
    assert record.warnings == ()


async def test_sub_agent_events_are_recorded_but_not_in_the_main_history(project: Path) -> None:
    session = await recorded_session(project, "Main answer.")
    child = Message.user("child prompt")
    session.emit(UserPrompt(message=child, parent_tool_use_id="agent_1"))
    session.emit(
        AssistantMessage(
            message=reply("child answer"),
            usage=Usage(input_tokens=100, output_tokens=1),
            model="child-model",
            parent_tool_use_id="agent_1",
        )
    )
    session.emit(
        ActivationChanged(
            activated=("mcp__x__a",),
            evicted=(),
            active=("mcp__x__a",),
            parent_tool_use_id="agent_1",
        )
    )
    close_transcript(session)
    path = transcript_path(project, session.id)
    assert [r["parent_tool_use_id"] for r in lines(path)[-3:]] == ["agent_1"] * 3
    record = load_session(path)
    assert list(record.messages) == session.conversation.messages
    assert record.model == "model-a"
    assert record.activations == ()
    # /cost includes sub-agents, each model's tokens under its own name.
    assert record.usage == {
        "model-a": Usage(input_tokens=10, output_tokens=5),
        "child-model": Usage(input_tokens=100, output_tokens=1),
    }


async def test_clear_starts_the_restored_conversation_afresh(project: Path) -> None:
    session = await recorded_session(project, "one", "two", prompts=("before",))
    session.clear()
    await session.run("after")
    close_transcript(session)
    record = load_session(transcript_path(project, session.id))
    assert [m.text for m in record.messages] == ["after", "two"]
    assert record.turns == 1
    assert list_sessions(project)[0].first_prompt == "after"


async def test_a_corrupt_line_is_skipped_with_a_warning_and_the_rest_loads(project: Path) -> None:
    session = await recorded_session(project, "one", "two", prompts=("first", "second"))
    close_transcript(session)
    path = transcript_path(project, session.id)
    text = path.read_text().splitlines(keepends=True)
    text[2] = text[2][:40] + "\x00garbage\n"  # the first assistant reply
    path.write_text("".join(text) + '{"type":"assistant","message":{"role":"assist')
    record = load_session(path)
    assert [m.text for m in record.messages] == ["first", "second", "two"]
    assert len(record.warnings) == 2
    assert record.warnings[0].startswith(f"{path}:3: skipped a line")
    assert record.warnings[1].startswith(f"{path}:6: skipped a line: it was cut short")


async def test_a_tool_call_without_result_gets_an_interrupted_result(project: Path) -> None:
    session = await recorded_session(project, reply("Running.", tool_call("Echo", id="t9")), "x")
    close_transcript(session)
    path = transcript_path(project, session.id)
    # Keep everything up to the assistant's tool call, as after a kill -9 mid-tool.
    kept = [r for r in lines(path) if r["type"] in ("header", "user_prompt")]
    kept.append(next(r for r in lines(path) if r["type"] == "assistant"))
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    record = load_session(path)
    assert [m.role for m in record.messages] == ["user", "assistant", "user"]
    [result] = record.messages[-1].parts
    assert isinstance(result, ToolResult)
    assert result.tool_call_id == "t9" and result.is_error and result.text == INTERRUPTED_BY_EXIT
    assert record.repaired_tail == 1
    assert "marked as interrupted" in record.warnings[0]


def test_repair_drops_orphan_results_and_completes_partial_ones() -> None:
    a, b = tool_call("Echo", id="a"), tool_call("Echo", id="b")
    ok = ToolResult(tool_call_id="a", content=())
    orphan = ToolResult(tool_call_id="zzz", content=())
    history = [
        Message.user("go"),
        reply(a, b),
        Message(role="user", parts=(ok, orphan)),
        Message(role="user", parts=(orphan,)),
        Message.user("next"),
    ]
    repaired, notes = repair_history(history)
    assert [m.role for m in repaired] == ["user", "assistant", "user", "user"]
    answers = repaired[2].parts
    assert [p.tool_call_id for p in answers if isinstance(p, ToolResult)] == ["a", "b"]
    assert isinstance(answers[1], ToolResult) and answers[1].is_error
    assert len(notes) == 3
    assert repair_history(repaired) == (repaired, [])


# ---------------------------------------------------------------------------- locking


async def test_a_second_writer_is_refused(project: Path) -> None:
    session = await recorded_session(project, "one")
    path = transcript_path(project, session.id)
    assert is_locked(path)
    with pytest.raises(SessionLocked, match="in use by another caliban process"):
        Transcript.reopen(path)
    other = make_session(project)
    with pytest.raises(SessionLocked):
        await resume_session(other, session.id)
    assert other.conversation.messages == [] and other.id != session.id
    close_transcript(session)
    assert not is_locked(path)
    Transcript.reopen(path).close()


def test_the_lock_holds_across_processes(project: Path) -> None:
    path = transcript_path(project, "abcd0000-cross-process")
    first = Transcript.create(path, header={"type": "header", "project_root": str(project)})
    first(UserPrompt(message=Message.user("hi")))
    first.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from pathlib import Path
                from caliban.session.transcript import Transcript
                t = Transcript.reopen(Path({str(path)!r}))
                print("locked", flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(SessionLocked):
            Transcript.reopen(path)
        assert list_sessions(project)[0].in_use
        with pytest.raises(UsageError, match="in use"):
            remove_session(project, "abcd")
    finally:
        holder.communicate("", timeout=HANG_S)
    Transcript.reopen(path).close()


def test_a_new_transcript_never_reuses_an_existing_file(project: Path) -> None:
    path = transcript_path(project, "fixed-id")
    path.parent.mkdir(parents=True)
    path.write_text("someone else's\n")
    events: list[str] = []
    transcript = Transcript.create(path, header={"type": "header"}, on_error=events.append)
    transcript(UserPrompt(message=Message.user("hi")))
    assert path.read_text() == "someone else's\n"
    assert len(events) == 1 and "FileExistsError" in events[0]


# ---------------------------------------------------------------------------- listing


async def make_saved(root: Path, prompts: tuple[str, ...], mtime: float, **kw: Any) -> str:
    session = await recorded_session(root, *["ok"] * len(prompts), prompts=prompts, **kw)
    close_transcript(session)
    os.utime(transcript_path(root, session.id), (mtime, mtime))
    return session.id


async def test_listing_is_newest_first_with_first_prompt_and_turns(project: Path) -> None:
    old = await make_saved(project, ("fix the   bug\nplease",), 1_700_000_000)
    new = await make_saved(project, ("add tests", "more", "more"), 1_700_000_500)
    mid = await make_saved(project, ("refactor",), 1_700_000_200)
    sessions = list_sessions(project)
    assert [s.id for s in sessions] == [new, mid, old]
    assert [(s.first_prompt, s.turns) for s in sessions] == [
        ("add tests", 3),
        ("refactor", 1),
        ("fix the bug please", 1),
    ]
    assert newest_session(project).id == new
    assert not any(s.in_use for s in sessions)


async def test_other_projects_are_not_listed_and_ids_point_there(
    project: Path, tmp_path: Path
) -> None:
    other_root = tmp_path / "other"
    other_root.mkdir()
    theirs = await make_saved(other_root, ("theirs",), 1_700_000_000)
    assert list_sessions(project) == []
    with pytest.raises(SessionNotFound, match="belongs to another project"):
        find_session(project, theirs[:8])


async def test_rm_by_unique_prefix_and_clear_errors(project: Path) -> None:
    first = await make_saved(project, ("one",), 1_700_000_000, id="abc1-0000")
    second = await make_saved(project, ("two",), 1_700_000_100, id="abc2-0000")
    with pytest.raises(SessionNotFound, match="'abc' is ambiguous: it matches abc2-0000, abc1"):
        remove_session(project, "abc")
    with pytest.raises(SessionNotFound, match=rf"no session 'ffff' .* {second[:8]} 'two'"):
        remove_session(project, "ffff")
    assert remove_session(project, "abc1").id == first
    assert [s.id for s in list_sessions(project)] == [second]


# ---------------------------------------------------------------------------- activation


def test_replay_honours_order_and_cap_and_drops_missing_tools() -> None:
    recorded = [("a", "b"), ("c",), ("d",), ("b",)]
    replayed, gone = replay_activations(recorded, cap=3, existing={"a", "b", "c", "d"})
    direct = McpActivationSet.empty(3)
    for names in recorded:
        direct, _ = direct.activate(names)
    assert replayed == direct
    # "a" and "b" were evicted by "c" and "d"; "b" came back at the end.
    assert replayed.in_activation_order() == ("c", "d", "b") and gone == ()
    replayed, gone = replay_activations(recorded, cap=3, existing={"b", "d"})
    assert replayed.in_activation_order() == ("d", "b") and gone == ("c",)
    assert replayed.cap == 3


class FakeMcp:
    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.waited = False

    async def wait_ready(self, timeout: float | None = None) -> list[Any]:  # noqa: ASYNC109
        self.waited = True
        return []

    def tools(self) -> tuple[Any, ...]:
        return tuple(SimpleNamespace(name=name) for name in self.names)

    def server_names(self) -> list[str]:
        return []

    def server_config(self, name: str) -> None:
        return None


async def test_resume_restores_activations_and_drops_gone_tools_with_a_notice(
    project: Path,
) -> None:
    session = await recorded_session(project, "one")
    for names in [("mcp__gh__issues",), ("mcp__gh__prs",), ("mcp__db__query",)]:
        session.emit(ActivationChanged(activated=names, evicted=(), active=names))
    close_transcript(session)

    events: list[AgentEvent] = []
    mcp = FakeMcp(["mcp__gh__issues", "mcp__db__query", "mcp__db__schema"])  # prs went away
    resumed = make_session(project, mcp=mcp, listeners=[events.append])
    resumed.activation = ActivationCell(McpActivationSet.empty(2))  # type: ignore[attr-defined]
    await resume_session(resumed, session.id[:8])
    cell: ActivationCell = resumed.activation  # type: ignore[attr-defined]
    # cap 2: the replay evicted mcp__gh__issues, then mcp__gh__prs was gone.
    assert cell.get().in_activation_order() == ("mcp__db__query",)
    assert mcp.waited
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert warnings == ["MCP tools no longer available, dropped from the active set: mcp__gh__prs"]


# ---------------------------------------------------------------------------- resuming


def options(**kw: Any) -> Any:
    return SimpleNamespace(
        **{"continue_session": False, "resume": None, "model": None, "fork_session": False, **kw}
    )


async def test_continue_resumes_and_keeps_appending_to_the_same_file(project: Path) -> None:
    first = await recorded_session(project, "one", prompts=("hello",))
    first.set_model("model-b")
    close_transcript(first)
    path = transcript_path(project, first.id)

    session = make_session(project, ScriptedProvider(["two"]))
    record = await open_transcript(session, options(continue_session=True), interactive=False)
    assert record is not None and record.id == first.id
    assert session.id == first.id and session.model == "model-b"
    assert session.conversation.messages == first.conversation.messages
    assert session.ledger.by_model() == first.ledger.by_model()
    await session.run("again")
    assert session.provider.requests[0].messages[:2] == tuple(first.conversation.messages)  # type: ignore[attr-defined]
    close_transcript(session)
    assert list(load_session(path).messages) == session.conversation.messages
    assert len(list(project_dir_files(project))) == 1


def project_dir_files(root: Path) -> list[Path]:
    return sorted(transcript_path(root, "x").parent.glob("*.jsonl"))


async def test_resume_with_model_flag_keeps_the_flag_and_records_it(project: Path) -> None:
    first = await recorded_session(project, "one")
    close_transcript(first)
    session = make_session(project)
    session.model = "from-flag"
    await open_transcript(session, options(resume=first.id, model="from-flag"), interactive=False)
    assert session.model == "from-flag"
    close_transcript(session)
    assert load_session(transcript_path(project, first.id)).model == "from-flag"


async def test_resume_writes_the_crash_repair_once(project: Path) -> None:
    first = await recorded_session(project, reply(tool_call("Echo", id="t1")), "x")
    close_transcript(first)
    path = transcript_path(project, first.id)
    kept = [r for r in lines(path) if r["type"] not in ("tool_finished", "tool_results")]
    path.write_text("".join(json.dumps(r) + "\n" for r in kept[:-1]))  # cut before the reply

    session = make_session(project)
    await resume_session(session, first.id)
    close_transcript(session)
    again = load_session(path)
    assert again.warnings == () and again.repaired_tail == 0
    assert list(again.messages) == session.conversation.messages
    appended = [r for r in lines(path) if r["type"] == "history_append"]
    assert len(appended) == 1 and appended[0]["message"]["content"][0]["is_error"]


async def test_resume_flag_errors_are_usage_errors(project: Path) -> None:
    session = make_session(project)
    with pytest.raises(SessionNotFound, match="no saved session to continue"):
        await open_transcript(session, options(continue_session=True), interactive=False)
    with pytest.raises(UsageError, match="--resume needs a session ID with -p"):
        await open_transcript(session, options(resume=""), interactive=False)
    with pytest.raises(UsageError, match="either --continue or --resume"):
        await open_transcript(
            session, options(continue_session=True, resume="ab"), interactive=True
        )
    with pytest.raises(SessionNotFound, match="no session 'abcd'"):
        await open_transcript(session, options(resume="abcd"), interactive=False)


async def test_the_picker_resumes_the_chosen_session(project: Path) -> None:
    old = await make_saved(project, ("old work",), 1_700_000_000)
    await make_saved(project, ("new work",), 1_700_000_100)
    answers = iter(["7", "2"])
    session = make_session(project)
    with hang_guard():
        record = await open_transcript(
            session, options(resume=""), interactive=True, ask=lambda prompt: next(answers)
        )
    assert record is not None and record.id == old == session.id
    assert session.conversation.messages[0].text == "old work"
    close_transcript(session)


async def test_cancelled_turn_is_on_disk_before_cancellation_returns(project: Path) -> None:
    class Slow(BuiltinTool[EchoInput]):
        name = "Slow"
        description = "Takes forever."
        input_model = EchoInput

        async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
            await asyncio.sleep(30)
            return ToolOutput.text("never")

    started = asyncio.Event()
    provider = ScriptedProvider([reply(tool_call("Slow", id="s1"))])
    session = make_session(project, provider, builtins=[Echo(), Slow()])
    session.listeners.append(lambda e: started.set() if isinstance(e, ToolStarted) else None)
    attach_transcript(session)
    with hang_guard():
        task = asyncio.ensure_future(session.run("go slow"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    record = load_session(transcript_path(project, session.id))
    assert list(record.messages) == session.conversation.messages
    assert record.warnings == ()
    close_transcript(session)


async def test_resume_inside_a_running_session_switches_files(project: Path) -> None:
    """What ``/resume`` does in the REPL: the old transcript is released, the new one taken."""
    earlier = await make_saved(project, ("earlier work",), 1_700_000_000)
    session = await recorded_session(project, "now", "later", prompts=("current work",))
    current = transcript_path(project, session.id)
    with pytest.raises(UsageError, match="is the current session"):
        await resume_session(session, session.id)
    await resume_session(session, earlier)
    assert session.id == earlier
    assert [m.text for m in session.conversation.messages] == ["earlier work", "ok"]
    assert not is_locked(current) and is_locked(transcript_path(project, earlier))
    await session.run("more")
    close_transcript(session)
    assert load_session(transcript_path(project, earlier)).turns == 2
    assert load_session(current).turns == 1


@pytest.mark.slow
def test_resuming_a_transcript_whose_first_prompt_is_unreadable(
    project: Path, fake_model_server: Any
) -> None:
    """The real ``caliban -p --continue`` after the first prompt's line was damaged: it says
    so, and the request still starts with a user message (providers and local chat
    templates refuse a history that starts with the assistant)."""
    fake_model_server.add({"text": "First answer."}, {"text": "Second answer."})
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": fake_model_server.url,
    }

    def caliban(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "caliban", "-p", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_S)

    assert caliban("first question").returncode == 0
    [path] = project_sessions_dir(project).glob("*.jsonl")
    records = path.read_text().splitlines(keepends=True)
    damaged = [r if '"user_prompt"' not in r else r[:30] + "\x00\n" for r in records]
    path.write_text("".join(damaged))

    second = caliban("--continue", "second question")
    assert second.returncode == 0, second.stderr
    assert "Second answer." in second.stdout
    assert "first prompt could not be read" in second.stderr
    sent = fake_model_server.bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "could not be read" in json.dumps(sent[0]) and "First answer." in json.dumps(sent[1])
