"""The Agent SDK's ``updatedPermissions`` (caliban/permissions/updates.py): an allow's rule,
directory and mode updates applied to the session and written to Claude Code's settings
files, replayed from Claude Code 2.1.197's answers in
``tests/fixtures/claude_code/permission_updates/`` and compared with the files it wrote;
an untrusted folder's files never widen the session; and the real ``claude-agent-sdk``
client driving the real executable."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from authorizers import Answering
from claude_code_recordings import FIXTURES, RECORDED_BASE
from fake_model_server import FakeModelServer
from hang import HANG_S, hang_guard

from caliban.calls.bound import bind
from caliban.calls.effects import Effects, command_effects
from caliban.calls.verdict import ALLOW, Deny, Settled, authorize
from caliban.claude_code.settings import load_claude_settings
from caliban.mcp.tools import McpTool
from caliban.permissions.approval import PermissionAnswer, PermissionRequest, PolicyAuthorizer
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import PermissionRules
from caliban.permissions.sdk_prompt import answer_from, request_frame
from caliban.permissions.updates import UpdateError, parse_updates
from caliban.shell import analyze
from caliban.tools.base import BUILTIN, Tool, ToolEnv
from caliban.tools.bash import Bash
from caliban.tools.web_fetch import WebFetch
from caliban.tools.write import Write

RECORDED = FIXTURES / "permission_updates"


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return data


def moved(value: Any, base: Path) -> Any:
    """A recording's value with Claude Code's /tmp/ccrec paths moved to ``base``."""
    return json.loads(json.dumps(value).replace(RECORDED_BASE, str(base)))


def sdk_answer(name: str, base: Path, index: int = 0) -> dict[str, Any]:
    """Claude Code's ``index``-th control_response body of a recording, paths moved."""
    response: dict[str, Any] = recorded(name)["answers"][index]["response"]["response"]
    return dict(moved(response, base))


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stands for /tmp/ccrec: the project is ``proj``, Claude Code's user directory
    ``home/.claude``."""
    (tmp_path / "proj").mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "home/.claude"))
    return tmp_path


def write_before(name: str, project: Path) -> None:
    for relative, data in recorded(name)["files_before"].items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_text(json.dumps(data, indent=2))


def files_after(base: Path) -> dict[str, Any]:
    found = {}
    for label, top in (("proj", base / "proj"), ("home", base / "home")):
        for path in sorted(top.rglob("*.json")):
            found[f"{label}/{path.relative_to(top)}"] = json.loads(path.read_text())
    return found


async def allow_with(
    project: Path,
    policy: PermissionPolicy,
    body: dict[str, Any],
    *,
    trusted: bool = True,
    command: str = "npm run first",
) -> tuple[Settled, list[str]]:
    """Ask about one Bash call and answer it with the SDK's response ``body``."""
    warnings: list[str] = []
    call = bind(
        call_id="c1",
        tool=Bash(),
        arguments={"command": command, "description": "run"},
        env=ToolEnv(cwd=project, project_root=project),
    )
    assert not isinstance(call, str)
    probe = Answering(PermissionAnswer.deny())
    authorizer = PolicyAuthorizer(policy, probe, trusted=trusted, warn=warnings.append)
    with anyio.fail_after(HANG_S):
        await authorize(authorizer, call)
    [request] = probe.requests
    answer, _ = answer_from({"subtype": "success", "response": body}, request)
    authorizer.approver = Answering(answer)
    with anyio.fail_after(HANG_S):
        verdict = await authorize(authorizer, call)
    return verdict, warnings


def bash_behavior(policy: PermissionPolicy, command: str) -> str:
    effects = command_effects(analyze(command), policy.project_root)
    return policy.decide("Bash", command, effects, read_only=False, origin=BUILTIN).behavior


# ---------------------------------------------------------------------------- parsing


def test_one_malformed_update_and_none_applies_as_in_claude_code(base: Path) -> None:
    """Recorded: an addRules entry without behavior beside a good one, and Claude Code
    applied neither (the call itself was allowed)."""
    body = sdk_answer("invalid", base)
    with pytest.raises(UpdateError):
        parse_updates(body["updatedPermissions"])
    for bad in (
        [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": None}],
          "behavior": "allow", "destination": "session"}],
        [{"type": "addRules", "rules": [{"toolName": "Bash(x"}], "behavior": "allow",
          "destination": "session"}],
        [{"type": "addRules", "rules": [], "behavior": "allow", "destination": "elsewhere"}],
        [{"type": "addDirectories", "directories": "/x", "destination": "session"}],
        [{"type": "grantEverything", "destination": "session"}],
        {"type": "setMode"},
    ):  # fmt: skip
        with pytest.raises(UpdateError):
            parse_updates(bad)


@pytest.mark.anyio
async def test_claude_codes_invalid_answer_allows_the_call_and_changes_nothing(base: Path) -> None:
    project = base / "proj"
    policy = PermissionPolicy(project_root=project)
    verdict, _ = await allow_with(project, policy, sdk_answer("invalid", base))
    assert verdict == ALLOW
    assert bash_behavior(policy, "npm run local x") == "ask"
    assert files_after(base) == {}


@pytest.mark.anyio
async def test_suggestions_are_claude_codes_for_a_command_a_host_a_tool_and_an_edit(
    base: Path,
) -> None:
    """caliban's can_use_tool suggestions, as Claude Code 2.1.197 sent them (recorded): the
    rule to localSettings for a command line (the exact one for ``rm -rf x``), a host and an
    MCP tool; acceptEdits for the session for an edit in the project."""
    project = base / "proj"
    echo = McpTool(
        server="tiny", tool_name="echo", name="mcp__tiny__echo", description="", input_schema={}
    )
    calls: list[tuple[Tool, dict[str, Any]]] = [
        (WebFetch(), {"url": "https://docs.example.com/a/b", "prompt": "summarise"}),
        (echo, {"text": "hi"}),
        (Bash(), {"command": "rm -rf x", "description": "run"}),
    ]
    theirs = [
        *(a["permission_suggestions"] for a in recorded("suggest_webfetch_mcp")["asked"][:2]),
        recorded("suggest_bash")["asked"][0]["permission_suggestions"][:1],
    ]
    for (tool, arguments), expected in zip(calls, theirs, strict=True):
        request = await asked(project, tool, arguments)
        ours = request_frame("r", request)["request"]["permission_suggestions"]
        assert ours == expected, tool.name
    write = await asked(project, Write(), {"file_path": str(project / "a.txt"), "content": "x"})
    [edits] = request_frame("r", write)["request"]["permission_suggestions"]
    assert edits == {"type": "setMode", "mode": "acceptEdits", "destination": "session"}


@pytest.mark.anyio
async def test_a_compound_line_suggests_a_rule_per_command_as_claude_code(base: Path) -> None:
    """``rm -rf build && npm test``: one ``addRules`` entry with a rule per command, the
    destructive one exact, as Claude Code 2.1.197 sent (its prefix spelled ``npm test *``,
    caliban's ``npm test:*``; both read either)."""
    project = base / "proj"
    request = await asked(project, Bash(), {"command": "rm -rf build && npm test"})
    [ours] = request_frame("r", request)["request"]["permission_suggestions"]
    [theirs] = recorded("suggest_bash")["asked"][1]["permission_suggestions"]
    assert theirs["rules"][1]["ruleContent"] == "npm test *"
    theirs["rules"][1]["ruleContent"] = "npm test:*"
    assert ours == theirs


async def asked(project: Path, tool: Tool, arguments: dict[str, Any]) -> PermissionRequest:
    """The request caliban's authorizer makes for one call in default mode."""
    call = bind(
        call_id="c1", tool=tool, arguments=arguments, env=ToolEnv(cwd=project, project_root=project)
    )
    assert not isinstance(call, str), call
    approver = Answering(PermissionAnswer.deny())
    with anyio.fail_after(HANG_S):
        await authorize(PolicyAuthorizer(PermissionPolicy(project_root=project), approver), call)
    [request] = approver.requests
    return request


# ---------------------------------------------------------------------------- applying


@pytest.mark.anyio
async def test_every_destination_is_written_as_claude_code_writes_it(base: Path) -> None:
    """Claude Code's answer in ``all``: allow rules to each destination, a deny to
    localSettings, an ask for the session, directories. The files caliban writes are the
    ones Claude Code wrote; the later calls are decided as there — except that caliban
    applies a projectSettings rule at once (Claude Code 2.1.197 asked again)."""
    project = base / "proj"
    write_before("all", project)
    policy = PermissionPolicy(project_root=project)
    verdict, warnings = await allow_with(project, policy, sdk_answer("all", base))
    assert verdict == ALLOW and warnings == []
    assert files_after(base) == moved(recorded("all")["files_after"], base)
    asked_by_claude_code = {a["input"]["command"] for a in recorded("all")["asked"][1:]}
    assert asked_by_claude_code == {"npm run project x", "npm run asked x", "npm run other x"}
    for command, behavior in {
        "npm run local x": "allow",
        "npm run user x": "allow",
        "npm run session x": "allow",
        "npm run project x": "allow",
        "npm run denied x": "deny",
        "npm run asked x": "ask",
        "npm run other x": "ask",
    }.items():
        assert bash_behavior(policy, command) == behavior, command
    assert base / "extra" in policy.working_dirs and base / "extra2" in policy.working_dirs


@pytest.mark.anyio
async def test_replace_and_remove_change_the_file_and_only_narrow_the_session(
    base: Path,
) -> None:
    """``replace_remove``: removeRules of an allow, replaceRules of the deny list. The file
    is Claude Code's; the removed allow asks again; the deny in force at start
    (``Bash(curl:*)``) still denies until the session ends — Claude Code dropped it at
    once, caliban keeps a denial it cannot trace to one file."""
    project = base / "proj"
    write_before("replace_remove", project)
    deny = tuple(
        json.loads((project / ".claude/settings.local.json").read_text())["permissions"]["deny"]
    )
    allow = ("Bash(npm ls:*)", "Bash(npm ci:*)")
    policy = PermissionPolicy(
        project_root=project, rules=PermissionRules.parse(allow=allow, deny=deny)
    )
    await allow_with(project, policy, sdk_answer("replace_remove", base))
    assert files_after(base) == moved(recorded("replace_remove")["files_after"], base)
    assert bash_behavior(policy, "npm ls") == "ask"
    assert bash_behavior(policy, "npm ci") == "allow"
    assert bash_behavior(policy, "npm pack") == "deny"
    assert bash_behavior(policy, "curl x") == "deny"


@pytest.mark.anyio
async def test_an_update_can_take_back_what_an_update_added(base: Path) -> None:
    project = base / "proj"
    policy = PermissionPolicy(project_root=project)
    deny = {"type": "addRules", "behavior": "deny", "destination": "session",
            "rules": [{"toolName": "Bash", "ruleContent": "make:*"}]}  # fmt: skip
    body = {"behavior": "allow", "updatedInput": {"command": "npm run first", "description": "run"}}
    await allow_with(project, policy, {**body, "updatedPermissions": [deny]})
    assert bash_behavior(policy, "make x") == "deny"
    remove = {**deny, "type": "removeRules"}
    await allow_with(project, policy, {**body, "updatedPermissions": [remove]})
    assert bash_behavior(policy, "make x") == "ask"


@pytest.mark.anyio
async def test_set_mode_is_written_as_claude_code_writes_it(base: Path) -> None:
    """Claude Code 2.1.197's ``set_mode`` answer: ``setMode`` plan to projectSettings,
    bypassPermissions to userSettings, acceptEdits to localSettings. It wrote
    ``permissions.defaultMode`` to the two project files (other keys kept) and nothing for
    bypassPermissions; the session ended in acceptEdits (its Write ran unasked)."""
    project = base / "proj"
    write_before("set_mode", project)
    policy = PermissionPolicy(project_root=project)
    verdict, warnings = await allow_with(project, policy, sdk_answer("set_mode", base))
    assert verdict == ALLOW and warnings == []
    assert files_after(base) == moved(recorded("set_mode")["files_after"], base)
    assert [a["tool_name"] for a in recorded("set_mode")["asked"]] == ["Bash", "Bash"]
    assert policy.mode == "acceptEdits"
    assert write_behavior(policy, project / "a.txt") == "allow"
    assert bash_behavior(policy, "npm run other x") == "ask"
    assert load_claude_settings(project, trusted=True).default_mode == "acceptEdits"


def write_behavior(policy: PermissionPolicy, path: Path) -> str:
    effects = Effects(writes=(path,))
    return policy.decide("Write", str(path), effects, read_only=False, origin=BUILTIN).behavior


# ---------------------------------------------------------------------------- attacks


@pytest.mark.anyio
async def test_an_untrusted_folders_committed_rules_never_enter_the_session(base: Path) -> None:
    """Attack: a repository commits ``.claude/settings.local.json`` allowing ``Bash``. In a
    folder not trusted, an SDK update to that file (add, replace, remove) is written, says
    it waits for trust, and the session gets the update's rule only — never the file's."""
    project = base / "proj"
    (project / ".claude").mkdir()
    committed = {"permissions": {"allow": ["Bash", "WebFetch"]}}
    (project / ".claude/settings.local.json").write_text(json.dumps(committed))
    policy = PermissionPolicy(project_root=project)
    updates = [
        {"type": "addRules", "behavior": "allow", "destination": "localSettings",
         "rules": [{"toolName": "Bash", "ruleContent": "make:*"}]},
        {"type": "removeRules", "behavior": "allow", "destination": "localSettings",
         "rules": [{"toolName": "WebFetch"}]},
        {"type": "replaceRules", "behavior": "ask", "destination": "projectSettings",
         "rules": [{"toolName": "Bash", "ruleContent": "git push:*"}]},
    ]  # fmt: skip
    body = {"behavior": "allow", "updatedInput": {"command": "npm run first", "description": "run"},
            "updatedPermissions": updates}  # fmt: skip
    verdict, warnings = await allow_with(project, policy, body, trusted=False)
    assert verdict == ALLOW
    assert len(warnings) == 3 and all("not trusted" in w for w in warnings)
    saved = json.loads((project / ".claude/settings.local.json").read_text())
    assert saved == {"permissions": {"allow": ["Bash", "Bash(make:*)"]}}
    assert bash_behavior(policy, "make x") == "allow"
    assert bash_behavior(policy, "npm run other") == "ask"  # the committed Bash: not in force
    assert bash_behavior(policy, "git push") == "ask"
    assert [r.text for r in policy.session_rules] == ["Bash(make:*)"]


@pytest.mark.anyio
async def test_an_untrusted_folders_mode_update_only_narrows(base: Path) -> None:
    """Attack: in a folder not trusted, an SDK answer sets acceptEdits (or bypassPermissions)
    in the project's files. bypassPermissions is neither taken nor written (Claude Code
    never writes it); acceptEdits holds for this session (the SDK user chose it), is
    written, and says new sessions wait for trust — which read the file without it, as they
    do a committed one. A narrowing plan is written with no warning and read back."""
    project = base / "proj"
    policy = PermissionPolicy(project_root=project)

    def body(*updates: dict[str, str]) -> dict[str, Any]:
        command = {"command": "npm run first", "description": "run"}
        return {"behavior": "allow", "updatedInput": command, "updatedPermissions": list(updates)}

    bypass = {"type": "setMode", "mode": "bypassPermissions", "destination": "localSettings"}
    verdict, warnings = await allow_with(project, policy, body(bypass), trusted=False)
    assert verdict == ALLOW and warnings == [] and policy.mode == "default"
    assert not (project / ".claude").exists()
    edits = {"type": "setMode", "mode": "acceptEdits", "destination": "projectSettings"}
    _, warnings = await allow_with(project, policy, body(edits), trusted=False)
    [warning] = warnings
    assert "defaultMode acceptEdits was saved to" in warning and "not trusted" in warning
    assert policy.mode == "acceptEdits"
    saved = json.loads((project / ".claude/settings.json").read_text())
    assert saved == {"permissions": {"defaultMode": "acceptEdits"}}
    assert load_claude_settings(project, trusted=False).default_mode is None
    plan = {"type": "setMode", "mode": "plan", "destination": "localSettings"}
    _, warnings = await allow_with(project, PermissionPolicy(project_root=project), body(plan),
                                   trusted=False)  # fmt: skip
    assert warnings == []
    assert load_claude_settings(project, trusted=False).default_mode == "plan"


@pytest.mark.anyio
async def test_a_symlinked_claude_folder_is_never_written_through(base: Path) -> None:
    """Attack: ``.claude`` committed as a link to the user's ``~/.claude``: a localSettings
    rule would become one for every project. Not written; it holds for the session."""
    project = base / "proj"
    user = base / "home/.claude"
    user.mkdir(parents=True)
    (project / ".claude").symlink_to(user)
    policy = PermissionPolicy(project_root=project)
    body = {"behavior": "allow", "updatedInput": {"command": "npm run first", "description": "run"},
            "updatedPermissions": [{"type": "addRules", "behavior": "allow",
                                    "destination": "localSettings",
                                    "rules": [{"toolName": "Bash"}]}]}  # fmt: skip
    _, warnings = await allow_with(project, policy, body)
    [warning] = warnings
    assert "symbolic link" in warning and "this session only" in warning
    assert list(user.iterdir()) == []
    assert bash_behavior(policy, "anything") == "allow"
    mode = {"type": "setMode", "mode": "acceptEdits", "destination": "localSettings"}
    policy = PermissionPolicy(project_root=project)
    _, warnings = await allow_with(project, policy, {**body, "updatedPermissions": [mode]})
    assert len(warnings) == 1 and "symbolic link" in warnings[0]
    assert list(user.iterdir()) == [] and policy.mode == "acceptEdits"


@pytest.mark.anyio
async def test_a_denied_call_applies_no_update(base: Path) -> None:
    """The updates ride on an allow; a deny rule that still refuses the (changed) input
    applies none of them."""
    project = base / "proj"
    policy = PermissionPolicy(
        project_root=project, rules=PermissionRules.parse(deny=["Bash(rm:*)"])
    )
    body = {"behavior": "allow", "updatedInput": {"command": "rm -rf x", "description": "x"},
            "updatedPermissions": [{"type": "addRules", "behavior": "allow",
                                    "destination": "localSettings",
                                    "rules": [{"toolName": "Bash"}]}]}  # fmt: skip
    verdict, _ = await allow_with(project, policy, body)
    assert isinstance(verdict, Deny)
    assert not (project / ".claude").exists() and policy.session_rules == []


# ---------------------------------------------------------------------------- the Agent SDK


def sdk_options(server: FakeModelServer, project: Path, can_use_tool: Any) -> Any:
    """The Agent SDK's options for driving ``caliban`` in ``project`` against ``server``."""
    from claude_agent_sdk import ClaudeAgentOptions

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    return ClaudeAgentOptions(
        cli_path=str(Path(sys.executable).parent / "caliban"),
        cwd=str(project),
        env=env,
        can_use_tool=can_use_tool,
    )


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_agent_sdk_saves_and_applies_its_updates(base: Path) -> None:
    """The real ``claude-agent-sdk`` client drives the real executable: its can_use_tool
    callback allows the first command with updates to localSettings, userSettings and the
    session (and a deny), and ``setMode`` acceptEdits to localSettings. The turn's next calls
    the rules cover are not asked, the denied one is refused, the rest asked, and its Write
    runs unasked; the files hold what Claude Code writes (the local file's other keys kept).
    A new session starts in acceptEdits with the saved rules: its Write and its command a
    saved rule covers are not asked, the session's rule is gone and its command asks."""
    from claude_agent_sdk import (
        ClaudeSDKClient,
        PermissionResultAllow,
        PermissionUpdate,
        ResultMessage,
        ToolPermissionContext,
    )
    from claude_agent_sdk.types import PermissionRuleValue

    from caliban.permissions.trust import trust

    project = base / "proj"
    trust(project)
    (project / ".claude").mkdir()
    (project / ".claude/settings.local.json").write_text(json.dumps({"model": "opus"}))

    def bash(command: str, index: int) -> dict[str, Any]:
        return {"id": f"toolu_{index}", "name": "Bash", "arguments": {"command": command}}

    def write(name: str, index: int) -> dict[str, Any]:
        arguments = {"file_path": str(project / name), "content": name}
        return {"id": f"toolu_w{index}", "name": "Write", "arguments": arguments}

    later = ["true local", "true user", "true session", "true denied", "true other"]
    script = [
        {"text": "One.", "tool_calls": [bash("true first", 0)]},
        {"text": "Later.", "tool_calls": [*(bash(c, i + 1) for i, c in enumerate(later)),
                                          write("a.txt", 1)]},
        {"text": "Done."},
        {"text": "Again.", "tool_calls": [write("b.txt", 2), bash("true local again", 7),
                                          bash("true session again", 8)]},
        {"text": "Done again."},
    ]  # fmt: skip
    seen: list[str] = []

    def rule(behavior: Any, destination: Any, content: str) -> PermissionUpdate:
        value = PermissionRuleValue(tool_name="Bash", rule_content=content)
        return PermissionUpdate(
            type="addRules", rules=[value], behavior=behavior, destination=destination
        )

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        seen.append(f"{name}: {tool_input.get('command') or tool_input.get('file_path')}")
        if len(seen) > 1:
            return PermissionResultAllow()
        assert [s.destination for s in context.suggestions] == ["localSettings"]
        return PermissionResultAllow(
            updated_permissions=[
                rule("allow", "localSettings", "true local:*"),
                rule("allow", "userSettings", "true user:*"),
                rule("allow", "session", "true session:*"),
                rule("deny", "localSettings", "true denied:*"),
                PermissionUpdate(type="setMode", mode="acceptEdits", destination="localSettings"),
            ]
        )

    with FakeModelServer(script) as server:
        options = sdk_options(server, project, can_use_tool)
        results: list[ResultMessage] = []
        for prompt in ("go", "again"):
            with hang_guard():
                async with ClaudeSDKClient(options) as client:
                    await client.query(prompt)
                    async for message in client.receive_response():
                        if isinstance(message, ResultMessage):
                            results.append(message)
        denied = [
            block
            for block in server.requests[2].body["messages"][-1]["content"]
            if block.get("type") == "tool_result" and block.get("is_error")
        ]
    assert seen == ["Bash: true first", "Bash: true other", "Bash: true session again"]
    assert [r.is_error for r in results] == [False, False]
    assert len(denied) == 1 and "true denied" in json.dumps(denied)
    assert (project / "a.txt").read_text() == "a.txt"
    assert (project / "b.txt").read_text() == "b.txt"
    assert files_after(base) == {
        "proj/.claude/settings.local.json": {
            "model": "opus",
            "permissions": {
                "allow": ["Bash(true local:*)"],
                "deny": ["Bash(true denied:*)"],
                "defaultMode": "acceptEdits",
            },
        },
        "home/.claude/settings.json": {"permissions": {"allow": ["Bash(true user:*)"]}},
    }
