"""Write: create a file or replace one the session has read, atomically."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from caliban.fsutil import atomic_write_bytes
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput

DESCRIPTION = """\
Writes a file to the local filesystem, creating parent directories as needed.

Usage:
- file_path may be absolute or relative to the current working directory.
- Overwrites the file if it exists. To overwrite an existing file you must have read it \
with Read in this session, and it must not have changed since; otherwise the call fails \
and asks you to Read it first.
- Prefer Edit for changing part of an existing file: it sends only the change.
- An existing file keeps its encoding (e.g. latin-1, UTF-16) and, when it used CRLF line \
endings, its CRLF line endings. New files are UTF-8.
- The file is replaced atomically and keeps its permissions.
- Do not create documentation or README files unless the user asks for them."""


class WriteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_path: str = Field(
        description="Path of the file to write, absolute or relative to the working directory."
    )
    content: str = Field(description="The complete new content of the file.")


class Write(BuiltinTool[WriteInput]):
    name = "Write"
    description = DESCRIPTION
    input_model = WriteInput

    def permission_subject(self, arguments: Mapping[str, Any]) -> str | None:
        return _files.file_path_subject(arguments)

    async def run(self, args: WriteInput, ctx: CallContext) -> ToolOutput:
        path = _files.resolve(ctx.env, args.file_path)
        shown = _files.display_path(path, ctx.env.cwd)
        if path.is_dir():
            return ToolOutput.error(f"{shown} is a directory; give the path of a file.")
        existed = path.exists()
        content = args.content
        encoding = _files.UTF8
        note = ""
        if existed:
            if (problem := _files.staleness(ctx.env, path)) is not None:
                return ToolOutput.error(problem)
            try:
                old = path.read_bytes()
            except OSError as exc:
                return ToolOutput.error(f"Cannot read {shown}: {exc.strerror or exc}")
            encoding = _files.detect_encoding(old, complete=True)
            old_text = encoding.decode(old, errors="replace")
            if "\r\n" in old_text and "\n" not in old_text.replace("\r\n", ""):
                content = content.replace("\r\n", "\n").replace("\n", "\r\n")
        try:
            data = encoding.encode(content)
        except UnicodeEncodeError:
            data = content.encode("utf-8")
            note = f" (as UTF-8: the content cannot be encoded as {encoding.label})"
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            return ToolOutput.error(f"Cannot write {shown}: {exc.strerror or exc}")
        _files.record_read(ctx.env, path)
        lines = _files.count_lines(args.content)
        verb = "Updated" if existed else "Created"
        return ToolOutput.text(
            f"{verb} {shown}: wrote {_files.plural(lines, 'line')}{note}.",
            summary=f"Wrote {_files.plural(lines, 'line')} to {_short(path)}",
        )


def _short(path: Path) -> str:
    return path.name


__all__ = ["Write", "WriteInput"]
