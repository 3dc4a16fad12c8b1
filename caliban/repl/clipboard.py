"""The system clipboard: an image pasted with Ctrl-V, text copied by ``/copy``.

Reading uses whichever tool is installed: ``wl-paste`` (Wayland), ``xclip`` (X11),
``pngpaste`` (macOS). Writing uses ``wl-copy``, ``xclip`` or ``pbcopy``, and otherwise the
terminal itself (OSC 52, which most terminals honour, over SSH too).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The Anthropic API's limit for one image."""
TIMEOUT_S = 5.0
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class ClipboardError(Exception):
    """The clipboard could not be read or written; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClipboardImage:
    media_type: str
    data: bytes


def _read(argv: Sequence[str]) -> bytes:
    """What one clipboard tool prints; empty when it fails, ``ClipboardError`` when it
    cannot start or hangs."""
    from caliban.exec import Command, run

    try:
        done = run(Command(argv=tuple(argv)), timeout=TIMEOUT_S, max_output=MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        raise ClipboardError(f"{argv[0]} failed: {exc.strerror or exc}") from exc
    if done.timed_out:
        raise ClipboardError(f"{argv[0]} did not answer within {TIMEOUT_S:.0f}s")
    return done.stdout if done.returncode == 0 else b""


async def _write(argv: Sequence[str], data: bytes) -> None:
    """Give ``data`` to a clipboard tool on its stdin. Its group is not stopped once it
    has read it: ``xclip -i`` stays in the background to serve the selection."""
    from caliban.exec import PIPE, Command, spawn, stop_group

    try:
        child = await spawn(Command(argv=tuple(argv)), stdin=PIPE)
    except OSError as exc:
        raise ClipboardError(f"{argv[0]} failed: {exc.strerror or exc}") from exc
    try:
        async with asyncio.timeout(TIMEOUT_S):
            assert child.stdin is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                child.stdin.write(data)
                await child.stdin.drain()
                child.stdin.close()
            await child.wait()
    except TimeoutError as exc:
        await stop_group(child, grace=0)
        raise ClipboardError(f"{argv[0]} did not finish within {TIMEOUT_S:.0f}s") from exc
    finally:
        child.close()


def _image_commands() -> list[tuple[str, list[str] | None, list[str]]]:
    """(tool, argv listing the clipboard's types or None, argv printing a type: ``{}``)."""
    found: list[tuple[str, list[str] | None, list[str]]] = []
    if os.environ.get("WAYLAND_DISPLAY") and shutil.which("wl-paste"):
        found.append(("wl-paste", ["wl-paste", "--list-types"], ["wl-paste", "--type", "{}"]))
    if shutil.which("xclip"):
        found.append(
            (
                "xclip",
                ["xclip", "-selection", "clipboard", "-t", "TARGETS", "-o"],
                ["xclip", "-selection", "clipboard", "-t", "{}", "-o"],
            )
        )
    if shutil.which("pngpaste"):
        found.append(("pngpaste", None, ["pngpaste", "-"]))
    return found


def paste_image() -> ClipboardImage:
    """The image on the clipboard; ``ClipboardError`` when there is none, or no tool."""
    tools = _image_commands()
    if not tools:
        raise ClipboardError(
            "no clipboard tool found to paste an image: install wl-clipboard (Wayland), "
            "xclip (X11) or pngpaste (macOS), or attach the file with @path"
        )
    for _tool, list_types, read in tools:
        if list_types is None:
            data = _read(read)
            media_type = "image/png"
        else:
            offered = _read(list_types).decode("utf-8", "replace").split()
            media_type = next((t for t in IMAGE_TYPES if t in offered), "")
            if not media_type:
                continue
            data = _read([media_type if arg == "{}" else arg for arg in read])
        if not data:
            continue
        if len(data) > MAX_IMAGE_BYTES:
            raise ClipboardError(
                f"the clipboard image is {len(data) // 1024:,} KB; the limit is "
                f"{MAX_IMAGE_BYTES // 1024 // 1024} MB"
            )
        return ClipboardImage(media_type=media_type, data=data)
    raise ClipboardError("the clipboard holds no image (copy one first, or use @path)")


async def copy_text(text: str) -> str | None:
    """Put ``text`` on the clipboard with an installed tool; returns the tool's name, or
    ``None`` when there is none (see :func:`osc52`)."""
    if os.environ.get("WAYLAND_DISPLAY") and shutil.which("wl-copy"):
        argv = ["wl-copy"]
    elif os.environ.get("DISPLAY") and shutil.which("xclip"):
        argv = ["xclip", "-selection", "clipboard", "-i"]
    elif shutil.which("pbcopy"):
        argv = ["pbcopy"]
    else:
        return None
    await _write(argv, text.encode("utf-8"))
    return argv[0]


def osc52(text: str) -> str:
    """The escape sequence that asks the terminal to put ``text`` on the clipboard."""
    return f"\x1b]52;c;{base64.b64encode(text.encode('utf-8')).decode('ascii')}\x07"
