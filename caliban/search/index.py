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

How ranking works (measured choices are explained in ``docs/lazy-mcp.md``):

* Every tool has four fields: its tool name, its server name, its description and its
  parameters (names, descriptions and enum values, recursing a little into nested schemas).
  Identifiers are split on ``_ - .``, camelCase and digits; text is lower-cased, stop words
  dropped and words lightly stemmed (:func:`stem`).
* Fields are weighted (:class:`RankingParams`); ``rank_bm25`` supplies IDF and the
  term-frequency formula. Term scores do not depend on the query, so they are computed once
  at build time into an inverted index and a query only adds up a few sparse vectors.
* Query words are expanded at a lower weight: everyday phrases and synonyms
  (:data:`PHRASES`, :data:`SYNONYMS`) and index words sharing a long prefix (``repo`` finds
  ``repository``), so a user's words can meet a tool's words.
* The action layer: a request that starts with a verb (after filler such as "could you
  please") asks for an action (:data:`QUERY_ACTIONS`: ``open a PR`` → create or read,
  ``file a bug`` → create), and the first verb of a tool's name says what the tool does
  (:data:`TOOL_ACTIONS`: ``create_pull_request`` → create). Tools that agree score
  ``1 + action_boost`` times more, tools whose name does something else that much less,
  and tools whose name has no verb (``kubectl_context``) are left alone. The leading verb
  itself counts less as a search word (``action_verb_weight``), since its action matters
  more than its spelling. Questions ("who changed ...") have no leading verb.
"""

from __future__ import annotations

import bisect
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
    "DEFAULT_PARAMS",
    "PHRASES",
    "QUERY_ACTIONS",
    "STOP_WORDS",
    "SYNONYMS",
    "TOOL_ACTIONS",
    "RankingParams",
    "SearchDoc",
    "SearchHit",
    "SearchResult",
    "ToolDoc",
    "ToolIndex",
    "format_no_match",
    "request_verb",
    "stem",
    "tokenize",
    "tool_actions",
    "words",
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
    a about above across after again against all am an and any anything are as at be because
    been before being below between both but by can could did do does doing down during each
    etc eg everything few for from further had has have having he her here hers him his how i
    ie if in inside into is it its itself just me might more most must my myself no nor not
    nothing now of off on once only onto or other ought our ours out over own please same
    shall she should so some someone something somewhere such than that the their theirs them
    then there these they this those through to too under until up upon very was we were what
    whats when where which while who whom whose why will with within would you your yours
    yourself also via using use used uses let lets want wants need needs like help tell give
    gives able may maybe thing things one ones kind sure actually really quick quickly
    mcp tool tools
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Words that carry no meaning for finding a tool (query filler and schema boilerplate)."""

_WORD = re.compile(r"[^\W_]+")
# "PRs"/"URLs" -> "PR"/"URL" (+ a dropped "s"); "HTTPServer" -> "HTTP", "Server"
_CAMEL = re.compile(r"[A-Z]{2,}(?=s(?![a-z]))|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_VOWELS = frozenset("aeiouy")
_KEEP_S = ("ss", "us", "is")
_NO_ED = frozenset({"embed", "need", "speed", "feed", "seed", "shred", "shed"})


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
    if w.endswith(("ies", "ied")) and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(_KEEP_S):
        w = w[:-1]
    elif w.endswith("ing") and len(w) >= 6 and _has_vowel(w[:-3]):
        w = _undouble(w[:-3])
    elif w.endswith("ed") and len(w) >= 5 and w not in _NO_ED and _has_vowel(w[:-2]):
        w = _undouble(w[:-2])
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def _undouble(s: str) -> str:
    # running -> runn -> run; but keep fill, pass, buzz
    if len(s) >= 3 and s[-1] == s[-2] and s[-1] not in "aeiouylsz":
        return s[:-1]
    return s


@lru_cache(maxsize=65536)
def _split_chunk(chunk: str) -> tuple[str, ...]:
    """Lower-case words of one alphanumeric run; camelCase also yields the joined word."""
    if not chunk.isascii() or len(chunk) > 64:
        return (chunk.lower(),)  # long runs are data (hashes, base64), not identifiers
    parts = [p.lower() for p in _CAMEL.findall(chunk)] or [chunk.lower()]
    if sum(len(p) > 1 for p in parts) > 1 and not chunk.isupper() and not chunk.islower():
        # "GitHub" is also "github", "JavaScript" also "javascript": index both readings
        joined = "".join(p for p in parts if not p.isdigit())
        if joined not in parts:
            parts.append(joined)
    return tuple(parts)


def words(text: str) -> list[str]:
    """Split text or an identifier into lower-case words (``_ - .``, camelCase, digits).

    A camelCase word yields its parts and then the whole word (``GitHub`` → ``git``, ``hub``,
    ``github``).
    """
    out: list[str] = []
    for chunk in _WORD.findall(text):
        out.extend(_split_chunk(chunk))
    return out


def tokenize(text: str, *, keep_stop_words: bool = False) -> list[str]:
    """Normalise text to index terms: split, lower-case, drop stop words, stem."""
    return [stem(w) for w in words(text) if len(w) > 1 and (keep_stop_words or w not in STOP_WORDS)]


# --- query expansion -------------------------------------------------------------------------


def _parse_table(text: str, sep: str | None = None) -> dict[str, str]:
    """Parse ``key key: meaning`` lines (keys split on ``sep``, default whitespace)."""
    table: dict[str, str] = {}
    for line in text.strip().splitlines():
        keys, _, also = line.partition(":")
        for key in (k.strip() for k in keys.split(sep)):
            table[key] = f"{table.get(key, '')} {also.strip()}".strip()
    return table


SYNONYMS: Final[Mapping[str, str]] = _parse_table(
    # "words: what they may also mean". One-way: list both directions where it goes both
    # ways. Generic developer and user vocabulary only, not tuned to particular queries.
    """
    pr prs mr: pull request
    repo repos: repository
    org orgs: organization
    ticket bug: issue
    issue: ticket bug
    delete: remove
    remove: delete
    erase drop destroy trash forget rm purge wipe: delete remove
    find: search list
    search: find
    lookup locate grep query: search find
    show display see: get list view
    view: get read show
    fetch: get retrieve download
    retrieve: get fetch
    read: get view
    get: read retrieve
    ls: list directory
    cat: read file
    enumerate: list
    file: path
    path: file
    document: file
    doc docs: document file documentation
    folder dir: directory
    directory: folder
    mkdir: create directory
    mv: move
    cp: copy
    rename: move name
    commit: change
    change changes: commit modify update edit diff
    modify: edit update change
    edit: modify update change
    update: edit modify
    alter tweak fix: edit modify update
    create: new add
    make: create
    new: create
    add: create sum
    open: create read view
    start begin: create
    write: save
    save: write store
    store: save write
    remember memorize: memory save store
    recall: memory search
    diff: difference compare
    compare different difference: diff
    history: log commit
    log: history
    annotate: blame
    stage: add
    unstage: reset
    undo rollback revert: reset revert
    screenshot: capture screen
    capture: screenshot
    snapshot: screenshot capture
    webpage: page url browser web
    website: site page url web
    site: website page url
    web internet online: web internet
    google: search web
    link: url relation
    url: link
    visit browse go: navigate open
    timezone: time zone
    tz: timezone
    clock hour: time
    translate: convert
    email: mail
    mail: email
    message: msg
    msg: message
    copy: duplicate
    duplicate dupe: copy duplicate
    upload: push write
    push: upload
    download: fetch get
    run: execute trigger
    execute exec: run execute
    trigger: run
    launch: start run
    js: javascript
    script: javascript
    click: press
    press tap: click press
    keystroke shortcut keyboard: key press
    type enter: fill input
    fill: type enter input
    field form textbox: input field
    dropdown: select option
    choose pick: select
    mouse mouseover: hover
    iframe: frame
    frame embedded: iframe frame
    tab: window
    window: tab
    api: http request endpoint
    endpoint: url api
    rest: http api
    submit: post send
    send: post submit
    record recording: capture
    wait sleep delay: wait delay sleep
    label: tag
    tag: label
    user person people member: user member
    teammate colleague coworker collaborator: member user
    account profile: user profile account
    login signin: authenticate authenticated user
    assign: assignee
    assignee: assign
    reply respond: comment reply
    feedback: comment review
    note: comment observation
    fact: observation
    approve: review
    notification: notify alert
    notify: notification
    inbox: notification
    vulnerability vuln cve: security advisory vulnerability alert
    security: vulnerability
    credential password token leak: secret credential token
    dependency dep deps package library: dependency package library
    ci pipeline: workflow action build pipeline
    build: workflow
    release: version
    version: release tag
    snippet paste: gist code
    source src: code source
    tree: structure hierarchy
    structure hierarchy recursive: tree
    info information metadata detail stat stats: info information metadata detail
    relationship relation connection: relation relationship
    sum total plus: add sum total
    env: environment variable
    picture photo img png jpg jpeg gif svg: image
    audio sound mp3 wav: audio media
    scrape: crawl extract
    crawl spider: crawl scrape
    sitemap: map site url
    share ticker: stock symbol
    quote cost worth: price value
    content: text body
    body: content text description
    description: body
    text: content
    subject: title
    latest recent last newest: latest recent last newest
    author: user owner
    land combine: merge
    subscribe watch follow: subscription subscribe watch
    unsubscribe mute: subscription ignore
    ignore dismiss: ignore dismiss
    cancel stop abort: cancel stop abort
    retry rerun: rerun retry run
    task: job
    job: task run
    forum conversation: discussion thread
    board kanban: project
    subtask: sub issue
    child parent: sub
    button: element
    element selector: element selector
    devtools: console
    console: log
    favorite bookmark: star
    count: number total
    list: find
    big large space: size
    size: length
    readme: file documentation
    article news: content web page news
    """
)
"""Everyday words and what they may also mean, used to expand queries at a lower weight."""

PHRASES: Final[Mapping[str, str]] = _parse_table(
    """
    logged in|log in|signed in|sign in: authenticated login user
    log out|sign out: logout
    sign up: register create account
    time zone: timezone
    look over|look at: view review read
    look for|look up|search for: search find
    look into|find out: get search
    check out: checkout switch
    set up: create configure
    clean up: delete remove
    up to date: update sync
    working copy|working directory|working tree: working tree status
    mouse over|hover over: hover
    screen shot: screenshot
    web page: webpage page
    how many: count number
    turn on|turn off|switch on|switch off: toggle enable disable
    go back: undo revert
    who changed|who wrote|who touched|who modified|who added: blame author history
    who last changed|who last touched|who last edited|who last modified: blame author history
    """,
    sep="|",
)
"""Everyday multi-word phrases and what they mean, added to a query that contains them."""

Action = Literal["create", "read", "list", "search", "update", "delete", "run"]

QUERY_ACTIONS: Final[Mapping[str, str]] = _parse_table(
    # "actions: verbs a request starts with". A verb may mean more than one action ("open a
    # PR" creates, "open the file" reads); a tool whose name does any of them is favoured.
    """
    create: create new add open file make start submit raise report post write book schedule
    create: draft insert register put compose send remind log
    read: get read show view fetch display describe inspect open check look retrieve download
    read: print cat see
    list: list ls enumerate browse show find search
    search: search find lookup locate query grep show list
    update: update edit modify change set rename patch fix bump move assign mark tick close
    update: reschedule switch resolve reopen transition rewrite
    delete: delete remove rm erase drop cancel purge destroy uninstall trash
    run: run execute exec trigger launch deploy rerun restart apply
    """
)
"""Which action a request means when it starts with a verb (``open a PR`` → create, read)."""

TOOL_ACTIONS: Final[Mapping[str, str]] = _parse_table(
    # "actions: verbs tool names use". The first such word of a name says what the tool does.
    """
    create: create add new post insert write send make draft register
    read: get read retrieve fetch describe show view download open
    list: list ls
    search: search find query lookup
    update: update edit modify patch set rename move change assign write transition upgrade
    update: close reopen resolve mark
    delete: delete remove uninstall drop clear
    run: run execute exec trigger apply install
    """
)
"""Which actions a tool does, by the first verb of its name (``create_issue`` → create)."""

_FILLER: Final = frozenset(
    # words that may come before a request's verb: "hey, could you please open ..."
    """
    hey hi hello ok okay so just now please kindly can could would will you go ahead and i
    id d want wanna need to like let lets us me help quickly also then
    """.split()  # noqa: SIM905 - a word list reads better as text
)

FieldName = Literal["name", "server", "description", "params"]


@dataclass(frozen=True, kw_only=True)
class RankingParams:
    """Knobs of the ranking; the defaults are what ``benchmarks/search_quality.py`` chose."""

    field_weights: Mapping[FieldName, float] = field(
        default_factory=lambda: {"name": 1.0, "server": 1.0, "description": 1.0, "params": 0.3}
    )
    """How much a match in each field counts."""
    combine: Literal["sum", "bm25f"] = "sum"
    """``sum``: a separate BM25 per field, weighted scores added up; ``bm25f``: weighted term
    frequencies of all fields share one saturation and one document-level IDF."""
    scorer: Literal["okapi", "plus"] = "plus"
    """Which rank_bm25 variant supplies the IDF (and, for ``plus``, the delta)."""
    k1: float = 1.2
    b: float = 0.75
    synonym_weight: float = 0.6
    """Weight of a synonym of a query word the index knows (0 turns synonyms off)."""
    unknown_synonym_weight: float = 1.0
    """Weight of a synonym of a query word no tool uses: it stands in for that word."""
    phrase_weight: float = 1.0
    """Weight of the words a recognised phrase (:data:`PHRASES`) adds."""
    prefix_weight: float = 0.5
    """Weight of index words sharing a query word's first letters (0 turns this off)."""
    prefix_letters: int = 6
    """Index words must share this many first letters (or the whole query word if shorter,
    at least 4) with a query word to count as its prefix relatives."""
    action_boost: float = 0.3
    """A tool whose name does the action a request's leading verb asks for scores this much
    more (0.3: 30 %); 0 turns the action layer off."""
    action_verb_weight: float = 0.7
    """Weight of a request's leading verb as an ordinary search word: its action matters more
    than its spelling (``file a bug`` is not about files)."""


DEFAULT_PARAMS: Final = RankingParams()

_EXACT_NAME_BONUS: Final = 1000.0
_ANY_ACTION: Final = "*"
_MAX_PARAM_TOKENS: Final = 300
_MAX_SCHEMA_DEPTH: Final = 3
_MAX_ENUM_VALUES: Final = 24
_MAX_PREFIX_RELATIVES: Final = 32
_PUNCT: Final = ".,;:!?'\"`()[]{}<>"
# a word that names a tool rather than says something: read_file, get-sum, getFileInfo
# (alphanumeric runs joined by "_", "__" or "-": unambiguous, so no catastrophic backtracking)
_IDENTIFIER: Final = re.compile(r"[^\W_]+(?:(?:__?|-)[^\W_]+)+|[a-z]+(?:[A-Z][a-z0-9]*)+")
_URL: Final = re.compile(
    r"(?:https?://|www\.)\S+|[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|app|co|edu|gov)(?:/\S*)?",
    re.IGNORECASE,
)
_FILE_EXTENSIONS: Final = frozenset(
    """
    txt md rst json jsonl yaml yml toml ini cfg conf env log csv tsv xml html htm css scss
    js jsx ts tsx mjs py rb go rs java kt c h cc cpp hpp cs php sh bash zsh ps1 sql lock
    pdf doc docx xls xlsx ppt pptx png jpg jpeg gif svg webp mp3 wav mp4 zip gz tar
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _shape_terms(word: str) -> tuple[str, ...]:
    """Terms implied by a word's shape: a URL means a page, ``notes.txt`` means a file."""
    if _URL.fullmatch(word):
        return (stem("url"),)
    stem_, dot, ext = word.rpartition(".")
    if dot and stem_ and ext.lower() in _FILE_EXTENSIONS:
        return (stem("file"),)
    if "/" in word.strip("/"):
        return (stem("path"),)
    return ()


@lru_cache(maxsize=1)
def _synonym_table() -> Mapping[str, tuple[str, ...]]:
    table: dict[str, tuple[str, ...]] = {}
    for word, also in SYNONYMS.items():
        for key in tokenize(word, keep_stop_words=True):
            terms = (t for t in tokenize(also, keep_stop_words=True) if t != key)
            table[key] = tuple(dict.fromkeys((*table.get(key, ()), *terms)))
    return table


@lru_cache(maxsize=1)
def _phrase_table() -> tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]:
    return tuple(
        (re.compile(rf"\b{re.escape(phrase)}\b"), tuple(tokenize(also, keep_stop_words=True)))
        for phrase, also in PHRASES.items()
    )


@lru_cache(maxsize=2)
def _action_table(table: str) -> Mapping[str, frozenset[str]]:
    """Verb (stemmed) → the actions it may mean, from :data:`QUERY_ACTIONS` or
    :data:`TOOL_ACTIONS`."""
    source = QUERY_ACTIONS if table == "query" else TOOL_ACTIONS
    out: dict[str, set[str]] = defaultdict(set)
    for action, verbs in source.items():
        for verb in verbs.split():
            out[stem(verb)].add(action)
    return {verb: frozenset(actions) for verb, actions in out.items()}


def tool_actions(tool: str) -> frozenset[str]:
    """What a tool does, by the first verb in its name (``issue_write`` → create, update)."""
    table = _action_table("tool")
    for w in words(tool):
        actions = table.get(stem(w))
        if actions:
            return actions
    return frozenset()


def request_verb(text: str) -> tuple[str, frozenset[str]] | None:
    """The verb a request starts with and the actions it may mean, if it starts with one.

    Leading filler (``hey, could you please``) is skipped; a question (``who changed``,
    ``what did I change``) or a request starting with a noun has no verb.
    """
    table = _action_table("query")
    for w in words(text):
        if w in _FILLER:
            continue
        actions = table.get(stem(w))
        return (stem(w), actions) if actions else None
    return None


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


@lru_cache(maxsize=65536)
def _terms(text: str) -> tuple[str, ...]:
    # catalogs repeat texts ("Repository owner") and rebuilds re-see them: tokenize once
    return tuple(tokenize(text))


def _doc_fields(doc: ToolDoc) -> dict[FieldName, list[str]]:
    params: list[str] = []
    for text in _schema_text(doc.input_schema):
        params.extend(_terms(text))
        if len(params) >= _MAX_PARAM_TOKENS:
            break
    return {
        "name": list(_terms(doc.tool)),
        # a server may be named with a stop word ("everything"); keep it findable
        "server": tokenize(doc.server, keep_stop_words=True),
        "description": list(_terms(doc.description)),
        "params": params[:_MAX_PARAM_TOKENS],
    }


# --- the index -------------------------------------------------------------------------------

_FloatArray = npt.NDArray[np.float64]
_IntArray = npt.NDArray[np.intp]
_FIELDS: Final[tuple[FieldName, ...]] = ("name", "server", "description", "params")


_NO_IDS: Final[_IntArray] = np.zeros(0, dtype=np.intp)


@dataclass(frozen=True, slots=True)
class _Posting:
    doc_ids: _IntArray
    scores: _FloatArray


def _bm25_model(corpus: list[list[str]], params: RankingParams) -> BM25Okapi | BM25Plus:
    if params.scorer == "plus":
        return BM25Plus(corpus, k1=params.k1, b=params.b)
    return BM25Okapi(corpus, k1=params.k1, b=params.b)


def _postings_sum(
    fields: Sequence[Mapping[FieldName, list[str]]], params: RankingParams
) -> dict[str, dict[int, float]]:
    """A separate BM25 per field (statistics from rank_bm25), weighted and added up."""
    merged: dict[str, dict[int, float]] = defaultdict(dict)
    for fname in _FIELDS:
        weight = params.field_weights.get(fname, 0.0)
        corpus = [f[fname] for f in fields]
        if weight <= 0 or not any(corpus):
            continue  # rank_bm25 divides by the average length
        model = _bm25_model(corpus, params)
        k1, b, avgdl = model.k1, model.b, model.avgdl
        delta = float(getattr(model, "delta", 0.0))
        for doc_id, (freqs, dl) in enumerate(zip(model.doc_freqs, model.doc_len, strict=True)):
            norm = k1 * (1 - b + b * dl / avgdl)
            for term, tf in freqs.items():
                score = weight * model.idf[term] * (delta + tf * (k1 + 1) / (tf + norm))
                merged[term][doc_id] = merged[term].get(doc_id, 0.0) + score
    return merged


def _postings_bm25f(
    fields: Sequence[Mapping[FieldName, list[str]]], params: RankingParams
) -> dict[str, dict[int, float]]:
    """BM25F: per-field length-normalised, weighted term frequencies share one saturation.

    rank_bm25 supplies the document-level IDF (over all fields together) and ``k1``; each
    field is length-normalised against its own average length.
    """
    model = _bm25_model([[t for fname in _FIELDS for t in f[fname]] for f in fields], params)
    k1, b = model.k1, model.b
    delta = float(getattr(model, "delta", 0.0))
    pseudo_tf: dict[str, dict[int, float]] = defaultdict(dict)
    for fname in _FIELDS:
        weight = params.field_weights.get(fname, 0.0)
        lengths = [len(f[fname]) for f in fields]
        total = sum(lengths)
        if weight <= 0 or total == 0:
            continue
        avg = total / len(fields)
        for doc_id, f in enumerate(fields):
            if not f[fname]:
                continue
            scale = weight / (1 - b + b * lengths[doc_id] / avg)
            for term, tf in Counter(f[fname]).items():
                target = pseudo_tf[term]
                target[doc_id] = target.get(doc_id, 0.0) + tf * scale
    return {
        term: {
            doc_id: model.idf[term] * (delta + tf * (k1 + 1) / (tf + k1))
            for doc_id, tf in per_doc.items()
        }
        for term, per_doc in pseudo_tf.items()
    }


@dataclass(frozen=True, slots=True)
class _Query:
    weights: dict[str, float]
    required: tuple[str, ...]
    identifiers: tuple[str, ...]
    """Query words shaped like tool names (``read_file``), lower-cased."""
    actions: frozenset[str] = frozenset()
    """What the request's leading verb asks for (see :func:`request_verb`)."""


class ToolIndex(Generic[D]):
    """A search index over one tool catalog. Immutable: rebuild it when the catalog changes.

    Building costs a few milliseconds per hundred tools (see ``docs/lazy-mcp.md``), so a
    server reconnecting with a new tool list simply rebuilds (:meth:`replace_server`).
    """

    __slots__ = (
        "_action_docs",
        "_by_name",
        "_by_tool",
        "_by_tool_lower",
        "_docs",
        "_params",
        "_postings",
        "_vocab",
    )

    def __init__(
        self, docs: Sequence[D], postings: Mapping[str, _Posting], params: RankingParams
    ) -> None:
        """Use :meth:`build`."""
        self._docs: tuple[D, ...] = tuple(docs)
        self._postings = postings
        self._params = params
        self._vocab: tuple[str, ...] = tuple(sorted(postings))
        self._by_name: dict[str, int] = {}
        self._by_tool: dict[str, list[int]] = defaultdict(list)
        self._by_tool_lower: dict[str, list[int]] = defaultdict(list)
        for i, doc in enumerate(self._docs):
            self._by_name.setdefault(doc.name, i)
            self._by_tool[doc.tool].append(i)
            self._by_tool_lower[doc.tool.lower()].append(i)
            self._by_tool_lower[doc.name.lower()].append(i)
        by_action: dict[str, list[int]] = defaultdict(list)
        for i, doc in enumerate(self._docs):
            for action in tool_actions(doc.tool):
                by_action[action].append(i)
            if tool_actions(doc.tool):
                by_action[_ANY_ACTION].append(i)
        self._action_docs: dict[str, _IntArray] = {
            action: np.array(ids, dtype=np.intp) for action, ids in by_action.items()
        }
        self._action_docs.setdefault(_ANY_ACTION, _NO_IDS)

    @classmethod
    def build(cls, docs: Iterable[D], *, params: RankingParams = DEFAULT_PARAMS) -> ToolIndex[D]:
        """Index a catalog. Docs keep their order (it breaks score ties)."""
        doc_list = list(docs)
        fields = [_doc_fields(doc) for doc in doc_list]
        if not doc_list:
            merged: dict[str, dict[int, float]] = {}
        elif params.combine == "sum":
            merged = _postings_sum(fields, params)
        else:
            merged = _postings_bm25f(fields, params)
        postings = {
            term: _Posting(
                doc_ids=np.fromiter(per_doc.keys(), dtype=np.intp, count=len(per_doc)),
                scores=np.fromiter(per_doc.values(), dtype=np.float64, count=len(per_doc)),
            )
            for term, per_doc in merged.items()
        }
        return cls(doc_list, postings, params)

    def replace_server(self, server: str, docs: Iterable[D]) -> ToolIndex[D]:
        """A new index with ``server``'s tools replaced by ``docs`` (empty drops the server)."""
        kept = [d for d in self._docs if d.server != server]
        return ToolIndex.build([*kept, *docs], params=self._params)

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

    def _keywords(self, query: str, text: str, limit: int) -> SearchResult[D]:
        parsed = self._parse(text)
        empty: tuple[SearchHit[D], ...] = ()
        if not parsed.weights or limit <= 0 or not self._docs:
            return SearchResult(query=query, mode="keywords", hits=empty)

        scores = np.zeros(len(self._docs))
        for term, weight in parsed.weights.items():
            posting = self._postings.get(term)
            if posting is not None:
                scores[posting.doc_ids] += weight * posting.scores
        if parsed.actions and self._params.action_boost > 0:
            # a tool whose name does what was asked gains, one that does something else
            # loses, one whose name has no verb (kubectl_context) stays as it was
            factor = 1.0 + self._params.action_boost
            agree = np.unique(
                np.concatenate([self._action_docs.get(a, _NO_IDS) for a in sorted(parsed.actions)])
            )
            scores[self._action_docs[_ANY_ACTION]] /= factor
            scores[agree] *= factor * factor
        for word in parsed.identifiers:
            for i in self._by_tool_lower.get(word, ()):
                scores[i] += _EXACT_NAME_BONUS
        candidates = np.flatnonzero(scores > 0)
        for term in parsed.required:
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

    def _parse(self, text: str) -> _Query:
        """Weighted query terms (with expansions), required terms and tool-name-like words."""
        p = self._params
        weights: dict[str, float] = {}

        def put(term: str, weight: float) -> None:
            if weight > 0 and weights.get(term, 0.0) < weight:
                weights[term] = weight

        required: list[str] = []
        originals: list[str] = []
        identifiers: list[str] = []
        # a query of nothing but stop words ("everything", a server's name) keeps them
        keep_all = not tokenize(text.replace("+", " "))
        for word in text.split():
            is_required = word.startswith("+") and len(word) > 1
            word = word.removeprefix("+") if is_required else word
            bare = word.strip(_PUNCT)
            if _IDENTIFIER.fullmatch(bare):
                identifiers.append(bare.lower())
            for term in _shape_terms(bare):
                put(term, p.phrase_weight)
            for chunk in _WORD.findall(word):
                keep = is_required or keep_all
                for term, weight in self._chunk_terms(chunk, keep_stop_words=keep):
                    put(term, weight)
                    if weight == 1.0:
                        originals.append(term)
                        if is_required:
                            required.append(term)

        lowered = " ".join(words(text))
        in_phrase: set[str] = set()  # a phrase's own words: it says what they mean together
        for pattern, terms in _phrase_table():
            if match := pattern.search(lowered):
                in_phrase.update(tokenize(match.group(0)))
                for term in terms:
                    put(term, p.phrase_weight)

        verb = request_verb(text) if p.action_boost > 0 else None
        if verb is not None and weights.get(verb[0]) == 1.0 and len(weights) > 1:
            weights[verb[0]] = p.action_verb_weight

        synonyms = _synonym_table()
        for term in dict.fromkeys(originals):
            if term in in_phrase:
                continue
            known = term in self._postings
            for extra in synonyms.get(term, ()):
                put(extra, p.synonym_weight if known else p.unknown_synonym_weight)
            for extra in self._prefix_relatives(term):
                put(extra, p.prefix_weight)
        return _Query(
            weights=weights,
            required=tuple(dict.fromkeys(required)),
            identifiers=tuple(identifiers),
            actions=verb[1] if verb is not None else frozenset(),
        )

    def _chunk_terms(self, chunk: str, *, keep_stop_words: bool) -> list[tuple[str, float]]:
        """Terms of one query word; a camelCase word the index knows whole ranks whole."""
        parts = [
            w
            for w in _split_chunk(chunk)
            if len(w) > 1 and (keep_stop_words or w not in STOP_WORDS)
        ]
        if len(parts) > 1 and not chunk.islower() and not chunk.isupper():
            joined = stem(parts[-1])
            if joined in self._postings:
                # "GitHub" means github, not git + hub
                return [(joined, 1.0)] + [
                    (stem(w), self._params.synonym_weight) for w in parts[:-1]
                ]
            parts = parts[:-1]
        return [(stem(w), 1.0) for w in parts]

    def _prefix_relatives(self, term: str) -> list[str]:
        """Index words sharing the term's first letters (``repo`` → ``repository``)."""
        n = self._params.prefix_letters
        if self._params.prefix_weight <= 0 or len(term) < 4 or not term.isalpha():
            return []
        key = term[:n]
        start = bisect.bisect_left(self._vocab, key)
        out: list[str] = []
        for candidate in self._vocab[start : start + _MAX_PREFIX_RELATIVES]:
            if not candidate.startswith(key):
                break
            if candidate != term:
                out.append(candidate)
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
