"""The tool interface.

A :class:`Tool` is anything the model can call: a built-in (a :class:`BuiltinTool`, whose
input is a pydantic model that also generates its JSON Schema) or an MCP tool. Tools never
raise for bad input or failure: :meth:`Tool.call` returns a :class:`ToolOutput` with
``is_error`` set, which the model reads.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from caliban.messages import ImagePart, ResultPart, TextPart, ToolSpec

if TYPE_CHECKING:
    from caliban.events import AgentEvent

ToolKind = Literal["builtin", "mcp"]


@dataclass(kw_only=True)
class ToolEnv:
    """Mutable per-agent state the tools share: the working directory and what was read.

    ``file_reads`` maps a resolved path to its ``st_mtime_ns`` when this session last read
    or wrote it; Write and Edit refuse to touch a file the session has not seen, or one that
    changed on disk since.
    """

    cwd: Path
    project_root: Path
    file_reads: dict[Path, int] = field(default_factory=dict)

    def resolve(self, path: str) -> Path:
        """``path`` made absolute against the working directory (``~`` expanded)."""
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else self.cwd / candidate

    def fork(self) -> ToolEnv:
        """An independent copy for a sub-agent (its ``cd`` does not move the parent)."""
        return ToolEnv(
            cwd=self.cwd, project_root=self.project_root, file_reads=dict(self.file_reads)
        )


@dataclass(frozen=True, kw_only=True)
class CallContext:
    """What one tool call gets besides its arguments."""

    env: ToolEnv
    call_id: str
    emit: Callable[[AgentEvent], None] = lambda event: None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutput:
    """A tool's result. ``summary`` is a short line for the terminal (``120 lines``)."""

    content: tuple[ResultPart, ...]
    is_error: bool = False
    summary: str | None = None

    @classmethod
    def text(cls, text: str, *, summary: str | None = None) -> ToolOutput:
        return cls(content=(TextPart(text=text),), summary=summary)

    @classmethod
    def error(cls, text: str) -> ToolOutput:
        return cls(content=(TextPart(text=text),), is_error=True)

    @property
    def as_text(self) -> str:
        return "\n".join(
            p.text if isinstance(p, TextPart) else f"[image {p.media_type}]" for p in self.content
        )


class Tool(Protocol):
    """Anything the model can call."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> ToolKind: ...

    @property
    def read_only(self) -> bool:
        """True when calling it changes nothing (allowed in plan mode)."""
        ...

    @property
    def spec(self) -> ToolSpec: ...

    def permission_subject(self, arguments: Mapping[str, Any]) -> str | None:
        """What ``Tool(pattern)`` permission rules match: a path, a command, or nothing."""
        ...

    async def call(self, arguments: Mapping[str, Any], ctx: CallContext) -> ToolOutput: ...


InputT = TypeVar("InputT", bound=BaseModel)


def format_validation_error(tool: str, error: ValidationError) -> str:
    lines = [f"Invalid input for {tool}:"]
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "(input)"
        lines.append(f"- {where}: {item['msg']}")
    return "\n".join(lines)


class BuiltinTool(abc.ABC, Generic[InputT]):
    """A tool implemented in caliban. Subclasses set the class attributes and :meth:`run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    read_only: ClassVar[bool] = False
    kind: ClassVar[ToolKind] = "builtin"

    @functools.cached_property
    def spec(self) -> ToolSpec:
        schema = self.input_model.model_json_schema(by_alias=True)
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, input_schema=schema)

    def permission_subject(self, arguments: Mapping[str, Any]) -> str | None:
        return None

    async def call(self, arguments: Mapping[str, Any], ctx: CallContext) -> ToolOutput:
        try:
            parsed = self.input_model.model_validate(arguments)
        except ValidationError as exc:
            return ToolOutput.error(format_validation_error(self.name, exc))
        return await self.run(parsed, ctx)  # type: ignore[arg-type]

    @abc.abstractmethod
    async def run(self, args: InputT, ctx: CallContext) -> ToolOutput: ...


__all__ = [
    "BuiltinTool",
    "CallContext",
    "ImagePart",
    "TextPart",
    "Tool",
    "ToolEnv",
    "ToolKind",
    "ToolOutput",
]
