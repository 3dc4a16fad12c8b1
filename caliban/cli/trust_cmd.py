"""``caliban trust [PATH]``: trust a folder, list trusted folders, revoke trust.

Until a folder is trusted, what is committed in it may not start a process or widen
permissions (see :mod:`caliban.permissions.trust`). The REPL asks on first start; this
command is for scripts and CI. Imports only typer at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from caliban.cli.output import err, out

EXIT_NOT_FOUND = 1


def trust_command(
    path: Annotated[
        Path | None,
        typer.Argument(
            metavar="PATH",
            help="The folder (default: the project root of the current directory).",
            show_default=False,
        ),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the trusted folders.")] = False,
    revoke: Annotated[
        bool, typer.Option("--revoke", help="Stop trusting PATH (default: this project).")
    ] = False,
) -> None:
    """Trust a folder: its .mcp.json and .caliban/mcp.toml servers start and its
    .caliban/config.toml may widen permissions (mode, allow rules). Trust covers every
    folder below it and is kept in your state directory, never in the project."""
    from caliban.config.paths import project_root
    from caliban.permissions import trust

    if list_:
        if path is not None or revoke:
            err("caliban: trust --list takes no PATH and no --revoke")
            raise typer.Exit(2)
        folders = trust.trusted_folders()
        for folder in folders:
            out(str(folder))
        if not folders:
            err("No trusted folders. Trust one with `caliban trust [PATH]`.")
        return
    if path is not None and not path.expanduser().is_dir():
        err(f"caliban: {path} is not a directory")
        raise typer.Exit(2)
    folder = path.expanduser() if path is not None else project_root(Path.cwd())
    if revoke:
        _revoke(folder)
        return
    from caliban.errors import ConfigError
    from caliban.session.assemble import held_back

    try:
        pending = held_back(folder)
    except ConfigError as exc:  # a broken file must not stop the user from trusting
        err(f"caliban: warning: {exc}")
        pending = []
    stored = trust.trust(folder)
    out(f"Trusted {stored} and every folder below it.")
    if stored in (Path.home().resolve(), Path(stored.anchor)):
        err(
            f"caliban: warning: that includes every repository you clone below {stored}; "
            "trusting each project instead is safer"
        )
    if pending:
        out("Now used there:")
        for item in pending:
            out(f"  {item}")
    out("Undo with `caliban trust --revoke" + ("" if path is None else f" {stored}") + "`.")


def _revoke(folder: Path) -> None:
    from caliban.permissions import trust

    if trust.revoke(folder):
        out(f"No longer trusted: {folder.resolve()}")
        if trust.is_trusted(folder):
            above = _trusted_above(folder)
            out(f"(still trusted through {above}; revoke that to stop trusting it)")
        return
    if trust.is_trusted(folder):
        err(
            f"caliban: {folder.resolve()} is trusted through {_trusted_above(folder)}; "
            "revoke that folder instead"
        )
    else:
        err(f"caliban: {folder.resolve()} is not trusted")
    raise typer.Exit(EXIT_NOT_FOUND)


def _trusted_above(folder: Path) -> Path | None:
    from caliban.permissions import trust

    target = folder.resolve()
    return next((f for f in trust.trusted_folders() if f in target.parents or f == target), None)


__all__ = ["trust_command"]
