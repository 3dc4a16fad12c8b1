"""The shipped static embedding model: loads offline with numpy, tokenizes like BERT, and
relates words a catalog does not use."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hang import cpu_time

from caliban.search.semantic import DEFAULT_MODEL_DIR, StaticModel, WordPiece, load_embedder


@pytest.fixture(scope="module")
def model() -> StaticModel:
    return StaticModel.load()


def test_the_shipped_model_is_the_one_its_card_describes() -> None:
    meta = json.loads((DEFAULT_MODEL_DIR / "model.json").read_text())
    data = (DEFAULT_MODEL_DIR / "embeddings.npz").read_bytes()
    assert hashlib.sha256(data).hexdigest() == meta["sha256"]
    assert meta["licence"] == "Apache-2.0"
    assert len(data) < 10_000_000


def test_wordpiece_splits_like_bert() -> None:
    wp = WordPiece(["[UNK]", "un", "##want", "##ed", "run", "##ning", ",", "_", "get", "file"])
    assert wp.tokens("UNwanted, running") == ["un", "##want", "##ed", ",", "run", "##ning"]
    assert wp.tokens("get_file") == ["get", "_", "file"]  # "_" is punctuation to BERT
    assert wp.tokens("café") == []  # accents stripped, then "cafe" does not split: unknown
    assert wp.tokens("") == []


def test_embeddings_are_unit_vectors_that_relate_meanings(model: StaticModel) -> None:
    vecs = model.embed(["weather forecast", "rain tomorrow", "delete the git branch", ""])
    assert vecs.shape == (4, model.dims)
    assert np.allclose(np.linalg.norm(vecs[:3], axis=1), 1.0, atol=1e-5)
    assert not vecs[3].any()
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]


def test_a_query_embeds_well_within_20_ms(model: StaticModel) -> None:
    query = "I'm planning a trip to Lisbon next week: what's the weather and any cheap flights?"
    model.embed([query])
    with cpu_time() as spent:
        for _ in range(20):
            model.embed([query])
    assert spent.seconds / 20 < 0.020


def test_the_catalog_idf_weights_the_words_that_tell_tools_apart() -> None:
    embedder = load_embedder()
    catalog = embedder.embed_catalog(
        [
            "get weather: Get the weather forecast for a city.",
            "get stock price: Get the latest price of a stock.",
            "get recipe: Get a recipe by dish name.",
        ]
    )
    sims = catalog.similarities("get me something for dinner tonight")
    assert sims is not None
    assert int(np.argmax(sims)) == 2
    assert catalog.similarities("日本語") is None  # no token the model knows


def test_importing_the_cli_loads_no_search_code() -> None:
    modules = "('numpy', 'snowballstemmer', 'Stemmer', 'caliban.search.index')"
    code = f"import sys, caliban.cli.app; print([m for m in {modules} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_model_directory_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        StaticModel.load(tmp_path)
