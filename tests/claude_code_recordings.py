"""Claude Code's recorded runs (tests/fixtures/claude_code), replayed against ``caliban -p``.

A recording holds what Claude Code 2.1.197 printed for a scripted model (stdout, exit code,
command line, files) and the answer the fake API gave each request (``requests.json``; see
``fixtures/claude_code/README.md``). :func:`replay` runs the real ``caliban`` executable the
same way against ``tests/fake_model_server.py`` with the same answers; :func:`compare`
checks caliban's frames against Claude Code's key by key.

Comparison rules: every key Claude Code printed must be in caliban's frame (caliban may add
keys); values of :data:`EXACT_KEYS` must be equal; other values (ids, timings, token counts,
tool output wording) must have the same JSON type. Frames are paired within groups of the
same kind (type, subtype, main thread or sub-agent, content block type), in order, because
the order *between* kinds depends on timing (NOTES.md §3.2).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
RECORDED_BASE = "/tmp/ccrec"
CLAUDE_CODE_MODEL = "claude-opus-4-8"

EXACT_KEYS = frozenset(
    {
        "type",
        "subtype",
        "role",
        "is_error",
        "name",
        "input",
        "tool_use_id",
        "parent_tool_use_id",
        "num_turns",
        "terminal_reason",
        "permissionMode",
        "api_error_status",
        "error_status",
        "subagent_type",
        "task_description",
        "task_type",
        "stop_reason",
        "stop_sequence",
        "isReplay",
        "retrieval_status",
        "status",
        "tool_name",
        "tool_input",
        "mode",
        "result",
        "text",
        "description",
        "prompt",
        "exitCode",
        "stdout",
    }
)
"""Keys whose values must be equal (after the recorded paths are mapped to the test's)."""

NULLABLE = frozenset({"request_id"})
"""Keys Claude Code fills from the API that caliban does not keep (``null`` there)."""

ABSENT_IN_CALIBAN = {
    "memory_paths.auto": "caliban has no auto-memory directory (memory_paths is {})",
}
"""Keys caliban leaves out in every frame, and why."""

KEYED_BY_MODEL = frozenset({"modelUsage"})
"""Objects keyed by model name ("claude-opus-4-8[1m]" in Claude Code): their entries are
compared in order, whatever the names."""


@dataclass(frozen=True)
class Recording:
    name: str
    argv: list[str]
    env: dict[str, str]
    stdin: str | None
    project_files: dict[str, str]
    home_files: dict[str, str]
    cwd: str
    exit_code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]

    @property
    def frames(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def load(name: str) -> Recording:
    directory = FIXTURES / name
    command = json.loads((directory / "command.json").read_text())
    stdout_file = directory / "stdout.jsonl"
    if not stdout_file.exists():
        stdout_file = directory / "stdout.txt"
    return Recording(
        name=name,
        argv=command["argv"][1:],
        env={
            k: v
            for k, v in command["env"].items()
            if k not in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
        },
        stdin=command.get("stdin"),
        project_files=command.get("project_files", {}),
        home_files=command.get("home_files", {}),
        cwd=command["env_base"]["cwd"],
        exit_code=int((directory / "exit_code").read_text()),
        stdout=stdout_file.read_text(),
        stderr=(directory / "stderr.txt").read_text(),
        requests=json.loads((directory / "requests.json").read_text()),
    )


HARNESS = FIXTURES / "harness"
HARNESS_PLACEHOLDER = "<harness>"
"""Stands for the recording harness's directory in recordings (its MCP servers)."""
TIME_SERVER_PLACEHOLDER = "<mcp-server-time>"
"""Stands for the reference ``mcp-server-time`` the recording ran."""


def time_server() -> str | None:
    """The reference ``mcp-server-time`` (``$CALIBAN_REFERENCE_SERVERS``), if installed."""
    root = os.environ.get("CALIBAN_REFERENCE_SERVERS")
    path = Path(root) / "venv" / "bin" / "mcp-server-time" if root else None
    return str(path) if path is not None and path.exists() else None


def substitute(value: Any, base: str) -> Any:
    """``value`` with the recorded ``/tmp/ccrec`` paths moved to ``base``, and the
    placeholders for the recording harness and the time server made this machine's paths."""
    if isinstance(value, str):
        value = value.replace(HARNESS_PLACEHOLDER, str(HARNESS))
        value = value.replace(TIME_SERVER_PLACEHOLDER, time_server() or "mcp-server-time")
        return value.replace(RECORDED_BASE, base)
    if isinstance(value, list):
        return [substitute(v, base) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, base) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- replaying


_TASK_ID = re.compile(r"with ID: (\w+)")


def steps(recording: Recording, base: str) -> list[Any]:
    """The fake server's script: each recorded answer in caliban's step format."""
    recorded_ids = _TASK_ID.findall(recording.stdout)
    return [_step(substitute(r["answer"], base), recorded_ids) for r in recording.requests]


def _step(answer: Mapping[str, Any], recorded_ids: list[str]) -> Any:
    step: dict[str, Any] = {"usage": {"input_tokens": 100, "output_tokens": 20}}
    for key, value in answer.items():
        match key:
            case "tool_calls":
                step["tool_calls"] = [
                    {"name": c["name"], "id": c.get("id"), "arguments": c.get("input", {})}
                    for c in value
                ]
            case "headers":
                if "retry-after" in value:
                    step["retry_after"] = value["retry-after"]
            case "thinking":
                pass  # caliban's providers do not produce thinking blocks
            case "usage":
                step["usage"] = {**step["usage"], **value}
            case _:
                step[key] = value
    calls = step.get("tool_calls", [])
    if any(c["arguments"].get("task_id") in recorded_ids for c in calls):
        return _with_live_task_ids(step, recorded_ids)
    return step


def _with_live_task_ids(step: dict[str, Any], recorded_ids: list[str]) -> Any:
    """A step that names a background task: the recorded id becomes the id caliban gave
    the task in the same position (ids are random)."""

    def answer(request: Any) -> dict[str, Any]:
        live = list(dict.fromkeys(_TASK_ID.findall(json.dumps(request.body.get("messages")))))
        mapping = dict(zip(dict.fromkeys(recorded_ids), live, strict=False))
        calls = []
        for call in step["tool_calls"]:
            arguments = dict(call["arguments"])
            if arguments.get("task_id") in mapping:
                arguments["task_id"] = mapping[arguments["task_id"]]
            calls.append({**call, "arguments": arguments})
        return {**step, "tool_calls": calls}

    return answer


@dataclass(frozen=True)
class Replay:
    returncode: int
    stdout: str
    stderr: str
    base: Path

    @property
    def frames(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def prepare_files(recording: Recording, base: Path) -> None:
    """The recording's project (a git repository on ``main``) and home under ``base``.

    Claude Code's default model (Opus 4.8) becomes the user settings' ``model`` unless the
    recording sets one there: the lowest layer, like a default.
    """
    project, home = base / "proj", base / "home"
    project.mkdir(parents=True)
    home.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True)
    for root, files in ((project, recording.project_files), (home, recording.home_files)):
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(substitute(text, str(base)))
            if rel.endswith((".sh", ".py")):
                path.chmod(0o755)
    user_settings = home / ".claude" / "settings.json"
    data = json.loads(user_settings.read_text()) if user_settings.exists() else {}
    data.setdefault("model", CLAUDE_CODE_MODEL)
    user_settings.parent.mkdir(parents=True, exist_ok=True)
    user_settings.write_text(json.dumps(data))


def replay(
    recording: Recording,
    base: Path,
    server_url: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> Replay:
    """Run ``caliban`` as Claude Code was run, in a copy of its project under ``base``
    (caliban's own directories come from the environment: tests isolate them)."""
    home = base / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        ANTHROPIC_API_KEY="test",
        ANTHROPIC_BASE_URL=server_url,
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
    )
    env.update(substitute(recording.env, str(base)))
    env.update(extra_env or {})
    stdin = substitute(recording.stdin, str(base)) if recording.stdin is not None else None
    done = subprocess.run(
        [sys.executable, "-m", "caliban", *substitute(recording.argv, str(base))],
        cwd=substitute(recording.cwd, str(base)),
        env=env,
        input=stdin or "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Replay(returncode=done.returncode, stdout=done.stdout, stderr=done.stderr, base=base)


# ---------------------------------------------------------------------------- comparing


def group_key(frame: Mapping[str, Any]) -> str:
    """The kind of a frame, for pairing Claude Code's with caliban's."""
    kind = str(frame.get("type"))
    if kind == "system":
        return f"system/{frame.get('subtype')}"
    if kind == "result":
        return "result"
    if kind == "stream_event":
        return f"stream_event/{frame['event'].get('type')}"
    if kind in ("assistant", "user"):
        content = frame["message"]["content"]
        block = content[0].get("type") if isinstance(content, list) and content else "str"
        who = "child" if frame.get("parent_tool_use_id") else "main"
        return f"{kind}/{who}/{block}"
    return kind


@dataclass
class Differences:
    problems: list[str] = field(default_factory=list)

    def add(self, path: str, text: str) -> None:
        self.problems.append(f"{path}: {text}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


def compare_value(
    expected: Any,
    actual: Any,
    path: str,
    out: Differences,
    *,
    loose: frozenset[str],
    inherited: bool = False,
) -> None:
    """Claude Code's value ``expected`` against caliban's ``actual`` (see module docs).
    Inside an exact key (a tool's ``input``) every value is exact."""
    key = path.rsplit(".", 1)[-1].split("[", 1)[0]
    if key in loose or path in loose:
        inherited = False
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            out.add(path, f"expected an object, caliban has {_json_type(actual)}")
            return
        if key in KEYED_BY_MODEL:
            if len(expected) != len(actual):
                out.add(
                    path, f"{len(expected)} models from Claude Code, {len(actual)} from caliban"
                )
            for i, (e, a) in enumerate(zip(expected.values(), actual.values(), strict=False)):
                compare_value(e, a, f"{path}[{i}]", out, loose=loose)
            return
        within = inherited or (key in EXACT_KEYS and key not in loose and path not in loose)
        for name, value in expected.items():
            if name not in actual:
                known = any(path.endswith(f".{k}".rsplit(".", 1)[0]) for k in ABSENT_IN_CALIBAN)
                absent = known and f"{key}.{name}" in ABSENT_IN_CALIBAN
                if not absent and f"{path}.{name}" not in loose and name not in loose:
                    out.add(f"{path}.{name}", "missing in caliban's frame")
                continue
            compare_value(value, actual[name], f"{path}.{name}", out, loose=loose, inherited=within)
        return
    exact = inherited or (key in EXACT_KEYS and key not in loose and path not in loose)
    if key == "text" and not path.startswith("assistant/") and not inherited:
        exact = False  # the model's text is compared; tools' and caliban's own wording is not
    if isinstance(expected, list):
        if not isinstance(actual, list):
            out.add(path, f"expected a list, caliban has {_json_type(actual)}")
        elif key in ("content", "permission_denials", "mcp_servers", "errors") or exact:
            if key in loose or path in loose:
                return
            if len(expected) != len(actual):
                out.add(path, f"{len(expected)} items in Claude Code's, {len(actual)} in caliban's")
                return
            if key == "mcp_servers":  # Claude Code lists alwaysLoad servers first
                expected, actual = _by_name(expected), _by_name(actual)
            for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
                compare_value(e, a, f"{path}[{i}]", out, loose=loose, inherited=exact)
        return
    if exact and expected != actual:
        out.add(path, f"Claude Code {expected!r}, caliban {actual!r}")
    elif _json_type(expected) != _json_type(actual):
        if key in NULLABLE and actual is None:
            return
        if path in loose or key in loose:
            return
        out.add(path, f"Claude Code has a {_json_type(expected)}, caliban {_json_type(actual)}")


def compare(
    expected: Iterable[Mapping[str, Any]],
    actual: Iterable[Mapping[str, Any]],
    *,
    loose: Iterable[str] = (),
    ignore_groups: Mapping[str, str] | None = None,
) -> list[str]:
    """Differences between Claude Code's frames and caliban's ([] when caliban's match).

    ``loose``: keys or paths compared by type only (caliban words them its own way);
    ``ignore_groups``: frame kinds left out, each with the reason caliban differs.
    """
    loose_set = frozenset(loose)
    ignored = dict(ignore_groups or {})
    groups: dict[str, tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = {}
    for frame in expected:
        groups.setdefault(group_key(frame), ([], []))[0].append(frame)
    for frame in actual:
        groups.setdefault(group_key(frame), ([], []))[1].append(frame)
    out = Differences()
    for key, (theirs, ours) in groups.items():
        if key in ignored:
            continue
        if len(theirs) != len(ours):
            out.add(key, f"{len(theirs)} frames from Claude Code, {len(ours)} from caliban")
            continue
        if key.endswith("/tool_result"):  # results of parallel calls arrive in any order
            theirs, ours = sorted(theirs, key=_result_id), sorted(ours, key=_result_id)
        for i, (e, a) in enumerate(zip(theirs, ours, strict=True)):
            compare_value(e, a, f"{key}#{i}", out, loose=loose_set)
    return out.problems


def _result_id(frame: Mapping[str, Any]) -> str:
    return str(frame["message"]["content"][0].get("tool_use_id"))


def _by_name(items: list[Any]) -> list[Any]:
    return sorted(items, key=lambda item: str(item.get("name")) if isinstance(item, dict) else "")
