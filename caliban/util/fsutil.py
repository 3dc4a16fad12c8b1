"""File-system helpers shared by config writers and the editing tools."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from caliban.errors import ConfigError

STALE_TEMP_S = 60.0
"""A temporary file of this module older than this was left by a write that was killed."""
LOCK_WAIT_S = 10.0
"""How long :func:`updating` waits for another process's read-modify-write to end."""


def resolved(path: Path) -> Path:
    """``path`` made absolute with symlinks followed; where they loop, or the name cannot
    be a file's (a NUL byte, a lone surrogate), normalised only (``Path.resolve`` raises
    there, and nothing can be written or read through such a name)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.normpath(path.absolute()))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never half.

    Writes a temporary file (``.NAME.XXXXXXXX.tmp``) in the same directory, fsyncs it and
    renames it over ``path``. Parent directories are created. An existing file keeps its
    permission bits. Temporary files of ``path`` left by a killed write are removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        if mode is not None:
            os.chmod(tmp_name, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def atomic_write_text(path: Path, text: str, *, encoding: str = "utf-8") -> None:
    """:func:`atomic_write_bytes` for text; newlines are written exactly as given."""
    atomic_write_bytes(path, text.encode(encoding))


def remove_stale_temporaries(path: Path, *, older_than: float = STALE_TEMP_S) -> list[Path]:
    """Remove the temporary files a killed :func:`atomic_write_bytes` of ``path`` left
    (older than ``older_than`` seconds, so a write in progress elsewhere is left alone);
    returns them."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[A-Za-z0-9_]{{8}}\.tmp")
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return []
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and now - entry.stat().st_mtime > older_than:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def prune_oldest(directory: Path, pattern: str, keep: int) -> None:
    """Delete the least recently modified files matching ``pattern`` in ``directory`` beyond
    the ``keep`` newest (caches that grow with every new key)."""
    files = list(directory.glob(pattern))
    if len(files) <= keep:
        return
    files.sort(key=lambda f: f.stat().st_mtime)
    for f in files[: len(files) - keep]:
        f.unlink(missing_ok=True)


@contextlib.contextmanager
def updating(path: Path, *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the lock for a read-modify-write of ``path`` while the block runs: read it,
    change it, :func:`atomic_write_bytes` it, and no other process doing the same loses or
    undoes the change (``caliban trust B`` racing ``caliban trust --revoke A``).

    The lock is an ``flock`` on ``path``'s directory (created if missing): not on the file,
    which an atomic write replaces, and not on a lock file, which would be left in the
    project. Raises :class:`ConfigError` after ``wait_s`` seconds of another holder; where
    the file system cannot lock at all, the block runs unlocked.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConfigError(
                        f"{path}: another process has kept it locked for {wait_s:g} s; "
                        "try again when it is done"
                    ) from None
                time.sleep(0.01)  # no event to wait on: a lock is released silently
            except OSError as exc:
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                break  # a file system without locks
        yield
    finally:
        os.close(fd)  # releases the lock
