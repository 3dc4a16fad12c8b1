"""The transformer side of tool search: tool embeddings computed off the critical path.

A transformer (:class:`caliban.search.transformer.TransformerModel`) embeds a query in a few
milliseconds but a catalog in seconds, so :class:`DenseEncoder` loads the model and embeds
catalogs on one background thread, caches each server's tool embeddings on disk (keyed by a
hash of the model and of that server's tool texts) and in memory, and a
:class:`DenseCatalog` answers only once its embeddings are ready. Until then the index ranks
with the static model (or BM25 alone): the first search never waits for the transformer.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from caliban.util.fsutil import atomic_write_bytes, prune_oldest

__all__ = ["DenseCatalog", "DenseEncoder", "FloatArray", "SentenceEncoder"]

FloatArray = npt.NDArray[np.float32]
log = logging.getLogger(__name__)

_MAX_MEMORY_GROUPS: Final = 256
_MAX_CACHE_FILES: Final = 1024
"""Server catalogs kept on disk (~0.8 KB per tool); the least recently used go first."""
_MAX_QUERIES: Final = 512


class SentenceEncoder(Protocol):
    """What :class:`DenseEncoder` runs: :class:`caliban.search.transformer.TransformerModel`."""

    @property
    def digest(self) -> str:
        """Identifies the model (part of every cache key)."""
        ...

    @property
    def dims(self) -> int:
        """Length of each embedding."""
        ...

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Unit-length embeddings, one row per text."""
        ...


class DenseEncoder:
    """A transformer loaded once, in the background, with caches of tool embeddings.

    ``load`` is called on the worker thread the first time a catalog is embedded; if it
    fails, the failure is logged once and no catalog of this encoder ever becomes ready
    (searches keep ranking without it).
    """

    def __init__(
        self, load: Callable[[], SentenceEncoder], *, cache_dir: Path | None, name: str
    ) -> None:
        """``cache_dir``: where each server's tool embeddings are kept (``None``: memory only)."""
        self.name = name
        self._load = load
        self._cache_dir = cache_dir
        self._model: SentenceEncoder | None = None
        self._failed = False
        self._groups: OrderedDict[str, FloatArray] = OrderedDict()
        self._queries: OrderedDict[str, FloatArray] = OrderedDict()
        self._jobs: queue.SimpleQueue[DenseCatalog] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None

    @property
    def model(self) -> SentenceEncoder | None:
        """The transformer, once loaded."""
        return self._model

    @property
    def failed(self) -> bool:
        """Whether the model could not be loaded."""
        return self._failed

    def catalog(self, groups: Sequence[Sequence[str]]) -> DenseCatalog:
        """A catalog of tool texts, one sequence per server, in index order.

        Returns at once; its embeddings are computed (or read from the cache) in the
        background.
        """
        catalog = DenseCatalog(self, [list(g) for g in groups])
        if self._failed:
            return catalog
        with self._lock:
            self._jobs.put(catalog)
            if self._worker is None:
                # a daemon thread: quitting caliban never waits for an embedding job (cache
                # files are written whole, then renamed, so an interrupted write leaves none)
                self._worker = threading.Thread(
                    target=self._run, name=f"caliban-embed-{self.name}", daemon=True
                )
                self._worker.start()
        return catalog

    def embed_query(self, query: str) -> FloatArray:
        """The query's embedding (the model must be loaded); recent queries are remembered."""
        vec = self._queries.get(query)
        if vec is None:
            assert self._model is not None
            vec = self._model.embed([query])[0]
            self._queries[query] = vec
            if len(self._queries) > _MAX_QUERIES:
                self._queries.popitem(last=False)
        return vec

    def _run(self) -> None:
        while True:
            catalog = self._jobs.get()
            try:
                if self._model is None and not self._failed:
                    self._model = self._load()
                if self._model is not None:
                    catalog._finish(
                        np.concatenate(
                            [self._group(self._model, texts) for texts in catalog.groups]
                            or [np.zeros((0, self._model.dims), dtype=np.float32)]
                        )
                    )
            except Exception as exc:
                self._failed = True
                log.warning("tool search without the %s model: %s", self.name, exc)
            finally:
                catalog._done.set()

    def _group(self, model: SentenceEncoder, texts: Sequence[str]) -> FloatArray:
        """One server's tool embeddings: from memory, the disk cache, or the model."""
        key = hashlib.sha256("\0".join([model.digest, *texts]).encode()).hexdigest()
        cached = self._groups.get(key)
        if cached is None:
            cached = self._read(key, len(texts), model.dims)
        if cached is None:
            cached = model.embed(texts)
            self._write(key, cached)
        self._groups[key] = cached
        self._groups.move_to_end(key)
        if len(self._groups) > _MAX_MEMORY_GROUPS:
            self._groups.popitem(last=False)
        return cached

    def _path(self, key: str) -> Path | None:
        return None if self._cache_dir is None else self._cache_dir / f"{key}.npy"

    def _read(self, key: str, rows: int, dims: int) -> FloatArray | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.debug("ignoring the embedding cache %s: %s", path, exc)
            return None
        if data.shape != (rows, dims) or data.dtype != np.float16 or not np.isfinite(data).all():
            return None  # not what we wrote: recompute rather than trust it
        with contextlib.suppress(OSError):
            path.touch()  # recently used: kept when the cache is pruned
        return np.asarray(data, dtype=np.float32)

    def _write(self, key: str, vectors: FloatArray) -> None:
        path = self._path(key)
        if path is None:
            return
        buffer = io.BytesIO()
        np.save(buffer, vectors.astype(np.float16), allow_pickle=False)
        try:
            atomic_write_bytes(path, buffer.getvalue())
            prune_oldest(path.parent, "*.npy", _MAX_CACHE_FILES)  # catalogs change
        except OSError as exc:
            log.debug("could not cache tool embeddings in %s: %s", path, exc)


class DenseCatalog:
    """A catalog's tool embeddings from a transformer, ready once the background job ends."""

    def __init__(self, encoder: DenseEncoder, groups: list[list[str]]) -> None:
        """Use :meth:`DenseEncoder.catalog`."""
        self.encoder = encoder
        self.groups = groups
        self._matrix: FloatArray | None = None
        self._done = threading.Event()

    def _finish(self, matrix: FloatArray) -> None:
        self._matrix = matrix

    @property
    def ready(self) -> bool:
        """Whether the tool embeddings are computed."""
        return self._matrix is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background job ends (at most ``timeout`` s); whether it is ready."""
        self._done.wait(timeout)
        return self.ready

    def similarities(self, query: str) -> FloatArray | None:
        """Cosine of ``query`` with every tool, or ``None`` while the embeddings are not ready."""
        matrix = self._matrix
        if matrix is None:
            return None
        return matrix @ self.encoder.embed_query(query)
