"""Where caliban keeps its files, following the XDG base-directory conventions.

Every function reads the environment when called (never at import), so tests can point
caliban at temporary directories with ``CALIBAN_CONFIG_DIR``, ``CALIBAN_STATE_DIR``,
``CALIBAN_DATA_DIR`` and ``CALIBAN_CACHE_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_DIR_NAME = ".caliban"


def _xdg(override: str, xdg_var: str, fallback: str) -> Path:
    if value := os.environ.get(override):
        return Path(value).expanduser()
    base = os.environ.get(xdg_var) or str(Path.home() / fallback)
    return Path(base).expanduser() / "caliban"


def user_config_dir() -> Path:
    """``$CALIBAN_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/caliban``, else ``~/.config/caliban``."""
    return _xdg("CALIBAN_CONFIG_DIR", "XDG_CONFIG_HOME", ".config")


def state_dir() -> Path:
    """Logs and history: ``$CALIBAN_STATE_DIR``, else ``$XDG_STATE_HOME/caliban``."""
    return _xdg("CALIBAN_STATE_DIR", "XDG_STATE_HOME", ".local/state")


def mcp_tokens_dir() -> Path:
    """MCP servers' OAuth tokens (:mod:`caliban.mcp.auth`): ``<state dir>/mcp-auth``. No tool
    may read them (a built-in deny rule: :func:`caliban.permissions.policy.builtin_denials`)."""
    return state_dir() / "mcp-auth"


def data_dir() -> Path:
    """Session transcripts: ``$CALIBAN_DATA_DIR``, else ``$XDG_DATA_HOME/caliban``."""
    return _xdg("CALIBAN_DATA_DIR", "XDG_DATA_HOME", ".local/share")


def claude_user_dir() -> Path:
    """Claude Code's user directory, read for compatibility (commands, skills):
    ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    if value := os.environ.get("CLAUDE_CONFIG_DIR"):
        return Path(value).expanduser()
    return Path.home() / ".claude"


def cache_dir() -> Path:
    """Caches that can be rebuilt (MCP servers' tool lists, tool embeddings):
    ``$CALIBAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/caliban``, else ``~/.cache/caliban``."""
    return _xdg("CALIBAN_CACHE_DIR", "XDG_CACHE_HOME", ".cache")


def find_project_root(cwd: Path) -> Path | None:
    """The nearest ancestor of ``cwd`` (itself included) holding ``.caliban/`` or ``.git``."""
    cwd = cwd.resolve()
    for directory in (cwd, *cwd.parents):
        if (directory / PROJECT_DIR_NAME).is_dir() or (directory / ".git").exists():
            return directory
    return None


def project_root(cwd: Path) -> Path:
    """Like :func:`find_project_root`, falling back to ``cwd`` outside any project."""
    return find_project_root(cwd) or cwd.resolve()


def project_config_dir(cwd: Path) -> Path:
    return project_root(cwd) / PROJECT_DIR_NAME
