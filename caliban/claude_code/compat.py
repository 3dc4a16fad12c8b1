"""What Claude Code's flags and files change about a session, decided before it opens.

:func:`prepare` folds Claude Code's settings files (:mod:`caliban.claude_code.settings`) into
caliban's settings, applies their ``env``, maps Claude Code's permission modes, and collects
``--agents`` and ``--add-dir``; :func:`select_builtins` applies ``--tools`` and bare
``--disallowedTools`` names; :func:`resolve_model` turns a model alias into a model id for
the chosen provider. :mod:`caliban.session.assemble` calls them in that order.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from caliban.claude_code.settings import SETTING_SOURCES, ClaudeSettings, load_claude_settings
from caliban.cli.options import CliOptions
from caliban.config.settings import LoadedConfig, PermissionMode, Settings
from caliban.errors import UsageError
from caliban.permissions.rules import Rule, RuleError

if TYPE_CHECKING:
    from caliban.providers.retry import RetryPolicy
    from caliban.providers.select import ProviderChoice
    from caliban.subagents import AgentDefinition
    from caliban.tools.base import Tool

__all__ = [
    "SessionSetup",
    "ToolChoice",
    "caliban_mode",
    "prepare",
    "resolve_model",
    "retry_policy",
    "select_builtins",
]

MODEL_ENV: Final = "ANTHROPIC_MODEL"
"""Claude Code's environment variable for the model (below ``--model`` and caliban's config)."""


def caliban_mode(name: str | None) -> PermissionMode | None:
    """caliban's mode for a Claude Code mode name: ``dontAsk`` and ``auto`` run as ``default``
    (``dontAsk`` then denies instead of asking; see :attr:`SessionSetup.never_ask`)."""
    match name:
        case None:
            return None
        case "acceptEdits" | "plan" | "bypassPermissions" as mode:
            return mode
        case _:
            return "default"


@dataclass(frozen=True, kw_only=True)
class SessionSetup:
    """Everything Claude Code's flags and files decided for one session."""

    settings: Settings
    """caliban's settings with the Claude Code layers folded in."""
    claude: ClaudeSettings
    model: str | None
    """The model asked for (flag, caliban config, ``$ANTHROPIC_MODEL``, Claude settings), not
    yet resolved (it may be an alias)."""
    permission_mode: str
    """The mode as scripts see it, in Claude Code's names (``dontAsk`` included)."""
    never_ask: bool = False
    """``dontAsk``: whatever would ask is denied, in the REPL too."""
    add_dirs: tuple[Path, ...] = ()
    extra_agents: tuple[AgentDefinition, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def prepare(
    options: CliOptions,
    loaded: LoadedConfig,
    root: Path,
    *,
    environ: MutableMapping[str, str] = os.environ,
) -> SessionSetup:
    """Read Claude Code's settings for ``root`` and fold them into ``loaded.settings``.

    Puts the settings' ``env`` into ``environ`` (the process environment by default) so the
    provider, Bash and MCP servers see it. Raises :class:`UsageError` for a bad
    ``--setting-sources``, ``--settings`` or ``--agents`` value.
    """
    from caliban.permissions.trust import is_trusted

    sources = options.setting_sources
    if sources is not None and (unknown := sorted(set(sources) - set(SETTING_SOURCES))):
        raise UsageError(
            f"--setting-sources: unknown source {', '.join(unknown)} (use user, project, local)"
        )
    try:
        claude = load_claude_settings(
            options.cwd,
            sources=SETTING_SOURCES if sources is None else sources,
            extra=options.settings,
            trusted=is_trusted(root),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    environ.update(claude.env)
    warnings = list(claude.warnings)

    settings = loaded.settings
    mode_source = options.permission_mode
    if mode_source is None and loaded.origin("permissions.mode") == "default":
        mode_source = claude.default_mode
    name = mode_source or settings.permissions.mode
    if name == "auto":
        warnings.append(
            "permission mode 'auto' (Claude Code's classifier) is not supported; running in "
            "default mode"
        )
    permissions = settings.permissions.model_copy(
        update={
            "mode": caliban_mode(name) or settings.permissions.mode,
            "allow": [*claude.allow, *settings.permissions.allow],
            "ask": [*claude.ask, *settings.permissions.ask],
            "deny": [*claude.deny, *settings.permissions.deny],
        }
    )
    settings = settings.model_copy(update={"permissions": permissions})
    model = settings.model or environ.get(MODEL_ENV) or claude.model

    extra_agents: list[AgentDefinition] = []
    if options.agents_json is not None:
        from caliban.subagents import parse_agents_json

        try:
            extra_agents, problems = parse_agents_json(options.agents_json)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        warnings += problems
    add_dirs = [*options.add_dirs]
    for raw in claude.additional_directories:
        path = Path(raw).expanduser()
        add_dirs.append((path if path.is_absolute() else root / path).resolve())
    return SessionSetup(
        settings=settings,
        claude=claude,
        model=model,
        permission_mode=name,
        never_ask=name == "dontAsk",
        add_dirs=tuple(dict.fromkeys(add_dirs)),
        extra_agents=tuple(extra_agents),
        warnings=tuple(warnings),
    )


def resolve_model(
    choice: ProviderChoice, default: str, environ: MutableMapping[str, str] = os.environ
) -> tuple[ProviderChoice, str | None]:
    """``choice`` with a Claude Code alias (``--model sonnet``) resolved for its provider, and
    a warning when the alias means nothing there (``default`` is used instead)."""
    from caliban.claude_code.model_aliases import resolve_alias

    resolved = resolve_alias(choice.model, choice.provider, environ)
    if resolved == choice.model:
        return choice, None
    if resolved is None:
        warning = (
            f"model {choice.model!r} is a Claude Code alias with no meaning for "
            f"{choice.provider}; using {default} (set ANTHROPIC_DEFAULT_"
            f"{choice.model.upper().removesuffix('[1M]')}_MODEL to choose one)"
        )
        return dataclasses.replace(choice, model=default), warning
    return dataclasses.replace(choice, model=resolved), None


AGENT_NAMES: Final = frozenset({"Agent", "Task"})
"""The Agent tool, and ``Task``: Claude Code's older name for it, still used in its init frame."""
WEB_SEARCH: Final = "WebSearch"


@dataclass(frozen=True, kw_only=True)
class ToolChoice:
    builtins: list[Tool]
    agent: bool
    """Whether the Agent tool is offered."""
    deny: tuple[str, ...]
    """Deny rules for tools that are not built-ins (``WebSearch`` left out of ``--tools``)."""
    warnings: list[str]


MAX_RETRIES_ENV: Final = "CLAUDE_CODE_MAX_RETRIES"


def retry_policy(environ: Mapping[str, str] = os.environ) -> RetryPolicy | None:
    """The retry policy ``$CLAUDE_CODE_MAX_RETRIES`` asks for (retries after the first try);
    ``None`` when it is unset or not a number (caliban's default then applies)."""
    from caliban.providers.retry import DEFAULT_RETRY

    raw = environ.get(MAX_RETRIES_ENV, "").strip()
    if not raw.isdigit():
        return None
    return dataclasses.replace(DEFAULT_RETRY, max_attempts=int(raw) + 1)


def select_builtins(
    tools: Sequence[Tool], *, only: Iterable[str] | None, deny: Iterable[str]
) -> ToolChoice:
    """``tools`` limited to ``--tools`` (``only``; ``None``: all), without every tool a bare
    deny rule names (``--disallowedTools Bash``, ``deny = ["WebFetch"]``): as in Claude Code,
    such a tool is removed, not merely refused. Claude Code tools caliban does not have are
    skipped with a warning."""
    names = {tool.name for tool in tools}
    warnings: list[str] = []
    agent = True
    deny_rules: tuple[str, ...] = ()
    if only is not None:
        wanted = set(only)
        agent = bool(wanted & AGENT_NAMES)
        if WEB_SEARCH not in wanted:
            deny_rules = (WEB_SEARCH,)  # the provider's own tool, off unless named
        if unknown := sorted(wanted - names - AGENT_NAMES - {WEB_SEARCH}):
            warnings.append(f"--tools: caliban has no tool {', '.join(unknown)}; skipped")
        tools = [tool for tool in tools if tool.name in wanted]
    removed: set[str] = set()
    for text in deny:
        try:
            rule = Rule.parse(text)
        except RuleError:
            continue  # reported when the policy parses the rules
        if rule.pattern is None:
            removed.add(rule.tool)
    return ToolChoice(
        builtins=[tool for tool in tools if tool.name not in removed],
        agent=agent and not removed & AGENT_NAMES,
        deny=deny_rules,
        warnings=warnings,
    )
