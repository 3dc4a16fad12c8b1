"""A seccomp filter for sandboxed commands: no new unix sockets (the Docker socket, the
session bus and the like are ways out of any sandbox), and optionally no network but TCP.

The program is a dozen classic-BPF instructions, assembled here rather than through
libseccomp: the launcher that installs it runs with ``python -I -S`` (no site-packages) to
start in a few milliseconds, and the filter is small enough to read whole (:func:`program`).
It returns ``EPERM`` ("Operation not permitted") for what it refuses, never kills.

What it refuses, on x86-64 and AArch64:

- ``socket(AF_UNIX, …)`` unless unix sockets are allowed (``socketpair`` stays allowed: a
  connected pair reaches nothing outside);
- with ``inet="tcp"``: ``socket`` of ``AF_INET``/``AF_INET6`` unless ``SOCK_STREAM`` (UDP
  and raw sockets would go around Landlock's TCP rules), and of any family but unix, inet
  and netlink (vsock, packet, …);
- with ``inet="none"``: ``AF_INET``/``AF_INET6`` sockets too;
- ``io_uring_setup`` (an io_uring can open sockets without the ``socket`` system call);
- the x32 ABI's system calls, and on x86-64 the 32-bit ``socketcall``/``socket`` (their
  arguments cannot be read by a filter).

Imports only ``ctypes``, ``errno``, ``os`` and ``struct`` (the launcher imports it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

TYPE_CHECKING = False  # not typing's: importing typing would double the launcher's start-up
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Literal

    Inet = Literal["all", "tcp", "none"]

__all__ = ["install", "program", "supported"]

# classic BPF opcodes
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06

_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | errno.EPERM

# offsets in struct seccomp_data (little-endian: the low word of an argument comes first)
_NR, _ARCH = 0, 4
_ARG0, _ARG1 = 16, 24

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, _SOCK_TYPE_MASK = 1, 0xF

_X32_BIT = 0x40000000


class _Arch:
    def __init__(self, audit: int, socket: int, io_uring_setup: int) -> None:
        self.audit = audit
        self.socket = socket
        self.io_uring_setup = io_uring_setup


_X86_64 = _Arch(0xC000003E, socket=41, io_uring_setup=425)
_I386 = _Arch(0x40000003, socket=359, io_uring_setup=425)
_I386_SOCKETCALL = 102
_AARCH64 = _Arch(0xC00000B7, socket=198, io_uring_setup=425)
_ARM = _Arch(0x40000028, socket=281, io_uring_setup=425)

_NATIVE = {"x86_64": (_X86_64, _I386), "aarch64": (_AARCH64, _ARM), "arm64": (_AARCH64, _ARM)}


def supported(machine: str | None = None) -> bool:
    """Whether a filter can be built for this machine's architecture."""
    return (machine or os.uname().machine) in _NATIVE


class _Asm:
    """A tiny assembler: instructions with symbolic jump targets, resolved at the end."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def bytes(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.code):
            out += struct.pack("<HBBI", code, self._offset(index, jt), self._offset(index, jf), k)
        return bytes(out)

    def _offset(self, index: int, target: str | int) -> int:
        if isinstance(target, int):
            return target
        offset = self.labels[target] - index - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"jump to {target} out of range")
        return offset


def program(*, block_unix: bool = True, inet: Inet = "all", machine: str | None = None) -> bytes:
    """The filter as ``struct sock_filter`` bytes (8 per instruction), for ``prctl`` or
    bubblewrap's ``--seccomp``. Raises ValueError on an architecture it does not know."""
    arches = _NATIVE.get(machine or os.uname().machine)
    if arches is None:
        raise ValueError(f"no seccomp filter for {machine or os.uname().machine}")
    native, compat = arches
    a = _Asm()
    a.op(_LD_W_ABS, _ARCH)
    a.op(_JEQ_K, native.audit, "native", 0)
    a.op(_JEQ_K, compat.audit, "compat", "deny")

    a.label("native")
    a.op(_LD_W_ABS, _NR)
    if native is _X86_64:
        a.op(_JGE_K, _X32_BIT, "deny", 0)
    a.op(_JEQ_K, native.socket, "socket", 0)
    a.op(_JEQ_K, native.io_uring_setup, "deny", "allow")

    a.label("socket")
    a.op(_LD_W_ABS, _ARG0)
    a.op(_JEQ_K, AF_UNIX, "deny" if block_unix else "allow", 0)
    if inet == "all":
        a.op(_RET_K, _RET_ALLOW)
    else:
        a.op(_JEQ_K, AF_NETLINK, "allow", 0)
        if inet == "none":
            a.op(_RET_K, _RET_EPERM)
        else:
            a.op(_JEQ_K, AF_INET, "stream", 0)
            a.op(_JEQ_K, AF_INET6, "stream", "deny")
            a.label("stream")
            a.op(_LD_W_ABS, _ARG1)
            a.op(_ALU_AND_K, _SOCK_TYPE_MASK)
            a.op(_JEQ_K, SOCK_STREAM, "allow", "deny")

    a.label("compat")
    a.op(_LD_W_ABS, _NR)
    for number in _compat_refused(compat):
        a.op(_JEQ_K, number, "deny", 0)
    a.op(_RET_K, _RET_ALLOW)

    a.label("allow")
    a.op(_RET_K, _RET_ALLOW)
    a.label("deny")
    a.op(_RET_K, _RET_EPERM)
    return a.bytes()


def _compat_refused(compat: _Arch) -> Iterator[int]:
    yield compat.socket
    yield compat.io_uring_setup
    if compat is _I386:
        yield _I386_SOCKETCALL


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def install(filter_bytes: bytes) -> None:
    """Install the filter on this process (and what it ``exec``s), after setting
    ``no_new_privs``; raises OSError. For the launcher, just before ``exec``."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(filter_bytes, len(filter_bytes))
    fprog = _SockFprog(len(filter_bytes) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {errno.errorcode.get(code, code)}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_SECCOMP): {errno.errorcode.get(code, code)}")
