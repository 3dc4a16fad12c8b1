"""Ranking MCP tools for ``ToolSearch``: BM25 over each tool's text, fused with a semantic score.

:meth:`ToolIndex.build` indexes a catalog once, :meth:`ToolIndex.search` answers a query.
Wording the answers is the ToolSearch tool's job (:mod:`caliban.mcp.lazy.tool_search`); for a
search that found nothing the index offers :meth:`ToolIndex.closest_names` and
:meth:`ToolIndex.server_counts`.

Query forms:

* keywords: ``create pull request`` ranks every tool (below);
* ``select:name1,name2`` picks exact names, full (``mcp__github__create_issue``) or bare
  (``create_issue``, which matches that tool on every server), in the order given;
* ``+term`` requires a word in the tool's name or server name (as Claude Code does); the
  other words rank.

How ranking works (each part was kept for what it measurably buys, see the ablation in
``docs/lazy-mcp.md``):

* A tool's text is its name, server, description and parameters (names, descriptions and
  enum values, a little way into nested schemas), normalised by :mod:`caliban.search.text`.
* BM25 (Okapi, ``k1`` 1.2, ``b`` 0.75, Lucene's IDF) over that text as one field, each query
  word counted once. Term scores do not depend on the query, so they are computed once at
  build time into an inverted index and a query adds up a few sparse vectors.
* A semantic score: the cosine between the query's and the tool's embeddings, from the
  shipped static model (:mod:`caliban.search.semantic`) or, once its tool embeddings are
  ready, a transformer (:mod:`caliban.search.dense`).
* Fusion: both as z-scores over the catalog, added with the weights of :class:`Ranking`. A
  tool that shares no word with the query is still a hit when its cosine is above the
  catalog's mean and a floor (0.35 static, 0.3 transformer).
* A query word that is a tool's exact name (``read_file``) puts that tool first.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from caliban.search.bm25 import VOCABULARY, IntArray, Postings, term_ids
from caliban.search.store import IndexStore, StoredIndex
from caliban.search.text import tokenize, words

if TYPE_CHECKING:
    from caliban.search.dense import DenseCatalog, DenseEncoder
    from caliban.search.semantic import CatalogEmbeddings, Embedder

__all__ = [
    "SearchDoc",
    "SearchHit",
    "SearchResult",
    "ToolDoc",
    "ToolIndex",
    "schema_texts",
    "tool_text",
]


class ToolDoc(Protocol):
    """What the index needs to know about a tool; :class:`SearchDoc` is the stock one."""

    @property
    def name(self) -> str:
        """Full wire name, ``mcp__<server>__<tool>``."""
        ...

    @property
    def server(self) -> str:
        """The server's configured name."""
        ...

    @property
    def tool(self) -> str:
        """The tool's own name on its server."""
        ...

    @property
    def description(self) -> str:
        """The tool's description."""
        ...

    @property
    def input_schema(self) -> Mapping[str, Any]:
        """The tool's JSON Schema for its arguments."""
        ...


D = TypeVar("D", bound=ToolDoc)


@dataclass(frozen=True, kw_only=True)
class SearchDoc:
    """One tool of the catalog, as the index sees it."""

    name: str
    """Full wire name, ``mcp__<server>__<tool>``."""
    server: str
    tool: str
    """The tool's own name on its server."""
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class SearchHit(Generic[D]):
    """A tool found by a search, with its score (``select:`` hits score 0)."""

    doc: D
    score: float
    matched: tuple[str, ...] = ()
    """The query's terms (:func:`caliban.search.text.tokenize`) that the tool's text has
    (keyword hits only)."""
    named: tuple[str, ...] = ()
    """Those of ``matched`` that are in the tool's or its server's name."""


@dataclass(frozen=True, kw_only=True)
class SearchResult(Generic[D]):
    """What a query found.

    For ``select:`` queries ``missing_names`` lists the requested names that matched no tool,
    in the order given; for keyword queries it is empty.
    """

    query: str
    mode: Literal["keywords", "select"]
    hits: tuple[SearchHit[D], ...]
    missing_names: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    """The query's meaningful terms, each once (keyword queries; stop words left out)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Wire names of the hits, best first."""
        return tuple(hit.doc.name for hit in self.hits)


# --- a tool's text ---------------------------------------------------------------------------

_MAX_SCHEMA_DEPTH: Final = 3
_MAX_ENUM_VALUES: Final = 24
_MAX_PARAM_TOKENS: Final = 300
_EXACT_NAME_BONUS: Final = 1000.0
_MIN_COSINE: Final = 0.35
"""A tool no query word matches is a hit only this close to the query (texts unrelated
under the shipped model rarely reach 0.35)."""
_MIN_DENSE_COSINE: Final = 0.3
"""Like :data:`_MIN_COSINE` for the transformer (unrelated texts rarely reach 0.3 under
all-MiniLM-L6-v2)."""


@dataclass(frozen=True, kw_only=True)
class Ranking:
    """The knobs of the fusion; the defaults are the measured best (``docs/lazy-mcp.md``).

    The benchmarks' ablation changes one at a time.
    """

    static_weight: float = 0.5
    """Weight of the static model's cosines against BM25 (both as z-scores)."""
    dense_weight: float = 1.2
    """Weight of the transformer's cosines against BM25, once its embeddings are ready."""
    fusion: Literal["z", "max"] = "z"
    """``z``: each signal as z-scores over the catalog; ``max``: BM25 over its best score plus
    the cosines rescaled to a catalog mean of 0 and a best of 1 (round 1)."""
    unique_terms: bool = True
    """Count a word repeated in the query once."""
    static_with_dense: float = 0.0
    """Weight of the static model's cosines once the transformer's are used too (0: the
    transformer replaces it)."""
    lexical_weight: float = 1.0
    """Weight of BM25 (z-scores only; 0 ranks by the semantic score alone)."""
    short_query_terms: int = 2
    """Once the transformer ranks, a query of at most this many terms is scored by BM25
    with ``b`` 0.5 (:data:`caliban.search.bm25.SHORT_B`) instead of 0.75: less of a penalty
    for a long tool text when the query has one or two words to match (0: never). Chosen on
    the development sets alone (issue 29, round 5)."""
    name_phrase: float = 0.5
    """Bonus (in z-score units, fused rankings only) for a tool whose name has two or more
    of the query's terms as one phrase, times the share of the query's terms the phrase
    covers: ``list issues`` lifts ``list_issues`` over tools that only mention issues."""
    split_parts: bool = False
    """Rank each ``;``-separated part of a ToolSearch query on its own and take the hits in
    turns (:meth:`ToolIndex.search`). Measured and not kept: on joined multi-capability
    queries it ranked below the whole query (hit@1 0.385 against 0.500, recall@10 0.603
    against 0.641), as MiniLM embeds a query of several capabilities well enough."""


DEFAULT_RANKING: Final = Ranking()
_PUNCT: Final = ".,;:!?'\"`()[]{}<>"
# "+git" requires a word; "+44 20 ..." (a phone number) or "2+2" does not
_REQUIRED: Final = re.compile(r"\+[^\W\d_][\w.-]*")
# a word that names a tool rather than says something: read_file, get-sum, getFileInfo
# (alphanumeric runs joined by "_", "__" or "-": unambiguous, so no catastrophic backtracking)
_IDENTIFIER: Final = re.compile(r"[^\W_]+(?:(?:__?|-)[^\W_]+)+|[a-z]+(?:[A-Z][a-z0-9]*)+")


_SCHEMA: Final = (dict, Mapping)
"""What a schema node may be: JSON gives dicts, checked first as the Mapping ABC's check
costs a tenth of the walk over 10,000 tools."""


def schema_texts(schema: Mapping[str, Any]) -> list[str]:
    """Parameter names, descriptions and enum values of a JSON Schema, bounded in depth."""
    out: list[str] = []

    def walk(node: object, depth: int) -> None:
        if depth > _MAX_SCHEMA_DEPTH or not isinstance(node, _SCHEMA):
            return
        props = node.get("properties")
        if isinstance(props, _SCHEMA):
            for pname, pschema in props.items():
                out.append(str(pname))
                if isinstance(pschema, _SCHEMA):
                    for key in ("title", "description"):
                        if isinstance(pschema.get(key), str):
                            out.append(pschema[key])
                    walk(pschema, depth + 1)
        enum = node.get("enum")
        if isinstance(enum, list):
            out.extend(str(v) for v in enum[:_MAX_ENUM_VALUES] if isinstance(v, str))
        items = node.get("items")
        if isinstance(items, _SCHEMA):
            walk(items, depth + 1)
        for key in ("anyOf", "oneOf", "allOf"):
            alts = node.get(key)
            if isinstance(alts, list):
                for alt in alts[:4]:
                    walk(alt, depth + 1)

    walk(schema, 0)
    return out


def tool_text(doc: ToolDoc) -> str:
    """What the semantic model embeds for a tool: its name's words, description and
    parameter names."""
    props = doc.input_schema.get("properties")
    params = ", ".join(str(p) for p in props) if isinstance(props, Mapping) else ""
    text = f"{' '.join(words(doc.tool))}: {doc.description}"
    return f"{text} Parameters: {params}." if params else text


_NO_TERMS: Final = np.zeros(0, dtype=np.int64)


def _doc_term_ids(doc: ToolDoc) -> IntArray:
    """The term ids of a tool's text: name, server, description, parameters (bounded)."""
    params: list[IntArray] = []
    count = 0
    for text in schema_texts(doc.input_schema):
        ids = term_ids(text)
        params.append(ids)
        count += len(ids)
        if count >= _MAX_PARAM_TOKENS:
            break
    return np.concatenate(
        [
            term_ids(doc.tool),
            # a server may be named with a stop word ("everything"); keep it findable
            term_ids(doc.server, keep_stop_words=True),
            term_ids(doc.description),
            np.concatenate(params)[:_MAX_PARAM_TOKENS] if params else _NO_TERMS,
        ]
    )


@lru_cache(maxsize=65536)
def _name_words(tool: str) -> tuple[str, ...]:
    """A tool's name as index terms, in order (a long request checks many names)."""
    return tuple(tokenize(tool))


def _name_terms(doc: ToolDoc) -> frozenset[str]:
    """Terms of a tool's name and server: where a ``+required`` word must appear."""
    return frozenset(
        [*tokenize(doc.tool, keep_stop_words=True), *tokenize(doc.server, keep_stop_words=True)]
    )


# --- the index -------------------------------------------------------------------------------

_FloatArray = npt.NDArray[np.float64]


class ToolIndex(Generic[D]):
    """A search index over one tool catalog. Immutable: rebuild it when the catalog changes.

    Building costs a few milliseconds per hundred tools (see ``docs/lazy-mcp.md``), so a
    changed tool list simply gets a new index: the session builds one per catalog
    (:func:`caliban.mcp.lazy.catalog.build_index`); :meth:`replace_server` swaps one
    server's tools.
    """

    __slots__ = (
        "_by_name",
        "_by_tool",
        "_by_tool_lower",
        "_dense",
        "_dense_encoder",
        "_docs",
        "_embedder",
        "_embeddings",
        "_name_terms",
        "_postings",
        "_ranking",
    )

    def __init__(
        self,
        docs: Sequence[D],
        postings: Postings,
        embedder: Embedder | None,
        embeddings: CatalogEmbeddings | None,
        *,
        dense: DenseCatalog | None = None,
        ranking: Ranking = DEFAULT_RANKING,
    ) -> None:
        """Use :meth:`build`."""
        self._docs: tuple[D, ...] = tuple(docs)
        self._postings = postings
        self._embedder = embedder
        self._embeddings = embeddings
        self._dense = dense
        self._dense_encoder = dense.encoder if dense is not None else None
        self._ranking = ranking
        self._name_terms: list[frozenset[str] | None] = [None] * len(self._docs)
        self._by_name: dict[str, int] = {}
        self._by_tool: dict[str, list[int]] = defaultdict(list)
        self._by_tool_lower: dict[str, list[int]] = defaultdict(list)
        for i, doc in enumerate(self._docs):
            self._by_name.setdefault(doc.name, i)
            self._by_tool[doc.tool].append(i)
            self._by_tool_lower[doc.tool.lower()].append(i)
            self._by_tool_lower[doc.name.lower()].append(i)

    @classmethod
    def build(
        cls,
        docs: Iterable[D],
        *,
        embedder: Embedder | Literal["default"] | None = "default",
        dense: DenseEncoder | None = None,
        ranking: Ranking = DEFAULT_RANKING,
        store: IndexStore | None = None,
    ) -> ToolIndex[D]:
        """Index a catalog. Docs keep their order (it breaks score ties).

        The ranking fuses BM25 with the semantic score of ``embedder``: by default the model
        shipped with caliban (:func:`caliban.search.semantic.default_embedder`), or one
        loaded from elsewhere (:func:`caliban.search.semantic.load_embedder`); ``None`` (or
        a model that fails to load) ranks by BM25 alone.

        With a ``dense`` encoder (a transformer, :func:`caliban.search.models.semantic_models`)
        the tools are also embedded by it, in the background: once that is done (or read
        from the cache) its score replaces the static one. Building never waits for it.

        With a ``store``, an index built before for the same tools is read from it instead
        of being built again (:meth:`load`), and a new one is written to it.
        """
        embedder = _embedder(embedder)
        doc_list = list(docs)
        key = store.key(_identity(doc_list), _digest(embedder)) if store is not None else None
        if store is not None and key is not None:
            found = cls._restore(doc_list, embedder, dense, ranking, store.load(key, len(doc_list)))
            if found is not None:
                return found
        postings = Postings.build([_doc_term_ids(doc) for doc in doc_list])
        texts = [tool_text(d) for d in doc_list]
        embeddings = embedder.embed_catalog(texts) if embedder is not None and doc_list else None
        if store is not None and key is not None:
            store.save(
                key,
                StoredIndex(
                    terms=VOCABULARY.terms(postings.terms),
                    starts=postings.starts,
                    doc_ids=postings.doc_ids,
                    scores=postings.scores,
                    short_scores=postings.short_scores,
                    static_matrix=embeddings.matrix if embeddings is not None else None,
                    static_idf=embeddings.idf if embeddings is not None else None,
                ),
            )
        return cls(
            doc_list,
            postings,
            embedder,
            embeddings,
            dense=_dense_catalog(dense, doc_list, texts),
            ranking=ranking,
        )

    @classmethod
    def load(
        cls,
        docs: Iterable[D],
        *,
        store: IndexStore,
        embedder: Embedder | Literal["default"] | None = "default",
        dense: DenseEncoder | None = None,
        ranking: Ranking = DEFAULT_RANKING,
    ) -> ToolIndex[D] | None:
        """The index :meth:`build` would return, read from ``store``; ``None`` when it was
        never built for these tools (and models)."""
        embedder = _embedder(embedder)
        doc_list = list(docs)
        key = store.key(_identity(doc_list), _digest(embedder))
        if key is None:
            return None
        return cls._restore(doc_list, embedder, dense, ranking, store.load(key, len(doc_list)))

    @classmethod
    def _restore(
        cls,
        docs: list[D],
        embedder: Embedder | None,
        dense: DenseEncoder | None,
        ranking: Ranking,
        stored: StoredIndex | None,
    ) -> ToolIndex[D] | None:
        if stored is None or (embedder is not None) != (stored.static_matrix is not None):
            return None
        postings = Postings(
            terms=VOCABULARY.ids(stored.terms),
            starts=stored.starts,
            doc_ids=stored.doc_ids,
            scores=stored.scores,
            short_scores=stored.short_scores,
        )
        embeddings = None
        if embedder is not None and stored.static_matrix is not None:
            assert stored.static_idf is not None
            embeddings = embedder.restore_catalog(stored.static_matrix, stored.static_idf)
            if embeddings is None:
                return None
        texts = [tool_text(d) for d in docs] if dense is not None else []
        return cls(
            docs,
            postings,
            embedder,
            embeddings,
            dense=_dense_catalog(dense, docs, texts),
            ranking=ranking,
        )

    def replace_server(self, server: str, docs: Iterable[D]) -> ToolIndex[D]:
        """A new index with ``server``'s tools replaced by ``docs`` (empty drops the server).

        Other servers' transformer embeddings come from memory, so only ``server``'s tools
        are embedded again.
        """
        kept = [d for d in self._docs if d.server != server]
        return ToolIndex.build(
            [*kept, *docs],
            embedder=self._embedder,
            dense=self._dense_encoder,
            ranking=self._ranking,
        )

    def wait_semantic(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` s) for the transformer's tool embeddings; whether they
        are ready. ``False`` at once without a transformer."""
        return self._dense is not None and self._dense.wait(timeout)

    @property
    def semantic(self) -> bool:
        """Whether rankings fuse in a semantic score (static or transformer)."""
        return self._embeddings is not None or self.dense_ready

    @property
    def dense_ready(self) -> bool:
        """Whether the transformer's tool embeddings are ready (its score is used)."""
        return self._dense is not None and self._dense.ready

    def query_vector(self, query: str) -> npt.NDArray[np.float32] | None:
        """The transformer's embedding of a keyword query's ranked words, once the
        transformer ranks (``None`` before, and for ``select:`` queries); the encoder
        remembers it, so a search for ``query`` does not embed it again."""
        text = query.strip()
        if self._dense is None or not self._dense.ready or text[:7].lower() == "select:":
            return None
        _, ranked, _ = _parse(text)
        return self._dense.encoder.embed_query(ranked) if tokenize(ranked) else None

    @property
    def dense_model(self) -> tuple[str, int] | None:
        """The transformer's digest and dimensions, once it ranks."""
        model = self._dense.encoder.model if self._dense is not None and self._dense.ready else None
        return None if model is None else (model.digest, model.dims)

    def __len__(self) -> int:
        return len(self._docs)

    def _names(self, i: int) -> frozenset[str]:
        """The terms of tool ``i``'s name and server (computed on the first need: a search
        needs them for its few hits, and an index read from the disk cache has none)."""
        names = self._name_terms[i]
        if names is None:
            names = self._name_terms[i] = _name_terms(self._docs[i])
        return names

    def lookup(self, name: str) -> tuple[D, ...]:
        """Tools called ``name``: a full wire name, else a bare tool name on any server.

        Exact spelling wins; failing that, a case-insensitive match is accepted.
        """
        if name in self._by_name:
            return (self._docs[self._by_name[name]],)
        ids = self._by_tool.get(name) or self._by_tool_lower.get(name.lower(), [])
        return tuple(self._docs[i] for i in dict.fromkeys(ids))

    def server_counts(self) -> tuple[tuple[str, int], ...]:
        """``(server, number of tools)`` for every server in the catalog, by server name."""
        return tuple(sorted(Counter(d.server for d in self._docs).items()))

    def closest_names(self, query: str, n: int = 5) -> tuple[str, ...]:
        """Wire names that look most like ``query`` (for "did you mean" messages).

        Compares against both wire names and bare tool names with :mod:`difflib`.
        """
        q = query.strip()
        if q[:7].lower() == "select:":
            q = q[7:]
        q = re.sub(r"[\s\-]+", "_", q.strip().lower())
        if not q or n <= 0:
            return ()
        matches = difflib.get_close_matches(q, list(self._by_tool_lower), n=n * 3, cutoff=0.5)
        out: dict[str, None] = {}
        for key in matches:
            for i in self._by_tool_lower[key]:
                out[self._docs[i].name] = None
        return tuple(out)[:n]

    def search(self, query: str, limit: int = 5) -> SearchResult[D]:
        """Answer a ToolSearch query (keywords, ``select:`` or ``+required`` words).

        Keyword hits are the best ``limit`` tools that match a query word or, with the
        semantic score, resemble the query; a ``select:`` query returns every tool it names,
        in the order given, ignoring ``limit``.
        """
        text = query.strip()
        if text[:7].lower() == "select:":
            return self._select(query, text[7:])
        parts = [p.strip() for p in text.split(";")] if self._ranking.split_parts else []
        parts = [p for p in parts if p]
        if len(parts) > 1:
            return self._merged(query, parts, limit)
        return self._keywords(query, text, limit)

    def _merged(self, query: str, parts: Sequence[str], limit: int) -> SearchResult[D]:
        """Several capabilities in one query (``read excel; make chart``): each part is
        ranked on its own and the hits are taken in turns, each part's best first, so every
        part gets its share of ``limit``."""
        results = [self._keywords(part, part, limit) for part in parts]
        hits: dict[str, SearchHit[D]] = {}
        for rank in range(limit):
            for result in results:
                if rank < len(result.hits) and len(hits) < limit:
                    hits.setdefault(result.hits[rank].doc.name, result.hits[rank])
        terms = tuple(dict.fromkeys(t for result in results for t in result.terms))
        return SearchResult(query=query, mode="keywords", hits=tuple(hits.values()), terms=terms)

    def rank(self, text: str, limit: int) -> SearchResult[D]:
        """The best ``limit`` tools for free text (a user's request) as a keyword query
        would rank them, with no query syntax: ``select:`` and ``+word`` are plain words."""
        return self._keywords(text, text.strip(), limit, syntax=False)

    def _select(self, query: str, names: str) -> SearchResult[D]:
        hits: dict[str, SearchHit[D]] = {}
        missing: list[str] = []
        # tool names never contain spaces, so "a, b" and "a b" both list two names
        for name in re.split(r"[,\s]+", names):
            if not name:
                continue
            found = self.lookup(name)
            if not found:
                missing.append(name)
            for doc in found:
                hits.setdefault(doc.name, SearchHit(doc=doc, score=0.0))
        return SearchResult(
            query=query, mode="select", hits=tuple(hits.values()), missing_names=tuple(missing)
        )

    def _keywords(
        self, query: str, text: str, limit: int, *, syntax: bool = True
    ) -> SearchResult[D]:
        empty: tuple[SearchHit[D], ...] = ()
        if limit <= 0 or not self._docs:
            return SearchResult(query=query, mode="keywords", hits=empty)
        required, ranked, identifiers = _parse(text, syntax=syntax)
        meaningful = tokenize(ranked)
        # a query of nothing but stop words ("everything") may still name a server
        terms = meaningful or tokenize(ranked, keep_stop_words=True)
        if not terms and not required:
            return SearchResult(query=query, mode="keywords", hits=empty)

        r = self._ranking
        static = dense = None
        if meaningful:
            static = self._embeddings.similarities(ranked) if self._embeddings else None
            dense = self._dense.similarities(ranked) if self._dense else None
        # b 0.5 for a short query was chosen for the fusion with the transformer; with the
        # static model or alone, BM25 keeps 0.75 (the development sets disagreed there)
        short = dense is not None and len(set(terms)) <= r.short_query_terms
        lexical = np.zeros(len(self._docs))
        for term in dict.fromkeys(terms or required) if r.unique_terms else terms or required:
            term_id = VOCABULARY.get(term)
            if term_id is not None:
                self._postings.add_to(lexical, term_id, short=short)
        candidates = lexical > 0
        scores = lexical
        # a tool that shares no word may still be what was asked for, if it stands out
        # from the catalog and is near enough in absolute terms (under either model)
        for cosines, floor in ((static, _MIN_COSINE), (dense, _MIN_DENSE_COSINE)):
            if cosines is not None:
                candidates |= cosines >= max(float(cosines.mean()), floor)
        if dense is not None:
            scores = _fuse(lexical, dense, r.dense_weight, r)
            if r.static_with_dense and static is not None:
                scores = scores + r.static_with_dense * _zscores(static)
        elif static is not None:
            scores = _fuse(lexical, static, r.static_weight, r)
        if r.name_phrase and r.fusion == "z" and (dense is not None or static is not None):
            for i, share in self._phrase_shares(tuple(dict.fromkeys(terms))).items():
                scores[i] += r.name_phrase * share
        for word in identifiers:
            for i in self._by_tool_lower.get(word, ()):
                scores[i] += _EXACT_NAME_BONUS
                candidates[i] = True
        if required:
            for at in np.flatnonzero(candidates):
                names = self._names(int(at))
                if not all(t in names for t in required):
                    candidates[at] = False
        ids = np.flatnonzero(candidates)
        if ids.size > limit:
            # partial selection, then an exact stable sort of the few that remain
            cut = np.argpartition(-scores[ids], limit - 1)[:limit]
            ids = np.sort(ids[cut])
        order = ids[np.argsort(-scores[ids], kind="stable")]
        unique = tuple(dict.fromkeys(meaningful))
        hits = tuple(self._hit(int(i), float(scores[i]), unique) for i in order)
        return SearchResult(query=query, mode="keywords", hits=hits, terms=unique)

    def _phrase_shares(self, terms: tuple[str, ...]) -> dict[int, float]:
        """Tools whose name has two or more consecutive ``terms`` (query order) as
        consecutive words: the share of ``terms`` the longest such phrase covers."""
        found: dict[int, int] = {}
        for a in range(len(terms) - 1):
            # only tools whose text has both words can have them side by side in the name
            first, second = VOCABULARY.get(terms[a]), VOCABULARY.get(terms[a + 1])
            if first is None or second is None:
                continue
            both = np.intersect1d(self._postings.docs(first), self._postings.docs(second))
            for i in both.tolist():
                name = _name_words(self._docs[i].tool)
                for at in range(len(name) - 1):
                    k = 0
                    while (
                        a + k < len(terms) and at + k < len(name) and terms[a + k] == name[at + k]
                    ):
                        k += 1
                    if k >= 2:
                        found[i] = max(found.get(i, 0), k)
        return {i: k / len(terms) for i, k in found.items()}

    def _hit(self, i: int, score: float, terms: tuple[str, ...]) -> SearchHit[D]:
        """A hit, with the query terms the tool's text and name have."""
        matched = []
        for term in terms:
            term_id = VOCABULARY.get(term)
            if term_id is not None and self._postings.has(term_id, i):
                matched.append(term)
        names = self._names(i)
        named = tuple(t for t in matched if t in names)
        return SearchHit(doc=self._docs[i], score=score, matched=tuple(matched), named=named)


def _fuse(
    lexical: _FloatArray, cosines: npt.NDArray[Any], weight: float, ranking: Ranking
) -> _FloatArray:
    """BM25 scores and cosines on one scale, added (``weight`` for the cosines)."""
    if ranking.fusion == "z":
        # z-scores: each signal counts by how far a tool stands out from the catalog, so a
        # query whose BM25 scores are all close does not let the cosines' noise decide
        return ranking.lexical_weight * _zscores(lexical) + weight * _zscores(cosines)
    best = float(lexical.max())
    scores = lexical / best if best > 0 else lexical
    top, mean = float(cosines.max()), float(cosines.mean())
    return scores + weight * (cosines - mean) / (top - mean) if top > mean else scores


def _zscores(x: npt.NDArray[Any]) -> _FloatArray:
    std = float(x.std())
    return (x - x.mean()) / std if std > 0 else np.zeros(len(x))


def _embedder(embedder: Embedder | Literal["default"] | None) -> Embedder | None:
    if embedder == "default":
        from caliban.search.semantic import default_embedder

        return default_embedder()
    return embedder


def _identity(docs: Sequence[ToolDoc]) -> list[tuple[object, ...]]:
    """What keys a catalog in the index store: everything the index reads of each tool."""
    return [(d.name, d.server, d.tool, d.description, d.input_schema) for d in docs]


def _digest(embedder: Embedder | None) -> str | None:
    return embedder.model.digest if embedder is not None else None


def _dense_catalog(
    dense: DenseEncoder | None, docs: Sequence[ToolDoc], texts: Sequence[str]
) -> DenseCatalog | None:
    """The transformer's embeddings of the catalog, computed (or read) in the background."""
    if dense is None or not docs:
        return None
    return dense.catalog(_server_groups(docs, texts))


def _server_groups(docs: Sequence[ToolDoc], texts: Sequence[str]) -> list[list[str]]:
    """Tool texts grouped by server, in index order (an index lists a server's tools
    together; a server whose tools are split gets a group per run)."""
    groups: list[list[str]] = []
    last = None
    for doc, text in zip(docs, texts, strict=True):
        if doc.server != last or not groups:
            groups.append([])
            last = doc.server
        groups[-1].append(text)
    return groups


def _parse(text: str, *, syntax: bool = True) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """Split a query into required terms (``+word``, only with ``syntax``), the text that
    ranks and tool-name-like words."""
    required: list[str] = []
    ranked: list[str] = []
    identifiers: list[str] = []
    for word in text.split():
        if syntax and _REQUIRED.fullmatch(word):
            word = word[1:]
            required.extend(tokenize(word, keep_stop_words=True))
        bare = word.strip(_PUNCT)
        if _IDENTIFIER.fullmatch(bare):
            identifiers.append(bare.lower())
        ranked.append(word)
    return tuple(dict.fromkeys(required)), " ".join(ranked), tuple(identifiers)
