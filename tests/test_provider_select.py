"""Choosing the provider, model, endpoint and key."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest
from hang import HANG_S

from caliban.config.settings import Settings, parse_value
from caliban.errors import ConfigError
from caliban.providers.anthropic import AnthropicProvider
from caliban.providers.openai import OpenAIProvider
from caliban.providers.select import (
    DEFAULT_MODELS,
    PLACEHOLDER_KEY,
    ProviderChoice,
    context_window,
    create_provider,
    resolve_provider,
)


def settings(**data: Any) -> Settings:
    return Settings.model_validate(data)


def resolve(
    config: Settings | None = None,
    env: dict[str, str] | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
) -> ProviderChoice:
    return resolve_provider(config or settings(), provider=provider, model=model, environ=env or {})


def test_environment_key_picks_the_provider_and_its_default_model() -> None:
    choice = resolve(env={"OPENAI_API_KEY": "sk-o"})
    assert choice == ProviderChoice(
        provider="openai",
        model=DEFAULT_MODELS["openai"],
        api_key_env="OPENAI_API_KEY",
        base_url=None,
        api_key="sk-o",
    )
    both = {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}
    assert resolve(env=both).provider == "anthropic"
    assert resolve(env=both).model == DEFAULT_MODELS["anthropic"]


def test_flags_beat_config_beat_environment() -> None:
    env = {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}
    config = settings(provider="openai", model="gpt-config")
    assert (resolve(config, env).provider, resolve(config, env).model) == ("openai", "gpt-config")
    flagged = resolve(config, env, provider="anthropic", model="claude-flag")
    assert (flagged.provider, flagged.model, flagged.api_key) == (
        "anthropic",
        "claude-flag",
        "sk-a",
    )


def test_base_url_from_config_beats_the_sdk_variable() -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://env/v1"}
    assert resolve(env=env).base_url == "http://env/v1"
    config = settings(providers={"openai": {"base_url": "http://config/v1"}})
    assert resolve(config, env).base_url == "http://config/v1"


def test_local_server_without_a_key_gets_a_placeholder() -> None:
    config = settings(providers={"openai": {"base_url": "http://127.0.0.1:8080/v1"}})
    choice = resolve(config)  # no provider set, no key: the endpoint decides
    assert (choice.provider, choice.api_key, choice.base_url) == (
        "openai",
        PLACEHOLDER_KEY,
        "http://127.0.0.1:8080/v1",
    )
    assert resolve(env={"ANTHROPIC_BASE_URL": "http://proxy"}).api_key == PLACEHOLDER_KEY


def test_custom_key_variable() -> None:
    config = settings(provider="anthropic", providers={"anthropic": {"api_key_env": "TEAM_KEY"}})
    choice = resolve(config, {"TEAM_KEY": "sk-team", "ANTHROPIC_API_KEY": "ignored"})
    assert (choice.api_key_env, choice.api_key) == ("TEAM_KEY", "sk-team")
    with pytest.raises(
        ConfigError, match=r"providers\.anthropic\.api_key_env names TEAM_KEY, which is not set"
    ):
        resolve(config, {"ANTHROPIC_API_KEY": "ignored"})


def test_missing_key_for_the_chosen_provider_says_what_to_set() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve(settings(provider="openai"), {"ANTHROPIC_API_KEY": "sk-a"})
    message = str(caught.value)
    assert "no API key for openai" in message and "OPENAI_API_KEY" in message
    assert "providers.openai.base_url" in message


def test_nothing_configured_explains_keys_and_local_servers() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve()
    message = str(caught.value)
    assert "ANTHROPIC_API_KEY" in message and "OPENAI_API_KEY" in message
    assert "caliban config set provider '\"openai\"'" in message
    assert "caliban config set providers.openai.base_url '\"http://127.0.0.1:8080/v1\"'" in message
    # The suggested values are what `caliban config set` will parse them to.
    assert parse_value('"openai"') == "openai"
    assert parse_value('"http://127.0.0.1:8080/v1"') == "http://127.0.0.1:8080/v1"


def test_choice_is_frozen() -> None:
    choice = resolve(env={"ANTHROPIC_API_KEY": "k"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.model = "other"  # type: ignore[misc]


def test_create_provider_passes_the_choice_on() -> None:
    anthropic = create_provider(resolve(env={"ANTHROPIC_API_KEY": "sk-a"}))
    assert isinstance(anthropic, AnthropicProvider) and anthropic.api_key == "sk-a"
    choice = resolve(settings(provider="openai", providers={"openai": {"base_url": "http://h/v1"}}))
    openai = create_provider(choice)
    assert isinstance(openai, OpenAIProvider)
    assert (openai.base_url, openai.api_key, openai.key_env) == (
        "http://h/v1",
        PLACEHOLDER_KEY,
        "OPENAI_API_KEY",
    )
    assert openai.effort is None and openai.context_window("qwen") == 128_000


def test_effort_and_the_window_override_reach_the_provider() -> None:
    config = settings(model_effort="medium", providers={"anthropic": {"context_window": 1_000_000}})
    choice = resolve(config, env={"ANTHROPIC_API_KEY": "k"})
    provider = create_provider(choice)
    assert isinstance(provider, AnthropicProvider) and provider.effort == "medium"
    assert choice.context_window == provider.context_window(choice.model) == 1_000_000
    assert context_window(provider, choice.model) == 1_000_000
    assert context_window("anthropic", choice.model) == 200_000  # by name: the table


@pytest.mark.slow
@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_create_provider_imports_no_http_client_until_warm_up_and_never_an_sdk(name: str) -> None:
    code = f"""
import sys
from caliban.config.settings import Settings
from caliban.providers.select import create_provider, resolve_provider
choice = resolve_provider(Settings(provider={name!r}), provider=None, model=None,
                          environ={{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}})
provider = create_provider(choice)
assert "httpx2" not in sys.modules
provider.warm_up()
assert "httpx2" in sys.modules
assert not {{"anthropic", "openai"}} & set(sys.modules), "an SDK was imported"
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S
    )
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        ("anthropic", "claude-sonnet-5-5", 200_000),
        ("openai", "anthropic/claude-opus-4-5", 200_000),  # OpenRouter
        ("openai", "gpt-5.5", 400_000),
        ("openai", "gpt-4.1-mini", 1_047_576),
        ("openai", "qwen2.5-coder:32b", 128_000),
    ],
)
def test_context_window(provider: str, model: str, window: int) -> None:
    assert context_window(provider, model) == window
