"""Tests for ToolSearch ranking over a small, realistic MCP catalog (BM25 + the shipped model)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hang import HANG_S, cpu_time
from snowballstemmer.english_stemmer import EnglishStemmer

from caliban.mcp.lazy.tool_search import no_match_text, unmatched
from caliban.search import text
from caliban.search.dense import DenseEncoder
from caliban.search.index import Ranking, SearchDoc, ToolIndex
from caliban.search.text import stem, tokenize, words


def _doc(server: str, tool: str, description: str, **params: str) -> SearchDoc:
    return SearchDoc(
        name=f"mcp__{server}__{tool}",
        server=server,
        tool=tool,
        description=description,
        input_schema={
            "type": "object",
            "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
        },
    )


CATALOG = [
    _doc(
        "github",
        "create_pull_request",
        "Create a new pull request in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
        title="PR title",
        head="Branch containing changes",
        base="Branch to merge into",
    ),
    _doc(
        "github",
        "list_pull_requests",
        "List pull requests in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
        state="Filter by state",
    ),
    _doc(
        "github",
        "merge_pull_request",
        "Merge a pull request in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
        pullNumber="Pull request number",
    ),
    _doc(
        "github",
        "create_pull_request_review",
        "Create a review on a pull request: approve, request changes or comment.",
        owner="Repository owner",
        repo="Repository name",
        event="Review action to perform",
    ),
    _doc(
        "github",
        "create_issue",
        "Create a new issue in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
        title="Issue title",
        body="Issue body content",
    ),
    _doc(
        "github",
        "get_file_blame",
        "Get Git blame information for a file, showing who last modified each line.",
        owner="Repository owner",
        repo="Repository name",
        path="Path to the file",
    ),
    _doc(
        "github",
        "list_branches",
        "List branches in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
    ),
    _doc(
        "filesystem",
        "read_file",
        "Read the complete contents of a file from the file system.",
        path="Path of the file to read",
    ),
    _doc(
        "filesystem",
        "write_file",
        "Create a new file or completely overwrite an existing file with new content.",
        path="Path of the file to write",
        content="Text to write",
    ),
    _doc(
        "filesystem",
        "list_directory",
        "Get a detailed listing of all files and directories in a specified path.",
        path="Directory path",
    ),
    _doc("files", "read_file", "Read a file from the local disk.", path="File path"),
    _doc("git", "git_branch", "List Git branches.", repo_path="Path to the Git repository"),
    _doc(
        "git",
        "git_show",
        "Shows the contents of a commit.",
        repo_path="Path to the Git repository",
        revision="The revision (commit hash, branch or tag name)",
    ),
    _doc(
        "time",
        "get_current_time",
        "Get current time in a specific timezone.",
        timezone="IANA timezone name, e.g. 'Europe/Warsaw'",
    ),
    _doc(
        "everything",
        "getTinyImage",
        "Returns the MCP logo.",
    ),
    _doc(
        "browser",
        "playwright_navigate",
        "Navigate to a URL in the browser.",
        url="URL to open",
    ),
]


@pytest.fixture(scope="module")
def index() -> ToolIndex[SearchDoc]:
    return ToolIndex.build(CATALOG)


def top(index: ToolIndex[SearchDoc], query: str, limit: int = 5) -> list[str]:
    return list(index.search(query, limit).names)


# --- normalisation ---------------------------------------------------------------------------


def test_words_split_identifiers_on_separators_camel_case_and_digits() -> None:
    assert words("create_pull-request.v2") == ["create", "pull", "request", "v", "2"]
    assert words("getTinyImage") == ["get", "tiny", "image", "gettinyimage"]
    assert words("HTTPServer") == ["http", "server", "httpserver"]
    assert words("open PRs and URLs") == ["open", "pr", "s", "and", "url", "s"]
    assert words("GitHub") == ["git", "hub", "github"]


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        (["create", "creates", "created", "creating"], "creat"),
        (["commit", "commits", "committed", "committing"], "commit"),
        (["branch", "branches"], "branch"),
        (["repository", "repositories"], "repositori"),
        (["list", "lists", "listed", "listing"], "list"),
        (["file", "files"], "file"),
    ],
)
def test_stemming_merges_inflections(variants: list[str], expected: str) -> None:
    assert {stem(v) for v in variants} == {expected}


def test_stemming_leaves_short_and_special_words_alone() -> None:
    assert stem("pr") == "pr"
    assert stem("status") == "status"
    assert stem("access") == "access"
    assert stem("string") == "string"  # not a verb in -ing


def test_stems_come_from_the_c_stemmer_and_match_the_pure_one() -> None:
    # PyStemmer (C) stems a new catalog's words ~6x faster; an index built with one must
    # answer queries stemmed by the other (the pure fallback), so the two must agree
    assert type(text._STEMMER).__module__ == "Stemmer"
    catalog = Path(__file__).parent.parent / "benchmarks" / "reference_tools.json"
    vocabulary = sorted(set(words(catalog.read_text())) | {"naïve", "café", "größe", "ǅemal"})
    pure = EnglishStemmer()
    assert [stem(w) for w in vocabulary] == [pure.stemWord(w) for w in vocabulary]
    assert len(vocabulary) > 500


def test_tokenize_drops_stop_words() -> None:
    assert tokenize("Please show me the files in this repo") == ["show", "file", "repo"]


# --- ranking ---------------------------------------------------------------------------------


def test_create_a_pull_request_ranks_create_pull_request_first(
    index: ToolIndex[SearchDoc],
) -> None:
    result = index.search("create a pull request", 5)
    assert result.mode == "keywords"
    # create_pull_request_review says "request" once more; rewarding a query that names a
    # tool's whole name cost hit@5 on ToolLens and the task sets (docs/lazy-mcp.md)
    assert "mcp__github__create_pull_request" in result.names[:2]
    assert result.missing_names == ()
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)


def test_a_word_repeated_in_the_query_counts_once() -> None:
    # a pasted request often repeats its topic word; the other words must still decide
    index = ToolIndex.build(
        [
            _doc("gh", "list_issues", "List issues of a repository by state, label or assignee."),
            _doc("gh", "list_comments", "List the comments on a pull request."),
            _doc("gh", "create_branch", "Create a branch."),
        ],
        embedder=None,
    )
    assert top(index, "issue issue issue: the comments")[0] == "mcp__gh__list_comments"


def test_a_query_phrase_in_a_tool_name_lifts_that_tool_a_bounded_step() -> None:
    docs = [
        _doc("gh", "list_issues", "List issues of a repository."),
        _doc("gh", "list_issue_types", "List the issue types of an organisation."),
        _doc("gh", "create_issue", "Create an issue; list labels with list_labels."),
        _doc("gh", "label_issue", "Add labels to an issue."),
        _doc("gh", "get_me", "Details of the authenticated user."),
    ]
    query = "list issues by label"  # terms: list, issu, label

    def scores(ranking: Ranking, embedder: Any = "default") -> dict[str, float]:
        index = ToolIndex.build(docs, embedder=embedder, ranking=ranking)
        return {hit.doc.tool: hit.score for hit in index.search(query, 5).hits}

    with_bonus, without = scores(Ranking()), scores(Ranking(name_phrase=0.0))
    # "list issue" is 2 of the query's 3 terms, in the query's order, consecutive in the name
    for tool in ("list_issues", "list_issue_types"):
        assert with_bonus[tool] - without[tool] == pytest.approx(0.5 * 2 / 3)
    # words out of order ("label issue") or not consecutive in the query get nothing
    for tool in ("create_issue", "label_issue"):
        assert with_bonus[tool] == pytest.approx(without[tool])
    # BM25 alone is not on the z-score scale the bonus is measured in: no bonus there
    assert scores(Ranking(), None) == scores(Ranking(name_phrase=0.0), None)


def test_limit_caps_the_number_of_hits(index: ToolIndex[SearchDoc]) -> None:
    assert len(index.search("pull request", 2).hits) == 2
    assert index.search("pull request", 0).hits == ()


def test_camel_case_tool_names_are_found_by_their_words(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "tiny image")[0] == "mcp__everything__getTinyImage"


def test_parameter_names_and_descriptions_are_searched(index: ToolIndex[SearchDoc]) -> None:
    # "revision" only appears in git_show's parameters
    assert top(index, "revision")[0] == "mcp__git__git_show"
    # "IANA" only appears in a parameter description
    assert top(index, "iana")[0] == "mcp__time__get_current_time"


def test_stemming_lets_inflected_queries_match(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "merging pull requests")[0] == "mcp__github__merge_pull_request"
    assert top(index, "listing directories")[0] == "mcp__filesystem__list_directory"


def test_meaning_bridges_words_no_tool_uses(index: ToolIndex[SearchDoc]) -> None:
    # no tool says "Tokyo" or "PR": the semantic score relates them to time and pull requests
    assert top(index, "what time is it in Tokyo", 1) == ["mcp__time__get_current_time"]
    assert top(index, "merge my PR")[0] == "mcp__github__merge_pull_request"


def test_github_is_not_read_as_git_plus_hub(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "list GitHub branches")[0] == "mcp__github__list_branches"
    assert top(index, "list git branches")[0] == "mcp__git__git_branch"


def test_a_tool_name_in_the_query_ranks_that_tool_first(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "use get_file_blame please")[0] == "mcp__github__get_file_blame"


def test_unrelated_queries_find_nothing(index: ToolIndex[SearchDoc]) -> None:
    assert index.search("kubernetes", 5).hits == ()
    assert index.search("bake a sourdough loaf", 5).hits == ()
    assert index.search("the of and", 5).hits == ()
    assert index.search("   ", 5).hits == ()


def test_pathological_queries_answer_quickly(index: ToolIndex[SearchDoc]) -> None:
    # long underscore chains and capital runs once made the regexes backtrack exponentially
    query = "_".join(["ab"] * 40) + "# " + "Q" * 5000 + "a " + "x." * 2000 + "!"
    with cpu_time() as spent:
        index.search(query, 5)
        index.search("+" + query, 5)
    assert spent.seconds < 1.0


def test_a_query_of_only_stop_words_can_still_name_a_server(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "everything") == ["mcp__everything__getTinyImage"]


# --- +required terms -------------------------------------------------------------------------


def test_required_terms_filter_and_other_words_rank(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "list branches")[:2] == [
        "mcp__github__list_branches",
        "mcp__git__git_branch",
    ]
    names = top(index, "+github list branches", 20)
    assert names[0] == "mcp__github__list_branches"
    assert all(n.startswith("mcp__github__") for n in names)
    assert len(names) == 7
    assert top(index, "+directory list") == ["mcp__filesystem__list_directory"]


def test_required_terms_must_be_in_the_name_or_server(index: ToolIndex[SearchDoc]) -> None:
    # "merge" is in create_pull_request's parameters ("Branch to merge into"): not enough
    assert top(index, "+merge", 10) == ["mcp__github__merge_pull_request"]
    # stemmed like everything else: "+branches" requires "branch"
    assert set(top(index, "+branches", 10)) == {
        "mcp__github__list_branches",
        "mcp__git__git_branch",
    }
    assert top(index, "+time") == ["mcp__time__get_current_time"]  # the server's name


def test_a_required_term_no_tool_contains_gives_no_hits(index: ToolIndex[SearchDoc]) -> None:
    assert index.search("+kubernetes pull request", 5).hits == ()


def test_a_plus_before_a_number_is_not_a_required_term(index: ToolIndex[SearchDoc]) -> None:
    assert top(index, "current time at +81 in Tokyo")[0] == "mcp__time__get_current_time"


# --- select: ---------------------------------------------------------------------------------


def test_select_full_names_in_the_order_given(index: ToolIndex[SearchDoc]) -> None:
    result = index.search("select:mcp__time__get_current_time,mcp__github__create_issue")
    assert result.mode == "select"
    assert result.names == ("mcp__time__get_current_time", "mcp__github__create_issue")
    assert result.missing_names == ()


def test_select_bare_name_matches_every_server(index: ToolIndex[SearchDoc]) -> None:
    result = index.search("select: read_file")
    assert result.names == ("mcp__filesystem__read_file", "mcp__files__read_file")


def test_select_reports_unknown_names_and_ignores_limit(index: ToolIndex[SearchDoc]) -> None:
    result = index.search("select:nope, create_issue ,mcp__x__y,git_show,write_file", limit=1)
    assert result.names == (
        "mcp__github__create_issue",
        "mcp__git__git_show",
        "mcp__filesystem__write_file",
    )
    assert result.missing_names == ("nope", "mcp__x__y")


def test_select_is_lenient_about_case_and_deduplicates(index: ToolIndex[SearchDoc]) -> None:
    result = index.search("SELECT:Create_Issue,create_issue,mcp__github__create_issue")
    assert result.names == ("mcp__github__create_issue",)
    assert result.missing_names == ()


def test_select_accepts_names_separated_by_spaces(index: ToolIndex[SearchDoc]) -> None:
    result = index.search("select: git_show  get_current_time")
    assert result.names == ("mcp__git__git_show", "mcp__time__get_current_time")


def test_select_with_no_names_selects_nothing(index: ToolIndex[SearchDoc]) -> None:
    result = index.search("select:")
    assert result.mode == "select"
    assert result.hits == ()
    assert result.missing_names == ()


def test_lookup_prefers_exact_wire_names(index: ToolIndex[SearchDoc]) -> None:
    assert [d.server for d in index.lookup("mcp__files__read_file")] == ["files"]
    assert index.lookup("missing") == ()


# --- no match --------------------------------------------------------------------------------


def test_closest_names_suggest_similar_tools(index: ToolIndex[SearchDoc]) -> None:
    assert index.closest_names("creat_isue", 3)[0] == "mcp__github__create_issue"
    assert "mcp__github__create_pull_request" in index.closest_names("create pull reqest", 3)
    assert index.closest_names("zzzzzz", 3) == ()


def test_server_counts_list_each_server(index: ToolIndex[SearchDoc]) -> None:
    counts = dict(index.server_counts())
    assert counts["github"] == 7
    assert counts["filesystem"] == 3
    assert list(counts) == sorted(counts)


def test_no_match_text_names_query_closest_tools_and_servers(
    index: ToolIndex[SearchDoc],
) -> None:
    text = no_match_text(unmatched("creat_isue", index))
    lines = text.splitlines()
    assert lines[0] == "No MCP tools matched 'creat_isue'."
    assert lines[1].startswith("Closest tool names: mcp__github__create_issue")
    assert "github (7 tools)" in lines[2]
    assert "time (1 tool)" in lines[2]


def test_no_match_text_without_close_names_or_servers() -> None:
    text = no_match_text(unmatched("anything", ToolIndex.build([])))
    assert text == "No MCP tools matched 'anything'.\nNo MCP servers are connected."
    text = no_match_text(unmatched("qqqq", ToolIndex.build(CATALOG)))
    assert "Closest" not in text
    assert text.splitlines()[1].startswith("Servers: browser (1 tool), everything (1 tool)")


# --- rebuilding ------------------------------------------------------------------------------


def test_rebuild_after_a_server_changes_its_tools(index: ToolIndex[SearchDoc]) -> None:
    new_time_tools = [
        _doc("time", "convert_time", "Convert a time between timezones.", source="Source zone")
    ]
    rebuilt = index.replace_server("time", new_time_tools)
    assert "mcp__time__get_current_time" not in rebuilt.search("current time", 5).names
    assert rebuilt.search("convert time", 5).names[0] == "mcp__time__convert_time"
    assert rebuilt.search("select:get_current_time").missing_names == ("get_current_time",)
    assert len(rebuilt) == len(index)
    # the old index is untouched
    assert index.search("current time", 1).names == ("mcp__time__get_current_time",)


def test_dropping_a_server_removes_its_tools(index: ToolIndex[SearchDoc]) -> None:
    rebuilt = index.replace_server("github", [])
    assert "github" not in dict(rebuilt.server_counts())
    assert all(not n.startswith("mcp__github__") for n in top(rebuilt, "pull request branch"))


def test_empty_catalog_answers_every_query_form() -> None:
    empty: ToolIndex[SearchDoc] = ToolIndex.build([])
    assert empty.search("anything", 5).hits == ()
    assert empty.search("select:a").missing_names == ("a",)
    assert empty.search("+x y", 5).hits == ()
    assert empty.closest_names("a") == ()


def test_catalog_with_no_parameters_at_all_builds() -> None:
    docs = [SearchDoc(name="mcp__s__ping", server="s", tool="ping", description="")]
    assert ToolIndex.build(docs).search("ping", 5).names == ("mcp__s__ping",)


# --- documents of the caller's own type --------------------------------------------------------


@dataclass(frozen=True)
class McpTool:
    server: str
    tool: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"mcp__{self.server}__{self.tool}"


def test_any_object_with_the_tool_fields_can_be_indexed() -> None:
    tools = [McpTool("slack", "post_message", "Post a message to a channel")]
    hits = ToolIndex.build(tools).search("send a message", 5).hits
    assert [h.doc for h in hits] == tools


# --- BM25 alone ------------------------------------------------------------------------------


def test_without_a_model_the_ranking_is_bm25_alone() -> None:
    plain = ToolIndex.build(CATALOG, embedder=None)
    assert not plain.semantic
    assert top(plain, "merge a pull request")[0] == "mcp__github__merge_pull_request"
    # nothing shares a word with "Tokyo": without meaning, "time" alone decides
    assert top(plain, "Tokyo") == []


def _bm25(tf: int, length: int, mean_length: float, df: int, n: int, b: float) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * 2.2 / (tf + 1.2 * (1 - b + b * length / mean_length))


class _SameVector:
    """A transformer that embeds every text alike: its z-scores are all 0, so a fused
    score is BM25's z-score alone."""

    digest = "same"
    dims = 2

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.tile([1.0, 0.0], (len(texts), 1))


def test_a_query_of_one_or_two_terms_gets_less_length_normalisation() -> None:
    # texts of 2, 4 and 8 terms (name, server, description); "invoice" in two of them
    docs = [
        SearchDoc(name="mcp__shop__invoice", server="shop", tool="invoice", description=""),
        SearchDoc(
            name="mcp__shop__refund", server="shop", tool="refund", description="charge card"
        ),
        SearchDoc(
            name="mcp__shop__ledger",
            server="shop",
            tool="ledger",
            description="invoice payment customer account balance statement",
        ),
    ]
    mean = (2 + 4 + 8) / 3

    def fused(index: ToolIndex[SearchDoc], query: str) -> list[float]:
        by_tool = {h.doc.tool: h.score for h in index.search(query, 5).hits}
        return [by_tool[d.tool] for d in docs]

    def z(*scores: float) -> list[float]:
        x = np.array(scores)
        return list((x - x.mean()) / x.std())

    dense = DenseEncoder(_SameVector, cache_dir=None, name="same")
    index = ToolIndex.build(docs, embedder=None, dense=dense)
    assert index.wait_semantic(HANG_S)
    assert fused(index, "invoice") == pytest.approx(
        z(_bm25(1, 2, mean, 2, 3, b=0.5), 0, _bm25(1, 8, mean, 2, 3, b=0.5))
    )
    assert fused(index, "invoice customer balance") == pytest.approx(
        z(
            _bm25(1, 2, mean, 2, 3, b=0.75),
            0,
            _bm25(1, 8, mean, 2, 3, b=0.75) + 2 * _bm25(1, 8, mean, 1, 3, b=0.75),
        )
    )
    # without the transformer, BM25 keeps b 0.75 for every query
    alone = ToolIndex.build(docs, embedder=None)
    assert alone.search("invoice", 1).hits[0].score == pytest.approx(
        _bm25(1, 2, mean, 2, 3, b=0.75)
    )
    # and the knob's 0 turns it off (the ablation's row)
    off = ToolIndex.build(docs, embedder=None, dense=dense, ranking=Ranking(short_query_terms=0))
    assert off.wait_semantic(HANG_S)
    assert fused(off, "invoice") == pytest.approx(
        z(_bm25(1, 2, mean, 2, 3, b=0.75), 0, _bm25(1, 8, mean, 2, 3, b=0.75))
    )


def test_split_parts_ranks_each_capability_of_a_query_on_its_own() -> None:
    docs = [
        SearchDoc(name=f"mcp__s__{t}", server="s", tool=t, description=d)
        for t, d in [
            ("read_excel", "Read an Excel spreadsheet's rows"),
            ("read_csv", "Read a CSV file's rows"),
            ("read_json", "Read a JSON file"),
            ("read_yaml", "Read a YAML file"),
            ("make_chart", "Draw a bar or line chart from data"),
            ("send_mail", "Send an email"),
        ]
    ]
    # measured and not kept by default (docs/lazy-mcp.md); the ablation's knob still works
    index = ToolIndex.build(docs, embedder=None, ranking=Ranking(split_parts=True))
    # each part's best first, then each part's second, ...
    found = index.search("read excel spreadsheet; read csv file", 4)
    assert found.names[:2] == ("mcp__s__read_excel", "mcp__s__read_csv")
    assert len(found.names) == len(set(found.names)) == 4
    assert found.terms == ("read", "excel", "spreadsheet", "csv", "file")
    assert index.search("read excel; make chart", 2).names == (
        "mcp__s__read_excel",
        "mcp__s__make_chart",
    )
    assert index.search(" ; make chart ;", 1).names == ("mcp__s__make_chart",)
    assert ToolIndex.build(docs, embedder=None).search("read; chart", 1).terms == ("read", "chart")
