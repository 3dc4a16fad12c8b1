"""The permission policy: rules, glob semantics, the decision matrix, asking and previews."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from hang import cpu_time, hang_guard
from pydantic import BaseModel

from caliban import shell
from caliban.agent import Agent
from caliban.calls.bound import bind
from caliban.calls.effects import Effects, command_effects
from caliban.calls.verdict import Allow, AllowWith, Authorizer, Deny, authorize
from caliban.config.settings import ConfigError, PermissionMode, PermissionsSettings
from caliban.messages import ToolResult
from caliban.permissions.approval import (
    PermissionAnswer,
    PermissionRequest,
    PolicyAuthorizer,
    deny_approver,
    user_denial,
)
from caliban.permissions.policy import (
    AUTO_ALLOWED,
    PLAN_MODE_REASON,
    Confined,
    Decision,
    PermissionPolicy,
    builtin_denials,
    decide,
)
from caliban.permissions.rules import (
    PermissionRules,
    Rule,
    RuleError,
    command_matches,
    path_matches,
    suggest_rule,
)
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.tools.base import (
    BUILTIN,
    BuiltinTool,
    CallContext,
    McpOrigin,
    Tool,
    ToolEnv,
    ToolOrigin,
    ToolOutput,
)
from caliban.tools.bash import Bash
from caliban.tools.diff import FileChange
from caliban.tools.edit import Edit
from caliban.tools.read import Read
from caliban.tools.write import Write
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

ROOT = Path("/proj")


# ---------------------------------------------------------------------------- rule parsing


def test_rule_parsing() -> None:
    assert Rule.parse("Bash") == Rule(text="Bash", tool="Bash")
    assert Rule.parse(" Bash(git status*) ") == Rule(
        text="Bash(git status*)", tool="Bash", pattern="git status*"
    )
    assert Rule.parse("Edit(src/**)").pattern == "src/**"
    assert Rule.parse("mcp__github__*").tool == "mcp__github__*"
    assert Rule.parse("Bash(*)").pattern is None  # the whole tool
    assert Rule.parse("Bash()").pattern is None
    assert Rule.parse("Bash(echo (a) b)").pattern == "echo (a) b"


@pytest.mark.parametrize("text", ["", "Bash(git status", "(x)", "Bash git"])
def test_malformed_rules_say_what_is_expected(text: str) -> None:
    with pytest.raises(RuleError, match=r"expected Tool or Tool\(pattern\)"):
        Rule.parse(text)


def test_a_bare_command_as_a_rule_gets_a_hint() -> None:
    with pytest.raises(RuleError, match=r"did you mean Bash\(git status\)"):
        Rule.parse("git status")


def test_tool_name_globs_and_families() -> None:
    assert Rule.parse("mcp__github__*").names("mcp__github__create_issue")
    assert not Rule.parse("mcp__github__*").names("mcp__gitlab__x")
    assert Rule.parse("mcp__github").names("mcp__github__create_issue")
    assert not Rule.parse("mcp__git").names("mcp__github__create_issue")
    assert Rule.parse("Edit").names("Write")  # Edit rules cover every file-writing tool
    assert Rule.parse("Read").names("Grep")
    assert not Rule.parse("Write").names("Edit")
    assert not Rule.parse("Bash").names("BashOutput")


# ---------------------------------------------------------------------------- glob semantics


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src/**", "/proj/src/a.py", True),
        ("src/**", "/proj/src/deep/er/a.py", True),
        ("src/**", "/proj/lib/a.py", False),
        ("src/*", "/proj/src/a.py", True),
        ("src/*", "/proj/src/deep/a.py", False),  # * does not cross /
        ("src/**/*.py", "/proj/src/a.py", True),
        ("src/**/*.py", "/proj/src/x/y/a.py", True),
        ("src/**/*.py", "/proj/src/x/a.txt", False),
        ("src", "/proj/src/x/a.py", True),  # a directory covers its contents
        ("src/", "/proj/src/x/a.py", True),
        ("./README.md", "/proj/README.md", True),
        ("./README.md", "/proj/docs/README.md", False),
        ("*.env", "/proj/config/prod.env", True),  # no slash: file name at any depth
        (".env", "/proj/a/b/.env", True),
        (".env", "/elsewhere/.env", True),
        ("*.{ts,tsx}", "/proj/web/app.tsx", True),
        ("src/**", "/other/src/a.py", False),  # relative rules never match outside the root
        ("/etc/**", "/etc/hosts", True),
        ("//etc/**", "/etc/hosts", True),
        ("/src/**", "/proj/src/a.py", True),  # a leading / also reads as project-relative
        ("/tmp/x/*", "/tmp/x/y/z", False),
        ("secrets/[ab].txt", "/proj/secrets/a.txt", True),
        ("secrets/[ab].txt", "/proj/secrets/c.txt", False),
    ],
)
def test_path_patterns(pattern: str, path: str, expected: bool) -> None:
    assert path_matches(pattern, Path(path), ROOT) is expected


def test_home_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ann")
    assert path_matches("~/.ssh/**", Path("/home/ann/.ssh/id_rsa"), ROOT)
    assert not path_matches("~/.ssh/**", Path("/home/bob/.ssh/id_rsa"), ROOT)


@pytest.mark.parametrize(
    ("pattern", "command", "expected"),
    [
        ("git status*", "git status", True),
        ("git status*", "git status --short", True),
        ("git status*", "git push", False),
        ("npm run *", "npm run build -- --out=dist/a b", True),  # * spans spaces and slashes
        ("git commit:*", "git commit -m 'x'", True),
        ("git commit:*", "git commit", True),
        ("git commit:*", "git commitx", False),
        ("ls", "ls", True),
        ("ls", "ls -la", False),
        ("rm -rf *", "rm  -rf   /tmp/x", True),  # runs of whitespace count as one
        ("echo [x]?", "echo [x]?", True),  # only * is special
        ("echo [x]?", "echo x", False),
    ],
)
def test_command_patterns(pattern: str, command: str, expected: bool) -> None:
    assert command_matches(pattern, command) is expected


@pytest.mark.parametrize(
    "line",
    [
        "git status $'\\''; touch /tmp/x",  # ANSI-C quoting
        "git status #'\ntouch /tmp/x",  # a quote inside a comment
        "git status > ~/.bashrc",
        "git status >> ~/.bashrc",
        "git status 2> ~/.bashrc",
        "git status 'unclosed",
        'git status $"x"',
    ],
)
def test_allow_rules_do_not_vouch_for_lines_that_escape_the_prefix(line: str) -> None:
    assert _decide("Bash", line, rules=rules(allow=["Bash(git status*)"])).behavior == "ask"


@pytest.mark.parametrize("line", ["git status $'\\''; touch /tmp/x", "git status #'\ntouch /tmp/x"])
def test_deny_rules_see_through_quotes_they_cannot_read(line: str) -> None:
    assert _decide("Bash", line, rules=rules(deny=["Bash(touch *)"])).behavior == "deny"


# ---------------------------------------------------------------------------- the matrix

NO_RULES = PermissionRules()


def _decide(
    tool: str,
    subject: str | None,
    *,
    mode: PermissionMode = "default",
    rules: PermissionRules = NO_RULES,
    read_only: bool = False,
    origin: ToolOrigin = BUILTIN,
    confined: Confined | None = None,
) -> Decision:
    return decide(
        tool,
        subject,
        effects_of(tool, subject),
        read_only=read_only,
        origin=origin,
        mode=mode,
        rules=rules,
        project_root=ROOT,
        confined=confined,
    )


def effects_of(tool: str, subject: str | None, cwd: Path = ROOT) -> Effects:
    """What the built-in ``tool`` does with ``subject`` (as its invocation would say)."""
    if tool == "Bash" and subject is not None:
        return command_effects(shell.analyze(subject), cwd)
    if tool in ("Write", "Edit") and subject:
        return Effects(writes=(Path(subject),))
    return Effects()


GH = McpOrigin(server="gh", tool="x")
CALLS: dict[str, dict[str, Any]] = {
    "read": {"tool": "Read", "subject": "/proj/a.py", "read_only": True},
    "search": {"tool": "ToolSearch", "subject": None, "read_only": True},
    "edit-inside": {"tool": "Edit", "subject": "/proj/src/a.py"},
    "write-outside": {"tool": "Write", "subject": "/tmp/x.py"},
    "bash": {"tool": "Bash", "subject": "npm test"},
    "mcp": {"tool": "mcp__gh__create_issue", "subject": None, "origin": GH},
    "mcp-read-only": {
        "tool": "mcp__gh__get_issue",
        "subject": None,
        "origin": GH,
        "read_only": True,
    },
}

MATRIX: dict[PermissionMode, dict[str, str]] = {
    "default": {
        "read": "allow", "search": "allow", "edit-inside": "ask", "write-outside": "ask",
        "bash": "ask", "mcp": "ask", "mcp-read-only": "ask",
    },
    "acceptEdits": {
        "read": "allow", "search": "allow", "edit-inside": "allow", "write-outside": "ask",
        "bash": "ask", "mcp": "ask", "mcp-read-only": "ask",
    },
    "plan": {
        "read": "allow", "search": "allow", "edit-inside": "deny", "write-outside": "deny",
        "bash": "deny", "mcp": "deny", "mcp-read-only": "ask",
    },
    "bypassPermissions": {
        "read": "allow", "search": "allow", "edit-inside": "allow", "write-outside": "allow",
        "bash": "allow", "mcp": "allow", "mcp-read-only": "allow",
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "call"), [(mode, call) for mode in MATRIX for call in CALLS], ids="-".join
)
def test_mode_defaults(mode: PermissionMode, call: str) -> None:
    spec = CALLS[call]
    decision = _decide(
        spec["tool"],
        spec["subject"],
        mode=mode,
        read_only=spec.get("read_only", False),
        origin=spec.get("origin", BUILTIN),
    )
    assert decision.behavior == MATRIX[mode][call], decision


def test_plan_mode_tells_the_model_why() -> None:
    decision = _decide("Edit", "/proj/a.py", mode="plan")
    assert decision.reason == PLAN_MODE_REASON
    assert "plan mode is read-only: present your plan" in decision.reason


def rules(**kw: list[str]) -> PermissionRules:
    return PermissionRules.parse(**kw)


def test_deny_beats_ask_beats_allow() -> None:
    both = rules(allow=["Bash(git *)"], ask=["Bash(git push*)"], deny=["Bash(git push --force*)"])
    assert _decide("Bash", "git status", rules=both).behavior == "allow"
    assert _decide("Bash", "git push origin", rules=both).behavior == "ask"
    denied = _decide("Bash", "git push --force", rules=both)
    assert denied.behavior == "deny" and denied.rule == "Bash(git push --force*)"
    assert "'Bash(git push --force*)' denies it" in denied.reason


def test_rules_beat_mode_defaults() -> None:
    assert (
        _decide("Read", "/proj/.env", rules=rules(deny=["Read(.env)"]), read_only=True).behavior
        == "deny"
    )
    assert (
        _decide("Read", "/proj/.env", rules=rules(ask=["Read(.env)"]), read_only=True).behavior
        == "ask"
    )
    accept = rules(ask=["Edit(migrations/**)"])
    assert (
        _decide("Edit", "/proj/migrations/1.sql", mode="acceptEdits", rules=accept).behavior
        == "ask"
    )
    assert (
        _decide("Edit", "/proj/src/a.py", rules=rules(allow=["Edit(src/**)"])).behavior == "allow"
    )
    assert _decide("Edit", "/proj/lib/a.py", rules=rules(allow=["Edit(src/**)"])).behavior == "ask"
    assert (
        _decide("mcp__gh__x", None, origin=GH, rules=rules(allow=["mcp__gh__*"])).behavior
        == "allow"
    )


def test_read_deny_rule_covers_grep_and_glob() -> None:
    deny = rules(deny=["Read(secrets/**)"])
    assert _decide("Grep", "/proj/secrets/keys", rules=deny, read_only=True).behavior == "deny"
    assert _decide("Grep", "/proj/src", rules=deny, read_only=True).behavior == "allow"


def test_edit_rule_covers_write() -> None:
    assert (
        _decide("Write", "/proj/src/new.py", rules=rules(allow=["Edit(src/**)"])).behavior
        == "allow"
    )


def test_plan_mode_cannot_be_overridden_by_allow_rules() -> None:
    allow = rules(allow=["Bash", "Edit"])
    assert _decide("Bash", "ls", mode="plan", rules=allow).behavior == "deny"
    assert _decide("Edit", "/proj/a.py", mode="plan", rules=allow).behavior == "deny"


def test_bypass_ignores_ask_rules_but_honours_deny_rules() -> None:
    both = rules(ask=["Bash(git *)"], deny=["Bash(rm *)"])
    assert _decide("Bash", "git push", mode="bypassPermissions", rules=both).behavior == "allow"
    assert _decide("Bash", "rm -rf /", mode="bypassPermissions", rules=both).behavior == "deny"


def test_writing_outside_the_root_asks_even_with_a_broad_allow_rule() -> None:
    broad = rules(allow=["Edit", "Write(**)", "Edit(*)"])
    for mode in ("default", "acceptEdits"):
        decision = _decide("Write", "/tmp/x.py", mode=mode, rules=broad)
        assert decision.behavior == "ask"
        assert "outside the project root (/proj)" in decision.reason
    assert _decide("Edit", "/proj/x.py", rules=broad).behavior == "allow"


WALLED = Confined(keeps_protected_paths=True)  # bubblewrap, Seatbelt
GRANTS_ONLY = Confined(keeps_protected_paths=False)  # Landlock


@pytest.mark.parametrize(
    "line",
    [
        "npm test",
        "echo x > /tmp/elsewhere",  # outside the project: the sandbox refuses the write
        "echo x >> .git/config",  # protected: kept read-only by the sandbox
        "eval $CMD",  # not understood: the sandbox confines whatever it is
    ],
)
def test_auto_allow_lets_sandboxed_lines_run_without_asking(line: str) -> None:
    assert _decide("Bash", line).behavior == "ask"
    decision = _decide("Bash", line, confined=WALLED)
    assert (decision.behavior, decision.reason) == ("allow", AUTO_ALLOWED)


def test_auto_allow_keeps_deny_and_ask_rules() -> None:
    both = rules(ask=["Bash(git push:*)", "Write(/proj/notes/**)"], deny=["Bash(rm:*)"])
    assert _decide("Bash", "rm -rf src", rules=both, confined=WALLED).behavior == "deny"
    assert _decide("Bash", "git push", rules=both, confined=WALLED).behavior == "ask"
    assert _decide("Bash", "echo x > notes/a", rules=both, confined=WALLED).behavior == "ask"
    assert _decide("Bash", "ls", mode="plan", confined=WALLED).behavior == "deny"


@pytest.mark.parametrize(
    "line", ["echo x >> .git/config", "eval $CMD", "cat < <(id) > x", "npm test", "git config a b"]
)
def test_auto_allow_does_not_apply_under_a_backend_that_cannot_protect(line: str) -> None:
    """Landlock only grants: any program could write .git/config or a hook inside the
    project, which run outside the sandbox later, so every line is asked about as usual."""
    assert _decide("Bash", line, confined=GRANTS_ONLY).behavior == "ask"


def test_auto_allow_under_a_backend_that_cannot_protect_asks_about_a_planted_repository(
    tmp_path: Path,
) -> None:
    """A bare repository's core.fsmonitor would run inside the sandbox, where Landlock
    cannot keep the project's .git/config read-only: still asked."""
    planted = tmp_path / "vendor"
    for part in ("objects", "refs"):
        (planted / part).mkdir(parents=True)
    (planted / "HEAD").write_text("ref: refs/heads/main\n")
    (planted / "config").write_text("[core]\n\tbare = true\n")
    effects = command_effects(shell.analyze("git status"), planted)
    assert effects.repositories
    for confined, behavior in ((GRANTS_ONLY, "ask"), (WALLED, "allow")):
        decision = decide(
            "Bash", "git status", effects, read_only=False, origin=BUILTIN, mode="default",
            rules=NO_RULES, project_root=tmp_path, confined=confined,
        )  # fmt: skip
        assert decision.behavior == behavior


def test_an_absolute_allow_rule_allows_writing_outside_the_root() -> None:
    named = rules(allow=["Edit(/tmp/scratch/**)"])
    assert _decide("Write", "/tmp/scratch/a/x.py", rules=named).behavior == "allow"
    assert _decide("Write", "/tmp/other/x.py", rules=named).behavior == "ask"


def test_path_traversal_does_not_escape_the_root_check() -> None:
    assert _decide("Write", "/proj/../etc/passwd", mode="acceptEdits").behavior == "ask"
    assert _decide("Write", "/projector/x", mode="acceptEdits").behavior == "ask"


def test_bash_allow_rules_must_cover_every_command_in_a_line() -> None:
    allow = rules(allow=["Bash(git status*)", "Bash(ls*)"])
    assert _decide("Bash", "git status && ls -la", rules=allow).behavior == "allow"
    assert _decide("Bash", "git status; rm -rf ~", rules=allow).behavior == "ask"
    assert _decide("Bash", "git status | sh", rules=allow).behavior == "ask"
    assert _decide("Bash", "ls $(rm -rf ~)", rules=allow).behavior == "ask"
    assert _decide("Bash", "ls $(rm -rf ~)", rules=rules(allow=["Bash"])).behavior == "allow"


def test_bash_deny_rules_match_any_command_in_a_line() -> None:
    deny = rules(deny=["Bash(rm *)"])
    assert _decide("Bash", "ls && rm -rf build", rules=deny).behavior == "deny"
    assert _decide("Bash", "echo $(rm -rf ~)", rules=deny).behavior == "deny"
    assert _decide("Bash", "ls", rules=deny).behavior == "ask"


# ---------------------------------------------------------------------------- policy and flags


def test_policy_from_settings_and_flags(tmp_path: Path) -> None:
    settings = PermissionsSettings(mode="acceptEdits", allow=["Read"], deny=["Bash(curl*)"])
    policy = PermissionPolicy.from_settings(
        settings,
        project_root=tmp_path,
        allowed=["Bash(npm test*)"],
        disallowed=["mcp__slack"],
    )
    assert policy.mode == "acceptEdits"
    assert [r.text for r in policy.rules.allow] == ["Read", "Bash(npm test*)"]
    assert [r.text for r in policy.rules.deny] == ["Bash(curl*)", "mcp__slack", *builtin_denials()]
    assert (
        policy.decide(
            "Bash",
            "npm test -- -k x",
            effects_of("Bash", "npm test -- -k x"),
            read_only=False,
            origin=BUILTIN,
        ).behavior
        == "allow"
    )
    assert policy.decide("mcp__slack__post", None, read_only=False, origin=GH).behavior == "deny"
    plan = PermissionPolicy.from_settings(settings, project_root=tmp_path, mode="plan")
    assert plan.mode == "plan"


def test_malformed_rule_is_a_config_error_naming_the_file_and_line(project: Path) -> None:
    from caliban.config.settings import load_config, set_value

    config = project / ".caliban" / "config.toml"
    config.write_text('[permissions]\ndeny = [\n  "Read",\n  "Bash(git",\n]\n')
    with pytest.raises(ConfigError, match=r"config.toml:2: permissions.deny: invalid permission "):
        load_config(project)
    with pytest.raises(ConfigError, match=r"not written: .*invalid permission rule 'Bash\(git'"):
        set_value(project / ".caliban" / "other.toml", "permissions.allow", ["Bash(git"])
    assert not (project / ".caliban" / "other.toml").exists()
    with pytest.raises(ConfigError, match=r"permissions: invalid permission rule 'Bash\(git'"):
        PermissionPolicy.from_settings(
            PermissionsSettings(), project_root=project, allowed=["Bash(git"]
        )


@pytest.mark.parametrize(
    ("tool", "subject", "expected"),
    [
        ("Edit", "/proj/src/pkg/a.py", "Edit(src/**)"),
        ("Write", "/proj/setup.py", "Edit(./*)"),
        ("Write", "/tmp/scratch/x.py", "Edit(/tmp/scratch/**)"),
        ("Read", "/proj/.env", "Read(./.env)"),
        ("mcp__github__create_issue", None, "mcp__github__create_issue"),
    ],
)
def test_suggested_session_rules(tool: str, subject: str | None, expected: str) -> None:
    suggestion = suggest_rule(tool, subject, ROOT)
    assert suggestion == expected
    # The suggestion, once allowed, covers the call it was made for.
    rule = Rule.parse(suggestion)
    assert rule.matches(tool, subject, project_root=ROOT)


# ---------------------------------------------------------------------------- asking


class Recorder:
    def __init__(self, *answers: PermissionAnswer) -> None:
        self.answers = list(answers)
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        self.requests.append(request)
        await asyncio.sleep(0)
        return self.answers.pop(0)


def _ctx(root: Path) -> CallContext:
    return CallContext(env=ToolEnv(cwd=root, project_root=root), call_id="c1")


async def check(
    authorizer: Authorizer, tool: Tool, arguments: dict[str, Any], ctx: CallContext
) -> str | None:
    """Why ``authorizer`` refuses one call with valid arguments (as the pipeline's
    authorize stage asks it), or None when it may run."""
    bound = bind(call_id=ctx.call_id, tool=tool, arguments=arguments, env=ctx.env)
    assert not isinstance(bound, str), bound
    match await authorize(authorizer, bound):
        case Allow() | AllowWith():
            return None
        case Deny(reason=reason):
            return reason


async def test_allow_for_session_stops_asking_for_that_pattern(tmp_path: Path) -> None:
    policy = PermissionPolicy(project_root=tmp_path)
    approver = Recorder(
        PermissionAnswer.allow_session(), PermissionAnswer.allow_once(), PermissionAnswer.deny()
    )
    authorizer = PolicyAuthorizer(policy, approver)
    ctx = _ctx(tmp_path)
    assert await check(authorizer, Bash(), {"command": "git commit -m one"}, ctx) is None
    assert approver.requests[0].suggestions == ("Bash(git commit:*)",)
    assert [r.text for r in policy.session_rules] == ["Bash(git commit:*)"]
    assert await check(authorizer, Bash(), {"command": "git commit -m two"}, ctx) is None
    assert len(approver.requests) == 1  # not asked again
    assert await check(authorizer, Bash(), {"command": "git push"}, ctx) is None  # allow once
    assert policy.session_rules == [Rule.parse("Bash(git commit:*)")]
    denied = await check(authorizer, Bash(), {"command": "rm -rf build"}, ctx)
    assert denied is not None and "the user declined this Bash call" in denied
    assert len(approver.requests) == 3


async def test_session_pattern_chosen_by_the_user(tmp_path: Path) -> None:
    policy = PermissionPolicy(project_root=tmp_path)
    authorizer = PolicyAuthorizer(policy, Recorder(PermissionAnswer.allow_session("Bash(git *)")))
    assert await check(authorizer, Bash(), {"command": "git status"}, _ctx(tmp_path)) is None
    git_log = effects_of("Bash", "git log", tmp_path)
    assert policy.decide("Bash", "git log", git_log, read_only=False, origin=BUILTIN).behavior == (
        "allow"
    )


async def test_allow_session_without_a_usable_rule_allows_that_call_only(
    tmp_path: Path,
) -> None:
    # A line caliban cannot check has no suggestion; a rule the user typed may not parse.
    policy = PermissionPolicy(project_root=tmp_path)
    approver = Recorder(
        PermissionAnswer.allow_session(), PermissionAnswer.allow_session("Bash(git status")
    )
    authorizer = PolicyAuthorizer(policy, approver)
    ctx = _ctx(tmp_path)
    assert await check(authorizer, Bash(), {"command": "echo $(date)"}, ctx) is None
    assert approver.requests[0].suggestions == ()
    assert await check(authorizer, Bash(), {"command": "git status"}, ctx) is None
    assert policy.session_rules == []  # nothing wider than what the user said was added


async def test_user_denial_reason_goes_to_the_model(tmp_path: Path) -> None:
    said = user_denial("Bash", "use pytest -x instead")
    authorizer = PolicyAuthorizer(
        PermissionPolicy(project_root=tmp_path), Recorder(PermissionAnswer.deny(said))
    )
    reason = await check(authorizer, Bash(), {"command": "pytest"}, _ctx(tmp_path))
    assert reason is not None and reason.endswith("The user said: use pytest -x instead")


async def test_concurrent_asks_are_serialised_and_rechecked(tmp_path: Path) -> None:
    policy = PermissionPolicy(project_root=tmp_path)
    approver = Recorder(PermissionAnswer.allow_session())
    authorizer = PolicyAuthorizer(policy, approver)
    ctx = _ctx(tmp_path)
    with hang_guard():
        results = await asyncio.gather(
            check(authorizer, Bash(), {"command": "npm test"}, ctx),
            check(authorizer, Bash(), {"command": "npm test -- -k fast"}, ctx),
        )
    assert results == [None, None]
    assert len(approver.requests) == 1


async def test_headless_denial_says_how_to_allow(tmp_path: Path) -> None:
    authorizer = PolicyAuthorizer(PermissionPolicy(project_root=tmp_path), deny_approver)
    reason = await check(authorizer, Bash(), {"command": "npm test"}, _ctx(tmp_path))
    assert reason == (
        "Running `npm test` requires approval (default mode asks before Bash runs); caliban is "
        "running headless (-p). Allow it with --allowed-tools 'Bash(npm test:*)' or a "
        "[permissions] allow rule."
    )
    (tmp_path / "a.py").write_text("x\n")
    reason = await check(
        authorizer, Write(), {"file_path": "a.py", "content": "y\n"}, _ctx(tmp_path)
    )
    assert reason is not None and "--allowed-tools 'Edit(./*)'" in reason


async def test_headless_allows_what_rules_allow(tmp_path: Path) -> None:
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(), project_root=tmp_path, allowed=["Bash(npm test*)"]
    )
    authorizer = PolicyAuthorizer(policy, deny_approver)
    assert await check(authorizer, Bash(), {"command": "npm test"}, _ctx(tmp_path)) is None
    assert await check(authorizer, Read(), {"file_path": "x"}, _ctx(tmp_path)) is None


async def test_relative_paths_are_resolved_against_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(deny=["Edit(sub/secret.txt)"]), project_root=tmp_path
    )
    authorizer = PolicyAuthorizer(policy, deny_approver)
    ctx = CallContext(env=ToolEnv(cwd=tmp_path / "sub", project_root=tmp_path), call_id="c")
    reason = await check(
        authorizer, Edit(), {"file_path": "secret.txt", "old_string": "a", "new_string": "b"}, ctx
    )
    assert reason is not None and "'Edit(sub/secret.txt)' denies it" in reason
    outside = await check(authorizer, Write(), {"file_path": "../../x.txt", "content": ""}, ctx)
    assert outside is not None and "outside the project root" in outside


async def test_invalid_input_is_left_to_the_tool(tmp_path: Path) -> None:
    approver = Recorder()
    provider = ScriptedProvider([reply(tool_call("Bash", {"cmd": "ls"}, id="t1")), "ok"])
    agent = Agent(
        provider=provider,
        model="m",
        system_prompt="s",
        toolset=ToolList([Bash()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        authorizer=PolicyAuthorizer(PermissionPolicy(project_root=tmp_path), approver),
    )
    with hang_guard():
        await agent.run("list")
    [result] = [p for p in provider.requests[1].messages[-1].parts if isinstance(p, ToolResult)]
    assert result.is_error and result.text.startswith("Invalid input for Bash:")
    assert approver.requests == []


class Touch(BaseModel):
    path: str


class TouchTool(BuiltinTool[Touch]):
    name = "Touch"
    description = "Create a file."
    input_model = Touch

    def subject(self, args: Touch) -> str | None:
        return args.path

    async def run(self, args: Touch, ctx: CallContext) -> ToolOutput:
        Path(args.path).touch()  # noqa: ASYNC240
        return ToolOutput.text("touched")


async def test_headless_loop_tells_the_model_and_runs_nothing(tmp_path: Path) -> None:
    target = tmp_path / "made.txt"
    provider = ScriptedProvider(
        [reply(tool_call("Touch", {"path": str(target)}, id="t1")), "I could not."]
    )
    agent = Agent(
        provider=provider,
        model="m",
        system_prompt="s",
        toolset=ToolList([TouchTool()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        authorizer=PolicyAuthorizer(PermissionPolicy(project_root=tmp_path), deny_approver),
    )
    with hang_guard():
        await agent.run("make it")
    [result] = [p for p in provider.requests[1].messages[-1].parts if isinstance(p, ToolResult)]
    assert result.is_error
    assert result.text.startswith("Permission denied for Touch: Calling Touch requires approval")
    assert "--allowed-tools 'Touch'" in result.text
    assert not target.exists()


# ---------------------------------------------------------------------------- previews


async def test_ask_request_carries_the_file_change(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\nthree\n")
    approver = Recorder(PermissionAnswer.deny())
    authorizer = PolicyAuthorizer(PermissionPolicy(project_root=tmp_path), approver)
    args = {"file_path": "a.py", "old_string": "two", "new_string": "TWO"}
    await check(authorizer, Edit(), args, _ctx(tmp_path))
    [request] = approver.requests
    assert request.tool_name == "Edit" and request.origin == BUILTIN
    assert request.subject == str(tmp_path / "a.py")
    assert request.reason == "default mode asks before Edit runs"
    assert request.suggestions == ("Edit(./*)",)
    assert request.preview() == FileChange(
        path=tmp_path / "a.py", shown="a.py", before="one\ntwo\nthree\n", after="one\nTWO\nthree\n"
    )


async def test_headless_denial_never_builds_a_preview(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x\n")
    reads: list[Path] = []

    class Spy(Edit):
        def preview(self, args: Any, env: ToolEnv) -> Any:
            reads.append(big)
            return super().preview(args, env)

    authorizer = PolicyAuthorizer(PermissionPolicy(project_root=tmp_path), deny_approver)
    args = {"file_path": "big.txt", "old_string": "x", "new_string": "y"}
    assert await check(authorizer, Spy(), args, _ctx(tmp_path)) is not None
    assert reads == []


def preview(tool: Tool, arguments: dict[str, Any], cwd: Path) -> Any:
    bound = tool.bind(arguments)
    assert not isinstance(bound, str), bound
    return bound.preview(ToolEnv(cwd=cwd, project_root=cwd))


def test_previews(tmp_path: Path) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    bash = preview(Bash(), {"command": "npm test", "description": "Run tests"}, tmp_path)
    assert bash == "$ npm test\n# Run tests"
    new_file = preview(Write(), {"file_path": "n/x.py", "content": "x = 1\n"}, tmp_path)
    assert new_file.created and new_file.shown == "n/x.py" and new_file.after == "x = 1\n"
    replace = preview(Write(), {"file_path": "crlf.txt", "content": "a\nc\n"}, tmp_path)
    assert (replace.before, replace.after) == ("a\nb\n", "a\nc\n")
    crlf = preview(
        Edit(), {"file_path": "crlf.txt", "old_string": "a\nb", "new_string": "A\nB"}, tmp_path
    )
    assert (crlf.before, crlf.after) == ("a\nb\n", "A\nB\n")
    failing = preview(
        Edit(), {"file_path": "crlf.txt", "old_string": "zzz", "new_string": "y"}, tmp_path
    )
    assert failing.startswith("(this edit would fail: old_string was not found in crlf.txt")


# ---------------------------------------------------------------------------- protected paths

HOME = Path.home()
PROTECTED = [
    "/proj/.caliban/config.toml",
    "/proj/.caliban/mcp.toml",
    "/proj/.caliban/agents/ci.md",
    "/proj/.mcp.json",
    "/proj/packages/web/.mcp.json",
    "/proj/.claude/settings.json",
    "/proj/.claude/settings.local.json",
    "/proj/.claude/hooks/format.sh",
    "/proj/.claude/commands/deploy.md",
    "/proj/.claude/skills/review/SKILL.md",
    "/proj/.caliban/commands/deploy.md",
    "/proj/.git/config",
    "/proj/.git/hooks/pre-commit",
    "/proj/.git/modules/vendor/config",
    "/proj/.git/modules/vendor/hooks/post-checkout",
    "/proj/.GIT/CONFIG",
    "/proj/.git/commondir",  # points git at another directory's config
    "/proj/.git/config.worktree",
    "/proj/.git/worktrees/feature/commondir",
    str(HOME / ".bashrc"),
    str(HOME / ".zshenv"),
    str(HOME / ".profile"),
    str(HOME / ".gitconfig"),
    str(HOME / ".config/git/config"),
    str(HOME / ".ssh/authorized_keys"),
    str(HOME / ".claude/settings.json"),
]
ORDINARY = [
    "/proj/src/app.py",
    "/proj/.gitignore",
    "/proj/.github/workflows/ci.yml",
    "/proj/.git-blame-ignore-revs",
    "/proj/docs/gitconfig.md",
    "/proj/.claude/agents/reviewer.md",
    "/proj/mcp.json",
    "/proj/.gitmodules",
    "/proj/git/config",
]


@pytest.mark.parametrize("path", PROTECTED)
@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_writing_a_protected_path_always_asks(path: str, mode: PermissionMode) -> None:
    broad = rules(allow=["Edit", "Write(**)", "Edit(.git)", "Edit(//**)", "Edit(~/**)"])
    decision = _decide("Write", path, mode=mode, rules=broad)
    assert decision.behavior == "ask", decision
    assert decision.reason.startswith(f"{path} is protected: ")
    assert _decide("Edit", path, mode="bypassPermissions").behavior == "allow"
    assert _decide("Edit", path, mode="plan").behavior == "deny"


@pytest.mark.parametrize("path", ["/proj/.git", "/proj/vendor/lib/.git"])
def test_a_git_file_is_protected(path: str) -> None:
    """``.git`` as a file (``gitdir: evil``) makes ``evil/config``, with its core.fsmonitor,
    the configuration of the next ``git status``."""
    decision = _decide("Write", path, mode="acceptEdits", rules=rules(allow=["Edit(**)"]))
    assert decision.behavior == "ask" and "a .git file tells git where" in decision.reason


@pytest.mark.parametrize("path", ORDINARY)
def test_ordinary_paths_are_not_protected(path: str) -> None:
    assert _decide("Edit", path, mode="acceptEdits").behavior == "allow"


def test_only_a_rule_naming_the_file_allows_a_protected_write() -> None:
    decision = _decide("Edit", "/proj/.git/config", mode="acceptEdits")
    assert decision.suggestion == "Edit(./.git/config)"
    assert "git's configuration, which can run commands" in decision.reason
    for rule in ("Edit(./.git/config)", "Edit(.git/config)", "Write(/proj/.git/config)"):
        assert _decide("Write", "/proj/.git/config", rules=rules(allow=[rule])).behavior == "allow"
    assert _decide("Edit", str(HOME / ".bashrc")).suggestion == "Edit(~/.bashrc)"
    named = rules(allow=["Edit(~/.bashrc)"])
    assert _decide("Edit", str(HOME / ".bashrc"), rules=named).behavior == "allow"
    assert _decide("Edit", "/proj/.mcp.json", rules=rules(deny=["Edit(.mcp.json)"])).behavior == (
        "deny"
    )


async def test_headless_names_the_rule_that_would_allow_a_protected_write(tmp_path: Path) -> None:
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(), project_root=tmp_path, mode="acceptEdits", allowed=["Edit"]
    )
    authorizer = PolicyAuthorizer(policy, deny_approver)
    (tmp_path / ".git").mkdir()
    reason = await check(
        authorizer, Write(), {"file_path": ".git/config", "content": "x"}, _ctx(tmp_path)
    )
    assert reason is not None
    assert "is protected: it is git's configuration" in reason
    assert "--allowed-tools 'Edit(./.git/config)'" in reason
    assert (
        await check(authorizer, Write(), {"file_path": "a.py", "content": "x"}, _ctx(tmp_path))
        is None
    )


async def test_a_symlink_to_a_protected_file_is_protected(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / "innocent.txt").symlink_to(tmp_path / ".git" / "config")
    policy = PermissionPolicy(project_root=tmp_path, mode="acceptEdits")
    authorizer = PolicyAuthorizer(policy, deny_approver)
    reason = await check(
        authorizer, Write(), {"file_path": "innocent.txt", "content": "x"}, _ctx(tmp_path)
    )
    assert reason is not None and "is protected" in reason


def test_caliban_user_files_and_the_trust_store_are_protected() -> None:
    from caliban.config.settings import user_config_path
    from caliban.permissions.trust import trust_file

    for path in (user_config_path(), user_config_path().with_name("mcp.toml"), trust_file()):
        decision = _decide("Write", str(path), rules=rules(allow=["Edit(//**)"]))
        assert decision.behavior == "ask" and "is protected" in decision.reason


def test_claude_codes_user_directory_is_protected_where_claude_config_dir_puts_it() -> None:
    from caliban.config.paths import claude_user_dir

    # Its settings.json hooks run in the next session, wherever $CLAUDE_CONFIG_DIR points.
    settings = claude_user_dir() / "settings.json"
    assert not settings.is_relative_to(Path.home())
    decision = _decide("Write", str(settings), rules=rules(allow=["Edit(//**)"]))
    assert decision.behavior == "ask"
    assert decision.reason == f"{settings} is protected: it is Claude Code's user configuration"


async def test_a_symlink_loop_is_decided_not_raised(tmp_path: Path) -> None:
    # Path.resolve() raises on a loop (Python < 3.13); the call must still get an answer.
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    policy = PermissionPolicy(project_root=tmp_path, mode="acceptEdits")
    authorizer = PolicyAuthorizer(policy, deny_approver)
    ctx = _ctx(tmp_path)
    assert await check(authorizer, Write(), {"file_path": "a", "content": "x"}, ctx) is None
    assert await check(authorizer, Bash(), {"command": "echo x > a"}, ctx) is not None
    allowed = PermissionPolicy(project_root=tmp_path, mode="acceptEdits")
    allowed.allow_for_session("Bash(echo:*)")
    decision = allowed.decide(
        "Bash",
        "echo x > a",
        effects_of("Bash", "echo x > a", tmp_path),
        read_only=False,
        origin=BUILTIN,
    )
    assert decision.behavior == "allow"


async def test_a_line_no_rule_can_check_says_why_and_what_would_allow_it(tmp_path: Path) -> None:
    authorizer = PolicyAuthorizer(PermissionPolicy(project_root=tmp_path), deny_approver)
    reason = await check(authorizer, Bash(), {"command": "echo $(date)"}, _ctx(tmp_path))
    assert reason is not None
    assert "no rule can vouch for this command line (command substitution" in reason
    assert "--allowed-tools 'Bash'" in reason and "--allowed-tools ''" not in reason


# ---------------------------------------------------------------------------- redirections


def _bash(command: str, **kw: Any) -> Decision:
    return decide(
        "Bash",
        command,
        effects_of("Bash", command, kw.pop("cwd", ROOT)),
        read_only=False,
        origin=BUILTIN,
        mode=kw.pop("mode", "default"),
        rules=kw.pop("rules", NO_RULES),
        project_root=ROOT,
    )


GIT_STATUS = rules(allow=["Bash(git status*)"])


@pytest.mark.parametrize("operator", [">", ">>", "2>", "&>", ">|"])
def test_a_redirection_is_a_write_of_its_target(operator: str) -> None:
    home = Path.home()
    decision = _bash(f"git status {operator} ~/.bashrc", rules=GIT_STATUS)
    assert decision.behavior == "ask"
    assert decision.reason.startswith(f"it redirects output to {home}/.bashrc, and {home}/")
    assert "is protected: every new shell runs it" in decision.reason
    assert decision.suggestion == "Edit(~/.bashrc)"
    named = rules(allow=["Bash(git status*)", "Edit(~/.bashrc)"])
    assert _bash(f"git status {operator} ~/.bashrc", rules=named).behavior == "allow"


def test_redirections_go_through_the_write_rules_and_the_mode() -> None:
    # In the project: the mode decides, as for Write (acceptEdits allows, default asks).
    assert _bash("git status > status.txt", rules=GIT_STATUS).behavior == "ask"
    accept = _bash("git status > status.txt", rules=GIT_STATUS, mode="acceptEdits")
    assert accept.behavior == "allow"
    edits = rules(allow=["Bash(git status*)", "Edit(./*)"])
    assert _bash("git status > status.txt", rules=edits).behavior == "allow"
    # Relative targets resolve against the Bash tool's working directory, through cd.
    assert _bash("git status > config", rules=GIT_STATUS, cwd=ROOT / ".git").suggestion == (
        "Edit(./.git/config)"
    )
    assert "is protected" in _bash("cd .git && git status > config", rules=GIT_STATUS).reason
    # Outside the project: asks even in acceptEdits, unless an absolute rule allows it.
    outside = _bash("git status > /tmp/s.txt", rules=GIT_STATUS, mode="acceptEdits")
    assert outside.behavior == "ask" and "outside the project root" in outside.reason
    tmp = rules(allow=["Bash(git status*)", "Edit(//tmp/**)"])
    assert _bash("git status > /tmp/s.txt", rules=tmp).behavior == "allow"
    # Deny and ask rules on the target apply; /dev/null and descriptor copies are no writes.
    no_logs = rules(allow=["Bash(git status*)"], deny=["Edit(*.log)"])
    denied = _bash("git status 2> err.log", rules=no_logs, mode="bypassPermissions")
    assert denied.behavior == "deny" and "'Edit(*.log)' denies it" in denied.reason
    assert _bash("git status > /dev/null 2>&1", rules=GIT_STATUS).behavior == "allow"


def test_a_read_redirection_honours_read_deny_rules() -> None:
    secrets = rules(allow=["Bash(cat*)"], deny=["Read(.env)"])
    decision = _bash("cat < .env", rules=secrets)
    assert decision.behavior == "deny"
    assert decision.reason == (
        f"it reads {ROOT}/.env through a redirection, and the permission rule 'Read(.env)' "
        "denies reading it"
    )
    assert _bash("cat < notes.txt", rules=secrets).behavior == "allow"


CD_AND_ECHO = rules(allow=["Bash(cd:*)", "Bash(pushd:*)", "Bash(echo:*)"])


@pytest.mark.parametrize(
    "command",
    [
        # caliban resolves /proc/self in its own process, whose directory a cd never moves:
        # it read proj/escaped while the shell, in the parent directory, wrote ../escaped.
        "cd .. && echo x > /proc/self/cwd/escaped",
        "echo x > /proc/thread-self/cwd/escaped",
        "cd .. && echo x < /dev/fd/../cwd/escaped",
        "cd / && echo x > proc/self/cwd/escaped",
        # `pushd -n` does not move and `cd -P` follows symlinks before `..`: a relative
        # target after either cannot be known.
        "pushd -n a/b && echo x > ../../escaped",
        "cd -P link/.. && echo x > escaped",
        "cd -LP link/.. && echo x > escaped",
    ],
)
def test_a_write_only_the_shell_can_place_is_not_vouched_for(command: str) -> None:
    decision = _bash(command, rules=CD_AND_ECHO, mode="acceptEdits")
    assert decision.behavior == "ask" and "no rule can vouch" in decision.reason, decision
    assert _bash(command, rules=rules(allow=["Bash"]), mode="acceptEdits").behavior == "allow"


def test_cd_dash_l_is_read_as_plain_cd() -> None:
    assert _bash("cd -L a && echo x > b", rules=CD_AND_ECHO, mode="acceptEdits").behavior == (
        "allow"
    )


def test_commands_run_without_cdpath(monkeypatch: pytest.MonkeyPatch) -> None:
    from caliban.tools._process import shell_environment

    monkeypatch.setenv("CDPATH", "/home")
    assert "CDPATH" not in shell_environment()


def test_a_command_that_asks_anyway_mentions_its_protected_write() -> None:
    decision = _bash("npm test > .mcp.json")
    assert decision.behavior == "ask"
    assert decision.reason.startswith("default mode asks before Bash runs; also, it redirects ")
    assert "it lists MCP servers" in decision.reason


@pytest.mark.parametrize(
    "pattern",
    ["/".join(["**"] * 25) + "/x", "*a" * 25 + "b", "**/a/" * 12 + "**/x", "{a,b}*" * 12 + "x"],
)
def test_a_path_rule_is_matched_in_linear_time(pattern: str) -> None:
    """A deny rule any repository may set (deny rules apply untrusted) took minutes per path
    with a backtracking regex: each Read, and each file Grep found, hung caliban."""
    deep = ROOT / "/".join(["a"] * 40) / ("a" * 200)
    with cpu_time() as spent:
        denying = rules(deny=[f"Read({pattern})"])
        decision = _decide("Read", str(deep), read_only=True, rules=denying)
    assert decision.behavior == "allow"
    assert spent.seconds < 1.0


def test_a_glob_whose_class_is_invalid_matches_it_as_text_instead_of_failing() -> None:
    denying = rules(deny=["Read([z-a]*.env)", "Read(keys/**/id_*)"])
    for path, behavior in [
        ("[z-a]prod.env", "deny"),
        ("zprod.env", "allow"),
        ("keys/a\nb/id_rsa", "deny"),  # a newline in a directory name is still a path
    ]:
        decision = _decide("Read", str(ROOT / path), read_only=True, rules=denying)
        assert decision.behavior == behavior, path


def test_the_repositorys_hooks_path_is_protected(tmp_path: Path) -> None:
    """With husky (`core.hooksPath = .husky/_`), `.husky/pre-commit` runs at the next
    allowed `git commit`: acceptEdits wrote it without asking."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "config", "core.hooksPath", ".husky/_"], cwd=tmp_path, check=True)
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(), project_root=tmp_path, mode="acceptEdits"
    )

    def write(name: str) -> Decision:
        path = str(tmp_path / name)
        return policy.decide(
            "Write", path, effects_of("Write", path), read_only=False, origin=BUILTIN
        )

    for name in (".husky/pre-commit", ".husky/_/pre-commit"):
        decision = write(name)
        assert decision.behavior == "ask" and "core.hooksPath" in decision.reason
    assert write("src/app.js").behavior == "allow"


def test_no_tool_reads_the_mcp_oauth_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A built-in deny rule every session has, whatever the settings say (an allow rule
    for Read, or bypassPermissions, included)."""
    monkeypatch.setenv("CALIBAN_STATE_DIR", str(tmp_path / "state"))
    token = tmp_path / "state" / "mcp-auth" / "github-1234.json"
    settings = PermissionsSettings(allow=["Read", "Grep"], mode="bypassPermissions")
    policy = PermissionPolicy.from_settings(settings, project_root=tmp_path)
    for tool in ("Read", "Grep", "Glob"):
        decision = policy.decide(tool, str(token), read_only=True, origin=BUILTIN)
        assert decision.behavior == "deny", tool
        assert policy.read_denial(tool, token) is not None
    assert (
        policy.decide("Read", str(tmp_path / "a.py"), read_only=True, origin=BUILTIN).behavior
        == "allow"
    )


def test_a_hard_link_to_a_protected_file_is_protected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file is protected by what it is, not only by the name written: a hard link made
    earlier into `.git/config` or `~/.bashrc` is that file."""
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(), project_root=tmp_path, mode="acceptEdits"
    )

    def write(path: Path) -> Decision:
        return policy.decide(
            "Write", str(path), effects_of("Write", str(path)), read_only=False, origin=BUILTIN
        )

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    os.link(tmp_path / ".git" / "config", tmp_path / "notes.txt")
    decision = write(tmp_path / "notes.txt")
    assert decision.behavior == "ask"
    assert f"a hard link to {tmp_path}/.git/config" in decision.reason
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.parent.mkdir()
    bashrc.write_text("# mine\n")
    os.link(bashrc, tmp_path / "rc.txt")
    assert "a hard link to" in write(tmp_path / "rc.txt").reason
    # A file with another name caliban cannot find is protected too: it may be one.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a").write_text("x")
    os.link(tmp_path / "elsewhere" / "a", tmp_path / "b.txt")
    assert "2 names (hard links)" in write(tmp_path / "b.txt").reason
    (tmp_path / "plain.txt").write_text("x")
    assert write(tmp_path / "plain.txt").behavior == "allow"
