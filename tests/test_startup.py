"""Start-up is a feature: the fast commands import no SDK, MCP or prompt-toolkit."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("anthropic", "openai", "mcp", "prompt_toolkit")


def imported_modules(*args: str) -> set[str]:
    """Top-level modules imported by ``caliban ARGS`` (from ``-X importtime``)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "caliban", *args],
        capture_output=True,
        text=True,
        timeout=60,
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
