"""``@path`` mentions: each mentioned file's content is attached to the prompt.

``explain @caliban/cli.py`` sends the prompt text plus a ``<file path="caliban/cli.py">``
block with the file's content (bounded; a larger file is cut and says so). An image
(``@shot.png``: PNG, JPEG, GIF or WebP, up to the Read tool's 5 MB) is sent as an image
block. A directory attaches its listing. Mentions that name nothing are left as typed, with
a note when they look like a path (``@src/ap.py``) rather than a handle (``@alice``).

An attached file counts as read, as in Claude Code: :func:`attach` records it in the
session's :class:`~caliban.tools.base.ToolEnv` (its ``file_reads``), so the model may Edit
it without reading it again.
"""

from __future__ import annotations

import base64
import codecs
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from caliban.messages import ImagePart, Message, Part, TextPart
from caliban.tools.base import ReadGuard, ToolEnv
from caliban.util.mentions import mentions

MAX_FILE_CHARS = 100_000
MAX_TOTAL_CHARS = 300_000
MAX_DIR_ENTRIES = 200


@dataclass(frozen=True, kw_only=True, slots=True)
class Attachment:
    path: str
    """As the user wrote it."""
    part: Part
    """What the model gets: the ``<file>`` block, or the image."""
    note: str
    """A short line for the terminal (``120 lines``)."""
    read: Path | None = None
    """The file, when the model now has all of it (it counts as read)."""

    @property
    def size(self) -> int:
        """Characters it takes from the attachment budget (an image: none)."""
        return len(self.part.text) if isinstance(self.part, TextPart) else 0


def attach(
    text: str,
    env: ToolEnv,
    *,
    images: Sequence[ImagePart] = (),
    skip: Callable[[str], bool] = lambda raw: False,
) -> tuple[Message, list[Attachment], list[str]]:
    """The user message for ``text`` with its ``@`` mentions attached (and ``images``, pasted
    with Ctrl-V), the attachments, and problems to show (a missing path, a binary file, the
    size budget exhausted, a file the permission rules deny reading: ``env.read_denied`` is
    the session's policy). Each file attached whole is recorded as read in ``env``. Mentions
    that ``skip`` claims (``@server:uri`` resources) are left to their owner."""
    cwd, read_denied = env.cwd, env.read_denied
    attachments: list[Attachment] = []
    problems: list[str] = []
    budget = MAX_TOTAL_CHARS
    for raw in mentions(text):
        if skip(raw):
            continue
        path = Path(raw).expanduser()
        full = path if path.is_absolute() else cwd / path
        if not full.exists():
            if _looks_like_path(raw):  # a typo in a path, not an @handle
                problems.append(f"@{raw} not attached: no such file or directory")
            continue
        if rule := read_denied("Read", full.resolve()):
            problems.append(f"@{raw} not attached: the permission rule {rule} denies reading it")
            continue
        if budget <= 0:
            problems.append(f"@{raw} not attached: the attachment budget is used up")
            continue
        try:
            if full.is_dir():
                attachment = _directory(raw, full, read_denied)
            else:
                attachment = _file(raw, full, budget)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(f"@{raw} not attached: {exc}")
            continue
        budget -= attachment.size
        attachments.append(attachment)
        if attachment.read is not None:
            from caliban.tools._files import record_read

            record_read(env, attachment.read)
    parts = (TextPart(text=text), *(a.part for a in attachments), *images)
    return Message(role="user", parts=parts), attachments, problems


def _looks_like_path(raw: str) -> bool:
    """``@src/app.py``, ``@notes.txt`` or ``@~/x``, unlike ``@alice`` or ``@here``."""
    return "/" in raw or raw.startswith("~") or bool(Path(raw).suffix)


def _file(raw: str, full: Path, budget: int) -> Attachment:
    if not stat.S_ISREG(full.stat().st_mode):
        raise ValueError("it is not a regular file (a FIFO, socket or device)")
    limit = min(MAX_FILE_CHARS, budget)
    with full.open("rb") as file:
        data = file.read(limit * 4 + 4)  # enough bytes for `limit` characters, never more
        whole = not file.read(1)
    from caliban.tools._files import image_type

    if (media_type := image_type(data[:16])) is not None:
        return _image(raw, full, media_type)
    if b"\0" in data[:8192]:
        raise ValueError("it looks like a binary file")
    content = codecs.getincrementaldecoder("utf-8")().decode(data, final=whole)
    size = full.stat().st_size
    complete = whole and len(content) <= limit
    if complete:
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        note = f"{lines} line{'s' if lines != 1 else ''}"
    else:
        kept = content[:limit]
        content = f"{kept}\n[… cut: showing {len(kept):,} characters of a {size:,}-byte file]"
        note = f"cut to {len(kept):,} characters"
    body = content if content.endswith("\n") else content + "\n"
    block = TextPart(text=f'<file path="{raw}">\n{body}</file>')
    return Attachment(path=raw, part=block, note=note, read=full.resolve() if complete else None)


def _image(raw: str, full: Path, media_type: str) -> Attachment:
    from caliban.tools._files import human_size
    from caliban.tools.read import MAX_IMAGE_BYTES

    size = full.stat().st_size
    label = f"{media_type.split('/')[1].upper()} image, {human_size(size)}"
    if size > MAX_IMAGE_BYTES:
        raise ValueError(f"it is a {label}, over the {human_size(MAX_IMAGE_BYTES)} an image may be")
    data = base64.b64encode(full.read_bytes()).decode("ascii")
    part = ImagePart(media_type=media_type, data=data)
    return Attachment(path=raw, part=part, note=label, read=full.resolve())


def _directory(raw: str, full: Path, read_denied: ReadGuard) -> Attachment:
    entries = sorted(full.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    hidden = [p for p in entries if read_denied("Read", p.resolve())]
    entries = [p for p in entries if p not in hidden]
    names = [f"{p.name}/" if p.is_dir() else p.name for p in entries[:MAX_DIR_ENTRIES]]
    if len(entries) > MAX_DIR_ENTRIES:
        names.append(f"[… {len(entries) - MAX_DIR_ENTRIES} more entries]")
    if hidden:
        names.append(f"[{len(hidden)} more left out: the permission rules deny reading them]")
    listing = "\n".join(names)
    note = f"directory, {len(entries)} entr{'ies' if len(entries) != 1 else 'y'}"
    text = f'<directory path="{raw}">\n{listing}\n</directory>'
    return Attachment(path=raw, part=TextPart(text=text), note=note)
