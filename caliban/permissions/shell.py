"""Shell command lines as permission rules see them: the simple commands they run."""

from __future__ import annotations

__all__ = ["split_command"]


def split_command(command: str, *, lenient: bool = False) -> list[str] | None:
    """The simple commands of a shell command line, split at ``&&``, ``||``, ``;``, ``|``,
    ``&`` and newlines outside quotes.

    Returns None when the line substitutes commands (``$(…)``, backticks, ``<(…)``), whose
    inner commands an allow rule cannot vouch for. With ``lenient`` (used for deny and ask
    rules, where over-matching is safe) substitutions and parentheses split too.
    """
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0

    def cut() -> None:
        if text := "".join(current).strip():
            segments.append(text)
        current.clear()

    while i < len(command):
        char = command[i]
        pair = command[i : i + 2]
        if quote == "'":
            current.append(char)
            quote = None if char == "'" else quote
        elif char == "\\" and i + 1 < len(command):
            current.append(pair)
            i += 1
        elif pair in ("$(", "<(", ">(") or char == "`":
            if not lenient:
                return None
            cut()
            i += 2 if char != "`" else 1
            continue
        elif quote == '"':
            current.append(char)
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
            current.append(char)
        elif pair in ("&&", "||", "|&"):
            cut()
            i += 1
        elif char in ";|\n" or (lenient and char in "()"):
            cut()
        elif char == "&":
            previous = "".join(current).rstrip()[-1:]
            if previous in ("<", ">") or command[i + 1 : i + 2] == ">":
                current.append(char)  # a redirection: 2>&1, &>file
            else:
                cut()
        else:
            current.append(char)
        i += 1
    cut()
    return segments
