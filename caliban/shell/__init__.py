"""What a Bash command line does — or why that cannot be known.

:func:`analyze` parses a line with tree-sitter's bash grammar and returns either
:class:`Understood` — every simple command as the argv bash would run (quotes removed,
escapes resolved), its leading assignments and its redirections — or :class:`NotUnderstood`
with a short reason. :func:`line_effects` says which files the line's redirections read and
write when it starts in a given directory, following its ``cd`` s. The permission rules
(:mod:`caliban.permissions.bash_rules`), the policy, the sandbox and checkpoints all read
these same facts; a tool call analyses its line once, when it is bound.

- :mod:`~caliban.shell.words`: one word read with bash's quoting rules;
- :mod:`~caliban.shell.walk`: the strict walk over the syntax tree;
- :mod:`~caliban.shell.commands`: what a simple command does (builtins, wrappers, ``cd``);
- :mod:`~caliban.shell.analysis`: :func:`analyze`, and the lenient walk deny rules use;
- :mod:`~caliban.shell.effects`: the files a line reads and writes, and where it runs;
- :mod:`~caliban.shell.values`: the values all of them produce.

The cases that are not understood, and how wrappers (``env``, ``sudo``, ``bash -c``…) are
treated, are listed in ``docs/permissions.md`` (section "How Bash rules are matched").
"""

from caliban.shell.analysis import MAX_COMMAND_CHARS, analyze
from caliban.shell.effects import (
    LineEffects,
    UnknownTarget,
    line_effects,
    read_paths,
    written_paths,
)
from caliban.shell.values import (
    BENIGN_TARGETS,
    Analysis,
    NotUnderstood,
    Redirect,
    SimpleCommand,
    Understood,
    render,
)

__all__ = [
    "BENIGN_TARGETS",
    "MAX_COMMAND_CHARS",
    "Analysis",
    "LineEffects",
    "NotUnderstood",
    "Redirect",
    "SimpleCommand",
    "Understood",
    "UnknownTarget",
    "analyze",
    "line_effects",
    "read_paths",
    "render",
    "written_paths",
]
