"""WebFetch: read a web page and answer a question about it.

The page is fetched (:mod:`caliban.tools._web`), converted to Markdown and, unless it is
small, handed with the ``prompt`` to a short side request to the same provider and model,
whose answer is the result — so a long page never enters the conversation. A small page
comes back whole. Answers, redirect reports and the structured result follow Claude Code's
(``{bytes, code, codeText, result, durationMs, url}``). Permission rules name hosts:
``WebFetch(domain:docs.python.org)``.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from caliban.calls.effects import Effects, Host
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, Preview, ToolEnv, ToolOutput

if TYPE_CHECKING:
    from caliban.tools import _web

SMALL_PAGE_CHARS: Final = 4_000
"""A page whose Markdown is at most this long (about 1,000 tokens) is returned whole: a side
request would cost as much and could only lose detail."""

DESCRIPTION = """\
Fetches a URL, converts the page to Markdown and answers `prompt` about it with a short side \
request to the model; a small page is returned whole instead.

- The URL must be complete (https://…). Fails on pages behind a login: for those use an \
authenticated tool instead (an MCP server, or `gh` for GitHub).
- http:// is upgraded to https:// (except for localhost). A redirect to another host is not \
followed: you get the new URL and call WebFetch again with it.
- Say in `prompt` what you want from the page; long pages are summarized against it.
- Responses are cached for 15 minutes per URL. Read-only: it changes nothing."""

SIDE_PROMPT = """
Web page content:
---
{page}
---

{prompt}

Answer the request above using only the page content. Be concise. Quote exact wording only \
in quotation marks and at most 125 characters per quote; say so when the page does not \
answer the request.
"""
NOT_RETRIEVED = (
    "The server returned HTTP {status} {reason}.\n\nThe response body was not retrieved. If this "
    "URL requires authentication, use an authenticated tool (e.g. `gh` for GitHub, or an "
    "MCP-provided fetch tool) instead of WebFetch."
)
CROSS_HOST = """\
REDIRECT DETECTED: The URL redirects to a different host.

Original URL: {url}
Redirect URL: {location}
Status: {status} {reason}

To complete your request, I need to fetch content from the redirected URL. Please use \
WebFetch again with these parameters:
- url: "{location}"
- prompt: "{prompt}\""""


class WebFetchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        description="The URL to fetch content from", json_schema_extra={"format": "uri"}
    )
    prompt: str = Field(description="The prompt to run on the fetched content")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        from caliban.tools import _web

        _web.normalize_url(value)  # raises ValueError: an error result naming the field
        return value.strip()


class WebFetch(BuiltinTool[WebFetchInput]):
    name = "WebFetch"
    description = DESCRIPTION
    input_model = WebFetchInput
    # Not read-only for the permission policy: it reaches the network, so it asks first
    # (WebFetch(domain:…) rules allow hosts), and plan mode keeps it out.
    read_only = False

    def __init__(self, *, cache: _web.PageCache | None = None) -> None:
        self._cache = cache

    @functools.cached_property
    def cache(self) -> _web.PageCache:
        """The pages fetched in the last 15 minutes (the fetcher is imported with it: a
        session that never fetches never imports it)."""
        from caliban.tools import _web

        return self._cache or _web.PageCache()

    def subject(self, args: WebFetchInput) -> str | None:
        from caliban.tools import _web

        return _web.host_of(_web.normalize_url(args.url))

    def effects(self, args: WebFetchInput, cwd: Path) -> Effects:
        from caliban.tools import _web

        return Effects(reaches=(Host(_web.host_of(_web.normalize_url(args.url))),))

    def preview(self, args: WebFetchInput, env: ToolEnv) -> Preview:
        from caliban.tools import _web

        return f"{_web.normalize_url(args.url)}\n# {args.prompt}"

    async def run(self, args: WebFetchInput, ctx: CallContext) -> ToolOutput:
        from caliban.tools import _web

        started = time.perf_counter()
        url = _web.normalize_url(args.url)

        def output(text: str, *, status: int, size: int, summary: str) -> ToolOutput:
            data = {
                "bytes": size,
                "code": status,
                "codeText": _web.reason_phrase(status),
                "result": text,
                "durationMs": int((time.perf_counter() - started) * 1000),
                "url": args.url,
            }
            return ToolOutput.text(text, summary=summary, data=data)

        page = self.cache.get(url)
        if page is None:
            try:
                fetched = await _web.fetch(
                    url,
                    address_denied=lambda address: ctx.env.address_denied(self.name, address),
                )
            except _web.AddressDenied as exc:
                return ToolOutput.error(f"WebFetch did not fetch {url}: {exc}")
            except _web.FetchError as exc:
                return ToolOutput.error(f"WebFetch could not fetch {url}: {exc}")
            if isinstance(fetched, _web.Redirect):
                text = CROSS_HOST.format(
                    url=url,
                    location=fetched.location,
                    status=fetched.status,
                    reason=fetched.reason,
                    prompt=args.prompt,
                )
                return output(text, status=fetched.status, size=len(text), summary="redirected")
            page = fetched
            if page.ok:
                self.cache.put(url, page)
        if not page.ok:
            text = NOT_RETRIEVED.format(status=page.status, reason=page.reason)
            return output(text, status=page.status, size=0, summary=f"HTTP {page.status}")
        size = _files.human_size(page.bytes)
        if len(page.markdown) <= SMALL_PAGE_CHARS or ctx.ask_model is None:
            text = page.markdown or "(the page has no text)"
            if page.truncated:
                text += f"\n\n[… the page was cut at {_web.MAX_MARKDOWN_CHARS:,} characters]"
            return output(text, status=page.status, size=page.bytes, summary=f"{size}, whole")
        answer = await ctx.ask_model(SIDE_PROMPT.format(page=page.markdown, prompt=args.prompt))
        return output(answer.strip(), status=page.status, size=page.bytes, summary=size)


__all__ = ["WebFetch", "WebFetchInput"]
