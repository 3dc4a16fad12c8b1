"""The REPL driven through prompt-toolkit pipe input, against the scripted provider.

Keys go in through ``create_pipe_input()``; what a user reads is captured from a rich
console writing to a string. Prompts are sent up front: what is typed while a turn runs is
queued for its end (Enter) or waits at the next prompt. Answers to a permission question
are sent once it is on the screen (:func:`answer_questions`): keys typed before it was drawn
never answer it.
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hang import HANG_S, hang_guard
from prompt_toolkit.application import create_app_session, get_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from caliban.config.settings import Settings, load_config
from caliban.messages import TextPart, Usage
from caliban.permissions.approval import PolicyAuthorizer
from caliban.permissions.policy import PermissionPolicy
from caliban.providers.scripted import HANG, ScriptedProvider, reply, tool_call
from caliban.repl.app import Repl, run_interactive, run_repl
from caliban.repl.approve import TerminalApprover
from caliban.repl.commands import COMMANDS
from caliban.repl.complete import ReplCompleter
from caliban.repl.render import Renderer, TerminalConsole
from caliban.repl.toolbar import toolbar_text
from caliban.session.session import Session
from caliban.skills.slash import parse_slash
from caliban.tools.base import ToolEnv
from caliban.tools.builtin import builtin_tools

pytestmark = pytest.mark.anyio

ENTER = "\r"
ALT_ENTER = "\x1b\r"
CTRL_C = "\x03"
CTRL_D = "\x04"
MODEL = "claude-sonnet-4-5"
LAZY = {"tools": {"lazy_mcp": True}}
LAZY_SETTINGS = Settings.model_validate(LAZY)


@dataclass
class Harness:
    repl: Repl
    session: Session
    provider: ScriptedProvider
    input: PipeInput
    out: io.StringIO
    approver: TerminalApprover

    @property
    def lines(self) -> list[str]:
        """What the user saw, right-stripped, blank lines dropped."""
        return [line.rstrip() for line in self.out.getvalue().splitlines() if line.strip()]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def sent(self, request: int) -> str:
        """All text of the last user message of request ``request``."""
        message = self.provider.requests[request].messages[-1]
        return "\n".join(p.text for p in message.parts if isinstance(p, TextPart))

    async def run(self, keys: str, *, limit: float = HANG_S) -> int:
        self.input.send_text(keys)
        with anyio.fail_after(limit):
            return await self.repl.run()


@asynccontextmanager
async def harness(
    steps: list[Any],
    cwd: Path,
    *,
    usage: Usage | None = None,
    ask: bool = False,
    width: int = 100,
    **session_args: Any,
) -> AsyncIterator[Harness]:
    out = io.StringIO()
    console = TerminalConsole(file=out, width=width, force_terminal=False, color_system=None)
    provider = ScriptedProvider(steps, usage=usage)
    renderer = Renderer(console, cwd=cwd)
    approver = TerminalApprover(console, cwd=cwd)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        session_args.setdefault("settings", Settings())
        session = Session(
            provider=provider,
            model=MODEL,
            system_prompt="You are a test.",
            env=ToolEnv(cwd=cwd, project_root=cwd),
            builtins=builtin_tools(),
            listeners=[renderer],
            **session_args,
        )
        if ask:
            policy = PermissionPolicy(project_root=cwd)
            session.authorizer = PolicyAuthorizer(policy, approver)
        repl = Repl(
            session,
            console=console,
            renderer=renderer,
            approver=approver,
            input=pipe,
            output=DummyOutput(),
            history=InMemoryHistory(),
        )
        yield Harness(
            repl=repl, session=session, provider=provider, input=pipe, out=out, approver=approver
        )


async def answer_questions(h: Harness, prompt: str, *answers: str, done: str) -> None:
    """Send ``prompt``; answer each permission question with the next of ``answers`` once
    it is drawn; once ``done`` is on the screen, leave with Ctrl-D (the turn may still be
    ending: the key is not lost either way)."""
    h.input.send_text(prompt + ENTER)
    task = asyncio.ensure_future(h.repl.run())
    for number, keys in enumerate(answers, start=1):
        await wait_until(lambda number=number: h.approver.shown >= number)  # type: ignore[misc]
        h.input.send_text(keys)
    await wait_until(lambda: done in h.text)
    h.input.send_text(CTRL_D)
    with hang_guard():
        await task


async def wait_until(condition: Callable[[], bool], limit: float = HANG_S) -> None:
    """Poll ``condition`` (what the user would see) until it holds, for at most ``limit`` s."""
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


# ---------------------------------------------------------------------------- prompts


async def test_prompt_is_answered_and_ctrl_d_exits(project: Path) -> None:
    async with harness(["# Hi\n\nThe answer is **42**."], project) as h:
        code = await h.run("what is it?" + ENTER + CTRL_D)
    assert code == 0
    assert h.sent(0) == "what is it?"
    assert h.lines[-2:] == ["● Hi", "  The answer is 42."]


async def test_alt_enter_and_trailing_backslash_make_new_lines(project: Path) -> None:
    async with harness(["ok"], project) as h:
        await h.run("one" + ALT_ENTER + "two\\" + ENTER + "three" + ENTER + CTRL_D)
    assert h.sent(0) == "one\ntwo\nthree"


async def test_tool_calls_are_rendered_between_text(project: Path) -> None:
    (project / "notes.txt").write_text("alpha\nbeta\n")
    steps = [reply("Reading.", tool_call("Read", {"file_path": "notes.txt"})), "Two lines."]
    async with harness(steps, project) as h:
        await h.run("read notes" + ENTER + CTRL_D)
    assert h.lines[-4:] == ["● Reading.", "● Read(notes.txt)", "  ⎿  2 lines", "● Two lines."]


async def test_at_path_attaches_the_file(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("print('hi')\n")
    async with harness(["Seen."], project) as h:
        await h.run("explain @src/app.py please" + ENTER + CTRL_D)
    sent = h.sent(0)
    assert sent.startswith("explain @src/app.py please\n")
    assert "<file path=\"src/app.py\">\nprint('hi')\n</file>" in sent
    assert "  ⎿  Attached @src/app.py (1 line)" in h.lines


async def test_provider_error_is_shown_and_the_session_goes_on(project: Path) -> None:
    from caliban.providers.base import ProviderError

    def fail(request: Any) -> str:
        raise ProviderError("invalid x-api-key: check ANTHROPIC_API_KEY")

    async with harness([fail, "Back."], project) as h:
        await h.run("hi" + ENTER + "again" + ENTER + CTRL_D)
    assert "● invalid x-api-key: check ANTHROPIC_API_KEY" in h.lines
    assert h.lines[-1] == "● Back."


# ---------------------------------------------------------------------------- start-up


def cli_options(cwd: Path, prompt: str | None = None) -> Any:
    from caliban.cli.options import CliOptions

    return CliOptions(
        prompt=prompt,
        print_mode=False,
        output_format="text",
        model=None,
        provider=None,
        max_turns=None,
        permission_mode=None,
        allowed_tools=(),
        disallowed_tools=(),
        continue_session=False,
        resume=None,
        cwd=cwd,
    )


async def test_the_prompt_is_up_before_the_session_opens(project: Path) -> None:
    gate = anyio.Event()
    seen: dict[str, bool] = {}
    provider = ScriptedProvider(["Ready now."])

    @asynccontextmanager
    async def opener(options: Any, **kwargs: Any) -> AsyncIterator[Session]:
        app = get_app_session().app
        seen["prompt_up"] = app is not None and app.is_running
        await gate.wait()
        yield Session(
            settings=Settings(),
            provider=provider,
            model=MODEL,
            system_prompt="t",
            env=ToolEnv(cwd=project, project_root=project),
            builtins=[],
            listeners=list(kwargs["listeners"]),
        )

    out = io.StringIO()
    console = TerminalConsole(file=out, width=100, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        pipe.send_text("early question" + ENTER)
        task = asyncio.ensure_future(
            run_repl(
                cli_options(project),
                console=console,
                input=pipe,
                output=DummyOutput(),
                history=InMemoryHistory(),
                opener=opener,
            )
        )
        await wait_until(lambda: "prompt_up" in seen)
        assert provider.requests == []  # the typed prompt waits for the session
        gate.set()
        await wait_until(lambda: "Ready now." in out.getvalue())
        with hang_guard():
            pipe.send_text(CTRL_D)  # read by the turn or by the prompt: it leaves either way
            await task
        assert task.result() == 0
    assert seen["prompt_up"]
    assert [m.text for m in provider.requests[0].messages] == ["early question"]


async def test_a_prompt_on_the_command_line_runs_first(project: Path) -> None:
    provider = ScriptedProvider(["Answered first."])

    @asynccontextmanager
    async def opener(options: Any, **kwargs: Any) -> AsyncIterator[Session]:
        yield Session(
            settings=Settings(),
            provider=provider,
            model=MODEL,
            system_prompt="t",
            env=ToolEnv(cwd=project, project_root=project),
            builtins=[],
            listeners=list(kwargs["listeners"]),
        )

    out = io.StringIO()
    console = TerminalConsole(file=out, width=100, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        running = asyncio.ensure_future(
            run_repl(
                cli_options(project, prompt="why is the build red?"),
                console=console,
                input=pipe,
                output=DummyOutput(),
                history=InMemoryHistory(),
                opener=opener,
            )
        )
        await wait_until(lambda: "Answered first." in out.getvalue())
        pipe.send_text(CTRL_D)
        with hang_guard():
            code = await running
    assert code == 0
    assert provider.requests[0].messages[0].text == "why is the build red?"
    assert "● Answered first." in out.getvalue()


async def test_a_config_error_at_start_up_leaves_the_prompt_and_is_raised(project: Path) -> None:
    from caliban.config.settings import ConfigError

    @asynccontextmanager
    async def opener(options: Any, **kwargs: Any) -> AsyncIterator[Session]:
        raise ConfigError("no API key: set ANTHROPIC_API_KEY")
        yield  # pragma: no cover

    console = TerminalConsole(
        file=io.StringIO(), width=100, force_terminal=False, color_system=None
    )
    with (
        create_pipe_input() as pipe,
        pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"),
        hang_guard(),
    ):
        await run_repl(
            cli_options(project),
            console=console,
            input=pipe,
            output=DummyOutput(),
            history=InMemoryHistory(),
            opener=opener,
        )


# ---------------------------------------------------------------------------- Ctrl-C


async def test_ctrl_c_cancels_the_turn_and_the_session_continues(project: Path) -> None:
    async with harness([HANG, "Recovered."], project) as h:
        h.input.send_text("long task" + ENTER)
        task = asyncio.ensure_future(h.repl.run())
        await wait_until(lambda: len(h.provider.requests) == 1)
        h.repl.interrupt()
        await wait_until(lambda: "Interrupted" in h.out.getvalue())
        h.input.send_text("go on" + ENTER + CTRL_D)
        with hang_guard():
            assert await task == 0
    assert "  ⎿  Interrupted · what should caliban do instead?" in h.lines
    assert h.lines[-1] == "● Recovered."
    assert h.sent(1) == "go on"


async def test_ctrl_c_keeps_the_streamed_text(project: Path) -> None:
    gate = asyncio.Event()

    class Slow(ScriptedProvider):
        async def stream(self, request: Any) -> Any:
            async for event in super().stream(request):
                yield event
                if len(self.requests) == 1:
                    gate.set()
                    await asyncio.Event().wait()

    async with harness([], project) as h:
        h.session.provider = h.provider = Slow(["Partial answer that never ends", "Next."])
        h.input.send_text("start" + ENTER)
        task = asyncio.ensure_future(h.repl.run())
        with hang_guard():
            await gate.wait()
        h.repl.interrupt()
        await wait_until(lambda: "Interrupted" in h.out.getvalue())
        h.input.send_text("more" + ENTER + CTRL_D)
        with hang_guard():
            await task
        history = h.provider.requests[1].messages
    assert history[1].role == "assistant" and history[1].text == "Partial "
    assert "● Partial" in h.lines


async def test_ctrl_c_at_the_prompt_clears_the_line_and_twice_exits(project: Path) -> None:
    async with harness(["Only this."], project) as h:
        code = await h.run("discard me" + CTRL_C + "keep me" + ENTER + CTRL_C + CTRL_C)
    assert code == 0
    assert len(h.provider.requests) == 1
    assert h.sent(0) == "keep me"


# ---------------------------------------------------------------------------- commands


async def test_help_lists_every_command(project: Path) -> None:
    async with harness([], project) as h:
        await h.run("/help" + ENTER + CTRL_D)
    names = ["help", "clear", "context", "model", "mcp", "tools", "agents", "config", "cost"]
    names += ["resume", "exit"]
    for name in names:
        assert any(line.startswith(f"/{name}") for line in h.lines), name
    assert any(line.startswith("/model [name]   ") for line in h.lines)  # not eaten as markup


async def test_unknown_command(project: Path) -> None:
    async with harness([], project) as h:
        await h.run("/frobnicate now" + ENTER + CTRL_D)
    assert h.lines[-1] == "unknown command /frobnicate — type /help"


async def test_a_path_is_a_prompt_not_a_command(project: Path) -> None:
    async with harness(["It is a file."], project) as h:
        await h.run("/etc/hosts looks wrong" + ENTER + CTRL_D)
    assert h.sent(0) == "/etc/hosts looks wrong"


async def test_clear_starts_a_new_conversation(project: Path) -> None:
    async with harness(["First.", "Second."], project) as h:
        await h.run("one" + ENTER + "/clear" + ENTER + "two" + ENTER + CTRL_D)
    assert [m.text for m in h.provider.requests[1].messages] == ["two"]
    assert (
        "Conversation cleared. The next prompt starts afresh (/resume finds the old one)."
        in h.lines
    )


async def test_model_shows_and_switches(project: Path) -> None:
    async with harness(["ok"], project) as h:
        await h.run("/model" + ENTER + "/model claude-opus-4-1" + ENTER + "hi" + ENTER + CTRL_D)
    assert f"Model: {MODEL} (provider: scripted)" in h.lines
    assert f"Model: {MODEL} → claude-opus-4-1 (from the next prompt)" in h.lines
    assert h.provider.requests[0].model == "claude-opus-4-1"


async def test_cost_shows_tokens_cost_and_session_id(project: Path) -> None:
    usage = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=5000)
    async with harness(["ok"], project, usage=usage) as h:
        await h.run("hi" + ENTER + "/cost" + ENTER + CTRL_D)
    rows = {line.split()[0]: line.split()[-1] for line in h.lines}
    assert rows["Input"] == "1,000" and rows["Output"] == "200" and rows["Cost"] == "$0.0075"
    assert f"Model {MODEL} · session {h.session.id}" in h.lines


async def test_context_shows_categories_and_free_space(project: Path) -> None:
    usage = Usage(input_tokens=12_000)
    async with harness(["ok"], project, usage=usage) as h:
        await h.run("hello there" + ENTER + "/context" + ENTER + CTRL_D)
    labels = [line[1:].rsplit(None, 2)[0].strip() for line in h.lines if line[:2] in ("█ ", "░ ")]
    assert labels == ["System prompt", "Built-in tools", "MCP tools", "Messages", "Free space"]
    assert any(line.startswith("Context ~") and "/200k tokens" in line for line in h.lines)
    assert "Last request, as reported by the provider: 12k tokens." in h.lines


async def test_tools_lists_the_tools_on_the_wire(project: Path) -> None:
    async with harness([], project) as h:
        await h.run("/tools" + ENTER + CTRL_D)
    names = [line.split()[0] for line in h.lines if line.split()[1:2] == ["builtin"]]
    assert names == ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "TodoWrite", "WebFetch"]
    assert "8 tools on the wire" in h.lines


async def test_config_shows_each_setting_and_its_origin(project: Path) -> None:
    (project / ".caliban" / "config.toml").write_text("max_turns = 7\n")
    loaded = load_config(project)
    async with harness([], project, config=loaded) as h:
        await h.run("/config" + ENTER + CTRL_D)
    rows = {line.split()[0]: line.split()[1:] for line in h.lines if line.startswith("  ")}
    assert rows["max_turns"][0] == "7"
    folded = re.sub(r"\s+", "", h.text)  # a long path wraps inside its column
    assert f"max_turns7{project / '.caliban' / 'config.toml'}" in folded
    assert rows["model"] == ["(unset)", "default"]


async def test_mcp_without_servers_and_resume_without_sessions_and_exit(project: Path) -> None:
    async with harness([], project) as h:
        code = await h.run("/mcp" + ENTER + "/resume" + ENTER + "/exit" + ENTER)
    assert code == 0
    assert any("No MCP servers in this session" in line for line in h.lines)
    assert "No saved sessions in this project yet." in h.lines


async def test_resume_lists_and_restores_a_saved_session(project: Path) -> None:
    from caliban.session.resume import attach_transcript, close_transcript

    async with harness(["Noted."], project) as h:
        attach_transcript(h.session)
        await h.run("remember the number 7" + ENTER + CTRL_D)
        close_transcript(h.session)
        saved = h.session.id
    async with harness(["It was 7."], project) as h:
        await h.run("/resume" + ENTER + "/resume 1" + ENTER + "which number?" + ENTER + CTRL_D)
        assert h.session.id == saved
    listed = [line for line in h.lines if line.startswith("  1. ")]
    assert listed and listed[0].split()[1] == saved[:8] and "remember the number 7" in listed[0]
    resumed = next(i for i, line in enumerate(h.lines) if "Resumed session" in line)
    assert h.lines[resumed].startswith(f"  ⎿  Resumed session {saved}")
    assert h.lines[resumed + 1 : resumed + 3] == ["> remember the number 7", "● Noted."]
    assert [m.text for m in h.provider.requests[0].messages] == [
        "remember the number 7",
        "Noted.",
        "which number?",
    ]


def test_a_prompt_line_is_a_command_only_when_it_starts_with_slash_and_a_word() -> None:
    assert parse_slash("/model  opus ") == ("model", "opus")
    assert parse_slash("/help") == ("help", "")
    assert parse_slash("/src/main.py is broken") is None
    assert parse_slash("hello /help") is None


# ---------------------------------------------------------------------------- permissions


async def test_permission_yes_runs_the_command(project: Path) -> None:
    steps = [reply(tool_call("Bash", {"command": "echo approved-run"})), "Ran it."]
    async with harness(steps, project, ask=True) as h:
        await answer_questions(h, "run it", "1", done="● Ran it.")
    text = h.text
    assert "Bash command" in text and "$ echo approved-run" in text
    assert "caliban asks because" in text
    assert "● Bash(echo approved-run)\n  ⎿  approved-run" in text
    assert h.lines[-1] == "● Ran it."


async def test_permission_no_with_a_reason_tells_the_model(project: Path) -> None:
    steps = [reply(tool_call("Bash", {"command": "rm -rf build"})), "Understood."]
    async with harness(steps, project, ask=True) as h:
        await answer_questions(
            h, "clean", "3", "use make clean instead" + ENTER, done="● Understood."
        )
    [result] = [p for p in h.provider.requests[1].messages[-1].parts if not isinstance(p, TextPart)]
    assert result.is_error  # type: ignore[union-attr]
    assert "The user said: use make clean instead" in result.text  # type: ignore[union-attr]
    assert not (project / "build").exists()


async def test_permission_dont_ask_again_for_the_session(project: Path) -> None:
    steps = [
        reply(tool_call("Bash", {"command": "echo one"})),
        reply(tool_call("Bash", {"command": "echo one more"})),
        "Both ran.",
    ]
    async with harness(steps, project, ask=True) as h:
        await answer_questions(h, "go", "2", done="● Both ran.")
    text = h.text
    assert text.count("Do you want to proceed?") <= 1
    assert text.count("Bash command") == 1
    assert "✓ Bash(echo one:*) allowed for the rest of this session" in text
    assert "  ⎿  one more" in h.lines


async def test_ctrl_c_at_a_permission_prompt_interrupts_the_turn(project: Path) -> None:
    steps = [reply(tool_call("Bash", {"command": "echo never"})), "After."]
    async with harness(steps, project, ask=True) as h:
        h.input.send_text("go" + ENTER)
        task = asyncio.ensure_future(h.repl.run())
        await wait_until(lambda: h.approver.shown == 1)
        h.input.send_text(CTRL_C)
        await wait_until(lambda: "Interrupted" in h.text)
        h.input.send_text("next" + ENTER)
        await wait_until(lambda: "● After." in h.text)
        h.input.send_text(CTRL_D)
        with hang_guard():
            await task
    assert "  ⎿  Interrupted · what should caliban do instead?" in h.lines
    assert "never" not in "".join(line for line in h.lines if line.startswith("  ⎿  n"))
    assert h.lines[-1] == "● After."


# ---------------------------------------------------------------------------- pieces


def completions(text: str, cwd: Path) -> list[tuple[str, str]]:
    completer = ReplCompleter(cwd)
    found = completer.get_completions(Document(text), CompleteEvent(text_inserted=True))
    return [(c.text, c.display_meta_text) for c in found]


def test_slash_completion_has_descriptions(tmp_path: Path) -> None:
    assert completions("/co", tmp_path) == [
        ("/context", COMMANDS["context"].description),
        ("/compact", COMMANDS["compact"].description),
        ("/config", COMMANDS["config"].description),
        ("/cost", COMMANDS["cost"].description),
        ("/copy", COMMANDS["copy"].description),
    ]
    assert completions("/model x", tmp_path) == []


def test_at_path_completion_escapes_spaces_and_continues_after_them(tmp_path: Path) -> None:
    (tmp_path / "my docs").mkdir()
    (tmp_path / "my docs" / "release notes.md").write_text("x")
    assert completions("see @my", tmp_path) == [("my\\ docs/", "directory")]
    assert completions("see @my\\ docs/rel", tmp_path) == [("my\\ docs/release\\ notes.md", "")]


def test_at_path_completion(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".hidden").write_text("")
    assert [text for text, _ in completions("look at @s", tmp_path)] == ["src/", "setup.cfg"]
    assert completions("look at @src/m", tmp_path) == [("src/main.py", "")]


async def test_toolbar_shows_model_context_and_cost(project: Path) -> None:
    async with harness(["ok"], project, usage=Usage(input_tokens=50_000, output_tokens=100)) as h:
        assert toolbar_text(h.session) == f"{MODEL} · ctx 0/200k · $0.0000"
        await h.run("hi" + ENTER + CTRL_D)
        assert toolbar_text(h.session) == f"{MODEL} · ctx 50k/200k (25%) · $0.1515"


async def test_lazy_mcp_shows_in_the_toolbar_and_context_and_clear_resets_it(
    project: Path,
) -> None:
    async with harness([], project, settings=Settings.model_validate(LAZY)) as h:
        assert h.session.activation is not None
        h.session.activation.activate(["mcp__docs__search", "mcp__github__list_issues"])
        assert " · MCP 2/24 · " in toolbar_text(h.session)
        await h.run("/context" + ENTER + "/clear" + ENTER + CTRL_D)
        assert " · MCP 0/24 · " in toolbar_text(h.session)
    assert "MCP active: 2/24 (mcp__docs__search, mcp__github__list_issues)" in h.lines


async def test_history_is_kept_per_project_and_readable_by_its_owner_only(
    project: Path, tmp_path: Path, isolated_dirs: Path
) -> None:
    import stat

    from caliban.repl.history import history_path, project_history

    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    project_history(project).append_string("remember me")
    path = history_path(project)
    assert path.parent == isolated_dirs / "state" / "prompt-history"
    assert "remember me" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert list(project_history(other).load_history_strings()) == []
    path.chmod(0o644)  # a file from before: narrowed at the next prompt
    project_history(project).append_string("again")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_without_a_terminal_it_says_to_use_p(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert run_interactive(cli_options(project)) == 2
    assert "caliban -p" in capsys.readouterr().err


async def test_agents_lists_name_source_model_tools_and_inheritance(project: Path) -> None:
    agents = project / ".caliban" / "agents"
    agents.mkdir()
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews diffs\ntools: Read, Grep\nmodel: small-model\n"
        "inherit_active_mcp: false\n---\nYou review code.\n"
    )
    (agents / "broken.md").write_text("---\nname: broken\n---\nno description\n")
    # wide enough that no path wraps, however long the temporary folder's (xdist's are longer)
    async with harness([], project, width=1000) as h:
        await h.run("/agents" + ENTER + CTRL_D)
    header = next(line.split() for line in h.lines if line.strip().startswith("name"))
    assert header == ["name", "source", "model", "tools", "inherit_active_mcp"]
    row = next(line.split() for line in h.lines if line.strip().startswith("reviewer"))
    assert row[2:] == ["small-model", "Read,", "Grep", "false"]
    assert "reviewer.md" in h.text
    assert "broken.md" in h.text, h.lines


async def test_compact_summarises_the_conversation_and_says_how_much_it_freed(
    project: Path,
) -> None:
    long_answer = "The build runs three stages and each stage writes a log. " * 40
    async with harness([long_answer, "<summary>We said hello.</summary>"], project) as h:
        await h.run(
            "hello" + ENTER + "/compact keep it short" + ENTER + "/compact" + ENTER + CTRL_D
        )
    assert "Compacting the conversation…" in h.lines
    [line] = [line for line in h.lines if "Conversation compacted (manual)" in line]
    before, after = re.findall(r"about ([\d.]+k?) → ([\d.]+k?) tokens", line)[0]
    assert _tokens(after) < _tokens(before), line  # one unit, and smaller
    assert line.endswith("the summary replaces it")
    # Claude Code's /compact: the summary replaces the whole history.
    [summary] = h.session.conversation.messages
    assert summary.text.startswith("This conversation was compacted")
    assert "hello" in summary.text  # the user's latest request, verbatim
    # Nothing new since: the second /compact has only the summary to work on, and says so.
    assert "Not compacted: nothing new to compact since the last compaction" in h.lines


def _tokens(shown: str) -> float:
    return float(shown.removesuffix("k")) * (1000 if shown.endswith("k") else 1)


async def test_compact_of_a_conversation_smaller_than_its_summary_keeps_it(project: Path) -> None:
    async with harness(
        ["hi", "<summary>The user greeted; the model answered.</summary>"], project
    ) as h:
        await h.run("hello" + ENTER + "/compact" + ENTER + CTRL_D)
    assert "is already no larger than its summary: nothing to free" in " ".join(h.lines)
    assert [m.text for m in h.session.conversation.messages] == ["hello", "hi"]


async def test_first_question_before_servers_connect_finds_and_calls_the_tool(
    project: Path,
) -> None:
    """Typed at once, while the MCP server is still starting (no tool list cached yet):
    ToolSearch waits for it and says so, finds the tool, the model calls it, and /context
    shows it active."""
    import sys

    from caliban.mcp.client import McpManager
    from caliban.mcp.config import ServerConfig

    gate = project / "gate"
    config = ServerConfig(
        name="catalog",
        transport="stdio",
        command=sys.executable,
        args=(str(Path(__file__).parent / "mcp_servers" / "catalog_server.py"),),
        env={"CATALOG_GATE": str(gate)},
        startup_timeout=HANG_S,
    )
    issue = "mcp__catalog__search_issues"
    steps = [
        reply(tool_call("ToolSearch", {"query": "search issues by text", "max_results": 1})),
        reply(tool_call(issue, {"query": "assignee:me"})),
        "You have one open issue.",
    ]
    async with (
        McpManager([config]) as mcp,
        harness(steps, project, mcp=mcp, settings=LAZY_SETTINGS) as h,
    ):
        assert mcp.unlisted() == ("catalog",)

        async def release_when_waiting() -> None:
            await wait_until(lambda: "waiting for catalog…" in h.text)
            gate.touch()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_when_waiting)
            await h.run("find my issues" + ENTER + "/context" + ENTER + CTRL_D)
    lines = h.lines
    start = lines.index("  ⎿  waiting for catalog…")
    assert lines[start : start + 8] == [
        "  ⎿  waiting for catalog…",
        "● ToolSearch(search issues by text)",
        "  ⎿  1 tool",
        f"  ⎿  MCP tools activated: {issue}",
        "● catalog - search_issues (MCP)(assignee:me)",
        "  ⎿  1 line",
        "● You have one open issue.",
        lines[start + 7],
    ]
    assert lines[start + 7].startswith("Context ~")
    assert f"MCP active: 1/24 ({issue})" in lines
    assert "ToolSearch" in h.provider.offered[0] and issue in h.provider.offered[1]


# ---------------------------------------------------------------------------- @path limits


def test_at_path_respects_read_deny_rules_and_bounds(project: Path) -> None:
    import os

    from caliban.config.settings import PermissionsSettings
    from caliban.repl.attach import MAX_FILE_CHARS, attach

    policy = PermissionPolicy.from_settings(
        PermissionsSettings(deny=["Read(.env)", "Read(secrets/**)"]), project_root=project
    )
    (project / ".env").write_text("TOKEN=swordfish\n")
    (project / "secrets").mkdir()
    (project / "secrets" / "key").write_text("hunter2\n")
    (project / "big.txt").write_text("x" * (MAX_FILE_CHARS * 3))
    os.mkfifo(project / "pipe")
    env = ToolEnv(cwd=project, project_root=project, read_denied=policy.read_denial)
    message, attachments, problems = attach(
        "look at @.env @secrets/key @secrets @big.txt @pipe", env
    )
    sent = "\n".join(part.text for part in message.parts if isinstance(part, TextPart))
    assert "swordfish" not in sent and "hunter2" not in sent
    assert problems == [
        "@.env not attached: the permission rule Read(.env) denies reading it",
        "@secrets/key not attached: the permission rule Read(secrets/**) denies reading it",
        "@pipe not attached: it is not a regular file (a FIFO, socket or device)",
    ]
    listing, big = attachments
    assert listing.part == TextPart(
        text='<directory path="secrets">\n'
        "[1 more left out: the permission rules deny reading them]\n</directory>"
    )
    assert big.note == f"cut to {MAX_FILE_CHARS:,} characters"
    assert big.size < MAX_FILE_CHARS + 200
    assert big.read is None and not env.file_reads  # seen in part: not a read
