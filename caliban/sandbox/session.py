"""A session's sandbox, from its settings files, ``--sandbox`` and its permission policy
(:func:`open_sandbox`): the one place that knows how caliban's config, Claude Code's
settings and the rules feed :class:`~caliban.sandbox.runtime.SandboxRuntime`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from caliban.sandbox.runtime import SandboxRuntime
from caliban.sandbox.settings import Mode, SandboxConfig, SandboxLayer, resolve

if TYPE_CHECKING:
    from caliban.claude_code.settings import ClaudeSettings
    from caliban.config.settings import LoadedConfig
    from caliban.permissions.policy import PermissionPolicy
    from caliban.permissions.rules import Rule

__all__ = ["open_sandbox", "session_config"]


def session_config(
    loaded: LoadedConfig, claude: ClaudeSettings, *, flag: Mode | None, trusted: bool
) -> SandboxConfig:
    """A session's :class:`SandboxConfig`: Claude Code's settings layers, then caliban's
    config files, then ``--sandbox``."""
    from caliban.claude_code.settings import PROJECT_SCOPES

    layers = [
        SandboxLayer(source=layer.source, table=table, project=layer.scope in PROJECT_SCOPES)
        for layer in claude.layers
        if isinstance(table := layer.data.get("sandbox"), Mapping)
    ]
    layers += [
        SandboxLayer(source=str(file.path), table=table, project=file.scope == "project")
        for file in loaded.files
        if isinstance(table := file.data.get("sandbox"), Mapping)
    ]
    return resolve(layers, flag=flag, trusted=trusted)


def open_sandbox(config: SandboxConfig, policy: PermissionPolicy) -> SandboxRuntime:
    """The runtime of a session whose permissions are ``policy``, read at each use: its
    working directories (``--add-dir``, and those an Agent SDK answer adds or removes) are
    writable as the rules treat them, its ``Read`` deny rules hide paths, its
    ``WebFetch(domain:…)`` rules (those allowed for the session too) allow and deny hosts."""

    def read_denied() -> list[str]:
        return [r.pattern for r in policy.in_force.deny if r.tool == "Read" and r.pattern]

    def domains() -> tuple[list[str], list[str]]:
        rules = policy.in_force
        return _domains_of(rules.allow), _domains_of(rules.deny)

    return SandboxRuntime(
        config,
        project_root=policy.project_root,
        working_dirs=lambda: policy.working_dirs,
        read_deny_patterns=read_denied,
        domain_rules=domains,
    )


def _domains_of(rules: Iterable[Rule]) -> list[str]:
    """The hosts of ``WebFetch(domain:…)`` rules."""
    return [
        r.pattern.strip()[len("domain:") :]
        for r in rules
        if r.tool == "WebFetch" and r.pattern and r.pattern.strip().startswith("domain:")
    ]
