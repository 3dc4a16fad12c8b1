"""`caliban -p` as a drop-in for Claude Code: recorded runs of Claude Code 2.1.197 replayed.

Each case runs the real ``caliban`` executable with Claude Code's command line, files and
stdin, against the fake model server answering exactly as the recording's fake API did, and
compares caliban's output with Claude Code's (``claude_code_recordings.compare``: every key
Claude Code printed, exact where it matters, same JSON type elsewhere). Where caliban differs
on purpose the case says so, with the reason; docs/claude-code.md lists the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from claude_code_recordings import compare, load, replay, steps, substitute, time_server
from fake_model_server import FakeModelServer

pytestmark = pytest.mark.slow

USAGE_EXIT = 2
"""caliban's exit code for a usage error; Claude Code exits 1 for everything."""


@dataclass(frozen=True)
class Case:
    name: str
    loose: tuple[str, ...] = ()
    """Keys compared by type only in this case, because caliban words them its own way."""
    ignore: Mapping[str, str] = field(default_factory=dict)
    """Frame kinds left out of the comparison, each with why caliban differs."""
    exit_code: int | None = None
    """caliban's exit code when it differs from Claude Code's."""
    trusted: bool = False
    """Trust the project folder (caliban's trust store) before the run."""
    same_requests: bool = True
    """caliban makes the requests Claude Code made (False: it retries differently)."""
    needs_time_server: bool = False
    """Uses the reference mcp-server-time ($CALIBAN_REFERENCE_SERVERS)."""
    files: Mapping[str, str] = field(default_factory=dict)
    """Files the recording harness wrote outside the project (relative to /tmp/ccrec)."""
    system: tuple[str, str] | None = None
    """("is" | "ends", text): what caliban's system prompt must be or end with."""
    servers_up: bool = False
    """The MCP servers had connected before Claude Code's first request (it spent seconds
    starting): caliban's first request waits for them too (``tools.wait_for_mcp``)."""

    def __str__(self) -> str:
        return self.name


API_ERROR_TEXT = ("result", "text")
"""caliban's own message for an API error (naming the key to set, the endpoint)."""

CASES = [
    # output formats and input
    Case("text_stream_json"),
    Case("text_json_verbose"),
    Case("text_text"),
    Case("max_turns_1_json"),
    Case("stdin_and_arg_text"),
    Case("flag_session_id"),
    # tools
    Case("tool_bash_allowed"),
    Case("tool_parallel"),
    Case(
        "tool_edit_write_allowed",
        # Claude Code shows Edit's input with its default replace_all filled in; caliban shows
        # the input the model sent.
        loose=("replace_all",),
    ),
    Case("tool_glob_grep_optin"),
    Case("tool_read_missing"),
    Case("tool_bash_error_exit"),
    Case("tool_unknown"),
    Case("bash_background", loose=("task_id",)),  # task ids are random
    Case("flag_tools"),
    Case(
        "flag_add_dir",
        files={"extra/x.txt": "extra file\n"},
        # Read outside the working directories: Claude Code asks (a denial in -p); caliban's
        # read-only tools read anywhere, so this Read just finds no file.
        loose=("permission_denials",),
    ),
    Case("flag_system_prompt", system=("is", "CUSTOM SYSTEM PROMPT.")),
    Case("flag_append_system_prompt", system=("ends", "APPENDED RULE: always say banana.")),
    Case("flag_agents_json"),
    # permissions and settings
    Case("tool_write_denied"),
    Case("flag_disallowed_tools_pattern"),
    Case("flag_permission_mode_dontAsk"),
    Case("flag_dangerously_skip_permissions"),
    Case("flag_settings_inline"),
    Case(
        "settings_layers_trusted",
        trusted=True,
        # A Read(./secret.txt) deny rule: Claude Code refuses in the Read tool and does not
        # list it; caliban's permission policy refuses it and lists it with the others.
        loose=("permission_denials",),
    ),
    # MCP: .mcp.json as Claude Code writes it (GitHub, a 48-character name, alwaysLoad)
    # Claude Code's -p starts a project's .mcp.json servers without asking; caliban starts
    # them only in a trusted folder (docs/security.md), so these runs trust it first.
    Case(
        "mcp_project_json_allowed",
        trusted=True,
        needs_time_server=True,
        # Results with structuredContent: Claude Code sends the model that JSON instead of the
        # text the server wrote; caliban sends the server's text.
        loose=("content",),
        servers_up=True,
    ),
    Case("mcp_project_json", trusted=True, needs_time_server=True, servers_up=True),
    Case("mcp_config_inline_strict", servers_up=True),
    # sub-agents
    Case("subagent"),
    Case(
        "agent_file_x",
        # Claude Code ends a child that reaches maxTurns as if it had finished; caliban tells
        # the model the child stopped early (an error result, a "failed" task).
        loose=("is_error", "status"),
    ),
    # limits and errors
    Case("max_turns_1"),
    Case("api_error_500_exhausted", loose=API_ERROR_TEXT),
    Case(
        "api_error_401",
        loose=API_ERROR_TEXT,
        ignore={"system/api_retry": "caliban does not retry 401: a bad key stays bad"},
        same_requests=False,
    ),
    Case("api_error_429_retry_after"),
    # stream-json in, partial messages out
    Case(
        "partial_messages",
        ignore={
            "stream_event/content_block_delta": "caliban sends a tool call's input in one "
            "input_json_delta when the response is complete; Claude Code as it streams"
        },
    ),
    Case("stream_input_two_turns"),
    Case("stream_input_replay"),
    Case("stream_input_assistant_line"),
    Case("stream_input_control_initialize"),
    Case("flag_json_schema"),
    Case("flag_max_budget"),
    Case("flag_fallback_model", loose=("content",)),  # caliban names models by id
]

USAGE_ERRORS = [
    "text_stream_json_no_verbose",
    "partial_messages_no_verbose",
    "stream_input_text_output",
    "flag_session_id_invalid",
]


def _trust(base: Path) -> None:
    from caliban.permissions.trust import trust

    trust(base / "proj")


def run_case(case: Case, server: FakeModelServer, tmp_path: Path) -> tuple[Any, Any]:
    from claude_code_recordings import prepare_files

    recording = load(case.name)
    base = tmp_path / "ccrec"
    prepare_files(recording, base)
    for rel, text in case.files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    if case.trusted:
        _trust(base)
    if case.servers_up:
        from caliban.config.settings import user_config_path

        user_config_path().parent.mkdir(parents=True, exist_ok=True)
        user_config_path().write_text("[tools]\nwait_for_mcp = true\n")
    server.add(*steps(recording, str(base)))
    done = replay(recording, base, server.anthropic_base_url)
    return recording, done


@pytest.mark.parametrize("case", CASES, ids=str)
def test_frames_match_claude_code(
    case: Case, fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    if case.needs_time_server and time_server() is None:
        pytest.skip("needs the reference MCP servers (CALIBAN_REFERENCE_SERVERS)")
    recording, done = run_case(case, fake_model_server, tmp_path)
    expected_code = recording.exit_code if case.exit_code is None else case.exit_code
    assert done.returncode == expected_code, done.stderr
    assert "Traceback" not in done.stderr
    base = str(done.base)
    if recording.stdout.lstrip().startswith(("{", "[")):
        theirs = substitute(recording.frames, base)
        ours = done.frames
        if theirs and isinstance(theirs[0], list):  # json --verbose: one array of frames
            theirs, ours = theirs[0], ours[0]
        problems = compare(theirs, ours, loose=case.loose, ignore_groups=case.ignore)
        assert problems == [], "\n".join(problems)
    else:
        assert done.stdout == recording.stdout
    # The same model ids were asked for, in the same order (aliases resolved as Claude Code
    # resolves them).
    if case.same_requests:
        sent = [r.body.get("model") for r in fake_model_server.requests]
        assert sent == [r["model"] for r in recording.requests]
    if case.name == "flag_tools":  # --tools Bash,Read: exactly those tools were sent
        sent_tools = fake_model_server.requests[0].tool_names
        assert sorted(sent_tools) == sorted(recording.requests[0]["tools"])
    if case.system is not None:
        how, text = case.system
        system = "".join(b["text"] for b in fake_model_server.requests[0].body["system"])
        assert system == text if how == "is" else system.endswith(text)


@pytest.mark.parametrize("name", USAGE_ERRORS)
def test_flag_checks_match_claude_code(name: str, tmp_path: Path) -> None:
    """The same message on stderr, nothing on stdout, no API call (caliban exits 2, a usage
    error, where Claude Code exits 1)."""
    from claude_code_recordings import prepare_files

    recording = load(name)
    base = tmp_path / "ccrec"
    prepare_files(recording, base)
    done = replay(recording, base, "http://127.0.0.1:9")  # nothing listens: no call is made
    assert (done.returncode, done.stdout) == (USAGE_EXIT, "")
    assert done.stderr.strip() == recording.stderr.strip()


@pytest.mark.parametrize("name", ["stream_input_bad_line", "stream_input_no_role"])
def test_bad_stream_input_stops_the_run_as_in_claude_code(name: str, tmp_path: Path) -> None:
    """Exit 1, Claude Code's message (up to the JSON parser's own words), no API call."""
    from claude_code_recordings import prepare_files

    recording = load(name)
    base = tmp_path / "ccrec"
    prepare_files(recording, base)
    done = replay(recording, base, "http://127.0.0.1:9")
    assert (done.returncode, done.stdout) == (recording.exit_code, "")
    expected = recording.stderr.strip().split("SyntaxError:")[0]
    assert done.stderr.strip().startswith(expected)


def test_comparison_catches_a_renamed_or_dropped_key() -> None:
    """The comparison itself: a missing key, a different exact value, a different type."""
    recording = load("tool_write_denied")
    theirs = recording.frames
    ours = json.loads(json.dumps(theirs))
    assert compare(theirs, ours) == []
    del ours[-1]["permission_denials"]
    ours[-1]["num_turns"] = 3
    ours[0]["uuid"] = 7
    problems = compare(theirs, ours)
    assert "result#0.permission_denials: missing in caliban's frame" in problems
    assert "result#0.num_turns: Claude Code 2, caliban 3" in problems
    assert "system/init#0.uuid: Claude Code has a str, caliban number" in problems


def test_recordings_name_no_path_of_the_machine_they_were_made_on() -> None:
    """Recordings stand for this machine's paths with placeholders (``<harness>``,
    ``<mcp-server-time>``, ``<python>``, ``<tests>``) and ``/tmp/ccrec``: a path of the
    recording machine would only work there."""
    import re

    from claude_code_recordings import FIXTURES

    machine = re.compile(r"(?<![\w/.])/(?:work|home|root|Users)/")
    for path in FIXTURES.rglob("*.json"):
        assert not machine.search(path.read_text()), path
