"""Claude Code invocations written by others, replayed against the real ``caliban`` executable.

Each test takes a command line (or a file) as it appears in public scripts, CI workflows and
Claude Code's documentation, runs it against the fake model server with ``caliban`` in place
of ``claude``, and checks what the script relies on: the exit code, stdout a ``jq`` filter
reads, the request the model received, the file written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import HANG_S

from caliban.mcp.config import local_mcp_path

pytestmark = pytest.mark.slow


def caliban(
    server: FakeModelServer | None, cwd: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    if server is not None:
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
    return subprocess.run(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)


# ---------------------------------------------------------------------------- flags


def test_debug_with_and_without_a_filter_keeps_stdout_clean(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # `claude --debug "api,mcp" -p …` and `claude -p "hi" -d` (CLI reference examples).
    fake_model_server.add({"text": "one"}, {"text": "two"})
    filtered = caliban(fake_model_server, project, "--debug", "api,mcp", "-p", "hi")
    assert (filtered.returncode, filtered.stdout) == (0, "one\n")
    assert "HTTP Request: POST" in filtered.stderr
    bare = caliban(fake_model_server, project, "-p", "-d", "what is in this folder")
    assert (bare.returncode, bare.stdout) == (0, "two\n")
    # The words after -d were the prompt, not a debug filter.
    assert "what is in this folder" in json.dumps(fake_model_server.requests[1].body["messages"])


def test_debug_file_gets_the_log(fake_model_server: FakeModelServer, project: Path) -> None:
    fake_model_server.add({"text": "ok"})
    log = project / "debug.log"
    result = caliban(fake_model_server, project, "-p", "hi", "--debug-file", str(log))
    assert (result.returncode, result.stderr) == (0, "")
    assert "HTTP Request: POST" in log.read_text()


def test_system_prompt_files(fake_model_server: FakeModelServer, project: Path) -> None:
    (project / "sys.md").write_text("You are a release-notes writer.")
    (project / "extra.md").write_text("Answer in French.")
    fake_model_server.add({"text": "a"}, {"text": "b"})
    replaced = caliban(fake_model_server, project, "-p", "x", "--system-prompt-file", "sys.md")
    appended = caliban(
        fake_model_server, project, "-p", "x", "--append-system-prompt-file", "extra.md"
    )
    assert (replaced.returncode, appended.returncode) == (0, 0)
    first, second = (system_text(r.body) for r in fake_model_server.requests)
    assert "You are a release-notes writer." in first and "# Environment" not in first
    assert second.rstrip().endswith("Answer in French.")


def test_system_prompt_and_its_file_together_is_claude_codes_error(project: Path) -> None:
    (project / "sys.md").write_text("x")
    both = caliban(
        None, project, "-p", "x", "--system-prompt", "y", "--system-prompt-file", "sys.md"
    )
    assert both.returncode == 2
    assert "Cannot use both --system-prompt and --system-prompt-file" in both.stderr
    missing = caliban(None, project, "-p", "x", "--append-system-prompt-file", "nope.md")
    assert missing.returncode == 2
    assert "Append system prompt file not found" in missing.stderr


def test_flags_that_change_nothing_here_are_accepted(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # From a Ralph loop script, an SDK wrapper and the CLI reference.
    fake_model_server.add({"text": "done"})
    result = caliban(
        fake_model_server,
        project,
        "-p",
        "do the task",
        "--name",
        "ralph-0001",
        "--betas",
        "interleaved-thinking-2025-05-14",
        "--exclude-dynamic-system-prompt-sections",
        "--ide",
        "--no-chrome",
        "--allow-dangerously-skip-permissions",
        "--effort",
        "max",
        "--output-format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"] == "done"
    assert "do the task" in json.dumps(fake_model_server.requests[0].body["messages"])
    assert "--betas is not supported" in result.stderr
    assert "--effort max runs as high" in result.stderr


def test_permission_prompt_tool_is_accepted_and_what_would_ask_is_denied(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(
        {"tool_calls": [{"name": "Write", "arguments": {"file_path": "a.txt", "content": "x"}}]},
        {"text": "could not write"},
    )
    result = caliban(
        fake_model_server,
        project,
        "-p",
        "write a.txt",
        "--output-format",
        "json",
        "--permission-prompt-tool",
        "mcp__auth__prompt",
    )
    assert result.returncode == 0
    assert "--permission-prompt-tool mcp__auth__prompt is not supported" in result.stderr
    denials = json.loads(result.stdout)["permission_denials"]
    assert [d["tool_name"] for d in denials] == ["Write"]
    assert not (project / "a.txt").exists()


# ---------------------------------------------------------------------------- claude mcp …


def mcp_toml(path: Path) -> dict[str, Any]:
    import tomllib

    server: dict[str, Any] = tomllib.loads(path.read_text()).get("server", {})
    return server


def test_mcp_add_json_with_the_scope_before_or_after(project: Path, isolated_dirs: Path) -> None:
    # Both orders appear in setup scripts; the JSON is what .mcp.json holds.
    http = caliban(
        None,
        project,
        "mcp",
        "add-json",
        "github",
        '{"type":"http","url":"https://api.githubcopilot.com/mcp",'
        '"headers":{"Authorization":"Bearer ${GITHUB_PAT}"}}',
        "-s",
        "user",
    )
    stdio = caliban(
        None,
        project,
        "mcp",
        "add-json",
        "-s",
        "local",
        "notionApi",
        '{"type":"stdio","command":"npx","args":["-y","@notionhq/notion-mcp-server"],'
        '"env":{"OPENAPI_MCP_HEADERS":"{\\"Notion-Version\\": \\"2022-06-28\\"}"},'
        '"alwaysLoad":true}',
    )
    assert (http.returncode, stdio.returncode) == (0, 0), http.stderr + stdio.stderr
    assert mcp_toml(isolated_dirs / "config" / "mcp.toml")["github"] == {
        "transport": "http",
        "url": "https://api.githubcopilot.com/mcp",
        "headers": {"Authorization": "Bearer ${GITHUB_PAT}"},
    }
    # Claude Code's default scope, local: the user's own file for this project (outside it);
    # the name keeps its capital.
    assert not (project / ".caliban" / "mcp.toml").exists()
    assert mcp_toml(local_mcp_path(project))["notionApi"] == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "@notionhq/notion-mcp-server"],
        "env": {"OPENAPI_MCP_HEADERS": '{"Notion-Version": "2022-06-28"}'},
        "lazy": False,
    }
    shown = caliban(None, project, "mcp", "get", "github")
    assert "url:       https://api.githubcopilot.com/mcp" in shown.stdout


def test_mcp_add_json_that_is_not_json_is_a_usage_error(project: Path) -> None:
    result = caliban(None, project, "mcp", "add-json", "x", "{command: npx}")
    assert result.returncode == 2
    assert "invalid JSON" in result.stderr
    assert not (project / ".caliban" / "mcp.toml").exists()


def test_mcp_add_with_the_url_as_claude_code_takes_it(project: Path, isolated_dirs: Path) -> None:
    # `claude mcp add --transport sse context7 https://mcp.context7.com/sse -s user`
    sse = caliban(
        None,
        project,
        *("mcp", "add", "--transport", "sse", "context7", "https://mcp.context7.com/sse"),
        *("-s", "user"),
    )
    http = caliban(
        None,
        project,
        *("mcp", "add", "--transport", "http", "sentry", "https://mcp.sentry.dev/mcp"),
        *("--scope", "project", "--header", "Authorization: Bearer X"),
    )
    assert (sse.returncode, http.returncode) == (0, 0), sse.stderr + http.stderr
    assert mcp_toml(isolated_dirs / "config" / "mcp.toml")["context7"] == {
        "url": "https://mcp.context7.com/sse",
        "transport": "sse",
    }
    assert mcp_toml(project / ".caliban" / "mcp.toml")["sentry"] == {
        "url": "https://mcp.sentry.dev/mcp",
        "transport": "http",
        "headers": {"Authorization": "Bearer X"},
    }
    removed = caliban(None, project, "mcp", "remove", "-s", "user", "context7")
    assert removed.returncode == 0
    assert "context7" not in mcp_toml(isolated_dirs / "config" / "mcp.toml")
    missing = caliban(None, project, "mcp", "remove", "engram", "--scope", "user")
    assert missing.returncode == 1


# ---------------------------------------------------------------------------- hooks


def test_a_hook_in_exec_form_runs_its_command_with_its_args_and_no_shell(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # Claude Code's exec form, as a Windows-portable settings.json writes it:
    # {"command": "node", "args": ["${CLAUDE_PROJECT_DIR}/.claude/hooks/x.cjs"]}.
    from caliban.permissions.trust import trust

    trust(project)
    hook = project / ".claude" / "hooks" / "record.py"
    hook.parent.mkdir(parents=True)
    hook.write_text(
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        "with open(sys.argv[1], 'w') as f:\n"
        "    json.dump([sys.argv[2], event['tool_name']], f)\n"
    )
    settings = {
        "hooks": {
            "PostToolUse": [
                {
                    "matcher": "Write",
                    "hooks": [
                        {
                            "type": "command",
                            "command": sys.executable,
                            "args": [
                                "${CLAUDE_PROJECT_DIR}/.claude/hooks/record.py",
                                "${CLAUDE_PROJECT_DIR}/hook-ran.json",
                                "$HOME; not a shell",
                            ],
                        }
                    ],
                }
            ]
        }
    }
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    fake_model_server.add(
        {"tool_calls": [{"name": "Write", "arguments": {"file_path": "b.txt", "content": "x"}}]},
        {"text": "ok"},
    )
    result = caliban(fake_model_server, project, "-p", "write b", "--dangerously-skip-permissions")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads((project / "hook-ran.json").read_text()) == ["$HOME; not a shell", "Write"]


# ---------------------------------------------------------------------------- --json-schema

FUNCTIONS_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"functions": {"type": "array", "items": {"type": "string"}}},
        "required": ["functions"],
    }
)


def structured(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "StructuredOutput", "arguments": arguments}]}


def test_json_schema_answer_is_what_jq_structured_output_reads(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # `claude -p "Extract function names from auth.py" --output-format json --json-schema …
    #  | jq '.structured_output'` (a headless-mode skill); a wrong answer is sent back first.
    fake_model_server.add(structured({"functions": "login"}), structured({"functions": ["login"]}))
    result = caliban(
        fake_model_server,
        project,
        *("-p", "Extract function names from auth.py", "--output-format", "json"),
        *("--json-schema", FUNCTIONS_SCHEMA),
    )
    assert result.returncode == 0, result.stderr
    frame = json.loads(result.stdout)
    assert frame["structured_output"] == {"functions": ["login"]}
    assert json.loads(frame["result"]) == {"functions": ["login"]}
    assert (frame["subtype"], frame["is_error"]) == ("success", False)
    first = fake_model_server.requests[0].body
    [tool] = [t for t in first["tools"] if t["name"] == "StructuredOutput"]
    assert tool["input_schema"] == json.loads(FUNCTIONS_SCHEMA)
    sent_back = json.dumps(fake_model_server.requests[1].body["messages"][-1])
    assert "Output does not match required schema: /functions" in sent_back
    # The accepted call ended the turn: no request after it.
    assert len(fake_model_server.requests) == 2


def test_json_schema_text_output_is_the_json(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add({"text": "They are login and logout."}, structured({"functions": []}))
    result = caliban(fake_model_server, project, "-p", "x", "--json-schema", FUNCTIONS_SCHEMA)
    assert (result.returncode, result.stdout) == (0, '{"functions":[]}\n')
    # Answering in prose got a reminder to use the tool.
    assert "StructuredOutput" in json.dumps(fake_model_server.requests[1].body["messages"][-1])


def test_json_schema_never_answered_is_an_error_result(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(*({"text": "no"} for _ in range(6)))
    result = caliban(
        fake_model_server,
        project,
        *("-p", "x", "--output-format", "json", "--json-schema", FUNCTIONS_SCHEMA),
    )
    assert result.returncode == 1
    frame = json.loads(result.stdout)
    assert (frame["subtype"], frame["is_error"]) == ("error_max_structured_output_retries", True)
    assert "structured_output" not in frame


def test_json_schema_that_is_not_a_schema_is_a_usage_error(project: Path) -> None:
    not_json = caliban(None, project, "-p", "x", "--json-schema", "{type: object}")
    bad_type = caliban(None, project, "-p", "x", "--json-schema", '{"type": "objekt"}')
    assert (not_json.returncode, bad_type.returncode) == (2, 2)
    assert "--json-schema: not valid JSON" in not_json.stderr
    assert "--json-schema: not a valid JSON Schema" in bad_type.stderr


# ---------------------------------------------------------------------------- --max-budget-usd


def test_a_ralph_loop_iteration_runs_within_its_budget_and_stops_past_it(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # The argument list of a public "Ralph loop" script (one claude -p per task).
    (project / "prompt.md").write_text("Pick the next task and do it.")
    bash = {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo hi"}}]}
    fake_model_server.add({"text": "done"}, bash)
    ralph = (
        *("-p", (project / "prompt.md").read_text(), "--model", "opus"),
        "--dangerously-skip-permissions",
        *("--append-system-prompt", "EPIC_ID=e1. You are in iteration 1."),
        *("--name", "ralph-0001"),
    )
    within = caliban(fake_model_server, project, *ralph, "--max-budget-usd", "5")
    assert (within.returncode, within.stdout) == (0, "done\n"), within.stderr
    past = caliban(
        fake_model_server,
        project,
        *ralph,
        *("--max-budget-usd", "0.00001", "--output-format", "json"),
    )
    assert past.returncode == 1
    frame = json.loads(past.stdout)
    assert (frame["subtype"], frame["is_error"]) == ("error_max_budget_usd", True)
    assert frame["errors"] == ["Reached maximum budget ($0.00001)"]
    assert frame["total_cost_usd"] > 0.00001
    # The response that crossed the budget was the last: its Bash call did not run, and
    # it is answered, so the session continues with a request both APIs accept.
    assert len(fake_model_server.requests) == 2
    fake_model_server.add({"text": "continued"})
    again = caliban(fake_model_server, project, "-p", "go on", "--continue")
    assert (again.returncode, again.stdout) == (0, "continued\n"), again.stderr
    messages = fake_model_server.requests[-1].body["messages"]
    [call] = [b for b in messages[-2]["content"] if b["type"] == "tool_use"]
    [answer] = [b for b in messages[-1]["content"] if b["type"] == "tool_result"]
    assert answer["tool_use_id"] == call["id"] and answer["is_error"] is True
    assert "--max-budget-usd" in json.dumps(answer["content"])
    zero = caliban(None, project, "-p", "x", "--max-budget-usd", "0")
    assert zero.returncode == 2


# ---------------------------------------------------------------------------- sessions


def test_fork_session_continues_under_a_new_id_and_leaves_the_old_one(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # An SDK wrapper's argv: --resume ID --fork-session (branch a conversation).
    fake_model_server.add({"text": "first answer"}, {"text": "forked"}, {"text": "again"})
    first = caliban(fake_model_server, project, "-p", "first", "--output-format", "json")
    old_id = json.loads(first.stdout)["session_id"]
    forked = caliban(
        fake_model_server,
        project,
        *("-p", "second", "--resume", old_id, "--fork-session", "--output-format", "json"),
    )
    assert forked.returncode == 0, forked.stderr
    new_id = json.loads(forked.stdout)["session_id"]
    assert new_id != old_id
    assert "first answer" in json.dumps(fake_model_server.requests[1].body["messages"])
    # The fork has the whole history; the original does not have the fork's turn.
    again = caliban(fake_model_server, project, "-p", "third", "--resume", new_id)
    assert again.returncode == 0, again.stderr
    sent = json.dumps(fake_model_server.requests[2].body["messages"])
    assert "first answer" in sent and "forked" in sent
    fake_model_server.add({"text": "back on the old one"})
    original = caliban(fake_model_server, project, "-p", "fourth", "--resume", old_id)
    assert original.returncode == 0, original.stderr
    sent = json.dumps(fake_model_server.requests[3].body["messages"])
    assert "first answer" in sent and "forked" not in sent


def test_disable_slash_commands_leaves_out_commands_and_skills(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # As recorded from Claude Code 2.1.197: no commands, no skills, no Skill tool, and a
    # /command is unknown (answered without a request).
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "update-docs.md").write_text("Update the docs.\n")
    (project / ".claude" / "skills" / "pdf").mkdir(parents=True)
    (project / ".claude" / "skills" / "pdf" / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: PDFs\n---\nUse pdftotext.\n"
    )
    result = caliban(
        fake_model_server,
        project,
        *("-p", "/update-docs", "--disable-slash-commands"),
        *("--output-format", "stream-json", "--verbose"),
    )
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    init, last = frames[0], frames[-1]
    assert (init["slash_commands"], init["skills"]) == ([], [])
    assert "Skill" not in init["tools"]
    assert last["result"] == "Unknown command: /update-docs"
    assert fake_model_server.requests == []


def test_bare_runs_without_the_projects_memory_hooks_servers_and_commands(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # What Claude Code 2.1.197 does with --bare (recorded against the same files): tools
    # Bash, Edit and Read; no CLAUDE.md, hooks, .mcp.json, commands or skills; the settings'
    # permission rules still apply.
    from caliban.permissions.trust import trust

    trust(project)
    marker = project / "stop-hook-ran"
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "cmd1.md").write_text("do cmd1\n")
    (project / "CLAUDE.md").write_text("MEMORY-MARKER\n")
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"t": {"command": "python3", "args": ["-c", "pass"]}}})
    )
    settings = {
        "permissions": {"allow": ["Bash(echo:*)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]},
    }
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    fake_model_server.add(
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo hi"}}]},
        {"text": "done"},
    )
    result = caliban(
        fake_model_server,
        project,
        *("-p", "go", "--bare", "--output-format", "stream-json", "--verbose"),
    )
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    init, last = frames[0], frames[-1]
    assert sorted(init["tools"]) == ["Bash", "Edit", "Read"]
    assert (init["mcp_servers"], init["slash_commands"]) == ([], [])
    assert (last["result"], last["permission_denials"]) == ("done", [])
    assert "MEMORY-MARKER" not in json.dumps(fake_model_server.requests[0].body)
    assert not marker.exists()


def test_a_resumed_run_prints_nothing_on_stderr_for_scripts_that_read_2_and_1(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # `claude -p … --output-format stream-json --verbose 2>&1 | while read -r line; do jq …`
    fake_model_server.add({"text": "one"}, {"text": "two"}, {"text": "three"})
    first = caliban(fake_model_server, project, "-p", "first", "--output-format", "json")
    session_id = json.loads(first.stdout)["session_id"]
    resumed = caliban(
        fake_model_server,
        project,
        *("-p", "next", "--resume", session_id, "--output-format", "stream-json", "--verbose"),
    )
    assert (resumed.returncode, resumed.stderr) == (0, "")
    continued = caliban(fake_model_server, project, "-c", "-p", "again", "--debug")
    assert continued.stdout == "three\n"
    assert f"Resumed session {session_id}" in continued.stderr  # the debug log has it


# ---------------------------------------------------------------------------- credentials


def test_anthropic_auth_token_is_the_credential_a_gateway_gets(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # Ollama's, LiteLLM's and other gateways' Claude Code setups:
    # ANTHROPIC_BASE_URL=… ANTHROPIC_AUTH_TOKEN=… ANTHROPIC_API_KEY="" claude -p …
    fake_model_server.add({"text": "ok"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        ANTHROPIC_BASE_URL=fake_model_server.anthropic_base_url,
        ANTHROPIC_AUTH_TOKEN="gateway-token",
        ANTHROPIC_API_KEY="",
    )
    result = subprocess.run(
        [sys.executable, "-m", "caliban", "-p", "hi"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr
    assert fake_model_server.requests[0].headers["authorization"] == "Bearer gateway-token"


def test_mcp_add_stdio_spellings_from_setup_scripts(project: Path, isolated_dirs: Path) -> None:
    # `claude mcp add --scope project --transport stdio NAME SCRIPT` and options after the
    # command: `claude mcp add --scope user mcp-obsidian uvx mcp-obsidian --env K=V`.
    explicit = caliban(
        None,
        project,
        *("mcp", "add", "--scope", "project", "--transport", "stdio", "heimdall", "./wrap.sh"),
    )
    trailing = caliban(
        None,
        project,
        *("mcp", "add", "--scope", "user", "mcp-obsidian", "uvx", "mcp-obsidian"),
        *("--env", "OBSIDIAN_API_KEY=k"),
    )
    assert (explicit.returncode, trailing.returncode) == (0, 0), explicit.stderr + trailing.stderr
    assert mcp_toml(project / ".caliban" / "mcp.toml")["heimdall"] == {"command": "./wrap.sh"}
    assert mcp_toml(isolated_dirs / "config" / "mcp.toml")["mcp-obsidian"] == {
        "command": "uvx",
        "args": ["mcp-obsidian"],
        "env": {"OBSIDIAN_API_KEY": "k"},
    }
    url = caliban(None, project, "mcp", "add", "-t", "stdio", "x", "--url", "http://h/mcp")
    assert url.returncode == 2


# ---------------------------------------------------------------------------- stdin


def test_a_parent_that_never_closes_stdin_does_not_hang_the_run(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # Node's spawn("claude", ["-p", prompt, …]) leaves stdin an open pipe nobody writes to.
    # Claude Code waits 3 s for it, warns and goes on (checked against 2.1.197); so does caliban.
    fake_model_server.add({"text": "ok"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model_server.anthropic_base_url)
    process = subprocess.Popen(
        [sys.executable, "-m", "caliban", "-p", "say hi", "--output-format", "json"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = _read_without_closing(process)
    finally:
        process.kill()
    assert json.loads(out)["result"] == "ok"
    assert "Warning: no stdin data received in 3s, proceeding without it." in err
    assert "say hi" in json.dumps(fake_model_server.requests[0].body["messages"])


def _read_without_closing(process: subprocess.Popen[str]) -> tuple[str, str]:
    """stdout and stderr to the end, leaving stdin open (``communicate`` would close it); a
    run that hangs is killed after ``HANG_S``, and fails."""
    import threading

    assert process.stdout is not None and process.stderr is not None
    watchdog = threading.Timer(HANG_S, process.kill)
    watchdog.start()
    try:
        out = process.stdout.read()
        err = process.stderr.read()
    finally:
        watchdog.cancel()
    assert process.wait() == 0, err
    return out, err


def test_disable_all_hooks_from_settings_flag_turns_hooks_off(
    fake_model_server: FakeModelServer, project: Path, isolated_dirs: Path
) -> None:
    # An SDK wrapper's isolation: --settings '{"disableAllHooks": true, …}'. A project's own
    # settings may not turn the user's hooks off in a folder that is not trusted.
    marker = project / "hook-ran"
    user = isolated_dirs / "claude" / "settings.json"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(
        json.dumps(
            {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]}}
        )
    )
    fake_model_server.add({"text": "one"}, {"text": "two"})
    isolated = caliban(
        fake_model_server,
        project,
        *("-p", "hi", "--settings", '{"disableAllHooks": true, "autoMemoryEnabled": false}'),
    )
    assert (isolated.returncode, isolated.stdout) == (0, "one\n"), isolated.stderr
    assert not marker.exists()
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"disableAllHooks": true}')
    untrusted = caliban(fake_model_server, project, "-p", "hi")
    assert untrusted.returncode == 0, untrusted.stderr
    assert marker.exists()


# ---------------------------------------------------------------------------- --agent


def test_agent_flag_runs_the_main_agent_as_that_agent(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    # `claude -p --agent general-purpose …` (a JSON-generation script) and a project agent;
    # what Claude Code 2.1.197 sent for the same files: the agent's prompt, tools and model.
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "rev.md").write_text(
        "---\nname: rev\ndescription: reviews code\ntools: Read, Grep\nmodel: haiku\n---\n"
        "You are REV-MARKER, a reviewer.\n"
    )
    fake_model_server.add({"text": "reviewed"}, {"text": '{"a": 1}'})
    rev = caliban(
        fake_model_server,
        project,
        *("-p", "go", "--agent", "rev", "--output-format", "stream-json", "--verbose"),
    )
    assert rev.returncode == 0, rev.stderr
    init = json.loads(rev.stdout.splitlines()[0])
    assert (init["tools"], init["model"]) == (["Read", "Grep"], "claude-haiku-4-5-20251001")
    body = fake_model_server.requests[0].body
    assert system_text(body).startswith("You are REV-MARKER, a reviewer.")
    assert [t["name"] for t in body["tools"]] == ["Read", "Grep"]
    general = caliban(
        fake_model_server,
        project,
        *("-p", "make json", "--agent", "general-purpose", "--model", "sonnet"),
        *("--disallowedTools", "Bash,Edit,Read,Write", "--permission-mode", "dontAsk"),
    )
    assert (general.returncode, general.stdout) == (0, '{"a": 1}\n'), general.stderr
    unknown = caliban(None, project, "-p", "x", "--agent", "nope")
    assert unknown.returncode == 2 and "--agent nope: no such agent" in unknown.stderr
