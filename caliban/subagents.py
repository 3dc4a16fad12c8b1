"""Sub-agent definitions, and building the child agent an ``Agent`` tool call runs.

A definition is a Markdown file with YAML frontmatter; the body is the child's system prompt::

    ---
    name: reviewer
    description: Reviews a diff for bugs and missing tests.
    tools: Read, Grep, Glob, mcp__github__*
    disallowedTools: Bash
    model: haiku
    maxTurns: 20
    inherit_active_mcp: true
    ---
    You review code changes. ...

The fields are Claude Code's: ``tools`` (an allowlist), ``disallowedTools`` (removed from
what ``tools`` allows), ``model`` (a full model id, ``inherit``, or an alias ``sonnet``,
``opus``, ``haiku`` resolved for the session's provider when the child starts, see
:mod:`caliban.claude_code.model_aliases`), ``maxTurns`` (``max_turns`` is accepted too);
caliban adds ``inherit_active_mcp``.

Definitions come from, in order of precedence (the first definition of a name wins):

1. ``--agents '<json>'`` on the command line (Claude Code's flag)
2. ``<project root>/.caliban/agents/*.md``
3. ``<project root>/.claude/agents/*.md`` (Claude Code's location)
4. ``<user config dir>/agents/*.md`` (``~/.config/caliban/agents``)
5. ``~/.claude/agents/*.md`` (Claude Code's user location; ``$CLAUDE_CONFIG_DIR/agents``)
6. the built-in ``general-purpose`` agent

A file with bad frontmatter is skipped with a warning naming the file and the field; the
others still load. Unknown fields only warn.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from caliban.config.paths import PROJECT_DIR_NAME, claude_user_dir, project_root, user_config_dir

AGENT_TOOL_NAME: Final = "Agent"
DEFAULT_SUBAGENT: Final = "general-purpose"
DEFAULT_MAX_TURNS: Final = 50
"""Turns a sub-agent may take when its definition sets no ``max_turns``."""

Source = Literal["cli", "project", "claude", "user", "claude-user", "builtin"]

_GLOB_CHARS = frozenset("*?[")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_IGNORED_FIELDS = frozenset({"color"})
"""Claude Code fields that only change how its UI looks: ignored without a warning."""
_UNSUPPORTED_FIELDS = frozenset(
    {
        "permissionMode",
        "skills",
        "mcpServers",
        "hooks",
        "memory",
        "effort",
        "background",
        "initialPrompt",
    }
)
"""Claude Code fields caliban does not implement: ignored with a warning saying so."""

GENERAL_PURPOSE_PROMPT = """\
You are a sub-agent of caliban, a coding agent. Another agent gave you the task below; do it \
on your own with the tools you have, then answer once.
Search and read before you conclude; do not guess at file contents. Make changes only when \
the task asks for them, and verify them when you can.
Your final message is all the other agent will see: make it complete and self-contained \
(what you found or changed, with file paths and line numbers), and concise. It cannot ask you \
follow-up questions."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentDefinition:
    """One kind of sub-agent the ``Agent`` tool can start."""

    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] | None = None
    """Tool names or globs the child may use; ``None`` means every tool of the parent."""
    disallowed_tools: tuple[str, ...] = ()
    """Tool names or globs the child never gets, whatever ``tools`` says."""
    model: str | None = None
    """A model id or a Claude Code alias (``sonnet``, ``opus``, ``haiku``), resolved when the
    child starts; ``None``: the parent's model."""
    max_turns: int | None = None
    inherit_active_mcp: bool = True
    """Start from the parent's active MCP tools (lazy loading) rather than an empty set."""
    isolation: Literal["worktree"] | None = None
    """``worktree``: each call runs in a git worktree of its own (removed when it changed
    nothing; its path and branch are in the result otherwise)."""
    source: Source = "builtin"
    path: Path | None = None
    """The file it was read from (``None`` for the built-in agent)."""

    def allows(self, tool_name: str) -> bool:
        """Whether the child may be given ``tool_name``. ``Agent`` never: no nesting; nor
        ``StructuredOutput``: the answer ``--json-schema`` asks for is the main agent's."""
        if tool_name in (AGENT_TOOL_NAME, "StructuredOutput"):
            return False
        if any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.disallowed_tools):
            return False
        if self.tools is None:
            return True
        return any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.tools)

    @property
    def exact_tools(self) -> tuple[str, ...]:
        """The allowlist entries that name one tool (no glob characters)."""
        return tuple(p for p in self.tools or () if not _GLOB_CHARS.intersection(p))

    @property
    def tools_label(self) -> str:
        label = "all" if self.tools is None else ", ".join(self.tools) or "none"
        if self.disallowed_tools:
            label += f" except {', '.join(self.disallowed_tools)}"
        return label

    @property
    def source_label(self) -> str:
        return str(self.path) if self.path is not None else "(built-in)"


GENERAL_PURPOSE: Final = AgentDefinition(
    name=DEFAULT_SUBAGENT,
    description=(
        "General-purpose agent for researching questions, searching code and carrying out "
        "multi-step tasks. Use it when a search may take several attempts, or to work on an "
        "independent part of a task in parallel."
    ),
    system_prompt=GENERAL_PURPOSE_PROMPT,
)


class _Frontmatter(BaseModel):
    """The frontmatter fields caliban reads. Strict: YAML already types its scalars."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    tools: list[str] | str | None = None
    disallowedTools: list[str] | str | None = None
    model: str | None = None
    maxTurns: int | None = Field(default=None, ge=1)
    max_turns: int | None = Field(default=None, ge=1)
    inherit_active_mcp: bool = True
    isolation: Literal["worktree"] | None = None

    @field_validator("tools", "disallowedTools", mode="before")
    @classmethod
    def _tool_names(cls, value: Any) -> Any:
        names_ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if value is None or isinstance(value, str) or names_ok:
            return value
        raise ValueError(
            f"expected a list of tool names or globs, or one comma-separated string (got {value!r})"
        )


def split_tools(value: list[str] | str | None) -> tuple[str, ...] | None:
    """The allowlist as names: a YAML list, or one comma-separated string."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    return tuple(dict.fromkeys(item.strip() for item in items if item.strip()))


def split_frontmatter(text: str) -> tuple[str, str] | None:
    """``(yaml_text, body)``, or ``None`` when the text does not open with a ``---`` block."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    return None


def parse_definition(
    path: Path, text: str, source: Source = "project"
) -> tuple[AgentDefinition | None, list[str]]:
    """The definition in ``text`` (read from ``path``) and warnings about it.

    Returns ``(None, warnings)`` when the file cannot be used; every warning names the file,
    and the field when one is at fault.
    """
    parts = split_frontmatter(text)
    if parts is None:
        return None, [
            f"{path}: no YAML frontmatter (the file must start with a '---' line, then "
            "name: and description:, then '---'); agent skipped"
        ]
    raw_yaml, body = parts
    import yaml  # 20 ms: only when a definition is read

    try:
        data = yaml.safe_load(raw_yaml)
    except RecursionError:
        return None, [f"{path}: the frontmatter is nested too deeply; agent skipped"]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, [f"{path}: invalid YAML frontmatter{where}: {problem}; agent skipped"]
    if not isinstance(data, dict):
        return None, [f"{path}: the frontmatter must be a mapping of fields; agent skipped"]
    try:
        front = _Frontmatter.model_validate(data)
    except ValidationError as exc:
        first_per_field = {str(e["loc"][:1]): e for e in reversed(exc.errors(include_url=False))}
        return None, [_field_error(path, item) for item in reversed(first_per_field.values())]
    warnings = [
        f"{path}: field '{key}' is not supported by caliban; ignored"
        if key in _UNSUPPORTED_FIELDS
        else f"{path}: unknown field '{key}' ignored"
        for key in (front.model_extra or {})
        if key not in _IGNORED_FIELDS
    ]
    if not _NAME.fullmatch(front.name):
        return None, [
            f"{path}: field 'name': {front.name!r} is not a valid agent name (use letters, "
            "digits, '-', '_' or '.', at most 64 characters); agent skipped"
        ]
    model = front.model.strip() if front.model else None
    definition = AgentDefinition(
        name=front.name,
        description=" ".join(front.description.split()),
        system_prompt=body.strip(),
        tools=split_tools(front.tools),
        disallowed_tools=split_tools(front.disallowedTools) or (),
        model=None if model == "inherit" else model or None,
        max_turns=front.maxTurns or front.max_turns,
        inherit_active_mcp=front.inherit_active_mcp,
        isolation=front.isolation,
        source=source,
        path=path,
    )
    return definition, warnings


def parse_agents_json(text: str) -> tuple[list[AgentDefinition], list[str]]:
    """Definitions from ``--agents`` (Claude Code's JSON: ``{"name": {"description",
    "prompt", "tools"?, "disallowedTools"?, "model"?, "maxTurns"?}}``) and warnings.

    Raises :class:`ValueError` when the text is not a JSON object of objects.
    """
    import json

    import yaml

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--agents is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("--agents is not valid JSON: nested too deeply") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(
            '--agents must be a JSON object: {"name": {"description": …, "prompt": …}}'
        )
    definitions: list[AgentDefinition] = []
    warnings: list[str] = []
    where = Path("--agents")
    for name, spec in data.items():
        fields = {k: v for k, v in spec.items() if k != "prompt"}
        front = yaml.safe_dump({"name": name, **fields}, sort_keys=False)
        definition, problems = parse_definition(
            where, f"---\n{front}---\n{spec.get('prompt') or ''}", "cli"
        )
        warnings.extend(problem.replace(f"{where}:", f"--agents {name!r}:") for problem in problems)
        if definition is not None:
            definitions.append(dataclasses.replace(definition, path=None))
    return definitions, warnings


def _field_error(path: Path, item: Any) -> str:
    loc = item["loc"]
    field = str(loc[0]) if loc else "(frontmatter)"
    if item["type"] == "missing":
        return f"{path}: field '{field}' is required; agent skipped"
    message = str(item["msg"]).removeprefix("Value error, ")
    got = item.get("input")
    shown = "" if "(got " in message else f" (got {got!r})"
    return f"{path}: field '{field}': {message}{shown}; agent skipped"


def definition_dirs(cwd: Path) -> list[tuple[Source, Path]]:
    """Where definitions are read from, highest precedence first."""
    root = project_root(cwd)
    return [
        ("project", root / PROJECT_DIR_NAME / "agents"),
        ("claude", root / ".claude" / "agents"),
        ("user", user_config_dir() / "agents"),
        ("claude-user", claude_user_dir() / "agents"),
    ]


MAX_FILE_BYTES: Final = 256 * 1024
"""A larger definition file is skipped (as a command or skill is)."""


def _read_dir(
    source: Source, directory: Path, root: Path
) -> tuple[list[AgentDefinition], list[str]]:
    from caliban.permissions.trust import outside_notice, project_file_outside

    definitions: list[AgentDefinition] = []
    warnings: list[str] = []
    try:
        files = sorted(p for p in directory.glob("*.md") if p.is_file())
    except OSError:
        return [], []
    for path in files:
        if source in ("project", "claude") and project_file_outside(path, root):
            warnings.append(outside_notice(path, root))
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                warnings.append(f"{path}: larger than {MAX_FILE_BYTES // 1024} KB; agent skipped")
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            warnings.append(f"{path}: cannot read: {exc}; agent skipped")
            continue
        definition, problems = parse_definition(path, text, source)
        warnings.extend(problems)
        if definition is not None:
            definitions.append(definition)
    return definitions, warnings


def list_agents(
    cwd: Path, *, extra: Iterable[AgentDefinition] = ()
) -> tuple[list[AgentDefinition], list[str]]:
    """Every available definition (after precedence) and the warnings met loading them.

    ``extra`` (``--agents``) beats every file. The built-in ``general-purpose`` agent comes
    last unless something redefines it.
    """
    chosen: dict[str, AgentDefinition] = {d.name: d for d in extra}
    warnings: list[str] = []
    root = project_root(cwd)
    for source, directory in definition_dirs(cwd):
        definitions, problems = _read_dir(source, directory, root)
        warnings.extend(problems)
        seen_here: dict[str, Path | None] = {}
        for definition in definitions:
            if definition.name in seen_here:
                warnings.append(
                    f"{definition.path}: agent '{definition.name}' is also defined in "
                    f"{seen_here[definition.name]}; this one is ignored"
                )
                continue
            seen_here[definition.name] = definition.path
            chosen.setdefault(definition.name, definition)
    chosen.setdefault(GENERAL_PURPOSE.name, GENERAL_PURPOSE)
    return list(chosen.values()), warnings


AGENT_ROW_HEADERS: Final = ("name", "source", "model", "tools", "inherit_active_mcp")


def agent_rows(definitions: Iterable[AgentDefinition]) -> list[tuple[str, str, str, str, str]]:
    """One row per definition, columns as :data:`AGENT_ROW_HEADERS` (for tables)."""
    return [
        (
            d.name,
            d.source_label,
            d.model or "(parent's)",
            d.tools_label,
            "true" if d.inherit_active_mcp else "false",
        )
        for d in definitions
    ]


# ---------------------------------------------------------------------------- spawning


def child_system_prompt(definition: AgentDefinition, cwd: Path, root: Path) -> str:
    """The definition's body, then the environment facts (so the child knows its cwd)."""
    from caliban.prompts import environment_facts

    facts = environment_facts(cwd, root)
    body = definition.system_prompt.strip()
    return f"{body}\n\n{facts}" if body else facts


__all__ = [
    "AGENT_ROW_HEADERS",
    "AGENT_TOOL_NAME",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_SUBAGENT",
    "GENERAL_PURPOSE",
    "AgentDefinition",
    "agent_rows",
    "child_system_prompt",
    "definition_dirs",
    "list_agents",
    "parse_agents_json",
    "parse_definition",
    "split_frontmatter",
    "split_tools",
]
