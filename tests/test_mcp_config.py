"""mcp.toml and .mcp.json: parsing, validation, merging, env expansion, writing, wire names."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from caliban.config.settings import ConfigError
from caliban.mcp.config import (
    add_server,
    entry_from_options,
    expand_vars,
    load_mcp_config,
    project_mcp_path,
    remove_server,
    user_mcp_path,
)
from caliban.mcp.tools import sanitize, unique_wire_names, wire_name
from caliban.permissions.trust import trust


@pytest.fixture(autouse=True)
def trusted(project: Path) -> None:
    """These tests are about reading and merging files; trust is tests/test_trust.py's."""
    trust(project)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- reading


def test_stdio_and_http_servers_with_defaults_and_inferred_transport(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_TIMEOUT")  # the suite's generous limit (conftest)
    write(
        project_mcp_path(project),
        """
[server.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
lazy = false

[server.docs]
url = "http://127.0.0.1:8931/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN:-anonymous}" }
tool_timeout = 30

[server.legacy]
url = "http://127.0.0.1:9000/sse"
""",
    )
    config = load_mcp_config(project, environ={"GITHUB_TOKEN": "ghp_x"})
    assert config.problems == () and config.warnings == ()
    github, docs, legacy = config.servers
    assert (github.name, github.transport, github.command) == ("github", "stdio", "npx")
    assert github.args == ("-y", "@modelcontextprotocol/server-github")
    assert github.env == {"GITHUB_TOKEN": "ghp_x"} and github.lazy is False
    assert github.startup_timeout == 30 and github.tool_timeout == 120
    assert github.where == f"{project_mcp_path(project)}:2" and github.scope == "project"
    assert github.raw["env"] == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}  # shown unexpanded
    assert docs.transport == "http" and docs.headers == {"Authorization": "Bearer anonymous"}
    assert docs.tool_timeout == 30 and docs.lazy is None
    assert legacy.transport == "sse"


def test_env_expansion_rules() -> None:
    missing: list[str] = []
    env = {"HOME": "/home/me", "EMPTY": ""}
    assert expand_vars("${HOME}/x", env, missing) == "/home/me/x"
    assert expand_vars("${EMPTY:-fallback}", env, missing) == "fallback"
    assert expand_vars("${UNSET:-}", env, missing) == ""
    assert expand_vars("$HOME and ${NOPE}", env, missing) == "$HOME and "
    assert missing == ["NOPE"]


def test_unset_variable_expands_empty_with_a_warning_naming_server_and_variable(
    project: Path,
) -> None:
    write(
        project_mcp_path(project),
        '[server.search]\ncommand = "srv"\nargs = ["--key", "${SEARCH_KEY}"]\n',
    )
    config = load_mcp_config(project, environ={})
    [search] = config.servers
    assert search.args == ("--key", "")
    [warning] = config.warnings
    assert "'search'" in warning and "${SEARCH_KEY}" in warning and "mcp.toml:1" in warning


def test_project_entries_replace_user_entries_whole(project: Path) -> None:
    write(
        user_mcp_path(),
        '[server.a]\ncommand = "user-a"\nargs = ["--verbose"]\n\n[server.b]\ncommand = "user-b"\n',
    )
    write(
        project_mcp_path(project),
        '[server.a]\ncommand = "project-a"\n\n[server.c]\nurl = "http://h/mcp"\n',
    )
    config = load_mcp_config(project, environ={})
    assert [s.name for s in config.servers] == ["a", "b", "c"]
    a = config.get("a")
    assert a is not None and a.command == "project-a" and a.args == ()
    assert a.overrides == (user_mcp_path(),) and a.scope == "project"
    assert config.get("b").scope == "user"  # type: ignore[union-attr]


def test_mcp_json_is_read_and_mcp_toml_wins_on_a_clash(project: Path) -> None:
    (project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-memory"],
                        "env": {"MEMORY_FILE": "${HOME:-/tmp}/mem.json"},
                    },
                    "remote": {
                        "type": "http",
                        "url": "https://mcp.example.com/mcp",
                        "headers": {"X-Key": "k"},
                    },
                    "events": {"type": "sse", "url": "https://mcp.example.com/events"},
                    "shared": {"command": "from-json"},
                }
            },
            indent=2,
        )
    )
    write(project_mcp_path(project), '[server.shared]\ncommand = "from-toml"\n')
    write(user_mcp_path(), '[server.memory]\ncommand = "user-memory"\n')
    config = load_mcp_config(project, environ={"HOME": "/h"})
    assert config.problems == ()
    by_name = {s.name: s for s in config.servers}
    assert by_name["memory"].command == "npx" and by_name["memory"].scope == "mcp.json"
    assert by_name["memory"].env == {"MEMORY_FILE": "/h/mem.json"}
    assert by_name["memory"].line == 3
    assert by_name["remote"].transport == "http" and by_name["remote"].headers == {"X-Key": "k"}
    assert by_name["events"].transport == "sse"
    assert by_name["shared"].command == "from-toml"
    assert by_name["shared"].overrides == (project / ".mcp.json",)


def test_bad_entries_are_reported_with_file_line_and_server_and_others_load(
    project: Path,
) -> None:
    path = write(
        project_mcp_path(project),
        """[server.good]
command = "ok"

[server."Bad Name"]
command = "x"

[server.typo]
command = "x"
arg = ["--oops"]

[server.both]
command = "x"
url = "http://h/mcp"

[server.neither]
lazy = true

[server.slow]
command = "x"
startup_timeout = "ten"
""",
    )
    config = load_mcp_config(project, environ={})
    assert [s.name for s in config.servers] == ["good"]
    problems = "\n".join(config.problems)
    assert f"{path}:4: server name 'Bad Name' is invalid" in problems
    assert "e.g. 'Bad-Name'" in problems
    assert f"{path}:9: server 'typo': unknown key 'arg' — did you mean 'args'?" in problems
    assert f"{path}:11: server 'both': has both `command` and `url`" in problems
    assert f"{path}:15: server 'neither': needs either `command`" in problems
    assert f"{path}:20: server 'slow': startup_timeout:" in problems
    assert len(config.problems) == 5


def test_invalid_toml_names_the_file_line_and_column_and_other_files_still_load(
    project: Path,
) -> None:
    write(user_mcp_path(), '[server.fine]\ncommand = "ok"\n')
    path = write(project_mcp_path(project), '[server.x]\ncommand = "unterminated\n')
    config = load_mcp_config(project, environ={})
    assert [s.name for s in config.servers] == ["fine"]
    [problem] = config.problems
    assert problem.startswith(f"{path}: invalid TOML: line 2, column")


def test_invalid_mcp_json_and_bad_json_names(project: Path) -> None:
    (project / ".mcp.json").write_text(
        '{"mcpServers": {"My Server": {"command": "x"}, "ok": {"command": "y", "timeout": 5}}}'
    )
    config = load_mcp_config(project, environ={})
    assert [s.name for s in config.servers] == ["ok"]
    assert "server name 'My Server' is invalid" in config.problems[0]
    assert "e.g. 'My-Server'" in config.problems[0]
    assert "ignoring key 'timeout'" in config.warnings[0]
    (project / ".mcp.json").write_text("{not json")
    assert "invalid JSON: line 1, column 2" in load_mcp_config(project).problems[0]


def test_a_broken_project_override_does_not_silently_fall_back(project: Path) -> None:
    write(user_mcp_path(), '[server.db]\ncommand = "user-db"\n')
    write(project_mcp_path(project), '[server.db]\ncommand = "x"\nbogus = 1\n')
    config = load_mcp_config(project, environ={})
    assert config.servers == ()
    assert any("is not used either" in p for p in config.problems)


def test_relative_cwd_resolves_against_the_project_root(project: Path) -> None:
    write(project_mcp_path(project), '[server.local]\ncommand = "./srv"\ncwd = "tools/srv"\n')
    [local] = load_mcp_config(project, environ={}).servers
    assert local.cwd == project.resolve() / "tools" / "srv"


def test_disabled_servers_load_but_are_not_enabled(project: Path) -> None:
    write(project_mcp_path(project), '[server.off]\ncommand = "x"\ndisabled = true\n')
    config = load_mcp_config(project, environ={})
    assert [s.name for s in config.servers] == ["off"] and config.enabled == ()


# ---------------------------------------------------------------------------- writing


def test_add_and_remove_keep_comments_and_other_servers(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.toml",
        '# my servers\n[server.keep]\ncommand = "keep"  # do not touch\n',
    )
    entry = entry_from_options(command=["npx", "-y", "pkg"], env={"TOKEN": "${TOKEN}"})
    assert add_server(path, "new", entry) is False
    text = path.read_text()
    assert "# my servers" in text and "# do not touch" in text
    data = tomllib.loads(text)
    assert data["server"]["new"] == {
        "command": "npx",
        "args": ["-y", "pkg"],
        "env": {"TOKEN": "${TOKEN}"},
    }
    assert add_server(path, "new", entry_from_options(url="http://h/mcp")) is True
    assert tomllib.loads(path.read_text())["server"]["new"] == {"url": "http://h/mcp"}
    assert remove_server(path, "new") is True
    assert path.read_text() == '# my servers\n[server.keep]\ncommand = "keep"  # do not touch\n'
    assert remove_server(path, "new") is False


def test_add_creates_the_file_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mcp.toml"
    add_server(path, "docs", entry_from_options(url="http://h/sse", transport="sse"))
    assert tomllib.loads(path.read_text()) == {
        "server": {"docs": {"url": "http://h/sse", "transport": "sse"}}
    }
    with pytest.raises(ConfigError, match="server name 'Docs!' is invalid"):
        add_server(path, "Docs!", {"command": "x"})
    with pytest.raises(ConfigError, match="needs either `command`"):
        add_server(path, "empty", {})


def test_inline_tables_in_a_commented_file_are_edited_in_place(tmp_path: Path) -> None:
    original = '# keep me\nserver = { inline = { command = "x" } }\n'
    path = write(tmp_path / "mcp.toml", original)
    assert add_server(path, "other", entry_from_options(command=["y"])) is False
    text = path.read_text()
    assert text.startswith("# keep me\n")
    assert tomllib.loads(text)["server"] == {"inline": {"command": "x"}, "other": {"command": "y"}}
    assert remove_server(path, "inline") is True
    assert path.read_text().startswith("# keep me\n")
    assert tomllib.loads(path.read_text()) == {"server": {"other": {"command": "y"}}}


# ---------------------------------------------------------------------------- wire names


def test_wire_names_are_prefixed_sanitised_and_at_most_64_characters() -> None:
    assert wire_name("github", "search_issues") == "mcp__github__search_issues"
    assert wire_name("fs", "read.file v2") == "mcp__fs__read_file_v2"
    assert sanitize("ok-name_1") == "ok-name_1"
    long_tool = "get_the_complete_list_of_all_repository_collaborators_with_permissions"
    name = wire_name("github", long_tool)
    assert len(name) == 64 and name.startswith("mcp__github__get_the_complete_list")
    assert name == wire_name("github", long_tool)  # deterministic
    assert name != wire_name("github", long_tool + "_x")


def test_names_that_collide_after_sanitising_stay_distinct() -> None:
    names = unique_wire_names("s", ["a.b", "a_b", "a b"])
    assert names[0] == "mcp__s__a_b" and len(set(names)) == 3
    assert all(len(n) <= 64 for n in names)


def test_mcp_json_as_claude_code_writes_it(project: Path) -> None:
    """The .mcp.json of fixtures/claude_code mcp_project_json: capitals and a name over 32
    characters are kept verbatim; alwaysLoad pins a server's tools (lazy = false)."""
    long = "a-server-name-that-is-longer-than-32-characters"
    (project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "GitHub": {"command": "python3", "args": ["srv.py"]},
                    long: {"command": "python3"},
                    "pinned": {"command": "python3", "alwaysLoad": True},
                    "loose": {"command": "python3", "alwaysLoad": False},
                }
            }
        )
    )
    config = load_mcp_config(project, environ={})
    assert config.problems == () and config.warnings == ()
    assert [(s.name, s.lazy) for s in config.servers] == [
        ("GitHub", None),
        (long, None),
        ("pinned", False),
        ("loose", None),
    ]
    assert wire_name("GitHub", "echo") == "mcp__GitHub__echo"
    assert wire_name(long, "echo") == f"mcp__{long}__echo"


def test_mcp_config_flag_files_json_and_strict(project: Path, tmp_path: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"projsrv": {"command": "a"}}}')
    servers = tmp_path / "servers.json"
    servers.write_text('{"mcpServers": {"filesrv": {"command": "b"}}}')
    inline = '{"mcpServers": {"inline": {"command": "c"}}}'
    added = load_mcp_config(project, environ={}, extra=[str(servers), inline])
    assert [(s.name, s.scope) for s in added.servers] == [
        ("projsrv", "mcp.json"),
        ("filesrv", "flag"),
        ("inline", "flag"),
    ]
    strict = load_mcp_config(project, environ={}, extra=[inline], strict=True)
    assert [s.name for s in strict.servers] == ["inline"]
    with pytest.raises(ConfigError, match=r"MCP config file not found: /nope\.json"):
        load_mcp_config(project, environ={}, extra=["/nope.json"])
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_mcp_config(project, environ={}, extra=["{not json"])
    filtered = load_mcp_config(project, environ={}, mcp_json_allows=lambda name: False)
    assert filtered.servers == ()


def test_mcp_timeout_variables_set_the_defaults_in_milliseconds_as_claude_code_reads_them(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        project_mcp_path(project),
        '[server.a]\ncommand = "a"\n\n[server.b]\ncommand = "b"\nstartup_timeout = 5\n',
    )
    monkeypatch.setenv("MCP_TIMEOUT", "90000")
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "1500")
    a, b = load_mcp_config(project, environ={}).servers
    assert (a.startup_timeout, a.tool_timeout) == (90, 1.5)
    assert b.startup_timeout == 5  # a server's own setting wins
    for junk in ("soon", "-1", "0", "nan", ""):
        monkeypatch.setenv("MCP_TIMEOUT", junk)
        assert load_mcp_config(project, environ={}).servers[0].startup_timeout == 30
