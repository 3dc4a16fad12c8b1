"""``caliban sessions …``: list and remove this project's saved sessions.

Imports only typer at module level; the session store loads when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from caliban.cli.output import err, out

sessions_app = typer.Typer(
    help="Saved sessions of this project (resume one with -c or --resume ID).",
    no_args_is_help=True,
)


@sessions_app.command("list")
def sessions_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, metavar="N", help="Show at most N sessions.")
    ] = 50,
) -> None:
    """List this project's sessions, most recently active first."""
    from caliban.config.paths import project_root
    from caliban.session.store import format_summary, list_sessions

    root = project_root(Path.cwd())
    sessions = list_sessions(root)[:limit]
    if as_json:
        items = [
            {
                "id": s.id,
                "updated": s.updated.isoformat(timespec="seconds"),
                "created": s.created,
                "turns": s.turns,
                "first_prompt": s.first_prompt,
                "in_use": s.in_use,
                "path": str(s.path),
            }
            for s in sessions
        ]
        out(json.dumps(items, indent=2, ensure_ascii=False))
        return
    if not sessions:
        err(f"No saved sessions for {root}.")
        return
    out(f"{'ID':<8}  {'LAST ACTIVE':<16}  {'TURNS':>9}  FIRST PROMPT")
    for summary in sessions:
        out(f"{summary.id[:8]}  {format_summary(summary)}")


@sessions_app.command("rm")
def sessions_rm(
    session_id: Annotated[
        str, typer.Argument(metavar="ID", help="A session id, or a prefix matching one session.")
    ],
) -> None:
    """Delete a saved session of this project."""
    from caliban.config.paths import project_root
    from caliban.session.store import remove_session

    removed = remove_session(project_root(Path.cwd()), session_id)
    prompt = f" ({removed.first_prompt[:60]!r})" if removed.first_prompt else ""
    err(f"Removed session {removed.id}{prompt}.")
