"""Ranking MCP tools for ``ToolSearch``: a field-aware BM25 index over a tool catalog.

Lazy MCP loading keeps tools off the wire until the model finds them. This module is the pure
finding part: :meth:`ToolIndex.build` indexes a catalog once, :meth:`ToolIndex.search` answers a
query. Formatting results for the model is the ToolSearch tool's job, except the "no match"
text (:func:`format_no_match`), which is shared.

Query forms:

* keywords: ``create pull request`` ranks by BM25;
* ``select:name1,name2`` picks exact names, full (``mcp__github__create_issue``) or bare
  (``create_issue``, which matches that tool on every server), in the order given;
* ``+term`` requires a word: every hit contains it (after normalisation) in some field, and the
  other words rank.

How ranking works:

* Every tool has four fields: its tool name, its server name, its description and its
  parameters (names, descriptions and enum values, recursing a little into nested schemas).
  Identifiers are split on ``_ - .``, camelCase and digits; text is lower-cased, stop words
  dropped and words lightly stemmed (:func:`stem`).
* Each field has its own BM25 statistics (``rank_bm25``; :data:`SCORER` picks the variant);
  a tool's score is the weighted sum of its field scores (:data:`FIELD_WEIGHTS`), a simple
  BM25F. Term scores do not depend on the query, so they are computed once at build time into
  an inverted index and a query only adds up a few sparse vectors; see ``docs/lazy-mcp.md``.
* Query words are expanded at a lower weight with a small table of everyday synonyms
  (:data:`SYNONYMS`) and with longer index words they are a prefix of (``repo`` finds
  ``repository``), so a user's words can meet a tool's words.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from rank_bm25 import BM25Okapi, BM25Plus

__all__ = [
    "FIELD_WEIGHTS",
    "SYNONYMS",
    "SearchDoc",
    "SearchHit",
    "SearchResult",
    "ToolDoc",
    "ToolIndex",
    "format_no_match",
    "stem",
    "tokenize",
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

    @property
    def names(self) -> tuple[str, ...]:
        """Wire names of the hits, best first."""
        return tuple(hit.doc.name for hit in self.hits)


# --- text normalisation ----------------------------------------------------------------------

STOP_WORDS: Final = frozenset(
    """
    a about above after again against am an and any are as at be because been before being
    below between both but by can could did do does doing down during each etc eg few for from
    further had has have having he her here hers him his how i ie if in into is it its itself
    just me might more most must my myself no nor not now of off on once only or other ought
    our ours out over own please same shall she should so some such than that the their theirs
    them then there these they this those through to too under until up very was we were what
    when where which while who whom whose why will with would you your yours yourself
    also via using use used let lets want wants need needs like help tell give gives
    able may maybe someone something somewhere thing things one
    mcp tool tools
    """.split()
)
"""Words that carry no meaning for finding a tool (query filler and schema boilerplate)."""

_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_VOWELS = frozenset("aeiouy")
_KEEP_S = ("ss", "us", "is")
_NO_ED = frozenset({"embed", "need", "speed", "feed", "seed", "shred", "bed", "red", "shed"})


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Conservatively stem a lower-case word so its inflections meet.

    Handles plurals (``-s``, ``-es``, ``-ies``), ``-ing`` and ``-ed`` (with doubled consonants:
    ``committed`` → ``commit``) and then drops a final silent ``e``, so ``create``,
    ``creates``, ``created`` and ``creating`` all become ``creat``. Short words are left
    alone. The output is an index key, not necessarily an English word.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(_KEEP_S):
        w = w[:-1]
    elif w.endswith("ing") and _has_vowel(w[:-3]) and len(w) >= 6:
        w = _undouble(w[:-3])
    elif w.endswith("ed") and w not in _NO_ED and _has_vowel(w[:-2]) and len(w) >= 5:
        w = _undouble(w[:-2])
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def _undouble(s: str) -> str:
    # running -> runn -> run; but keep fill/pass/buzz
    if len(s) >= 3 and s[-1] == s[-2] and s[-1] not in "aeiouylsz":
        return s[:-1]
    return s


@lru_cache(maxsize=65536)
def _split_word(chunk: str) -> tuple[str, ...]:
    if chunk.isascii():
        parts = _CAMEL.findall(chunk) or [chunk]
        return tuple(p.lower() for p in parts)
    return (chunk.lower(),)


def words(text: str) -> list[str]:
    """Split text or an identifier into lower-case words (``_ - .``, camelCase, digits)."""
    out: list[str] = []
    for chunk in _WORD.findall(text):
        out.extend(_split_word(chunk))
    return out


def tokenize(text: str, *, keep_stop_words: bool = False) -> list[str]:
    """Normalise text to index terms: split, lower-case, drop stop words, stem."""
    return [
        stem(w)
        for w in words(text)
        if len(w) > 1 and (keep_stop_words or w not in STOP_WORDS)
    ]


# --- query expansion -------------------------------------------------------------------------

SYNONYMS: Final[Mapping[str, str]] = {
    # word: words it may also mean (one-way; list both directions where it goes both ways).
    # Generic developer and user vocabulary only, never tuned to particular queries.
    "pr": "pull request",
    "prs": "pull request",
    "mr": "pull request",
    "repo": "repository",
    "repos": "repository",
    "org": "organization",
    "orgs": "organization",
    "ticket": "issue",
    "bug": "issue",
    "issue": "ticket bug",
    "delete": "remove",
    "remove": "delete",
    "erase": "delete remove",
    "drop": "delete remove",
    "destroy": "delete",
    "trash": "delete",
    "forget": "delete remove",
    "rm": "delete remove",
    "find": "search list",
    "search": "find",
    "look": "search find",
    "lookup": "search find",
    "locate": "search find",
    "grep": "search",
    "show": "get list view read",
    "display": "get list view",
    "view": "get read",
    "see": "get list view",
    "fetch": "get retrieve download",
    "retrieve": "get fetch",
    "read": "get view",
    "get": "read retrieve",
    "ls": "list directory",
    "cat": "read file",
    "enumerate": "list",
    "file": "path",
    "path": "file",
    "document": "file",
    "doc": "document file",
    "folder": "directory",
    "dir": "directory",
    "directory": "folder",
    "mkdir": "create directory",
    "mv": "move",
    "cp": "copy",
    "rename": "move",
    "commit": "change",
    "change": "commit modify update edit",
    "changes": "commit diff",
    "modify": "edit update change",
    "edit": "modify update change",
    "update": "edit modify",
    "alter": "edit modify update",
    "tweak": "edit modify",
    "fix": "edit update",
    "create": "new add",
    "make": "create",
    "new": "create",
    "add": "create",
    "open": "create read",
    "start": "create begin",
    "write": "save",
    "save": "write store",
    "store": "save write",
    "remember": "memory save store",
    "recall": "memory search",
    "memorize": "memory save",
    "diff": "difference compare",
    "compare": "diff",
    "difference": "diff",
    "history": "log commit",
    "log": "history",
    "annotate": "blame",
    "stage": "add",
    "unstage": "reset",
    "undo": "revert reset",
    "rollback": "revert reset",
    "screenshot": "capture screen",
    "capture": "screenshot",
    "snapshot": "screenshot capture",
    "webpage": "page url browser web",
    "website": "site page url web",
    "site": "website page url",
    "web": "internet online",
    "internet": "web",
    "online": "web",
    "google": "search web",
    "link": "url",
    "url": "link",
    "visit": "navigate open",
    "go": "navigate",
    "browse": "navigate browser",
    "timezone": "time zone",
    "tz": "timezone",
    "clock": "time",
    "hour": "time",
    "translate": "convert",
    "email": "mail",
    "mail": "email",
    "message": "msg",
    "msg": "message",
    "copy": "duplicate",
    "duplicate": "copy",
    "dupe": "duplicate",
    "upload": "push write",
    "push": "upload",
    "download": "fetch get",
    "run": "execute trigger",
    "execute": "run",
    "exec": "execute run",
    "trigger": "run",
    "launch": "start run",
    "js": "javascript",
    "script": "javascript",
    "click": "press",
    "press": "click",
    "tap": "click press",
    "keystroke": "key press",
    "shortcut": "key press",
    "type": "fill enter input",
    "enter": "fill type input",
    "fill": "type enter input",
    "field": "input",
    "form": "input field",
    "textbox": "input field",
    "dropdown": "select option",
    "choose": "select",
    "pick": "select choose",
    "mouseover": "hover",
    "iframe": "frame",
    "frame": "iframe",
    "embedded": "iframe frame",
    "tab": "window",
    "window": "tab",
    "api": "http request endpoint",
    "endpoint": "url api",
    "rest": "http api",
    "submit": "post send",
    "send": "post submit",
    "record": "capture",
    "recording": "record capture",
    "wait": "delay sleep",
    "sleep": "wait delay",
    "delay": "wait",
    "label": "tag",
    "tag": "label",
    "user": "person member account",
    "person": "user",
    "people": "user member",
    "member": "user",
    "teammate": "member user",
    "collaborator": "member user",
    "account": "user profile",
    "profile": "user account",
    "login": "authenticate user",
    "assign": "assignee",
    "assignee": "assign",
    "reply": "comment respond",
    "respond": "reply comment",
    "feedback": "comment review",
    "note": "comment observation",
    "fact": "observation",
    "approve": "review",
    "notification": "notify alert",
    "notify": "notification",
    "inbox": "notification",
    "vulnerability": "security advisory alert",
    "vuln": "vulnerability security",
    "cve": "vulnerability advisory security",
    "security": "vulnerability",
    "credential": "secret token password",
    "password": "secret credential",
    "token": "secret credential",
    "leak": "secret exposed",
    "dependency": "package library",
    "dep": "dependency",
    "deps": "dependency",
    "package": "dependency library",
    "library": "dependency package",
    "ci": "workflow action build pipeline",
    "pipeline": "workflow ci",
    "build": "workflow",
    "release": "version",
    "version": "release tag",
    "snippet": "gist code",
    "paste": "gist",
    "source": "code",
    "tree": "structure hierarchy",
    "structure": "tree",
    "hierarchy": "tree",
    "recursive": "tree",
    "info": "information metadata detail",
    "information": "info metadata detail",
    "metadata": "info information detail",
    "detail": "info information",
    "stat": "info metadata",
    "stats": "statistics info metadata",
    "relationship": "relation",
    "relation": "relationship",
    "connection": "relation link",
    "sum": "add total",
    "total": "sum",
    "plus": "add sum",
    "env": "environment variable",
    "picture": "image",
    "photo": "image picture",
    "img": "image",
    "scrape": "crawl extract",
    "crawl": "scrape",
    "spider": "crawl",
    "sitemap": "map site url",
    "share": "stock",
    "ticker": "stock symbol",
    "quote": "price",
    "cost": "price",
    "worth": "price value",
    "content": "text body",
    "body": "content text description",
    "description": "body",
    "text": "content",
    "subject": "title",
    "latest": "recent last newest",
    "recent": "latest last",
    "last": "latest recent",
    "newest": "latest",
    "author": "user owner",
    "land": "merge",
    "combine": "merge",
    "subscribe": "subscription watch",
    "watch": "subscribe subscription",
    "unsubscribe": "subscription",
    "mute": "ignore subscription",
    "ignore": "dismiss",
    "dismiss": "ignore",
    "cancel": "stop abort",
    "stop": "cancel",
    "abort": "cancel",
    "retry": "rerun",
    "rerun": "retry run",
    "task": "job",
    "job": "task run",
    "forum": "discussion",
    "conversation": "discussion thread",
    "board": "project",
    "subtask": "sub issue",
    "child": "sub",
    "parent": "sub",
    "button": "element",
    "element": "selector",
    "selector": "element",
    "devtools": "console",
    "console": "log",
    "favorite": "star",
    "bookmark": "star",
    "count": "number total",
    "list": "find",
    "big": "size large",
    "large": "size",
    "size": "length",
}
"""Everyday words and what they may also mean, used to expand queries at a lower weight."""

SYNONYM_WEIGHT: Final = 0.35
"""Weight of a synonym relative to the query word it came from."""

PREFIX_WEIGHT: Final = 0.5
"""Weight of an index word that a query word (4+ letters) is a prefix of."""

FIELD_WEIGHTS: Final[Mapping[str, float]] = {
    "name": 3.0,
    "server": 1.0,
    "description": 1.0,
    "params": 0.5,
}
"""How much a match in each field counts; tool names say the most about what a tool does."""

SCORER: Final[Literal["okapi", "plus"]] = "okapi"
"""Which rank_bm25 variant supplies the IDF and term-frequency formula."""

_EXACT_NAME_BONUS: Final = 1000.0
_MAX_PARAM_TOKENS: Final = 300
_MAX_SCHEMA_DEPTH: Final = 3
_MAX_ENUM_VALUES: Final = 24


@lru_cache(maxsize=1)
def _synonym_table() -> Mapping[str, tuple[str, ...]]:
    table: dict[str, tuple[str, ...]] = {}
    for word, also in SYNONYMS.items():
        key = stem(word)
        terms = tuple(dict.fromkeys(t for t in tokenize(also, keep_stop_words=True) if t != key))
        table[key] = tuple(dict.fromkeys((*table.get(key, ()), *terms)))
    return table


def _schema_text(schema: Mapping[str, Any]) -> list[str]:
    """Parameter names, descriptions and enum values of a JSON Schema, bounded in depth."""
    out: list[str] = []

    def walk(node: object, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > _MAX_SCHEMA_DEPTH:
            return
        props = node.get("properties")
        if isinstance(props, Mapping):
            for pname, pschema in props.items():
                out.append(str(pname))
                if isinstance(pschema, Mapping):
                    for key in ("title", "description"):
                        if isinstance(pschema.get(key), str):
                            out.append(pschema[key])
                    walk(pschema, depth + 1)
        enum = node.get("enum")
        if isinstance(enum, list):
            out.extend(str(v) for v in enum[:_MAX_ENUM_VALUES] if isinstance(v, str))
        items = node.get("items")
        if isinstance(items, Mapping):
            walk(items, depth + 1)
        for key in ("anyOf", "oneOf", "allOf"):
            alts = node.get(key)
            if isinstance(alts, list):
                for alt in alts[:4]:
                    walk(alt, depth + 1)

    walk(schema, 0)
    return out


def _doc_fields(doc: ToolDoc) -> dict[str, list[str]]:
    params: list[str] = []
    for text in _schema_text(doc.input_schema):
        params.extend(tokenize(text))
        if len(params) >= _MAX_PARAM_TOKENS:
            break
    return {
        "name": tokenize(doc.tool),
        "server": tokenize(doc.server),
        "description": tokenize(doc.description),
        "params": params[:_MAX_PARAM_TOKENS],
    }


# --- the index -------------------------------------------------------------------------------

_FloatArray = npt.NDArray[np.float64]
_IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class _Posting:
    doc_ids: _IntArray
    scores: _FloatArray


def _field_postings(corpus: list[list[str]], weight: float) -> dict[str, dict[int, float]]:
    """Per-term weighted BM25 contributions of one field, keyed term -> doc id -> score."""
    if not any(corpus):
        return {}  # rank_bm25 divides by the average length
    model: BM25Okapi | BM25Plus = BM25Plus(corpus) if SCORER == "plus" else BM25Okapi(corpus)
    k1, b, avgdl = model.k1, model.b, model.avgdl
    delta = float(getattr(model, "delta", 0.0))
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for doc_id, (freqs, dl) in enumerate(zip(model.doc_freqs, model.doc_len, strict=True)):
        norm = k1 * (1 - b + b * dl / avgdl)
        for term, tf in freqs.items():
            out[term][doc_id] = weight * model.idf[term] * (delta + tf * (k1 + 1) / (tf + norm))
    return out


class ToolIndex(Generic[D]):
    """A search index over one tool catalog. Immutable: rebuild it when the catalog changes.

    Building is a few milliseconds per hundred tools (see ``docs/lazy-mcp.md``), so a server
    reconnecting with a new tool list simply rebuilds (:meth:`replace_server`).
    """

    __slots__ = ("_by_name", "_by_tool", "_by_tool_lower", "_docs", "_postings", "_vocab")

    def __init__(self, docs: Sequence[D], postings: Mapping[str, _Posting]) -> None:
        """Use :meth:`build`."""
        self._docs: tuple[D, ...] = tuple(docs)
        self._postings = postings
        self._vocab: tuple[str, ...] = tuple(sorted(postings))
        self._by_name: dict[str, int] = {}
        self._by_tool: dict[str, list[int]] = defaultdict(list)
        self._by_tool_lower: dict[str, list[int]] = defaultdict(list)
        for i, doc in enumerate(self._docs):
            self._by_name.setdefault(doc.name, i)
            self._by_tool[doc.tool].append(i)
            self._by_tool_lower[doc.tool.lower()].append(i)
            self._by_tool_lower.setdefault(doc.name.lower(), []).append(i)

    @classmethod
    def build(cls, docs: Iterable[D]) -> ToolIndex[D]:
        """Index a catalog. Docs keep their order (it breaks score ties)."""
        doc_list = list(docs)
        fields = [_doc_fields(doc) for doc in doc_list]
        merged: dict[str, dict[int, float]] = defaultdict(dict)
        for fname, weight in FIELD_WEIGHTS.items():
            for term, per_doc in _field_postings([f[fname] for f in fields], weight).items():
                target = merged[term]
                for doc_id, score in per_doc.items():
                    target[doc_id] = target.get(doc_id, 0.0) + score
        postings = {
            term: _Posting(
                doc_ids=np.fromiter(per_doc.keys(), dtype=np.intp, count=len(per_doc)),
                scores=np.fromiter(per_doc.values(), dtype=np.float64, count=len(per_doc)),
            )
            for term, per_doc in merged.items()
        }
        return cls(doc_list, postings)

    def replace_server(self, server: str, docs: Iterable[D]) -> ToolIndex[D]:
        """A new index with ``server``'s tools replaced by ``docs`` (empty drops the server)."""
        kept = [d for d in self._docs if d.server != server]
        return ToolIndex.build([*kept, *docs])

    @property
    def docs(self) -> tuple[D, ...]:
        """The catalog, in build order."""
        return self._docs

    def __len__(self) -> int:
        return len(self._docs)

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
        q = query.strip().removeprefix("select:").strip().lower()
        q = re.sub(r"[\s\-]+", "_", q)
        if not q or n <= 0:
            return ()
        keys = list(self._by_tool_lower)
        matches = difflib.get_close_matches(q, keys, n=n * 3, cutoff=0.5)
        out: dict[str, None] = {}
        for key in matches:
            for i in self._by_tool_lower[key]:
                out[self._docs[i].name] = None
        return tuple(out)[:n]

    def search(self, query: str, limit: int = 5) -> SearchResult[D]:
        """Answer a ToolSearch query (keywords, ``select:`` or ``+required`` words).

        Keyword hits are the best ``limit`` tools with a positive score, best first; a
        ``select:`` query returns every tool it names, in the order given, ignoring ``limit``.
        """
        text = query.strip()
        if text[:7].lower() == "select:":
            return self._select(query, text[7:])
        return self._keywords(query, text, limit)

    def _select(self, query: str, names: str) -> SearchResult[D]:
        hits: dict[str, SearchHit[D]] = {}
        missing: list[str] = []
        for raw in names.split(","):
            name = raw.strip()
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

    def _keywords(self, query: str, text: str, limit: int) -> SearchResult[D]:
        required: list[str] = []
        optional: list[str] = []
        raw_words: list[str] = []
        for word in text.split():
            if word.startswith("+") and len(word) > 1:
                required.extend(tokenize(word[1:], keep_stop_words=True))
            else:
                optional.append(word)
                raw_words.append(word.strip(".,;:!?'\"`()[]{}<>").lower())
        weights = self._query_weights([*required, *tokenize(" ".join(optional))])
        empty: tuple[SearchHit[D], ...] = ()
        if not weights or limit <= 0 or not self._docs:
            return SearchResult(query=query, mode="keywords", hits=empty)

        scores = np.zeros(len(self._docs))
        for term, weight in weights.items():
            posting = self._postings.get(term)
            if posting is not None:
                scores[posting.doc_ids] += weight * posting.scores
        for word in raw_words:
            for i in self._by_tool_lower.get(word, ()):
                scores[i] += _EXACT_NAME_BONUS
        candidates = np.flatnonzero(scores > 0)
        for term in dict.fromkeys(required):
            posting = self._postings.get(term)
            if posting is None:
                return SearchResult(query=query, mode="keywords", hits=empty)
            candidates = np.intersect1d(candidates, posting.doc_ids, assume_unique=True)
        if candidates.size > limit:
            # partial selection, then an exact stable sort of the few that remain
            cut = np.argpartition(-scores[candidates], limit - 1)[:limit]
            candidates = np.sort(candidates[cut])
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        hits = tuple(SearchHit(doc=self._docs[i], score=float(scores[i])) for i in order)
        return SearchResult(query=query, mode="keywords", hits=hits)

    def _query_weights(self, terms: Iterable[str]) -> dict[str, float]:
        """Query terms with their weights, after synonym and prefix expansion."""
        weights: dict[str, float] = {}

        def put(term: str, weight: float) -> None:
            if weights.get(term, 0.0) < weight:
                weights[term] = weight

        originals = list(dict.fromkeys(terms))
        for term in originals:
            # a word repeated in the query counts once: queries are short, repeats are noise
            put(term, 1.0)
        synonyms = _synonym_table()
        for term in originals:
            for extra in synonyms.get(term, ()):
                put(extra, SYNONYM_WEIGHT)
            if len(term) >= 4:
                for extra in self._with_prefix(term):
                    put(extra, PREFIX_WEIGHT)
        return weights

    def _with_prefix(self, prefix: str) -> list[str]:
        import bisect

        start = bisect.bisect_right(self._vocab, prefix)
        out: list[str] = []
        for term in self._vocab[start : start + 64]:
            if not term.startswith(prefix):
                break
            out.append(term)
        return out


def format_no_match(query: str, index: ToolIndex[Any], *, n: int = 5) -> str:
    """The text ToolSearch returns when nothing matched: closest names and the servers."""
    lines = [f"No MCP tools matched '{query}'."]
    closest = index.closest_names(query, n)
    if closest:
        lines.append("Closest tool names: " + ", ".join(closest))
    servers = index.server_counts()
    if servers:
        listing = ", ".join(f"{s} ({c} tool{'s' if c != 1 else ''})" for s, c in servers)
        lines.append("Servers: " + listing)
    else:
        lines.append("No MCP servers are connected.")
    return "\n".join(lines)
