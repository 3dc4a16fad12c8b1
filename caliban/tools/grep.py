"""Grep: search file contents with ripgrep (regex, .gitignore respected, bounded output)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field

from caliban.calls.effects import Effects, path_at
from caliban.tools import _files
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput
from caliban.util.text import plural

MAX_OUTPUT_CHARS = 30_000
MAX_KEPT_LINES = 20_000
MAX_COLUMNS = 500
DEFAULT_HEAD_LIMIT = 250
"""Lines or entries shown when head_limit is not given (Claude Code's default)."""

OutputMode = Literal["files_with_matches", "content", "count"]

DESCRIPTION = f"""\
A powerful search tool built on ripgrep.

Usage:
- ALWAYS use Grep for searching file contents, never `grep` or `rg` through Bash: Grep is \
faster, respects .gitignore and keeps its output bounded.
- Full regular-expression syntax (Rust regex), e.g. "log.*Error", "function\\s+\\w+". \
Literal braces, brackets and parentheses need escaping: "interface\\{{\\}}" finds \
"interface{{}}" in Go code.
- Filter files with glob (e.g. "*.js", "*.{{ts,tsx}}", "src/**/*.py") or type (rg file \
types: py, js, ts, rust, go, java, …; faster than glob for standard types).
- output_mode: "files_with_matches" (default) lists matching files, newest first; "content" \
shows matching lines (with -n line numbers by default and -A/-B/-C context); "count" shows \
the number of matches per file.
- Patterns match within single lines; set multiline to true to let a pattern span lines \
and "." match newlines.
- Files ignored by .gitignore and the .git directory are skipped; hidden files are searched.
- Output is limited: head_limit keeps the first N lines or entries (default \
{DEFAULT_HEAD_LIMIT}, 0 for all), offset skips the first N to page through the rest, and \
output over {MAX_OUTPUT_CHARS:,} characters is cut with a note. Lines longer than {MAX_COLUMNS} \
characters are abbreviated.
- For open-ended searches that need several rounds, consider the Agent tool if it is \
available."""


class GrepInput(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True)

    pattern: str = Field(
        min_length=1, description="The regular expression to search for in file contents."
    )
    path: str | None = Field(
        default=None,
        description="File or directory to search in (rg PATH). Defaults to the current "
        "working directory.",
    )
    glob: str | None = Field(
        default=None,
        description='Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}"), as rg --glob. '
        "Several may be separated by spaces or commas.",
    )
    type: str | None = Field(
        default=None,
        description="File type to search (rg --type), e.g. py, js, ts, rust, go, java. More "
        "efficient than glob for standard file types.",
    )
    output_mode: OutputMode = Field(
        default="files_with_matches",
        description='"content" shows matching lines (supports -A/-B/-C context, -n line '
        'numbers, head_limit); "files_with_matches" shows file paths (supports head_limit); '
        '"count" shows match counts per file (supports head_limit). Defaults to '
        '"files_with_matches".',
    )
    case_insensitive: bool = Field(
        default=False, alias="-i", description="Case-insensitive search (rg -i)."
    )
    line_numbers: bool = Field(
        default=True,
        alias="-n",
        description='Show line numbers (rg -n). Only with output_mode "content"; default true.',
    )
    after: int | None = Field(
        default=None,
        ge=0,
        alias="-A",
        description='Lines to show after each match (rg -A). Only with output_mode "content".',
    )
    before: int | None = Field(
        default=None,
        ge=0,
        alias="-B",
        description='Lines to show before each match (rg -B). Only with output_mode "content".',
    )
    context_short: int | None = Field(
        default=None, ge=0, alias="-C", description="Alias for context."
    )
    context: int | None = Field(
        default=None,
        ge=0,
        description="Lines to show before and after each match (rg -C). Only with output_mode "
        '"content".',
    )
    only_matching: bool = Field(
        default=False,
        alias="-o",
        description="Print only the matched (non-empty) parts of each matching line, one match "
        'per output line (rg -o). Only with output_mode "content"; default false.',
    )
    multiline: bool = Field(
        default=False,
        description='Multiline mode: "." matches newlines and patterns can span lines '
        "(rg -U --multiline-dotall). Default false.",
    )
    head_limit: int | None = Field(
        default=None,
        ge=0,
        description='Keep only the first N lines or entries, like "| head -N": lines for '
        '"content", file paths for "files_with_matches", entries for "count". Defaults to '
        f"{DEFAULT_HEAD_LIMIT}; 0 means unlimited (up to the {MAX_OUTPUT_CHARS:,}-character "
        "output cap; use sparingly).",
    )
    offset: int = Field(
        default=0,
        ge=0,
        description="Skip the first N lines or entries before applying head_limit, like "
        '"| tail -n +N | head -N". Works in every output mode. Defaults to 0.',
    )


def split_globs(value: str) -> list[str]:
    """``"*.ts, *.{js,jsx}"`` → ``["*.ts", "*.{js,jsx}"]`` (commas inside braces kept)."""
    globs: list[str] = []
    depth, current = 0, ""
    for char in value:
        depth += char == "{"
        depth -= char == "}"
        if char in ", \t\n" and depth <= 0:
            if current:
                globs.append(current)
            current = ""
        else:
            current += char
    if current:
        globs.append(current)
    return globs


class Grep(BuiltinTool[GrepInput]):
    name = "Grep"
    description = DESCRIPTION
    input_model = GrepInput
    read_only = True

    def subject(self, args: GrepInput) -> str | None:
        return args.path or "."

    def effects(self, args: GrepInput, cwd: Path) -> Effects:
        return Effects(reads=(path_at(cwd, args.path or "."),))

    async def run(self, args: GrepInput, ctx: CallContext) -> ToolOutput:
        cwd = ctx.env.cwd
        target = _files.resolve(ctx.env, args.path or ".")
        if not target.exists():
            return ToolOutput.error(_files.not_found_message(target, cwd, what="Path"))
        command = _rg_arguments(args)
        shown = _files.display_path(target, cwd)
        run_in = cwd if cwd.is_dir() else (target if target.is_dir() else target.parent)
        if run_in == cwd and shown != ".":
            command.append(shown)
        elif run_in != cwd:
            command.append(str(target))
        if not target.is_dir() and not target.is_file():
            return ToolOutput.error(
                f"{shown} is not a regular file or directory (a FIFO, socket or device); "
                "Grep searches files."
            )
        guard = _Guard(ctx.env, run_in, args)
        try:
            with _files.glob_filter(split_globs(args.glob or "")) as filter_args:
                result = await _files.run_rg(
                    [*filter_args, *command],
                    cwd=run_in,
                    keep=MAX_KEPT_LINES if args.output_mode == "content" else 1_000_000,
                    separator=b"\0" if args.output_mode == "files_with_matches" else b"\n",
                    shown=guard.shown,
                )
        except _files.RipgrepMissing as exc:
            return ToolOutput.error(str(exc))
        skipped = guard.note()
        if result.returncode == 2 and not result.lines:
            if "No files were searched" in result.stderr:
                return ToolOutput.text(
                    f"No files to search in {shown}: none match the glob/type filter (files "
                    ".gitignore excludes are never searched).",
                    summary="no files",
                )
            return ToolOutput.error(_rg_error(args.pattern, result.stderr))
        if not result.lines:
            note = " (the search timed out)" if result.timed_out else ""
            return ToolOutput.text(
                f"No matches for {args.pattern!r} in {shown}{note}."
                + (f"\n{skipped}" if skipped else ""),
                summary="no matches",
                data=_grep_result(args, [], "", None),
            )
        lines = _tidy_separators(result.lines) if guard.denied else result.lines
        total = result.total_lines
        match args.output_mode:
            case "files_with_matches":
                lines.sort(key=lambda line: (-_files.mtime_ns(run_in / line), line))
                summary = plural(total, "file")
                header = f"Found {summary}"
            case "count":
                matches = sum(_count_of(line) for line in lines)
                summary = f"{plural(matches, 'match', 'matches')} in {plural(total, 'file')}"
                header = f"Found {summary}"
            case "content":
                summary = plural(total, "line")
                header = ""
            case _:
                assert_never(args.output_mode)
        notes = []
        unit = "lines" if args.output_mode == "content" else "entries"
        limit = DEFAULT_HEAD_LIMIT if args.head_limit is None else args.head_limit
        if args.offset:
            lines = lines[args.offset :]
        applied_limit = limit if limit and len(lines) > limit else None
        if applied_limit is not None:
            lines = lines[:applied_limit]
        if applied_limit is not None or args.offset:
            first = min(args.offset + 1, total) if lines else args.offset
            last = args.offset + len(lines)
            hint = f"; offset={last} shows the next ones" if last < total else ""
            notes.append(
                f"[showing {unit} {first:,}–{last:,} of {total:,} (offset={args.offset}, "
                f"head_limit={limit}){hint}]"
            )
        body, cut_note = _cap(lines, total)
        notes += [cut_note] if cut_note else []
        if result.returncode == 2 and result.stderr:
            notes.append(f"[rg reported errors: {_first_lines(result.stderr, 5)}]")
        if result.timed_out:
            notes.append("[the search timed out; results may be incomplete]")
        if skipped:
            notes.append(skipped)
        structured = _grep_result(args, lines, body, applied_limit)
        return ToolOutput.text(
            "\n".join(p for p in (header, body, *notes) if p),
            summary=summary,
            data=structured,
        )


def _grep_result(
    args: GrepInput, lines: list[str], body: str, applied_limit: int | None
) -> dict[str, object]:
    """Claude Code's ``tool_use_result`` of a Grep (after offset and head_limit)."""
    result: dict[str, object] = {"mode": args.output_mode}
    match args.output_mode:
        case "files_with_matches":
            result.update(numFiles=len(lines), filenames=lines)
        case "content":
            result.update(numFiles=0, filenames=[], content=body, numLines=len(lines))
        case "count":
            matches = sum(_count_of(line) for line in lines)
            result.update(numFiles=len(lines), filenames=[], content=body, numMatches=matches)
        case _:
            assert_never(args.output_mode)
    if applied_limit is not None:
        result["appliedLimit"] = applied_limit
    if args.offset:
        result["appliedOffset"] = args.offset
    return result


class _Guard:
    """Turns rg's records into Grep's output lines: leaves out every line of a file the
    permission rules deny reading (remembering which rules did) and writes the rest as
    ``file:N:text`` / ``file-N-text`` (``file:text`` without -n). rg runs with ``--null``,
    so the file name is exact, and always with ``--line-number``."""

    def __init__(self, env: ToolEnv, run_in: Path, args: GrepInput) -> None:
        self.env = env
        self.run_in = run_in
        self.mode = args.output_mode
        self.numbers = args.line_numbers
        self.denied: dict[str, str | None] = {}
        self.rules: dict[str, None] = {}

    def _rule(self, name: str) -> str | None:
        if name not in self.denied:
            rule = _files.read_denied_rule(self.env, "Grep", self.run_in / name)
            self.denied[name] = rule
            if rule is not None:
                self.rules[rule] = None
        return self.denied[name]

    def shown(self, record: str) -> str | None:
        if self.mode == "files_with_matches":
            return None if self._rule(record) else record
        name, found, rest = record.partition("\0")
        if not found:
            return record if record == "--" else None  # not a line rg prints: fail closed
        if self._rule(name):
            return None
        if self.mode == "count":
            return f"{name}:{rest}"
        # Line numbers are always asked for, to tell matches (N:) from context (N-).
        match = re.match(r"(\d+)([:-])", rest)
        if match is None:
            return f"{name}:{rest}"
        number, mark = match.groups()
        text = rest[match.end() :]
        return f"{name}{mark}{number}{mark}{text}" if self.numbers else f"{name}{mark}{text}"

    def note(self) -> str:
        files = sum(1 for rule in self.denied.values() if rule)
        return _files.denied_note(files, self.rules) if files else ""


def _tidy_separators(lines: list[str]) -> list[str]:
    """Context groups' ``--`` separators without the groups removed between them."""
    tidy: list[str] = []
    for line in lines:
        if line == "--" and (not tidy or tidy[-1] == "--"):
            continue
        tidy.append(line)
    return tidy[:-1] if tidy and tidy[-1] == "--" else tidy


def _rg_arguments(args: GrepInput) -> list[str]:
    command = [*_files.RG_BASE_ARGS, "--color", "never", "--with-filename", "--null"]
    if args.case_insensitive:
        command.append("-i")
    if args.multiline:
        command += ["-U", "--multiline-dotall"]
    if args.type:
        command += ["--type", args.type]
    match args.output_mode:
        case "files_with_matches":
            command.append("--files-with-matches")
        case "count":
            command.append("--count-matches")
        case "content":
            command += ["--no-heading", "--max-columns", str(MAX_COLUMNS)]
            command.append("--max-columns-preview")
            command.append("--line-number")  # tells matches from context; see _Guard.shown
            if args.only_matching:
                command.append("--only-matching")
            context = args.context if args.context is not None else args.context_short
            if context is not None:
                command += ["--context", str(context)]
            if args.before is not None:
                command += ["--before-context", str(args.before)]
            if args.after is not None:
                command += ["--after-context", str(args.after)]
        case _:
            assert_never(args.output_mode)
    command += ["--regexp", args.pattern, "--"]
    return command


def _rg_error(pattern: str, stderr: str) -> str:
    text = stderr or "rg exited with an error"
    if "regex parse error" in text or "error parsing" in text:
        return (
            f"Invalid regular expression {pattern!r}:\n{text}\nEscape characters such as "
            "( ) [ ] { } . * + ? | with a backslash to match them literally."
        )
    if "unrecognized file type" in text:
        return f"{text}\nUse a standard rg type (py, js, ts, rust, go, java, …) or glob instead."
    return f"Grep failed: {text}"


def _cap(lines: list[str], total: int) -> tuple[str, str]:
    """Join lines, stopping before MAX_OUTPUT_CHARS; the second value notes any cut."""
    size = 0
    for index, line in enumerate(lines):
        size += len(line) + 1
        if size > MAX_OUTPUT_CHARS:
            return "\n".join(lines[:index]), (
                f"[Output cut at {MAX_OUTPUT_CHARS:,} characters: showing {index:,} of "
                f"{total:,} lines. Narrow the search with path, glob or type, use head_limit, "
                'or list files first with output_mode "files_with_matches".]'
            )
    return "\n".join(lines), ""


def _count_of(line: str) -> int:
    match = re.search(r":(\d+)$", line)
    return int(match.group(1)) if match else 0


def _first_lines(text: str, count: int) -> str:
    lines = text.splitlines()
    more = f" (+{len(lines) - count} more)" if len(lines) > count else ""
    return "; ".join(lines[:count]) + more


__all__ = ["Grep", "GrepInput", "split_globs"]
