"""``caliban agents …``: inspect sub-agent definitions.

Imports only typer at module level; the definitions (and pyyaml) load when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from caliban.cli.output import err, out

agents_app = typer.Typer(help="Sub-agent definitions (.caliban/agents/*.md).", no_args_is_help=True)


@agents_app.command("list")
def agents_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the sub-agents the Agent tool can start, with where each is defined."""
    from caliban.subagents import AGENT_ROW_HEADERS, agent_rows, definition_dirs, list_agents

    cwd = Path.cwd()
    definitions, warnings = list_agents(cwd)
    for warning in warnings:
        err(f"caliban: warning: {warning}")
    if as_json:
        items = [
            {
                "name": d.name,
                "description": d.description,
                "source": str(d.path) if d.path else None,
                "scope": d.source,
                "model": d.model,
                "tools": list(d.tools) if d.tools is not None else None,
                "max_turns": d.max_turns,
                "inherit_active_mcp": d.inherit_active_mcp,
            }
            for d in definitions
        ]
        out(json.dumps(items, indent=2, ensure_ascii=False))
        return
    rows = [AGENT_ROW_HEADERS, *agent_rows(definitions)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(AGENT_ROW_HEADERS) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out("  ".join([*cells, row[-1]]).rstrip())
    searched = ", ".join(str(directory) for _, directory in definition_dirs(cwd))
    err(f"\nSearched (first wins on a name clash): {searched}")


__all__ = ["agents_app"]
