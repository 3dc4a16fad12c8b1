"""The domain-filtering proxy, spoken to with raw sockets: plain HTTP and CONNECT tunnels to
allowed hosts, 403 for others (remembered for explaining failures), malformed, oversized
and slow requests, a listening socket handed to it (bubblewrap's, made in a command's
network namespace), and the domain patterns."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hang import HANG_S
from sandbox_helpers import http_server

from caliban.sandbox import proxy as proxy_module
from caliban.sandbox.proxy import DomainPolicy, DomainProxy


@pytest.fixture
def proxy() -> Iterator[DomainProxy]:
    running = DomainProxy(
        DomainPolicy(allowed=("localhost", "*.example.test"), denied=("bad.example.test",)).refusal
    )
    running.start()
    yield running
    running.close()


def _exchange(proxy: DomainProxy, request: bytes, *, port: int | None = None) -> bytes:
    sock = socket.create_connection(("127.0.0.1", port or proxy.port))
    with sock:
        sock.settimeout(30)
        sock.sendall(request)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
            if request.startswith(b"CONNECT") and b"hello" in b"".join(chunks):
                break
    return b"".join(chunks)


def test_plain_http_to_an_allowed_host(proxy: DomainProxy) -> None:
    with http_server() as port:
        answer = _exchange(
            proxy, f"GET http://localhost:{port}/x HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
        )
    assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200")
    assert b"hello from the test server" in answer


def test_other_hosts_get_403_and_are_remembered(proxy: DomainProxy) -> None:
    mark = proxy.mark()
    with http_server() as port:
        answer = _exchange(proxy, f"GET http://192.0.2.1:{port}/ HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert b"blocked by caliban's sandbox: 192.0.2.1 is not in the sandbox's allowed" in answer
    assert proxy.blocked_since(mark) == ["192.0.2.1 is not in the sandbox's allowed domains"]
    assert proxy.blocked_since(proxy.mark()) == []


def test_connect_tunnels_to_allowed_hosts_only(proxy: DomainProxy) -> None:
    with http_server() as port:
        tunnel = _exchange(
            proxy,
            f"CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.0\r\n\r\n".encode(),
        )
        refused = _exchange(proxy, b"CONNECT evil.invalid:443 HTTP/1.1\r\n\r\n")
    assert tunnel.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\n")
    assert b"hello from the test server" in tunnel
    assert refused.startswith(b"HTTP/1.1 403")


def test_a_socket_handed_to_it_is_served_the_same_until_stopped(proxy: DomainProxy) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    other = listener.getsockname()[1]
    stop = proxy.serve(listener)
    with http_server() as port:
        answer = _exchange(
            proxy, f"GET http://localhost:{port}/ HTTP/1.1\r\n\r\n".encode(), port=other
        )
        refused = _exchange(proxy, b"GET http://elsewhere.test/ HTTP/1.1\r\n\r\n", port=other)
    assert b"hello from the test server" in answer
    assert refused.startswith(b"HTTP/1.1 403")
    stop()
    deadline = time.monotonic() + HANG_S
    while listener.fileno() != -1 and time.monotonic() < deadline:
        time.sleep(0.01)  # closed on the proxy's loop
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", other), timeout=5).close()


def test_a_socket_handed_to_a_stopped_proxy_is_closed() -> None:
    stopped = DomainProxy(DomainPolicy().refusal)
    listener = socket.create_server(("127.0.0.1", 0))
    with pytest.raises(OSError, match="not running"):
        stopped.serve(listener)
    assert listener.fileno() == -1


def test_a_second_request_on_the_connection_goes_nowhere_else(proxy: DomainProxy) -> None:
    """The server is asked to close after the first request, so a second one naming
    another host cannot ride the connection made for the first."""
    with http_server() as port:
        answer = _exchange(
            proxy,
            (
                f"GET http://localhost:{port}/ HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"
                "GET http://127.0.0.1:1/ HTTP/1.1\r\n\r\n"
            ).encode(),
        )
    assert answer.count(b"hello from the test server") == 1


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NONSENSE\r\n\r\n",
        b"GET /relative HTTP/1.1\r\n\r\n",
        b"GET ftp://localhost/ HTTP/1.1\r\n\r\n",
        b"CONNECT localhost HTTP/1.1\r\n\r\n",
        b"CONNECT lo$calhost:80 HTTP/1.1\r\n\r\n",
    ],
)
def test_requests_it_cannot_read_get_400(proxy: DomainProxy, request_bytes: bytes) -> None:
    assert _exchange(proxy, request_bytes).startswith(b"HTTP/1.1 400")


def test_an_oversized_head_is_dropped(proxy: DomainProxy) -> None:
    big = b"GET http://localhost/ HTTP/1.1\r\nX: " + b"a" * (proxy_module.MAX_HEAD_BYTES + 10)
    assert _exchange(proxy, big + b"\r\n\r\n") == b""


def test_a_slow_head_is_dropped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(proxy_module, "HEAD_TIMEOUT_S", 0.2)
    slow = DomainProxy(DomainPolicy().refusal)
    slow.start()
    try:
        with socket.create_connection(("127.0.0.1", slow.port)) as sock:
            sock.settimeout(30)
            sock.sendall(b"GET http://localhost/ HTTP/1.1\r\n")  # and nothing more
            assert sock.recv(100) == b""  # closed by the proxy, not by our timeout
    finally:
        slow.close()


def test_close_stops_listening() -> None:
    running = DomainProxy(DomainPolicy().refusal)
    running.start()
    port = running.port
    threads = threading.active_count()
    running.close()
    assert threading.active_count() == threads - 1
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("localhost", False),
        ("LOCALHOST", False),
        ("api.example.test", False),
        ("example.test", True),  # *.x covers subdomains, not x itself (Claude Code's rule)
        ("bad.example.test", True),  # denied beats allowed
        ("localhost.evil", True),
        ("127.0.0.1", False),  # localhost covers every loopback address, as in WebFetch rules
        ("192.0.2.1", True),
    ],
)
def test_domain_policy(host: str, refused: bool) -> None:
    policy = DomainPolicy(allowed=("localhost", "*.example.test"), denied=("bad.example.test",))
    assert (policy.refusal(host) is not None) is refused
