"""``caliban config …``: read and change settings (config.toml)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from caliban.cli.output import err, out

config_app = typer.Typer(help="Read and change settings (config.toml).", no_args_is_help=True)


def _load(cwd: Path) -> Any:
    from caliban.config.settings import load_config

    loaded = load_config(cwd)
    for warning in [*loaded.untrusted, *loaded.warnings]:
        err(f"caliban: warning: {warning}")
    return loaded


def _target(scope_global: bool) -> Path:
    from caliban.config.settings import project_config_path, user_config_path

    return user_config_path() if scope_global else project_config_path(Path.cwd())


def _show(value: Any) -> str:
    from caliban.config.settings import toml_value

    if value is None:
        return "(unset)"
    return toml_value(value)


GlobalFlag = Annotated[
    bool, typer.Option("--global", "-g", help="Use the user file instead of the project file.")
]


@config_app.command("get")
def config_get(key: Annotated[str, typer.Argument(help="Dotted key, e.g. tools.lazy_mcp")]) -> None:
    """Print the effective value of KEY."""
    from caliban.config.settings import get_value

    out(_show(get_value(_load(Path.cwd()).settings, key)))


@config_app.command("set")
def config_set(
    key: Annotated[str, typer.Argument(help="Dotted key, e.g. tools.lazy_mcp")],
    value: Annotated[str, typer.Argument(help='A TOML value: true, 24, "x", ["a", "b"]')],
    scope_global: GlobalFlag = False,
) -> None:
    """Set KEY to VALUE in the project file (or the user file with --global)."""
    from caliban.config.paths import project_root
    from caliban.config.settings import load_config, parse_value, set_value
    from caliban.permissions.trust import untrusted_notice

    path = _target(scope_global)
    set_value(path, key, parse_value(value))
    err(f"{key} = {_show(parse_value(value))} written to {path}")
    if scope_global:
        return
    project = [f for f in load_config(Path.cwd()).files if f.scope == "project"]
    if any(key in f.ignored for f in project):
        root = project_root(Path.cwd())
        err(f"caliban: warning: {untrusted_notice(f'{key} will be ignored', root)}")


@config_app.command("unset")
def config_unset(
    key: Annotated[str, typer.Argument(help="Dotted key, e.g. tools.lazy_mcp")],
    scope_global: GlobalFlag = False,
) -> None:
    """Remove KEY from the project file (or the user file with --global)."""
    from caliban.config.settings import unset_value

    path = _target(scope_global)
    if unset_value(path, key):
        err(f"{key} removed from {path}")
    else:
        err(f"{key} was not set in {path}")


@config_app.command("list")
def config_list(
    show_origin: Annotated[
        bool, typer.Option("--show-origin", help="Show which file set each value.")
    ] = False,
) -> None:
    """Print every effective setting."""
    from caliban.config.settings import all_keys, get_value

    loaded = _load(Path.cwd())
    for key in all_keys():
        line = f"{key} = {_show(get_value(loaded.settings, key))}"
        out(f"{line:<48} # {loaded.origin(key)}" if show_origin else line)


@config_app.command("path")
def config_path() -> None:
    """Print the user and project config file paths."""
    from caliban.config.settings import project_config_path, user_config_path

    for label, path in (("user", user_config_path()), ("project", project_config_path(Path.cwd()))):
        state = "" if path.exists() else "  (not created)"
        out(f"{label}: {path}{state}")
