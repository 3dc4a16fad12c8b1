"""Hosts in one spelling (caliban.util.hosts), and WebFetch(domain:…) rules compared in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from caliban.permissions.rules import Rule, domain_matches
from caliban.util.hosts import canonical_host, is_loopback


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.000.000.001", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("127。0。0。1", "127.0.0.1"),
        ("１２７.0.0.1", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("::ffff:7f00:1", "127.0.0.1"),
        ("[64:ff9b::7f00:1]", "127.0.0.1"),  # NAT64
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("[::1%25lo]", "::1"),
        ("169.254.169.254", "169.254.169.254"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("Example.COM.", "example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("ＥＸＡＭＰＬＥ.com", "example.com"),
        # not addresses: what getaddrinfo would look up as names
        ("1.2.3.256", "1.2.3.256"),
        ("08.1.1.1", "08.1.1.1"),
        ("4294967296", "4294967296"),
        ("1" * 5000, "1" * 5000),  # past Python's int() digit limit: a name, not a crash
        ("0x" + "0" * 40 + "7f000001", "127.0.0.1"),
    ],
)
def test_every_spelling_of_a_host_has_one_canonical_form(spelling: str, canonical: str) -> None:
    assert canonical_host(spelling) == canonical


def test_loopback_names_and_addresses() -> None:
    for host in ("localhost", "LOCALHOST.", "app.localhost", "127.1", "[::1]", "0x7f000002"):
        assert is_loopback(host), host
    for host in ("localhost.example.com", "10.0.0.1", "example.com"):
        assert not is_loopback(host), host


@pytest.mark.parametrize(
    ("pattern", "host", "matches"),
    [
        ("domain:127.0.0.1", "127.1", True),
        ("domain:127.1", "127.0.0.1", True),
        ("domain:127.0.0.1", "[::ffff:127.0.0.1]", True),
        ("domain:[::ffff:7f00:1]", "127.0.0.1", True),
        ("domain:[::1]", "0:0:0:0:0:0:0:1", True),
        ("domain:localhost", "127.0.0.5", True),
        ("domain:localhost", "::1", True),
        ("domain:localhost", "10.0.0.1", False),
        ("domain:127.0.0.1", "localhost", False),  # a name: checked when it resolves
        ("domain:bücher.de", "xn--bcher-kva.de", True),
        ("domain:*.bücher.de", "www.xn--bcher-kva.de", True),
        ("domain:example.com", "EXAMPLE.com.", True),
        ("domain:*.example.com", "a.example.com.", True),
        ("domain:*.example.com", "example.com", False),
        ("domain:127.0.0.1", "127.0.0.2", False),
    ],
)
def test_domain_rules_compare_hosts_not_text(pattern: str, host: str, matches: bool) -> None:
    assert domain_matches(pattern, host) is matches
    rule = Rule.parse(f"WebFetch({pattern})")
    assert rule.matches("WebFetch", host, project_root=Path("/")) is matches
