"""Helpers shared by the file tools: paths, encodings, binary detection, ripgrep, truncation."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import difflib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from caliban.exec import PIPE, Command, spawn, stop_group
from caliban.tools.base import ToolEnv

SAMPLE_BYTES = 64 * 1024
"""How much of a file is sniffed for its encoding and for binary content."""


# ---------------------------------------------------------------------------- paths


def resolve(env: ToolEnv, path: str) -> Path:
    """``path`` made absolute against the working directory, normalised (symlinks resolved)."""
    return env.resolve(path).resolve()


def display_path(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when it lies under it, else absolute."""
    try:
        relative = path.relative_to(cwd)
    except ValueError:
        try:
            relative = path.relative_to(cwd.resolve())
        except ValueError:
            return str(path)
    return str(relative) if str(relative) != "." else "."


def closest_names(path: Path, limit: int = 3) -> list[str]:
    """Existing names close to a missing ``path``, from its nearest existing directory."""
    directory = path.parent
    missing_parts: list[str] = []
    while not directory.is_dir():
        if directory.parent == directory:
            return []
        missing_parts.insert(0, directory.name)
        directory = directory.parent
    try:
        names = [entry.name for entry in os.scandir(directory)]
    except OSError:
        return []
    wanted = missing_parts[0] if missing_parts else path.name
    close = difflib.get_close_matches(wanted, names, n=limit, cutoff=0.5)
    if not close and not missing_parts:
        stem = path.stem.lower()
        close = sorted(n for n in names if stem and Path(n).stem.lower() == stem)[:limit]
    return [str(directory / name) for name in close]


def not_found_message(path: Path, cwd: Path, *, what: str = "File") -> str:
    message = f"{what} does not exist: {path}"
    if not path.parent.is_dir():
        message += f" (directory {path.parent} does not exist either)"
    suggestions = closest_names(path)
    if suggestions:
        shown = ", ".join(display_path(Path(s), cwd) for s in suggestions)
        message += f". Did you mean: {shown}?"
    else:
        message += ". Use Glob to find files by name."
    return message


def not_regular(path: Path, shown: str) -> str | None:
    """Why ``path`` is not a file the tools read or write: a FIFO (opening it would wait for
    a writer forever), a device (``/dev/zero`` never ends), a socket. None for a regular file
    or a path that does not exist."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = (
        "a FIFO (named pipe)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    return f"{shown} is {kind}, not a regular file; the file tools only read and write files."


def unwritable(path: Path, shown: str) -> str | None:
    """Why ``path`` must not be written: not a regular file, or a file the user cannot
    write or marked read-only (no write bit: even root's atomic rename must not replace
    it). None when it may be written or does not exist yet."""
    if (problem := not_regular(path, shown)) is not None:
        return problem
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if mode & 0o222 == 0 or not os.access(path, os.W_OK):
        return (
            f"{shown} is read-only (mode {stat.S_IMODE(mode):04o}), so it was not changed. "
            "If it should change, ask the user to make it writable."
        )
    return None


# ---------------------------------------------------------------------------- sizes and text


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count_lines(text: str) -> int:
    """Lines as an editor counts them: a trailing newline does not start a new line."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def uses_crlf(text: str) -> bool:
    """Whether every line break in ``text`` is CRLF (and there is at least one): such a
    file is edited with LF newlines and written back with CRLF."""
    return "\r\n" in text and "\n" not in text.replace("\r\n", "")


def numbered(lines: list[str], first: int) -> str:
    """``cat -n`` style: right-aligned line number, a tab, the line."""
    return "\n".join(f"{number:>6}\t{line}" for number, line in enumerate(lines, start=first))


# ---------------------------------------------------------------------------- encodings


@dataclass(frozen=True, kw_only=True, slots=True)
class Encoding:
    """How a text file is encoded: the codec, the byte-order mark it starts with, a label."""

    codec: str
    bom: bytes = b""
    label: str = "UTF-8"

    @property
    def is_utf8(self) -> bool:
        return self.codec == "utf-8" and not self.bom

    def decode(self, data: bytes, errors: str = "strict") -> str:
        if self.bom and data.startswith(self.bom):
            data = data[len(self.bom) :]
        return data.decode(self.codec, errors)

    def encode(self, text: str) -> bytes:
        return self.bom + text.encode(self.codec)


UTF8 = Encoding(codec="utf-8")
LATIN1 = Encoding(codec="latin-1", label="latin-1 (not valid UTF-8)")
_BOMS = (
    (codecs.BOM_UTF8, Encoding(codec="utf-8", bom=codecs.BOM_UTF8, label="UTF-8 with BOM")),
    (codecs.BOM_UTF16_LE, Encoding(codec="utf-16-le", bom=codecs.BOM_UTF16_LE, label="UTF-16 LE")),
    (codecs.BOM_UTF16_BE, Encoding(codec="utf-16-be", bom=codecs.BOM_UTF16_BE, label="UTF-16 BE")),
)


def detect_encoding(sample: bytes, *, complete: bool) -> Encoding:
    """UTF-8, UTF-8/UTF-16 with a BOM, else latin-1 (which decodes any bytes).

    ``complete`` says whether ``sample`` is the whole file; if not, a multi-byte character
    cut at the end of the sample does not count against UTF-8.
    """
    for bom, encoding in _BOMS:
        if sample.startswith(bom):
            return encoding
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=complete)
    except UnicodeDecodeError:
        return LATIN1
    return UTF8


def decode_file(data: bytes) -> tuple[str, Encoding]:
    """Decode a whole file. UTF-8 is checked against every byte, not just a sample."""
    encoding = detect_encoding(data, complete=True)
    return encoding.decode(data), encoding


# ---------------------------------------------------------------------------- binary files

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"\x7fELF", "ELF executable"),
    (b"PK\x03\x04", "zip archive"),
    (b"PK\x05\x06", "zip archive"),
    (b"\x1f\x8b", "gzip archive"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-zip archive"),
    (b"(\xb5/\xfd", "zstd archive"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x00asm", "WebAssembly module"),
    (b"\xca\xfe\xba\xbe", "Java class file or Mach-O binary"),
    (b"\xcf\xfa\xed\xfe", "Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "Mach-O executable"),
    (b"MZ", "Windows executable"),
    (b"OggS", "Ogg media"),
    (b"fLaC", "FLAC audio"),
    (b"ID3", "MP3 audio"),
    (b"\x00\x00\x01\x00", "ICO image"),
    (b"wOFF", "WOFF font"),
    (b"wOF2", "WOFF2 font"),
)

_EXTENSIONS = {
    ".pyc": "Python bytecode",
    ".so": "shared library",
    ".dylib": "shared library",
    ".dll": "Windows library",
    ".o": "object file",
    ".a": "static library",
    ".class": "Java class file",
    ".jar": "Java archive",
    ".mp4": "MP4 video",
    ".mov": "QuickTime video",
    ".mp3": "MP3 audio",
    ".wav": "WAV audio",
    ".ttf": "TrueType font",
    ".otf": "OpenType font",
    ".ico": "ICO image",
    ".bmp": "BMP image",
    ".tiff": "TIFF image",
    ".psd": "Photoshop image",
    ".xlsx": "Excel workbook",
    ".docx": "Word document",
    ".pptx": "PowerPoint presentation",
    ".bin": "binary data",
    ".dat": "binary data",
    ".db": "database file",
    ".sqlite": "SQLite database",
    ".parquet": "Parquet file",
    ".npy": "NumPy array",
    ".pkl": "Python pickle",
}


def image_type(head: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP image, from its first bytes."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def binary_kind(path: Path, head: bytes) -> str | None:
    """What kind of binary file this is, or None when it looks like text."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF8)):
        return None
    if head[:4] == b"RIFF":
        return {b"WEBP": "WebP image", b"WAVE": "WAV audio", b"AVI ": "AVI video"}.get(
            head[8:12], "RIFF media file"
        )
    if len(head) > 262 and head[257:262] == b"ustar":
        return "tar archive"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if magic == b"MZ" and b"\x00" not in head[:512]:
                continue  # a text file that happens to start with "MZ"
            return kind
    if b"\x00" in head[:8192]:
        return _EXTENSIONS.get(path.suffix.lower(), "binary data")
    return None


# ---------------------------------------------------------------------------- streaming lines


def iter_raw_lines(file: object, max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Lines of a binary file without their line break, each at most ``max_bytes`` long.

    Yields ``(line, cut)``; ``cut`` is true when the line was longer and its tail skipped,
    so a file made of one 50 MB line never sits in memory whole.
    """
    readline = file.readline  # type: ignore[attr-defined]
    while True:
        raw: bytes = readline(max_bytes)
        if not raw:
            return
        cut = False
        if not raw.endswith(b"\n") and len(raw) == max_bytes:
            cut = True
            while (rest := readline(max_bytes)) and not rest.endswith(b"\n"):
                pass
        yield raw.rstrip(b"\n").removesuffix(b"\r"), cut


def mtime_ns(path: Path) -> int:
    """``path``'s modification time (0 when it cannot be read): newest-first sorting."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


# ---------------------------------------------------------------------------- ripgrep


def read_denied_rule(env: ToolEnv, tool: str, path: Path) -> str | None:
    """The deny rule forbidding ``tool`` to read ``path`` (a search result), or None; a
    symbolic link is also checked by its target, so a link cannot reveal a denied file."""
    rule = env.read_denied(tool, Path(os.path.normpath(path)))
    if rule is None and path.is_symlink():
        rule = env.read_denied(tool, path.resolve())
    return rule


def denied_note(files: int, rules: Iterable[str]) -> str:
    """``[2 files left out: the permission rule Read(secrets/**) denies reading them]``."""
    named = list(dict.fromkeys(rules))
    plural_rules = len(named) > 1
    return (
        f"[{files:,} file{'s' if files != 1 else ''} left out: the permission "
        f"rule{'s' if plural_rules else ''} {', '.join(named)} "
        f"den{'y' if plural_rules else 'ies'} reading {'it' if files == 1 else 'them'}]"
    )


class RipgrepMissing(Exception):
    pass


def find_rg() -> str:
    """The ``rg`` executable: on PATH, else next to the running Python (the venv's bin)."""
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise RipgrepMissing(
        "ripgrep (rg) is not installed, so Glob and Grep cannot run. Install caliban's "
        "'ripgrep' dependency (pip install ripgrep) or put rg on PATH; meanwhile use Bash "
        "with find or grep."
    )


RG_BASE_ARGS = ("--no-config", "--hidden", "--no-require-git", "--glob", "!.git")
"""Search hidden files too, but never inside .git; honour .gitignore even outside a git repo."""


@contextlib.contextmanager
def glob_filter(globs: list[str]) -> Iterator[list[str]]:
    """rg arguments keeping only files that match ``globs`` (``!glob`` excludes).

    ``rg --glob`` would also pull in files that .gitignore excludes (its globs override
    ignore rules), so the globs go into an ignore file instead: "ignore everything except
    directories and these", which .gitignore still outranks. Globs are matched relative to
    rg's working directory.
    """
    args: list[str] = []
    include: list[str] = []
    for glob in globs:
        if glob.startswith("!"):
            args += ["--glob", glob]
        elif glob := glob.removeprefix("./"):
            include.append(glob)
    if not include:
        yield args
        return
    fd, name = tempfile.mkstemp(prefix="caliban-glob-", suffix=".ignore")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write("*\n!*/\n" + "".join(f"!{glob}\n" for glob in include))
        yield [*args, "--ignore-file", name]
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


@dataclass(frozen=True, kw_only=True, slots=True)
class RgResult:
    lines: list[str]
    """Output lines, at most ``keep`` of them."""
    total_lines: int
    stderr: str
    returncode: int
    timed_out: bool = False
    dropped: int = 0
    """Records the ``shown`` callback left out (not counted in ``total_lines``)."""


def _as_is(record: str) -> str | None:
    return record


async def run_rg(
    args: list[str],
    *,
    cwd: Path,
    keep: int,
    timeout_s: float = 60.0,
    separator: bytes = b"\n",
    shown: Callable[[str], str | None] = _as_is,
) -> RgResult:
    """Run ``rg`` and read its output record by record, keeping the first ``keep``.

    Records end with ``separator`` (a newline, or NUL with ``rg --null --files``). Each
    decoded record goes through ``shown``, which returns the line to show (it may rewrite
    it) or None to leave it out (a file the permission rules deny), so the totals count only
    what may be shown.
    Output past ``keep`` records is counted, not stored. The process is killed on timeout
    or cancellation.
    """
    proc = await spawn(Command(argv=(find_rg(), *args), cwd=cwd), stdout=PIPE, stderr=PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    kept: list[str] = []
    total = dropped = 0

    async def read_stdout() -> None:
        nonlocal total, dropped
        assert proc.stdout is not None
        while True:
            try:
                raw = await proc.stdout.readuntil(separator)
            except asyncio.IncompleteReadError as end:
                raw = end.partial
            except asyncio.LimitOverrunError as long:  # a record longer than the buffer
                raw = await proc.stdout.read(max(long.consumed, 64 * 1024))
            if not raw:
                return
            record = shown(raw.decode("utf-8", "replace").removesuffix(separator.decode()))
            if record is None:
                dropped += 1
                continue
            total += 1
            if len(kept) < keep:
                kept.append(record.rstrip("\r\n"))

    async def read_all() -> bytes:
        assert proc.stderr is not None
        _, err = await asyncio.gather(read_stdout(), proc.stderr.read())
        await proc.wait()
        return err

    timed_out = False
    try:
        stderr = await asyncio.wait_for(read_all(), timeout_s)
    except TimeoutError:
        timed_out = True
        stderr = b""
        await stop_group(proc, grace=0)
    except asyncio.CancelledError:
        await stop_group(proc, grace=0)
        raise
    finally:
        proc.close()
    return RgResult(
        lines=kept,
        total_lines=total,
        stderr=stderr.decode("utf-8", "replace").strip(),
        returncode=proc.returncode if proc.returncode is not None else -1,
        timed_out=timed_out,
        dropped=dropped,
    )


# ---------------------------------------------------------------------------- freshness


def record_read(env: ToolEnv, path: Path) -> None:
    with contextlib.suppress(OSError):
        env.file_reads[path] = path.stat().st_mtime_ns
