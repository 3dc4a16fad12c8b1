"""Permission rules: their grammar and what each one matches.

A rule is ``Tool`` or ``Tool(pattern)`` (Claude Code's syntax). The tool part is a glob on the
tool name; ``Edit(...)`` also covers Write, and ``Read(...)`` covers Glob and Grep. The pattern
is a path glob for file tools (:func:`path_matches`), a command pattern for Bash
(:func:`command_matches`) and ``domain:HOST`` for WebFetch (:func:`domain_matches`).
:func:`suggest_rule` proposes the rule for "don't ask again".
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from caliban.permissions.bash_rules import pattern_matches
from caliban.util.hosts import ascii_name, canonical_host, is_loopback

__all__ = [
    "EDIT_TOOLS",
    "PATH_TOOLS",
    "READ_TOOLS",
    "WEB_FETCH",
    "PermissionRules",
    "Rule",
    "RuleError",
    "command_matches",
    "domain_matches",
    "file_rule",
    "is_within",
    "path_matches",
    "suggest_rule",
]

EDIT_TOOLS = frozenset({"Edit", "Write", "NotebookEdit"})
"""Tools that write the file named by their subject; an ``Edit(...)`` rule covers them all."""
READ_TOOLS = frozenset({"Read", "Glob", "Grep", "NotebookRead"})
"""Tools that read under their subject path; a ``Read(...)`` rule covers them all."""
PATH_TOOLS = EDIT_TOOLS | READ_TOOLS
_FAMILIES = {"Edit": EDIT_TOOLS, "Read": READ_TOOLS}
_GLOB_CHARS = frozenset("*?[{")


class RuleError(ValueError):
    """A permission rule that cannot be parsed; the message shows the expected form."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """``Tool`` or ``Tool(pattern)``. The tool part is a glob on the tool name."""

    text: str
    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Parse ``Bash``, ``Bash(git status*)``, ``Edit(src/**)``, ``mcp__github__*``."""
        stripped = text.strip()
        match = re.fullmatch(r"([A-Za-z0-9_*?\-.]+)(?:\((.*)\))?", stripped, re.DOTALL)
        if not match:
            hint = ""
            if " " in stripped and "(" not in stripped:
                hint = f" — did you mean Bash({stripped})?"
            raise RuleError(
                f"invalid permission rule {text!r}: expected Tool or Tool(pattern), e.g. "
                f"Read, Bash(git status*), Edit(src/**) or mcp__github__*{hint}"
            )
        pattern = match.group(2)
        if pattern is not None and pattern.strip() in ("", "*"):
            pattern = None  # Tool() and Tool(*) mean the whole tool
        if match.group(1) == WEB_FETCH and pattern is not None:
            _check_domain_pattern(text, pattern)
        return cls(text=stripped, tool=match.group(1), pattern=pattern)

    def names(self, tool_name: str) -> bool:
        """Whether the tool part of the rule covers ``tool_name``."""
        return _tool_covers(self.tool, tool_name)

    @property
    def absolute(self) -> bool:
        """True when the pattern names a place by absolute path (``/x``, ``//x``, ``~/x``)."""
        return self.pattern is not None and self.pattern.startswith(("/", "~"))

    def names_file(self, tool_name: str, path: Path, *, project_root: Path) -> bool:
        """Whether this rule covers ``tool_name`` on exactly ``path`` and nothing wider:
        its pattern has no wildcard and names the file itself, not a directory above it
        (``Edit(.git/config)``, ``Edit(~/.bashrc)``; not ``Edit``, ``Edit(.git)`` or
        ``Edit(**)``). Only such a rule allows a write to a protected path."""
        if not self.names(tool_name) or self.pattern is None:
            return False
        if _GLOB_CHARS & set(self.pattern):
            return False
        return path_matches(self.pattern, path, project_root, exact=True)

    def matches(
        self,
        tool_name: str,
        subject: str | None,
        *,
        project_root: Path,
        absolute_only: bool = False,
    ) -> bool:
        """Whether this rule covers a call of ``tool_name`` on ``subject``."""
        if not self.names(tool_name):
            return False
        if self.pattern is None:
            return not absolute_only
        if subject is None:
            return False
        if tool_name in PATH_TOOLS:
            return path_matches(
                self.pattern, Path(subject), project_root, absolute_only=absolute_only
            )
        if tool_name == WEB_FETCH:
            return not absolute_only and domain_matches(self.pattern, subject)
        return not absolute_only and command_matches(self.pattern, subject)


@functools.lru_cache(maxsize=1024)
def _tool_covers(tool: str, tool_name: str) -> bool:
    """Whether a rule's tool part ``tool`` covers ``tool_name`` (:meth:`Rule.names`; asked
    for every rule in every decision, so remembered)."""
    if tool == tool_name or tool_name in _FAMILIES.get(tool, ()):
        return True
    if fnmatch.fnmatchcase(tool_name, tool):
        return True
    # mcp__server covers every tool of that server, as in Claude Code.
    return tool.startswith("mcp__") and tool_name.startswith(tool + "__")


def _parse_all(texts: Iterable[str]) -> tuple[Rule, ...]:
    return tuple(Rule.parse(text) for text in texts)


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionRules:
    """Rules by behavior. deny beats ask beats allow."""

    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def parse(
        cls,
        *,
        allow: Iterable[str] = (),
        ask: Iterable[str] = (),
        deny: Iterable[str] = (),
    ) -> PermissionRules:
        """Rules from their text; raises :class:`RuleError` on the first bad one."""
        return cls(allow=_parse_all(allow), ask=_parse_all(ask), deny=_parse_all(deny))


def _glob_regex(glob: str) -> str:
    """Path glob → regex: ``**/`` an optional run of directories, ``**`` any run, ``*`` and
    ``?`` within one segment, ``{a,b}`` alternatives, ``[ab]`` one character."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "{" and (end := glob.find("}", i)) != -1:
            options = glob[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_glob_regex(option) for option in options) + ")")
            i = end + 1
        elif (
            char == "["
            and (end := glob.find("]", i + 2)) != -1
            and _valid_class(cls := _class_regex(glob[i + 1 : end]))
        ):
            out.append(cls)
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _class_regex(body: str) -> str:
    body = "^" + body[1:] if body.startswith("!") else body
    return "[" + body.replace("\\", "\\\\") + "]"


def _valid_class(regex: str) -> bool:
    """Whether RE2 takes this character class (``[z-a]`` is then a literal ``[``, as in
    fnmatch, instead of an error out of a permission check)."""
    import re2  # type: ignore[import-untyped]

    try:
        re2.compile(regex, _re2_options())
    except re2.error:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _re2_options() -> Any:
    import re2

    options = re2.Options()
    options.dot_nl = True  # a file name may hold a newline
    options.log_errors = False
    return options


@functools.lru_cache(maxsize=512)
def _glob_matcher(glob: str) -> Callable[[str], object]:
    """The compiled glob's ``fullmatch``. RE2 matches in time linear in the path whatever
    the pattern: Python's backtracking ``re`` took minutes per path on ``**/**/…/x``, a deny
    rule any repository can set."""
    import re2

    return re2.compile(_glob_regex(glob), _re2_options()).fullmatch  # type: ignore[no-any-return]


def _with_ancestors(path: PurePosixPath) -> list[str]:
    """The path and each directory above it: a rule on a directory covers what is in it."""
    return [str(path), *(str(parent) for parent in path.parents if str(parent) not in (".", "/"))]


def path_matches(
    pattern: str,
    path: Path,
    project_root: Path,
    *,
    absolute_only: bool = False,
    exact: bool = False,
) -> bool:
    """Whether a path rule pattern covers ``path`` (absolute).

    - ``src/**``, ``./x.py``: relative to the project root (a pattern with a ``/`` is
      anchored there);
    - ``*.env``, ``.env`` (no ``/``): that file name at any depth, anywhere;
    - ``//abs/**`` and ``~/x``: absolute (``~`` is the home directory);
    - ``/x/**``: absolute, and also relative to the project root (Claude Code reads a
      leading ``/`` as project-relative, so both are honoured).

    ``**`` spans directories; ``*`` and ``?`` do not cross ``/``. A pattern whose last
    segment is literal (``src``, ``.git``) also covers everything under that directory,
    unless ``exact``.
    """
    if not path.is_absolute():
        path = project_root / path
    absolute = PurePosixPath(os.path.normpath(path))
    pattern = pattern.rstrip("/") or "/"
    candidates: list[tuple[str, PurePosixPath]] = []  # (glob, path it is matched against)
    if pattern.startswith("~"):
        candidates.append((os.path.expanduser(pattern), absolute))
    elif pattern.startswith("//"):
        candidates.append((pattern[1:], absolute))
    elif pattern.startswith("/"):
        candidates.append((pattern, absolute))
        if not absolute_only:
            candidates.append((pattern[1:], _relative(absolute, project_root)))
    elif absolute_only:
        return False
    elif "/" in pattern.removeprefix("./"):
        candidates.append((pattern.removeprefix("./"), _relative(absolute, project_root)))
    elif pattern.startswith("./"):
        candidates.append((pattern[2:], _relative(absolute, project_root)))
    else:
        candidates.append(("**/" + pattern, absolute))
    for glob, target in candidates:
        if str(target) == "":
            continue
        # A literal last segment (src, .git, secrets/) names a directory and covers its
        # contents; a wildcard one (src/*) matches only what it says.
        literal = not _GLOB_CHARS & set(glob.rsplit("/", 1)[-1])
        texts = _with_ancestors(target) if literal and not exact else [str(target)]
        if any(_glob_matcher(glob)(text) for text in texts):
            return True
    return False


def _relative(path: PurePosixPath, root: Path) -> PurePosixPath:
    """``path`` relative to ``root``; empty when it lies outside (relative rules never match)."""
    try:
        return path.relative_to(PurePosixPath(os.path.normpath(root)))
    except ValueError:
        return PurePosixPath("")


def command_matches(pattern: str, command: str) -> bool:
    """Whether a command-style rule pattern covers ``command`` (runs of whitespace count as
    one space): ``*`` matches anything, ``prefix:*`` Claude Code's prefix form, the rest is
    literal. Bash rules are matched on the parsed command line instead
    (:mod:`caliban.permissions.bash_rules`)."""
    return pattern_matches(pattern, " ".join(command.split()))


WEB_FETCH = "WebFetch"
_DOMAIN = re.compile(r"domain:([\w*?.\-]+|\[[0-9a-f:.]+\])", re.IGNORECASE)


def _check_domain_pattern(text: str, pattern: str) -> None:
    """WebFetch rules name a host; anything else (a URL, a path) is refused, not guessed."""
    if not _DOMAIN.fullmatch(pattern.strip()):
        raise RuleError(
            f"invalid permission rule {text!r}: WebFetch rules name a domain, e.g. "
            "WebFetch(domain:example.com) or WebFetch(domain:*.example.com)"
        )


def domain_matches(pattern: str, host: str) -> bool:
    """Whether ``domain:HOST`` covers ``host`` (a WebFetch call's subject, or an address
    its host resolved to). Both are compared in one spelling
    (:func:`caliban.util.hosts.canonical_host`): ``domain:127.0.0.1`` covers ``127.1``,
    ``2130706433``, ``[::ffff:127.0.0.1]``; ``domain:bücher.de`` covers
    ``xn--bcher-kva.de``; ``domain:localhost`` covers every loopback address. A pattern
    with ``*`` or ``?`` is a glob on the name, case-insensitive: ``domain:*.example.com``
    is its subdomains. A malformed pattern matches nothing."""
    match = _DOMAIN.fullmatch(pattern.strip())
    if match is None:
        return False
    wanted, host = match.group(1), canonical_host(host)
    if "*" in wanted or "?" in wanted:
        return fnmatch.fnmatchcase(host, _canonical_glob(wanted))
    wanted = canonical_host(wanted)
    return wanted == host or (wanted == "localhost" and is_loopback(host))


def _canonical_glob(pattern: str) -> str:
    """A host glob in the spelling of :func:`canonical_host`, label by label."""
    labels = pattern.lower().rstrip(".").split(".")
    return ".".join(
        label if "*" in label or "?" in label else ascii_name(label) for label in labels
    )


def suggest_rule(tool_name: str, subject: str | None, project_root: Path) -> str:
    """The rule offered for "don't ask again this session": ``Bash(git commit:*)``,
    ``Edit(src/**)``, or the tool name (MCP tools and anything without a subject)."""
    if subject is None:
        return tool_name
    if tool_name == WEB_FETCH:
        return f"{WEB_FETCH}(domain:{subject})"
    if tool_name == "Bash":
        # A command line's rules come from its analysis (PermissionPolicy.suggestions).
        return ""
    if tool_name in PATH_TOOLS:
        family = "Edit" if tool_name in EDIT_TOOLS else tool_name
        path = Path(os.path.normpath(subject))
        if not is_within(path, project_root):
            return f"{family}({path.parent}/**)"
        relative = PurePosixPath(os.path.relpath(path, project_root))
        if family != "Edit":
            return f"{family}(./{relative})"
        if len(relative.parts) <= 1:
            return f"{family}(./*)"
        return f"{family}({relative.parts[0]}/**)"
    return tool_name


def file_rule(tool_name: str, path: Path, project_root: Path) -> str:
    """The rule naming exactly one file: ``Edit(./.mcp.json)`` in the project,
    ``Edit(~/.bashrc)`` under the home directory, ``Edit(//etc/x)`` elsewhere."""
    family = "Edit" if tool_name in EDIT_TOOLS else tool_name
    normal = Path(os.path.normpath(path))
    home = Path.home()
    if is_within(normal, project_root):
        return f"{family}(./{PurePosixPath(os.path.relpath(normal, project_root))})"
    if is_within(normal, home):
        return f"{family}(~/{PurePosixPath(os.path.relpath(normal, home))})"
    return f"{family}(/{normal})"


def is_within(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or lies under it (both normalised, not resolved)."""
    normal = os.path.normpath(path)
    top = os.path.normpath(root)
    return normal == top or normal.startswith(top.rstrip(os.sep) + os.sep)
