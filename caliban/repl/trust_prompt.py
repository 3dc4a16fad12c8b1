"""The trust question, asked once before the first prompt in a folder that needs it.

A folder that is not trusted and holds project files that would start MCP servers or widen
permissions (:func:`caliban.session.assemble.held_back`) gets one question::

    ╭ Do you trust the files in /home/me/repo? ─────────────────────────────╮
    │ Trusting it lets what is committed there run code and widen …         │
    │   .mcp.json:2: MCP server evil (sh -c …)                              │
    ╰───────────────────────────────────────────────────────────────────────╯
     1. Yes, trust this folder
     2. No, start without them

"Yes" is remembered (:func:`caliban.permissions.trust.trust`); "No" starts without them and asks
again next time. Ctrl-C leaves caliban.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from caliban.config.paths import project_root
from caliban.permissions import trust
from caliban.repl.approve import choose, to_ansi
from caliban.util.text import visible


async def settle_trust(
    console: Console, cwd: Path, *, on_shown: Callable[[], object] | None = None
) -> None:
    """Ask whether to trust the project of ``cwd`` if it is untrusted and holds something
    trust would enable; remembers a "yes". Raises KeyboardInterrupt on Ctrl-C. Like every
    question, it reads only keys pressed once it is drawn (``on_shown`` is called then):
    a first prompt typed while caliban starts does not answer it."""
    root = project_root(cwd)
    if trust.is_trusted(root) or not trust.has_project_files(root):
        return  # a few stat calls: nothing is imported on the common path

    def scan() -> list[str]:
        from caliban.session.assemble import held_back

        return held_back(cwd)

    items = await asyncio.to_thread(scan)
    if not items:
        return
    panel = Panel(
        Group(
            Text(
                "What is committed here would run code or widen permissions. Trust the "
                "folder only if you trust where it came from.",
            ),
            Text("\n".join(f"  {visible(item)}" for item in items), style="yellow"),
            Text(
                "Without trust these are skipped; deny rules and other settings still apply. "
                "Later: `caliban trust` / `caliban trust --revoke`.",
                style="dim",
            ),
        ),
        title=Text(f"Do you trust the files in {visible(str(root))}?", style="bold"),
        title_align="left",
        border_style="yellow",
        expand=True,
    )
    on_terminal = console.is_terminal
    if not on_terminal:
        console.print(panel)
    choice = await choose(
        [("once", "Yes, trust this folder"), ("deny", "No, start without them (esc)")],
        header=to_ansi(console, panel) if on_terminal else None,
        question="Trust this folder?",
        shortcuts={"y": "once", "n": "deny", "escape": "deny"},
        on_shown=on_shown,
    )
    if choice == "once":
        try:
            stored = trust.trust(root)
        except OSError as exc:  # a read-only state directory: untrusted is the safe side
            console.print(
                Text(
                    f"  ⚠  Could not remember the trust ({exc.strerror or exc}: "
                    f"{trust.trust_file()}); starting without them. Set CALIBAN_STATE_DIR to "
                    "a writable directory, then `caliban trust`.",
                    style="yellow",
                )
            )
            return
        console.print(Text(f"  ✓ Trusted {stored} (remembered)", style="dim"))
    else:
        console.print(
            Text("  Starting without them; `caliban trust` trusts it later.", style="dim")
        )


__all__ = ["settle_trust"]
