"""Tool search: rank a catalog of MCP tools for a ``ToolSearch`` query.

:mod:`caliban.search.text` normalises words, :mod:`caliban.search.bm25` builds the BM25
postings, :mod:`caliban.search.index` holds the index, the query forms and the fusion,
:mod:`caliban.search.store` keeps built indexes on disk, :mod:`caliban.search.semantic` the
static embedding model shipped with caliban, :mod:`caliban.search.transformer` a BERT
encoder in numpy (all-MiniLM-L6-v2, also shipped), :mod:`caliban.search.dense` its
background embedding and disk cache, and :mod:`caliban.search.models` picks the models from
the ``tools.search_model`` setting. Nothing outside the search imports this package before
it needs it (the CLI's start-up never does); importing it loads numpy, with a
single-threaded BLAS (below), and no model.
"""

import os
import sys

_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _load_numpy_single_threaded() -> None:
    """Import numpy with its BLAS on one thread, unless the user chose otherwise.

    Search multiplies small matrices (a query is a dozen tokens): a second BLAS thread
    spinning for work made a query's embedding cost 40 times the CPU and 35 times the
    time on a busy two-core machine (0.02 s of CPU per 12 x 384 x 1536 product against
    0.0005). The BLAS reads these variables once, when it loads; they are restored
    afterwards, so the processes caliban starts (the user's commands, MCP servers) keep
    the environment they had.
    """
    if "numpy" in sys.modules:
        return
    saved = {name: os.environ.get(name) for name in _BLAS_THREADS}
    for name in _BLAS_THREADS:
        os.environ.setdefault(name, "1")
    try:
        import numpy  # noqa: F401
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_load_numpy_single_threaded()
