"""``/init``: the model studies the project and writes its memory file.

A built-in command, in the REPL and with ``caliban -p "/init"``: the prompt asks the model
to write ``CLAUDE.md`` at the project root (``AGENTS.md`` when the project keeps its agent
notes there and has no ``CLAUDE.md``), or to improve the one that exists. The write goes
through the Write or Edit tool like any other, so the permission rules apply.
"""

from __future__ import annotations

from pathlib import Path

from caliban.messages import Message, TextPart

NAME = "init"
DESCRIPTION = "Have the model write or improve the project's CLAUDE.md (or AGENTS.md)"

INIT_PROMPT = """\
Study this repository, then write {name} at its root ({path}): the notes a coding agent \
reads before it works here. {existing}

What belongs in it:
1. How to set up, build, lint and test, including how to run one test on its own.
2. The architecture a newcomer cannot see from any single file: the main parts, how data \
flows between them, and where the usual kinds of change are made.
3. Conventions this project follows that differ from the defaults of its languages and \
tools: layout, style, naming, commit messages.
4. What the existing guides say that matters: the README, CONTRIBUTING, and other agents' \
instructions (.cursorrules, .cursor/rules/, .github/copilot-instructions.md, AGENTS.md, \
CLAUDE.md).

Keep it short and true to this project: no generic advice, no sections you would have to \
invent, no list of every file (those are easy to find). Begin the file with a "# {name}" \
heading and one sentence saying it guides coding agents working in this repository."""


def memory_file_for(root: Path) -> Path:
    """Where ``/init`` writes: ``AGENTS.md`` when only it exists, else ``CLAUDE.md``."""
    agents, claude = root / "AGENTS.md", root / "CLAUDE.md"
    return agents if agents.is_file() and not claude.is_file() else claude


def init_message(root: Path) -> Message:
    """The user message ``/init`` sends: Claude Code's command header, then the request."""
    target = memory_file_for(root)
    existing = (
        f"{target.name} exists already: read it first and improve it rather than starting over."
        if target.is_file()
        else ""
    )
    text = INIT_PROMPT.format(name=target.name, path=target, existing=existing).replace(" \n", "\n")
    header = f"<command-message>{NAME}</command-message>\n<command-name>/{NAME}</command-name>\n"
    return Message(role="user", parts=(TextPart(text=header), TextPart(text=text)))
