"""The REPL's answer to an MCP server's elicitation: the server's question, then one line per
field of its form (typed answers checked, asked again when wrong), or for a URL request the
address to open and a confirmation. Ctrl-C or Ctrl-D cancels; Enter on an empty optional field
leaves it out. Headless runs decline instead (:func:`caliban.mcp.elicit.decline`)."""

from __future__ import annotations

import asyncio
import threading
import webbrowser
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from prompt_toolkit import PromptSession
from rich.console import Console
from rich.text import Text

from caliban.mcp.elicit import ElicitAnswer, Elicitation, FormField, form_fields, parse_answer
from caliban.util.text import visible


class TerminalElicitor:
    """An :data:`~caliban.mcp.elicit.Elicitor` that asks at the terminal, one at a time."""

    def __init__(
        self,
        console: Console,
        pause: Callable[[], AbstractContextManager[None]] = nullcontext,
        read: Callable[[str], Any] | None = None,
    ) -> None:
        self.console = console
        self.pause = pause
        self._read = read or (lambda label: PromptSession[str]().prompt_async(label))
        self._lock = asyncio.Lock()

    async def __call__(self, request: Elicitation) -> ElicitAnswer:
        async with self._lock:
            with self.pause():
                try:
                    return await self._ask(request)
                except (KeyboardInterrupt, EOFError):
                    self.console.print(Text("  Cancelled.", style="yellow"))
                    return ElicitAnswer(action="cancel")

    async def _ask(self, request: Elicitation) -> ElicitAnswer:
        self.console.print(
            Text(f"MCP server '{request.server}' asks: ", style="bold yellow")
            + Text(visible(request.message))
        )
        if request.url is not None:
            self.console.print(Text(f"  {visible(request.url)}"))
            answer = await self._read("  Open this address? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                return ElicitAnswer(action="decline")
            if request.url.startswith(("https://", "http://")):
                threading.Thread(target=webbrowser.open, args=(request.url,), daemon=True).start()
            await self._read("  Press Enter when you are done there. ")
            return ElicitAnswer(action="accept")
        content: dict[str, Any] = {}
        for field in form_fields(request.schema or {}):
            value = await self._field(field)
            if value is not None:
                content[field.name] = value
        return ElicitAnswer(action="accept", content=content)

    async def _field(self, field: FormField) -> Any:
        hints = []
        if field.choices:
            hints.append(" / ".join(f"{i}. {c}" for i, c in enumerate(field.choices, 1)))
        elif field.kind == "boolean":
            hints.append("y/n")
        if field.default is not None:
            hints.append(f"default {field.default}")
        if not field.required:
            hints.append("optional")
        hint = f" ({'; '.join(hints)})" if hints else ""
        about = f" — {visible(field.description)}" if field.description else ""
        while True:
            text = await self._read(f"  {visible(field.title)}{about}{hint}: ")
            try:
                return parse_answer(field, text)
            except ValueError as exc:
                self.console.print(Text(f"    {exc}", style="red"))
