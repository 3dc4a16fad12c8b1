"""The permission policy: may a tool call run, must the user be asked, or is it refused?

:func:`decide` is a pure function of the tool, its permission subject (a path or a
command), the mode and the rules. :func:`make_authorize` wraps it into the agent loop's
``Authorize`` seam, asking an :class:`Approver` (the REPL's prompt, or
:func:`deny_approver` when headless) whenever the answer is "ask".

Precedence, first match wins:

1. a ``deny`` rule denies (in every mode, ``bypassPermissions`` included);
2. ``bypassPermissions`` allows everything else;
3. ``plan`` mode denies every tool that is not read-only (allow rules do not override it);
4. an ``ask`` rule asks;
5. a write (Write/Edit) outside the project root asks, unless an allow rule names that
   place by an absolute path;
6. an ``allow`` rule (config, ``--allowed-tools`` or "don't ask again this session") allows;
7. the mode's default: read-only built-in tools run; in ``acceptEdits`` file edits inside
   the project run; everything else asks.
"""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import json
import os
import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, Protocol, assert_never

from caliban.config import ConfigError, PermissionMode, PermissionsSettings
from caliban.tools.base import ToolKind

if TYPE_CHECKING:
    from caliban.agent import Authorize
    from caliban.tools.base import CallContext, Tool

Behavior = Literal["allow", "ask", "deny"]

EDIT_TOOLS = frozenset({"Edit", "Write", "NotebookEdit"})
"""Tools that write the file named by their subject; an ``Edit(...)`` rule covers them all."""
READ_TOOLS = frozenset({"Read", "Glob", "Grep", "NotebookRead"})
"""Tools that read under their subject path; a ``Read(...)`` rule covers them all."""
PATH_TOOLS = EDIT_TOOLS | READ_TOOLS
_FAMILIES = {"Edit": EDIT_TOOLS, "Read": READ_TOOLS}

PLAN_MODE_REASON = (
    "plan mode is read-only: present your plan instead of changing files or running commands"
)
MAX_PREVIEW_CHARS = 20_000
_GLOB_CHARS = frozenset("*?[{")


class RuleError(ValueError):
    """A permission rule that cannot be parsed; the message shows the expected form."""


# ---------------------------------------------------------------------------- rules


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
        return cls(text=stripped, tool=match.group(1), pattern=pattern)

    def names(self, tool_name: str) -> bool:
        """Whether the tool part of the rule covers ``tool_name``."""
        if fnmatch.fnmatchcase(tool_name, self.tool):
            return True
        if tool_name in _FAMILIES.get(self.tool, ()):
            return True
        # mcp__server covers every tool of that server, as in Claude Code.
        return self.tool.startswith("mcp__") and tool_name.startswith(self.tool + "__")

    @property
    def absolute(self) -> bool:
        """True when the pattern names a place by absolute path (``/x``, ``//x``, ``~/x``)."""
        return self.pattern is not None and self.pattern.startswith(("/", "~"))

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
        return not absolute_only and command_matches(self.pattern, subject)


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

    def with_allow(self, rules: Sequence[Rule]) -> PermissionRules:
        return PermissionRules(allow=(*self.allow, *rules), ask=self.ask, deny=self.deny)


# ---------------------------------------------------------------------------- matching


def _glob_regex(glob: str) -> str:
    """Path glob → regex: ``**`` spans directories, ``*`` and ``?`` stay within one."""
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
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _with_ancestors(path: PurePosixPath) -> list[str]:
    """The path and each directory above it: a rule on a directory covers what is in it."""
    return [str(path), *(str(parent) for parent in path.parents if str(parent) not in (".", "/"))]


def path_matches(
    pattern: str, path: Path, project_root: Path, *, absolute_only: bool = False
) -> bool:
    """Whether a path rule pattern covers ``path`` (absolute).

    - ``src/**``, ``./x.py``: relative to the project root (a pattern with a ``/`` is
      anchored there);
    - ``*.env``, ``.env`` (no ``/``): that file name at any depth, anywhere;
    - ``//abs/**`` and ``~/x``: absolute (``~`` is the home directory);
    - ``/x/**``: absolute, and also relative to the project root (Claude Code reads a
      leading ``/`` as project-relative, so both are honoured).

    ``**`` spans directories; ``*`` and ``?`` do not cross ``/``. A pattern whose last
    segment is literal (``src``, ``.git``) also covers everything under that directory.
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
        regex = re.compile(_glob_regex(glob), re.DOTALL)
        # A literal last segment (src, .git, secrets/) names a directory and covers its
        # contents; a wildcard one (src/*) matches only what it says.
        literal = not _GLOB_CHARS & set(glob.rsplit("/", 1)[-1])
        texts = _with_ancestors(target) if literal else [str(target)]
        if any(regex.fullmatch(text) for text in texts):
            return True
    return False


def _relative(path: PurePosixPath, root: Path) -> PurePosixPath:
    """``path`` relative to ``root``; empty when it lies outside (relative rules never match)."""
    try:
        return path.relative_to(PurePosixPath(os.path.normpath(root)))
    except ValueError:
        return PurePosixPath("")


def command_matches(pattern: str, command: str) -> bool:
    """Whether a command rule pattern covers ``command``.

    ``*`` matches anything (spaces and slashes included); everything else is literal.
    ``git commit:*`` (Claude Code's prefix form) matches ``git commit`` and
    ``git commit …``. Runs of whitespace count as one space.
    """
    command = " ".join(command.split())
    pattern = " ".join(pattern.split())
    if pattern.endswith(":*"):
        prefix = pattern[:-2]
        return command == prefix or command.startswith(prefix + " ")
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, command, re.DOTALL) is not None


def split_command(command: str, *, lenient: bool = False) -> list[str] | None:
    """The simple commands of a shell command line, split at ``&&``, ``||``, ``;``, ``|``,
    ``&`` and newlines outside quotes.

    Returns None when the line substitutes commands (``$(…)``, backticks, ``<(…)``), whose
    inner commands an allow rule cannot vouch for. With ``lenient`` (used for deny and ask
    rules, where over-matching is safe) substitutions and parentheses split too.
    """
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0

    def cut() -> None:
        if text := "".join(current).strip():
            segments.append(text)
        current.clear()

    while i < len(command):
        char = command[i]
        pair = command[i : i + 2]
        if quote == "'":
            current.append(char)
            quote = None if char == "'" else quote
        elif char == "\\" and i + 1 < len(command):
            current.append(pair)
            i += 1
        elif pair in ("$(", "<(", ">(") or char == "`":
            if not lenient:
                return None
            cut()
            i += 2 if char != "`" else 1
            continue
        elif quote == '"':
            current.append(char)
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
            current.append(char)
        elif pair in ("&&", "||", "|&"):
            cut()
            i += 1
        elif char in ";|\n" or (lenient and char in "()"):
            cut()
        elif char == "&":
            previous = "".join(current).rstrip()[-1:]
            if previous in ("<", ">") or command[i + 1 : i + 2] == ">":
                current.append(char)  # a redirection: 2>&1, &>file
            else:
                cut()
        else:
            current.append(char)
        i += 1
    cut()
    return segments


# ---------------------------------------------------------------------------- decide


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    behavior: Behavior
    reason: str
    """Why: shown to the user when asking, and to the model when denied."""
    rule: str | None = None
    """The rule that decided, if one did."""


def _find(
    rules: Sequence[Rule],
    tool_name: str,
    subject: str | None,
    project_root: Path,
    *,
    allowing: bool,
    absolute_only: bool = False,
) -> Rule | None:
    """The first rule covering the call. For Bash, allow rules must cover every simple
    command of the line; deny and ask rules match the line or any simple command in it."""

    def first(text: str | None) -> Rule | None:
        for rule in rules:
            if rule.matches(
                tool_name, text, project_root=project_root, absolute_only=absolute_only
            ):
                return rule
        return None

    if tool_name != "Bash" or subject is None:
        return first(subject)
    return _find_bash(rules, subject, project_root, allowing=allowing)


# ---------------------------------------------------------------------------- Bash rules
# Matched on the parsed command line (caliban.shell_analysis), never on its text alone.


def _find_bash(
    rules: Sequence[Rule], command: str, project_root: Path, *, allowing: bool
) -> Rule | None:
    """The first Bash rule covering ``command``.

    Deny and ask rules match any part of the line (every simple command, what wrappers
    and ``bash -c`` run, substitutions), understood or not. An allow rule for all of Bash
    allows anything; otherwise the line must be fully understood, write nothing outside
    the project root through a redirection, and every simple command must be covered by
    some allow rule.
    """
    from caliban import shell_analysis

    bash = [rule for rule in rules if rule.names("Bash")]
    analysis = shell_analysis.analyze(command)
    if not allowing:
        return next(
            (
                rule
                for rule in bash
                if rule.pattern is None or shell_analysis.deny_matches(rule.pattern, analysis)
            ),
            None,
        )
    if whole := next((rule for rule in bash if rule.pattern is None), None):
        return whole
    if not isinstance(analysis, shell_analysis.Understood) or not analysis.commands:
        return None
    # TODO(lead): resolve against the Bash tool's working directory and run each path
    # through the Write path rules (protected paths); the project root stands in here.
    written = shell_analysis.written_paths(analysis, cwd=project_root)
    if any(not _within(path, project_root) for path in written):
        return None
    found = [
        next(
            (r for r in bash if r.pattern and shell_analysis.allows(r.pattern, one)),
            None,
        )
        for one in analysis.commands
    ]
    return found[0] if all(found) else None


def decide(
    tool_name: str,
    subject: str | None,
    *,
    read_only: bool,
    kind: ToolKind,
    mode: PermissionMode,
    rules: PermissionRules,
    project_root: Path,
    writes_path: Path | None,
) -> Decision:
    """Allow, ask or deny one tool call. Pure: no I/O, no state.

    ``subject`` is what rules match (an absolute path for file tools, the command for
    Bash); ``writes_path`` is the file a Write/Edit call would change (None otherwise).
    """
    if rule := _find(rules.deny, tool_name, subject, project_root, allowing=False):
        return Decision(
            behavior="deny", reason=f"the permission rule {rule.text!r} denies it", rule=rule.text
        )
    match mode:
        case "bypassPermissions":
            return Decision(behavior="allow", reason="bypassPermissions mode allows everything")
        case "plan" if not read_only:
            return Decision(behavior="deny", reason=PLAN_MODE_REASON)
        case "plan" | "default" | "acceptEdits":
            pass
        case _:
            assert_never(mode)
    if rule := _find(rules.ask, tool_name, subject, project_root, allowing=False):
        return Decision(
            behavior="ask", reason=f"the permission rule {rule.text!r} asks first", rule=rule.text
        )
    if writes_path is not None and not _within(writes_path, project_root):
        rule = _find(
            rules.allow, tool_name, subject, project_root, allowing=True, absolute_only=True
        )
        if rule:
            return Decision(behavior="allow", reason=f"allowed by {rule.text!r}", rule=rule.text)
        return Decision(
            behavior="ask",
            reason=f"it writes outside the project root ({project_root})",
        )
    if rule := _find(rules.allow, tool_name, subject, project_root, allowing=True):
        return Decision(behavior="allow", reason=f"allowed by {rule.text!r}", rule=rule.text)
    if read_only and kind == "builtin":
        return Decision(behavior="allow", reason="read-only tool")
    if mode == "acceptEdits" and writes_path is not None:
        return Decision(behavior="allow", reason="acceptEdits mode allows edits in the project")
    if kind == "mcp":
        return Decision(behavior="ask", reason=f"{mode} mode asks before MCP tools run")
    return Decision(behavior="ask", reason=f"{mode} mode asks before {tool_name} runs")


def _within(path: Path, root: Path) -> bool:
    normal = os.path.normpath(path)
    top = os.path.normpath(root)
    return normal == top or normal.startswith(top.rstrip(os.sep) + os.sep)


# ---------------------------------------------------------------------------- suggestions


def suggest_rule(tool_name: str, subject: str | None, project_root: Path) -> str:
    """The rule offered for "don't ask again this session": ``Bash(git commit*)``,
    ``Edit(src/**)``, or the tool name (MCP tools and anything without a subject)."""
    if subject is None:
        return tool_name
    if tool_name == "Bash":
        from caliban import shell_analysis

        # "" when no rule could allow the line (not understood): nothing to offer.
        return shell_analysis.suggest_rule(subject) or ""
    if tool_name in PATH_TOOLS:
        family = "Edit" if tool_name in EDIT_TOOLS else tool_name
        path = Path(os.path.normpath(subject))
        if not _within(path, project_root):
            return f"{family}({path.parent}/**)"
        relative = PurePosixPath(os.path.relpath(path, project_root))
        if family != "Edit":
            return f"{family}(./{relative})"
        if len(relative.parts) <= 1:
            return f"{family}(./*)"
        return f"{family}({relative.parts[0]}/**)"
    return tool_name


# ---------------------------------------------------------------------------- preview


def preview(tool_name: str, arguments: Mapping[str, Any], *, cwd: Path) -> str:
    """Plain text showing what a call would do: a unified diff for Edit and Write (against
    the file on disk), the command for Bash, the input as JSON otherwise."""
    try:
        match tool_name:
            case "Bash":
                text = f"$ {arguments.get('command', '')}"
                if description := arguments.get("description"):
                    text += f"\n# {description}"
                return _cap(text)
            case "Edit":
                return _edit_preview(arguments, cwd)
            case "Write":
                return _write_preview(arguments, cwd)
            case _:
                return _cap(json.dumps(dict(arguments), indent=2, ensure_ascii=False, default=str))
    except (OSError, TypeError, ValueError) as exc:
        return f"(no preview: {exc})"


def _cap(text: str) -> str:
    if len(text) <= MAX_PREVIEW_CHARS:
        return text
    rest = text[MAX_PREVIEW_CHARS:]
    return text[:MAX_PREVIEW_CHARS] + f"\n… ({rest.count(chr(10)) + 1:,} more lines)"


def _diff(old: str, new: str, name: str, *, new_file: bool) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if new_file else f"a/{name}",
        tofile=f"b/{name}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")
    return _cap(text) if text else "(no changes)"


def _target(arguments: Mapping[str, Any], cwd: Path) -> tuple[Path, str]:
    from caliban.tools._files import display_path

    raw = arguments.get("file_path")
    if not isinstance(raw, str) or not raw:
        raise ValueError("file_path is missing")
    path = (cwd / Path(raw).expanduser()).resolve()
    return path, display_path(path, cwd)


def _edit_preview(arguments: Mapping[str, Any], cwd: Path) -> str:
    from caliban.tools.edit import EditError, apply_edit, load_text

    path, shown = _target(arguments, cwd)
    old = str(arguments.get("old_string", ""))
    new = str(arguments.get("new_string", ""))
    if not path.exists():
        return _diff("", new, shown, new_file=True) if old == "" else f"(no such file: {shown})"
    try:
        file = load_text(path, shown)
        if file.crlf:
            old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        replace_all = bool(arguments.get("replace_all"))
        plan = apply_edit(file.text, old, new, replace_all=replace_all, shown=shown)
    except EditError as exc:
        return f"(this edit would fail: {exc})"
    return _diff(file.text, plan.text, shown, new_file=False)


def _write_preview(arguments: Mapping[str, Any], cwd: Path) -> str:
    from caliban.tools.edit import EditError, load_text

    path, shown = _target(arguments, cwd)
    content = str(arguments.get("content", ""))
    if not path.exists():
        return _diff("", content, shown, new_file=True)
    try:
        old = load_text(path, shown).text
    except EditError as exc:
        return f"(replaces {shown}: {exc})"
    return _diff(old, content.replace("\r\n", "\n"), shown, new_file=False)


# ---------------------------------------------------------------------------- asking


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionRequest:
    """What the user is asked about."""

    tool_name: str
    kind: ToolKind
    input: Mapping[str, Any]
    subject: str | None
    reason: str
    """Why it asks, to follow "caliban asks because …" (e.g. "default mode asks before Bash
    runs")."""
    preview: str
    """Plain text to show: a diff, a command, or the input."""
    suggestion: str
    """The rule "don't ask again this session" would add, e.g. ``Bash(git commit*)``."""


AnswerKind = Literal["allow_once", "allow_session", "deny"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionAnswer:
    behavior: AnswerKind
    pattern: str | None = None
    """For ``allow_session``: the rule to add (default: the request's suggestion)."""
    reason: str | None = None
    """For ``deny``: the message the model gets, as is (see :func:`user_denial`); None
    gives a standard "the user declined" message."""

    @classmethod
    def allow_once(cls) -> PermissionAnswer:
        return cls(behavior="allow_once")

    @classmethod
    def allow_session(cls, pattern: str | None = None) -> PermissionAnswer:
        return cls(behavior="allow_session", pattern=pattern)

    @classmethod
    def deny(cls, reason: str | None = None) -> PermissionAnswer:
        return cls(behavior="deny", reason=reason)


class Approver(Protocol):
    """Asks the user; the REPL shows the request and waits for an answer."""

    def __call__(self, request: PermissionRequest) -> Awaitable[PermissionAnswer]: ...


def describe(request: PermissionRequest) -> str:
    """A short phrase for what the call would do: ``running `npm test``` …"""
    if request.tool_name == "Bash" and request.subject:
        return f"Running `{request.subject}`"
    if request.tool_name in PATH_TOOLS and request.subject:
        return f"{request.tool_name} on {request.subject}"
    return f"Calling {request.tool_name}"


def headless_denial(request: PermissionRequest) -> str:
    return (
        f"{describe(request)} requires approval ({request.reason}); caliban is running "
        f"headless (-p). Allow it with --allowed-tools '{request.suggestion}' or a "
        "[permissions] allow rule."
    )


async def deny_approver(request: PermissionRequest) -> PermissionAnswer:
    """The approver for headless runs: whatever would ask is denied, with how to allow it."""
    return PermissionAnswer.deny(headless_denial(request))


def user_denial(tool_name: str, said: str | None) -> str:
    """The model's message when the user says no, with what the user typed, if anything."""
    text = f"the user declined this {tool_name} call, so nothing was run or changed."
    if said:
        return f"{text} The user said: {said}"
    return f"{text} Do not retry it; ask the user how to proceed."


# ---------------------------------------------------------------------------- policy


@dataclass(kw_only=True)
class PermissionPolicy:
    """The session's permission state: mode, rules, and rules allowed for this session."""

    project_root: Path
    mode: PermissionMode = "default"
    rules: PermissionRules = field(default_factory=PermissionRules)
    session_rules: list[Rule] = field(default_factory=list)
    """Added by "yes, and don't ask again this session"; forgotten when caliban exits."""

    @classmethod
    def from_settings(
        cls,
        settings: PermissionsSettings,
        *,
        project_root: Path,
        mode: PermissionMode | None = None,
        allowed: Iterable[str] = (),
        disallowed: Iterable[str] = (),
    ) -> PermissionPolicy:
        """The policy from ``[permissions]`` plus ``--permission-mode``, ``--allowed-tools``
        and ``--disallowed-tools``; raises :class:`ConfigError` for a malformed rule."""
        try:
            rules = PermissionRules.parse(
                allow=[*settings.allow, *allowed],
                ask=settings.ask,
                deny=[*settings.deny, *disallowed],
            )
        except RuleError as exc:
            raise ConfigError(f"permissions: {exc}") from None
        return cls(project_root=project_root.resolve(), mode=mode or settings.mode, rules=rules)

    def decide(
        self, tool_name: str, subject: str | None, *, read_only: bool, kind: ToolKind
    ) -> Decision:
        writes = Path(subject) if subject and tool_name in EDIT_TOOLS else None
        return decide(
            tool_name,
            subject,
            read_only=read_only,
            kind=kind,
            mode=self.mode,
            rules=self.rules.with_allow(self.session_rules),
            project_root=self.project_root,
            writes_path=writes,
        )

    def allow_for_session(self, pattern: str) -> Rule:
        """Allow calls matching ``pattern`` until the session ends; raises RuleError."""
        rule = Rule.parse(pattern)
        if rule not in self.session_rules:
            self.session_rules.append(rule)
        return rule


def make_authorize(policy: PermissionPolicy, approver: Approver) -> Authorize:
    """The agent loop's ``authorize`` for ``policy``, asking ``approver`` when needed.

    Questions are asked one at a time; a call waiting for its turn is decided again first,
    so a "don't ask again" answer given meanwhile covers it.
    """
    lock = asyncio.Lock()

    async def authorize(tool: Tool, arguments: Mapping[str, Any], ctx: CallContext) -> str | None:
        if not _valid(tool, arguments):
            return None  # the tool rejects the input itself, and nothing runs
        subject = _subject(tool, arguments, ctx.env.cwd)

        def check() -> Decision:
            return policy.decide(tool.name, subject, read_only=tool.read_only, kind=tool.kind)

        decision = check()
        if decision.behavior == "ask":
            async with lock:
                decision = check()
                if decision.behavior == "ask":
                    return await _ask(tool, arguments, subject, decision, ctx)
        match decision.behavior:
            case "allow":
                return None
            case "deny":
                return decision.reason
            case "ask":
                raise AssertionError("asked above")
            case _:
                assert_never(decision.behavior)

    async def _ask(
        tool: Tool,
        arguments: Mapping[str, Any],
        subject: str | None,
        decision: Decision,
        ctx: CallContext,
    ) -> str | None:
        request = PermissionRequest(
            tool_name=tool.name,
            kind=tool.kind,
            input=arguments,
            subject=subject,
            reason=decision.reason,
            preview=preview(tool.name, arguments, cwd=ctx.env.cwd),
            suggestion=suggest_rule(tool.name, subject, policy.project_root),
        )
        answer = await approver(request)
        match answer.behavior:
            case "allow_once":
                return None
            case "allow_session":
                try:
                    policy.allow_for_session(answer.pattern or request.suggestion)
                except RuleError:
                    policy.allow_for_session(request.suggestion)
                return None
            case "deny":
                return answer.reason or user_denial(tool.name, None)
            case _:
                assert_never(answer.behavior)

    return authorize


def _subject(tool: Tool, arguments: Mapping[str, Any], cwd: Path) -> str | None:
    """The tool's permission subject; a file tool's path made absolute and normalised."""
    subject = tool.permission_subject(arguments)
    if subject is not None and tool.name in PATH_TOOLS:
        subject = str((cwd / Path(subject).expanduser()).resolve())
    return subject


def _valid(tool: Tool, arguments: Mapping[str, Any]) -> bool:
    from pydantic import ValidationError

    from caliban.tools.base import BuiltinTool

    if not isinstance(tool, BuiltinTool):
        return True
    try:
        tool.input_model.model_validate(arguments)
    except ValidationError:
        return False
    return True


__all__ = [
    "EDIT_TOOLS",
    "PATH_TOOLS",
    "PLAN_MODE_REASON",
    "READ_TOOLS",
    "Approver",
    "Decision",
    "PermissionAnswer",
    "PermissionPolicy",
    "PermissionRequest",
    "PermissionRules",
    "Rule",
    "RuleError",
    "decide",
    "deny_approver",
    "headless_denial",
    "make_authorize",
    "preview",
    "split_command",
    "suggest_rule",
    "user_denial",
]
