"""Tool search: rank a catalog of MCP tools for a ``ToolSearch`` query.

:mod:`caliban.search.text` normalises words, :mod:`caliban.search.index` holds the BM25 index,
the query forms and the fusion, :mod:`caliban.search.semantic` the static embedding model
shipped with caliban, :mod:`caliban.search.transformer` a BERT encoder in numpy
(all-MiniLM-L6-v2), :mod:`caliban.search.dense` its background embedding and disk cache, and
:mod:`caliban.search.models` picks the models from the ``tools.search_model`` setting.
Importing this package loads neither numpy nor a model; :mod:`caliban.search.index` does
(numpy), and models are read on first use.
"""
