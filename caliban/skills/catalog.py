"""Custom slash commands and skills: where they are read from and what a file says.

Both are Markdown instructions with optional YAML frontmatter (Claude Code's format):

- a **command** is ``commands/NAME.md`` (``commands/sub/NAME.md`` is ``/sub:NAME``); the user
  runs it as ``/NAME args``;
- a **skill** is ``skills/NAME/SKILL.md`` with files beside it; the model loads it with the
  ``Skill`` tool when its description fits the task, or the user runs it as ``/NAME args``.

Read from, first definition of a name winning: the project's ``.caliban/commands``,
``.claude/commands``, ``.caliban/skills``, ``.claude/skills``, then the user's
``~/.config/caliban/commands``, ``~/.claude/commands``, ``~/.config/caliban/skills`` and
``~/.claude/skills``. Frontmatter fields: ``description``, ``argument-hint``,
``allowed-tools``, ``model``, ``disable-model-invocation`` (and ``name`` for skills);
others are ignored, as Claude Code does. A file that cannot be read is skipped with a
warning naming it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from caliban.config.paths import PROJECT_DIR_NAME, claude_user_dir, project_root, user_config_dir
from caliban.permissions.rules import Rule, RuleError
from caliban.subagents import split_frontmatter

Kind = Literal["command", "skill"]
Scope = Literal["project", "user"]

SKILL_FILE: Final = "SKILL.md"
MAX_FILE_BYTES: Final = 256 * 1024
MAX_DESCRIPTION_CHARS: Final = 250
"""A longer description is cut in the listing the model reads."""
_SEGMENT = re.compile(r"[A-Za-z0-9][\w.-]{0,63}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Skill:
    """A custom command or a skill (see the module docstring)."""

    name: str
    description: str
    body: str
    """The text after the frontmatter."""
    path: Path
    kind: Kind
    scope: Scope
    argument_hint: str | None = None
    allowed_tools: tuple[Rule, ...] = ()
    """Permission rules allowed while the command's prompt runs."""
    model: str | None = None
    """The model for the command's prompt (``None``: the session's)."""
    model_invocable: bool = True
    """Listed for the model and loadable with the Skill tool (``disable-model-invocation``
    turns it off)."""

    @property
    def base_dir(self) -> Path:
        """The skill's directory (a command's: the directory its file is in)."""
        return self.path.parent

    @property
    def label(self) -> str:
        """``/name`` with its argument hint, for listings."""
        return f"/{self.name} {self.argument_hint}" if self.argument_hint else f"/{self.name}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Catalog:
    """Every command and skill of a session, and what was wrong with the files."""

    items: tuple[Skill, ...] = ()
    warnings: tuple[str, ...] = ()

    def find(self, name: str) -> Skill | None:
        return find_skill(self.items, name)


def find_skill(items: Iterable[Skill], name: str) -> Skill | None:
    name = name.removeprefix("/")
    return next((item for item in items if item.name == name), None)


def source_dirs(cwd: Path) -> list[tuple[Kind, Scope, Path]]:
    """Where commands and skills are read from, highest precedence first."""
    root = project_root(cwd)
    user, claude = user_config_dir(), claude_user_dir()
    return [
        ("command", "project", root / PROJECT_DIR_NAME / "commands"),
        ("command", "project", root / ".claude" / "commands"),
        ("skill", "project", root / PROJECT_DIR_NAME / "skills"),
        ("skill", "project", root / ".claude" / "skills"),
        ("command", "user", user / "commands"),
        ("command", "user", claude / "commands"),
        ("skill", "user", user / "skills"),
        ("skill", "user", claude / "skills"),
    ]


def load_catalog(cwd: Path) -> Catalog:
    """Every command and skill visible from ``cwd`` (see the module docstring). A project
    file that leads outside the project (a symlink) is read only in a trusted folder."""
    from caliban.permissions.trust import outside_notice, project_file_outside

    chosen: dict[str, Skill] = {}
    warnings: list[str] = []
    root = project_root(cwd)
    for kind, scope, directory in source_dirs(cwd):
        files = _command_files(directory) if kind == "command" else _skill_files(directory)
        for name, path in files:
            if not all(_SEGMENT.fullmatch(part) for part in name.split(":")):
                warnings.append(f"{path}: {name!r} is not a valid command name; skipped")
                continue
            if name in chosen:
                continue  # a definition with higher precedence has it
            if scope == "project" and project_file_outside(path, root):
                warnings.append(outside_notice(path, root))
                continue
            item, problems = read_skill(path, name=name, kind=kind, scope=scope)
            warnings.extend(problems)
            if item is not None:
                chosen[item.name] = item
    return Catalog(items=tuple(chosen.values()), warnings=tuple(warnings))


def _command_files(directory: Path) -> list[tuple[str, Path]]:
    try:
        files = sorted(p for p in directory.rglob("*.md") if p.is_file())
    except OSError:
        return []
    return [(":".join(p.relative_to(directory).with_suffix("").parts), p) for p in files]


def _skill_files(directory: Path) -> list[tuple[str, Path]]:
    try:
        files = sorted(p for p in directory.glob(f"*/{SKILL_FILE}") if p.is_file())
    except OSError:
        return []
    return [(p.parent.name, p) for p in files]


def read_skill(
    path: Path, *, name: str, kind: Kind, scope: Scope
) -> tuple[Skill | None, list[str]]:
    """The command or skill in ``path`` and warnings about it (``None``: unusable)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None, [f"{path}: larger than {MAX_FILE_BYTES // 1024} KB; skipped"]
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{path}: cannot read: {exc}; skipped"]
    return parse_skill(text, path=path, name=name, kind=kind, scope=scope)


def parse_skill(
    text: str, *, path: Path, name: str, kind: Kind, scope: Scope
) -> tuple[Skill | None, list[str]]:
    """Parse a command or skill file's text (see :func:`read_skill`)."""
    warnings: list[str] = []
    front: dict[str, Any] = {}
    body = text.removeprefix("\ufeff")
    if (parts := split_frontmatter(text)) is not None:
        raw, body = parts
        import yaml  # 20 ms: only when a file has frontmatter

        try:
            loaded = yaml.safe_load(raw)
        except RecursionError:
            return None, [f"{path}: the frontmatter is nested too deeply; skipped"]
        except yaml.YAMLError:
            # Claude Code reads `argument-hint: [file] [mode]`, which is not YAML: read
            # such frontmatter line by line, each value as written.
            loaded = _plain_fields(raw)
        if loaded is not None and not isinstance(loaded, dict):
            return None, [f"{path}: the frontmatter is not `field: value` lines; skipped"]
        front = loaded or {}
    if kind == "skill" and isinstance(front.get("name"), str) and front["name"].strip():
        declared = front["name"].strip()
        if declared != name and _SEGMENT.fullmatch(declared):
            name = declared
    description = _text(front.get("description")) or _first_line(body)
    rules, problems = _rules(front.get("allowed-tools"), path)
    warnings.extend(problems)
    model = _text(front.get("model"))
    if model == "inherit":
        model = None
    elif model == "opusplan":  # Claude Code's "opus to plan, sonnet to act": no caliban mode
        warnings.append(
            f"{path}: model 'opusplan' is not supported; the session's model is used (name a "
            "model, or an alias: sonnet, opus, haiku)"
        )
        model = None
    item = Skill(
        name=name,
        description=description,
        body=body.strip("\n") + "\n",
        path=path,
        kind=kind,
        scope=scope,
        argument_hint=_text(front.get("argument-hint")),
        allowed_tools=rules,
        model=model,
        model_invocable=front.get("disable-model-invocation") is not True,
    )
    return item, warnings


_FIELD = re.compile(r"([A-Za-z][\w-]*)\s*:\s*(.*)")


def _plain_fields(raw: str) -> dict[str, Any] | None:
    """``key: value`` lines as strings; ``None`` when a line is neither that nor blank."""
    fields: dict[str, Any] = {}
    for line in raw.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _FIELD.fullmatch(line.strip())
        if match is None:
            return None
        value = match.group(2).strip()
        fields[match.group(1)] = {"true": True, "false": False}.get(value.lower(), value)
    return fields


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    text = " ".join(str(value).split())
    return text or None


def _first_line(body: str) -> str:
    for line in body.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:MAX_DESCRIPTION_CHARS]
    return ""


def _rules(value: Any, path: Path) -> tuple[tuple[Rule, ...], list[str]]:
    """``allowed-tools``: a YAML list or one string, comma-separated (commas inside
    parentheses belong to the rule)."""
    if value is None:
        return (), []
    texts = [str(v) for v in value] if isinstance(value, list) else split_rules(str(value))
    rules: list[Rule] = []
    warnings: list[str] = []
    for text in texts:
        if not text.strip():
            continue
        try:
            rules.append(Rule.parse(text))
        except RuleError as exc:
            warnings.append(f"{path}: allowed-tools: {exc}; ignored")
    return tuple(rules), warnings


def split_rules(text: str) -> list[str]:
    """``"Bash(git add:*), Read"`` → ``["Bash(git add:*)", "Read"]``; without commas, runs
    of whitespace outside parentheses separate rules (``"Read Grep"``)."""
    separator = "," if "," in _outside_parens(text) else " "
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        depth += (char == "(") - (char == ")")
        if depth == 0 and (char == separator or (separator == " " and char.isspace())):
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _outside_parens(text: str) -> str:
    depth = 0
    out: list[str] = []
    for char in text:
        depth += (char == "(") - (char == ")")
        if depth == 0:
            out.append(char)
    return "".join(out)


def listing(items: Sequence[Skill]) -> str:
    """The paragraph the model reads: each model-invocable command and skill by name and
    description. Built once per session, so it is byte-stable (prompt caching)."""
    lines = [
        f"- {item.name}: {_cut(item.description)}" if item.description else f"- {item.name}"
        for item in items
        if item.model_invocable
    ]
    if not lines:
        return ""
    return "The following skills are available for use with the Skill tool:\n\n" + "\n".join(lines)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


__all__ = [
    "Catalog",
    "Kind",
    "Scope",
    "Skill",
    "find_skill",
    "listing",
    "load_catalog",
    "parse_skill",
    "read_skill",
    "source_dirs",
    "split_rules",
]
