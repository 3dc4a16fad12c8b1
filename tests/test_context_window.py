"""The real context window of OpenAI-compatible servers: asked once, off the critical path,
through the real SDK client against the fake server's llama.cpp / vLLM / Ollama endpoints."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_model_server import CapturedRequest, FakeModelServer
from hang import HANG_S, hang_guard

from caliban.config.settings import Settings
from caliban.providers import openai as openai_provider
from caliban.providers.anthropic import AnthropicProvider
from caliban.providers.openai import OpenAIProvider
from caliban.providers.select import context_window, create_provider, resolve_provider

pytestmark = pytest.mark.anyio

RECORDED = Path(__file__).parent / "recorded" / "llama-server"

# Shapes as llama.cpp's server (tools/server/server-context.cpp) builds them.
LLAMA_CPP_MODELS_OLD = {
    "object": "list",
    "data": [
        {
            "id": "local",
            "object": "model",
            "created": 1,
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 32768, "n_embd": 1536},
        }
    ],
}
LLAMA_CPP_MODELS_NEW = {
    "object": "list",
    "data": [
        {
            "id": "local",
            "aliases": ["local"],
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {"n_ctx": 4096, "n_ctx_train": 32768, "n_vocab": 151936},
        }
    ],
}
LLAMA_CPP_PROPS = {
    "default_generation_settings": {"params": {"n_predict": -1}, "n_ctx": 8192},
    "total_slots": 1,
    "model_alias": "local",
    "model_path": "/models/model.gguf",
    "modalities": {"vision": False, "video": False, "audio": False},
    "build_info": "b6000-0000000",
    "is_sleeping": False,
}
VLLM_MODELS = {
    "object": "list",
    "data": [
        {"id": "other", "object": "model", "max_model_len": 4096},
        {
            "id": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "object": "model",
            "owned_by": "vllm",
            "root": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "max_model_len": 32768,
        },
    ],
}
OLLAMA_MODELS = {"object": "list", "data": [{"id": "qwen2.5:7b", "object": "model"}]}
OLLAMA_SHOW = {
    "parameters": "num_ctx                        16384\n"
    'stop                           "<|im_end|>"',
    "details": {"family": "qwen2", "parameter_size": "7.6B", "quantization_level": "Q4_K_M"},
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}
OLLAMA_SHOW_NO_NUM_CTX = {**OLLAMA_SHOW, "parameters": 'stop "<|im_end|>"'}
OLLAMA_PS = {"models": [{"name": "qwen2.5:7b", "model": "qwen2.5:7b", "context_length": 8192}]}


@pytest.fixture
def provider(fake_model_server: FakeModelServer) -> Iterator[OpenAIProvider]:
    yield OpenAIProvider(api_key="sk-local", base_url=fake_model_server.openai_base_url)


async def refresh(provider: OpenAIProvider, model: str) -> int:
    try:
        with hang_guard():
            return await provider.refresh_context_window(model)
    finally:
        await provider.aclose()


def asked(server: FakeModelServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.probes]


@pytest.mark.parametrize(
    ("endpoints", "model", "window", "questions"),
    [
        (
            {"GET /v1/models": LLAMA_CPP_MODELS_OLD, "GET /props": LLAMA_CPP_PROPS},
            "local",
            8192,
            ["GET /v1/models", "GET /props?model=local"],
        ),
        ({"GET /v1/models": LLAMA_CPP_MODELS_NEW}, "anything", 4096, ["GET /v1/models"]),
        (
            {"GET /v1/models": VLLM_MODELS},
            "Qwen/Qwen2.5-Coder-7B-Instruct",
            32768,
            ["GET /v1/models"],
        ),
        (
            {"GET /v1/models": OLLAMA_MODELS, "POST /api/show": OLLAMA_SHOW},
            "qwen2.5:7b",
            16384,
            ["GET /v1/models", "GET /props?model=qwen2.5%3A7b", "POST /api/show"],
        ),
        (
            {"POST /api/show": OLLAMA_SHOW_NO_NUM_CTX, "GET /api/ps": OLLAMA_PS},
            "qwen2.5:7b",
            8192,
            ["GET /v1/models", "GET /props?model=qwen2.5%3A7b", "POST /api/show", "GET /api/ps"],
        ),
        ({"POST /api/show": OLLAMA_SHOW_NO_NUM_CTX}, "qwen2.5:7b", 32768, None),
    ],
    ids=[
        "llama.cpp",
        "llama.cpp-recent",
        "vllm",
        "ollama-num_ctx",
        "ollama-loaded",
        "ollama-model",
    ],
)
async def test_the_server_says_how_much_the_model_reads(
    fake_model_server: FakeModelServer,
    provider: OpenAIProvider,
    endpoints: dict[str, Any],
    model: str,
    window: int,
    questions: list[str] | None,
) -> None:
    fake_model_server.endpoints.update(endpoints)
    assert provider.context_window(model) == 128_000  # nothing known yet
    assert await refresh(provider, model) == window
    assert provider.context_window(model) == window
    assert context_window(provider, model) == window  # the accessor /context and "auto" use
    if questions is not None:
        assert asked(fake_model_server) == questions
    assert fake_model_server.requests == []  # no model request, no step used
    assert fake_model_server.probes[0].headers["authorization"] == "Bearer sk-local"


@pytest.mark.parametrize("where", ["GET /v1/models", "GET /props"])
async def test_what_a_real_llama_server_answers(
    fake_model_server: FakeModelServer, provider: OpenAIProvider, where: str
) -> None:
    """Answers recorded from llama-server started with -c 8192 (see tests/recorded)."""
    recorded = {
        "GET /v1/models": json.loads((RECORDED / "models.json").read_text()),
        "GET /props": json.loads((RECORDED / "props.json").read_text()),
    }
    fake_model_server.endpoints[where] = recorded[where]  # old builds: no meta.n_ctx
    assert await refresh(provider, "local") == 8192


async def test_a_server_that_cannot_say_keeps_the_default_and_is_asked_once(
    fake_model_server: FakeModelServer, provider: OpenAIProvider
) -> None:
    async with anyio.create_task_group() as group:  # concurrent callers share one question
        for _ in range(3):
            group.start_soon(provider.refresh_context_window, "mystery")
    assert await refresh(provider, "mystery") == 128_000
    assert asked(fake_model_server) == [
        "GET /v1/models",
        "GET /props?model=mystery",
        "POST /api/show",
    ]


async def test_the_configured_window_wins_and_nothing_is_asked(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.endpoints["GET /props"] = LLAMA_CPP_PROPS
    settings = Settings.model_validate(
        {
            "provider": "openai",
            "providers": {
                "openai": {"base_url": fake_model_server.openai_base_url, "context_window": 20000}
            },
        }
    )
    choice = resolve_provider(settings, provider=None, model="local", environ={})
    provider = create_provider(choice)
    assert choice.context_window == 20_000 and provider.context_window("local") == 20_000
    assert await provider.refresh_context_window("local") == 20_000
    await provider.aclose()
    assert fake_model_server.probes == []


async def test_openai_itself_anthropic_and_models_the_table_knows_are_not_asked(
    fake_model_server: FakeModelServer, provider: OpenAIProvider
) -> None:
    official = OpenAIProvider(api_key="sk", base_url=None)  # a connection would fail the test
    assert await refresh(official, "qwen-on-openai") == 128_000
    fake_model_server.endpoints["GET /v1/models"] = LLAMA_CPP_MODELS_NEW
    assert await refresh(provider, "anthropic/claude-sonnet-4.5") == 200_000  # OpenRouter
    claude = AnthropicProvider(api_key="sk", base_url=fake_model_server.url)
    assert await claude.refresh_context_window("claude-opus-4-6") == 200_000
    await claude.aclose()
    assert fake_model_server.probes == []


async def test_a_slow_server_does_not_hold_things_up(
    fake_model_server: FakeModelServer,
    provider: OpenAIProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(openai_provider, "PROBE_TIMEOUT", 0.3)
    answer = threading.Event()

    def slow(request: CapturedRequest) -> Any:
        answer.wait(HANG_S)  # a refresh that waited for the answer would hang
        return LLAMA_CPP_MODELS_NEW

    fake_model_server.endpoints["GET /v1/models"] = slow
    try:
        with hang_guard():
            assert await refresh(provider, "local") == 128_000
    finally:
        answer.set()


async def test_closing_the_provider_mid_question_is_quiet(
    fake_model_server: FakeModelServer, provider: OpenAIProvider
) -> None:
    def slow(request: CapturedRequest) -> Any:
        time.sleep(1)
        return LLAMA_CPP_MODELS_NEW

    fake_model_server.endpoints["GET /v1/models"] = slow
    async with anyio.create_task_group() as group:
        group.start_soon(provider.refresh_context_window, "local")
        await anyio.sleep(0.2)
        await provider.aclose()
    assert provider.context_window("local") == 128_000
