"""What calling a tool on an MCP server comes back as, before the model sees it: the server's
``CallToolResult``, or a :data:`CallFailure` saying why there is none. Protocol-level values;
:func:`caliban.mcp.tools.call_output` turns either into the model's tool result."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import mcp_types

__all__ = [
    "CALL_FAILURES",
    "CallFailed",
    "CallFailure",
    "CallOutcome",
    "CallTimedOut",
    "ConnectionLost",
    "ServerDisabled",
    "ServerError",
    "ServerUnavailable",
    "UnknownServer",
    "invalid_answer",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class UnknownServer:
    server: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerDisabled:
    """The server is ``disabled`` in its configuration."""

    server: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerUnavailable:
    """The server could not be (re)connected for the call."""

    server: str
    reason: str
    """Why: its failure (``exited with code 1``), or its state."""
    stderr_tail: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class CallTimedOut:
    server: str
    tool: str
    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectionLost:
    """The connection ended during the call; the next call reconnects."""

    server: str
    tool: str
    violation: str | None = None
    """How the server broke the protocol, when caliban cut the connection for it."""
    restarts_process: bool = False
    """caliban runs the server's process (stdio), so reconnecting restarts it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerError:
    """The server answered with a JSON-RPC error."""

    server: str
    tool: str
    code: int
    message: str
    """The server's own words, whole (the model-facing edge bounds and marks them)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFailed:
    """Anything else: an answer that is not valid, a transport error."""

    server: str
    tool: str
    detail: str


CallFailure: TypeAlias = (
    UnknownServer
    | ServerDisabled
    | ServerUnavailable
    | CallTimedOut
    | ConnectionLost
    | ServerError
    | CallFailed
)
CALL_FAILURES = (
    UnknownServer,
    ServerDisabled,
    ServerUnavailable,
    CallTimedOut,
    ConnectionLost,
    ServerError,
    CallFailed,
)
"""The :data:`CallFailure` classes, for ``isinstance``."""
CallOutcome: TypeAlias = "mcp_types.CallToolResult | CallFailure"


def invalid_answer(exc: BaseException) -> str | None:
    """One line for a server answer the SDK's models rejected (pydantic's own text has a line
    per problem, each with a URL); None for other exceptions."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(exc, pydantic.ValidationError):
        return None
    problems = exc.errors()
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return f"invalid {exc.title} from the server: {where}: {first['msg']}{more}"
