"""Hooks: real hook scripts run by the real `caliban -p`, in Claude Code's format."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from test_headless_e2e import lines, run

from caliban.hooks import HookConfig, parse_hooks
from caliban.permissions.trust import trust

HOOK = """\
import json, os, sys
event, mode = sys.argv[1], sys.argv[2]
data = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps({"event": event, "stdin": data, "cwd": os.getcwd(),
                          "project": os.environ.get("CLAUDE_PROJECT_DIR")}) + "\\n")
if mode == "exit2":
    print("no shell today", file=sys.stderr); sys.exit(2)
if mode == "deny":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event,
        "permissionDecision": "deny", "permissionDecisionReason": "policy says no"}}))
if mode == "allow":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event,
        "permissionDecision": "allow"}}))
if mode == "rewrite":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event,
        "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"}}}))
if mode == "context":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event,
        "additionalContext": "remember the house style"}}))
if mode == "text":
    print("today is a holiday")
if mode == "block":
    print(json.dumps({"decision": "block", "reason": "run the tests first"}))
if mode == "sleep":
    import time; time.sleep(30)
"""


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Writes [hooks] into the user config; returns the log of what the hooks received."""
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    log = tmp_path / "hooks.jsonl"
    monkeypatch.setenv("HOOK_LOG", str(log))

    def configure(spec: dict[str, tuple[str, str] | tuple[str, str, float]], file: Path) -> Path:
        table: dict[str, Any] = {}
        for event, (matcher, mode, *timeout) in spec.items():
            hook: dict[str, Any] = {
                "type": "command",
                "command": f"{sys.executable} {script} {event} {mode}",
            }
            if timeout:
                hook["timeout"] = timeout[0]
            table[event] = [{"matcher": matcher, "hooks": [hook]}]
        file.parent.mkdir(parents=True, exist_ok=True)
        as_json = file.suffix == ".json"  # Claude Code's settings.json
        file.write_text(json.dumps({"hooks": table}) if as_json else _toml({"hooks": table}))
        return log

    return configure


def _toml(data: dict[str, Any]) -> str:
    import tomlkit

    return tomlkit.dumps(data)


def user_config(isolated_dirs: Path) -> Path:
    return isolated_dirs / "config" / "config.toml"


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def results(server: FakeModelServer, request: int) -> list[str]:
    """The tool results' text the model got in request ``request`` (Anthropic shape)."""
    content = server.requests[request].body["messages"][-1]["content"]
    out = []
    for block in content:
        if block.get("type") == "tool_result":
            inner = block["content"]
            out.append(
                inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner)
            )
    return out


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}


def test_parse_skips_what_it_cannot_run_and_says_where() -> None:
    config, warnings = parse_hooks(
        {
            "PreToolUse": [
                {"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "x"}]}
            ],
            "Teleport": [],
            "PostToolUse": [{"matcher": "(", "hooks": [{"command": "y"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "z"}]}],
        },
        "settings.json",
    )
    assert [h.command for h in config.commands("PreToolUse", "Edit")] == ["x"]
    assert config.commands("PreToolUse", "Read") == ()
    assert not config.commands("Stop")
    assert warnings == [
        "settings.json: hooks.Teleport: not an event caliban runs; ignored",
        "settings.json: hooks.PostToolUse[0]: matcher '(' is not a valid regex (missing ), "
        "unterminated subpattern at position 0); ignored",
        "settings.json: hooks.Stop[0]: only {type: command, command: ...} hooks run; skipped",
    ]


def test_a_matcher_on_mcp_tool_names() -> None:
    config, _ = parse_hooks(
        {"PreToolUse": [{"matcher": "mcp__github__.*", "hooks": [{"command": "gh"}]}]}, "x"
    )
    assert config.commands("PreToolUse", "mcp__github__create_issue")
    assert not config.commands("PreToolUse", "mcp__gitlab__create_issue")
    assert not HookConfig()


@pytest.mark.slow
def test_pre_tool_use_exit_2_blocks_the_tool_and_tells_the_model(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    log = hooks({"PreToolUse": ("Bash", "exit2")}, user_config(isolated_dirs))
    fake_model_server.add(bash("touch made.txt"), {"text": "blocked"})
    result = run(fake_model_server, "anthropic", project, "go", "--allowed-tools", "Bash")
    assert result.returncode == 0, result.stderr
    assert not (project / "made.txt").exists()
    [text] = results(fake_model_server, 1)
    assert text.startswith("PreToolUse:Bash hook error: [") and text.endswith("]: no shell today")
    [call] = records(log)
    payload = call["stdin"]
    assert payload["hook_event_name"] == "PreToolUse" and payload["tool_name"] == "Bash"
    assert payload["tool_input"] == {"command": "touch made.txt"}
    assert {"session_id", "transcript_path", "cwd", "tool_use_id"} <= payload.keys()
    assert call["cwd"] == call["project"] == str(project)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "expect"),
    [("deny", "policy says no"), ("allow", "ran"), ("rewrite", "rewritten")],
)
def test_pre_tool_use_json_decides_the_permission(
    fake_model_server: FakeModelServer,
    project: Path,
    hooks: Any,
    isolated_dirs: Path,
    mode: str,
    expect: str,
) -> None:
    hooks({"PreToolUse": ("*", mode)}, user_config(isolated_dirs))
    fake_model_server.add(bash("echo ran"), {"text": "done"})
    result = run(fake_model_server, "anthropic", project, "go")  # no --allowed-tools
    assert result.returncode == 0, result.stderr
    [text] = results(fake_model_server, 1)
    assert text == expect


@pytest.mark.slow
def test_post_tool_use_context_and_user_prompt_context_reach_the_model(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    hooks(
        {"PostToolUse": ("Bash", "context"), "UserPromptSubmit": ("", "text")},
        user_config(isolated_dirs),
    )
    fake_model_server.add(bash("echo hi"), {"text": "done"})
    result = run(fake_model_server, "anthropic", project, "go", "--allowed-tools", "Bash")
    assert result.returncode == 0, result.stderr
    first = json.dumps(fake_model_server.requests[0].body["messages"])
    assert "UserPromptSubmit hook success: today is a holiday" in first
    [text] = results(fake_model_server, 1)
    assert text.endswith("PostToolUse:Bash hook additional context: remember the house style")


@pytest.mark.slow
def test_user_prompt_submit_block_answers_without_a_request(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    hooks({"UserPromptSubmit": ("", "exit2")}, user_config(isolated_dirs))
    result = run(fake_model_server, "anthropic", project, "secret plans", "--output-format", "json")
    assert result.returncode == 0, result.stderr
    [obj] = lines(result.stdout)
    assert obj["num_turns"] == 0 and obj["result"].startswith(
        "UserPromptSubmit operation blocked by hook:\n["
    )
    assert obj["result"].endswith("]: no shell today\n\nOriginal prompt: secret plans")
    assert fake_model_server.requests == []


@pytest.mark.slow
def test_stop_hook_sends_the_model_back_with_its_feedback_a_bounded_number_of_times(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    log = hooks({"Stop": ("", "block")}, user_config(isolated_dirs))
    # The hook blocks every time: caliban gives up after a bounded number of rounds.
    fake_model_server.add(*({"text": f"answer {n}"} for n in range(1, 10)))
    result = run(fake_model_server, "anthropic", project, "go", "--output-format", "json")
    assert result.returncode == 0, result.stderr
    feedback = fake_model_server.requests[1].body["messages"][-1]["content"][0]["text"]
    assert feedback == "Stop hook feedback:\nrun the tests first"
    stops = [r["stdin"]["stop_hook_active"] for r in records(log)]
    assert stops[0] is False and all(stops[1:]) and len(stops) == 8  # STOP_BLOCK_CAP
    assert lines(result.stdout)[-1]["result"] == "answer 9"


@pytest.mark.slow
def test_session_start_context_and_session_end(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    log = hooks(
        {"SessionStart": ("", "context"), "SessionEnd": ("", "log")}, user_config(isolated_dirs)
    )
    fake_model_server.add({"text": "ok"})
    result = run(fake_model_server, "anthropic", project, "hello")
    assert result.returncode == 0, result.stderr
    sent = json.dumps(fake_model_server.requests[0].body["messages"])
    assert "SessionStart:startup hook additional context: remember the house style" in sent
    assert [r["event"] for r in records(log)] == ["SessionStart", "SessionEnd"]
    assert records(log)[0]["stdin"]["source"] == "startup"


def test_session_start_and_pre_compact_matchers_select_the_source_and_trigger() -> None:
    config, warnings = parse_hooks(
        {
            "SessionStart": [{"matcher": "resume", "hooks": [{"command": "on-resume"}]}],
            "PreCompact": [{"matcher": "auto", "hooks": [{"command": "on-auto"}]}],
            "Stop": [{"matcher": "ignored", "hooks": [{"command": "always"}]}],
        },
        "settings.json",
    )
    assert warnings == []
    assert config.commands("SessionStart", "startup") == ()
    assert [h.command for h in config.commands("SessionStart", "resume")] == ["on-resume"]
    assert config.commands("PreCompact", "manual") == ()
    assert [h.command for h in config.commands("PreCompact", "auto")] == ["on-auto"]
    assert [h.command for h in config.commands("Stop")] == ["always"]


def test_a_resume_only_session_start_hook_runs_on_continue_not_on_a_new_session(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    log = hooks({"SessionStart": ("resume", "log")}, user_config(isolated_dirs))
    fake_model_server.add({"text": "one"}, {"text": "two"})
    assert run(fake_model_server, "anthropic", project, "hello").returncode == 0
    assert records(log) == []
    assert run(fake_model_server, "anthropic", project, "-c", "again").returncode == 0
    assert [r["stdin"]["source"] for r in records(log)] == ["resume"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings_file",
    [".caliban/config.toml", ".claude/settings.json", ".claude/settings.local.json"],
)
def test_project_hooks_run_only_in_a_trusted_folder(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, settings_file: str
) -> None:
    log = hooks({"UserPromptSubmit": ("", "log")}, project / settings_file)
    fake_model_server.add({"text": "ok"}, {"text": "ok"})
    untrusted = run(fake_model_server, "anthropic", project, "hello")
    assert untrusted.returncode == 0 and records(log) == []
    assert f"caliban: warning: ignored hooks in {project}/{settings_file}" in untrusted.stderr
    assert f"{project} is not a trusted folder" in untrusted.stderr
    trust(project)
    trusted = run(fake_model_server, "anthropic", project, "hello")
    assert trusted.returncode == 0 and [r["event"] for r in records(log)] == ["UserPromptSubmit"]


@pytest.mark.slow
def test_a_hook_that_hangs_is_killed_at_its_timeout_and_the_tool_runs(
    fake_model_server: FakeModelServer, project: Path, hooks: Any, isolated_dirs: Path
) -> None:
    hooks({"PreToolUse": ("Bash", "sleep", 1)}, user_config(isolated_dirs))
    fake_model_server.add(bash("echo still ran"), {"text": "done"})
    result = run(fake_model_server, "anthropic", project, "go", "--allowed-tools", "Bash")
    assert result.returncode == 0, result.stderr
    assert results(fake_model_server, 1) == ["still ran"]
    assert "PreToolUse hook" in result.stderr and "timed out after 1 s" in result.stderr
