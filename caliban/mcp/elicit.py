"""Elicitation: a server asks the user for input in the middle of a tool call.

The manager answers each ``elicitation/create`` request through an :data:`Elicitor` (the
front door's: the REPL asks the user; headless, :func:`decline` answers at once, so a server
that elicits never waits on nobody). Whatever the elicitor does, the answer is bounded by the
server's ``tool_timeout`` and a failure declines: never an error, never a hang.

:func:`form_fields` and :func:`parse_answer` turn the requested schema (the protocol allows
a flat object of strings, numbers, integers, booleans and enums) into questions and typed
answers, so a front door only prints and reads lines.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ElicitAnswer",
    "Elicitation",
    "Elicitor",
    "FormField",
    "decline",
    "form_fields",
    "parse_answer",
    "sdk_callback",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Elicitation:
    """One request of a server: a form (``schema``) or a URL to open (``url``)."""

    server: str
    message: str
    schema: Mapping[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    """A URL request's id (the server says when it is complete by it)."""


@dataclass(frozen=True, kw_only=True)
class ElicitAnswer:
    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


Elicitor = Callable[[Elicitation], Awaitable[ElicitAnswer]]


async def decline(request: Elicitation) -> ElicitAnswer:
    """Headless: nobody can answer, so say no at once (Claude Code's ``-p`` does too)."""
    return ElicitAnswer(action="decline")


@dataclass(frozen=True, kw_only=True)
class FormField:
    """One question of a form."""

    name: str
    title: str
    kind: Literal["string", "number", "integer", "boolean"]
    required: bool
    description: str = ""
    choices: tuple[str, ...] = ()
    default: Any = None


def form_fields(schema: Mapping[str, Any]) -> list[FormField]:
    """The questions of a requested schema, in its order."""
    properties = schema.get("properties")
    required = set(schema.get("required") or ())
    fields = []
    for name, spec in (properties or {}).items() if isinstance(properties, Mapping) else ():
        if not isinstance(spec, Mapping):
            continue
        kind = spec.get("type")
        choices = spec.get("enum") or [
            option.get("const") for option in spec.get("oneOf") or () if isinstance(option, dict)
        ]
        fields.append(
            FormField(
                name=str(name),
                title=str(spec.get("title") or name),
                kind=kind if kind in ("number", "integer", "boolean") else "string",
                required=name in required,
                description=str(spec.get("description") or ""),
                choices=tuple(str(c) for c in choices if c is not None),
                default=spec.get("default"),
            )
        )
    return fields


def parse_answer(field: FormField, text: str) -> Any:
    """The typed value of ``text`` for ``field``; raises ValueError with a message to show.
    An empty answer is the default (or None: left out)."""
    text = text.strip()
    if not text:
        if field.required and field.default is None:
            raise ValueError(f"{field.title} is required")
        return field.default
    if field.choices:
        if text.isdigit() and 1 <= int(text) <= len(field.choices):
            return field.choices[int(text) - 1]
        if text not in field.choices:
            raise ValueError(f"choose one of: {', '.join(field.choices)}")
        return text
    match field.kind:
        case "boolean":
            if text.lower() in ("y", "yes", "true", "1"):
                return True
            if text.lower() in ("n", "no", "false", "0"):
                return False
            raise ValueError("answer yes or no")
        case "integer":
            try:
                return int(text)
            except ValueError:
                raise ValueError("a whole number, please") from None
        case "number":
            try:
                return float(text)
            except ValueError:
                raise ValueError("a number, please") from None
        case _:
            return text


def sdk_callback(server: str, elicitor: Elicitor, timeout: Callable[[], float]) -> Any:
    """The SDK's ``elicitation_callback`` for ``server``: asks ``elicitor``, within
    ``timeout()`` seconds; declines when it fails or takes too long."""
    import anyio
    import mcp_types

    async def callback(context: Any, params: Any) -> Any:
        url = getattr(params, "url", None)
        schema = getattr(params, "requested_schema", None)
        if schema is not None and hasattr(schema, "model_dump"):
            schema = schema.model_dump(mode="json", by_alias=True, exclude_none=True)
        elicitation_id = getattr(params, "elicitation_id", None)
        request = Elicitation(
            server=server,
            message=str(params.message),
            schema=schema if isinstance(schema, Mapping) else None,
            url=str(url) if url else None,
            elicitation_id=str(elicitation_id) if elicitation_id else None,
        )
        try:
            with anyio.fail_after(timeout()):
                answer = await elicitor(request)
        except Exception as exc:  # the server gets a "no", the user a line in the log
            logger.warning("elicitation from %s declined: %s", server, exc)
            answer = ElicitAnswer(action="decline")
        content = dict(answer.content) if answer.action == "accept" and answer.content else None
        return mcp_types.ElicitResult(action=answer.action, content=content)

    return callback
