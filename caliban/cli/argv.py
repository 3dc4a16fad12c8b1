"""Claude Code's command-line spellings, rewritten into what click parses.

Claude Code's list options take several values (``--allowedTools Read Edit``), ``--resume``,
``--worktree`` and ``--debug`` take an optional one, and some flags change nothing in caliban; these
functions rewrite ``sys.argv`` before :mod:`caliban.cli.app` parses it.
"""

from __future__ import annotations

import re
from pathlib import Path

from caliban.cli.output import err

VARIADIC_OPTIONS = frozenset(
    {
        "--allowedTools",
        "--allowed-tools",
        "--disallowedTools",
        "--disallowed-tools",
        "--tools",
        "--mcp-config",
        "--add-dir",
    }
)
"""Options that take several values, as in Claude Code (``--allowedTools Bash Edit``)."""


_TOOL = r"(?:[A-Z][A-Za-z0-9_*?]*|mcp__[A-Za-z0-9_*?\-.]*)(?:\(.*\))?"
_RULE_WORD = re.compile(rf"{_TOOL}(?:[,\s]+{_TOOL})*,?")
"""A list of rules: tool names start with a capital (``Bash``, ``Edit(src/**)``) or
``mcp__``, so a lower-case word after the list (``-p --allowedTools Read go``) is the prompt."""


def _takes_another(option: str, token: str) -> bool:
    """Whether ``token``, after a value of the list option ``option``, is another value.

    Claude Code takes every word up to the next option; caliban takes only words that look
    like values (a rule, a JSON object, an existing path), so ``--allowed-tools Read "fix
    the bug"`` keeps its prompt.
    """
    if option in ("--mcp-config",):
        return token.lstrip().startswith("{") or Path(token).expanduser().is_file()
    if option == "--add-dir":
        return Path(token).expanduser().is_dir()
    return _RULE_WORD.fullmatch(token) is not None


def expand_variadic(argv: list[str]) -> list[str]:
    """``--allowedTools A B -p x`` → ``--allowedTools A --allowedTools B -p x``.

    Claude Code's list options take several values; click's take one each, so the values
    are spread over repeated options (see :func:`_takes_another`).
    """
    result: list[str] = []
    current: str | None = None
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            result.append(token)
            result.extend(tokens)
            break
        if token.startswith("-") and token != "-":
            name = token.split("=", 1)[0]
            current = name if name in VARIADIC_OPTIONS and "=" not in token else None
            result.append(token)
            if current is not None:
                value = next(tokens, None)
                if value is not None:
                    result.append(value)
            continue
        if current is not None and _takes_another(current, token):
            result += [current, token]
            continue
        current = None
        result.append(token)
    return result


OPTIONAL_VALUE = {"--resume": "-r", "--worktree": "-w"}
"""Options whose value may be left out (Claude Code's ``--resume [id]``, ``-w [name]``): the
next word is the value unless it is an option, as Claude Code reads them, so
``--resume typo`` is a session id that is not found, never a prompt."""


def normalise_optional_values(argv: list[str]) -> list[str]:
    """``--resume`` / ``-w`` without a value become ``--resume=`` / ``--worktree=``."""
    result: list[str] = []
    for i, token in enumerate(argv):
        result.append(token)
        if token == "--":
            result.extend(argv[i + 1 :])
            break
        for long, short in OPTIONAL_VALUE.items():
            if token in (long, short):
                following = argv[i + 1] if i + 1 < len(argv) else None
                if following is None or following.startswith("-"):
                    result[-1] = f"{long}="
    return result


SUBCOMMANDS = frozenset({"config", "agents", "sessions", "mcp", "trust", "doctor", "update"})

SILENT_FLAGS = frozenset(
    {
        "--exclude-dynamic-system-prompt-sections",
        "--allow-dangerously-skip-permissions",
        "--ide",
        "--chrome",
        "--no-chrome",
        "--ax-screen-reader",
    }
)
"""Claude Code flags that change nothing a ``-p`` run shows: accepted and dropped."""

IGNORED_WITH_VALUE = {"--name": "", "-n": "", "--max-thinking-tokens": "warn"}
"""Claude Code flags with one value that caliban accepts and ignores (``warn``: says so)."""

_DEBUG_FILTER = re.compile(r"!?[\w.-]+(?:\s*,\s*!?[\w.-]+)+|![\w.-]+|api|mcp|hooks|file|1p")
"""A ``--debug`` filter: a category list (``api,hooks``), a negation, or one known category.
Anything else after ``--debug`` is the prompt (Claude Code would take it as the filter)."""

_BETA = re.compile(r"[a-z0-9][a-z0-9-]*")


def compat_flags(argv: list[str]) -> list[str]:
    """Claude Code's spellings caliban parses differently, before click sees them.

    ``--debug``'s value is optional (``-d``, ``--debug api,mcp``); flags that change nothing
    in caliban are dropped (some with a warning on stderr)."""
    if argv and argv[0] in SUBCOMMANDS:
        return argv
    result: list[str] = []
    tokens = iter(enumerate(argv))
    for i, token in tokens:
        following = argv[i + 1] if i + 1 < len(argv) else None
        if token == "--":
            result.extend(argv[i:])
            break
        if token == "-d2e":
            result.append("--debug-to-stderr")
        elif token in ("-d", "--debug"):
            if following is not None and _DEBUG_FILTER.fullmatch(following):
                result.append(f"--debug={following}")
                next(tokens, None)
            else:
                result.append("--debug=")
        elif token in SILENT_FLAGS:
            pass
        elif token.split("=", 1)[0] in IGNORED_WITH_VALUE:
            flag = token.split("=", 1)[0]
            if "=" not in token:
                next(tokens, None)
            if IGNORED_WITH_VALUE[flag] == "warn":
                err(f"caliban: warning: {flag} is not supported; ignored")
        elif token == "--betas" or token.startswith("--betas="):
            if "=" not in token:
                # Claude Code's --betas takes several values: beta names, not the prompt.
                while (nxt := argv[i + 1] if i + 1 < len(argv) else None) is not None and (
                    _BETA.fullmatch(nxt) and "-" in nxt
                ):
                    next(tokens, None)
                    i += 1
            err("caliban: warning: --betas is not supported; ignored")
        else:
            result.append(token)
    return result
