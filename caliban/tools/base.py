"""The tool interface.

A :class:`Tool` is anything the model can call: a built-in (a :class:`BuiltinTool`, whose
input is a pydantic model that also generates its JSON Schema) or an MCP tool. Every tool has
a typed :data:`ToolOrigin`; nothing identifies a tool's kind or server by parsing its name.

A call goes through two steps. :meth:`Tool.bind` validates the arguments once and returns an
:class:`Invocation` — what permission rules match (:attr:`Invocation.subject`), what the call
reads, writes, runs and reaches (:meth:`Invocation.effects`), what the user is shown when
asked (:meth:`Invocation.preview`) — or an error message for the model.
:meth:`Invocation.run` then does the work (:mod:`caliban.calls` runs a call's stages). Tools
never raise for bad input or failure: they return a :class:`ToolOutput` with ``is_error``
set, which the model reads.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from caliban.calls.effects import NO_EFFECTS, Effects
from caliban.messages import ResultPart, TextPart, ToolSpec
from caliban.tools.diff import FileChange
from caliban.tools.origin import BUILTIN, BuiltinOrigin, McpOrigin, ToolOrigin

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.sandbox.runtime import SandboxRuntime


Preview = FileChange | str
"""What a call would do: a file change for Write and Edit, plain text otherwise."""

MAX_PREVIEW_CHARS = 20_000


ReadGuard = Callable[[str, Path], str | None]
"""``(tool name, absolute path)`` → the deny rule forbidding that tool to read the file
(its text), or None. Tools that read many files (Grep, Glob) ask it about each one."""


def nothing_denied(tool_name: str, path: Path) -> str | None:
    """The :data:`ReadGuard` of an environment without deny rules."""
    return None


AddressGuard = Callable[[str, str], str | None]
"""``(tool name, address)`` → the deny rule forbidding that tool to reach the address (its
text), or None. WebFetch asks it about every address its host resolves to, as it connects."""


def no_address_denied(tool_name: str, address: str) -> str | None:
    """The :data:`AddressGuard` of an environment without deny rules."""
    return None


@dataclass(kw_only=True)
class ToolEnv:
    """Mutable per-agent state the tools share: the working directory and what was read.

    ``file_reads`` maps a resolved path to its ``st_mtime_ns`` when this session last read
    or wrote it; Write and Edit refuse to touch a file the session has not seen, or one that
    changed on disk since. ``read_denied`` is the permission policy's answer to "may this
    file be read?", for tools whose results span files the call's subject did not name;
    ``address_denied`` to "may this address be reached?", for a host that resolves to
    addresses its name did not show.
    """

    cwd: Path
    project_root: Path
    file_reads: dict[Path, int] = field(default_factory=dict)
    read_denied: ReadGuard = nothing_denied
    address_denied: AddressGuard = no_address_denied
    state: dict[str, Any] = field(default_factory=dict)
    """Per-agent state of tools, by tool name (TodoWrite's list); a sub-agent starts empty."""
    sandbox: SandboxRuntime | None = None
    """The session's OS sandbox, under which Bash runs its commands (None: no sandbox)."""

    def resolve(self, path: str) -> Path:
        """``path`` made absolute against the working directory (``~`` expanded)."""
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else self.cwd / candidate

    def staleness(self, path: Path) -> str | None:
        """Why ``path`` (resolved) may not be overwritten now, or None when this session's
        view of it is current: it was never read, or it changed on disk since."""
        seen = self.file_reads.get(path)
        if seen is None:
            return (
                f"{path} has not been read in this session. Read it first (the Read tool), "
                "then make your change, so you do not overwrite content you have not seen."
            )
        try:
            current = path.stat().st_mtime_ns
        except FileNotFoundError:
            return f"{path} was deleted since you read it. Check with Glob or Bash before writing."
        if current != seen:
            return (
                f"{path} has changed on disk since you last read it (edited by the user or "
                "another process). Read it again, then redo your change on the current content."
            )
        return None

    def fork(self) -> ToolEnv:
        """An independent copy for a sub-agent (its ``cd`` does not move the parent)."""
        return ToolEnv(
            cwd=self.cwd,
            project_root=self.project_root,
            file_reads=dict(self.file_reads),
            read_denied=self.read_denied,
            address_denied=self.address_denied,
            sandbox=self.sandbox,
        )


AskModel = Callable[[str], Awaitable[str]]
"""One question to the agent's model, without tools or history; returns the answer's text."""


@dataclass(frozen=True, kw_only=True)
class CallContext:
    """What one tool call gets besides its arguments."""

    env: ToolEnv
    call_id: str
    emit: Callable[[AgentEvent], None] = lambda event: None
    ask_model: AskModel | None = None
    """A side request to the same provider and model (WebFetch's answer about a page);
    ``None`` where no model is at hand."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutput:
    """A tool's result. ``summary`` is a short line for the terminal (``120 lines``);
    ``change`` is the file a Write or Edit changed, for showing its diff."""

    content: tuple[ResultPart, ...]
    is_error: bool = False
    summary: str | None = None
    change: FileChange | None = None
    data: Any = None
    """The result as JSON-ready data, for programs rather than the model (Claude Code's
    ``tool_use_result``: TodoWrite's old and new lists, WebFetch's status and size)."""
    ends_turn: bool = False
    """The turn is over once this call's results are in (StructuredOutput's answer)."""

    @classmethod
    def text(
        cls,
        text: str,
        *,
        summary: str | None = None,
        change: FileChange | None = None,
        data: Any = None,
        ends_turn: bool = False,
    ) -> ToolOutput:
        return cls(
            content=(TextPart(text=text),),
            summary=summary,
            change=change,
            data=data,
            ends_turn=ends_turn,
        )

    @classmethod
    def error(cls, text: str) -> ToolOutput:
        return cls(content=(TextPart(text=text),), is_error=True)

    def with_note(self, note: str) -> ToolOutput:
        """The same result with ``note`` after it (a hook's words about it)."""
        return dataclasses.replace(self, content=(*self.content, TextPart(text=note)))

    @property
    def as_text(self) -> str:
        return "\n".join(
            p.text if isinstance(p, TextPart) else f"[image {p.media_type}]" for p in self.content
        )


class Invocation(Protocol):
    """One call of a tool with arguments that passed its validation."""

    @property
    def subject(self) -> str | None:
        """What ``Tool(pattern)`` permission rules match: a path, a command, or nothing."""
        ...

    def effects(self, cwd: Path) -> Effects:
        """What the call reads, writes, runs and reaches when made from ``cwd`` (relative
        paths resolve there). Computed once per call, when it is bound."""
        ...

    def preview(self, env: ToolEnv) -> Preview:
        """What the call would do, for the permission prompt (may read the disk)."""
        ...

    async def run(self, ctx: CallContext) -> ToolOutput: ...


class Tool(Protocol):
    """Anything the model can call."""

    @property
    def name(self) -> str: ...

    @property
    def origin(self) -> ToolOrigin: ...

    @property
    def read_only(self) -> bool:
        """True when calling it changes nothing (allowed in plan mode)."""
        ...

    @property
    def spec(self) -> ToolSpec: ...

    def bind(self, arguments: Mapping[str, Any]) -> Invocation | str:
        """Validate ``arguments``: the call to run, or a message saying what is wrong."""
        ...


class PendingTool(abc.ABC):
    """A tool that is not known yet but may be soon (one of an MCP server still starting):
    the call pipeline waits for it, then looks the name up again."""

    name: str

    @abc.abstractmethod
    async def arrival(self) -> str | None:
        """Wait until the tool can be known (bounded); why it will not be, or ``None``."""


async def call_tool(tool: Tool, arguments: Mapping[str, Any], ctx: CallContext) -> ToolOutput:
    """Bind and run in one step (no permission check): for tests and internal callers."""
    bound = tool.bind(arguments)
    if isinstance(bound, str):
        return ToolOutput.error(bound)
    return await bound.run(ctx)


def json_preview(arguments: Mapping[str, Any]) -> str:
    """The input as indented JSON, capped: the preview of a tool with nothing better."""
    return cap_preview(json.dumps(dict(arguments), indent=2, ensure_ascii=False, default=str))


def cap_preview(text: str) -> str:
    if len(text) <= MAX_PREVIEW_CHARS:
        return text
    rest = text[MAX_PREVIEW_CHARS:]
    return text[:MAX_PREVIEW_CHARS] + f"\n… ({rest.count(chr(10)) + 1:,} more lines)"


InputT = TypeVar("InputT", bound=BaseModel)


def format_validation_error(tool: str, error: ValidationError) -> str:
    lines = [f"Invalid input for {tool}:"]
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "(input)"
        lines.append(f"- {where}: {item['msg']}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class BuiltinInvocation(Generic[InputT]):
    """A built-in tool bound to its parsed input."""

    tool: BuiltinTool[InputT]
    args: InputT

    @property
    def subject(self) -> str | None:
        return self.tool.subject(self.args)

    def effects(self, cwd: Path) -> Effects:
        return self.tool.effects(self.args, cwd)

    def preview(self, env: ToolEnv) -> Preview:
        try:
            return self.tool.preview(self.args, env)
        except (OSError, ValueError) as exc:
            return f"(no preview: {exc})"

    async def run(self, ctx: CallContext) -> ToolOutput:
        return await self.tool.run(self.args, ctx)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with nested models written in place (no ``$defs``/``$ref``): some
    OpenAI-compatible servers do not resolve references, and the model reads it more easily."""
    defs = schema.pop("$defs", None)
    if not defs:
        return schema

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = dict(defs[ref.removeprefix("#/$defs/")])
                target.pop("title", None)
                target["properties"] = {
                    name: {k: v for k, v in prop.items() if k != "title"}
                    for name, prop in target.get("properties", {}).items()
                }
                return resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}})
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


class _InputSchema(GenerateJsonSchema):
    """Tool input schemas as pydantic writes them, without the TypeAdapter it builds to encode
    each field's default (28 of them in the built-in tools' schemas, 5–8 ms of every
    start-up): a ``str``, ``int``, ``bool`` or ``None`` default is already its JSON."""

    def encode_default(self, dft: Any) -> Any:
        if dft is None or type(dft) in (str, int, bool):
            return dft
        return super().encode_default(dft)


class BuiltinTool(abc.ABC, Generic[InputT]):
    """A tool implemented in caliban. Subclasses set the class attributes and :meth:`run`,
    and override :meth:`subject` and :meth:`preview` when permission rules or the user
    need more than the input."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    read_only: ClassVar[bool] = False
    origin: ClassVar[ToolOrigin] = BUILTIN

    @functools.cached_property
    def spec(self) -> ToolSpec:
        schema = _inline_refs(
            self.input_model.model_json_schema(by_alias=True, schema_generator=_InputSchema)
        )
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, input_schema=schema)

    def bind(self, arguments: Mapping[str, Any]) -> BuiltinInvocation[InputT] | str:
        try:
            parsed = self.input_model.model_validate(arguments)
        except ValidationError as exc:
            return format_validation_error(self.name, exc)
        return BuiltinInvocation(self, parsed)  # type: ignore[arg-type]

    def subject(self, args: InputT) -> str | None:
        """What ``Tool(pattern)`` permission rules match; ``None``: only ``Tool`` rules."""
        return None

    def effects(self, args: InputT, cwd: Path) -> Effects:
        """What a call reads, writes, runs and reaches (see :meth:`Invocation.effects`);
        by default nothing outside the session."""
        return NO_EFFECTS

    def preview(self, args: InputT, env: ToolEnv) -> Preview:
        return json_preview(args.model_dump(mode="json", by_alias=True, exclude_unset=True))

    async def call(self, arguments: Mapping[str, Any], ctx: CallContext) -> ToolOutput:
        """Bind and run (no permission check)."""
        return await call_tool(self, arguments, ctx)

    @abc.abstractmethod
    async def run(self, args: InputT, ctx: CallContext) -> ToolOutput: ...


__all__ = [
    "BUILTIN",
    "AddressGuard",
    "AskModel",
    "BuiltinInvocation",
    "BuiltinOrigin",
    "BuiltinTool",
    "CallContext",
    "Invocation",
    "McpOrigin",
    "PendingTool",
    "Preview",
    "ReadGuard",
    "Tool",
    "ToolEnv",
    "ToolOrigin",
    "ToolOutput",
    "call_tool",
    "cap_preview",
    "json_preview",
    "no_address_denied",
    "nothing_denied",
]
