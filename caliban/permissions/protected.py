"""Protected paths: files whose content decides permissions or runs code later.

Writing one is how a model steered by text it read would raise its own privileges: an
``allow`` rule added to ``.caliban/config.toml``, a server added to ``.mcp.json``,
``core.fsmonitor`` set in ``.git/config`` (which the next ``git status`` runs), a line added
to ``~/.bashrc``. So a write to one always asks, in every mode but ``bypassPermissions``,
even in ``acceptEdits`` and even under a broad allow rule; only an allow rule naming that
very file allows it (:func:`caliban.permissions.rules.Rule.names_file`).

Matching is on the resolved path (symlinks followed by the caller) and ignores case, so
``.GIT/config`` on a case-insensitive file system is caught too. A name is not the only way
to a file: a hard link made earlier (``ln .git/config notes``) is the protected file under
another name, so a file with more than one name is protected too (:func:`_other_names`).
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from caliban.config import paths
from caliban.exec import Command, run

__all__ = ["protected_reason"]

SHELL_STARTUP = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
    }
)
"""File names a shell runs when it starts (or exits), wherever they are."""


def protected_reason(path: Path) -> str | None:
    """Why writing ``path`` (absolute, resolved) could widen permissions or run code later,
    as a phrase ("git runs it as a hook"); None for an ordinary file."""
    return _by_name(path) or _other_names(path)


def _by_name(path: Path) -> str | None:
    normal = os.path.normpath(path)
    parts = normal.casefold().split(os.sep)
    name = parts[-1]
    for index, part in enumerate(parts[:-1]):
        rest = parts[index + 1 :]
        if part == ".caliban":
            return "it is caliban's project configuration (settings, MCP servers, agents)"
        if part == ".claude" and rest[0].startswith("settings") and name.endswith(".json"):
            return "it is Claude Code's settings file (permissions and hooks)"
        if part == ".claude" and rest[0] == "hooks":
            return "Claude Code runs it as a hook"
        if part == ".claude" and rest[0] in ("commands", "skills"):
            return "it is a custom command or skill, whose !`…` snippets run as commands"
        if part == ".git":
            if "hooks" in rest[:-1]:
                return "git runs it as a hook"
            if name == "config":
                return "it is git's configuration, which can run commands (core.fsmonitor, …)"
            # Other files there decide which configuration git reads: `commondir` points
            # git at another directory's `config`, `config.worktree` is read as config.
            return (
                "it is inside a git directory, whose files (commondir, config.worktree, …) "
                "decide which configuration git reads, and so what it runs"
            )
    if name == ".git":
        # A `.git` file (`gitdir: elsewhere`) makes `elsewhere/config` git's configuration.
        return "a .git file tells git where its directory, and so its configuration, is"
    if name == ".mcp.json":
        return "it lists MCP servers, which start as commands"
    if _in_hooks_path(normal):
        return "git runs it as a hook (the repository's core.hooksPath)"
    if name in SHELL_STARTUP:
        return "every new shell runs it"
    return _user_file(normal)


def _other_names(path: Path) -> str | None:
    """Why a file with several names (hard links) is protected: caliban cannot list a
    file's other names, and one of them may be protected; the one found among the usual
    places is named."""
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_nlink < 2 or not stat.S_ISREG(info.st_mode):
        return None
    identity = (info.st_dev, info.st_ino)
    for candidate in _usual_protected_files(path):
        try:
            same = candidate.stat()
        except OSError:
            continue
        if (same.st_dev, same.st_ino) == identity and (why := _by_name(candidate)):
            return f"it is a hard link to {candidate}, and {why}"
    return (
        f"it has {info.st_nlink} names (hard links), and caliban cannot tell whether another "
        "of them is a protected file"
    )


_PROJECT_FILES = (
    ".git/config",
    ".git/config.worktree",
    ".mcp.json",
    ".caliban/config.toml",
    ".caliban/mcp.toml",
    ".claude/settings.json",
    ".claude/settings.local.json",
)


def _usual_protected_files(path: Path) -> Iterator[Path]:
    """Protected files a hard link to ``path`` most likely is: the shell's and git's
    start-up files at home, and the project files of every directory above ``path``."""
    home = Path.home()
    yield from (home / name for name in sorted(SHELL_STARTUP))
    yield home / ".gitconfig"
    yield Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git" / "config"
    yield paths.user_config_dir() / "config.toml"
    for directory in path.parents:
        yield from (directory / name for name in _PROJECT_FILES)


def _user_file(path: str) -> str | None:
    """The user's own files that decide permissions or run code (``path`` normalised)."""
    target = path.casefold()
    for top, reason in _user_places(*(os.environ.get(name) for name in _USER_PLACES_FROM)):
        if _within(target, top):
            return reason
    return None


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


_USER_PLACES_FROM = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "CALIBAN_CONFIG_DIR",
    "CALIBAN_STATE_DIR",
    "CLAUDE_CONFIG_DIR",
)
"""The environment variables that place the user's files: :func:`_user_places` is
memoised on their values."""


@functools.lru_cache(maxsize=8)
def _user_places(*environment: str | None) -> tuple[tuple[str, str], ...]:
    """The user's files and folders of :func:`_user_file` (normalised, case folded), for
    ``environment`` (the values of :data:`_USER_PLACES_FROM`, which they are read from)."""
    home = Path.home()
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    places = (
        (paths.user_config_dir(), "it is caliban's user configuration"),
        (paths.state_dir() / "trusted-folders.json", "it lists caliban's trusted folders"),
        (home / ".gitconfig", "it is git's configuration, which can run commands"),
        (config_home / "git", "it is git's configuration, which can run commands"),
        (config_home / "fish", "the fish shell runs it"),
        (home / ".ssh", "it is SSH configuration (ProxyCommand runs commands) or keys"),
        (home / ".claude", "it is Claude Code's user configuration"),
        (paths.claude_user_dir(), "it is Claude Code's user configuration"),
    )
    return tuple((os.path.normpath(place).casefold(), reason) for place, reason in places)


def _in_hooks_path(path: str) -> bool:
    """Whether ``path`` (normalised) is in the directory the enclosing repository's
    ``core.hooksPath`` names (husky's ``.husky/_``, whose hooks run the scripts in
    ``.husky/``: that too)."""
    directory = path
    while (parent := os.path.dirname(directory)) != directory:
        directory = parent
        if os.path.lexists(os.path.join(directory, ".git")):
            hooks = _hooks_dir(Path(directory))
            if hooks is None:
                return False
            places = (hooks, hooks.parent) if hooks.name == "_" else (hooks,)
            return any(_within(path, str(place)) for place in places)
    return False


@functools.lru_cache(maxsize=64)
def _hooks_dir(root: Path) -> Path | None:
    """``core.hooksPath`` for the repository at ``root``, absolute and resolved; read once
    (changing it means writing a git config file, which is protected)."""
    command = Command(argv=("git", "-C", str(root), "config", "--get", "core.hooksPath"))
    try:
        found = run(command, timeout=5, max_output=64 * 1024)
    except OSError:
        return None
    value = os.fsdecode(found.stdout).strip()
    if not found.ok or not value:
        return None
    return Path(os.path.realpath(root / os.path.expanduser(value)))
