"""Which semantic models a tool index uses, from the ``tools.search_model`` setting.

``"auto"`` (the default) uses all-MiniLM-L6-v2, shipped with caliban
(``caliban/search/model/minilm``, run by :mod:`caliban.search.transformer`), once a
catalog's tool embeddings are computed in the background (and cached under the user cache
dir), and the static model shipped beside it until then; ``"static"`` the static model
alone; ``"bm25"`` neither; any other value is the path of a BERT sentence-transformers
directory (or a ``.zip`` of one) to run as the transformer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final

from caliban.config.paths import cache_dir
from caliban.search.dense import DenseEncoder
from caliban.search.semantic import DEFAULT_MODEL_DIR, Embedder, default_embedder
from caliban.search.transformer import TransformerModel

__all__ = ["MINILM_DIR", "SemanticModels", "semantic_models"]

log = logging.getLogger(__name__)

MINILM_DIR: Final = DEFAULT_MODEL_DIR / "minilm"
"""all-MiniLM-L6-v2 as caliban ships it (``scripts/convert_minilm.py``; provenance in its
``model.json``)."""


@dataclass(frozen=True, kw_only=True)
class SemanticModels:
    """The models a :class:`caliban.search.index.ToolIndex` fuses with BM25."""

    static: Embedder | None
    """The static model (instant; used until the transformer's embeddings are ready)."""
    dense: DenseEncoder | None
    """The transformer, or ``None``."""


@lru_cache(maxsize=8)
def semantic_models(setting: str = "auto") -> SemanticModels:
    """The models for a ``tools.search_model`` value, loaded once per process.

    Cheap to call: the transformer is loaded by its background thread on first use, never
    here.
    """
    if setting == "bm25":
        return SemanticModels(static=None, dense=None)
    static = default_embedder()
    if setting == "static":
        return SemanticModels(static=static, dense=None)
    source = MINILM_DIR if setting == "auto" else Path(setting).expanduser()
    if not source.exists():
        log.warning("tools.search_model: %s does not exist; using the static model", source)
        return SemanticModels(static=static, dense=None)
    dense = DenseEncoder(
        lambda: TransformerModel.load(source),
        cache_dir=cache_dir() / "tool-embeddings",
        name="all-MiniLM-L6-v2" if setting == "auto" else source.name,
    )
    return SemanticModels(static=static, dense=dense)
