"""The permission decision: may a tool call run, must the user be asked, or is it refused?

:func:`decide` is a pure function of the tool, its permission subject (a path or a
command), the mode and the rules (:mod:`caliban.permissions.rules`).
:class:`PermissionPolicy` is a session's permission state: mode, rules, and the rules the
user allowed for this session. Asking the user is :mod:`caliban.permissions.approval`'s job.

Precedence, first match wins:

1. a ``deny`` rule denies (in every mode, ``bypassPermissions`` included);
2. ``bypassPermissions`` allows everything else;
3. ``plan`` mode denies every tool that is not read-only (allow rules do not override it);
4. an ``ask`` rule asks;
5. a write to a protected path (:mod:`caliban.permissions.protected`) asks, unless an allow
   rule names that very file;
6. a write (Write/Edit) outside the project root asks, unless an allow rule names that
   place by an absolute path;
7. an ``allow`` rule (config, ``--allowed-tools`` or "don't ask again this session") allows;
8. the mode's default: read-only built-in tools run; in ``acceptEdits`` file edits inside
   the project run; everything else asks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, assert_never

from caliban import shell
from caliban.config.settings import ConfigError, PermissionMode, PermissionsSettings
from caliban.permissions import bash_rules
from caliban.permissions.protected import protected_reason
from caliban.permissions.rules import (
    EDIT_TOOLS,
    PermissionRules,
    Rule,
    RuleError,
    file_rule,
    is_within,
    suggest_rule,
)
from caliban.tools.base import BUILTIN, BuiltinOrigin, McpOrigin, ToolOrigin

__all__ = ["PLAN_MODE_REASON", "Behavior", "Decision", "PermissionPolicy", "decide"]

Behavior = Literal["allow", "ask", "deny"]

PLAN_MODE_REASON = (
    "plan mode is read-only: present your plan instead of changing files or running commands"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    behavior: Behavior
    reason: str
    """Why: shown to the user when asking, and to the model when denied."""
    rule: str | None = None
    """The rule that decided, if one did."""
    suggestion: str | None = None
    """For "ask": the rule that would allow the call, when only a specific one will do
    (a protected file); None lets the asker propose one."""


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


def _find_bash(
    rules: Sequence[Rule], command: str, project_root: Path, *, allowing: bool
) -> Rule | None:
    """The first Bash rule covering ``command``, matched on the parsed command line
    (:mod:`caliban.shell`, :mod:`caliban.permissions.bash_rules`), never on its text alone.

    Deny and ask rules match any part of the line (every simple command, what wrappers and
    ``bash -c`` run, substitutions), understood or not. An allow rule for all of Bash allows
    anything; otherwise the line must be fully understood and every simple command must be
    covered by some allow rule. (What its redirections write is decided apart, as writes:
    :func:`decide`.)
    """
    bash = [rule for rule in rules if rule.names("Bash")]
    analysis = shell.analyze(command)
    if not allowing:
        return next(
            (r for r in bash if r.pattern is None or bash_rules.deny_matches(r.pattern, analysis)),
            None,
        )
    if whole := next((rule for rule in bash if rule.pattern is None), None):
        return whole
    if not isinstance(analysis, shell.Understood) or not analysis.commands:
        return None
    found = [
        next((r for r in bash if r.pattern and bash_rules.allows(r.pattern, one)), None)
        for one in analysis.commands
    ]
    return found[0] if all(found) else None


def decide(
    tool_name: str,
    subject: str | None,
    *,
    read_only: bool,
    origin: ToolOrigin,
    mode: PermissionMode,
    rules: PermissionRules,
    project_root: Path,
    writes_path: Path | None,
    cwd: Path | None = None,
    working_dirs: Sequence[Path] = (),
) -> Decision:
    """Allow, ask or deny one tool call. Pure: no I/O, no state (resolving a Bash line's
    redirection targets follows symlinks).

    ``subject`` is what rules match (an absolute path for file tools, the command for
    Bash); ``writes_path`` is the file a Write/Edit call would change (None otherwise);
    ``cwd`` is where a Bash command runs (default: the project root), against which its
    redirections' relative targets resolve. A Bash line's redirections are decided as
    writes (and reads) of their targets, and the stricter answer wins.
    ``working_dirs`` (``--add-dir``) are treated like the project root for writes.
    """
    decide_one = functools.partial(
        _decide, mode=mode, rules=rules, project_root=project_root, working_dirs=working_dirs
    )
    decision = decide_one(
        tool_name, subject, read_only=read_only, origin=origin, writes_path=writes_path
    )
    if tool_name != "Bash" or subject is None or decision.behavior == "deny":
        return decision
    analysis = shell.analyze(subject)
    if not isinstance(analysis, shell.Understood):
        # Its redirections cannot be known. No allow rule but one for all of Bash matches
        # it; that rule, a hook's allow or bypassPermissions lets it write anything anyway.
        return decision
    where = cwd or project_root
    try:
        reads = shell.read_paths(analysis, cwd=where)
        written = shell.written_paths(analysis, cwd=where)
    except shell.UnknownTarget as exc:
        # As for a line that is not understood: only a rule for all of Bash vouches for it.
        if decision.behavior != "allow" or mode == "bypassPermissions" or _whole_bash(decision):
            return decision
        return Decision(behavior="ask", reason=f"no rule can vouch for this command line ({exc})")
    for path in reads:
        if rule := _find(rules.deny, "Read", str(path), project_root, allowing=False):
            return Decision(
                behavior="deny",
                reason=f"it reads {path} through a redirection, and the permission rule "
                f"{rule.text!r} denies reading it",
                rule=rule.text,
            )
    writes = [
        (path, decide_one("Write", str(path), read_only=False, origin=BUILTIN, writes_path=path))
        for path in written
    ]
    return _with_writes(decision, writes, project_root)


def _whole_bash(decision: Decision) -> bool:
    """Whether ``decision`` was made by a rule for all of Bash (``Bash``, ``Bash(*)``)."""
    return decision.rule is not None and Rule.parse(decision.rule).pattern is None


def _with_writes(
    decision: Decision, writes: Sequence[tuple[Path, Decision]], project_root: Path
) -> Decision:
    """``decision`` about a Bash line, made stricter by the files its redirections write
    (``>``, ``>>``, ``2>``, ``&>``…), each decided as a Write of that file (deny and ask
    rules, protected paths, outside the project, the mode)."""
    verdict = decision
    for path, write in writes:
        what = f"it redirects output to {path}, and {write.reason}"
        match write.behavior:
            case "deny":
                return Decision(behavior="deny", reason=what, rule=write.rule)
            case "ask" if verdict.behavior == "allow":
                suggestion = write.suggestion or suggest_rule("Write", str(path), project_root)
                verdict = Decision(behavior="ask", reason=what, suggestion=suggestion)
            case "ask":
                verdict = dataclasses.replace(verdict, reason=f"{verdict.reason}; also, {what}")
            case "allow":
                pass
            case _:
                assert_never(write.behavior)
    return verdict


def _decide(
    tool_name: str,
    subject: str | None,
    *,
    read_only: bool,
    origin: ToolOrigin,
    mode: PermissionMode,
    rules: PermissionRules,
    project_root: Path,
    writes_path: Path | None,
    working_dirs: Sequence[Path] = (),
) -> Decision:
    """:func:`decide` for one call, without looking at a Bash line's redirections."""
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
    if writes_path is not None and (why := protected_reason(writes_path)) is not None:
        exact = next(
            (
                r
                for r in rules.allow
                if r.names_file(tool_name, writes_path, project_root=project_root)
            ),
            None,
        )
        if exact is not None:
            return Decision(behavior="allow", reason=f"allowed by {exact.text!r}", rule=exact.text)
        return Decision(
            behavior="ask",
            reason=f"{writes_path} is protected: {why}",
            suggestion=file_rule(tool_name, writes_path, project_root),
        )
    if writes_path is not None and not any(
        is_within(writes_path, place) for place in (project_root, *working_dirs)
    ):
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
    if read_only and isinstance(origin, BuiltinOrigin):
        return Decision(behavior="allow", reason="read-only tool")
    if mode == "acceptEdits" and writes_path is not None:
        return Decision(behavior="allow", reason="acceptEdits mode allows edits in the project")
    if isinstance(origin, McpOrigin):
        return Decision(behavior="ask", reason=f"{mode} mode asks before MCP tools run")
    if tool_name == "Bash" and subject is not None:
        analysis = shell.analyze(subject)
        if isinstance(analysis, shell.NotUnderstood):
            return Decision(
                behavior="ask",
                reason=f"no rule can vouch for this command line ({analysis.reason})",
            )
    return Decision(behavior="ask", reason=f"{mode} mode asks before {tool_name} runs")


@dataclass(kw_only=True)
class PermissionPolicy:
    """The session's permission state: mode, rules, and rules allowed for this session."""

    project_root: Path
    mode: PermissionMode = "default"
    rules: PermissionRules = field(default_factory=PermissionRules)
    session_rules: list[Rule] = field(default_factory=list)
    """Added by "yes, and don't ask again this session"; forgotten when caliban exits."""
    working_dirs: tuple[Path, ...] = ()
    """Additional working directories (``--add-dir``): writes there count as in the project."""

    @classmethod
    def from_settings(
        cls,
        settings: PermissionsSettings,
        *,
        project_root: Path,
        mode: PermissionMode | None = None,
        allowed: Iterable[str] = (),
        disallowed: Iterable[str] = (),
        working_dirs: Iterable[Path] = (),
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
        return cls(
            project_root=project_root.resolve(),
            mode=mode or settings.mode,
            rules=rules,
            working_dirs=tuple(path.resolve() for path in working_dirs),
        )

    def decide(
        self,
        tool_name: str,
        subject: str | None,
        *,
        read_only: bool,
        origin: ToolOrigin,
        cwd: Path | None = None,
    ) -> Decision:
        """:func:`decide` with this policy's mode and rules (session rules included);
        ``cwd`` is the Bash tool's working directory."""
        writes = Path(subject) if subject and tool_name in EDIT_TOOLS else None
        return decide(
            tool_name,
            subject,
            read_only=read_only,
            origin=origin,
            cwd=cwd,
            mode=self.mode,
            rules=self.rules.with_allow(self.session_rules),
            project_root=self.project_root,
            writes_path=writes,
            working_dirs=self.working_dirs,
        )

    def read_denial(self, tool_name: str, path: Path) -> str | None:
        """The deny rule forbidding ``tool_name`` to read ``path`` (absolute), or None:
        Grep and Glob ask it about each file they find (:data:`~caliban.tools.base.ReadGuard`)."""
        rule = _find(self.rules.deny, tool_name, str(path), self.project_root, allowing=False)
        return rule.text if rule is not None else None

    def address_denial(self, tool_name: str, address: str) -> str | None:
        """The deny rule forbidding ``tool_name`` to reach ``address`` (a host's resolved
        address), or None: WebFetch asks it as it connects
        (:data:`~caliban.tools.base.AddressGuard`)."""
        rule = _find(self.rules.deny, tool_name, address, self.project_root, allowing=False)
        return rule.text if rule is not None else None

    @contextlib.contextmanager
    def allowing(self, rules: Sequence[Rule]) -> Iterator[None]:
        """Also allow ``rules`` while the block runs (a custom command's allowed-tools)."""
        added = [rule for rule in rules if rule not in self.session_rules]
        self.session_rules.extend(added)
        try:
            yield
        finally:
            for rule in added:
                self.session_rules.remove(rule)

    def allow_for_session(self, pattern: str) -> Rule:
        """Allow calls matching ``pattern`` until the session ends; raises RuleError."""
        rule = Rule.parse(pattern)
        if rule not in self.session_rules:
            self.session_rules.append(rule)
        return rule
