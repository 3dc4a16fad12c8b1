"""What the analysis of a Bash line gives: its simple commands, their redirections, or why
the line is not understood."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

RedirectKind = Literal["write", "read", "dup", "input"]

BENIGN_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
"""Write targets that change no file; :func:`~caliban.shell.effects.written_paths` leaves
them out."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Redirect:
    """One redirection: ``2>>log`` is ``Redirect(operator=">>", fd=2, target="log")``."""

    operator: str
    """``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``<``, ``>&``, ``<&``, ``>&-``, ``<&-``,
    ``<<``, ``<<-`` or ``<<<``."""
    fd: int | None
    """The descriptor written before the operator (``2`` in ``2>``); None when implied."""
    target: str
    """The word after the operator, quotes removed: a path, a descriptor (``1`` in
    ``2>&1``), ``-`` (close), or ``""`` for ``>&-``, heredocs and herestrings."""
    kind: RedirectKind
    """``write`` (a file is created, truncated or appended to), ``read`` (a file is read),
    ``dup`` (descriptors are copied or closed: no file), ``input`` (heredoc or herestring:
    text on stdin, in :attr:`body`)."""
    tilde: bool = False
    """The target starts with an unquoted ``~``: bash puts the home directory there."""
    body: str | None = None
    """The text a heredoc or herestring feeds to stdin."""

    @property
    def benign(self) -> bool:
        """True when it touches no file: a descriptor copy, a heredoc, or ``/dev/null`` and
        friends."""
        return self.kind in ("dup", "input") or (not self.tilde and self.target in BENIGN_TARGETS)


@dataclass(frozen=True, kw_only=True, slots=True)
class SimpleCommand:
    """One simple command: what bash passes to ``execve`` (or runs as a builtin)."""

    argv: tuple[str, ...]
    """The words, quotes removed and escapes resolved: ``"git" 'status'`` is
    ``("git", "status")``. Empty for a line that only assigns or only redirects."""
    assignments: tuple[str, ...] = ()
    """Leading ``NAME=value`` assignments (quotes removed from the value)."""
    redirects: tuple[Redirect, ...] = ()
    """Its own redirections, then those of every group it is in (``{ a; } >f``)."""
    separator: str = ""
    """What follows it: ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, ``\\n``, or ``""`` at
    the end. Subshells and ``{ }`` groups are flattened, so this is approximate there."""
    opaque_from: int | None = None
    """The index of the first word bash turns into words the analysis cannot read — a glob
    (``r?``, ``*.o``), brace expansion (``{rm,-rf,x}``), ``~``, and in a line not understood
    any expansion (``$X``) — or None. Deny and ask rules match anything that could follow
    the words before it (:mod:`caliban.permissions.bash_rules`)."""
    text: str = field(init=False, repr=False, compare=False)
    """The argv as rules see it (:func:`render`): words joined by spaces, a word quoted
    only when it is empty or contains whitespace, quotes or backslashes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", render(self.argv))


@dataclass(frozen=True, slots=True)
class Run:
    """A simple command: ``commands[index]`` of the line."""

    index: int


@dataclass(frozen=True, slots=True)
class Series:
    """Statements run one after the other in the same shell (``a; b``, ``{ a; b; }``)."""

    parts: tuple[Flow, ...]


@dataclass(frozen=True, slots=True)
class Both:
    """``left && right`` (right runs when left succeeds) or ``left || right`` (when it
    fails)."""

    left: Flow
    operator: Literal["&&", "||"]
    right: Flow


@dataclass(frozen=True, slots=True)
class Apart:
    """Run in a child shell — ``( … )``, a stage of a pipeline, a background job ``&``: a
    ``cd`` inside moves only what follows it inside."""

    body: Flow


@dataclass(frozen=True, slots=True)
class Negated:
    """``! body``: succeeds when the body fails."""

    body: Flow


@dataclass(frozen=True, slots=True)
class Choice:
    """``if condition; then then; else otherwise; fi`` (an ``elif`` is a Choice in
    ``otherwise``)."""

    condition: Flow
    then: Flow
    otherwise: Flow | None


@dataclass(frozen=True, slots=True)
class Loop:
    """``while condition; do body; done`` (``until``: the body runs while it fails); the
    body may run any number of times, none included."""

    condition: Flow
    body: Flow
    until: bool


Flow = Run | Series | Both | Apart | Negated | Choice | Loop
"""How a line's simple commands run: in order, conditionally, repeatedly, or in a child
shell — what decides where a ``cd`` moves the commands after it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Understood:
    """A command line analysed completely: every simple command it can run is here."""

    command: str
    commands: tuple[SimpleCommand, ...]
    flow: Flow | None = None
    """How the commands run (:data:`Flow`); None: one after the other, in this shell."""

    @property
    def structure(self) -> Flow:
        """:attr:`flow`, or the commands one after the other when it is None."""
        if self.flow is not None:
            return self.flow
        return Series(tuple(Run(index) for index in range(len(self.commands))))


@dataclass(frozen=True, kw_only=True, slots=True)
class NotUnderstood:
    """A command line with something the analysis cannot resolve. Allow rules never
    match it; deny and ask rules still look at what could be seen."""

    command: str
    reason: str
    """A short noun phrase: ``command substitution `$(date)```."""
    seen: tuple[SimpleCommand, ...] = ()
    """Best-effort commands for deny and ask rules only: found anywhere in the tree
    (substitutions, functions, loops, around parse errors), unresolvable words kept as
    written (``$HOME``)."""
    unchecked: bool = False
    """True when the line could not be read: too long to parse, not text, or not parsed by
    the grammar (which bash may still run: ``{rm,-rf,x}``). Every Bash deny and ask rule
    then matches it (over-matching a deny rule is the safe mistake)."""


Analysis = Understood | NotUnderstood


def render(argv: Sequence[str]) -> str:
    """Words joined by spaces, each quoted only when it is empty or contains whitespace,
    quotes or backslashes — so ``python 'script.py x'`` never reads as ``python script.py x``."""
    return " ".join(
        word if word and not _NEEDS_QUOTES.search(word) else shlex.quote(word) for word in argv
    )


_NEEDS_QUOTES = re.compile(r"[\s'\"\\]")


__all__ = [
    "BENIGN_TARGETS",
    "Analysis",
    "Apart",
    "Both",
    "Choice",
    "Flow",
    "Loop",
    "Negated",
    "NotUnderstood",
    "Redirect",
    "RedirectKind",
    "Run",
    "Series",
    "SimpleCommand",
    "Understood",
    "render",
]
