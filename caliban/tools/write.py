"""Write: create a file or replace one the session has read, atomically."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from caliban.calls.effects import Effects, path_at
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, Preview, ToolEnv, ToolOutput
from caliban.tools.diff import FileChange, structured_patch
from caliban.tools.edit import EditError, load_text
from caliban.util.fsutil import atomic_write_bytes
from caliban.util.text import plural

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

    def subject(self, args: WriteInput) -> str | None:
        return args.file_path

    def effects(self, args: WriteInput, cwd: Path) -> Effects:
        path = path_at(cwd, args.file_path)
        return Effects(writes=(path,), replaces=(path,))

    def preview(self, args: WriteInput, env: ToolEnv) -> Preview:
        path = _files.resolve(env, args.file_path)
        shown = _files.display_path(path, env.cwd)
        after = args.content.replace("\r\n", "\n")
        if not path.exists():
            return FileChange(path=path, shown=shown, before=None, after=after)
        try:
            before = load_text(path, shown).text
        except EditError as exc:
            return f"(replaces {shown}: {exc})"
        return FileChange(path=path, shown=shown, before=before, after=after)

    async def run(self, args: WriteInput, ctx: CallContext) -> ToolOutput:
        path = _files.resolve(ctx.env, args.file_path)
        shown = _files.display_path(path, ctx.env.cwd)
        if path.is_dir():
            return ToolOutput.error(f"{shown} is a directory; give the path of a file.")
        if (problem := _files.unwritable(path, shown)) is not None:
            return ToolOutput.error(problem)
        existed = path.exists()
        content = args.content
        encoding = _files.UTF8
        note = ""
        before: str | None = None
        if existed:
            if (problem := ctx.env.staleness(path)) is not None:
                return ToolOutput.error(problem)
            try:
                old = path.read_bytes()
            except OSError as exc:
                return ToolOutput.error(f"Cannot read {shown}: {exc.strerror or exc}")
            encoding = _files.detect_encoding(old, complete=True)
            before = encoding.decode(old, errors="replace")
            if _files.uses_crlf(before):
                content = content.replace("\r\n", "\n").replace("\n", "\r\n")
                before = before.replace("\r\n", "\n")
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
        after = args.content.replace("\r\n", "\n")
        return ToolOutput.text(
            f"{verb} {shown}: wrote {plural(lines, 'line')}{note}.",
            summary=f"Wrote {plural(lines, 'line')} to {path.name}",
            change=FileChange(path=path, shown=shown, before=before, after=after),
            data={
                "type": "update" if existed else "create",
                "filePath": str(path),
                "content": args.content,
                "structuredPatch": structured_patch(before, after) if before is not None else [],
                "originalFile": before,
                "userModified": False,
            },
        )


__all__ = ["Write", "WriteInput"]
