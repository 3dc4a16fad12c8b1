"""Fetching a web page for WebFetch: HTTP with bounded redirects and size, HTML → Markdown,
and a short-lived cache.

``httpx2`` (the HTTP client the provider SDKs already depend on) and ``markdownify`` are
imported on the first fetch, never at start-up. A redirect is followed only while it stays
on the same host (``www.`` aside) and port; otherwise the caller gets a :class:`Redirect` to
report, as Claude Code does. ``http://`` is upgraded to ``https://`` except for loopback
hosts, where local development servers speak plain HTTP.

Hosts are compared in one spelling (:func:`caliban.util.hosts.canonical_host`): the host a
``WebFetch(domain:…)`` rule is matched against is the one the HTTP client reads from the URL.
A fetch resolves each host once, asks the caller whether a deny rule names any of its
addresses, and connects to those very addresses (TLS still checks the name): a name that
resolves to a denied address is refused, and cannot resolve to another one in between.
"""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Final

from caliban import __version__
from caliban.util.hosts import canonical_host, ip_address, is_loopback

if TYPE_CHECKING:
    import httpx2

USER_AGENT: Final = f"caliban/{__version__} (WebFetch; a coding agent acting for its user)"
ACCEPT: Final = "text/markdown, text/html, */*"
TIMEOUT_S: Final = 30.0
"""The deadline of one fetch: connecting, every redirect and the whole body."""
MAX_REDIRECTS: Final = 10
MAX_BYTES: Final = 10 * 1024 * 1024
"""A longer response is cut here (and said to be)."""
MAX_HTML_CHARS: Final = 2_000_000
"""HTML beyond this is not converted: ~3 s of markdownify, far more text than is kept."""
MAX_MARKDOWN_CHARS: Final = 100_000
"""What is kept of a page for the model (Claude Code's cut)."""
CACHE_TTL_S: Final = 15 * 60
CACHE_ENTRIES: Final = 64
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
DROPPED_TAGS: Final = ("script", "style", "noscript", "template", "nav", "svg", "iframe")
TEXT_TYPES: Final = ("text/", "application/json", "application/xml", "application/javascript")
HTML_TYPES: Final = ("text/html", "application/xhtml+xml")


class FetchError(Exception):
    """The page could not be fetched (no such host, refused, timed out, not text)."""


class AddressDenied(FetchError):
    """The host resolved to an address a deny rule names: nothing was sent."""


AddressDenial = Callable[[str], str | None]
"""An address a fetch would connect to → the deny rule naming it (its text), or None."""


def _none_denied(address: str) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Page:
    """A fetched page: its status and, for a success, its text as Markdown."""

    url: str
    status: int
    content_type: str = ""
    bytes: int = 0
    markdown: str = ""
    truncated: bool = False
    """The body was cut at :data:`MAX_BYTES` or the text at :data:`MAX_MARKDOWN_CHARS`."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def reason(self) -> str:
        return reason_phrase(self.status)


@dataclass(frozen=True, kw_only=True, slots=True)
class Redirect:
    """A redirect to another host, not followed."""

    url: str
    location: str
    status: int

    @property
    def reason(self) -> str:
        return reason_phrase(self.status)


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def normalize_url(url: str) -> str:
    """``url`` to fetch: ``http`` upgraded to ``https`` unless the host is loopback.

    Raises :class:`ValueError` for anything but an absolute http(s) URL with a host.
    """
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {url!r}")
    if parts.scheme.lower() == "http" and not is_loopback(parts.hostname):
        parts = parts._replace(scheme="https")
    return urllib.parse.urlunsplit(parts)


def host_of(url: str) -> str:
    """The host ``url`` reaches, as the HTTP client reads it, in the one spelling
    ``WebFetch(domain:…)`` rules match (``http://127.1/`` → ``127.0.0.1``)."""
    import httpx2

    try:
        host = httpx2.URL(url).raw_host.decode("ascii")
    except httpx2.InvalidURL:  # the fetch fails too; the rules see what the URL says
        host = urllib.parse.urlsplit(url).hostname or ""
    return canonical_host(host)


def _site(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    host = canonical_host(parts.hostname or "").removeprefix("www.")
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), host, parts.port or default


def same_site(origin: str, target: str) -> bool:
    """Whether a redirect from ``origin`` to ``target`` may be followed: same host (with or
    without ``www.``), same port, and no downgrade from https to http."""
    scheme_a, host_a, port_a = _site(origin)
    scheme_b, host_b, port_b = _site(target)
    if scheme_a == "https" and scheme_b != "https":
        return False
    if (scheme_a, scheme_b) == ("http", "https"):
        port_b = port_a if port_b == 443 and port_a == 80 else port_b
    return host_a == host_b and port_a == port_b


async def fetch(
    url: str,
    *,
    timeout_s: float = TIMEOUT_S,
    address_denied: AddressDenial = _none_denied,
) -> Page | Redirect:
    """GET ``url`` (already normalized), following same-site redirects; raises
    :class:`FetchError` when there is no answer or it is not text, and
    :class:`AddressDenied` when a host resolves to an address ``address_denied`` names.

    ``timeout_s`` bounds the whole exchange (every redirect, the whole body), not each read:
    a server that sends one byte at a time is cut off at the deadline."""
    try:
        async with asyncio.timeout(timeout_s):
            answer = await _get(url, timeout_s, address_denied)
    except TimeoutError:
        raise FetchError(f"no complete answer within {timeout_s:g} s") from None
    if isinstance(answer, Redirect):
        return answer
    return await _page(answer)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Answer:
    """A response as received: the body of a success, only the status of anything else."""

    url: str
    status: int
    content_type: str = ""
    body: bytes = b""
    charset: str | None = None
    cut: bool = False
    """The body was cut at :data:`MAX_BYTES`."""


async def _get(url: str, timeout_s: float, address_denied: AddressDenial) -> _Answer | Redirect:
    import httpx2

    current = url
    try:
        async with httpx2.AsyncClient(
            follow_redirects=False,
            timeout=timeout_s,
            headers={"User-Agent": USER_AGENT, "Accept": ACCEPT},
            # Direct connections only: a proxy from the environment resolves names itself.
            transport=_pinned_transport(address_denied),
        ) as client:
            for _ in range(MAX_REDIRECTS + 1):
                async with client.stream("GET", current) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECTS and location:
                        target = urllib.parse.urljoin(current, location)
                        if not same_site(current, target):
                            return Redirect(url=url, location=target, status=response.status_code)
                        current = target
                        continue
                    return await _read(current, response)
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise FetchError(detail) from None
    raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def _pinned_transport(address_denied: AddressDenial) -> httpx2.AsyncBaseTransport:
    """An HTTP transport that connects only to addresses it checked (see the module
    docstring)."""
    import httpx2

    class Pinned(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            url = request.url
            host = url.raw_host.decode("ascii")
            addresses = await _addresses(host, url.port or (443 if url.scheme == "https" else 80))
            for address in addresses:
                if (rule := address_denied(canonical_host(address))) is not None:
                    raise AddressDenied(
                        f"{host} resolves to {address}, and the permission rule {rule!r} denies it"
                    )
            extensions = dict(request.extensions)
            if url.scheme == "https" and ip_address(host) is None:
                extensions["sni_hostname"] = host  # the certificate must name the host
            failure: httpx2.ConnectError | None = None
            for address in addresses:
                pinned = httpx2.Request(
                    request.method,
                    url.copy_with(host=address),
                    headers=request.headers,  # Host: the name, as the client set it
                    stream=request.stream,
                    extensions=extensions,
                )
                try:
                    return await self._inner.handle_async_request(pinned)
                except httpx2.ConnectError as exc:
                    failure = exc
            assert failure is not None  # getaddrinfo answers at least one address
            raise failure

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Pinned()


async def _addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order."""
    import httpx2

    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise httpx2.ConnectError(str(exc)) from None
    return list(dict.fromkeys(str(info[4][0]) for info in found))


async def _read(url: str, response: httpx2.Response) -> _Answer:
    if not 200 <= response.status_code < 300:
        return _Answer(url=url, status=response.status_code)
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and not content_type.startswith(TEXT_TYPES + HTML_TYPES):
        raise FetchError(f"the response is {content_type}, not text or HTML")
    body = bytearray()
    cut = False
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_BYTES:
            del body[MAX_BYTES:]
            cut = True
            break
    return _Answer(
        url=url,
        status=response.status_code,
        content_type=content_type,
        body=bytes(body),
        charset=response.charset_encoding,
        cut=cut,
    )


async def _page(answer: _Answer) -> Page:
    """The answer as a :class:`Page`: its text, HTML converted to Markdown (after the
    network deadline: the conversion is bounded by :data:`MAX_HTML_CHARS`)."""
    if not 200 <= answer.status < 300:
        return Page(url=answer.url, status=answer.status)
    content_type, cut = answer.content_type, answer.cut
    try:
        text = answer.body.decode(answer.charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = answer.body.decode("utf-8", errors="replace")
    is_html = content_type.startswith(HTML_TYPES) or (
        not content_type and text.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))
    )
    if is_html:
        text = await asyncio.to_thread(html_to_markdown, text[:MAX_HTML_CHARS])
    if len(text) > MAX_MARKDOWN_CHARS:
        text, cut = text[:MAX_MARKDOWN_CHARS], True
    return Page(
        url=answer.url,
        status=answer.status,
        content_type=content_type,
        bytes=len(answer.body),
        markdown=text.strip(),
        truncated=cut,
    )


def html_to_markdown(html: str) -> str:
    """HTML as Markdown, without scripts, styles, navigation, inline SVG or ``data:``
    images (markdownify on Python's own HTML parser)."""
    from bs4 import BeautifulSoup
    from markdownify import ATX, MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(DROPPED_TAGS):
        tag.decompose()
    for tag in soup.select('[role="navigation"]'):
        tag.decompose()
    for image in soup("img"):
        if str(image.get("src", "")).startswith("data:"):
            image.decompose()
    markdown = MarkdownConverter(heading_style=ATX, bullets="-").convert_soup(soup)
    lines = [line.rstrip() for line in str(markdown).splitlines()]
    return "\n".join(_squeeze_blank(lines)).strip()


def _squeeze_blank(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return out


class PageCache:
    """Pages by URL for :data:`CACHE_TTL_S` seconds, at most :data:`CACHE_ENTRIES` of them
    (least recently used dropped first). The clock is injectable for tests."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._entries: OrderedDict[str, tuple[float, Page]] = OrderedDict()

    def get(self, url: str) -> Page | None:
        entry = self._entries.get(url)
        if entry is None:
            return None
        stored, page = entry
        if self.clock() - stored > CACHE_TTL_S:
            del self._entries[url]
            return None
        self._entries.move_to_end(url)
        return page

    def put(self, url: str, page: Page) -> None:
        self._entries[url] = (self.clock(), page)
        self._entries.move_to_end(url)
        while len(self._entries) > CACHE_ENTRIES:
            self._entries.popitem(last=False)
