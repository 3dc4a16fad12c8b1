"""Which HTML → Markdown library WebFetch uses: markdownify or html-to-markdown, measured.

Run it in a scratch environment that has both (only the chosen one is a caliban dependency)::

    python -m venv /tmp/htmlbench && /tmp/htmlbench/bin/pip install markdownify html-to-markdown
    /tmp/htmlbench/bin/python benchmarks/html_markdown.py [DIR_OR_FILE ...]

Without arguments it reads a spread of locally installed HTML documentation (mdBook pages,
rustdoc API pages, Sphinx and DocBook pages) when present. For each library it prints the
import time, the conversion time per page (median and total), the Markdown size, and the
share of pages where text from ``<script>``/``<style>`` or from navigation leaked into the
output, where a heading was lost, and where code blocks were not fenced.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

RUST_DOCS = Path("/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html")
DEFAULT_SOURCES = [
    (RUST_DOCS / "book", 15),
    (RUST_DOCS / "std" / "collections", 10),
    (RUST_DOCS / "cargo" / "reference", 10),
    (RUST_DOCS / "reference", 10),
    (Path("/usr/share/doc/python3/python-policy.html"), 1),
    (
        Path(sys.base_prefix)
        / "lib"
        / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        / "idlelib"
        / "help.html",
        1,
    ),
]


def corpus(args: list[str]) -> list[Path]:
    sources = [(Path(a), 1000) for a in args] if args else DEFAULT_SOURCES
    pages: list[Path] = []
    for source, limit in sources:
        if source.is_file():
            pages.append(source)
        elif source.is_dir():
            found = sorted(p for p in source.rglob("*.html") if p.stat().st_size > 8_000)
            pages.extend(found[:limit])
    return pages


def import_time(module: str) -> float:
    code = f"import time; t=time.perf_counter(); import {module}; print(time.perf_counter()-t)"
    runs = [float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(5)]
    return statistics.median(runs)


def markdownify_converter() -> Callable[[str], str]:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    converter = MarkdownConverter(heading_style="ATX", bullets="-")

    def convert(html: str) -> str:
        soup = BeautifulSoup(html, "html.parser")
        for tag in soup(["script", "style", "noscript", "template", "nav"]):
            tag.decompose()
        for tag in soup.select('[role="navigation"]'):
            tag.decompose()
        return str(converter.convert_soup(soup))

    return convert


def html_to_markdown_converter() -> Callable[[str], str]:
    from html_to_markdown import ConversionOptions, PreprocessingOptions, convert

    options = ConversionOptions(
        heading_style="atx",
        preprocessing=PreprocessingOptions(enabled=True, preset="standard"),
        extract_metadata=False,
        inline_data_media="drop_element",  # base64 icons are tokens, not content
        exclude_selectors=["nav", '[role="navigation"]'],
    )

    def run(html: str) -> str:
        return convert(html, options).content or ""

    return run


SCRIPT_TEXT = re.compile(r"<script[^>]*>(.*?)</script>|<style[^>]*>(.*?)</style>", re.S | re.I)
NAV = re.compile(r"<nav\b[^>]*>(.*?)</nav>", re.S | re.I)
HEADING = re.compile(r"<h([1-3])\b[^>]*>(.*?)</h\1>", re.S | re.I)
TAG = re.compile(r"<[^>]+>")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\[[^\]\n]+\]\([^)\s]+[^)]*\)")


def links_in_code(markdown: str) -> bool:
    """Whether a fenced code block holds Markdown link syntax (code the reader cannot copy)."""
    return any(LINK.search(block) for block in FENCED.findall(markdown))


def leaked(fragments: list[str], markdown: str) -> bool:
    """Whether a distinctive line of a dropped element shows up in the output."""
    for fragment in fragments:
        for line in fragment.splitlines():
            line = TAG.sub("", line).strip()
            if len(line) >= 25 and line in markdown:
                return True
    return False


def headings_kept(html: str, markdown: str) -> bool:
    """Whether every h1-h3 outside navigation kept its first words."""
    for _, inner in HEADING.findall(NAV.sub("", html)):
        text = " ".join(TAG.sub("", inner).split())
        words = [w for w in re.findall(r"\w+", text) if len(w) > 3][:2]
        if words and not all(w in markdown for w in words):
            return False
    return True


def main() -> None:
    pages = corpus(sys.argv[1:])
    if not pages:
        sys.exit("no HTML pages found; pass files or directories")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in pages]
    total_html = sum(len(t) for t in texts)
    print(f"{len(pages)} pages, {total_html / 1e6:.1f} MB of HTML\n")
    libraries = {
        "markdownify": ("markdownify", markdownify_converter),
        "html-to-markdown": ("html_to_markdown", html_to_markdown_converter),
    }
    header = (
        f"{'library':<18}{'import':>9}{'median':>9}{'total':>9}{'md/html':>9}"
        f"{'script':>8}{'nav':>6}{'heads':>7}{'fences':>8}{'codelinks':>11}"
    )
    print(header)
    for name, (module, factory) in libraries.items():
        convert = factory()
        times: list[float] = []
        outputs: list[str] = []
        for text in texts:
            started = time.perf_counter()
            outputs.append(convert(text))
            times.append(time.perf_counter() - started)
        script_leaks = sum(
            leaked([a or b for a, b in SCRIPT_TEXT.findall(t)], o)
            for t, o in zip(texts, outputs, strict=True)
        )
        nav_leaks = sum(
            leaked(NAV.findall(t), o) for t, o in zip(texts, outputs, strict=True) if NAV.search(t)
        )
        lost_heads = sum(not headings_kept(t, o) for t, o in zip(texts, outputs, strict=True))
        with_pre = [(t, o) for t, o in zip(texts, outputs, strict=True) if "<pre" in t]
        unfenced = sum("```" not in o for _, o in with_pre)
        code_links = sum(links_in_code(o) for o in outputs)
        size = sum(len(o) for o in outputs) / total_html
        imported, median = import_time(module) * 1000, statistics.median(times) * 1000
        print(
            f"{name:<18}{imported:>7.0f}ms{median:>7.1f}ms"
            f"{sum(times):>8.2f}s{size:>9.1%}{script_leaks:>8}{nav_leaks:>6}{lost_heads:>7}"
            f"{unfenced:>8}{code_links:>11}"
        )
    print(
        "\nscript/nav: pages where text of a <script>/<style> or <nav> element leaked;\n"
        "heads: pages that lost an h1-h3 outside navigation; fences: pages with <pre> whose\n"
        "output has no ``` fence; codelinks: pages with Markdown link syntax inside a code\n"
        "block. Lower is better everywhere; md/html only if nothing else got worse."
    )


if __name__ == "__main__":
    main()
