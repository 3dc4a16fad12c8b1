"""``caliban doctor`` (what is wrong with this install and project, and how to fix it) and
``caliban update`` (how to update this install). Imports only typer at module level."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from caliban.cli.output import out

EXIT_PROBLEMS = 1


def doctor_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check the installation, settings, trust, MCP servers' commands, the model provider's
    key, the tools caliban runs and its state directory; exit 1 when a check fails."""
    import json

    from caliban.config.doctor import run_checks, worst

    checks = run_checks(Path.cwd())
    if json_output:
        rows = [
            {"area": c.area, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks
        ]
        out(json.dumps(rows, indent=2))
    else:
        marks = {"ok": "✓", "warn": "⚠", "fail": "✗"}
        for check in checks:
            out(f"{marks[check.status]} {check.area}: {check.detail}")
            if check.fix:
                out(f"    fix: {check.fix}")
    if worst(checks) == "fail":
        raise typer.Exit(EXIT_PROBLEMS)


def update_command() -> None:
    """Say how to update this installation of caliban (it changes nothing itself)."""
    from caliban import __version__

    package = Path(__file__).resolve().parents[1]
    checkout = package.parent
    out(f"caliban {__version__} at {package}")
    if (checkout / ".git").exists() and (checkout / "pyproject.toml").is_file():
        out("It runs from a source checkout. To update it:")
        out(f"  git -C {checkout} pull && {sys.executable} -m pip install -e {checkout}")
    else:
        out("To update it:")
        out(f"  {sys.executable} -m pip install --upgrade caliban")
    out("caliban does not update itself: your environment changes only when you say so.")
