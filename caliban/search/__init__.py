"""Tool search: rank a catalog of MCP tools for a ``ToolSearch`` query.

:mod:`caliban.search.text` normalises words, :mod:`caliban.search.index` holds the BM25 index,
the query forms and the fusion, :mod:`caliban.search.semantic` the static embedding model.
Importing this package loads neither numpy nor the model; :mod:`caliban.search.index` does
(numpy), and the model is read on first use (:func:`caliban.search.semantic.load_embedder`).
"""
