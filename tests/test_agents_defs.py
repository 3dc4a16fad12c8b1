"""Sub-agent definitions: frontmatter parsing, validation, discovery and precedence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hang import HANG_S

from caliban.config.paths import user_config_dir
from caliban.subagents import (
    DEFAULT_SUBAGENT,
    AgentDefinition,
    agent_rows,
    list_agents,
    parse_definition,
)


def write_agent(directory: Path, filename: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_text(text, encoding="utf-8")
    return path


REVIEWER = """\
---
name: reviewer
description: Reviews a diff for bugs.
tools: [Read, Grep, "mcp__github__*"]
model: claude-haiku-4-5
max_turns: 7
inherit_active_mcp: false
---
You review code.

Be strict.
"""


def parse(text: str) -> tuple[AgentDefinition | None, list[str]]:
    return parse_definition(Path("/p/.caliban/agents/x.md"), text)


def test_full_definition_parses() -> None:
    definition, warnings = parse(REVIEWER)
    assert warnings == []
    assert definition is not None
    assert definition.name == "reviewer"
    assert definition.description == "Reviews a diff for bugs."
    assert definition.tools == ("Read", "Grep", "mcp__github__*")
    assert definition.model == "claude-haiku-4-5"
    assert definition.max_turns == 7
    assert definition.inherit_active_mcp is False
    assert definition.system_prompt == "You review code.\n\nBe strict."


def test_minimal_definition_defaults() -> None:
    definition, warnings = parse("---\nname: a\ndescription: does a\n---\nbody\n")
    assert warnings == [] and definition is not None
    assert definition.tools is None and definition.model is None
    assert definition.max_turns is None and definition.inherit_active_mcp is True


def test_comma_separated_tools_string() -> None:
    definition, _ = parse("---\nname: a\ndescription: d\ntools: Read, Grep ,Glob,\n---\n")
    assert definition is not None and definition.tools == ("Read", "Grep", "Glob")


def test_allowlist_matches_names_and_globs_but_never_agent() -> None:
    definition, _ = parse(REVIEWER)
    assert definition is not None
    assert definition.allows("Read") and definition.allows("mcp__github__create_issue")
    assert not definition.allows("Bash")
    assert not definition.allows("mcp__gitlab__create_issue")
    assert definition.exact_tools == ("Read", "Grep")
    everything = AgentDefinition(name="x", description="d", system_prompt="")
    assert everything.allows("Bash") and everything.allows("mcp__any__thing")
    assert not everything.allows("Agent")
    named, _ = parse("---\nname: a\ndescription: d\ntools: [Agent, Read]\n---\n")
    assert named is not None and not named.allows("Agent")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("---\ndescription: d\n---\n", "field 'name' is required"),
        ("---\nname: a\n---\n", "field 'description' is required"),
        ("---\nname: a\ndescription: d\nmax_turns: many\n---\n", "field 'max_turns'"),
        ("---\nname: a\ndescription: d\nmax_turns: 0\n---\n", "field 'max_turns'"),
        ("---\nname: a\ndescription: d\ninherit_active_mcp: 'no'\n---\n", "'inherit_active_mcp'"),
        ("---\nname: a\ndescription: d\ntools: 3\n---\n", "field 'tools'"),
        ("---\nname: [a, b]\ndescription: d\n---\n", "field 'name'"),
        ("---\nname: 'has space'\ndescription: d\n---\n", "field 'name'"),
        ("---\nname: a\ndescription: d: e: f\n---\n", "invalid YAML frontmatter at line 3"),
        ("no frontmatter here\n", "no YAML frontmatter"),
        ("---\nname: a\ndescription: d\n", "no YAML frontmatter"),
        ("---\n- a\n- b\n---\n", "must be a mapping"),
    ],
)
def test_invalid_frontmatter_skips_with_a_warning_naming_file_and_field(
    text: str, expected: str
) -> None:
    definition, warnings = parse(text)
    assert definition is None
    assert warnings, "a skipped agent must say why"
    assert all(w.startswith("/p/.caliban/agents/x.md: ") for w in warnings)
    assert any(expected in w for w in warnings), warnings
    assert any("agent skipped" in w for w in warnings)


def test_unknown_field_warns_but_loads() -> None:
    definition, warnings = parse(
        "---\nname: a\ndescription: d\ntemperature: 0.2\ncolor: red\n---\n"
    )
    assert definition is not None
    assert warnings == ["/p/.caliban/agents/x.md: unknown field 'temperature' ignored"]


def test_claude_code_model_values() -> None:
    inherit, warnings = parse("---\nname: a\ndescription: d\nmodel: inherit\n---\n")
    assert inherit is not None and inherit.model is None and warnings == []
    # Aliases are kept and resolved for the session's provider when the child starts.
    alias, warnings = parse("---\nname: a\ndescription: d\nmodel: haiku\n---\n")
    assert alias is not None and alias.model == "haiku" and warnings == []


def test_claude_code_frontmatter_fields() -> None:
    """The agent file of fixtures/claude_code agent_file_x: tools, disallowedTools, maxTurns."""
    x, warnings = parse(
        "---\nname: x\ndescription: Test agent x.\nmodel: haiku\nmaxTurns: 2\n"
        "disallowedTools: Bash\ntools: Read, Bash, Glob, Grep\npermissionMode: plan\n---\nX.\n"
    )
    assert x is not None
    assert (x.max_turns, x.tools, x.disallowed_tools) == (
        2,
        ("Read", "Bash", "Glob", "Grep"),
        ("Bash",),
    )
    assert [name for name in ("Read", "Bash", "Glob", "Grep", "Write") if x.allows(name)] == [
        "Read",
        "Glob",
        "Grep",
    ]
    assert x.tools_label == "Read, Bash, Glob, Grep except Bash"
    assert warnings == [
        "/p/.caliban/agents/x.md: field 'permissionMode' is not supported by caliban; ignored"
    ]


def test_agents_json_flag_beats_files(project: Path) -> None:
    from caliban.subagents import parse_agents_json

    write_agent(
        project / ".claude" / "agents", "r.md", "---\nname: reviewer\ndescription: file\n---\n"
    )
    extra, warnings = parse_agents_json(
        '{"reviewer": {"description": "Reviews code", "prompt": "You are a code reviewer",'
        ' "tools": ["Read"], "model": "sonnet"}}'
    )
    assert warnings == []
    [reviewer] = [d for d in list_agents(project, extra=extra)[0] if d.name == "reviewer"]
    assert (reviewer.description, reviewer.source, reviewer.model) == (
        "Reviews code",
        "cli",
        "sonnet",
    )
    assert reviewer.system_prompt == "You are a code reviewer" and reviewer.tools == ("Read",)
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_agents_json("{nope")


def test_claude_user_agents_dir_is_searched(project: Path) -> None:
    from caliban.config.paths import claude_user_dir

    write_agent(
        claude_user_dir() / "agents",
        "y.md",
        "---\nname: y\ndescription: mine\nmodel: sonnet\n---\nY.\n",
    )
    write_agent(
        user_config_dir() / "agents", "y2.md", "---\nname: y\ndescription: caliban's\n---\n"
    )
    [y] = [d for d in list_agents(project)[0] if d.name == "y"]
    assert y.description == "caliban's"  # caliban's user dir comes first
    (user_config_dir() / "agents" / "y2.md").unlink()
    [y] = [d for d in list_agents(project)[0] if d.name == "y"]
    assert (y.description, y.source, y.model) == ("mine", "claude-user", "sonnet")


def test_discovery_precedence_and_builtin(project: Path) -> None:
    caliban_dir = project / ".caliban" / "agents"
    claude_dir = project / ".claude" / "agents"
    user_dir = user_config_dir() / "agents"
    write_agent(caliban_dir, "a.md", "---\nname: shared\ndescription: from caliban\n---\n")
    write_agent(claude_dir, "a.md", "---\nname: shared\ndescription: from claude\n---\n")
    write_agent(claude_dir, "c.md", "---\nname: claude-only\ndescription: c\ncolor: blue\n---\n")
    write_agent(user_dir, "a.md", "---\nname: shared\ndescription: from user\n---\n")
    write_agent(user_dir, "u.md", "---\nname: user-only\ndescription: u\n---\n")
    definitions, warnings = list_agents(project)
    assert warnings == []
    by_name = {d.name: d for d in definitions}
    assert by_name["shared"].description == "from caliban"
    assert by_name["shared"].source == "project"
    assert by_name["claude-only"].source == "claude"
    assert by_name["user-only"].source == "user"
    assert by_name[DEFAULT_SUBAGENT].source == "builtin"
    assert [d.name for d in definitions][-1] == DEFAULT_SUBAGENT


def test_claude_dir_beats_user_dir(project: Path) -> None:
    write_agent(project / ".claude" / "agents", "a.md", "---\nname: x\ndescription: claude\n---\n")
    write_agent(user_config_dir() / "agents", "a.md", "---\nname: x\ndescription: user\n---\n")
    [x] = [d for d in list_agents(project)[0] if d.name == "x"]
    assert x.description == "claude"


def test_a_file_can_redefine_general_purpose(project: Path) -> None:
    write_agent(
        project / ".caliban" / "agents",
        "gp.md",
        "---\nname: general-purpose\ndescription: mine\ntools: Read\n---\nCustom.\n",
    )
    [gp] = [d for d in list_agents(project)[0] if d.name == DEFAULT_SUBAGENT]
    assert gp.description == "mine" and gp.tools == ("Read",)


def test_bad_file_is_skipped_and_the_others_load(project: Path) -> None:
    directory = project / ".caliban" / "agents"
    bad = write_agent(directory, "bad.md", "---\nname: bad\ndescription: d\nmax_turns: x\n---\n")
    write_agent(directory, "good.md", "---\nname: good\ndescription: fine\n---\nGood.\n")
    write_agent(directory, "notes.txt", "not an agent")
    (directory / "binary.md").write_bytes(b"\xff\xfe---\n")
    definitions, warnings = list_agents(project)
    assert [d.name for d in definitions] == ["good", DEFAULT_SUBAGENT]
    assert any(w.startswith(f"{bad}: field 'max_turns'") for w in warnings)
    assert any("binary.md: cannot read" in w for w in warnings)


def test_duplicate_name_in_one_directory_warns(project: Path) -> None:
    directory = project / ".caliban" / "agents"
    write_agent(directory, "a.md", "---\nname: twin\ndescription: first\n---\n")
    second = write_agent(directory, "b.md", "---\nname: twin\ndescription: second\n---\n")
    definitions, warnings = list_agents(project)
    [twin] = [d for d in definitions if d.name == "twin"]
    assert twin.description == "first"
    assert len(warnings) == 1 and warnings[0].startswith(f"{second}: agent 'twin'")


def test_rows_for_tables(project: Path) -> None:
    write_agent(project / ".caliban" / "agents", "r.md", REVIEWER)
    rows = agent_rows(list_agents(project)[0])
    assert rows[0] == (
        "reviewer",
        str(project / ".caliban" / "agents" / "r.md"),
        "claude-haiku-4-5",
        "Read, Grep, mcp__github__*",
        "false",
    )
    assert rows[-1] == ("general-purpose", "(built-in)", "(parent's)", "all", "true")


@pytest.mark.slow
def test_caliban_agents_list_command(project: Path) -> None:
    write_agent(project / ".caliban" / "agents", "r.md", REVIEWER)
    write_agent(project / ".claude" / "agents", "bad.md", "---\nname: bad\n---\n")
    caliban = Path(sys.executable).with_name("caliban")
    table = subprocess.run(
        [str(caliban), "agents", "list"], capture_output=True, text=True, timeout=HANG_S, check=True
    )
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["name", "source", "model", "tools", "inherit_active_mcp"]
    assert lines[1].split()[:3] == [
        "reviewer",
        str(project / ".caliban/agents/r.md"),
        "claude-haiku-4-5",
    ]
    assert lines[1].endswith("false")
    assert "bad.md: field 'description' is required" in table.stderr
    listed = subprocess.run(
        [str(caliban), "agents", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=True,
    )
    items = json.loads(listed.stdout)
    assert [i["name"] for i in items] == ["reviewer", "general-purpose"]
    assert items[0]["tools"] == ["Read", "Grep", "mcp__github__*"]
