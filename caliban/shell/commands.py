"""What a simple command does as bash runs it: builtins that change the shell, wrappers that
run another command, commands that run a string as a command line, and ``cd``.

The strict walk refuses commands whose meaning it cannot pin down (:func:`check_command`);
deny and ask rules look through wrappers and into the strings a command runs
(:func:`wrapped`, :func:`inner_scripts`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence

from caliban.shell.values import SimpleCommand
from caliban.shell.words import ASSIGNMENT, Unclear, Word

MAX_WRAPPED_WORDS = 32
"""A wrapped command (``sudo … rm``) is looked for among this many leading words."""

WRAPPERS = frozenset(
    {
        "builtin", "busybox", "caffeinate", "chroot", "chrt", "command", "doas", "env",
        "exec", "fakeroot", "firejail", "flock", "ionice", "ltrace", "nice", "nohup",
        "nsenter", "parallel", "pkexec", "proxychains", "proxychains4", "runuser", "setpriv",
        "setsid", "sg", "ssh", "stdbuf", "strace", "sudo", "systemd-run", "taskset", "time",
        "timeout", "torsocks", "unbuffer", "unshare", "watch", "xargs",
    }
)  # fmt: skip
"""Commands that run another command given in their arguments. Deny and ask rules look
through them; allow rules must match the whole command, wrapper included."""
SHELLS = frozenset(
    {
        "ash", "bash", "busybox", "csh", "dash", "fish", "ksh", "ksh93", "mksh", "posh",
        "powershell", "pwsh", "rbash", "sh", "tcsh", "yash", "zsh",
    }
)  # fmt: skip
"""Shells whose ``-c`` string (or heredoc/herestring on stdin) deny and ask rules look into."""
_RUNS_A_STRING = frozenset({"script", "sg", "ssh", "su", "runuser"})
"""Besides shells, commands whose arguments are a command line a shell runs."""
_APPENDS_ARGUMENTS = frozenset({"xargs"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})

# Reserved words that never name a command; seeing one as a command name means the grammar
# and bash disagree (e.g. ``time { rm x; }``).
_RESERVED = frozenset(
    {"!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi",
     "for", "function", "if", "in", "select", "then", "until", "while"}
)  # fmt: skip
# Builtins that run text as code, or change what later commands in the line mean.
_UNSAFE_BUILTINS = {
    "eval": "`eval` runs its arguments as a command",
    "exec": "`exec` replaces the shell (and `exec >file` redirects what follows)",
    "source": "`source` runs a script file",
    ".": "`.` runs a script file",
    "trap": "`trap` runs a string as a command later",
    "alias": "`alias` changes what later commands mean",
    "enable": "`enable` loads or switches off shell builtins",
    "hash": "`hash` changes where later commands are found",
    "shopt": "`shopt` changes how the shell parses and expands",
    "coproc": "`coproc` starts a coprocess",
    "fc": "`fc` re-runs commands from history",
    "bind": "`bind` can run commands",
    "complete": "`complete` can run commands",
    "compgen": "`compgen` can run commands",
}
_ASSIGNING_BUILTINS = frozenset(
    {"declare", "export", "getopts", "let", "local", "mapfile", "read", "readarray",
     "readonly", "typeset", "unset"}
)  # fmt: skip
_SAFE_SET_LETTERS = frozenset("euxv")
_SAFE_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "verbose", "xtrace"})
CD = frozenset({"cd", "pushd", "popd"})
"""Builtins that move the shell's working directory."""


def unwrap_builtins(argv: Sequence[str]) -> Sequence[str]:
    """Skip ``command``, ``builtin`` and ``time``, which run a builtin in this shell."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word not in ("command", "builtin", "time"):
            break
        i += 1
        while i < len(argv) and argv[i].startswith("-") and word != "builtin":
            i += 1
            if argv[i - 1] == "--":
                break
    return argv[i:]


def check_command(words: Sequence[Word]) -> None:
    """Refuse command names bash would expand or read as syntax, and builtins that run
    text or change what later commands mean."""
    if not words:
        return
    name = words[0]
    if name.glob or name.brace or name.tilde or name.inner_tilde:
        raise Unclear(f"a command name bash would expand ({name.raw!r})")
    for word in words[1:]:
        if word.brace:
            raise Unclear(f"brace expansion, which makes several words of one ({word.raw!r})")
    if name.value in _RESERVED or ASSIGNMENT.match(name.raw):
        raise Unclear(f"a command name bash reads as syntax ({name.raw!r})")
    argv = [word.value for word in words]
    if argv[0] == "time" and any(word in _RESERVED for word in argv[1:3]):
        raise Unclear("`time` before a compound command")
    inner = unwrap_builtins(argv)
    if not inner:
        return
    head = inner[0]
    if head in _UNSAFE_BUILTINS:
        raise Unclear(_UNSAFE_BUILTINS[head])
    if head in _ASSIGNING_BUILTINS:
        raise Unclear(f"`{head}` (it assigns variables later commands may use)")
    if head == "printf" and any(word.startswith("-v") for word in _options(inner[1:])):
        raise Unclear("`printf -v` (it assigns a variable)")
    if head == "set":
        _check_set(inner[1:])
    check_test(inner)
    if head in ("cd", "pushd"):
        offset = len(argv) - len(inner)
        target = cd_argument(inner)
        if target is not None:
            word = words[offset + inner.index(target, 1)]
            if word.glob or word.brace or word.inner_tilde:
                raise Unclear(f"`cd` to a pattern bash would expand ({word.value!r})")
            if word.value.startswith("~") and not word.tilde:
                raise Unclear(f"`cd` to a directory named ~ ({word.value!r})")


def check_test(argv: Sequence[str]) -> None:
    """Refuse ``test -v``/``[ -v``: ``test -v 'a[$(cmd)]'`` evaluates the subscript, and so
    runs cmd."""
    if argv and argv[0] in ("test", "[") and "-v" in argv[1:]:
        raise Unclear(f"`{argv[0]} -v` (it evaluates array subscripts, which can run commands)")


def _options(words: Sequence[str]) -> Iterator[str]:
    for word in words:
        if word == "--" or not word.startswith("-"):
            return
        yield word


def _check_set(arguments: Sequence[str]) -> None:
    expected = 0  # -o flags waiting for their option name
    for word in arguments:
        if expected:
            if word not in _SAFE_SET_OPTIONS:
                raise Unclear(f"`set -o {word}` (only {', '.join(sorted(_SAFE_SET_OPTIONS))})")
            expected -= 1
        elif re.fullmatch(r"[-+][A-Za-z]+", word) and set(word[1:]) <= _SAFE_SET_LETTERS | {"o"}:
            expected = word.count("o")
        else:
            raise Unclear(f"`set {word}` (only -e, -u, -x, -v and -o with a safe option)")
    if expected:
        raise Unclear("`set -o` without an option name")


def cd_argument(argv: Sequence[str]) -> str | None:
    """The directory argument of ``cd``/``pushd`` (None when there is none)."""
    words = argv[1:]
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        i += 1
        if words[i - 1] == "--":
            break
    return words[i] if i < len(words) else None


def wrapped(argv: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """The commands ``argv`` may run from its own arguments, over-matched: every tail after a
    wrapper (``sudo -u x rm …`` may run ``rm …``; ``xargs rm`` runs ``rm`` with more words,
    shown as ``…``; ``env -S 'rm x'`` splits its string), and what ``find -exec`` runs."""
    name = os.path.basename(argv[0]) if argv else ""
    if name in WRAPPERS:
        for start in range(1, min(len(argv), MAX_WRAPPED_WORDS)):
            yield tuple(argv[start:])
            if name in _APPENDS_ARGUMENTS:
                yield (*argv[start:], "…")
            if name == "env" and (split := _split_string(argv[start])) is not None:
                yield (split, *argv[start + 1 :])
    for start, word in enumerate(argv[:MAX_WRAPPED_WORDS] if name == "find" else ()):
        if word in _FIND_EXEC:
            end = next((i for i in range(start + 1, len(argv)) if argv[i] in (";", "+")), None)
            yield tuple(argv[start + 1 : end])


def _split_string(word: str) -> str | None:
    """What ``env --split-string=STR`` (or ``-SSTR``) splits into a command, else None."""
    for prefix in ("--split-string=", "-S"):
        if word.startswith(prefix) and len(word) > len(prefix):
            return word[len(prefix) :]
    return None


def inner_scripts(command: SimpleCommand) -> Iterator[str]:
    """Command lines a command runs from its arguments or stdin: ``bash -c STR``,
    ``eval …``, ``su -c STR``, ``sg GROUP STR``, ``ssh HOST STR``, ``bash <<EOF``; also after
    a wrapper (``sudo sh -c …``). Over-matches: after a shell's ``-c`` every word that is
    not an option may be its command (``bash -o errexit -c STR``, ``bash -c -- STR``)."""
    argv = command.argv
    if argv and os.path.basename(argv[0]) == "eval":
        yield " ".join(argv[1:])
    for start in range(min(len(argv), MAX_WRAPPED_WORDS)):
        head = os.path.basename(argv[start])
        if head not in SHELLS and head not in _RUNS_A_STRING:
            continue
        rest = argv[start + 1 : start + MAX_WRAPPED_WORDS]
        if head in ("sg", "ssh"):  # the command line is the words after the group or host
            for index in range(1, len(rest)):
                yield " ".join(rest[index:])
            continue
        c_option = next(
            (
                index
                for index, word in enumerate(rest)
                if word.lower() in ("--command", "-command")
                or (word.startswith(("-", "+")) and not word.startswith("--") and "c" in word[1:])
            ),
            None,
        )
        if c_option is not None:
            yield from (word for word in rest[c_option + 1 :] if not word.startswith("-"))
        elif head in SHELLS and start == 0:
            for redirect in command.redirects:
                if redirect.kind == "input" and redirect.body:
                    yield redirect.body


__all__ = [
    "CD",
    "MAX_WRAPPED_WORDS",
    "SHELLS",
    "WRAPPERS",
    "cd_argument",
    "check_command",
    "check_test",
    "inner_scripts",
    "unwrap_builtins",
    "wrapped",
]
