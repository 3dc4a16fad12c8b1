"""Saving "Yes, and don't ask again" past the session (caliban/permissions/saved_rules.py):
the file's other keys kept, atomic and locked writes, files left alone when they are not
the project's own or not settings, and a hostile repository's committed
``.claude/settings.local.json`` still only narrowing in a folder that is not trusted."""

from __future__ import annotations

import json
import os
import threading
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from authorizers import Answering
from hang import HANG_S

from caliban.calls.bound import bind
from caliban.calls.verdict import ALLOW, Settled, authorize
from caliban.claude_code.settings import load_claude_settings
from caliban.mcp.tools import McpTool
from caliban.permissions.approval import PermissionAnswer, PermissionRequest, PolicyAuthorizer
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import PermissionRules
from caliban.permissions.saved_rules import RuleNotSaved, rules_file
from caliban.tools.base import Tool, ToolEnv
from caliban.tools.bash import Bash
from caliban.tools.edit import Edit
from caliban.tools.web_fetch import WebFetch
from caliban.tools.write import Write


def local_settings(project: Path) -> dict[str, object]:
    data = json.loads((project / ".claude/settings.local.json").read_text())
    assert isinstance(data, dict)
    return data


def test_a_rule_goes_to_claude_codes_local_settings_as_claude_code_writes_it(
    project: Path,
) -> None:
    saved = rules_file(project, "claude-local")
    assert saved is not None
    saved.add_allow("Bash(npm test:*)")
    saved.add_allow("Bash(npm test:*)")  # already there: once
    assert local_settings(project) == {"permissions": {"allow": ["Bash(npm test:*)"]}}
    # Claude Code 2.1.197's own file, recorded: two-space JSON, a newline at the end
    text = (project / ".claude/settings.local.json").read_text()
    assert (
        text == '{\n  "permissions": {\n    "allow": [\n      "Bash(npm test:*)"\n    ]\n  }\n}\n'
    )


def test_the_files_other_keys_are_kept(project: Path) -> None:
    (project / ".claude").mkdir()
    before = {
        "model": "opus",
        "permissions": {"allow": ["Read"], "deny": ["Bash(rm:*)"], "defaultMode": "plan"},
        "hooks": {"Stop": []},
        "env": {"X": "é"},
    }
    (project / ".claude/settings.local.json").write_text(json.dumps(before))
    os.chmod(project / ".claude/settings.local.json", 0o600)
    saved = rules_file(project, "claude-local")
    assert saved is not None
    saved.add_allow("Bash(make:*)")
    after = local_settings(project)
    assert after["permissions"] == {
        "allow": ["Read", "Bash(make:*)"],
        "deny": ["Bash(rm:*)"],
        "defaultMode": "plan",
    }
    assert {k: v for k, v in after.items() if k != "permissions"} == {
        k: v for k, v in before.items() if k != "permissions"
    }
    mode = (project / ".claude/settings.local.json").stat().st_mode & 0o777
    assert mode == 0o600  # the file keeps its permission bits
    assert [p.name for p in (project / ".claude").iterdir()] == ["settings.local.json"]


def test_caliban_project_config_keeps_its_comments(project: Path) -> None:
    config = project / ".caliban/config.toml"
    config.write_text('# mine\nmodel = "x"\n\n[permissions]\nallow = ["Read"]  # reads\n')
    saved = rules_file(project, "caliban-project")
    assert saved is not None
    saved.add_allow("Bash(make test:*)")
    text = config.read_text()
    assert "# mine" in text
    assert tomllib.loads(text)["permissions"]["allow"] == ["Read", "Bash(make test:*)"]
    assert rules_file(project, "session") is None


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        '{"permissions": ["Bash"]}',
        '{"permissions": {"allow": "Bash(ls)"}}',
    ],
)
def test_a_file_that_is_not_settings_is_left_alone(project: Path, content: str) -> None:
    (project / ".claude").mkdir()
    path = project / ".claude/settings.local.json"
    path.write_text(content)
    saved = rules_file(project, "claude-local")
    assert saved is not None
    with pytest.raises(RuleNotSaved, match=r"settings\.local\.json"):
        saved.add_allow("Bash(make:*)")
    assert path.read_text() == content


def test_a_committed_symlink_never_leads_the_write_out_of_the_project(
    project: Path, tmp_path: Path
) -> None:
    """Attack: ``.claude`` (or the file) committed as a symlink to the user's own settings
    would make a rule for this project one for every project."""
    home = tmp_path / "home-claude"
    home.mkdir()
    (home / "settings.local.json").write_text("{}")
    (project / ".claude").symlink_to(home)
    saved = rules_file(project, "claude-local")
    assert saved is not None
    with pytest.raises(RuleNotSaved, match="symbolic link"):
        saved.add_allow("Bash(make:*)")
    (project / ".claude").unlink()
    (project / ".claude").mkdir()
    (project / ".claude/settings.local.json").symlink_to(home / "settings.local.json")
    with pytest.raises(RuleNotSaved, match="symbolic link"):
        saved.add_allow("Bash(make:*)")
    assert (home / "settings.local.json").read_text() == "{}"


def test_writers_at_once_lose_nothing(project: Path) -> None:
    saved = rules_file(project, "claude-local")
    assert saved is not None
    rules = [f"Bash(tool{n}:*)" for n in range(8)]
    threads = [threading.Thread(target=saved.add_allow, args=(rule,)) for rule in rules]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    allow = local_settings(project)["permissions"]
    assert isinstance(allow, dict) and sorted(allow["allow"]) == sorted(rules)


def test_a_hostile_committed_local_settings_still_only_narrows_when_untrusted(
    project: Path,
) -> None:
    """Attack: a repository commits ``.claude/settings.local.json`` with allow rules, a
    wider mode and hooks. The user's "don't ask again" is added to it; in the folder (not
    trusted) none of what widens applies — the committed rules, nor the user's own (it
    waits for trust, as every project allow rule does) — while its deny rules do."""
    (project / ".claude").mkdir()
    (project / ".claude/settings.local.json").write_text(
        json.dumps(
            {
                "permissions": {
                    "allow": ["Bash(curl:*)", "Bash"],
                    "deny": ["Read(./secrets/**)"],
                    "defaultMode": "bypassPermissions",
                },
                "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]},
            }
        )
    )
    saved = rules_file(project, "claude-local")
    assert saved is not None
    saved.add_allow("Bash(make test:*)")
    untrusted = load_claude_settings(project, trusted=False)
    assert untrusted.allow == ()
    assert untrusted.default_mode is None
    assert untrusted.hooks == ()
    assert untrusted.deny == ("Read(./secrets/**)",)
    trusted = load_claude_settings(project, trusted=True)
    assert "Bash(make test:*)" in trusted.allow


# ---------------------------------------------------------------------------- the authorizer


async def settle(
    project: Path,
    tool: Tool,
    arguments: dict[str, Any],
    answer: PermissionAnswer,
    allow: tuple[str, ...] = (),
    trusted: bool = True,
) -> tuple[Settled, PermissionRequest, PermissionPolicy, list[str]]:
    policy = PermissionPolicy(project_root=project, rules=PermissionRules.parse(allow=allow))
    approver = Answering(answer)
    warnings: list[str] = []
    authorizer = PolicyAuthorizer(
        policy,
        approver,
        rules_file=rules_file(project, "claude-local", trusted=trusted),
        warn=warnings.append,
    )
    call = bind(
        call_id="c1",
        tool=tool,
        arguments=arguments,
        env=ToolEnv(cwd=project, project_root=project),
    )
    assert not isinstance(call, str)
    with anyio.fail_after(HANG_S):
        verdict = await authorize(authorizer, call)
    [request] = approver.requests
    return verdict, request, policy, warnings


@pytest.mark.anyio
async def test_only_the_rule_shown_for_an_understood_line_is_saved(project: Path) -> None:
    settings = project / ".claude/settings.local.json"
    always = PermissionAnswer.allow_session()
    verdict, request, _, _ = await settle(project, Bash(), {"command": "make test"}, always)
    assert verdict == ALLOW and request.saved_in == ".claude/settings.local.json"
    assert json.loads(settings.read_text())["permissions"]["allow"] == ["Bash(make test:*)"]
    # a wider pattern than the one shown (an SDK's answer) holds for the session, unsaved
    wider = PermissionAnswer.allow_session("Bash")
    _, _, policy, _ = await settle(project, Bash(), {"command": "make lint"}, wider)
    assert [r.text for r in policy.session_rules] == ["Bash"]
    assert json.loads(settings.read_text())["permissions"]["allow"] == ["Bash(make test:*)"]
    # a line the parser does not understand: no rule offered, nothing saved
    line = {"command": 'eval "$(cat x)"'}
    _, request, _, _ = await settle(project, Bash(), line, always)
    assert request.suggestions == () and request.saved_in is None
    # a redirection into a protected file: the command's rule is saved, and the write
    # still asks next time (only a rule naming that very file allows it)
    line = {"command": "echo x > .mcp.json"}
    _, request, _, _ = await settle(project, Bash(), line, always)
    assert request.suggestions == ("Bash(echo x:*)",)
    saved = tuple(json.loads(settings.read_text())["permissions"]["allow"])
    assert "Bash(echo x:*)" in saved
    _, request, _, _ = await settle(project, Bash(), line, PermissionAnswer.deny(), allow=saved)
    assert "is protected" in request.reason


@pytest.mark.anyio
async def test_a_hosts_and_an_mcp_tools_rule_are_saved_as_claude_code_writes_them(
    project: Path,
) -> None:
    """Claude Code 2.1.197 offers and writes ``WebFetch(domain:docs.example.com)`` and
    ``mcp__tiny__echo`` (recorded: permission_updates/accept_suggestions); the next
    session (trusted) is not asked again."""
    always = PermissionAnswer.allow_session()
    fetch = {"url": "https://docs.example.com/a/b", "prompt": "summarise"}
    verdict, request, _, _ = await settle(project, WebFetch(), fetch, always)
    assert verdict == ALLOW and request.suggestions == ("WebFetch(domain:docs.example.com)",)
    assert request.saved_in == ".claude/settings.local.json"
    echo = McpTool(
        server="tiny", tool_name="echo", name="mcp__tiny__echo", description="", input_schema={}
    )
    verdict, request, _, _ = await settle(project, echo, {"text": "hi"}, always)
    assert verdict == ALLOW and request.saved_in == ".claude/settings.local.json"
    saved = local_settings(project)["permissions"]
    assert saved == {"allow": ["WebFetch(domain:docs.example.com)", "mcp__tiny__echo"]}
    allow = tuple(load_claude_settings(project, trusted=True).allow)
    policy = PermissionPolicy(project_root=project, rules=PermissionRules.parse(allow=allow))
    for tool, subject in ((WebFetch(), "docs.example.com"), (echo, None)):
        decision = policy.decide(tool.name, subject, read_only=False, origin=tool.origin)
        assert decision.behavior == "allow"
    other = policy.decide("WebFetch", "example.com", read_only=False, origin=WebFetch().origin)
    assert other.behavior == "ask"
    # untrusted: saved, but only read back once trusted
    assert load_claude_settings(project, trusted=False).allow == ()


@pytest.mark.anyio
async def test_a_rule_that_cannot_be_saved_holds_for_the_session_and_says_why(
    project: Path,
) -> None:
    (project / ".claude").mkdir()
    (project / ".claude/settings.local.json").write_text("{broken")
    always = PermissionAnswer.allow_session()
    verdict, _, policy, warnings = await settle(project, Bash(), {"command": "make"}, always)
    assert verdict == ALLOW and [r.text for r in policy.session_rules] == ["Bash(make:*)"]
    [warning] = warnings
    assert "Bash(make:*) was not saved" in warning and "not valid JSON" in warning


@pytest.mark.anyio
async def test_a_rule_saved_in_a_folder_not_trusted_says_when_it_will_apply(
    project: Path,
) -> None:
    always = PermissionAnswer.allow_session()
    _, _, _, warnings = await settle(project, Bash(), {"command": "make"}, always, trusted=False)
    [warning] = warnings
    assert "saved to .claude/settings.local.json" in warning and "not trusted" in warning


@pytest.mark.anyio
async def test_allow_all_edits_is_offered_where_accept_edits_would_allow(project: Path) -> None:
    (project / "a.py").write_text("a\n")
    edit = {"file_path": "src/new.py", "old_string": "", "new_string": "x\n"}
    verdict, request, policy, _ = await settle(
        project, Edit(), edit, PermissionAnswer.allow_once(mode="acceptEdits")
    )
    assert verdict == ALLOW and request.edits_mode_allows and policy.mode == "acceptEdits"
    assert request.saved_in is None  # a file rule is never saved
    assert not (project / ".claude").exists()
    protected = {"file_path": ".mcp.json", "content": "{}"}
    _, request, _, _ = await settle(project, Write(), protected, PermissionAnswer.deny())
    assert not request.edits_mode_allows  # acceptEdits would ask about it too
    _, request, _, _ = await settle(project, Bash(), {"command": "ls"}, PermissionAnswer.deny())
    assert not request.edits_mode_allows
