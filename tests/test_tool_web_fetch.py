"""WebFetch against a local web server: Markdown, redirects, errors, the side request, the
cache and ``WebFetch(domain:…)`` rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hang import hang_guard
from web_server import WebServer

from caliban.agent import Agent
from caliban.config.settings import PermissionMode
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import PermissionRules, Rule, RuleError, suggest_rule
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.tools import _web
from caliban.tools.base import BUILTIN, CallContext, ToolEnv, ToolOutput
from caliban.tools.web_fetch import SMALL_PAGE_CHARS, WebFetch
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio


@pytest.fixture
def web() -> Iterator[WebServer]:
    with WebServer() as server:
        yield server


def context(tmp_path: Path, answers: list[str] | None = None) -> tuple[CallContext, list[str]]:
    """A call context whose side requests answer from ``answers`` and are recorded."""
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return (answers or ["SIDE ANSWER"]).pop(0)

    env = ToolEnv(cwd=tmp_path, project_root=tmp_path)
    return CallContext(env=env, call_id="w1", ask_model=ask), asked


async def fetch(
    tool: WebFetch, url: str, ctx: CallContext, prompt: str = "Summarize"
) -> ToolOutput:
    return await tool.call({"url": url, "prompt": prompt}, ctx)


async def test_a_small_page_comes_back_as_markdown_without_scripts_styles_or_navigation(
    web: WebServer, tmp_path: Path
) -> None:
    ctx, asked = context(tmp_path)
    out = await fetch(WebFetch(), f"{web.url}/page", ctx)
    text = out.as_text
    assert not out.is_error and asked == []  # small: no side request
    assert "# Main Heading" in text and "[a link](/other)" in text and "**bold**" in text
    assert "- one\n- two" in text and '```\nprint("code")\n```' in text
    assert "WEB-CONTENT-MARKER" in text and "FOOTER" in text
    for dropped in ("SCRIPT-MARKER", "STYLE-MARKER", "NAV-LINKS", "ROLE-NAV-MARKER", "base64"):
        assert dropped not in text
    assert out.data["code"] == 200 and out.data["codeText"] == "OK"
    assert out.data["url"] == f"{web.url}/page" and out.data["bytes"] > 500
    headers = web.headers[0]
    assert headers["Accept"] == "text/markdown, text/html, */*"
    assert headers["User-Agent"].startswith("caliban/")


async def test_a_large_page_is_answered_by_a_side_request(web: WebServer, tmp_path: Path) -> None:
    ctx, asked = context(tmp_path, ["The page lists 300 paragraphs."])
    out = await fetch(WebFetch(), f"{web.url}/big", ctx, prompt="How many paragraphs?")
    assert out.as_text == "The page lists 300 paragraphs."
    assert out.data["result"] == "The page lists 300 paragraphs."
    [question] = asked
    assert question.startswith("\nWeb page content:\n---\n# Big Page")
    assert "BIG-MARKER" in question and "\n---\n\nHow many paragraphs?\n\n" in question
    assert len(question) > SMALL_PAGE_CHARS


async def test_plain_text_passes_through(web: WebServer, tmp_path: Path) -> None:
    ctx, _ = context(tmp_path)
    out = await fetch(WebFetch(), f"{web.url}/text", ctx)
    assert out.as_text == "plain text body TEXT-MARKER"


async def test_a_same_host_redirect_is_followed(web: WebServer, tmp_path: Path) -> None:
    ctx, _ = context(tmp_path)
    out = await fetch(WebFetch(), f"{web.url}/redirect-same", ctx)
    assert "WEB-CONTENT-MARKER" in out.as_text
    assert web.hits == ["/redirect-same", "/page"]


async def test_a_cross_host_redirect_is_reported_not_followed(
    web: WebServer, tmp_path: Path
) -> None:
    ctx, asked = context(tmp_path)
    out = await fetch(WebFetch(), f"{web.url}/redirect-cross", ctx, prompt="Summarize")
    port = web.url.rsplit(":", 1)[1]
    location = f"http://localhost:{port}/page"
    assert out.as_text == (
        "REDIRECT DETECTED: The URL redirects to a different host.\n\n"
        f"Original URL: {web.url}/redirect-cross\nRedirect URL: {location}\nStatus: 302 Found\n\n"
        "To complete your request, I need to fetch content from the redirected URL. Please use "
        f'WebFetch again with these parameters:\n- url: "{location}"\n- prompt: "Summarize"'
    )
    assert not out.is_error and out.data["code"] == 302 and out.data["codeText"] == "Found"
    assert web.hits == ["/redirect-cross"] and asked == []


async def test_a_404_says_the_body_was_not_retrieved(web: WebServer, tmp_path: Path) -> None:
    ctx, _ = context(tmp_path)
    out = await fetch(WebFetch(), f"{web.url}/missing", ctx)
    assert out.as_text.startswith("The server returned HTTP 404 Not Found.\n\nThe response body")
    assert not out.is_error and out.data["bytes"] == 0


async def test_failures_are_error_results(web: WebServer, tmp_path: Path) -> None:
    ctx, _ = context(tmp_path)
    binary = await fetch(WebFetch(), f"{web.url}/binary", ctx)
    assert binary.is_error and "image/png, not text or HTML" in binary.as_text
    looping = await fetch(WebFetch(), f"{web.url}/loop", ctx)
    assert looping.is_error and "more than 10 redirects" in looping.as_text
    port = web.url.rsplit(":", 1)[1]
    web.server.server_close()
    refused = await fetch(WebFetch(), f"http://127.0.0.1:{port}/page", ctx)
    assert refused.is_error and "could not fetch" in refused.as_text
    invalid = await fetch(WebFetch(), "ftp://example.com/x", ctx)
    assert invalid.is_error and "url" in invalid.as_text


async def test_the_cache_serves_a_page_for_fifteen_minutes(web: WebServer, tmp_path: Path) -> None:
    now = [1000.0]
    tool = WebFetch(cache=_web.PageCache(clock=lambda: now[0]))
    ctx, asked = context(tmp_path, ["first", "second", "third"])
    await fetch(tool, f"{web.url}/big", ctx, prompt="one")
    now[0] += 14 * 60
    again = await fetch(tool, f"{web.url}/big", ctx, prompt="two")
    assert web.hits == ["/big"]  # served from the cache...
    assert again.as_text == "second" and len(asked) == 2  # ...but the new prompt is asked
    now[0] += 2 * 60
    await fetch(tool, f"{web.url}/big", ctx, prompt="three")
    assert web.hits == ["/big", "/big"]


def test_http_is_upgraded_except_for_loopback_hosts() -> None:
    assert _web.normalize_url("http://example.com/a?b=1") == "https://example.com/a?b=1"
    assert _web.normalize_url("https://example.com/") == "https://example.com/"
    for local in ("http://localhost:8000/x", "http://127.0.0.1/x", "http://[::1]:80/"):
        assert _web.normalize_url(local) == local
    with pytest.raises(ValueError):
        _web.normalize_url("file:///etc/passwd")


def test_redirects_are_followed_on_the_same_site_only() -> None:
    assert _web.same_site("https://example.com/a", "https://www.example.com/b")
    assert _web.same_site("http://example.com/a", "https://example.com/b")
    assert not _web.same_site("https://example.com/a", "http://example.com/b")  # downgrade
    assert not _web.same_site("https://example.com/a", "https://example.org/a")
    assert not _web.same_site("https://example.com/a", "https://example.com:8443/a")
    assert not _web.same_site("http://127.0.0.1:1/a", "http://localhost:1/a")


def test_domain_rules() -> None:
    root = Path("/")
    rule = Rule.parse("WebFetch(domain:docs.python.org)")
    assert rule.matches("WebFetch", "docs.python.org", project_root=root)
    assert rule.matches("WebFetch", "DOCS.python.org", project_root=root)
    assert not rule.matches("WebFetch", "evil-docs.python.org", project_root=root)
    wild = Rule.parse("WebFetch(domain:*.python.org)")
    assert wild.matches("WebFetch", "docs.python.org", project_root=root)
    assert not wild.matches("WebFetch", "python.org", project_root=root)
    with pytest.raises(RuleError, match=r"WebFetch\(domain:example.com\)"):
        Rule.parse("WebFetch(https://docs.python.org/*)")  # a URL is refused, not guessed
    assert suggest_rule("WebFetch", "docs.python.org", root) == "WebFetch(domain:docs.python.org)"


def test_webfetch_asks_unless_a_domain_rule_allows_it() -> None:
    tool = WebFetch()
    bound = tool.bind({"url": "http://Docs.Python.org/3/", "prompt": "x"})
    assert not isinstance(bound, str) and bound.subject == "docs.python.org"

    def decide(allow: list[str], mode: PermissionMode = "default") -> str:
        rules = PermissionRules.parse(allow=allow)
        policy = PermissionPolicy(project_root=Path("/p"), mode=mode, rules=rules)
        decision = policy.decide("WebFetch", "docs.python.org", read_only=False, origin=BUILTIN)
        return decision.behavior

    assert decide([]) == "ask"
    assert decide(["WebFetch(domain:docs.python.org)"]) == "allow"
    assert decide(["WebFetch(domain:example.com)"]) == "ask"
    assert decide(["WebFetch"]) == "allow"
    assert decide(["WebFetch"], mode="plan") == "deny"


async def test_the_side_request_goes_to_the_agents_provider_and_model(
    web: WebServer, tmp_path: Path
) -> None:
    def side(request: object) -> str:
        assert request.tools == () and len(request.messages) == 1  # type: ignore[attr-defined]
        return "A big page."

    provider = ScriptedProvider(
        [reply(tool_call("WebFetch", {"url": f"{web.url}/big", "prompt": "What?"})), side, "Done."]
    )
    agent = Agent(
        provider=provider,
        model="the-model",
        system_prompt="s",
        toolset=ToolList([WebFetch()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
    )
    result = await agent.run("read it")
    assert result.text == "Done."
    side_request = provider.requests[1]
    assert side_request.model == "the-model" and "BIG-MARKER" in side_request.messages[0].text
    assert provider.requests[2].messages[-1].parts[0].text == "A big page."  # type: ignore[union-attr]
    # The side request's tokens count: three requests of 10 in / 5 out.
    assert agent.ledger.total().output_tokens == 15


async def test_the_fetch_deadline_is_total_not_per_read(web: WebServer) -> None:
    # The drip never ends: a deadline per read would never expire.
    with hang_guard(), pytest.raises(_web.FetchError, match=r"no complete answer within 0.5 s"):
        await _web.fetch(f"{web.url}/drip?every=0.05", timeout_s=0.5)


def test_the_subject_is_the_host_the_client_reaches() -> None:
    tool = WebFetch()
    for url, host in [
        ("http://127.1:8080/x", "127.0.0.1"),
        ("http://127。0。0。1/", "127.0.0.1"),
        ("https://[::ffff:127.0.0.1]/", "127.0.0.1"),
        ("https://bücher.de/", "xn--bcher-kva.de"),
        ("https://Docs.Python.org./3/", "docs.python.org"),
    ]:
        bound = tool.bind({"url": url, "prompt": "x"})
        assert not isinstance(bound, str) and bound.subject == host, url


async def test_a_host_resolving_to_a_denied_address_is_not_reached(web: WebServer) -> None:
    port = web.url.rsplit(":", 1)[1]
    denied: list[str] = []

    def guard(address: str) -> str | None:
        denied.append(address)
        return "WebFetch(domain:127.0.0.1)" if address == "127.0.0.1" else None

    with pytest.raises(_web.AddressDenied, match=r"localhost resolves to 127\.0\.0\.1"):
        await _web.fetch(f"http://localhost:{port}/page", address_denied=guard)
    assert web.hits == [] and "127.0.0.1" in denied


async def test_a_pinned_connection_still_names_the_host(web: WebServer) -> None:
    port = web.url.rsplit(":", 1)[1]
    page = await _web.fetch(f"http://localhost:{port}/text")
    assert isinstance(page, _web.Page) and "TEXT-MARKER" in page.markdown
    assert web.headers[-1]["Host"] == f"localhost:{port}"
