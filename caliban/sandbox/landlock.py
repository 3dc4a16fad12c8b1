"""Landlock through ``ctypes``: a process restricts itself (and what it ``exec``s) to the
files it may read and write and the TCP ports it may connect to. Needs no root and no
namespaces, so it works where bubblewrap cannot (Ubuntu 24.04 blocks unprivileged user
namespaces by default); Linux 5.13 or later, TCP rules from 6.7 (ABI 4).

Landlock only grants: a right given on a directory holds for everything below it. So
"everything but ``~/.ssh``" is granted as the siblings of ``~/.ssh`` and of each directory
above it (:func:`grants_except`); a file created later directly in such a directory is not
readable. For the same reason a path *inside* a writable directory cannot be kept
read-only or unreadable: that is bubblewrap's job (see :mod:`caliban.sandbox.bubblewrap`).

Imports only the standard library (the launcher imports it with ``python -I -S``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

TYPE_CHECKING = False  # not typing's: the launcher imports this module and no more
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["abi", "grants_except", "restrict"]

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights that mean something on a file (a rule on a file may grant no others)."""

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
DEVICE_WRITES = ("/dev/null", "/dev/zero", "/dev/full")
"""Devices a sandboxed command may write: its ``> /dev/null`` must work."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if os.uname().sysname != "Linux":
        return 0
    version = _libc().syscall(
        _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def _handled_fs(version: int) -> int:
    """Every file-system right the kernel of ``version`` knows (all of them are handled:
    what is not granted is denied)."""
    rights = (MAKE_SYM << 1) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def grants_except(top: str, excluded: Iterable[str]) -> tuple[list[str], list[str]]:
    """What to grant so that everything under ``top`` is covered except ``excluded``
    (absolute paths): the paths to grant whole, and the directories split open on the way
    to an excluded path (to be granted as listable only). ``top`` alone when nothing
    excluded lies in it. Symbolic links are skipped: what they lead to is granted, or not,
    under its own name."""
    hidden = {os.path.normpath(p) for p in excluded}
    whole: list[str] = []
    split: list[str] = []
    _grants(os.path.normpath(top), hidden, whole, split)
    return whole, split


def _grants(top: str, hidden: set[str], whole: list[str], split: list[str]) -> None:
    if top in hidden:
        return
    prefix = top.rstrip("/") + "/"
    if not any(path.startswith(prefix) for path in hidden):
        whole.append(top)
        return
    split.append(top)
    try:
        entries = list(os.scandir(top))
    except OSError:
        return
    for entry in entries:
        if not entry.is_symlink():
            _grants(entry.path, hidden, whole, split)


def restrict(
    *,
    read: Sequence[str],
    write: Sequence[str],
    connect_ports: Sequence[int] | None,
    bind: bool = False,
    listable: Sequence[str] = (),
) -> int:
    """Restrict this process to reading under ``read``, writing under ``write`` (plus
    :data:`DEVICE_WRITES`), listing the directories ``listable`` (the directories above a
    hidden path, whose other entries are granted one by one), and, when ``connect_ports`` is
    not None, connecting over TCP only to those ports (binding only with ``bind``). Sets
    ``no_new_privs``. Returns the ABI used; raises OSError when Landlock is missing or the
    ports cannot be restricted (ABI below 4) — a sandbox that cannot apply fails, it does
    not run unconfined.
    """
    libc = _libc()
    version = abi()
    if version < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available in this kernel")
    if connect_ports is not None and version < 4:
        raise OSError(errno.ENOSYS, f"Landlock ABI {version} cannot restrict TCP (needs 4)")
    handled = _handled_fs(version)
    attr = _RulesetAttr(handled_access_fs=handled)
    if connect_ports is not None:
        attr.handled_access_net = NET_CONNECT_TCP | (0 if bind else NET_BIND_TCP)
    if version >= 6:
        # No signals to processes outside the sandbox (caliban itself), no abstract sockets.
        attr.scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else 16 if version >= 4 else 8
    ruleset = libc.syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    try:
        writes = handled & ~READ
        for path in listable:
            _add_path(libc, ruleset, path, READ_DIR)
        for path in read:
            _add_path(libc, ruleset, path, READ | (IOCTL_DEV & handled))
        for path in write:
            _add_path(libc, ruleset, path, writes)
        for path in DEVICE_WRITES:
            _add_path(libc, ruleset, path, WRITE_FILE)
        for port in connect_ports or ():
            rule = _NetPortAttr(allowed_access=NET_CONNECT_TCP, port=port)
            if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(rule), 0):
                _fail(f"landlock_add_rule(port {port})")
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return version


def _add_path(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since the profile was made: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        if not rights:
            return
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
            _fail(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _fail(what: str) -> None:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")
