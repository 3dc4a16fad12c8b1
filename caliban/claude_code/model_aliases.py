"""Claude Code's model aliases (``sonnet``, ``opus``, ``haiku``, ``fable``) as model ids.

Claude Code users write them in ``--model``, in ``settings.json`` (``"model": "haiku"``), in
agent files (``model: sonnet``) and in the Agent tool's ``model`` parameter. For Anthropic
they resolve to the ids Claude Code 2.1.197 sends (recorded in
``tests/fixtures/claude_code``); a ``[1m]`` suffix (the 1M-context variant) is dropped.
Claude Code's own overrides apply first, for any provider: ``ANTHROPIC_DEFAULT_SONNET_MODEL``,
``ANTHROPIC_DEFAULT_OPUS_MODEL``, ``ANTHROPIC_DEFAULT_HAIKU_MODEL``,
``ANTHROPIC_DEFAULT_FABLE_MODEL`` (gateways and OpenAI-compatible endpoints set these to
their own names). Without an override an alias means
nothing to another provider: :func:`resolve_alias` returns ``None`` and the caller keeps the
model it had, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["ANTHROPIC_ALIASES", "is_alias", "resolve_alias"]

ANTHROPIC_ALIASES: Final[Mapping[str, str]] = {
    "sonnet": "claude-sonnet-5",
    "opus": "claude-opus-4-8",
    "haiku": "claude-haiku-4-5-20251001",
    "fable": "claude-fable-5",
}
_OVERRIDE_ENVS: Final[Mapping[str, str]] = {
    "sonnet": "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "opus": "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "haiku": "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "fable": "ANTHROPIC_DEFAULT_FABLE_MODEL",
}
_CONTEXT_SUFFIX = "[1m]"


def _base(name: str) -> str:
    return name.strip().lower().removesuffix(_CONTEXT_SUFFIX)


def is_alias(name: str) -> bool:
    """Whether ``name`` is one of Claude Code's model aliases."""
    return _base(name) in ANTHROPIC_ALIASES


def resolve_alias(name: str, provider: str, environ: Mapping[str, str]) -> str | None:
    """The model id for ``name`` with ``provider``: ``name`` itself when it is not an alias,
    ``None`` for an alias with no meaning for ``provider`` (no override set)."""
    if not is_alias(name):
        return name
    alias = _base(name)
    if override := environ.get(_OVERRIDE_ENVS[alias]):
        return override
    return ANTHROPIC_ALIASES[alias] if provider == "anthropic" else None
