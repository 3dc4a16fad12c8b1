"""Choosing a provider, model, endpoint and key from flags, settings and the environment.

Precedence: ``--provider`` / ``--model`` beat the config files (``provider``, ``model``),
which beat the environment (``ANTHROPIC_API_KEY`` picks Anthropic, else ``OPENAI_API_KEY``
picks OpenAI). The endpoint is ``providers.<p>.base_url``, else the SDKs'
``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``. The key is read from the variable named by
``providers.<p>.api_key_env`` (default ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``).

The effort level (``--effort`` / ``model_effort``) and a context window override
(``providers.<p>.context_window``) are given to the provider when it is created.

This module imports no HTTP client: :func:`create_provider` is cheap, and the provider
imports it on the first request or in :meth:`LazyProvider.warm_up`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, assert_never, runtime_checkable

from caliban.config.settings import Settings
from caliban.errors import ConfigError
from caliban.providers.base import (
    BASE_URL_ENVS,
    DEFAULT_MODELS,
    KEY_ENVS,
    PROVIDERS,
    Effort,
    Provider,
    ProviderName,
)
from caliban.providers.retry import DEFAULT_RETRY, RetryPolicy
from caliban.providers.windows import static_context_window

AUTH_TOKEN_ENV: Final = "ANTHROPIC_AUTH_TOKEN"
"""Claude Code's other Anthropic credential (a gateway's or a local server's bearer token,
as Ollama's and LiteLLM's setup guides set it); used when ``ANTHROPIC_API_KEY`` is not."""
PLACEHOLDER_KEY: Final = "not-needed"
"""Sent to a custom base URL when no key is set: local servers ignore it."""

LOCAL_SERVER_HINT: Final = (
    "For a local OpenAI-compatible server (llama.cpp, vLLM, Ollama, LM Studio):\n"
    "  caliban config set provider '\"openai\"'\n"
    "  caliban config set providers.openai.base_url '\"http://127.0.0.1:8080/v1\"'"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderChoice:
    """Everything needed to create a provider."""

    provider: ProviderName
    model: str
    api_key_env: str
    base_url: str | None
    api_key: str | None
    auth_token: str | None = None
    """``ANTHROPIC_AUTH_TOKEN``, sent as ``Authorization: Bearer`` (when no API key is set);
    ``api_key_env`` then names it."""
    effort: Effort | None = None
    context_window_override: int | None = None

    @property
    def context_window(self) -> int:
        """The override, else the built-in table (the server is asked by the provider)."""
        return self.context_window_override or context_window(self.provider, self.model)


@runtime_checkable
class KnowsContextWindows(Protocol):
    """A provider that can say, and ask its server, how much a model can read."""

    def context_window(self, model: str) -> int:
        """The best known value now (override, reported by the server, or built in)."""
        ...

    async def refresh_context_window(self, model: str) -> int:
        """Ask the server once (bounded by a short timeout), then :meth:`context_window`."""
        ...


class LazyProvider(Provider, KnowsContextWindows, Protocol):
    """A provider whose HTTP client is imported on first use, or earlier by :meth:`warm_up`."""

    def warm_up(self) -> None:
        """Import the HTTP client and create the client (blocking; run it in a worker
        thread)."""
        ...

    async def prepare(self) -> None:
        """:meth:`warm_up` in a worker thread."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP client; call it before the event loop ends."""
        ...


def resolve_provider(
    settings: Settings,
    *,
    provider: str | None,
    model: str | None,
    environ: Mapping[str, str],
) -> ProviderChoice:
    """Pick the provider, model, endpoint and key; raise :class:`ConfigError` saying what to
    set when no usable provider is configured."""
    name = _provider_name(settings, provider, environ)
    section = getattr(settings.providers, name)
    key_env = section.api_key_env or KEY_ENVS[name]
    base_url = section.base_url or environ.get(BASE_URL_ENVS[name]) or None
    api_key = environ.get(key_env) or None
    auth_token = None if api_key else _auth_token(name, key_env, environ)
    if auth_token is not None:
        key_env = AUTH_TOKEN_ENV
    elif api_key is None:
        if base_url is None:
            raise ConfigError(_missing_key_message(name, key_env, explicit=section.api_key_env))
        api_key = PLACEHOLDER_KEY
    return ProviderChoice(
        provider=name,
        model=model or settings.model or DEFAULT_MODELS[name],
        api_key_env=key_env,
        base_url=base_url,
        api_key=api_key,
        auth_token=auth_token,
        effort=settings.model_effort,
        context_window_override=section.context_window,
    )


def _provider_name(
    settings: Settings, provider: str | None, environ: Mapping[str, str]
) -> ProviderName:
    chosen = provider or settings.provider
    if chosen is not None:
        for name in PROVIDERS:
            if name == chosen:
                return name
        raise ConfigError(f"unknown provider '{chosen}': use one of {', '.join(PROVIDERS)}")
    for name in PROVIDERS:  # a key in the environment
        key_env = getattr(settings.providers, name).api_key_env or KEY_ENVS[name]
        if environ.get(key_env) or _auth_token(name, key_env, environ):
            return name
    for name in PROVIDERS:  # an endpoint without a key (a local server)
        if getattr(settings.providers, name).base_url or environ.get(BASE_URL_ENVS[name]):
            return name
    raise ConfigError(
        "no model provider is configured. Set ANTHROPIC_API_KEY (Anthropic) or "
        "OPENAI_API_KEY (OpenAI) in the environment.\n" + LOCAL_SERVER_HINT
    )


def _auth_token(name: ProviderName, key_env: str, environ: Mapping[str, str]) -> str | None:
    """``ANTHROPIC_AUTH_TOKEN`` for the Anthropic provider, unless the config names its own
    key variable (then that one is meant)."""
    if name != "anthropic" or key_env != KEY_ENVS["anthropic"]:
        return None
    return environ.get(AUTH_TOKEN_ENV) or None


def _missing_key_message(name: ProviderName, key_env: str, *, explicit: str | None) -> str:
    where = (
        f"providers.{name}.api_key_env names {key_env}, which is not set"
        if explicit
        else f"{key_env} is not set"
    )
    return (
        f"no API key for {name}: {where}. Set {key_env} in the environment, name another "
        f"variable with `caliban config set providers.{name}.api_key_env '\"MY_KEY_VAR\"'`, "
        f"or set providers.{name}.base_url for a server that needs no key.\n" + LOCAL_SERVER_HINT
    )


def create_provider(choice: ProviderChoice, *, retry: RetryPolicy = DEFAULT_RETRY) -> LazyProvider:
    """The provider for ``choice``. Cheap: its client is made later (see ``warm_up``)."""
    options: dict[str, Any] = {
        "api_key": choice.api_key or PLACEHOLDER_KEY,
        "base_url": choice.base_url,
        "key_env": choice.api_key_env,
        "retry": retry,
        "effort": choice.effort,
        "context_window": choice.context_window_override,
    }
    match choice.provider:
        case "anthropic":
            from caliban.providers.anthropic import AnthropicProvider

            return AnthropicProvider(auth_token=choice.auth_token, **options)
        case "openai":
            from caliban.providers.openai import OpenAIProvider

            return OpenAIProvider(**options)
        case _:
            assert_never(choice.provider)


def context_window(provider: Provider | str, model: str) -> int:
    """Tokens ``model`` can read, as well as known now, without waiting.

    Given a provider object that knows more (the configured override, what its server
    reported: see :meth:`KnowsContextWindows.refresh_context_window`), its answer; given a
    provider name, the built-in table: 200k for Claude models, known OpenAI families, else
    128k.
    """
    if isinstance(provider, KnowsContextWindows):
        return provider.context_window(model)
    name = provider if isinstance(provider, str) else provider.name
    return static_context_window(name, model)
