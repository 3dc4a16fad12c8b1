"""Start-up is a feature: the fast commands import no SDK, MCP or prompt-toolkit."""

from __future__ import annotations

import subprocess
import sys

import pytest
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
