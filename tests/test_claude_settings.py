"""Claude Code's settings files: layering, trust gating, and how they reach a session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from caliban.claude_code.compat import prepare, resolve_model, select_builtins
from caliban.claude_code.settings import load_claude_settings
from caliban.cli.options import CliOptions
from caliban.config.paths import claude_user_dir
from caliban.config.settings import load_config
from caliban.errors import ConfigError, UsageError
from caliban.permissions.trust import trust
from caliban.tools.builtin import builtin_tools

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"


def write_recorded_files(name: str, project: Path) -> None:
    """The project files and ~/.claude files of a recorded Claude Code scenario."""
    command = json.loads((FIXTURES / name / "command.json").read_text())
    for rel, text in command["project_files"].items():
        write(project / rel, text)
    for rel, text in command["home_files"].items():
        if rel.startswith(".claude/"):
            write(claude_user_dir() / rel.removeprefix(".claude/"), text)


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def options(project: Path, **fields: Any) -> CliOptions:
    base: dict[str, Any] = dict(
        prompt=None,
        print_mode=True,
        output_format="text",
        model=None,
        provider=None,
        max_turns=None,
        permission_mode=None,
        allowed_tools=(),
        disallowed_tools=(),
        continue_session=False,
        resume=None,
        cwd=project,
    )
    return CliOptions(**{**base, **fields})


def test_recorded_layers_in_a_trusted_folder(project: Path) -> None:
    """fixtures/claude_code/settings_layers: env from every layer (local wins), rules added
    together, the project's model over the user's."""
    write_recorded_files("settings_layers", project)
    settings = load_claude_settings(project, trusted=True)
    assert settings.warnings == ()
    assert settings.env == {
        "USER_ENV": "from-user",
        "SHARED_ENV": "local",
        "PROJ_ENV": "from-project",
        "LOCAL_ENV": "from-local",
    }
    assert settings.allow == ("Bash(node:*)", "Bash(printenv:*)")
    assert settings.deny == ("WebFetch", "Read(./secret.txt)")
    assert settings.ask == ("Bash(git push:*)",)
    assert settings.model == "haiku"


def test_untrusted_folder_drops_what_widens_and_says_so(project: Path) -> None:
    """Claude Code ignores the project's allow rules when untrusted (stderr: "Ignoring 1
    permissions.allow entry from .claude/settings.json: this workspace has not been
    trusted…"); caliban also ignores settings.local.json's and env, which can redirect the
    API key or change what an allowed command runs."""
    write_recorded_files("settings_layers", project)
    settings = load_claude_settings(project, trusted=False)
    assert settings.allow == ()
    assert settings.deny == ("WebFetch", "Read(./secret.txt)")  # narrowing rules still apply
    assert settings.ask == ("Bash(git push:*)",)
    assert settings.model == "haiku"
    assert settings.env == {"USER_ENV": "from-user", "SHARED_ENV": "user"}  # the user's own
    project_file = project / ".claude" / "settings.json"
    trust_hint = f": {project} is not a trusted folder (to trust it, run `caliban trust {project}`"
    assert settings.warnings == (
        f"ignored 1 permissions.allow entry, env (PROJ_ENV, SHARED_ENV) in {project_file} "
        f"(deny and ask rules still apply){trust_hint} and start again)",
        f"ignored 1 permissions.allow entry, env (LOCAL_ENV, SHARED_ENV) in "
        f"{project_file.with_name('settings.local.json')} (deny and ask rules still apply)"
        f"{trust_hint} and start again)",
    )


def test_modes_that_widen_need_trust(project: Path) -> None:
    write(project / ".claude" / "settings.json", {"permissions": {"defaultMode": "acceptEdits"}})
    assert load_claude_settings(project, trusted=False).default_mode is None
    assert load_claude_settings(project, trusted=True).default_mode == "acceptEdits"
    for narrower in ("plan", "dontAsk"):
        write(project / ".claude" / "settings.json", {"permissions": {"defaultMode": narrower}})
        assert load_claude_settings(project, trusted=False).default_mode == narrower


def test_keys_of_the_wrong_type_that_only_narrow_are_skipped_with_a_warning(
    project: Path,
) -> None:
    write(
        project / ".claude" / "settings.local.json",
        {"permissions": {"allow": "Bash"}, "model": "opus", "hooks": {"Stop": [{"hooks": []}]}},
    )
    settings = load_claude_settings(project, trusted=True)
    assert settings.model == "opus" and settings.allow == ()
    [bad_type] = settings.warnings
    assert "permissions.allow should be a list of rules; ignored" in bad_type
    assert settings.hooks == (
        (str(project / ".claude" / "settings.local.json"), {"Stop": [{"hooks": []}]}),
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"permissions": {"deny": ["Read(.env)"],}}', "not valid JSON (line 1, column 41"),
        ('["Read(.env)"]', "expected a JSON object"),
        ('{"permissions": ["deny"]}', "permissions should be an object"),
        ('{"permissions": {"deny": "Read(.env)"}}', "permissions.deny should be a list of rules"),
        ('{"permissions": {"ask": [1]}}', "permissions.ask should be a list of rules"),
    ],
)
def test_a_file_whose_deny_rules_cannot_be_read_is_a_config_error(
    project: Path, text: str, problem: str
) -> None:
    """Skipping it, as Claude Code does, would drop its deny rules: permission checks fail
    closed, so caliban says where the file is broken and does not start."""
    path = project / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_claude_settings(project, trusted=False)
    assert str(raised.value).startswith(f"{path}: {problem}")
    assert "--setting-sources" in str(raised.value)
    assert load_claude_settings(project, sources=["user"], trusted=False).deny == ()


def test_setting_sources_and_the_settings_flag(project: Path, tmp_path: Path) -> None:
    write(claude_user_dir() / "settings.json", {"env": {"A": "user"}})
    write(project / ".claude" / "settings.json", {"env": {"A": "project"}})
    assert load_claude_settings(project, sources=["user"], trusted=True).env == {"A": "user"}
    inline = '{"permissions": {"allow": ["Bash(printenv:*)"]}, "env": {"A": "flag"}}'
    flagged = load_claude_settings(project, extra=inline, trusted=False)
    assert flagged.env == {"A": "flag"} and flagged.allow == ("Bash(printenv:*)",)
    write(tmp_path / "extra.json", {"model": "sonnet"})
    assert (
        load_claude_settings(project, extra=str(tmp_path / "extra.json"), trusted=True).model
        == "sonnet"
    )
    with pytest.raises(ValueError, match="--settings: file not found"):
        load_claude_settings(project, extra=str(tmp_path / "nope.json"), trusted=True)


def test_prepare_layers_claude_settings_under_calibans_config(project: Path) -> None:
    write(
        project / ".claude" / "settings.json",
        {
            "model": "haiku",
            "permissions": {"deny": ["Bash(rm:*)"], "defaultMode": "plan"},
            "env": {"X": "1"},
        },
    )
    environ: dict[str, str] = {}
    loaded = load_config(project)
    setup = prepare(options(project), loaded, project, environ=environ)
    assert setup.model == "haiku" and setup.permission_mode == "plan"
    assert setup.settings.permissions.mode == "plan"
    assert "Bash(rm:*)" in setup.settings.permissions.deny
    assert environ == {}  # untrusted: env left out
    # In a trusted folder caliban's own config wins for the keys it sets; its rules are added.
    trust(project)
    (project / ".caliban" / "config.toml").write_text(
        'model = "claude-test"\n[permissions]\nmode = "acceptEdits"\ndeny = ["Read(.env)"]\n'
    )
    setup = prepare(options(project), load_config(project), project, environ=environ)
    assert setup.model == "claude-test" and setup.permission_mode == "acceptEdits"
    assert setup.settings.permissions.deny == ["Bash(rm:*)", "Read(.env)"]
    # $ANTHROPIC_MODEL sits between caliban's config and Claude Code's settings.
    (project / ".caliban" / "config.toml").write_text("")
    setup = prepare(
        options(project), load_config(project), project, environ={"ANTHROPIC_MODEL": "m"}
    )
    assert setup.model == "m"


def test_dont_ask_and_auto_modes(project: Path) -> None:
    loaded = load_config(project, overrides={"permissions": {"mode": "default"}})
    dont_ask = prepare(options(project, permission_mode="dontAsk"), loaded, project, environ={})
    assert (dont_ask.permission_mode, dont_ask.never_ask) == ("dontAsk", True)
    assert dont_ask.settings.permissions.mode == "default"
    auto = prepare(options(project, permission_mode="auto"), loaded, project, environ={})
    assert auto.settings.permissions.mode == "default" and not auto.never_ask
    assert any("'auto'" in w for w in auto.warnings)
    with pytest.raises(UsageError, match="--setting-sources: unknown source nope"):
        prepare(options(project, setting_sources=("nope",)), loaded, project, environ={})


def test_model_aliases_resolve_for_the_provider() -> None:
    from caliban.providers.select import ProviderChoice

    def choice(provider: str, model: str) -> ProviderChoice:
        return ProviderChoice(
            provider=provider, model=model, api_key_env="K", base_url=None, api_key="k"
        )  # type: ignore[arg-type]

    assert resolve_model(choice("anthropic", "sonnet"), "d", {})[0].model == "claude-sonnet-5"
    assert resolve_model(choice("anthropic", "opus[1m]"), "d", {})[0].model == "claude-opus-4-8"
    assert resolve_model(choice("anthropic", "claude-x"), "d", {}) == (
        choice("anthropic", "claude-x"),
        None,
    )
    resolved, warning = resolve_model(choice("openai", "haiku"), "gpt-5.5", {})
    assert (
        resolved.model == "gpt-5.5"
        and warning is not None
        and "ANTHROPIC_DEFAULT_HAIKU_MODEL" in warning
    )
    env = {"ANTHROPIC_DEFAULT_HAIKU_MODEL": "local-small"}
    assert resolve_model(choice("openai", "haiku"), "gpt-5.5", env)[0].model == "local-small"


def test_tools_flag_and_bare_deny_rules_remove_tools() -> None:
    tools = builtin_tools()
    only = select_builtins(tools, only=["Bash", "Read", "NotebookEdit"], deny=[])
    assert [t.name for t in only.builtins] == ["Read", "Bash"] and not only.agent
    assert only.warnings == ["--tools: caliban has no tool NotebookEdit; skipped"]
    assert only.deny == ("WebSearch",)  # the provider's own search: off unless named
    assert select_builtins(tools, only=[], deny=[]).builtins == []
    removed = select_builtins(tools, only=None, deny=["Bash", "Read(.env)", "Task"])
    assert "Bash" not in [t.name for t in removed.builtins] and "Read" in [
        t.name for t in removed.builtins
    ]
    assert not removed.agent
