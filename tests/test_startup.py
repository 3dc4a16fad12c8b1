"""Start-up is a feature: the fast commands import no SDK, MCP or prompt-toolkit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer
from hang import HANG_S

HEAVY = ("anthropic", "openai", "mcp", "prompt_toolkit")


def imported_modules(*args: str) -> set[str]:
    """Top-level modules imported by ``caliban ARGS`` (from ``-X importtime``)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "caliban", *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["config", "list"], ["mcp", "--help"]])
def test_fast_commands_import_no_sdk(args: list[str]) -> None:
    modules = imported_modules(*args)
    assert "caliban" in modules  # the measurement works
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_version_imports_nothing_but_the_entry_point() -> None:
    """``caliban --version`` answers before the command line is parsed: no typer, no asyncio,
    no logging, no pydantic, no SDK (it cost 257 ms of CPU when it imported them)."""
    modules = imported_modules("--version")
    assert "caliban" in modules
    unwanted = {"typer", "click", "asyncio", "logging", "pydantic", "rich", "httpx2", *HEAVY}
    assert not modules & unwanted, sorted(modules & unwanted)


@pytest.mark.parametrize("args", [["--help"], ["mcp", "--help"], ["config", "list"]])
def test_parsing_commands_import_no_event_loop_or_logging(args: list[str]) -> None:
    """What a command does not run is not imported: asyncio and logging come with the commands
    that use them (``mcp list``, ``--debug``), pydantic with the config they read."""
    modules = imported_modules(*args)
    assert "typer" in modules
    assert not modules & {"asyncio", "logging"}, sorted(modules & {"asyncio", "logging"})


def imported_module_names(args: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    """Every module (full dotted names) imported by ``caliban ARGS``, threads included."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "caliban", *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


PRINT_RUN_UNUSED = (
    "yaml",  # only for agent, command and skill files with frontmatter
    "caliban.checkpoints.manager",  # -p takes checkpoints only for the Agent SDK
    "caliban.checkpoints.store",
    "caliban.repl",
    "caliban.mcp.client",  # no MCP server configured
    "caliban.search",
    "caliban.tools._web",  # WebFetch's fetcher: imported on the first fetch
    "numpy",
    "tree_sitter",
    "rich",
    *HEAVY,
)
"""What ``caliban -p "say ok"`` (no MCP server, no definition files) must not import:
each was measured on this path once, at 10–60 ms of CPU, for a run that never used it."""


@pytest.mark.parametrize("output", [[], ["--output-format", "stream-json", "--verbose"]])
def test_a_print_run_imports_only_what_it_uses(
    fake_model_server: FakeModelServer, project: Path, output: list[str]
) -> None:
    fake_model_server.add({"text": "ok"})
    env = {**os.environ, "ANTHROPIC_API_KEY": "x", "ANTHROPIC_BASE_URL": fake_model_server.url}
    modules = imported_module_names(["-p", "say ok", *output], env, project)
    assert "caliban.agent" in modules  # the measurement works
    unwanted = sorted(
        name
        for name in modules
        if any(name == p or name.startswith(p + ".") for p in PRINT_RUN_UNUSED)
    )
    assert not unwanted, unwanted


def test_a_session_loads_no_pydantic_plugins_and_its_commands_may(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pydantic scans every installed distribution's entry points for plugins when it builds
    its first model (10–15 ms of each start-up): a session skips the scan in its own process,
    without the environment variable its commands would inherit."""
    import importlib.metadata

    from pydantic.plugin import _loader

    from caliban.cli.app import _without_pydantic_plugins

    monkeypatch.setattr(_loader, "_plugins", None)
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)

    def no_scan(**_: object) -> object:
        raise AssertionError("pydantic scanned the entry points for plugins")

    monkeypatch.setattr(importlib.metadata, "entry_points", no_scan)
    monkeypatch.setattr(_loader, "entry_points", no_scan)
    _without_pydantic_plugins()
    assert list(_loader.get_plugins()) == []
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ


def test_config_models_do_not_parse_their_source() -> None:
    """``use_attribute_docstrings`` reads and parses each model's source at import (55 ms of
    every start-up for the settings and MCP server models)."""
    from pydantic import BaseModel

    from caliban.config import settings
    from caliban.mcp import config

    models = [
        value
        for module in (settings, config)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel
    ]
    assert len(models) > 5
    assert not [m for m in models if m.model_config.get("use_attribute_docstrings")]


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "hi"],
        [],
        ["--model", "x", "-p", "fix the config"],
        ["-p", "hi", "--", "more", "words"],
    ],
)
def test_a_prompt_is_parsed_without_the_subcommands(args: list[str]) -> None:
    from caliban.cli.app import app_for, prompt_app

    assert app_for(args) is prompt_app
    assert not prompt_app.registered_groups and not prompt_app.registered_commands


@pytest.mark.parametrize(
    "args", [["mcp", "list"], ["--help"], ["-p", "x", "-h"], ["-p", "config"], ["trust"]]
)
def test_subcommands_and_help_get_the_whole_command_line(args: list[str]) -> None:
    from caliban.cli.app import app, app_for

    assert app_for(args) is app


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["--max-turns", "abc", "-p", "hi"],
        ["--output-format", "xml", "-p", "hi"],
        ["-p", "hi", "--effort", "nope"],
        ["--model"],
        ["--permission-mode", "foo", "-p", "x"],
        ["-p", "hi", "--max-budget-usd", "-1"],
    ],
)
def test_the_prompt_command_line_fails_as_the_whole_one_does(args: list[str]) -> None:
    """The two apps share the root callback: what the prompt's parses, it parses alike."""
    from typer.testing import CliRunner

    from caliban.cli.app import app, prompt_app

    whole = CliRunner().invoke(app, args)
    alone = CliRunner().invoke(prompt_app, args)
    assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)
    assert whole.exit_code != 0


def test_the_repl_module_imports_no_syntax_highlighter() -> None:
    """pygments (rich.syntax, ~40 ms) is for ``/diff``, not for the prompt to appear."""
    code = (
        "import sys, caliban.repl.app; print([m for m in ('pygments', 'yaml') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_tool_schemas_are_the_ones_pydantic_writes() -> None:
    """The built-in tools' input schemas skip pydantic's per-default TypeAdapter (5–8 ms of
    every start-up) and stay byte for byte what pydantic writes, which the wire carries."""
    import importlib
    import json

    from pydantic.json_schema import GenerateJsonSchema

    from caliban.tools.base import BuiltinTool, _InputSchema

    for module in (
        "caliban.tools.builtin",
        "caliban.tools.agent",
        "caliban.tools.exit_plan_mode",
        "caliban.skills.toolset",
        "caliban.mcp.lazy.tool_search",
        "caliban.mcp.wait",
    ):
        importlib.import_module(module)

    def subclasses(cls: type) -> list[type]:
        return [s for sub in cls.__subclasses__() for s in (sub, *subclasses(sub))]

    tools = [t for t in subclasses(BuiltinTool) if "input_model" in vars(t)]
    assert len(tools) >= 14
    for tool in tools:
        fast = tool.input_model.model_json_schema(by_alias=True, schema_generator=_InputSchema)
        plain = tool.input_model.model_json_schema(by_alias=True)
        assert json.dumps(fast) == json.dumps(plain), tool.__name__
    # Any other default is still pydantic's to encode.
    for value in ("a", 3, True, None, 1.5, float("inf"), (1, "a"), ["x"], {"k": 1}):
        assert _InputSchema().encode_default(value) == GenerateJsonSchema().encode_default(value)
