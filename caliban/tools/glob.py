"""Glob: find files by name pattern with ripgrep (so .gitignore is respected), newest first."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from caliban.calls.effects import Effects, path_at
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput
from caliban.util.text import plural

MAX_PATHS = 100
_GLOB_CHARS = frozenset("*?[{")

DESCRIPTION = f"""\
Fast file search by name pattern; works on codebases of any size.

Usage:
- Glob patterns such as "**/*.py", "src/**/*.ts", "*.{{json,toml}}" or "test_*". The pattern \
is matched against paths relative to the search directory; a pattern without a "/" (like \
"*.py") matches file names at any depth.
- path is the directory to search (default: the current working directory). An absolute \
pattern such as "/repo/src/**/*.rs" also works.
- Files ignored by .gitignore (and .ignore) are skipped, as is .git; other hidden files are \
included.
- Returns matching file paths sorted by modification time, newest first, at most \
{MAX_PATHS} of them (the rest are counted). Paths under the working directory are shown \
relative to it.
- Use Grep to search file contents. For open-ended searches that need several rounds of \
globbing and grepping, consider the Agent tool if it is available."""


class GlobInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1,
        pattern=r"^[^\n]*$",
        description='The glob pattern to match files against, e.g. "**/*.py".',
    )
    path: str | None = Field(
        default=None,
        description="The directory to search in (default: the current working directory). "
        "Omit it rather than passing null or an empty string.",
    )


def split_pattern(pattern: str) -> tuple[str | None, str]:
    """An absolute pattern split into its literal base directory and the rest."""
    if not os.path.isabs(pattern):
        return None, pattern
    parts = Path(pattern).parts
    for index, part in enumerate(parts):
        if _GLOB_CHARS & set(part):
            return str(Path(*parts[:index])), "/".join(parts[index:])
    return str(Path(*parts[:-1])), parts[-1]


def _searched(args: GlobInput) -> str:
    """The directory a Glob call searches: an absolute pattern's own, else ``path``."""
    return split_pattern(args.pattern)[0] or args.path or "."


class Glob(BuiltinTool[GlobInput]):
    name = "Glob"
    description = DESCRIPTION
    input_model = GlobInput
    read_only = True

    def subject(self, args: GlobInput) -> str | None:
        return _searched(args)

    def effects(self, args: GlobInput, cwd: Path) -> Effects:
        return Effects(reads=(path_at(cwd, _searched(args)),))

    async def run(self, args: GlobInput, ctx: CallContext) -> ToolOutput:
        started = time.perf_counter()
        cwd = ctx.env.cwd
        base, pattern = split_pattern(args.pattern)
        # An absolute pattern carries its own directory; it wins over path.
        directory = _files.resolve(ctx.env, base or args.path or ".")
        if not directory.exists():
            return ToolOutput.error(_files.not_found_message(directory, cwd, what="Directory"))
        if not directory.is_dir():
            return ToolOutput.error(
                f"{_files.display_path(directory, cwd)} is a file, not a directory. Give a "
                "directory as path (or Read the file)."
            )
        denied: dict[str, None] = {}

        def shown(name: str) -> str | None:
            rule = _files.read_denied_rule(ctx.env, "Glob", directory / name)
            if rule is not None:
                denied[rule] = None
                return None
            return name

        try:
            with _files.glob_filter([pattern]) as filter_args:
                result = await _files.run_rg(
                    ["--files", "--null", *_files.RG_BASE_ARGS, *filter_args],
                    cwd=directory,
                    keep=1_000_000,
                    separator=b"\0",
                    shown=shown,
                )
        except _files.RipgrepMissing as exc:
            return ToolOutput.error(str(exc))
        hidden = _files.denied_note(result.dropped, denied) if result.dropped else ""
        if result.returncode not in (0, 1) and not result.lines:
            return ToolOutput.error(f"Glob failed: {result.stderr or 'rg exited with an error'}")
        where = _files.display_path(directory, cwd)
        if not result.lines:
            note = " (the search timed out)" if result.timed_out else ""
            return ToolOutput.text(
                f"No files match {args.pattern!r} in {where}{note}."
                + (f"\n{hidden}" if hidden else ""),
                summary="0 files",
                data=_glob_result([], started, total=0, complete=not result.timed_out),
            )
        found = [directory / line for line in result.lines]
        found.sort(key=lambda p: (-_files.mtime_ns(p), str(p)))
        listed = [_files.display_path(p, cwd) for p in found[:MAX_PATHS]]
        lines = list(listed)
        if len(found) > MAX_PATHS:
            rest = len(found) - MAX_PATHS
            lines.append(
                f"… {rest:,} more (showing the {MAX_PATHS} newest of {len(found):,}; narrow the "
                "pattern or the path to see others)"
            )
        if result.timed_out:
            lines.append("(the search timed out; the list may be incomplete)")
        if hidden:
            lines.append(hidden)
        return ToolOutput.text(
            "\n".join(lines),
            summary=plural(len(found), "file"),
            data=_glob_result(listed, started, total=len(found), complete=not result.timed_out),
        )


def _glob_result(
    filenames: list[str], started: float, *, total: int, complete: bool
) -> dict[str, object]:
    """Claude Code's ``tool_use_result`` of a Glob."""
    return {
        "filenames": filenames,
        "durationMs": int((time.perf_counter() - started) * 1000),
        "numFiles": len(filenames),
        "truncated": total > len(filenames),
        "totalMatches": total,
        "countIsComplete": complete,
    }


__all__ = ["MAX_PATHS", "Glob", "GlobInput"]
