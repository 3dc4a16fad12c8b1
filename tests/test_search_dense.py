"""The transformer path of tool search: a BERT encoder in numpy, tool embeddings computed in
the background and cached on disk, and searches that never wait for them."""

from __future__ import annotations

import json
import logging
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hang import HANG_S

from caliban.search.dense import DenseEncoder
from caliban.search.index import SearchDoc, ToolIndex
from caliban.search.models import MINILM_DIR, semantic_models
from caliban.search.transformer import TransformerModel, read_safetensors

WORDS = ["weather", "forecast", "rain", "stock", "price", "share", "commit", "log", "git", "file"]


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    codes = {np.dtype(np.float16): "F16", np.dtype(np.int8): "I8"}
    for name, arr in tensors.items():
        code = codes.get(arr.dtype, "F32")
        dtype = arr.dtype if code != "F32" else np.dtype(np.float32)
        data = np.ascontiguousarray(arr, dtype=dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": code,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))


def tiny_bert(directory: Path, seed: int = 0) -> Path:
    """A 2-layer BERT with random weights, in the sentence-transformers layout."""
    rng = np.random.default_rng(seed)
    hidden, inter, layers = 8, 16, 2
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS, "##s"]
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": hidden,
        "num_attention_heads": 2,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "layer_norm_eps": 1e-12,
    }
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")

    def w(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    tensors = {
        "embeddings.word_embeddings.weight": w(len(vocab), hidden),
        "embeddings.position_embeddings.weight": w(64, hidden),
        "embeddings.token_type_embeddings.weight": w(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            tensors[f"{p}attention.self.{n}.weight"] = w(hidden, hidden)
            tensors[f"{p}attention.self.{n}.bias"] = w(hidden)
        tensors[f"{p}attention.output.dense.weight"] = w(hidden, hidden)
        tensors[f"{p}attention.output.dense.bias"] = w(hidden)
        tensors[f"{p}intermediate.dense.weight"] = w(inter, hidden)
        tensors[f"{p}intermediate.dense.bias"] = w(inter)
        tensors[f"{p}output.dense.weight"] = w(hidden, inter)
        tensors[f"{p}output.dense.bias"] = w(hidden)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{p}{ln}.weight"] = np.ones(hidden, np.float32)
            tensors[f"{p}{ln}.bias"] = np.zeros(hidden, np.float32)
    write_safetensors(directory / "model.safetensors", tensors)
    return directory


@pytest.fixture
def tiny(tmp_path: Path) -> TransformerModel:
    return TransformerModel.load(tiny_bert(tmp_path / "tiny"))


def test_a_text_embeds_the_same_alone_and_in_a_batch_of_longer_ones(
    tiny: TransformerModel,
) -> None:
    texts = ["weather", "git commit log file weathers", "stock price share", "rain"]
    batch = tiny.embed(texts)
    alone = np.stack([tiny.embed([t])[0] for t in texts])
    assert np.allclose(batch, alone, atol=1e-5)  # padding takes no attention
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(batch[0], batch[3])


def test_a_text_is_cut_to_the_positions_a_model_has(tiny: TransformerModel) -> None:
    # the tiny model knows 64 positions (MiniLM 512): a longer text, or a lone text padded
    # past them, keeps its first tokens instead of failing
    long = " ".join(WORDS * 10)  # 100 tokens
    near = " ".join((WORDS * 7)[:61])  # 63 with [CLS] and [SEP]: padded to 64, not 65
    assert len(tiny.token_ids(long)) == 64
    batch = tiny.embed([long, near, "rain"])
    alone = np.stack([tiny.embed([t])[0] for t in (long, near, "rain")])
    assert np.allclose(batch, alone, atol=1e-5)


def test_a_zipped_model_loads_like_its_directory(tmp_path: Path) -> None:
    directory = tiny_bert(tmp_path / "m")
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in directory.iterdir():
            zf.write(f, f.name)
    a, b = TransformerModel.load(directory), TransformerModel.load(archive)
    assert a.digest == b.digest
    assert np.allclose(a.embed(["git log"]), b.embed(["git log"]))


def test_unknown_words_become_the_unknown_token(tiny: TransformerModel) -> None:
    assert tiny.tokenizer.tokens("weathers zzz") == ["weather", "##s", "[UNK]"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:5],  # no header length
        lambda raw: (10**9).to_bytes(8, "little") + raw[8:],  # header longer than the file
        lambda raw: raw[:-4],  # the last tensor is cut short
        lambda raw: raw.replace(b'"F32"', b'"Q4"', 1),  # a dtype we do not know
    ],
)
def test_a_damaged_weights_file_is_refused(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "w.safetensors"
    write_safetensors(path, {"a": np.ones((2, 3), np.float32), "b": np.zeros(4, np.float32)})
    assert read_safetensors(path.read_bytes(), path)["a"].shape == (2, 3)
    with pytest.raises(ValueError):
        read_safetensors(damage(path.read_bytes()), path)


# --- the background encoder and its caches ------------------------------------------------


class CountingModel:
    """The tiny model, counting the texts it embeds and optionally held at the gate."""

    def __init__(self, model: TransformerModel) -> None:
        self.model = model
        self.digest = model.digest
        self.dims = model.dims
        self.embedded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += len(texts)
        return self.model.embed(texts)


def docs() -> list[SearchDoc]:
    tools = {
        "weather": [("get_forecast", "Rain and weather forecast"), ("get_alerts", "Storm alerts")],
        "stocks": [("get_price", "Latest stock price of a share")],
        "git": [("git_log", "Shows the commit logs"), ("git_commit", "Records changes")],
    }
    return [
        SearchDoc(name=f"mcp__{srv}__{t}", server=srv, tool=t, description=d)
        for srv, items in tools.items()
        for t, d in items
    ]


def test_searching_never_waits_for_the_transformer(tiny: TransformerModel, tmp_path: Path) -> None:
    gate = threading.Event()

    def slow_load() -> TransformerModel:
        gate.wait(HANG_S)  # a search that waited for the load would hang here
        return tiny

    encoder = DenseEncoder(slow_load, cache_dir=tmp_path, name="tiny")
    index = ToolIndex.build(docs(), dense=encoder)
    found = index.search("weather forecast", 3)
    assert found.names[0] == "mcp__weather__get_forecast"  # BM25 and the static model
    assert not index.dense_ready
    gate.set()
    assert index.wait_semantic(HANG_S)
    assert index.dense_ready
    assert "mcp__weather__get_forecast" in index.search("weather forecast", 3).names


def test_tool_embeddings_are_cached_per_server_on_disk(
    tiny: TransformerModel, tmp_path: Path
) -> None:
    first = CountingModel(tiny)
    index = ToolIndex.build(docs(), dense=DenseEncoder(lambda: first, cache_dir=tmp_path, name="t"))
    assert index.wait_semantic(HANG_S)
    assert first.embedded == 5
    assert len(list(tmp_path.glob("*.npy"))) == 3  # one file per server

    # a new process (a new encoder) reads them back; a changed server is embedded again
    second = CountingModel(tiny)
    encoder = DenseEncoder(lambda: second, cache_dir=tmp_path, name="t")
    changed = [*docs()[:4], SearchDoc(name="mcp__git__git_push", server="git", tool="git_push")]
    again = ToolIndex.build(changed, dense=encoder)
    assert again.wait_semantic(HANG_S)
    assert second.embedded == 2  # git's two tools: the server's texts changed
    cosines = again._dense.similarities("weather")  # type: ignore[union-attr]
    assert cosines is not None
    tool, query = tiny.embed(["get forecast: Rain and weather forecast", "weather"])
    expected = tool @ query
    assert cosines[0] == pytest.approx(expected, abs=2e-3)  # float16 on disk


def test_a_corrupt_cache_file_is_recomputed(tiny: TransformerModel, tmp_path: Path) -> None:
    index = ToolIndex.build(docs(), dense=DenseEncoder(lambda: tiny, cache_dir=tmp_path, name="t"))
    assert index.wait_semantic(HANG_S)
    for f in tmp_path.glob("*.npy"):
        f.write_bytes(b"\x93NUMPY garbage")
    counting = CountingModel(tiny)
    again = ToolIndex.build(
        docs(), dense=DenseEncoder(lambda: counting, cache_dir=tmp_path, name="t")
    )
    assert again.wait_semantic(HANG_S)
    assert counting.embedded == 5


def test_a_model_that_fails_to_load_leaves_search_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> TransformerModel:
        raise ValueError("not a BERT model")

    encoder = DenseEncoder(broken, cache_dir=tmp_path, name="broken")
    with caplog.at_level(logging.WARNING):
        index = ToolIndex.build(docs(), dense=encoder)
        assert not index.wait_semantic(HANG_S)
    assert "not a BERT model" in caplog.text
    assert index.search("stock price", 2).names[0] == "mcp__stocks__get_price"
    assert encoder.failed


def test_the_search_model_setting_chooses_the_models(tmp_path: Path) -> None:
    assert semantic_models("bm25").static is None
    assert semantic_models("bm25").dense is None
    static_only = semantic_models("static")
    assert static_only.static is not None and static_only.dense is None
    missing = semantic_models(str(tmp_path / "no-such-model"))
    assert missing.static is not None and missing.dense is None
    custom = semantic_models(str(tiny_bert(tmp_path / "custom")))
    assert custom.dense is not None and custom.dense.name == "custom"


# --- all-MiniLM-L6-v2 as caliban ships it -------------------------------------------------

REFERENCE_TOOLS = Path(__file__).resolve().parent.parent / "benchmarks" / "reference_tools.json"


def test_the_shipped_minilm_matches_sentence_transformers() -> None:
    # recorded from sentence-transformers 6.2.0 / torch 2.13.0 on the float32 weights; the
    # shipped int8 conversion stays within 0.01 of each coordinate and 0.005 of each cosine
    texts = [
        "recent commits",
        "git log: Shows the commit logs. Parameters: repo_path, max_count.",
        "Create a new pull request in a GitHub repository.",
        "naïve café at 34.0522,-118.2437 — star #2!",
    ]
    first_dims = [
        [0.00867, -0.00239, 0.00309, -0.00631, 0.07236, 0.05704],
        [0.05099, -0.10051, -0.05878, 0.05302, -0.01541, -0.02625],
        [-0.08893, -0.08679, -0.03214, -0.0131, 0.01804, -0.01605],
        [-0.01576, -0.0073, -0.0215, 0.07602, 0.03788, -0.00459],
    ]
    cosines = [0.41747, 0.35563, 0.05054, 0.28207, 0.04332, 0.03824]
    model = TransformerModel.load(MINILM_DIR)
    emb = model.embed(texts)
    assert np.allclose(emb[:, :6], first_dims, atol=0.01)
    got = emb @ emb.T
    assert np.allclose(got[np.triu_indices(4, 1)], cosines, atol=0.005)


def test_the_shipped_minilm_is_what_its_card_says() -> None:
    import hashlib

    card = json.loads((MINILM_DIR / "model.json").read_text())
    assert card["licence"].startswith("Apache-2.0")
    for name, digest in card["sha256"].items():
        assert hashlib.sha256((MINILM_DIR / name).read_bytes()).hexdigest() == digest, name
    assert (MINILM_DIR.parent / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_int8_and_fp16_weights_read_like_float32(tmp_path: Path) -> None:
    directory = tiny_bert(tmp_path / "f32")
    tensors = read_safetensors((directory / "model.safetensors").read_bytes(), directory)
    half: dict[str, np.ndarray] = {k: v.astype(np.float16) for k, v in tensors.items()}
    quantised: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        if value.ndim == 2:
            scale = np.abs(value).max(axis=1) / 127.0
            quantised[name] = np.round(value / scale[:, None]).astype(np.int8)
            quantised[name + ".scale"] = scale.astype(np.float32)
        else:
            quantised[name] = value
    reference = TransformerModel.load(directory).embed(["git commit log", "weather"])
    for label, variant in (("f16", half), ("i8", quantised)):
        target = tmp_path / label
        target.mkdir()
        for f in ("config.json", "vocab.txt"):
            (target / f).write_bytes((directory / f).read_bytes())
        write_safetensors(target / "model.safetensors", variant)
        got = TransformerModel.load(target).embed(["git commit log", "weather"])
        assert np.allclose(got, reference, atol=0.05), label


def quantise(tensors: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every matrix as int8 with a scale per row, and the float32 weights those stand for."""
    quantised: dict[str, np.ndarray] = {}
    dequantised: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        if value.ndim == 2:
            scale = (np.abs(value).max(axis=1) / 127.0).astype(np.float32)
            rows = np.round(value / scale[:, None]).astype(np.int8)
            quantised[name], quantised[name + ".scale"] = rows, scale
            dequantised[name] = rows * scale[:, None]
        else:
            quantised[name] = dequantised[name] = value
    return quantised, dequantised


def test_int8_weights_kept_as_int8_multiply_as_their_float32_values(tmp_path: Path) -> None:
    # the encoder keeps int8 matrices as they are stored and scales each product's columns:
    # that must equal multiplying by the dequantised float32 matrix, alone or in a batch
    directory = tiny_bert(tmp_path / "source")
    tensors = read_safetensors((directory / "model.safetensors").read_bytes(), directory)
    models = {}
    for label, variant in zip(("i8", "f32"), quantise(tensors), strict=True):
        target = tmp_path / label
        target.mkdir()
        for f in ("config.json", "vocab.txt"):
            (target / f).write_bytes((directory / f).read_bytes())
        write_safetensors(target / "model.safetensors", variant)
        models[label] = TransformerModel.load(target)
    texts = ["git commit log", "weather", "stock price share rain forecast file"]
    assert np.allclose(models["i8"].embed(texts), models["f32"].embed(texts), atol=1e-6)
    for text in texts:
        assert np.allclose(models["i8"].embed([text]), models["f32"].embed([text]), atol=1e-6)


def test_the_shipped_minilm_keeps_its_layers_int8_in_memory() -> None:
    # 10.6 MB instead of 42 MB widened: what lets a query's products run from the CPU cache
    model = TransformerModel.load(MINILM_DIR)
    layer_bytes = sum(
        m.values.nbytes
        for layer in model._layers
        for m in (layer.qkv, layer.out, layer.up, layer.down)
    )
    assert layer_bytes < 11e6


def test_threads_embedding_at_once_each_get_their_own_answers() -> None:
    # queries are embedded on the caller's thread while catalogs are on the encoder's: each
    # thread widens int8 weights into its own buffer (one shared buffer mixed their weights)
    model = TransformerModel.load(MINILM_DIR)
    texts = ["create a pdf report", "git commit history", "stock price history", "weather"]
    expected = [model.embed([t])[0] for t in texts]
    catalog = [f"tool {i}: reads and writes files in a project" for i in range(16)]
    expected_catalog = model.embed(catalog)
    failures: list[str] = []
    start = threading.Barrier(2)

    def queries() -> None:
        start.wait()
        for _ in range(10):
            for text, want in zip(texts, expected, strict=True):
                if not np.allclose(model.embed([text])[0], want, atol=1e-6):
                    failures.append(text)

    def catalogs() -> None:
        start.wait()
        for _ in range(3):
            if not np.allclose(model.embed(catalog), expected_catalog, atol=1e-6):
                failures.append("catalog")

    threads = [threading.Thread(target=queries), threading.Thread(target=catalogs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    assert not any(t.is_alive() for t in threads)
    assert failures == []


def test_an_int8_matrix_without_its_scale_is_refused(tmp_path: Path) -> None:
    directory = tiny_bert(tmp_path / "m")
    tensors = read_safetensors((directory / "model.safetensors").read_bytes(), directory)
    key = "embeddings.word_embeddings.weight"
    tensors[key] = np.zeros(tensors[key].shape, np.int8)
    write_safetensors(directory / "model.safetensors", tensors)
    with pytest.raises(ValueError, match="int8 without a scale"):
        TransformerModel.load(directory)


def test_with_minilm_recent_commits_ranks_the_log_first(tmp_path: Path) -> None:
    # the reference-server complaint the static model cannot fix (test_search_reference.py)
    data = json.loads(REFERENCE_TOOLS.read_text())
    catalog = [
        SearchDoc(
            name=f"mcp__{srv['server']}__{tool['name']}",
            server=srv["server"],
            tool=tool["name"],
            description=tool.get("description") or "",
            input_schema=tool.get("inputSchema") or {},
        )
        for srv in data["servers"]
        for tool in srv["tools"]
    ]
    model = TransformerModel.load(MINILM_DIR)
    index = ToolIndex.build(
        catalog, dense=DenseEncoder(lambda: model, cache_dir=tmp_path, name="m")
    )
    assert index.wait_semantic(HANG_S)
    assert index.search("recent commits", 5).names[0] == "mcp__git__git_log"


def zip_bomb(path: Path, megabytes: int) -> Path:
    """A BERT model archive whose weights are ``megabytes`` of zeros (about 1,000× packed)."""
    directory = tiny_bert(path.parent / f"{path.stem}-files")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("config.json", "vocab.txt"):
            zf.write(directory / name, name)
        with zf.open("model.safetensors", "w", force_zip64=True) as member:
            for _ in range(megabytes):
                member.write(bytes(2**20))
    return path


def test_a_model_archive_may_not_inflate_past_its_bounds(tmp_path: Path) -> None:
    import tracemalloc

    bomb = zip_bomb(tmp_path / "bomb.zip", 200)
    assert bomb.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"more than 50× \(a zip bomb\?\)"):
            TransformerModel.load(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20


def test_a_model_file_is_read_within_bounds_whatever_it_is(tmp_path: Path) -> None:
    directory = tiny_bert(tmp_path / "m")
    weights = directory / "model.safetensors"
    weights.unlink()
    weights.symlink_to("/dev/zero")  # would never end
    with pytest.raises(ValueError, match="not a regular file"):
        TransformerModel.load(directory)
