"""Custom slash commands and skills: where they come from, how a command expands (as Claude
Code's recordings show), trust, allowed-tools and model, and skills loaded lazily."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from caliban.agent import RunResult
from caliban.config.settings import Settings
from caliban.events import Notice
from caliban.messages import TextPart, ToolResult
from caliban.permissions.approval import PolicyAuthorizer, deny_approver
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import PermissionRules
from caliban.permissions.trust import trust
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.session.context import context_report
from caliban.session.session import Session
from caliban.skills.catalog import load_catalog, split_rules
from caliban.skills.expand import substitute_arguments
from caliban.skills.invoke import CommandRefused, expand_invocation, run_command
from caliban.skills.slash import parse_slash
from caliban.subagents import AgentDefinition
from caliban.tools.base import ToolEnv
from caliban.tools.builtin import builtin_tools

pytestmark = pytest.mark.anyio

MYCMD = """---
description: My custom command
argument-hint: [file] [mode]
allowed-tools: Bash(echo:*)
model: claude-haiku-4-5
---
Please handle $ARGUMENTS carefully.
First: $1. Second: $2.
Bang: !`echo bang-output`
File: @hello.txt
"""
SKILL = """---
name: deploy-helper
description: Helps deploy the app to staging. Use when asked to deploy.
allowed-tools: Bash(echo:*)
---

# Deploy helper

SKILL-BODY-MARKER: run the deploy script with $ARGUMENTS. See reference.md for details.
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def claude_project(project: Path) -> Path:
    """The project of Claude Code's command and skill recordings."""
    write(
        project,
        {
            ".claude/commands/mycmd.md": MYCMD,
            ".claude/commands/review.md": "---\ndescription: Project review\n---\nREVIEW\n",
            ".claude/commands/sub/nested.md": "Nested command body with $ARGUMENTS\n",
            ".claude/commands/plain.md": "Plain command without frontmatter. Args: $ARGUMENTS\n",
            ".claude/skills/deploy-helper/SKILL.md": SKILL,
            ".claude/skills/deploy-helper/reference.md": "Reference details.\n",
            ".claude/skills/deploy-helper/scripts/deploy.sh": "echo deploying\n",
            ".claude/skills/no-frontmatter/SKILL.md": "Just a body without frontmatter.\n",
            "hello.txt": "hello world\n",
        },
    )
    return project


def session_for(
    root: Path,
    steps: list[Any],
    *,
    allow: list[str] = (),
    deny: list[str] = (),  # type: ignore[assignment]
) -> Session:
    catalog = load_catalog(root)
    policy = PermissionPolicy(
        project_root=root, rules=PermissionRules.parse(allow=allow, deny=deny)
    )
    return Session(
        settings=Settings(),
        provider=ScriptedProvider(steps),
        model="main-model",
        system_prompt="You are a test.",
        env=ToolEnv(cwd=root, project_root=root),
        builtins=builtin_tools(),
        skills=catalog.items,
        permissions=policy,
        authorizer=PolicyAuthorizer(policy, deny_approver),
    )


def texts(session: Session, request: int = 0) -> list[str]:
    provider = session.provider
    assert isinstance(provider, ScriptedProvider)
    return [p.text for p in provider.requests[request].messages[0].parts if isinstance(p, TextPart)]


# ---------------------------------------------------------------------------- the catalog


def test_commands_and_skills_from_project_and_user_dirs(
    claude_project: Path, isolated_dirs: Path
) -> None:
    write(isolated_dirs / "claude", {"commands/usercmd.md": "---\ndescription: user cmd\n---\nU\n"})
    write(isolated_dirs / "config", {"commands/mycmd.md": "shadowed by the project's\n"})
    write(claude_project, {".caliban/commands/own.md": "caliban's own directory\n"})
    catalog = load_catalog(claude_project)
    assert [(i.name, i.kind, i.scope) for i in catalog.items] == [
        ("own", "command", "project"),
        ("mycmd", "command", "project"),
        ("plain", "command", "project"),
        ("review", "command", "project"),
        ("sub:nested", "command", "project"),
        ("deploy-helper", "skill", "project"),
        ("no-frontmatter", "skill", "project"),
        ("usercmd", "command", "user"),
    ]
    mycmd = catalog.find("mycmd")
    assert mycmd is not None and mycmd.body.startswith("Please handle")
    assert (mycmd.description, mycmd.argument_hint, mycmd.model) == (
        "My custom command",
        "[file] [mode]",
        "claude-haiku-4-5",
    )
    assert [rule.text for rule in mycmd.allowed_tools] == ["Bash(echo:*)"]
    plain = catalog.find("/plain")
    assert plain is not None
    assert plain.description == "Plain command without frontmatter. Args: $ARGUMENTS"
    assert catalog.warnings == ()


def test_bad_files_warn_and_are_skipped(project: Path) -> None:
    write(
        project,
        {
            ".claude/commands/broken.md": "---\n- a list\n---\nbody\n",
            ".claude/commands/alias.md": "---\nmodel: opusplan\nallowed-tools: Bash(\n---\nbody\n",
            ".claude/commands/hidden.md": "---\ndisable-model-invocation: true\n---\nbody\n",
        },
    )
    catalog = load_catalog(project)
    assert [item.name for item in catalog.items] == ["alias", "hidden"]
    warnings = "\n".join(catalog.warnings)
    assert "broken.md: the frontmatter is not `field: value` lines" in warnings
    assert "alias.md: model 'opusplan' is not supported; the session's model is used" in warnings
    assert "alias.md: allowed-tools: invalid permission rule 'Bash('" in warnings
    hidden = catalog.find("hidden")
    assert hidden is not None and not hidden.model_invocable


def test_allowed_tools_split_like_claude_code() -> None:
    assert split_rules("Bash(git add:*), Bash(git status:*), Read") == [
        "Bash(git add:*)",
        "Bash(git status:*)",
        "Read",
    ]
    assert split_rules("Read Grep Bash(echo a b)") == ["Read", "Grep", "Bash(echo a b)"]


def test_slash_parsing() -> None:
    assert parse_slash("/sub:nested x y") == ("sub:nested", "x y")
    assert parse_slash("/etc/hosts is wrong") is None
    assert parse_slash("hello /help") is None


# ---------------------------------------------------------------------------- expansion


def test_arguments_are_zero_based_as_in_claude_code() -> None:
    body = "ZERO=$0 ONE=$1 TWO=$2 ALL=$ARGUMENTS IDX=$ARGUMENTS[1]\n"
    assert substitute_arguments(body, "alpha beta gamma") == (
        "ZERO=alpha ONE=beta TWO=gamma ALL=alpha beta gamma IDX=beta\n"
    )
    assert substitute_arguments("First: $1. Second: $2.", "foo bar") == "First: bar. Second: ."
    assert substitute_arguments("quoted $0|$1", '"a b" c') == "quoted a b|c"
    assert substitute_arguments("No placeholder.\n", "x y") == "No placeholder.\n\nARGUMENTS: x y\n"
    assert substitute_arguments("No placeholder.\n", "") == "No placeholder.\n"


async def test_a_command_expands_like_claude_codes(claude_project: Path) -> None:
    trust(claude_project)
    session = session_for(claude_project, ["cmd done"])
    result = await run_command(session, "mycmd", "foo bar")
    assert result.text == "cmd done"
    called, read, header, body = texts(session)
    assert called == (
        "<system-reminder>\nCalled the Read tool with the following input: "
        f'{{"file_path":"{claude_project}/hello.txt"}}\n</system-reminder>'
    )
    assert read.startswith("<system-reminder>\nResult of calling the Read tool:\n")
    assert "hello world" in read
    assert header == (
        "<command-message>mycmd</command-message>\n<command-name>/mycmd</command-name>\n"
        "<command-args>foo bar</command-args>\n"
    )
    assert body == (
        "Please handle foo bar carefully.\nFirst: bar. Second: .\nBang: bang-output\n"
        "File: @hello.txt\n"
    )
    provider = session.provider
    assert isinstance(provider, ScriptedProvider)
    assert provider.requests[0].model == "claude-haiku-4-5"  # the frontmatter's model
    assert session.model == "main-model"  # for that prompt only


async def test_a_command_model_alias_is_resolved_for_the_provider(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``model: haiku`` in a Claude Code command means Claude Code's Haiku with Anthropic;
    with a provider where the alias means nothing, the session's model and a warning, unless
    ANTHROPIC_DEFAULT_HAIKU_MODEL names one."""
    write(project, {".claude/commands/quick.md": "---\nmodel: haiku\n---\nbe quick\n"})
    monkeypatch.delenv("ANTHROPIC_DEFAULT_HAIKU_MODEL", raising=False)
    session = session_for(project, ["ok", "ok", "ok"])
    provider = session.provider
    assert isinstance(provider, ScriptedProvider)
    monkeypatch.setattr(provider, "name", "anthropic")
    events: list[Any] = []
    session.add_listener(events.append)
    await run_command(session, "quick", "")
    assert provider.requests[0].model == "claude-haiku-4-5-20251001"

    monkeypatch.setattr(provider, "name", "openai")
    await run_command(session, "quick", "")
    assert provider.requests[1].model == "main-model"
    assert any(
        "/quick: model 'haiku' is a Claude Code alias with no meaning for openai" in e.text
        for e in events
        if isinstance(e, Notice)
    )
    monkeypatch.setenv("ANTHROPIC_DEFAULT_HAIKU_MODEL", "local-small")
    await run_command(session, "quick", "")
    assert provider.requests[2].model == "local-small"


async def test_a_skill_run_by_the_user_starts_with_its_base_directory(
    claude_project: Path,
) -> None:
    session = session_for(claude_project, ["deployed"])
    await run_command(session, "deploy-helper", "prod")
    header, body = texts(session)
    assert header.startswith("<command-message>deploy-helper</command-message>")
    skill_dir = claude_project / ".claude/skills/deploy-helper"
    assert body.startswith(f"Base directory for this skill: {skill_dir}\n\n# Deploy helper\n")
    assert "run the deploy script with prod." in body


async def test_shell_snippets_of_an_untrusted_project_never_run(claude_project: Path) -> None:
    write(claude_project, {".claude/commands/touch.md": "!`touch ran.txt` done\n"})
    session = session_for(claude_project, [])
    skill = session.skills[[s.name for s in session.skills].index("touch")]
    with pytest.raises(CommandRefused, match="project folder you have not trusted"):
        await expand_invocation(session, skill, "")
    result = await run_command(session, "touch", "")
    assert result.is_error and result.num_turns == 0 and "not trusted" in (result.error or "")
    assert not (claude_project / "ran.txt").exists()


async def test_a_users_own_command_runs_its_snippets_anywhere(
    project: Path, isolated_dirs: Path
) -> None:
    write(isolated_dirs / "claude", {"commands/mine.md": "Here: !`pwd`\n"})
    session = session_for(project, ["ok"])
    await run_command(session, "mine", "")
    assert texts(session)[-1] == f"Here: {project}\n"


async def test_a_deny_rule_refuses_the_command(claude_project: Path) -> None:
    trust(claude_project)
    session = session_for(claude_project, [], deny=["Bash(echo:*)"])
    result = await run_command(session, "mycmd", "x")
    assert result.is_error and "Bash(echo:*)" in (result.error or "")


async def test_allowed_tools_apply_to_that_prompt_only(project: Path) -> None:
    write(
        project,
        {".claude/commands/greet.md": "---\nallowed-tools: Bash(echo:*)\n---\nSay hi.\n"},
    )
    trust(project)
    echo = reply(tool_call("Bash", {"command": "echo hi-from-command"}))
    session = session_for(project, [echo, "greeted", echo, "after"])
    await run_command(session, "greet", "")
    await session.run("again, as a plain prompt")
    provider = session.provider
    assert isinstance(provider, ScriptedProvider)
    during = provider.requests[1].messages[-1].parts[0]
    after = provider.requests[3].messages[-1].parts[0]
    assert isinstance(during, ToolResult) and not during.is_error
    assert "hi-from-command" in during.text
    assert isinstance(after, ToolResult) and after.is_error  # the rule is gone


async def test_allowed_tools_of_an_untrusted_project_are_ignored(project: Path) -> None:
    write(project, {".claude/commands/greet.md": "---\nallowed-tools: Bash\n---\nSay hi.\n"})
    session = session_for(project, [])
    skill = session.skills[0]
    expanded = await expand_invocation(session, skill, "")
    assert expanded.allow == ()
    assert any("allowed-tools ignored" in note for note in expanded.notes)


async def test_an_unknown_command_makes_no_request(project: Path) -> None:
    session = session_for(project, [])
    result = await run_command(session, "nosuchcmd", "x")
    assert result == RunResult(
        subtype="success", text="Unknown command: /nosuchcmd", num_turns=0, usage=result.usage
    )


async def test_a_project_command_attaches_only_project_files(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    write(project, {".claude/commands/leak.md": f"Look at @{secret}\n"})
    session = session_for(project, [])
    expanded = await expand_invocation(session, session.skills[0], "")
    assert "SECRET" not in str(expanded.message)
    assert any("outside the project" in note for note in expanded.notes)


# ---------------------------------------------------------------------------- lazy skills


async def test_only_names_and_descriptions_are_in_the_system_prompt(claude_project: Path) -> None:
    skill_call = reply(tool_call("Skill", {"skill": "deploy-helper", "args": "staging"}))
    session = session_for(claude_project, [skill_call, "deployed"])
    await session.run("deploy please")
    provider = session.provider
    assert isinstance(provider, ScriptedProvider)
    first, second = provider.requests
    assert "Skill" in [tool.name for tool in first.tools]
    assert first.system.endswith(
        "The following skills are available for use with the Skill tool:\n\n"
        "- mycmd: My custom command\n"
        "- plain: Plain command without frontmatter. Args: $ARGUMENTS\n"
        "- review: Project review\n"
        "- sub:nested: Nested command body with $ARGUMENTS\n"
        "- deploy-helper: Helps deploy the app to staging. Use when asked to deploy.\n"
        "- no-frontmatter: Just a body without frontmatter."
    )
    assert "SKILL-BODY-MARKER" not in str(first)
    assert second.system == first.system  # byte-stable
    result = second.messages[-1].parts[0]
    assert isinstance(result, ToolResult) and not result.is_error
    skill_dir = claude_project / ".claude/skills/deploy-helper"
    assert result.text.startswith(
        f"Launching skill: deploy-helper\n\nBase directory for this skill: {skill_dir}\n\n"
        "# Deploy helper\n\nSKILL-BODY-MARKER: run the deploy script with staging."
    )
    assert result.text.endswith("- reference.md\n- scripts/deploy.sh")


async def test_an_unknown_skill_suggests_the_closest_name(claude_project: Path) -> None:
    session = session_for(
        claude_project, [reply(tool_call("Skill", {"skill": "deploy-helpr"})), "ok"]
    )
    await session.run("go")
    provider = session.provider
    assert isinstance(provider, ScriptedProvider)
    result = provider.requests[1].messages[-1].parts[0]
    assert isinstance(result, ToolResult) and result.is_error
    assert result.text == "Unknown skill: deploy-helpr. Did you mean deploy-helper?"


def test_no_skills_no_skill_tool(project: Path) -> None:
    session = session_for(project, [])
    assert "Skill" not in session.toolset.names()
    assert session.toolset.system_addendum() == ""


def test_a_sub_agent_gets_skills_only_when_its_tools_allow(claude_project: Path) -> None:
    session = session_for(claude_project, [])
    narrow = AgentDefinition(name="x", description="x", system_prompt="x", tools=("Read",))
    wide = AgentDefinition(name="y", description="y", system_prompt="y")
    assert "Skill" not in session.toolset.for_child(narrow).names()
    assert "Skill" in session.toolset.for_child(wide).names()


def test_context_counts_skills_like_deferred_tools(claude_project: Path) -> None:
    report = context_report(session_for(claude_project, []))
    assert report.skills == 6
    assert 0 < report.skill_listing_tokens < report.system_tokens
    assert report.skill_deferred_tokens > 0
    assert report.deferred_paragraph_tokens == 0  # no MCP: the skills list is not counted there
    assert report.as_dict()["skills"]["listed"] == 6
