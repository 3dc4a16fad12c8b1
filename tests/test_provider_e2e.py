"""Provider behaviour through the real ``caliban -p`` executable: effort and thinking (with a
transcript and ``--continue``), a stream that is not UTF-8 or is cut short, "prompt too
long", and the context window a local server reports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer
from test_headless_e2e import check_stream_shapes, lines, run

from caliban.permissions.trust import trust

pytestmark = pytest.mark.slow

THOUGHT = "The file list is what they want; Glob gives it."


def test_effort_thinking_streams_stays_out_of_the_result_and_survives_continue(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(
        {
            "thinking": THOUGHT,
            "signature": "sig-e2e",
            "tool_calls": [{"id": "toolu_1", "name": "Glob", "arguments": {"pattern": "*"}}],
        },
        {"thinking": "Done.", "signature": "sig-2", "text": "No files here."},
        {"text": "Still none."},
    )
    first = run(
        fake_model_server,
        "anthropic",
        project,
        "--model",
        "claude-opus-4-6",
        "--effort",
        "high",
        "--output-format",
        "stream-json",
        "--verbose",
        "list files",
    )
    assert first.returncode == 0, first.stderr
    objs = lines(first.stdout)
    check_stream_shapes(objs)
    assistant = objs[1]["message"]["content"]
    assert assistant[0] == {
        "type": "thinking",
        "thinking": THOUGHT,
        "signature": "sig-e2e",
        "model": "claude-opus-4-6",
    }
    assert objs[-1]["result"] == "No files here."  # the answer only, no reasoning
    request, after_tool = fake_model_server.bodies[:2]
    assert request["thinking"] == {"type": "adaptive"}
    assert request["output_config"] == {"effort": "high"} and request["max_tokens"] == 32_000
    # With tool use the API wants the thinking block back, unchanged.
    assert after_tool["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": THOUGHT,
        "signature": "sig-e2e",
    }

    again = run(
        fake_model_server,
        "anthropic",
        project,
        "--model",
        "claude-opus-4-6",
        "--continue",
        "and now?",
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Still none.\n"
    resumed = fake_model_server.bodies[2]
    assert "thinking" not in resumed  # no --effort, no model_effort: nothing about thinking
    restored = [block for m in resumed["messages"] for block in m["content"]]
    assert {"type": "thinking", "thinking": THOUGHT, "signature": "sig-e2e"} in restored


def test_model_effort_setting_and_a_bad_effort(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    (project / ".caliban" / "config.toml").write_text('model_effort = "low"\n')
    fake_model_server.add({"text": "ok"})
    result = run(fake_model_server, "openai", project, "--model", "o4-mini", "hi")
    assert result.returncode == 0, result.stderr
    assert fake_model_server.bodies[0]["reasoning_effort"] == "low"

    bad_flag = run(fake_model_server, "openai", project, "--effort", "extreme", "hi")
    assert bad_flag.returncode == 2 and "Traceback" not in bad_flag.stderr
    (project / ".caliban" / "config.toml").write_text('model_effort = "extreme"\n')
    bad_setting = run(fake_model_server, "openai", project, "hi")
    assert bad_setting.returncode == 78 and "model_effort" in bad_setting.stderr


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_stream_that_is_not_utf8_is_a_json_error_not_a_traceback(
    fake_model_server: FakeModelServer, provider: str, project: Path
) -> None:
    if provider == "anthropic":
        raw = (
            b'event: message_start\ndata: {"type":"message_start","message":{"usage":{}}}\n\n'
            b"event: content_block_delta\n"
            b'data: {"type":"content_block_delta","index":0,"delta":{"text":"\xff"}}\n\n'
        )
    else:
        raw = b'data: {"choices":[{"index":0,"delta":{"content":"caf\xe9"}}]}\n\n'
    fake_model_server.add({"raw": raw})
    result = run(fake_model_server, provider, project, "--output-format", "json", "hi")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "not valid UTF-8" in result.stderr
    [obj] = lines(result.stdout)
    assert obj["is_error"] and "not valid UTF-8" in obj["error"]


def test_an_answer_cut_short_is_not_reported_as_complete(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    chunk = {"object": "chat.completion.chunk", "model": "m"}
    cut = [
        {**chunk, "choices": [{"index": 0, "delta": {"content": "The tests all"}}]},
        {**chunk, "choices": [{"index": 0, "delta": {"content": " pass"}}]},
    ]  # no finish_reason, no [DONE]: the connection just ended
    fake_model_server.add({"sse": cut})
    result = run(fake_model_server, "openai", project, "--output-format", "json", "status?")
    assert result.returncode == 1, result.stdout
    [obj] = lines(result.stdout)
    assert obj["is_error"] and obj["result"] != "The tests all pass"
    assert "broke off" in obj["error"] and "Traceback" not in result.stderr


def test_prompt_too_long_is_reported_as_such(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    fake_model_server.add(
        {"status": 400, "message": "prompt is too long: 201234 tokens > 200000 maximum"}
    )
    result = run(fake_model_server, "anthropic", project, "--output-format", "json", "hi")
    assert result.returncode == 1
    [obj] = lines(result.stdout)
    assert "no longer fits the model's context window" in obj["error"]
    assert len(fake_model_server.requests) == 1  # not retried


@pytest.mark.parametrize(("n_ctx", "lazy"), [(8192, True), (None, False)])
def test_lazy_auto_and_the_context_report_use_the_window_the_server_reports(
    fake_model_server: FakeModelServer, project: Path, n_ctx: int | None, lazy: bool
) -> None:
    catalog = Path(__file__).parent / "mcp_servers" / "catalog_server.py"
    trust(project)  # its mcp.toml servers start only in a trusted folder
    (project / ".caliban" / "mcp.toml").write_text(
        f'[server.catalog]\ncommand = "{sys.executable}"\nargs = ["{catalog}"]\n'
    )
    # the first request waits for the catalog: "auto" decides from its tools' size
    (project / ".caliban" / "config.toml").write_text(
        '[tools]\nlazy_mcp = "auto"\nwait_for_mcp = true\n'
    )
    if n_ctx is not None:  # llama.cpp started with -c 8192
        fake_model_server.endpoints["GET /props"] = {
            "default_generation_settings": {"n_ctx": n_ctx},
            "model_alias": "local",
        }
    fake_model_server.add({"text": "ok"})
    result = run(
        fake_model_server, "openai", project, "--model", "local", "--output-format", "json", "hi"
    )
    assert result.returncode == 0, result.stderr
    [obj] = lines(result.stdout)
    assert obj["context"]["context_window"] == (n_ctx or 128_000)
    # The 40 catalog tools (~5k tokens) are over 10% of 8k but not of 128k.
    assert obj["context"]["mcp"]["lazy"] is lazy
    offered = fake_model_server.requests[0].tool_names
    catalog_tools = [name for name in offered if name.startswith("mcp__catalog__")]
    assert ("ToolSearch" in offered) is lazy and (len(catalog_tools) == 40) is not lazy
    assert [f"{p.method} {p.path}" for p in fake_model_server.probes][:2] == [
        "GET /v1/models",
        "GET /props?model=local",
    ]
