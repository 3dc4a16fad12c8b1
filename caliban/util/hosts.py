"""One spelling per host, so that ``WebFetch(domain:…)`` rules compare hosts, not text.

An address has many spellings that all reach it: ``127.0.0.1`` is also ``127.1``,
``2130706433``, ``0x7f.1``, ``0177.0.0.1`` (the forms ``inet_aton`` and so ``getaddrinfo``
accept), ``[::ffff:127.0.0.1]`` (IPv4-mapped IPv6), ``127.0.0.1.`` (a trailing dot) and
``127。0。0。1`` (IDNA maps ideographic full stops to dots). A name is case-insensitive, may end
with a dot, and may be written in Unicode or as its IDNA (``xn--``) form.
:func:`canonical_host` turns each into one spelling: dotted-quad IPv4, compressed IPv6 (an
IPv4-mapped or NAT64 address as the IPv4 address it reaches), a lower-case ASCII name without
the trailing dot.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["ascii_name", "canonical_host", "ip_address", "is_loopback"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
"""The well-known NAT64 prefix: its addresses reach the IPv4 address in their last 32 bits."""
_PART: Final = re.compile(r"0[xX]0*[0-9a-fA-F]{0,8}|0+[0-7]{0,11}|[1-9][0-9]{0,9}")
"""One part of an ``inet_aton`` address: hexadecimal, octal (a leading 0) or decimal, any
leading zeros and at most 32 bits' worth of digits (longer is no address: a name)."""


def canonical_host(host: str) -> str:
    """The one spelling of ``host`` (a URL's host or a rule's): see the module docstring.
    Text that is no address and no valid IDNA name comes back lower-cased, without
    brackets or a trailing dot."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = ascii_name(text.rstrip(".")).rstrip(".")
    address = ip_address(text)
    return str(address) if address is not None else text


def ip_address(text: str) -> IPAddress | None:
    """The address ``text`` spells, in any of the forms above (an IPv6 zone ``%eth0`` is
    ignored), or None when it is a name."""
    if ":" in text:
        try:
            address = ipaddress.IPv6Address(text.strip("[]").split("%", 1)[0])
        except ValueError:
            return None
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        return address
    return _inet_aton(text.rstrip("."))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine: ``localhost``, a ``*.localhost`` name (RFC 6761), or
    a loopback address in any spelling."""
    text = canonical_host(host)
    if text == "localhost" or text.endswith(".localhost"):
        return True
    address = ip_address(text)
    return address is not None and address.is_loopback


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """``inet_aton``'s reading: ``a.b.c.d``, ``a.b.c`` (c: 16 bits), ``a.b`` (b: 24 bits) or
    ``a`` (32 bits), each part decimal, octal or hexadecimal."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_PART.fullmatch(p) for p in parts):
        return None
    values = [
        int(p[2:] or "0", 16) if p[:2] in ("0x", "0X") else int(p, 8 if p[0] == "0" else 10)
        for p in parts
    ]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for index, value in enumerate(head):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def ascii_name(text: str) -> str:
    """``text`` lower-cased, and a Unicode name as the ASCII name it is looked up by (the
    UTS 46 mapping, as browsers do); a name IDNA refuses is left as it is."""
    text = text.lower()
    if text.isascii():
        return text
    import idna

    try:
        return idna.encode(text, uts46=True).decode("ascii")
    except idna.IDNAError:
        return text
