"""File-system helpers shared by config writers and the editing tools."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from pathlib import Path

STALE_TEMP_S = 60.0
"""A temporary file of this module older than this was left by a write that was killed."""


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
