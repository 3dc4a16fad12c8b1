"""Edit: exact string replacement in a file the session has read.

The file keeps its encoding and its line endings: a CRLF file is matched with LF newlines
and written back with CRLF.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from caliban.calls.effects import Effects, path_at
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, Preview, ToolEnv, ToolOutput
from caliban.tools.diff import FileChange, structured_patch
from caliban.util.background import start_in_daemon_thread
from caliban.util.fsutil import atomic_write_bytes
from caliban.util.text import plural

CONTEXT_LINES = 4
MAX_SNIPPET_LINES = 40
MAX_LISTED_MATCHES = 10
MAX_LINE_CHARS = 2000
"""Lines of the echo longer than this are cut, as Read cuts them."""
MAX_SIMILAR_SCAN_LINES = 20_000
"""How many lines the "most similar lines" hint of a failed edit looks at."""

DESCRIPTION = """\
Performs an exact string replacement in a file.

Usage:
- You must Read the file in this session before editing it, and it must not have changed \
on disk since; otherwise the edit fails and asks you to Read it again.
- old_string must match the file exactly, including whitespace and indentation. Copy it \
from Read's output without the line-number prefix (the number and tab before each line).
- The edit fails if old_string is not found, or if it occurs more than once: then add \
surrounding lines to make it unique, or set replace_all to change every occurrence (useful \
for renaming a variable).
- old_string and new_string must differ.
- An empty old_string creates a new file with new_string as its content (or fills an empty \
file).
- The file keeps its encoding and line endings (CRLF stays CRLF); write old_string and \
new_string with plain \\n newlines.
- The result shows the changed region with line numbers.
- Prefer editing existing files to creating new ones."""


class EditInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_path: str = Field(
        description="Path of the file to change, absolute or relative to the working directory."
    )
    old_string: str = Field(description="The exact text to replace.")
    new_string: str = Field(
        description="The text to replace it with (must differ from old_string)."
    )
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence of old_string (default false: it must be unique).",
    )


class EditError(Exception):
    """An edit that cannot be applied; the message tells the model what to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EditPlan:
    """The outcome of applying an edit to text: the new text and where the first change is."""

    text: str
    replacements: int
    first_line: int
    first_column: int
    """Where the first replacement starts in its line (to show a long line around it)."""
    new_lines: int


def apply_edit(
    text: str, old: str, new: str, *, replace_all: bool = False, shown: str = "the file"
) -> EditPlan:
    """Replace ``old`` with ``new`` in ``text`` (LF newlines), or raise :class:`EditError`.

    Linear in the size of ``text`` whatever the input (a 3 MB one-line file with a
    thousand matches included)."""
    if old == new:
        raise EditError(
            "old_string and new_string are identical, so there is nothing to change. "
            "Give the replacement text in new_string."
        )
    if old == "":
        if text.strip():
            raise EditError(
                f"old_string is empty, but {shown} is not empty. Give the exact text to "
                "replace (or use Write to replace the whole file)."
            )
        return EditPlan(
            text=new,
            replacements=1,
            first_line=1,
            first_column=0,
            new_lines=_files.count_lines(new),
        )
    count = text.count(old)
    if count == 0:
        raise EditError(_not_found(text, old, shown))
    if count > 1 and not replace_all:
        lines = _match_lines(text, old, MAX_LISTED_MATCHES)
        more = f" and {count - len(lines):,} more" if count > len(lines) else ""
        raise EditError(
            f"old_string occurs {count:,} times in {shown} (at lines "
            f"{', '.join(str(n) for n in lines)}{more}). Include more surrounding text in "
            "old_string to pick one occurrence, or set replace_all to true to change all of "
            "them."
        )
    index = text.find(old)
    line_start = text.rfind("\n", 0, index) + 1
    result = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return EditPlan(
        text=result,
        replacements=count if replace_all else 1,
        first_line=text.count("\n", 0, index) + 1,
        first_column=index - line_start,
        new_lines=max(_files.count_lines(new), 1),
    )


def _match_lines(text: str, old: str, limit: int) -> list[int]:
    """The line numbers of the first ``limit`` occurrences, counted in one pass."""
    lines: list[int] = []
    line, counted, start = 1, 0, 0
    while len(lines) < limit and (index := text.find(old, start)) != -1:
        line += text.count("\n", counted, index)
        counted = index
        lines.append(line)
        start = index + len(old)
    return lines


_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


def _not_found(text: str, old: str, shown: str) -> str:
    message = (
        f"old_string was not found in {shown}. It must match the file exactly, including "
        "whitespace, indentation and line breaks."
    )
    old_lines = old.split("\n")
    nonblank = [line for line in old_lines if line.strip()]
    if (
        nonblank
        and all(_LINE_NUMBER_PREFIX.match(line) for line in nonblank)
        and _LINE_NUMBER_PREFIX.sub("", old) in text
    ):
        return (
            f"{message} old_string includes the line-number prefixes from Read's output "
            "(the number and the tab); leave them out."
        )
    if old.strip() and _squash(old) in _squash(text):
        message += (
            " The file has this text with different whitespace or indentation; copy it "
            "exactly from Read's output."
        )
    similar = _similar_lines(text, old_lines)
    if similar:
        return f"{message}\nThe lines most similar to the start of old_string:\n{similar}"
    return f"{message} Read the file again to see its current content."


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _similar_lines(text: str, old_lines: list[str], limit: int = 3) -> str:
    """The file lines most like the first non-blank line of old_string, numbered."""
    target = next((line.strip() for line in old_lines if line.strip()), "")[:MAX_LINE_CHARS]
    if not target:
        return ""
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    scored: list[tuple[float, int, str]] = []
    # Bounded work: the hint is a courtesy, a huge file must not make the failure slow.
    lines = itertools.islice(text.split("\n", MAX_SIMILAR_SCAN_LINES), MAX_SIMILAR_SCAN_LINES)
    for number, line in enumerate(lines, start=1):
        candidate = line.strip()
        if not candidate or len(candidate) > 2 * len(target) + 200:
            continue
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() < 0.5 or matcher.quick_ratio() < 0.5:
            continue
        ratio = matcher.ratio()
        if ratio >= 0.5:
            scored.append((ratio, number, line))
    best = sorted(scored, key=lambda item: (-item[0], item[1]))[:limit]
    return "\n".join(f"{number:>6}\t{line}" for _, number, line in sorted(best, key=lambda i: i[1]))


def _cut(line: str, around: int = 0) -> str:
    """``line`` at most :data:`MAX_LINE_CHARS` long, keeping the part around column
    ``around`` (where a change is) and saying what was left out."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    start = max(0, min(around - MAX_LINE_CHARS // 4, len(line) - MAX_LINE_CHARS))
    end = start + MAX_LINE_CHARS
    head = f"[… {start:,} characters] " if start else ""
    tail = f" [… {len(line) - end:,} characters]" if end < len(line) else ""
    return f"{head}{line[start:end]}{tail}"


def snippet(text: str, first_line: int, new_lines: int, first_column: int = 0) -> str:
    """The changed region of ``text`` with a few lines of context, ``cat -n`` style; long
    lines are cut (the first changed one around the change)."""
    start = max(first_line - CONTEXT_LINES, 1)
    end = first_line + new_lines - 1 + CONTEXT_LINES
    # Only the lines shown are split out: a 50 MB file is not copied line by line.
    parts = text.split("\n", end)
    lines = parts[:end]
    if len(parts) <= end and text.endswith("\n"):
        lines.pop()  # the empty string after the final newline is not a line
    end = min(end, len(lines))
    shown = [
        _cut(line, first_column if number == first_line else 0)
        for number, line in enumerate(lines[start - 1 : end], start=start)
    ]
    if len(shown) > MAX_SNIPPET_LINES:
        head = _files.numbered(shown[: MAX_SNIPPET_LINES // 2], start)
        tail_start = end - MAX_SNIPPET_LINES // 2 + 1
        tail = _files.numbered(shown[tail_start - start :], tail_start)
        return f"{head}\n     …\n{tail}"
    return _files.numbered(shown, start)


@dataclass(frozen=True, kw_only=True, slots=True)
class TextFile:
    """A decoded text file and how to write it back the same way."""

    text: str
    """Content with LF newlines when the file uses CRLF."""
    encoding: _files.Encoding
    crlf: bool

    def encode(self, text: str) -> bytes:
        return self.encoding.encode(text.replace("\n", "\r\n") if self.crlf else text)


def load_text(path: Path, shown: str) -> TextFile:
    """Read a text file for editing, or raise :class:`EditError` (binary, unreadable)."""
    if (problem := _files.not_regular(path, shown)) is not None:
        raise EditError(problem)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EditError(f"Cannot read {shown}: {exc.strerror or exc}") from None
    if (kind := _files.binary_kind(path, data[: _files.SAMPLE_BYTES])) is not None:
        raise EditError(f"{shown} is a binary file ({kind}); Edit only changes text files.")
    text, encoding = _files.decode_file(data)
    crlf = _files.uses_crlf(text)
    return TextFile(text=text.replace("\r\n", "\n") if crlf else text, encoding=encoding, crlf=crlf)


def _prepare(path: Path, shown: str, args: EditInput) -> tuple[TextFile, EditPlan, bytes]:
    """Read, edit and encode: the file, the plan and the bytes to write, or EditError."""
    file = load_text(path, shown)
    old, new = _lf(args.old_string, file.crlf), _lf(args.new_string, file.crlf)
    plan = apply_edit(file.text, old, new, replace_all=args.replace_all, shown=shown)
    try:
        return file, plan, file.encode(plan.text)
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise EditError(
            f"{shown} is encoded as {file.encoding.label}, which cannot represent "
            f"{bad!r} in new_string. Use characters that encoding supports (or "
            "rewrite the file as UTF-8 with Write after Reading it)."
        ) from None


def _lf(text: str, crlf: bool) -> str:
    """Text the model wrote, matched against a CRLF file's LF-normalised content."""
    return text.replace("\r\n", "\n") if crlf else text


class Edit(BuiltinTool[EditInput]):
    name = "Edit"
    description = DESCRIPTION
    input_model = EditInput

    def subject(self, args: EditInput) -> str | None:
        return args.file_path

    def effects(self, args: EditInput, cwd: Path) -> Effects:
        path = path_at(cwd, args.file_path)
        return Effects(writes=(path,), replaces=(path,))

    def preview(self, args: EditInput, env: ToolEnv) -> Preview:
        path = _files.resolve(env, args.file_path)
        shown = _files.display_path(path, env.cwd)
        if not path.exists():
            if args.old_string == "":
                return FileChange(path=path, shown=shown, before=None, after=args.new_string)
            return f"(no such file: {shown})"
        try:
            file, plan, _ = _prepare(path, shown, args)
        except EditError as exc:
            return f"(this edit would fail: {exc})"
        return FileChange(path=path, shown=shown, before=file.text, after=plan.text)

    async def run(self, args: EditInput, ctx: CallContext) -> ToolOutput:
        path = _files.resolve(ctx.env, args.file_path)
        shown = _files.display_path(path, ctx.env.cwd)
        if args.old_string == args.new_string:
            return ToolOutput.error(
                "old_string and new_string are identical, so there is nothing to change. "
                "Give the replacement text in new_string."
            )
        if path.is_dir():
            return ToolOutput.error(f"{shown} is a directory; give the path of a file.")
        if not path.exists():
            if args.old_string == "":
                return self._create(path, shown, args, ctx)
            return ToolOutput.error(
                _files.not_found_message(path, ctx.env.cwd)
                + " To create a new file, use Write (or Edit with an empty old_string)."
            )
        if (problem := _files.unwritable(path, shown)) is not None:
            return ToolOutput.error(problem)
        if (problem := ctx.env.staleness(path)) is not None:
            return ToolOutput.error(problem)
        try:
            # In a daemon thread: the event loop stays free to cancel the call (Ctrl-C,
            # SIGTERM) however large the file, and exiting does not wait for it.
            file, plan, data = await start_in_daemon_thread(
                lambda: _prepare(path, shown, args), name="caliban-edit"
            )
        except EditError as exc:
            return ToolOutput.error(str(exc))
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            return ToolOutput.error(f"Cannot write {shown}: {exc.strerror or exc}")
        _files.record_read(ctx.env, path)
        what = (
            f"replaced {plan.replacements} occurrences; the first is shown"
            if plan.replacements > 1
            else "1 replacement"
        )
        return ToolOutput.text(
            f"Edited {shown} ({what}):\n"
            + snippet(plan.text, plan.first_line, plan.new_lines, plan.first_column),
            summary=plural(plan.replacements, "replacement"),
            change=FileChange(path=path, shown=shown, before=file.text, after=plan.text),
            data=_edit_result(args, path, file.text, plan.text),
        )

    def _create(self, path: Path, shown: str, args: EditInput, ctx: CallContext) -> ToolOutput:
        content = args.new_string
        if (problem := _files.unwritable(path, shown)) is not None:
            return ToolOutput.error(problem)
        try:
            atomic_write_bytes(path, content.encode("utf-8"))
        except OSError as exc:
            return ToolOutput.error(f"Cannot write {shown}: {exc.strerror or exc}")
        _files.record_read(ctx.env, path)
        lines = _files.count_lines(content)
        return ToolOutput.text(
            f"Created {shown} ({plural(lines, 'line')}).",
            summary=f"Created {path.name}",
            change=FileChange(path=path, shown=shown, before=None, after=content),
            data=_edit_result(args, path, None, content),
        )


def _edit_result(args: EditInput, path: Path, before: str | None, after: str) -> dict[str, Any]:
    """Claude Code's ``tool_use_result`` of an Edit."""
    return {
        "filePath": str(path),
        "oldString": args.old_string,
        "newString": args.new_string,
        "originalFile": before,
        "structuredPatch": structured_patch(before or "", after),
        "userModified": False,
        "replaceAll": args.replace_all,
    }


__all__ = ["Edit", "EditError", "EditInput", "EditPlan", "TextFile", "apply_edit", "load_text"]
