"""Context windows: the built-in table, and what OpenAI-compatible servers report.

Claude models read 200k tokens and OpenAI's families are known; any other model behind an
OpenAI-compatible server would be assumed to read 128k, which a local model rarely does. So
:func:`probe_openai_compatible` asks the server, one request after another until one
answers (each parser below documents the response it reads):

1. ``GET {base}/models``: vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx`` (recent
   builds), OpenRouter's ``context_length``.
2. ``GET {root}/props?model=M``: llama.cpp's ``default_generation_settings.n_ctx``, the
   context of one slot (``-c`` divided by ``-np``).
3. ``POST {root}/api/show {"model": M}``: Ollama's ``num_ctx`` parameter when the model sets
   one; else ``GET {root}/api/ps``, the ``context_length`` the loaded model runs with; else
   the model's own ``<arch>.context_length`` (an upper bound: Ollama may run it smaller).

``{root}`` is the base URL without its ``/v1``. Requests go through the provider's
client (same key, same proxies and TLS settings) with a short timeout; a server that answers none of
them keeps the table's value, and ``providers.<name>.context_window`` overrides everything.
Models the table knows (Claude, OpenAI's families, also behind a gateway) are not asked about.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

CLAUDE_CONTEXT_WINDOW: Final = 200_000
DEFAULT_CONTEXT_WINDOW: Final = 128_000
_OPENAI_WINDOWS: Final[tuple[tuple[str, int], ...]] = (
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("o3", 200_000),
    ("o4", 200_000),
)
MIN_WINDOW: Final = 256
"""Smaller reported values are taken for nonsense (llama.cpp's router reports 0)."""


def known_context_window(provider: str, model: str) -> int | None:
    """The table's window for a Claude model or a known OpenAI family; ``None`` otherwise."""
    name = model.rsplit("/", 1)[-1].lower()  # "anthropic/claude-…" on OpenRouter
    if provider == "anthropic" or name.startswith("claude"):
        return CLAUDE_CONTEXT_WINDOW
    for prefix, window in _OPENAI_WINDOWS:
        if name.startswith(prefix):
            return window
    return None


def static_context_window(provider: str, model: str) -> int:
    """Tokens the model can read: 200k for Claude models, known OpenAI families, else 128k."""
    return known_context_window(provider, model) or DEFAULT_CONTEXT_WINDOW


# ---------------------------------------------------------------------------- parsers


def _window(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= MIN_WINDOW else None


def window_from_models(body: Any, model: str) -> int | None:
    """From a ``/v1/models`` list: the entry whose ``id`` (or llama.cpp alias) is ``model``,
    or the only entry (llama.cpp serves one model whatever the request names)."""
    entries = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, Mapping)]
    named = [e for e in entries if e.get("id") == model or model in (e.get("aliases") or ())]
    chosen = named[0] if named else entries[0] if len(entries) == 1 else None
    if chosen is None:
        return None
    meta = chosen.get("meta")
    for value in (
        chosen.get("max_model_len"),  # vLLM
        meta.get("n_ctx") if isinstance(meta, Mapping) else None,  # llama.cpp, not n_ctx_train
        chosen.get("context_length"),  # OpenRouter
        chosen.get("context_window"),
    ):
        if (window := _window(value)) is not None:
            return window
    return None


def window_from_props(body: Any) -> int | None:
    """From llama.cpp's ``/props``: ``default_generation_settings.n_ctx``."""
    settings = body.get("default_generation_settings") if isinstance(body, Mapping) else None
    return _window(settings.get("n_ctx")) if isinstance(settings, Mapping) else None


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def is_ollama_show(body: Any) -> bool:
    """Whether ``body`` looks like Ollama's ``/api/show`` answer."""
    return isinstance(body, Mapping) and any(
        key in body for key in ("model_info", "modelfile", "details")
    )


def window_from_ollama_show(body: Any) -> int | None:
    """From Ollama's ``/api/show``: the ``num_ctx`` line of ``parameters``, if set."""
    parameters = body.get("parameters") if isinstance(body, Mapping) else None
    if isinstance(parameters, str) and (found := _NUM_CTX.search(parameters)):
        return _window(int(found.group(1)))
    return None


def trained_window_from_ollama_show(body: Any) -> int | None:
    """From Ollama's ``/api/show``: the model's ``<arch>.context_length``."""
    info = body.get("model_info") if isinstance(body, Mapping) else None
    if not isinstance(info, Mapping):
        return None
    values = [v for k, v in info.items() if isinstance(k, str) and k.endswith(".context_length")]
    return _window(values[0]) if values else None


def window_from_ollama_ps(body: Any, model: str) -> int | None:
    """From Ollama's ``/api/ps``: ``context_length`` of the loaded ``model``."""
    models = body.get("models") if isinstance(body, Mapping) else None
    if not isinstance(models, list):
        return None
    for entry in models:
        if isinstance(entry, Mapping) and model in (entry.get("name"), entry.get("model")):
            return _window(entry.get("context_length"))
    return None


# ---------------------------------------------------------------------------- probe

FetchJson = Callable[[str, str, Mapping[str, Any] | None], Awaitable[Any]]
"""``(method, url, json_body)`` → the decoded JSON answer, or ``None`` on any failure."""


def server_root(base_url: str) -> str:
    """``http://host:8080/v1`` → ``http://host:8080`` (where llama.cpp and Ollama keep their
    own endpoints)."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


async def probe_openai_compatible(fetch: FetchJson, base_url: str, model: str) -> int | None:
    """The context window an OpenAI-compatible server at ``base_url`` reports for ``model``
    (see the module docstring), or ``None``."""
    base = base_url.rstrip("/")
    root = server_root(base_url)
    window = window_from_models(await fetch("GET", f"{base}/models", None), model)
    if window is None:
        query = urllib.parse.urlencode({"model": model})
        window = window_from_props(await fetch("GET", f"{root}/props?{query}", None))
    if window is not None:
        return window
    show = await fetch("POST", f"{root}/api/show", {"model": model})
    if not is_ollama_show(show):
        return None
    window = window_from_ollama_show(show)
    if window is None:
        window = window_from_ollama_ps(await fetch("GET", f"{root}/api/ps", None), model)
    return window if window is not None else trained_window_from_ollama_show(show)
