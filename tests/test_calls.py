"""One tool call as stages (caliban/calls/): effects computed once at bind, typed verdicts,
the policy deciding from effects rather than tool names, and where new stages plug in."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hang import hang_guard
from pydantic import BaseModel

from caliban.agent import Agent
from caliban.calls.bound import BoundCall
from caliban.calls.effects import Effects, Host, McpServer, command_effects
from caliban.calls.pipeline import CallPipeline
from caliban.calls.resolve import RepeatGuard
from caliban.events import AgentEvent, ToolFinished
from caliban.hooks import NO_HOOKS, ToolVerdict
from caliban.mcp.tools import McpTool
from caliban.messages import ToolResult
from caliban.permissions.approval import (
    PermissionAnswer,
    PermissionRequest,
    PolicyAuthorizer,
    deny_approver,
)
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import PermissionRules
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.sandbox.runtime import SandboxRuntime, Unavailable
from caliban.sandbox.settings import SandboxConfig
from caliban.shell import Understood
from caliban.shell.analysis import analyze
from caliban.tools.base import BUILTIN, BuiltinTool, CallContext, Tool, ToolEnv, ToolOutput
from caliban.tools.bash import Bash
from caliban.tools.edit import Edit
from caliban.tools.glob import Glob
from caliban.tools.grep import Grep
from caliban.tools.read import Read
from caliban.tools.web_fetch import WebFetch
from caliban.tools.write import Write
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def calls_of(function: Callable[..., Any], argument: str) -> Iterator[list[Any]]:
    """The values of ``argument`` in every call of ``function`` while the block runs, however
    it was imported (a profile hook on its code object, not a patched name)."""
    code, seen = function.__code__, []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is code:
            seen.append(frame.f_locals.get(argument))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


class Approver:
    """Answers each question in turn; ``before`` runs first (e.g. to wait for a ``cd``)."""

    def __init__(self, *answers: PermissionAnswer, before: Callable[[], Any] | None = None):
        self.answers = list(answers)
        self.requests: list[PermissionRequest] = []
        self.before = before

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        self.requests.append(request)
        if self.before is not None and len(self.requests) == 1:
            await self.before()
        return self.answers.pop(0)


def agent(
    provider: ScriptedProvider,
    root: Path,
    tools: list[Tool],
    approver: Any = deny_approver,
    policy: PermissionPolicy | None = None,
    env: ToolEnv | None = None,
    **kw: Any,
) -> Agent:
    return Agent(
        provider=provider,
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList(tools),
        env=env or ToolEnv(cwd=root, project_root=root),
        authorizer=PolicyAuthorizer(policy or PermissionPolicy(project_root=root), approver),
        **kw,
    )


def results(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    return [p for p in provider.requests[request].messages[-1].parts if isinstance(p, ToolResult)]


# ---------------------------------------------------------------------------- analysed once


async def test_an_asking_bash_call_analyses_its_line_once(tmp_path: Path) -> None:
    """Decided, asked (the suggestion, the re-decision once it has the floor), allowed for
    the session, run: one analysis (there were 11)."""
    line = "echo checked > out.txt"
    approver = Approver(PermissionAnswer.allow_session())
    provider = ScriptedProvider([reply(tool_call("Bash", {"command": line})), "ok"])
    with calls_of(analyze, "command") as analysed, hang_guard():
        await agent(provider, tmp_path, [Bash()], approver).run("go")
    assert analysed.count(line) == 1
    [request] = approver.requests
    assert request.suggestions == ("Bash(echo checked:*)",)
    assert request.effects.writes == ((tmp_path / "out.txt").resolve(),)
    assert (tmp_path / "out.txt").read_text() == "checked\n"


async def test_a_call_decided_again_after_a_cd_is_not_analysed_again(tmp_path: Path) -> None:
    """While its question is open, a parallel `cd sub` moves the shell: the redirection now
    names sub/out.txt, so the call is decided (and asked) again — from the same analysis."""
    (tmp_path / "sub").mkdir()
    line = "echo x > out.txt"
    env = ToolEnv(cwd=tmp_path, project_root=tmp_path)

    async def cd_done() -> None:
        with hang_guard():
            while env.cwd == tmp_path:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

    approver = Approver(
        PermissionAnswer.allow_once(), PermissionAnswer.deny("not there"), before=cd_done
    )
    policy = PermissionPolicy(
        project_root=tmp_path, rules=PermissionRules.parse(allow=["Bash(cd sub)"])
    )
    provider = ScriptedProvider(
        [
            reply(tool_call("Bash", {"command": line}), tool_call("Bash", {"command": "cd sub"})),
            "ok",
        ]
    )
    run = agent(provider, tmp_path, [Bash()], approver, policy, env=env)
    with calls_of(analyze, "command") as analysed, hang_guard():
        await run.run("go")
    assert analysed.count(line) == 1
    first, second = approver.requests
    assert first.effects.writes == ((tmp_path / "out.txt").resolve(),)
    assert second.effects.writes == ((tmp_path / "sub" / "out.txt").resolve(),)
    written, _ = results(provider, 1)
    assert written.is_error and "not there" in written.text
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "sub" / "out.txt").exists()


async def test_the_sandbox_places_a_call_from_the_same_analysis(tmp_path: Path) -> None:
    """Which Bash calls leave the sandbox (``excludedCommands``) is matched on the analysis
    the call was bound with, not on a second parse of its line."""
    line = "echo placed"
    config = SandboxConfig(mode="workspace-write", excluded_commands=("echo:*",))
    sandbox = SandboxRuntime(config, project_root=tmp_path, backend=Unavailable("a test"))
    assert sandbox.placement(analyze(line)) == "excluded"
    env = ToolEnv(cwd=tmp_path, project_root=tmp_path, sandbox=sandbox)
    policy = PermissionPolicy(project_root=tmp_path, rules=PermissionRules.parse(allow=["Bash"]))
    provider = ScriptedProvider([reply(tool_call("Bash", {"command": line})), "ok"])
    run = agent(provider, tmp_path, [Bash()], policy=policy, env=env)
    with calls_of(analyze, "command") as analysed, hang_guard():
        await run.run("go")
    assert analysed.count(line) == 1
    [result] = results(provider, 1)
    assert not result.is_error and result.text.startswith("placed"), result.text


# ---------------------------------------------------------------------------- effects


def effects(tool: Tool, arguments: dict[str, Any], cwd: Path) -> Effects:
    bound = tool.bind(arguments)
    assert not isinstance(bound, str), bound
    return bound.effects(cwd)


def test_each_tool_says_what_it_touches(tmp_path: Path) -> None:
    file = (tmp_path / "a.py").resolve()
    assert effects(Read(), {"file_path": "a.py"}, tmp_path) == Effects(reads=(file,))
    assert effects(Write(), {"file_path": "a.py", "content": ""}, tmp_path) == Effects(
        writes=(file,), replaces=(file,)
    )
    edit = {"file_path": str(file), "old_string": "a", "new_string": "b"}
    assert effects(Edit(), edit, Path("/elsewhere")) == Effects(writes=(file,), replaces=(file,))
    assert effects(Glob(), {"pattern": "**/*.py"}, tmp_path) == Effects(reads=(tmp_path.resolve(),))
    assert effects(Grep(), {"pattern": "x", "path": "a.py"}, tmp_path) == Effects(reads=(file,))
    fetch = {"url": "https://Docs.Python.org/3/", "prompt": "?"}
    assert effects(WebFetch(), fetch, tmp_path) == Effects(reaches=(Host("docs.python.org"),))
    mcp = McpTool(
        server="github",
        tool_name="get_issue",
        name="mcp__github__get_issue",
        description="",
        input_schema={},
    )
    assert effects(mcp, {}, tmp_path) == Effects(reaches=(McpServer("github"),))


def test_a_bash_call_runs_its_line_and_touches_what_its_redirections_name(
    tmp_path: Path,
) -> None:
    found = effects(Bash(), {"command": " cd sub && sort < in.txt > out.txt "}, tmp_path)
    assert found.runs is not None and found.runs.cwd == tmp_path
    assert isinstance(found.runs.analysis, Understood) and found.runs.line == (
        "cd sub && sort < in.txt > out.txt"
    )
    assert found.reads == ((tmp_path / "sub" / "in.txt").resolve(),)
    assert found.writes == ((tmp_path / "sub" / "out.txt").resolve(),)
    assert found.unknown is None
    unclear = effects(Bash(), {"command": "echo $(date) > x"}, tmp_path)
    assert unclear.writes == () and unclear.unknown == "command substitution ('$(date)')"
    assert effects(Bash(), {"command": "echo hi > /proc/self/cwd/x"}, tmp_path).unknown


# ---------------------------------------------------------------------- the policy reads effects


class ShellInput(BaseModel):
    script: str


class OtherShell(BuiltinTool[ShellInput]):
    """Not Bash by name: a tool that runs a command line all the same."""

    name = "OtherShell"
    description = "Runs a script."
    input_model = ShellInput

    def subject(self, args: ShellInput) -> str | None:
        return args.script

    def effects(self, args: ShellInput, cwd: Path) -> Effects:
        return command_effects(analyze(args.script), cwd)

    async def run(self, args: ShellInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text("ran")


def test_a_call_that_runs_a_line_is_decided_on_the_line_whatever_the_tool() -> None:
    root = Path("/proj")
    policy = PermissionPolicy(
        project_root=root, rules=PermissionRules.parse(allow=["OtherShell(git status:*)"])
    )

    def decide(script: str) -> str:
        bound = OtherShell().bind({"script": script})
        assert not isinstance(bound, str)
        decision = policy.decide(
            "OtherShell", script, bound.effects(root), read_only=False, origin=BUILTIN
        )
        return f"{decision.behavior}: {decision.reason}"

    assert decide("git status -s").startswith("allow")
    assert decide("git status; rm -rf x").startswith("ask")  # every command must be covered
    assert decide("git status > ~/.bashrc").startswith("ask: it redirects output to")
    assert decide("git status $(id)") == (
        "ask: no rule can vouch for this command line (command substitution ('$(id)'))"
    )
    bound = OtherShell().bind({"script": "git status && git log"})
    assert not isinstance(bound, str)
    assert policy.suggestions("OtherShell", "git status && git log", bound.effects(root)) == (
        "OtherShell(git log:*)",  # git status is allowed already
    )


# ---------------------------------------------------------------------------- verdicts and stages


class Hooks:
    """PreToolUse hooks that answer with ``verdict``."""

    def __init__(self, verdict: ToolVerdict) -> None:
        self.verdict = verdict

    def __getattr__(self, name: str) -> Any:
        return getattr(NO_HOOKS, name)

    async def before_tool(self, tool_name: str, tool_input: Any, call_id: str) -> ToolVerdict:
        return self.verdict


async def test_who_denied_shapes_what_the_model_reads(tmp_path: Path) -> None:
    events: list[AgentEvent] = []
    provider = ScriptedProvider([reply(tool_call("Bash", {"command": "ls"})), "ok"])
    hooked = agent(
        provider,
        tmp_path,
        [Bash()],
        hooks=Hooks(ToolVerdict(blocked="the hook says no")),
        emit=events.append,
    )
    with hang_guard():
        await hooked.run("go")
    [by_hook] = results(provider, 1)
    assert by_hook.text == "the hook says no"
    denying = PermissionRules.parse(deny=["Bash(ls)"])
    policy = PermissionPolicy(project_root=tmp_path, rules=denying)
    provider = ScriptedProvider([reply(tool_call("Bash", {"command": "ls"})), "ok"])
    with hang_guard():
        await agent(provider, tmp_path, [Bash()], policy=policy, emit=events.append).run("go")
    [by_rule] = results(provider, 1)
    assert by_rule.text == "Permission denied for Bash: the permission rule 'Bash(ls)' denies it"
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.denied for e in finished] == [True, True]


@pytest.mark.parametrize(
    ("word", "tool", "arguments", "questions"),
    [
        ("allow", Write(), {"file_path": "n.txt", "content": "x"}, 0),  # would ask
        ("ask", Read(), {"file_path": "n.txt"}, 1),  # a rule allows it
    ],
)
async def test_a_hooks_allow_spares_the_question_and_its_ask_forces_one(
    tmp_path: Path, word: str, tool: Tool, arguments: dict[str, Any], questions: int
) -> None:
    approver = Approver(PermissionAnswer.deny())
    policy = PermissionPolicy(project_root=tmp_path, rules=PermissionRules.parse(allow=["Read"]))
    provider = ScriptedProvider([reply(tool_call(tool.name, arguments)), "ok"])
    hooks = Hooks(ToolVerdict(decision=word))  # type: ignore[arg-type]
    with hang_guard():
        await agent(provider, tmp_path, [tool], approver, policy, hooks=hooks).run("go")
    assert len(approver.requests) == questions


async def test_the_checkpoint_stage_sees_what_an_approved_call_will_write(tmp_path: Path) -> None:
    """Issue 25's seam: a stage between authorize and execute, given the call's effects."""
    seen: list[tuple[tuple[Path, ...], bool]] = []
    target = tmp_path / "new.txt"

    class Checkpointing(CallPipeline):
        async def checkpoint(self, call: BoundCall) -> None:
            seen.append((call.effects.writes, target.exists()))

    pipeline = Checkpointing(
        toolset=ToolList([Write()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        authorizer=PolicyAuthorizer(
            PermissionPolicy(project_root=tmp_path, mode="acceptEdits"), deny_approver
        ),
        hooks=NO_HOOKS,
        repeat_guard=RepeatGuard(),
        emit=lambda event: None,
    )
    with hang_guard():
        outcome = await pipeline.run(
            tool_call("Write", {"file_path": "new.txt", "content": "x"}, id="w1")
        )
    assert not outcome.result.is_error
    assert seen == [((target.resolve(),), False)]
    assert target.read_text() == "x"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (Edit(), {"file_path": "a.py", "old_string": "a", "new_string": "b"}),
        (Write(), {"file_path": "a.py", "content": "b\n"}),
    ],
)
async def test_a_file_not_read_fails_at_bind_before_anyone_is_asked(
    tmp_path: Path, tool: Tool, arguments: dict[str, Any]
) -> None:
    """Approving an Edit of a file the session has not read could only end in that error,
    so nobody is asked (issue 27); once read, the same call asks; changed on disk since the
    read, it fails before asking again."""
    (tmp_path / "a.py").write_text("a\n")
    env = ToolEnv(cwd=tmp_path, project_root=tmp_path)
    approver = Approver(PermissionAnswer.deny())
    provider = ScriptedProvider([reply(tool_call(tool.name, arguments)), "ok"])
    with hang_guard():
        await agent(provider, tmp_path, [tool, Read()], approver, env=env).run("go")
    [unread] = results(provider, 1)
    assert unread.is_error and "has not been read in this session" in unread.text
    assert approver.requests == []

    read = reply(tool_call("Read", {"file_path": "a.py"}))
    provider = ScriptedProvider([read, reply(tool_call(tool.name, arguments)), "ok"])
    with hang_guard():
        await agent(provider, tmp_path, [tool, Read()], approver, env=env).run("go")
    assert len(approver.requests) == 1  # read: now it asks (and is refused)

    stat = (tmp_path / "a.py").stat()
    os.utime(tmp_path / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    provider = ScriptedProvider([reply(tool_call(tool.name, arguments)), "ok"])
    with hang_guard():
        await agent(provider, tmp_path, [tool, Read()], approver, env=env).run("go")
    [changed] = results(provider, 1)
    assert changed.is_error and "has changed on disk since you last read it" in changed.text
    assert len(approver.requests) == 1
