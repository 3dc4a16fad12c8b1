"""Built search indexes kept on disk, so a session whose catalog has not changed has its
index in milliseconds instead of building it again (a second at 10,000 tools).

An entry holds what :meth:`caliban.search.index.ToolIndex.build` computes from the tools'
texts — the BM25 postings (with the terms spelled out: term ids are per process) and the
static model's tool embeddings with its catalog IDF weights — under a key that is the
sha256 of every tool's name, server, description and input schema (``marshal``-encoded:
tens of milliseconds for 10,000 tools), the static model's digest and :data:`FORMAT`. The
transformer's embeddings have their own cache, per server (:mod:`caliban.search.dense`).

Files are written whole and renamed (an interrupted write leaves nothing), checked for
shape and finiteness on read (anything else is ignored and rebuilt), and the
:data:`MAX_ENTRIES` least recently used are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import marshal
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from caliban.util.fsutil import atomic_write_bytes, prune_oldest

__all__ = ["FORMAT", "MAX_ENTRIES", "IndexStore", "StoredIndex"]

FORMAT: Final = 2
"""Bumped when what an entry holds, or how a tool's text is analysed, changes."""
MAX_ENTRIES: Final = 16
log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class StoredIndex:
    """What a built index needs from its tools' texts, in plain arrays."""

    terms: list[str]
    """The catalog's terms, in the order of the postings' blocks."""
    starts: npt.NDArray[np.int64]
    doc_ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    short_scores: npt.NDArray[np.float64]
    static_matrix: npt.NDArray[np.float32] | None
    static_idf: npt.NDArray[np.float32] | None

    def valid(self, tools: int) -> bool:
        """Whether the arrays fit together and a catalog of ``tools`` tools."""
        blocks = len(self.terms)
        if self.starts.shape != (blocks + 1,):
            return False
        if not self.doc_ids.shape == self.scores.shape == self.short_scores.shape:
            return False
        if int(self.starts[0]) != 0 or int(self.starts[-1]) != len(self.doc_ids):
            return False
        if np.any(np.diff(self.starts) < 0):
            return False
        if not (np.isfinite(self.scores).all() and np.isfinite(self.short_scores).all()):
            return False
        if len(self.doc_ids) and not (self.doc_ids.min() >= 0 and self.doc_ids.max() < tools):
            return False
        if (self.static_matrix is None) != (self.static_idf is None):
            return False
        if self.static_matrix is not None:
            if self.static_matrix.ndim != 2 or len(self.static_matrix) != tools:
                return False
            if not np.isfinite(self.static_matrix).all():
                return False
        return True


class IndexStore:
    """Index entries under ``directory``, one ``.npz`` file per catalog."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(tools: Sequence[tuple[object, ...]], static_digest: str | None) -> str | None:
        """The entry's name for a catalog, given each tool's ``(name, server, tool,
        description, input_schema)``; ``None`` when a schema is not plain JSON data (such a
        catalog is simply not stored)."""
        try:
            # version 2: no back-references, whose use depends on reference counts, so the
            # same tools always give the same bytes
            raw = marshal.dumps(list(tools), 2)
        except ValueError:
            return None
        digest = hashlib.sha256(raw)
        digest.update(f"\0{FORMAT}\0{static_digest}\0{sys.version_info[:2]}".encode())
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def load(self, key: str, tools: int) -> StoredIndex | None:
        """The entry ``key`` for a catalog of ``tools`` tools, or ``None``."""
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                static = "static_matrix" in data.files
                stored = StoredIndex(
                    terms=str(data["terms"]).split("\n") if len(data["starts"]) > 1 else [],
                    starts=data["starts"].astype(np.int64),
                    doc_ids=data["doc_ids"].astype(np.int64),
                    scores=data["scores"].astype(np.float64),
                    short_scores=data["short_scores"].astype(np.float64),
                    static_matrix=data["static_matrix"].astype(np.float32) if static else None,
                    static_idf=data["static_idf"].astype(np.float32) if static else None,
                )
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            log.debug("ignoring the search index cache %s: %s", path, exc)
            return None
        if not stored.valid(tools):
            return None
        with contextlib.suppress(OSError):
            path.touch()  # recently used: kept when the directory is pruned
        return stored

    def save(self, key: str, stored: StoredIndex) -> None:
        """Write the entry (whole, then renamed); failures are logged and ignored."""
        path = self._path(key)
        arrays: dict[str, npt.NDArray[np.generic]] = {
            "terms": np.array("\n".join(stored.terms)),
            "starts": stored.starts,
            "doc_ids": stored.doc_ids.astype(np.int32),
            "scores": stored.scores,
            "short_scores": stored.short_scores,
        }
        if stored.static_matrix is not None and stored.static_idf is not None:
            arrays["static_matrix"] = stored.static_matrix
            arrays["static_idf"] = stored.static_idf
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        try:
            atomic_write_bytes(path, buffer.getvalue())
            prune_oldest(path.parent, "*.npz", MAX_ENTRIES)
        except OSError as exc:
            log.debug("could not cache the search index in %s: %s", path, exc)
