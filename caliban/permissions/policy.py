"""The permission decision: may a tool call run, must the user be asked, or is it refused?

:func:`decide` is a pure function of the tool, its permission subject (what rules match: a
path, a command line, a host), what the call does (its
:class:`~caliban.calls.effects.Effects`: the files it writes, the command line it runs), the
mode and the rules (:mod:`caliban.permissions.rules`). It never looks at a tool's name to
know what a call does: a call that runs a command line is matched on that line's analysis
(:mod:`caliban.permissions.bash_rules`), whatever the tool.
:class:`PermissionPolicy` is a session's permission state: mode, rules, and the rules the
user allowed for this session. Asking the user is :mod:`caliban.permissions.approval`'s job.

Precedence, first match wins:

1. a ``deny`` rule denies (in every mode, ``bypassPermissions`` included);
2. ``bypassPermissions`` allows everything else;
3. a call that ends plan mode (ExitPlanMode) asks in plan mode and is denied in any other;
   ``plan`` mode denies every other tool that is not read-only (allow rules do not override
   it);
4. an ``ask`` rule asks;
5. a write to a protected path (:mod:`caliban.permissions.protected`) asks, unless an allow
   rule names that very file; so does a command line whose ``git`` would use a repository
   that is not a ``.git`` directory (:mod:`caliban.shell.git`);
6. a write (Write/Edit) outside the project root asks, unless an allow rule names that
   place by an absolute path;
7. an ``allow`` rule (config, ``--allowed-tools`` or "don't ask again this session") allows;
8. a call its tool marks destructive (an MCP tool's ``destructiveHint``) asks;
9. the mode's default: read-only built-in tools run; in ``acceptEdits`` file edits inside
   the project run; everything else asks.

With ``autoAllowBashIfSandboxed``, a command line the OS sandbox will confine
(:class:`Confined`) runs where the steps above would ask — unless an ``ask`` rule asked, the
call is destructive, or the backend cannot keep protected paths read-only (Landlock:
auto-allow does not apply).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, assert_never

from caliban.calls.effects import NO_EFFECTS, Command, Effects
from caliban.config import paths
from caliban.config.settings import ConfigError, PermissionMode, PermissionsSettings
from caliban.permissions import bash_rules
from caliban.permissions.protected import protected_reason
from caliban.permissions.rules import (
    PermissionRules,
    Rule,
    RuleError,
    file_rule,
    is_within,
    suggest_rule,
)
from caliban.shell import Analysis, NotUnderstood, Understood
from caliban.tools.base import BUILTIN, BuiltinOrigin, McpOrigin, ToolOrigin
from caliban.util.fsutil import resolved

__all__ = [
    "NOT_PLANNING_REASON",
    "PLAN_APPROVAL_REASON",
    "PLAN_MODE_REASON",
    "Behavior",
    "Confined",
    "Decision",
    "PermissionPolicy",
    "builtin_denials",
    "decide",
]

Behavior = Literal["allow", "ask", "deny"]

PLAN_MODE_REASON = (
    "plan mode is read-only: present your plan instead of changing files or running commands "
    "(keep exploring with read-only tools, then call ExitPlanMode to ask the user to approve it)"
)
NOT_PLANNING_REASON = "the session is not in plan mode: there is no plan to approve, carry on"
PLAN_APPROVAL_REASON = "the user approves a plan before plan mode ends"


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Confined:
    """A command line the OS sandbox will confine, with ``autoAllowBashIfSandboxed`` on
    (:meth:`caliban.sandbox.runtime.SandboxRuntime.auto_allows`)."""

    keeps_protected_paths: bool
    """The backend keeps protected paths inside writable folders read-only (bubblewrap,
    Seatbelt; Landlock only grants, so it cannot)."""


AUTO_ALLOWED = "the OS sandbox confines it (sandbox.autoAllowBashIfSandboxed)"


def _find(
    rules: Sequence[Rule],
    tool_name: str,
    subject: str | None,
    project_root: Path,
    *,
    allowing: bool,
    absolute_only: bool = False,
    line: Analysis | None = None,
    texts: bash_rules.LineTexts | None = None,
) -> Rule | None:
    """The first rule covering the call. For a call that runs a command ``line``, allow
    rules must cover every simple command of the line; deny and ask rules match the line
    or any simple command in it (its ``texts``, when already collected)."""
    if line is not None:
        return _find_in_line(rules, tool_name, line, allowing=allowing, texts=texts)
    for rule in rules:
        if rule.matches(tool_name, subject, project_root=project_root, absolute_only=absolute_only):
            return rule
    return None


def _find_in_line(
    rules: Sequence[Rule],
    tool_name: str,
    line: Analysis,
    *,
    allowing: bool,
    texts: bash_rules.LineTexts | None = None,
) -> Rule | None:
    """The first rule for ``tool_name`` covering a command line, matched on its analysis
    (:mod:`caliban.permissions.bash_rules`), never on its text alone.

    Deny and ask rules match any part of the line (every simple command, what wrappers and
    ``bash -c`` run, substitutions), understood or not. An allow rule for the whole tool
    allows anything; otherwise the line must be fully understood and every simple command
    must be covered by some allow rule. (What its redirections write is decided apart, as
    writes: :func:`decide`.)
    """
    named = [rule for rule in rules if rule.names(tool_name)]
    if not allowing:
        if not named:
            return None
        texts = texts if texts is not None else bash_rules.line_texts(line)
        return next((r for r in named if r.pattern is None or texts.matched_by(r.pattern)), None)
    if whole := next((rule for rule in named if rule.pattern is None), None):
        return whole
    if not isinstance(line, Understood) or not line.commands:
        return None
    found = []
    for one in line.commands:
        rule = next((r for r in named if r.pattern and bash_rules.allows(r.pattern, one)), None)
        if rule is None:
            return None
        found.append(rule)
    return found[0]


def decide(
    tool_name: str,
    subject: str | None,
    effects: Effects = NO_EFFECTS,
    *,
    read_only: bool,
    origin: ToolOrigin,
    mode: PermissionMode,
    rules: PermissionRules,
    project_root: Path,
    working_dirs: Sequence[Path] = (),
    confined: Confined | None = None,
) -> Decision:
    """Allow, ask or deny one tool call. Pure: no I/O, no state.

    ``subject`` is what rules match (an absolute path for file tools, the command line for
    Bash, the host for WebFetch); ``effects`` is what the call does. A call that runs a
    command line (``effects.runs``) is matched on the line's analysis, and the files its
    redirections read and write are decided as reads and writes of their own — the
    stricter answer wins. Any other call's ``effects.writes`` are its own writes (protected
    paths, outside the project, ``acceptEdits``). ``working_dirs`` (``--add-dir``) are
    treated like the project root for writes. ``confined``: the command line runs in the OS
    sandbox with ``autoAllowBashIfSandboxed`` on.
    """
    decide_one = functools.partial(
        _decide, mode=mode, rules=rules, project_root=project_root, working_dirs=working_dirs
    )
    command = effects.runs
    if command is None:
        return decide_one(
            tool_name,
            subject,
            read_only=read_only,
            origin=origin,
            writes=effects.writes,
            leaves_plan_mode=effects.leaves_plan_mode,
            destructive=effects.destructive,
        )
    decision = _decide_line(
        decide_one,
        tool_name,
        subject,
        effects,
        command,
        read_only=read_only,
        origin=origin,
        mode=mode,
        rules=rules,
        project_root=project_root,
    )
    if confined is None or effects.destructive:
        return decision
    return _auto_allowed(decision, confined)


def _decide_line(
    decide_one: Callable[..., Decision],
    tool_name: str,
    subject: str | None,
    effects: Effects,
    command: Command,
    *,
    read_only: bool,
    origin: ToolOrigin,
    mode: PermissionMode,
    rules: PermissionRules,
    project_root: Path,
) -> Decision:
    """:func:`decide` for a call that runs ``command`` (``decide_one`` is :func:`_decide`
    with the policy's state): the line, then what its redirections read and write."""
    decision = decide_one(
        tool_name,
        subject,
        read_only=read_only,
        origin=origin,
        line=command.analysis,
        destructive=effects.destructive,
    )
    if decision.behavior == "deny" or isinstance(command.analysis, NotUnderstood):
        # Its redirections cannot be known. No allow rule but one for the whole tool matches
        # it; that rule, a hook's allow or bypassPermissions lets it write anything anyway.
        return decision
    if effects.unknown is not None:
        # As for a line that is not understood: only a rule for the whole tool vouches for it.
        if decision.behavior != "allow" or mode == "bypassPermissions" or _whole_tool(decision):
            return decision
        return Decision(
            behavior="ask", reason=f"no rule can vouch for this command line ({effects.unknown})"
        )
    for path in effects.reads:
        if rule := _find(rules.deny, "Read", str(path), project_root, allowing=False):
            return Decision(
                behavior="deny",
                reason=f"it reads {path} through a redirection, and the permission rule "
                f"{rule.text!r} denies reading it",
                rule=rule.text,
            )
    writes = [
        (path, decide_one("Write", str(path), read_only=False, origin=BUILTIN, writes=(path,)))
        for path in effects.writes
    ]
    decision = _with_writes(decision, writes, project_root)
    if effects.repositories and decision.behavior != "deny" and mode != "bypassPermissions":
        return _with_repositories(decision, effects.repositories)
    return decision


def _with_repositories(decision: Decision, repositories: Sequence[Path]) -> Decision:
    """``decision`` about a command line whose git commands would use ``repositories``,
    git directories that are not a ``.git`` directory: it asks (:mod:`caliban.shell.git`)."""
    what = (
        f"git would use {', '.join(map(str, repositories))} as its repository (a directory "
        "shaped like a bare repository, not a .git directory), and a repository's "
        "configuration can run commands (core.fsmonitor, …)"
    )
    if decision.behavior == "ask":
        return dataclasses.replace(decision, reason=f"{decision.reason}; also, {what}")
    return Decision(behavior="ask", reason=what)


def _auto_allowed(decision: Decision, confined: Confined) -> Decision:
    """``decision`` about a command line the sandbox will confine, with
    ``autoAllowBashIfSandboxed``: a question becomes an allow, unless an ``ask`` rule asked.
    A deny stands. Under a backend that cannot keep protected paths read-only (Landlock) it
    does not apply at all: any program the line runs could write ``.git/config`` or a hook,
    which run outside the sandbox later — the parser cannot see what a program writes."""
    if decision.behavior != "ask" or decision.rule is not None:
        return decision
    if not confined.keeps_protected_paths:
        return decision
    return Decision(behavior="allow", reason=AUTO_ALLOWED)


def _whole_tool(decision: Decision) -> bool:
    """Whether ``decision`` was made by a rule for a whole tool (``Bash``, ``Bash(*)``)."""
    return decision.rule is not None and Rule.parse(decision.rule).pattern is None


def _with_writes(
    decision: Decision, writes: Sequence[tuple[Path, Decision]], project_root: Path
) -> Decision:
    """``decision`` about a command line, made stricter by the files its redirections write
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
                verdict = Decision(
                    behavior="ask", reason=what, rule=write.rule, suggestion=suggestion
                )
            case "ask":
                verdict = dataclasses.replace(
                    verdict,
                    reason=f"{verdict.reason}; also, {what}",
                    rule=verdict.rule or write.rule,
                )
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
    writes: Sequence[Path] = (),
    line: Analysis | None = None,
    working_dirs: Sequence[Path] = (),
    leaves_plan_mode: bool = False,
    destructive: bool = False,
) -> Decision:
    """:func:`decide` for one call, without looking at a command line's redirections:
    ``writes`` are the call's own, ``line`` the command line it runs; a ``destructive``
    call (:attr:`Effects.destructive`) asks where only the mode's default would allow it."""
    texts = None
    if line is not None and any(rule.names(tool_name) for rule in (*rules.deny, *rules.ask)):
        texts = bash_rules.line_texts(line)  # collected once for deny and ask rules both
    find = functools.partial(
        _find, tool_name=tool_name, project_root=project_root, line=line, texts=texts
    )
    if rule := find(rules.deny, subject=subject, allowing=False):
        return Decision(
            behavior="deny", reason=f"the permission rule {rule.text!r} denies it", rule=rule.text
        )
    if leaves_plan_mode:
        # No allow rule or mode approves a plan nobody saw (a PreToolUse hook's allow, the
        # user's own program, still may).
        if mode != "plan":
            return Decision(behavior="deny", reason=NOT_PLANNING_REASON)
        return Decision(behavior="ask", reason=PLAN_APPROVAL_REASON)
    match mode:
        case "bypassPermissions":
            return Decision(behavior="allow", reason="bypassPermissions mode allows everything")
        case "plan" if not read_only:
            return Decision(behavior="deny", reason=PLAN_MODE_REASON)
        case "plan" | "default" | "acceptEdits":
            pass
        case _:
            assert_never(mode)
    if rule := find(rules.ask, subject=subject, allowing=False):
        return Decision(
            behavior="ask", reason=f"the permission rule {rule.text!r} asks first", rule=rule.text
        )
    for path in writes:
        if (why := protected_reason(path)) is None:
            continue
        exact = next(
            (r for r in rules.allow if r.names_file(tool_name, path, project_root=project_root)),
            None,
        )
        if exact is not None:
            return Decision(behavior="allow", reason=f"allowed by {exact.text!r}", rule=exact.text)
        return Decision(
            behavior="ask",
            reason=f"{path} is protected: {why}",
            suggestion=file_rule(tool_name, path, project_root),
        )
    if any(
        not any(is_within(path, place) for place in (project_root, *working_dirs))
        for path in writes
    ):
        if rule := find(rules.allow, subject=subject, allowing=True, absolute_only=True):
            return Decision(behavior="allow", reason=f"allowed by {rule.text!r}", rule=rule.text)
        return Decision(
            behavior="ask",
            reason=f"it writes outside the project root ({project_root})",
        )
    if rule := find(rules.allow, subject=subject, allowing=True):
        return Decision(behavior="allow", reason=f"allowed by {rule.text!r}", rule=rule.text)
    if destructive:
        return Decision(
            behavior="ask",
            reason=f"{tool_name} is marked destructive by its server (destructiveHint)",
        )
    if read_only and isinstance(origin, BuiltinOrigin):
        return Decision(behavior="allow", reason="read-only tool")
    if mode == "acceptEdits" and writes:
        return Decision(behavior="allow", reason="acceptEdits mode allows edits in the project")
    if isinstance(origin, McpOrigin):
        return Decision(behavior="ask", reason=f"{mode} mode asks before MCP tools run")
    if isinstance(line, NotUnderstood):
        return Decision(
            behavior="ask", reason=f"no rule can vouch for this command line ({line.reason})"
        )
    return Decision(behavior="ask", reason=f"{mode} mode asks before {tool_name} runs")


def builtin_denials() -> tuple[str, ...]:
    """Deny rules every session has: no tool reads the MCP servers' OAuth tokens (Read's
    rules cover Grep and Glob, and the OS sandbox hides what they name)."""
    return (f"Read(/{paths.mcp_tokens_dir()}/**)",)


@dataclass(kw_only=True)
class PermissionPolicy:
    """The session's permission state: mode, rules, and rules allowed for this session."""

    project_root: Path
    mode: PermissionMode = "default"
    rules: PermissionRules = field(default_factory=PermissionRules)
    session_rules: list[Rule] = field(default_factory=list)
    """Added by "yes, and don't ask again this session"; forgotten when caliban exits."""
    session_asks: list[Rule] = field(default_factory=list)
    """Ask rules added during the session (an Agent SDK update); it may remove them again."""
    session_denials: list[Rule] = field(default_factory=list)
    """Deny rules added during the session (an Agent SDK update); it may remove them again."""
    working_dirs: tuple[Path, ...] = ()
    """Additional working directories (``--add-dir``, ``/add-dir``, an Agent SDK's
    ``addDirectories``): writes there count as in the project, and the OS sandbox lets
    commands write there (it reads them at each command)."""

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
                deny=[*settings.deny, *disallowed, *builtin_denials()],
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
        effects: Effects = NO_EFFECTS,
        *,
        read_only: bool,
        origin: ToolOrigin,
        confined: Confined | None = None,
    ) -> Decision:
        """:func:`decide` with this policy's mode and rules (session rules included)."""
        return decide(
            tool_name,
            subject,
            effects,
            read_only=read_only,
            origin=origin,
            mode=self.mode,
            rules=self.in_force,
            project_root=self.project_root,
            working_dirs=self.working_dirs,
            confined=confined,
        )

    def suggestions(
        self, tool_name: str, subject: str | None, effects: Effects = NO_EFFECTS
    ) -> tuple[str, ...]:
        """The rules "don't ask again" offers for a call: for a command line one per
        command no allow rule covers yet (``Bash(npm test:*)``, ``Bash(git push:*)``),
        otherwise one (``Edit(src/**)``, the tool's name); none when no rule could allow it
        (a command line that is not understood, a plan to approve)."""
        if effects.leaves_plan_mode:
            return ()
        if effects.runs is not None:
            allow = [rule for rule in self.in_force.allow if rule.names(tool_name)]
            return bash_rules.suggest_rules(
                effects.runs.analysis,
                tool_name,
                covered=lambda one: any(
                    rule.pattern is not None and bash_rules.allows(rule.pattern, one)
                    for rule in allow
                ),
            )
        rule = suggest_rule(tool_name, subject, self.project_root)
        return (rule,) if rule else ()

    def read_denial(self, tool_name: str, path: Path) -> str | None:
        """The deny rule forbidding ``tool_name`` to read ``path`` (absolute), or None:
        Grep and Glob ask it about each file they find (:data:`~caliban.tools.base.ReadGuard`)."""
        rule = _find(self.in_force.deny, tool_name, str(path), self.project_root, allowing=False)
        return rule.text if rule is not None else None

    def address_denial(self, tool_name: str, address: str) -> str | None:
        """The deny rule forbidding ``tool_name`` to reach ``address`` (a host's resolved
        address), or None: WebFetch asks it as it connects
        (:data:`~caliban.tools.base.AddressGuard`)."""
        rule = _find(self.in_force.deny, tool_name, address, self.project_root, allowing=False)
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

    @property
    def in_force(self) -> PermissionRules:
        """The settings' and flags' rules with those added during the session."""
        return PermissionRules(
            allow=(*self.rules.allow, *self.session_rules),
            ask=(*self.rules.ask, *self.session_asks),
            deny=(*self.rules.deny, *self.session_denials),
        )

    def add_rules(self, behavior: Literal["allow", "deny", "ask"], rules: Sequence[Rule]) -> None:
        """Apply ``rules`` for the rest of the session, as well as the settings' ones."""
        added = self.added_in_session(behavior)
        added.extend(rule for rule in dict.fromkeys(rules) if rule not in added)

    def remove_rules(
        self, behavior: Literal["allow", "deny", "ask"], rules: Sequence[Rule]
    ) -> None:
        """Stop applying ``rules`` for the rest of the session: allow rules wherever they
        came from (narrowing); deny and ask rules only those added during the session (a
        settings file's or a flag's still holds: keeping a denial is the safe mistake)."""
        gone = set(rules)
        added = self.added_in_session(behavior)
        added[:] = [rule for rule in added if rule not in gone]
        if behavior == "allow":
            kept = tuple(rule for rule in self.rules.allow if rule not in gone)
            self.rules = dataclasses.replace(self.rules, allow=kept)

    def added_in_session(self, behavior: Literal["allow", "deny", "ask"]) -> list[Rule]:
        """The rules of ``behavior`` added during the session (the list itself)."""
        match behavior:
            case "allow":
                return self.session_rules
            case "ask":
                return self.session_asks
            case "deny":
                return self.session_denials
            case _:
                assert_never(behavior)

    def working_dir(self, directory: str) -> Path:
        """``directory`` as ``--add-dir`` takes it: ``~`` expanded, relative to the project,
        resolved."""
        return resolved(self.project_root / Path(os.path.expanduser(directory)))

    def change_working_dirs(self, paths: Iterable[Path], *, add: bool) -> None:
        """Add (or remove) working directories for the rest of the session."""
        wanted = [resolved(path) for path in paths]
        if add:
            self.working_dirs = tuple(dict.fromkeys([*self.working_dirs, *wanted]))
        else:
            self.working_dirs = tuple(p for p in self.working_dirs if p not in wanted)

    def allow_for_session(self, pattern: str) -> Rule:
        """Allow calls matching ``pattern`` until the session ends; raises RuleError."""
        rule = Rule.parse(pattern)
        if rule not in self.session_rules:
            self.session_rules.append(rule)
        return rule
