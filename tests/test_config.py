"""Layered TOML config: precedence, round trips, validation messages, comments."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hang import HANG_S

from caliban.config.settings import (
    ConfigError,
    get_value,
    load_config,
    parse_value,
    project_config_path,
    set_value,
    unset_value,
    user_config_path,
)
from caliban.permissions.trust import trust


@pytest.fixture(autouse=True)
def trusted(project: Path) -> None:
    """These tests are about reading and merging files; trust is tests/test_trust.py's."""
    trust(project)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_without_files(project: Path) -> None:
    loaded = load_config(project)
    assert loaded.settings.tools.lazy_mcp is False
    assert loaded.settings.tools.max_active_schemas == 24
    assert loaded.settings.max_turns == 100
    assert loaded.origin("tools.lazy_mcp") == "default"


def test_project_overrides_user_key_by_key_and_tables_merge(project: Path) -> None:
    user = write(
        user_config_path(),
        'model = "m-user"\n[tools]\nmax_active_schemas = 10\nlazy_mcp = "auto"\n',
    )
    proj = write(project_config_path(project), "[tools]\nlazy_mcp = true\n")
    loaded = load_config(project)
    assert loaded.settings.model == "m-user"
    assert loaded.settings.tools.lazy_mcp is True
    assert loaded.settings.tools.max_active_schemas == 10
    assert loaded.origin("tools.lazy_mcp") == str(proj)
    assert loaded.origin("tools.max_active_schemas") == str(user)


def test_project_root_is_nearest_ancestor_with_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    sub = tmp_path / "repo" / "a" / "b"
    sub.mkdir(parents=True)
    assert project_config_path(sub) == tmp_path / "repo" / ".caliban" / "config.toml"


def test_set_get_unset_round_trip(project: Path) -> None:
    path = project_config_path(project)
    set_value(path, "tools.lazy_mcp", parse_value("true"))
    set_value(path, "tools.max_active_schemas", parse_value("12"))
    set_value(path, "permissions.allow", parse_value('["Bash(git status*)", "Read"]'))
    set_value(path, "model", parse_value("claude-x"))  # not TOML: a plain string
    settings = load_config(project).settings
    assert get_value(settings, "tools.lazy_mcp") is True
    assert get_value(settings, "tools.max_active_schemas") == 12
    assert get_value(settings, "permissions.allow") == ["Bash(git status*)", "Read"]
    assert get_value(settings, "model") == "claude-x"
    assert unset_value(path, "tools.lazy_mcp") is True
    assert unset_value(path, "tools.lazy_mcp") is False
    assert load_config(project).settings.tools.lazy_mcp is False
    assert load_config(project).settings.tools.max_active_schemas == 12


def test_set_validates_before_writing(project: Path) -> None:
    path = write(project_config_path(project), 'model = "keep"\n')
    with pytest.raises(ConfigError, match=r"tools\.max_active_schemas.*greater than or equal to 0"):
        set_value(path, "tools.max_active_schemas", -1)
    with pytest.raises(ConfigError, match=r"did you mean tools\.lazy_mcp"):
        set_value(path, "tools.lazy_mpc", True)
    assert path.read_text() == 'model = "keep"\n'


def test_set_preserves_comments_and_other_keys(project: Path) -> None:
    original = (
        "# my settings\n"
        'model = "m"  # the model I like\n'
        "\n"
        "[tools]\n"
        "# keep schemas off the wire\n"
        "max_active_schemas = 8\n"
        "\n"
        "[permissions]\n"
        'allow = ["Read"]\n'
    )
    path = write(project_config_path(project), original)
    set_value(path, "tools.lazy_mcp", True)
    set_value(path, "model", "n")
    text = path.read_text()
    assert "# my settings" in text and "# keep schemas off the wire" in text
    assert 'model = "n"  # the model I like' in text
    assert text.index("lazy_mcp = true") < text.index("[permissions]")
    loaded = load_config(project).settings
    assert loaded.tools.lazy_mcp is True and loaded.tools.max_active_schemas == 8
    assert loaded.permissions.allow == ["Read"]
    unset_value(path, "tools.lazy_mcp")
    assert "lazy_mcp" not in path.read_text() and "# keep schemas off the wire" in path.read_text()


def test_a_key_under_an_inline_table_is_set_in_place(project: Path) -> None:
    original = "# note\ntools = { max_active_schemas = 3 }  # inline table\n"
    path = write(project_config_path(project), original)
    set_value(path, "tools.lazy_mcp", True)
    text = path.read_text()
    assert text.startswith("# note\ntools = { max_active_schemas = 3, lazy_mcp = true")
    assert text.rstrip().endswith("# inline table")
    assert tomllib.loads(text) == {"tools": {"max_active_schemas": 3, "lazy_mcp": True}}
    assert unset_value(path, "tools.max_active_schemas") is True
    assert tomllib.loads(path.read_text()) == {"tools": {"lazy_mcp": True}}


def test_invalid_toml_names_file_line_and_column(project: Path) -> None:
    path = write(project_config_path(project), "[tools]\nlazy_mcp = tru\n")
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(path) in str(info.value) and "line 2, column 12" in str(info.value)


def test_wrong_type_names_file_line_key_and_expected_type(project: Path) -> None:
    path = write(project_config_path(project), '[tools]\n\nmax_active_schemas = "many"\n')
    with pytest.raises(ConfigError) as info:
        load_config(project)
    message = str(info.value)
    assert (
        f"{path}:3" in message
        and "tools.max_active_schemas" in message
        and "expected int" in message
    )


def test_effort_and_context_window_are_validated(project: Path) -> None:
    path = write(
        project_config_path(project),
        'model_effort = "high"\n[providers.openai]\ncontext_window = 32768\n',
    )
    settings = load_config(project).settings
    assert settings.model_effort == "high" and settings.providers.openai.context_window == 32768
    with pytest.raises(ConfigError, match="not written: model_effort"):
        set_value(path, "model_effort", "max")
    with pytest.raises(ConfigError, match=r"providers\.openai\.context_window"):
        set_value(path, "providers.openai.context_window", 100)


def test_unknown_key_is_a_warning_with_suggestion(project: Path) -> None:
    path = write(project_config_path(project), "[tools]\nlazy_mpc = true\n")
    loaded = load_config(project)
    assert loaded.warnings == [
        f"{path}:2: unknown key 'tools.lazy_mpc' — did you mean tools.lazy_mcp?"
    ]
    assert loaded.settings.tools.lazy_mcp is False


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=os.environ,
    )


@pytest.mark.slow  # six caliban processes
def test_cli_config_commands(project: Path) -> None:
    assert run_cli("config", "set", "tools.lazy_mcp", "true", cwd=project).returncode == 0
    assert run_cli("config", "get", "tools.lazy_mcp", cwd=project).stdout.strip() == "true"
    assert run_cli("config", "set", "--global", "model", "user-model", cwd=project).returncode == 0
    listed = run_cli("config", "list", "--show-origin", cwd=project).stdout
    assert "tools.lazy_mcp = true" in listed and str(project_config_path(project)) in listed
    assert str(user_config_path()) in listed
    paths = run_cli("config", "path", cwd=project).stdout
    assert f"user: {user_config_path()}" in paths
    assert run_cli("config", "unset", "tools.lazy_mcp", cwd=project).returncode == 0
    assert run_cli("config", "get", "tools.lazy_mcp", cwd=project).stdout.strip() == "false"


def test_cli_config_errors_exit_78_without_traceback(project: Path) -> None:
    write(project_config_path(project), "[tools\n")
    result = run_cli("config", "list", cwd=project)
    assert result.returncode == 78
    assert "invalid TOML" in result.stderr and "Traceback" not in result.stderr
    bad_type = run_cli("config", "set", "tools.max_active_schemas", '"x"', cwd=project)
    assert bad_type.returncode == 78 and "Traceback" not in bad_type.stderr


def test_a_listing_piped_to_a_reader_that_has_gone_is_quiet(project: Path) -> None:
    """``caliban config list | head -0``: a broken pipe exited 1 with click's message."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before caliban writes a line
    try:
        result = subprocess.run(
            [sys.executable, "-m", "caliban", "config", "list"],
            cwd=project,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=HANG_S,
        )
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (0, "")


def test_permission_rule_lists_add_up_across_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's rule lists join the user's (each rule once, the user's first): a project's
    ``deny = []`` cannot erase the user's deny rules, trusted or not."""
    project = tmp_path / "repo"
    (project / ".caliban").mkdir(parents=True)
    user = user_config_path()
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[permissions]\ndeny = ["Bash(rm *)"]\nallow = ["Read"]\n')
    (project / ".caliban" / "config.toml").write_text(
        '[permissions]\ndeny = []\nallow = ["Read", "Bash(ls)"]\nask = ["Edit"]\n'
    )
    for trusted in (False, True):
        permissions = load_config(project, trusted=trusted).settings.permissions
        assert permissions.deny == ["Bash(rm *)"]
        assert permissions.ask == ["Edit"]
        assert permissions.allow == (["Read", "Bash(ls)"] if trusted else ["Read"])
