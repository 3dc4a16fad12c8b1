"""What the ``caliban`` subcommands print.

What they list (a server's command and stderr, tool descriptions, config values, saved
prompts) may come from a cloned repository or an MCP server, so every line is written with
its control and invisible characters escaped (:func:`caliban.text.visible`): a listing the
user reads before trusting a folder cannot hide part of itself or drive the terminal.
"""

from __future__ import annotations

import sys

from caliban.text import visible


def out(text: str = "") -> None:
    """Print a line on stdout, escaped."""
    print(visible(text))


def err(text: str) -> None:
    """Print a line on stderr, escaped."""
    print(visible(text), file=sys.stderr)
