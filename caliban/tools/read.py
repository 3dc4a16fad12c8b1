"""Read: a text file as numbered lines, an image as an image, anything else as a clear error."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from caliban.calls.effects import Effects, path_at
from caliban.messages import ImagePart, TextPart
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput
from caliban.util.text import plural

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_CHARS = 100_000
MAX_IMAGE_BYTES = 5 * 1024 * 1024

DESCRIPTION = f"""\
Reads a file from the local filesystem.

Usage:
- file_path may be absolute or relative to the current working directory.
- By default reads up to {DEFAULT_LIMIT:,} lines from the start of the file. For long files, \
pass offset (the 1-based line number to start at) and limit (how many lines) to read the \
part you need; the result says when more lines remain and which offset to use next.
- Output is in `cat -n` format: the line number, a tab, then the line. The line number and \
tab are not part of the file: never include them in Edit's old_string.
- Lines longer than {MAX_LINE_CHARS:,} characters are cut, with a marker.
- Text in encodings other than UTF-8 (UTF-8/UTF-16 with a byte-order mark, or latin-1) is \
decoded and the encoding named; Edit and Write keep the file's encoding.
- Images (PNG, JPEG, GIF, WebP up to {MAX_IMAGE_BYTES // (1024 * 1024)} MB) are returned as \
images you can see.
- Other binary files (executables, archives, PDFs, …) cannot be read: the error names the \
kind of file and its size.
- Reading a directory is an error: use Glob, or `ls` through Bash.
- Read a file before you Edit or overwrite it: Write and Edit refuse files this session \
has not read.
- You can call several tools in one response; reading several files at once is faster."""


class ReadInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_path: str = Field(
        description="Path of the file to read, absolute or relative to the working directory."
    )
    offset: int | None = Field(
        default=None,
        ge=0,
        description="The line number to start reading from (1-based). Only needed for files "
        "too long to read at once.",
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"How many lines to read (default {DEFAULT_LIMIT:,}).",
    )


class Read(BuiltinTool[ReadInput]):
    name = "Read"
    description = DESCRIPTION
    input_model = ReadInput
    read_only = True

    def subject(self, args: ReadInput) -> str | None:
        return args.file_path

    def effects(self, args: ReadInput, cwd: Path) -> Effects:
        return Effects(reads=(path_at(cwd, args.file_path),))

    async def run(self, args: ReadInput, ctx: CallContext) -> ToolOutput:
        path = _files.resolve(ctx.env, args.file_path)
        cwd = ctx.env.cwd
        shown = _files.display_path(path, cwd)
        if path.is_dir():
            return ToolOutput.error(
                f"{shown} is a directory, not a file. To list it, use Glob (e.g. pattern "
                f"'*' with path '{shown}') or run `ls` with Bash."
            )
        if (problem := _files.not_regular(path, shown)) is not None:
            return ToolOutput.error(problem)
        try:
            size = path.stat().st_size
            file = path.open("rb")
        except FileNotFoundError:
            return ToolOutput.error(_files.not_found_message(path, cwd))
        except OSError as exc:
            return ToolOutput.error(f"Cannot read {shown}: {exc.strerror or exc}")
        with file:
            head = file.read(_files.SAMPLE_BYTES)
            if size == 0 or not head:
                _files.record_read(ctx.env, path)
                return ToolOutput.text(
                    f"{shown} exists but is empty (0 bytes).", summary="empty file"
                )
            if (media_type := _files.image_type(head)) is not None:
                return _read_image(path, shown, file, head, size, media_type, ctx)
            if (kind := _files.binary_kind(path, head)) is not None:
                return ToolOutput.error(
                    f"Cannot read {shown}: it is a binary file ({kind}, "
                    f"{_files.human_size(size)}), not text. Inspect it with Bash instead "
                    "(e.g. `file`, `xxd | head`, `unzip -l`, `pdftotext`)."
                )
            encoding = _files.detect_encoding(head, complete=len(head) < _files.SAMPLE_BYTES)
            file.seek(0)
            output = _read_text(file, shown, encoding, args, path)
        if not output.is_error:
            _files.record_read(ctx.env, path)
        return output


def _read_image(
    path: Path,
    shown: str,
    file: io.BufferedReader,
    head: bytes,
    size: int,
    media_type: str,
    ctx: CallContext,
) -> ToolOutput:
    label = f"{media_type.split('/')[1].upper()} image, {_files.human_size(size)}"
    if size > MAX_IMAGE_BYTES:
        return ToolOutput.error(
            f"{shown} is a {label}: too large to view (the limit is "
            f"{_files.human_size(MAX_IMAGE_BYTES)}). Make a smaller copy with Bash "
            "(e.g. ImageMagick `convert in.png -resize 50% out.png`) and read that."
        )
    data = head + file.read()
    _files.record_read(ctx.env, path)
    encoded = base64.b64encode(data).decode("ascii")
    return ToolOutput(
        content=(
            TextPart(text=f"{shown} ({label})"),
            ImagePart(media_type=media_type, data=encoded),
        ),
        summary=label,
        data={
            "type": "image",
            "file": {"base64": encoded, "type": media_type, "originalSize": size},
        },
    )


def _lines(file: io.BufferedReader, encoding: _files.Encoding) -> Iterator[tuple[str, bool]]:
    """Decoded lines and whether each was cut, streamed (never the whole file in memory)."""
    if encoding.codec.startswith("utf-16"):
        file.seek(len(encoding.bom))
        text = io.TextIOWrapper(file, encoding=encoding.codec, errors="replace", newline=None)
        for line in text:
            line = line.rstrip("\n")
            yield line[:MAX_LINE_CHARS], len(line) > MAX_LINE_CHARS
        text.detach()
        return
    max_bytes = MAX_LINE_CHARS * 4 + 4  # enough bytes for MAX_LINE_CHARS characters
    first = True
    for raw, cut in _files.iter_raw_lines(file, max_bytes):
        if first and encoding.bom:
            raw = raw[len(encoding.bom) :]
        first = False
        line = raw.decode(encoding.codec, "replace")
        yield line[:MAX_LINE_CHARS], cut or len(line) > MAX_LINE_CHARS


def _read_text(
    file: io.BufferedReader, shown: str, encoding: _files.Encoding, args: ReadInput, path: Path
) -> ToolOutput:
    start = max(args.offset or 1, 1)
    limit = args.limit or DEFAULT_LIMIT
    selected: list[str] = []
    chars = 0
    seen = 0
    more = capped = False
    lines = _lines(file, encoding)
    for seen, (line, cut) in enumerate(lines, start=1):
        if seen < start:
            continue
        if cut:
            line += f" … [line cut at {MAX_LINE_CHARS:,} characters]"
        capped = bool(selected) and chars + len(line) > MAX_OUTPUT_CHARS
        if len(selected) == limit or capped:
            more = True
            break
        selected.append(line)
        chars += len(line) + 8
    total = seen + _count_rest(file, lines, encoding) if more else seen
    if not selected:
        if total == 0:
            return ToolOutput.text(f"{shown} contains no lines.", summary="empty file")
        return ToolOutput.error(
            f"{shown} has only {plural(total, 'line')}, so offset {start:,} is past "
            f"the end. Use an offset between 1 and {total:,}."
        )
    last = start + len(selected) - 1
    notes = []
    if more:
        why = f"output is limited to {MAX_OUTPUT_CHARS:,} characters, " if capped else ""
        notes.append(
            f"[{shown} has {total:,} lines; {why}showing lines {start:,}–{last:,}. "
            f"To read more, call Read with offset={last + 1}"
            + (" and a smaller limit.]" if capped else " (and limit for a different amount).]")
        )
    if not encoding.is_utf8:
        notes.append(f"[Decoded as {encoding.label}; Edit and Write keep this encoding.]")
    body = _files.numbered(selected, start)
    text = body + ("\n\n" + "\n".join(notes) if notes else "")
    summary = plural(len(selected), "line") + (f" of {total:,}" if more else "")
    structured = {
        "type": "text",
        "file": {
            "filePath": str(path),
            "content": "\n".join(selected),
            "numLines": len(selected),
            "startLine": start,
            "totalLines": total,
        },
    }
    return ToolOutput.text(text, summary=summary, data=structured)


def _count_rest(
    file: io.BufferedReader, lines: Iterator[tuple[str, bool]], encoding: _files.Encoding
) -> int:
    """Lines left after those consumed, counted without decoding (fast on a 50 MB file)."""
    if encoding.codec.startswith("utf-16"):
        return sum(1 for _ in lines)
    newlines = 0
    last = b"\n"
    while chunk := file.read(1024 * 1024):
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
    return newlines + (0 if last == b"\n" else 1)


__all__ = ["DEFAULT_LIMIT", "MAX_IMAGE_BYTES", "MAX_LINE_CHARS", "Read", "ReadInput"]
