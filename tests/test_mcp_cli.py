"""``caliban mcp``: add / remove / get / list / tools round trips."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hang import HANG_S
from typer.testing import CliRunner

from caliban.cli.app import app
from caliban.mcp.client import ServerStatus
from caliban.mcp.config import local_mcp_path, project_mcp_path, user_mcp_path
from caliban.mcp.status import StatusRow, format_rows, status_rows
from caliban.permissions.trust import trust

CATALOG = str(Path(__file__).parent / "mcp_servers" / "catalog_server.py")
EXIT_AT_ONCE = str(Path(__file__).parent / "mcp_servers" / "exit_at_once.py")


@pytest.fixture(autouse=True)
def trusted(project: Path) -> None:
    """These tests are about reading and merging files; trust is tests/test_trust.py's."""
    trust(project)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["mcp", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_add_get_remove_round_trip_in_local_and_user_files(project: Path) -> None:
    code, _, err = run(
        "add", "github", "-e", "GITHUB_TOKEN=${GITHUB_TOKEN}", "--", "npx", "-y", "@mcp/github"
    )
    local = local_mcp_path(project)
    assert code == 0 and f"Added stdio server 'github' in {local}" in err
    assert not project_mcp_path(project).exists()  # nothing written into the project
    data = tomllib.loads(local.read_text())
    assert data == {
        "server": {
            "github": {
                "command": "npx",
                "args": ["-y", "@mcp/github"],
                "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
            }
        }
    }
    code, _, err = run(
        "add",
        "docs",
        "--url",
        "http://127.0.0.1:9/mcp",
        "-H",
        "Authorization: Bearer x",
        "--scope",
        "user",
    )
    assert code == 0 and str(user_mcp_path()) in err
    assert tomllib.loads(user_mcp_path().read_text())["server"]["docs"] == {
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer x"},
    }

    code, out, _ = run("get", "github")
    assert code == 0
    assert f"source:    {local}:1 (local)" in out
    assert "command:   npx -y @mcp/github" in out
    assert "env:       GITHUB_TOKEN=${GITHUB_TOKEN}" in out  # never the secret's value
    code, out, _ = run("get", "docs")
    assert "header:    Authorization: Bearer x" in out and "transport: http" in out

    code, _, err = run("remove", "docs")  # found in the user file without --scope
    assert code == 0 and f"Removed 'docs' from {user_mcp_path()}" in err
    assert "docs" not in tomllib.loads(user_mcp_path().read_text()).get("server", {})
    code, _, err = run("get", "docs")
    assert code == 1 and "no MCP server named 'docs' (configured: github)" in err


def test_adding_to_the_user_file_notes_a_project_entry_that_wins(project: Path) -> None:
    run("add", "db", "--scope", "project", "--", "project-db")
    code, _, err = run("add", "db", "--scope", "user", "--", "user-db")
    assert code == 0 and "also defines 'db' and takes precedence" in err
    code, _, err = run("remove", "db", "--scope", "project")
    assert code == 0 and "still defines 'db'" in err


def test_add_rejects_bad_input_without_writing(project: Path) -> None:
    assert run("add", "x")[0] == 2
    assert run("add", "x", "--url", "http://h/mcp", "--", "cmd")[0] == 2
    code, _, err = run("add", "x", "--env", "NOEQUALS", "--", "cmd")
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run("add", "x", "--url", "http://h", "-H", "no-colon")
    assert code == 2 and "KEY:VALUE" in err
    result = CliRunner().invoke(app, ["mcp", "add", "Bad Name", "--", "cmd"])
    assert "server name 'Bad Name' is invalid" in str(result.exception)
    assert not project_mcp_path(project).exists() and not local_mcp_path(project).exists()


def test_remove_refuses_mcp_json_entries(project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"mem": {"command": "npx"}}}')
    code, _, err = run("remove", "mem")
    assert code == 1 and "does not edit" in err and "disabled = true" in err
    code, out, _ = run("get", "mem")
    assert code == 0 and f"source:    {project / '.mcp.json'}:1 (mcp.json)" in out


def test_tools_of_a_disabled_server_says_so(project: Path) -> None:
    project_mcp_path(project).write_text('[server.off]\ncommand = "x"\ndisabled = true\n')
    code, _, err = run("tools", "off")
    assert code == 1 and "'off' is disabled" in err


def test_list_with_nothing_configured_says_how_to_add(project: Path) -> None:
    code, out, _ = run("list")
    assert code == 0 and "No MCP servers configured" in out and "caliban mcp add" in out


def test_status_rows_explain_failures() -> None:
    rows = status_rows(
        [
            ServerStatus(
                name="ok",
                transport="stdio",
                state="connected",
                tool_count=3,
                tool_chars=1200,
                tool_tokens=300,
            ),
            ServerStatus(
                name="bad",
                transport="stdio",
                state="failed",
                error="exited with code 3",
                stderr_tail=("boom",),
                log_path=Path("/l/bad.log"),
            ),
        ]
    )
    assert rows[1] == StatusRow(
        name="bad",
        transport="stdio",
        state="failed",
        tools=0,
        chars=0,
        tokens=0,
        detail=("error: exited with code 3", "stderr: boom", "log: /l/bad.log"),
    )
    lines = format_rows(rows)
    assert lines[0].split() == ["NAME", "TRANSPORT", "STATUS", "TOOLS", "CHARS", "≈TOKENS"]
    assert lines[1].split() == ["ok", "stdio", "connected", "3", "1,200", "300"]
    assert lines[2].split() == ["bad", "stdio", "failed", "-", "-", "-"]
    assert lines[3:] == ["    error: exited with code 3", "    stderr: boom", "    log: /l/bad.log"]


def test_a_server_added_by_hand_starts_in_a_folder_that_is_not_trusted(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's default ``local`` scope: the user's own file for this project, outside it,
    so what the user typed needs no trust (while the project's files still do)."""
    folder = tmp_path / "cloned"
    (folder / ".git").mkdir(parents=True)
    monkeypatch.chdir(folder)
    (folder / ".mcp.json").write_text('{"mcpServers": {"theirs": {"command": "evil"}}}')
    assert run("add", "mine", "--", sys.executable, EXIT_AT_ONCE)[0] == 0
    assert run("add", "shared", "--scope", "project", "--", "x")[0] == 0
    from caliban.mcp.config import load_mcp_config

    config = load_mcp_config(folder)
    assert [s.name for s in config.servers] == ["mine"]
    assert {s.name for s in config.untrusted} == {"theirs", "shared"}
    assert config.servers[0].source == local_mcp_path(folder)
    assert local_mcp_path(folder).is_relative_to(user_mcp_path().parent)
    assert local_mcp_path(folder) != local_mcp_path(project)  # keyed by the project
    code, out, _ = run("get", "mine")
    assert code == 0
    assert "(local)" in out and "trusted:" not in out


def test_the_local_scope_wins_over_the_project_files(project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"db": {"command": "from-json"}}}')
    run("add", "db", "--scope", "project", "--", "from-project")
    run("add", "db", "--", "from-local")
    from caliban.mcp.config import load_mcp_config

    [db] = load_mcp_config(project).servers
    assert db.command == "from-local" and db.scope == "local" and len(db.overrides) == 2


@pytest.mark.slow
def test_list_and_tools_connect_to_real_servers(project: Path) -> None:
    run("add", "catalog", "--", sys.executable, CATALOG)
    run("add", "broken", "--", sys.executable, EXIT_AT_ONCE)
    code, out, _ = run("list")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[:4] == ["catalog", "stdio", "connected", "40"]
    assert lines[2].split()[:3] == ["broken", "stdio", "failed"]
    assert "    error: exited with code 3 while starting" in lines
    assert "    stderr: fatal: environment variable EXAMPLE_API_TOKEN is not set" in lines

    code, out, _ = run("tools", "catalog")
    assert code == 0
    tools = out.splitlines()
    assert len(tools) == 41 and tools[-1].startswith("40 tools, ")
    assert tools[1].split()[0] == "mcp__catalog__get_issue" and tools[1].endswith("[read-only]")
    code, _, err = run("tools", "broken")
    assert code == 1 and "exited with code 3" in err


@pytest.mark.slow
def test_the_real_executable_lists_servers_without_importing_the_sdk_at_startup(
    project: Path,
) -> None:
    run("add", "catalog", "--", sys.executable, CATALOG)
    caliban = Path(sys.executable).with_name("caliban")
    result = subprocess.run(
        [str(caliban), "mcp", "list"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=os.environ.copy(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].split()[:4] == ["catalog", "stdio", "connected", "40"]
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import caliban.cli.app"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=True,
    ).stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in imports.splitlines()}
    for heavy in ("mcp", "anthropic", "openai", "prompt_toolkit"):
        assert heavy not in loaded


def test_add_into_a_commented_file_keeps_every_comment(project: Path) -> None:
    path = project_mcp_path(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    original = '# team servers\n[server.docs]  # the docs index\ncommand = "docs-mcp"\n'
    path.write_text(original)
    code, _, err = run("add", "--scope", "project", "time", "--", "uvx", "mcp-server-time")
    assert code == 0, err
    text = path.read_text()
    assert text.startswith(original)
    assert tomllib.loads(text)["server"]["time"] == {"command": "uvx", "args": ["mcp-server-time"]}
