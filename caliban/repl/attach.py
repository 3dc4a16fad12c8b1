"""``@path`` mentions: each mentioned file's content is attached to the prompt.

``explain @caliban/cli.py`` sends the prompt text plus a ``<file path="caliban/cli.py">``
block with the file's content (bounded; a larger file is cut and says so). A directory
attaches its listing. Mentions that name nothing are left as typed, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from caliban.messages import Message, TextPart

MAX_FILE_CHARS = 100_000
MAX_TOTAL_CHARS = 300_000
MAX_DIR_ENTRIES = 200
_MENTION = re.compile(r"(?<![\w@])@((?:\\ |[^\s])+)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Attachment:
    path: str
    """As the user wrote it."""
    text: str
    """The ``<file>`` block sent to the model."""
    note: str
    """A short line for the terminal (``120 lines``)."""


def mentions(text: str) -> list[str]:
    """Paths mentioned with ``@`` (``\\ `` escapes a space), in order, without duplicates."""
    found: list[str] = []
    for match in _MENTION.finditer(text):
        path = match.group(1).replace("\\ ", " ").rstrip(".,;:!?)'\"")
        if path and path not in found:
            found.append(path)
    return found


def attach(text: str, cwd: Path) -> tuple[Message, list[Attachment], list[str]]:
    """The user message for ``text`` with its ``@`` mentions attached, the attachments, and
    problems to show (a missing path, a binary file, the size budget exhausted)."""
    attachments: list[Attachment] = []
    problems: list[str] = []
    budget = MAX_TOTAL_CHARS
    for raw in mentions(text):
        path = Path(raw).expanduser()
        full = path if path.is_absolute() else cwd / path
        if not full.exists():
            continue  # an @handle or an e-mail address, not a file
        if budget <= 0:
            problems.append(f"@{raw} not attached: the attachment budget is used up")
            continue
        try:
            attachment = _directory(raw, full) if full.is_dir() else _file(raw, full, budget)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(f"@{raw} not attached: {exc}")
            continue
        budget -= len(attachment.text)
        attachments.append(attachment)
    parts = (TextPart(text=text), *(TextPart(text=a.text) for a in attachments))
    return Message(role="user", parts=parts), attachments, problems


def _file(raw: str, full: Path, budget: int) -> Attachment:
    data = full.read_bytes()
    if b"\0" in data[:8192]:
        raise ValueError("it looks like a binary file")
    content = data.decode("utf-8")
    limit = min(MAX_FILE_CHARS, budget)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    note = f"{lines} line{'s' if lines != 1 else ''}"
    if len(content) > limit:
        kept = content[:limit]
        content = f"{kept}\n[… cut: showing {len(kept):,} of {len(content):,} characters]"
        note += f", cut to {len(kept):,} characters"
    body = content if content.endswith("\n") else content + "\n"
    return Attachment(path=raw, text=f'<file path="{raw}">\n{body}</file>', note=note)


def _directory(raw: str, full: Path) -> Attachment:
    entries = sorted(full.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    names = [f"{p.name}/" if p.is_dir() else p.name for p in entries[:MAX_DIR_ENTRIES]]
    if len(entries) > MAX_DIR_ENTRIES:
        names.append(f"[… {len(entries) - MAX_DIR_ENTRIES} more entries]")
    listing = "\n".join(names)
    note = f"directory, {len(entries)} entr{'ies' if len(entries) != 1 else 'y'}"
    text = f'<directory path="{raw}">\n{listing}\n</directory>'
    return Attachment(path=raw, text=text, note=note)
