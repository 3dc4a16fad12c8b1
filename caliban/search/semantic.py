"""The semantic signal of tool search: a static embedding model, loaded with numpy.

A static model (model2vec-style) keeps one vector per WordPiece token; a text's embedding is
the normalised mean of its tokens' vectors, so embedding a query costs a tokenization and a
few array lookups — no neural network runs at search time. The model that ships in
``caliban/search/model/`` was distilled once from all-MiniLM-L6-v2 by
``benchmarks/build_embedding_model.py`` (see ``docs/lazy-mcp.md`` for its figures);
:meth:`StaticModel.load` takes another directory in the same format.

Tokenization is BERT's: lower-case, strip accents, split on whitespace and punctuation, then
greedy longest-match WordPiece over the model's vocabulary (the build script checks it
against the teacher's own tokenizer).
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_MODEL_DIR",
    "CatalogEmbeddings",
    "Embedder",
    "StaticModel",
    "WordPiece",
    "default_embedder",
    "load_embedder",
]

DEFAULT_MODEL_DIR: Final = Path(__file__).with_name("model")
"""The model shipped with caliban (``embeddings.npz`` + ``model.json``)."""

_MAX_WORD_CHARS: Final = 100
_MAX_TOKENS: Final = 512
"""Tokens of a text that count: a tool's long description says what it does early on."""

FloatArray = npt.NDArray[np.float32]
log = logging.getLogger(__name__)


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT counts every non-alphanumeric ASCII character as punctuation ("$", "^", "`", "_")
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


# ASCII control characters that are not whitespace (BERT drops them; \t\n\v\f\r and
# \x1c-\x1f are whitespace to str.split, so they separate words instead)
_ASCII_CONTROL: Final = re.compile("[\x00-\x08\x0e-\x1b\x7f]")
# a word of letters and digits, or one punctuation character (BERT counts every printable
# ASCII character that is not a letter, digit or space as punctuation)
_ASCII_WORD: Final = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")


class WordPiece:
    """BERT's uncased tokenizer over a WordPiece vocabulary (``##`` marks a continuation)."""

    def __init__(self, vocab: Sequence[str], *, unknown: str | None = None) -> None:
        """``vocab``: the tokens, in row order of the model's vectors. A word that does not
        split becomes the ``unknown`` token (BERT's ``[UNK]``), or nothing when ``None``."""
        self._vocab = tuple(vocab)
        self._ids = {token: i for i, token in enumerate(vocab)}
        self._unknown: tuple[int, ...] = () if unknown is None else (self._ids[unknown],)
        self._longest = max((len(t) for t in vocab), default=1)
        self._word_ids = lru_cache(maxsize=65536)(self._word_pieces)

    def tokens(self, text: str) -> list[str]:
        """The vocabulary tokens of ``text`` (words that cannot be split are left out)."""
        return [self._vocab[i] for i in self.ids(text)]

    def ids(self, text: str) -> list[int]:
        """Row ids of the tokens of ``text``, in order."""
        out: list[int] = []
        for word in self._words(text):
            out.extend(self._word_ids(word))
        return out

    @staticmethod
    def _words(text: str) -> list[str]:
        """BERT's basic tokenization: clean, lower-case, strip accents, split punctuation.

        ASCII text (nearly every tool description) goes through one regular expression;
        whitespace-separated chunks with other characters take the general path. Both give
        what the general path gives for the whole text: removing control characters never
        joins or splits chunks, since none of them is whitespace.
        """
        if text.isascii():
            return _ASCII_WORD.findall(_ASCII_CONTROL.sub("", text).lower())
        out: list[str] = []
        for chunk in text.split():
            if chunk.isascii():
                out.extend(_ASCII_WORD.findall(_ASCII_CONTROL.sub("", chunk).lower()))
            else:
                out.extend(WordPiece._unicode_words(chunk))
        return out

    @staticmethod
    def _unicode_words(text: str) -> list[str]:
        """:meth:`_words` for any text, a character at a time."""
        chars: list[str] = []
        for ch in text:
            cp = ord(ch)
            if (
                cp == 0
                or cp == 0xFFFD
                or (unicodedata.category(ch).startswith("C") and not ch.isspace())
            ):
                continue
            chars.append(f" {ch} " if _is_cjk(cp) else ch)
        out: list[str] = []
        for chunk in "".join(chars).lower().split():
            chunk = "".join(
                c for c in unicodedata.normalize("NFD", chunk) if unicodedata.category(c) != "Mn"
            )
            word: list[str] = []
            for ch in chunk:
                if _is_punctuation(ch):
                    if word:
                        out.append("".join(word))
                        word = []
                    out.append(ch)
                else:
                    word.append(ch)
            if word:
                out.append("".join(word))
        return out

    def _word_pieces(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first WordPiece; a word that does not split is unknown."""
        if len(word) > _MAX_WORD_CHARS:
            return self._unknown
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            found = None
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self._ids.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return self._unknown  # BERT makes the whole word [UNK]
            pieces.append(found)
            start = end
        return tuple(pieces)


class StaticModel:
    """Token vectors and their tokenizer (int8 vectors with one float scale per token)."""

    def __init__(
        self,
        vectors: npt.NDArray[np.int8],
        scales: FloatArray,
        vocab: Sequence[str],
        *,
        digest: str,
    ) -> None:
        """Use :meth:`load`."""
        self._vectors = vectors
        self._scales = scales
        self.vocab = tuple(vocab)
        self.tokenizer = WordPiece(vocab)
        self.digest = digest
        """Identifies the model's content."""

    @property
    def dims(self) -> int:
        """Length of each embedding."""
        return int(self._vectors.shape[1])

    @classmethod
    def load(cls, directory: Path = DEFAULT_MODEL_DIR) -> StaticModel:
        """Read ``embeddings.npz`` (int8 ``vectors``, per-token ``scales``, ``vocab``).

        Raises ``OSError`` or ``ValueError`` when the directory holds no usable model.
        """
        path = directory / "embeddings.npz"
        with np.load(path, allow_pickle=False) as data:
            vectors = np.ascontiguousarray(data["vectors"], dtype=np.int8)
            scales = np.asarray(data["scales"], dtype=np.float32)
            vocab = str(data["vocab"]).split("\n")
        if vectors.ndim != 2 or not len(vocab) == len(vectors) == len(scales):
            raise ValueError(f"{path}: {len(vocab)} tokens, {len(scales)} scales, {vectors.shape}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return cls(vectors, scales, vocab, digest=digest)

    def token_ids(self, text: str) -> npt.NDArray[np.intp]:
        """Row ids of the first tokens of ``text``."""
        return np.array(self.tokenizer.ids(text)[:_MAX_TOKENS], dtype=np.intp)

    def pool(self, ids: npt.NDArray[np.intp], weights: FloatArray | None = None) -> FloatArray:
        """The unit-length (weighted) mean of the vectors of ``ids``; zeros for no ids."""
        if ids.size == 0:
            return np.zeros(self.dims, dtype=np.float32)
        factors = self._scales[ids] if weights is None else self._scales[ids] * weights
        total = factors @ self._vectors[ids].astype(np.float32)
        norm = float(np.linalg.norm(total))
        return total / norm if norm > 0 else total

    def pool_many(
        self, ids: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], weights: FloatArray
    ) -> FloatArray:
        """:meth:`pool` of many texts at once: ``ids`` and ``weights`` are their tokens one
        after the other, ``lengths`` how many each text has (a text with none gets zeros)."""
        out = np.zeros((len(lengths), self.dims), dtype=np.float32)
        factors = self._scales[ids] * weights
        # one small matrix-vector product per text: measured faster than any segmented
        # reduction numpy offers over all tokens at once (np.add.reduceat: 20x slower)
        end = 0
        for i, length in enumerate(lengths.tolist()):
            begin, end = end, end + length
            if length:
                out[i] = factors[begin:end] @ self._vectors[ids[begin:end]].astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed(self, texts: Iterable[str]) -> FloatArray:
        """Unit-length embeddings of ``texts`` (plain token means), one row each."""
        rows = [self.pool(self.token_ids(t)) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dims), dtype=np.float32)


class CatalogEmbeddings:
    """A catalog's tool embeddings, and the query side of the semantic score.

    Tokens are weighted by their IDF over the catalog's tool texts: a token every tool has
    ("get", "the") says little about which tool is meant, one only a few tools have says a
    lot. A query token no tool has gets the highest weight (it may still mean something the
    model relates to a tool).
    """

    def __init__(self, model: StaticModel, token_ids: Sequence[npt.NDArray[np.intp]]) -> None:
        """``token_ids``: each tool's token ids (:meth:`StaticModel.token_ids` of its text)."""
        self.model = model
        n = len(token_ids)
        vocab = len(model.vocab)
        lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.intp, count=n)
        flat = np.concatenate(token_ids) if n else np.zeros(0, dtype=np.intp)
        doc = np.repeat(np.arange(n, dtype=np.intp), lengths)
        # document frequency: each (tool, token) pair once
        pairs = np.unique(doc * vocab + flat)
        df = np.bincount(pairs % vocab, minlength=vocab).astype(np.float32)
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        self.matrix = model.pool_many(flat, lengths, self.idf[flat])

    @classmethod
    def restore(cls, model: StaticModel, matrix: FloatArray, idf: FloatArray) -> CatalogEmbeddings:
        """Embeddings computed before (:attr:`matrix`, :attr:`idf`), for the same model."""
        self = cls.__new__(cls)
        self.model = model
        self.idf = idf
        self.matrix = matrix
        return self

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def similarities(self, query: str) -> FloatArray | None:
        """Cosine of ``query`` with every tool, or ``None`` when no token of it is known."""
        ids = self.model.token_ids(query)
        if ids.size == 0:
            return None
        return self.matrix @ self.model.pool(ids, self.idf[ids])


class Embedder:
    """Embeds catalogs with one model, remembering each tool text's tokens across rebuilds."""

    def __init__(self, model: StaticModel) -> None:
        """Wrap a loaded model."""
        self.model = model
        self._ids: dict[str, npt.NDArray[np.intp]] = {}

    def restore_catalog(self, matrix: FloatArray, idf: FloatArray) -> CatalogEmbeddings | None:
        """Embeddings stored from :meth:`embed_catalog` (``None`` if they do not fit this
        model)."""
        if matrix.shape[1:] != (self.model.dims,) or idf.shape != (len(self.model.vocab),):
            return None
        return CatalogEmbeddings.restore(self.model, matrix, idf)

    def embed_catalog(self, texts: Sequence[str]) -> CatalogEmbeddings:
        """Embeddings of a catalog, given each tool's text (``index.tool_text``)."""
        if len(self._ids) > _MAX_CACHED_TEXTS:
            self._ids.clear()
        ids = []
        for text in texts:
            cached = self._ids.get(text)
            if cached is None:
                cached = self._ids[text] = self.model.token_ids(text)
            ids.append(cached)
        return CatalogEmbeddings(self.model, ids)


_MAX_CACHED_TEXTS: Final = 100_000


@lru_cache(maxsize=1)
def default_embedder() -> Embedder | None:
    """The shipped model's embedder, loaded once; ``None`` (BM25 alone) if it cannot be read."""
    try:
        return load_embedder(DEFAULT_MODEL_DIR)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("tool search without the semantic model: %s", exc)
        return None


@lru_cache(maxsize=4)
def load_embedder(directory: Path = DEFAULT_MODEL_DIR) -> Embedder:
    """The embedder of the model in ``directory`` (the shipped one by default), loaded once."""
    return Embedder(StaticModel.load(directory))
