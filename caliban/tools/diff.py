"""A change to one text file, and the one diff of it everybody shows.

Write and Edit describe what they change (or would change) as a :class:`FileChange`: the
permission prompt shows it before the call runs, the terminal renderer after, and both draw
it from :func:`diff_lines`. Nothing here touches the disk.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["Diff", "DiffLine", "FileChange", "diff_lines", "structured_patch"]

DiffKind = Literal["+", "-", " ", "…"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FileChange:
    """The content of one file before and after a change (LF newlines)."""

    path: Path
    """The file, absolute."""
    shown: str
    """The path as the user sees it (relative to the working directory when inside it)."""
    before: str | None
    """``None`` when the change creates the file."""
    after: str

    @property
    def created(self) -> bool:
        return self.before is None


@dataclass(frozen=True, kw_only=True, slots=True)
class DiffLine:
    kind: DiffKind
    """``+`` added, ``-`` removed, `` `` context, ``…`` a gap between hunks."""
    number: int | None
    """The line number in the new text (in the old one for removed lines)."""
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Diff:
    lines: tuple[DiffLine, ...]
    added: int
    removed: int


def diff_lines(before: str, after: str, *, context: int = 2) -> Diff:
    """The changed lines of ``before`` → ``after`` with line numbers and ``context`` lines
    around each hunk, and the counts of added and removed lines."""
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    lines: list[DiffLine] = []
    added = removed = 0
    for index, group in enumerate(matcher.get_grouped_opcodes(context)):
        if index:
            lines.append(DiffLine(kind="…", number=None, text=""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(DiffLine(kind=" ", number=j + 1, text=new[j]) for j in range(j1, j2))
                continue
            if tag in ("replace", "delete"):
                removed += i2 - i1
                lines.extend(DiffLine(kind="-", number=i + 1, text=old[i]) for i in range(i1, i2))
            if tag in ("replace", "insert"):
                added += j2 - j1
                lines.extend(DiffLine(kind="+", number=j + 1, text=new[j]) for j in range(j1, j2))
    return Diff(lines=tuple(lines), added=added, removed=removed)


def structured_patch(before: str, after: str, *, context: int = 3) -> list[dict[str, Any]]:
    """Unified-diff hunks as Claude Code's ``structuredPatch`` reports them: ``oldStart``,
    ``oldLines``, ``newStart``, ``newLines`` and ``lines`` prefixed with ``-``, ``+`` or a
    space (what scripts reading ``tool_use_result`` of Write and Edit expect)."""
    old, new = before.splitlines(), after.splitlines()
    hunks: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        lines: list[str] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(f" {line}" for line in old[i1:i2])
                continue
            lines.extend(f"-{line}" for line in old[i1:i2])
            lines.extend(f"+{line}" for line in new[j1:j2])
        old_lines, new_lines = last[2] - first[1], last[4] - first[3]
        hunks.append(
            {
                "oldStart": first[1] + 1 if old_lines else first[1],
                "oldLines": old_lines,
                "newStart": first[3] + 1 if new_lines else first[3],
                "newLines": new_lines,
                "lines": lines,
            }
        )
    return hunks
