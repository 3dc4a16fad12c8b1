"""A small local web server for WebFetch tests: fixed pages, redirects, errors, and a log.

``/drip?every=S`` answers 200 with a long text body and sends one byte of it every ``S``
seconds (default 2) until the client goes away: a page that never ends, but whose every read
is quick.

``with WebServer() as web:`` serves on 127.0.0.1 (``web.url``); ``web.hits`` lists the paths
requested, with their headers in ``web.headers``. Also runnable as a script (prints its URL
first, then serves until killed) for end-to-end tests that start caliban as a process.
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PAGE = """<!doctype html>
<html><head><title>Test Page</title>
<style>body { color: STYLE-MARKER; }</style>
<script>var marker = "SCRIPT-MARKER";</script></head>
<body>
<nav><a href="/a">NAV-LINKS</a> <a href="/b">more nav</a></nav>
<div role="navigation">ROLE-NAV-MARKER</div>
<main>
<h1>Main Heading</h1>
<p>Paragraph with <a href="/other">a link</a> and <b>bold</b> text. WEB-CONTENT-MARKER.</p>
<ul><li>one</li><li>two</li></ul>
<pre><code>print("code")</code></pre>
<img src="data:image/png;base64,AAAAAAAA" alt="icon">
</main>
<footer>FOOTER</footer>
</body></html>"""

BIG = (
    "<html><body><h1>Big Page</h1>"
    + "".join(f"<p>Paragraph {i}: BIG-MARKER lorem ipsum dolor sit amet.</p>" for i in range(300))
    + "</body></html>"
)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        self.server.headers.append(dict(self.headers.items()))
        port = self.server.server_address[1]
        routes = {
            "/page": (200, "text/html; charset=utf-8", PAGE),
            "/big": (200, "text/html", BIG),
            "/text": (200, "text/plain", "plain text body TEXT-MARKER\n"),
            "/binary": (200, "image/png", "\x89PNG"),
        }
        if self.path in routes:
            status, kind, body = routes[self.path]
            self._send(status, body, {"Content-Type": kind})
        elif self.path == "/redirect-same":
            self._send(302, "", {"Location": "/page"})
        elif self.path == "/redirect-cross":
            self._send(302, "", {"Location": f"http://localhost:{port}/page"})
        elif self.path == "/loop":
            self._send(302, "", {"Location": "/loop"})
        elif self.path.startswith("/drip"):
            self._drip(float(_query(self.path).get("every", "2")))
        else:
            self._send(404, "not here", {"Content-Type": "text/plain"})

    def _send(self, status: int, body: str, headers: dict[str, str]) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drip(self, every: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(10**9))
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(every)
        except OSError:  # the client went away
            pass


def _query(path: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hits: list[str]
    headers: list[dict[str, str]]


class WebServer:
    def __init__(self) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.hits = []
        self.server.headers = []
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def hits(self) -> list[str]:
        return self.server.hits

    @property
    def headers(self) -> list[dict[str, str]]:
        return self.server.headers

    def __enter__(self) -> WebServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    server = WebServer()
    print(server.url, flush=True)
    try:
        server.server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
