"""The Write and Edit tools."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hang import HANG_S, cpu_time, hang_guard, until

from caliban.tools.base import CallContext, ToolEnv, ToolOutput
from caliban.tools.edit import Edit
from caliban.tools.read import Read
from caliban.tools.write import Write

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(tmp_path: Path) -> ToolEnv:
    return ToolEnv(cwd=tmp_path, project_root=tmp_path)


def _ctx(env: ToolEnv) -> CallContext:
    return CallContext(env=env, call_id="c1")


async def read(env: ToolEnv, path: str) -> ToolOutput:
    out = await Read().call({"file_path": path}, _ctx(env))
    assert not out.is_error, out.as_text
    return out


async def write(env: ToolEnv, path: str, content: str) -> ToolOutput:
    return await Write().call({"file_path": path, "content": content}, _ctx(env))


async def edit(env: ToolEnv, path: str, old: str, new: str, **kw: Any) -> ToolOutput:
    args = {"file_path": path, "old_string": old, "new_string": new, **kw}
    return await Edit().call(args, _ctx(env))


def touch_later(path: Path) -> None:
    """Change the file's mtime as another process writing it would."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))


def no_temp_files(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------------------- Write


async def test_write_creates_parent_directories(env: ToolEnv) -> None:
    out = await write(env, "pkg/sub/mod.py", "a = 1\nb = 2\n")
    assert not out.is_error
    assert (env.cwd / "pkg/sub/mod.py").read_text() == "a = 1\nb = 2\n"
    assert out.as_text == "Created pkg/sub/mod.py: wrote 2 lines."
    assert out.summary == "Wrote 2 lines to mod.py"
    assert (env.cwd / "pkg/sub/mod.py").resolve() in env.file_reads


async def test_overwriting_requires_a_read_first(env: ToolEnv) -> None:
    (env.cwd / "x.py").write_text("original\n")
    out = await write(env, "x.py", "new\n")
    assert out.is_error
    assert "has not been read in this session. Read it first" in out.as_text
    assert (env.cwd / "x.py").read_text() == "original\n"
    await read(env, "x.py")
    out = await write(env, "x.py", "new\n")
    assert not out.is_error and out.as_text == "Updated x.py: wrote 1 line."
    assert (env.cwd / "x.py").read_text() == "new\n"
    again = await write(env, "x.py", "newer\n")  # its own write counts as seen
    assert not again.is_error


async def test_write_refuses_a_file_changed_since_read(env: ToolEnv) -> None:
    path = env.cwd / "x.py"
    path.write_text("v1\n")
    await read(env, "x.py")
    path.write_text("v2 by the user\n")
    touch_later(path)
    out = await write(env, "x.py", "model's version\n")
    assert out.is_error
    assert "has changed on disk since you last read it" in out.as_text
    assert "Read it again" in out.as_text
    assert path.read_text() == "v2 by the user\n"


async def test_write_keeps_mode_encoding_and_crlf(env: ToolEnv) -> None:
    script = env.cwd / "run.sh"
    script.write_bytes(b"echo a\r\n")
    script.chmod(0o755)
    latin = env.cwd / "latin.txt"
    latin.write_bytes("café\n".encode("latin-1"))
    await read(env, "run.sh")
    await read(env, "latin.txt")
    await write(env, "run.sh", "echo b\necho c\n")
    await write(env, "latin.txt", "crème\n")
    assert script.read_bytes() == b"echo b\r\necho c\r\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert latin.read_bytes() == "crème\n".encode("latin-1")
    utf16 = env.cwd / "u16.txt"
    utf16.write_bytes(codecs.BOM_UTF16_LE + "a\r\nb\r\n".encode("utf-16-le"))
    await read(env, "u16.txt")
    await write(env, "u16.txt", "x\ny\n")
    assert utf16.read_bytes() == codecs.BOM_UTF16_LE + "x\r\ny\r\n".encode("utf-16-le")
    assert no_temp_files(env.cwd)


async def test_write_to_a_directory(env: ToolEnv) -> None:
    (env.cwd / "d").mkdir()
    out = await write(env, "d", "x")
    assert out.is_error and out.as_text == "d is a directory; give the path of a file."


# ---------------------------------------------------------------------------- Edit


async def test_edit_replaces_and_shows_the_region(env: ToolEnv) -> None:
    path = env.cwd / "a.py"
    path.write_text("".join(f"line {i}\n" for i in range(1, 21)))
    await read(env, "a.py")
    out = await edit(env, "a.py", "line 10\n", "line ten\nline ten and a half\n")
    assert not out.is_error
    assert out.summary == "1 replacement"
    assert out.as_text.splitlines() == [
        "Edited a.py (1 replacement):",
        "     6\tline 6",
        "     7\tline 7",
        "     8\tline 8",
        "     9\tline 9",
        "    10\tline ten",
        "    11\tline ten and a half",
        "    12\tline 11",
        "    13\tline 12",
        "    14\tline 13",
        "    15\tline 14",
    ]
    assert "line ten and a half\nline 11\n" in path.read_text()
    assert path.resolve() in env.file_reads
    second = await edit(env, "a.py", "line 1\n", "line one\n")  # no re-read needed
    assert not second.is_error


async def test_edit_requires_a_read(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("x = 1\n")
    out = await edit(env, "a.py", "x = 1", "x = 2")
    assert out.is_error
    assert "has not been read in this session. Read it first" in out.as_text
    assert (env.cwd / "a.py").read_text() == "x = 1\n"


async def test_edit_on_a_file_changed_since_read(env: ToolEnv) -> None:
    path = env.cwd / "a.py"
    path.write_text("x = 1\n")
    await read(env, "a.py")
    path.write_text("x = 1\ny = 2\n")
    touch_later(path)
    out = await edit(env, "a.py", "x = 1", "x = 3")
    assert out.is_error
    assert "has changed on disk since you last read it" in out.as_text
    assert "Read it again, then redo your change" in out.as_text
    assert path.read_text() == "x = 1\ny = 2\n"


async def test_edit_on_a_deleted_file(env: ToolEnv) -> None:
    path = env.cwd / "a.py"
    path.write_text("x = 1\n")
    await read(env, "a.py")
    path.unlink()
    out = await edit(env, "a.py", "x = 1", "x = 3")
    assert out.is_error and "does not exist" in out.as_text


async def test_missing_old_string_shows_the_most_similar_lines(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text(
        "def main():\n    total = compute(1, 2)\n    print(total)\n\nmain()\n"
    )
    await read(env, "a.py")
    out = await edit(env, "a.py", "    total = compute(1, 3)\n", "    total = 0\n")
    assert out.is_error
    assert out.as_text.splitlines() == [
        "old_string was not found in a.py. It must match the file exactly, including "
        "whitespace, indentation and line breaks.",
        "The lines most similar to the start of old_string:",
        "     2\t    total = compute(1, 2)",
    ]


async def test_missing_old_string_with_different_indentation(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("if x:\n    y = 1\n")
    await read(env, "a.py")
    out = await edit(env, "a.py", "if x:\n  y = 1", "if x:\n  y = 2")
    assert out.is_error
    assert "The file has this text with different whitespace or indentation" in out.as_text


async def test_old_string_copied_with_line_numbers(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("a = 1\nb = 2\n")
    await read(env, "a.py")
    out = await edit(env, "a.py", "     1\ta = 1\n     2\tb = 2", "x")
    assert out.is_error
    assert "includes the line-number prefixes from Read's output" in out.as_text


async def test_missing_old_string_with_nothing_similar(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("a = 1\n")
    await read(env, "a.py")
    out = await edit(env, "a.py", "class Zebra:", "x")
    assert out.is_error
    assert out.as_text.endswith("Read the file again to see its current content.")


async def test_ambiguous_old_string(env: ToolEnv) -> None:
    path = env.cwd / "a.py"
    path.write_text("x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n")
    await read(env, "a.py")
    out = await edit(env, "a.py", "x = 1", "x = 9")
    assert out.is_error
    assert out.as_text == (
        "old_string occurs 3 times in a.py (at lines 1, 3, 5). Include more surrounding "
        "text in old_string to pick one occurrence, or set replace_all to true to change "
        "all of them."
    )
    out = await edit(env, "a.py", "x = 1", "x = 9", replace_all=True)
    assert not out.is_error
    assert out.summary == "3 replacements"
    assert "replaced 3 occurrences; the first is shown" in out.as_text
    assert path.read_text() == "x = 9\ny = 2\nx = 9\nz = 3\nx = 9\n"


async def test_identical_strings(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("a\n")
    out = await edit(env, "a.py", "a", "a")
    assert out.is_error
    assert out.as_text.startswith("old_string and new_string are identical")


async def test_crlf_is_preserved(env: ToolEnv) -> None:
    path = env.cwd / "win.txt"
    path.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    await read(env, "win.txt")
    out = await edit(env, "win.txt", "second\nthird", "2nd\n2.5\n3rd")
    assert not out.is_error, out.as_text
    assert path.read_bytes() == b"first\r\n2nd\r\n2.5\r\n3rd\r\n"
    await edit(env, "win.txt", "first\r\n", "1st\r\n")  # CRLF in the strings works too
    assert path.read_bytes() == b"1st\r\n2nd\r\n2.5\r\n3rd\r\n"


async def test_mixed_line_endings_are_left_alone(env: ToolEnv) -> None:
    path = env.cwd / "mixed.txt"
    path.write_bytes(b"a\r\nb\nc\r\n")
    await read(env, "mixed.txt")
    await edit(env, "mixed.txt", "b", "B")
    assert path.read_bytes() == b"a\r\nB\nc\r\n"


@pytest.mark.parametrize(
    ("encode", "prefix"),
    [
        (lambda text: text.encode("latin-1"), b""),
        (lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"), codecs.BOM_UTF16_LE),
        (lambda text: codecs.BOM_UTF8 + text.encode(), codecs.BOM_UTF8),
    ],
    ids=["latin-1", "utf-16", "utf-8-bom"],
)
async def test_encodings_are_preserved(env: ToolEnv, encode: Any, prefix: bytes) -> None:
    path = env.cwd / "t.txt"
    path.write_bytes(encode("café\nnaïve\n"))
    await read(env, "t.txt")
    out = await edit(env, "t.txt", "naïve", "très naïve")
    assert not out.is_error, out.as_text
    assert path.read_bytes() == encode("café\ntrès naïve\n")
    assert path.read_bytes().startswith(prefix)


async def test_text_the_encoding_cannot_hold(env: ToolEnv) -> None:
    path = env.cwd / "t.txt"
    path.write_bytes("café\n".encode("latin-1"))
    await read(env, "t.txt")
    out = await edit(env, "t.txt", "café", "café ☕")
    assert out.is_error
    assert "encoded as latin-1 (not valid UTF-8), which cannot represent '☕'" in out.as_text
    assert path.read_bytes() == "café\n".encode("latin-1")


async def test_empty_old_string_creates_a_file(env: ToolEnv) -> None:
    out = await edit(env, "new/file.py", "", "print('hi')\n")
    assert not out.is_error and out.as_text == "Created new/file.py (1 line)."
    assert (env.cwd / "new/file.py").read_text() == "print('hi')\n"


async def test_empty_old_string_on_a_non_empty_file(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("x\n")
    await read(env, "a.py")
    out = await edit(env, "a.py", "", "y\n")
    assert out.is_error and "old_string is empty, but a.py is not empty" in out.as_text


async def test_edit_of_a_missing_file(env: ToolEnv) -> None:
    (env.cwd / "main.py").write_text("")
    out = await edit(env, "mian.py", "a", "b")
    assert out.is_error
    assert "File does not exist" in out.as_text
    assert "Did you mean: main.py?" in out.as_text
    assert "To create a new file, use Write" in out.as_text


async def test_edit_of_a_binary_file(env: ToolEnv) -> None:
    (env.cwd / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    env.file_reads[(env.cwd / "img.png").resolve()] = (env.cwd / "img.png").stat().st_mtime_ns
    out = await edit(env, "img.png", "PNG", "JPG")
    assert out.is_error and "is a binary file (PNG image)" in out.as_text


async def test_edit_keeps_the_file_mode_and_leaves_no_temp_files(env: ToolEnv) -> None:
    path = env.cwd / "tool.sh"
    path.write_text("echo a\n")
    path.chmod(0o750)
    await read(env, "tool.sh")
    await edit(env, "tool.sh", "echo a", "echo b")
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert no_temp_files(env.cwd)


async def test_invalid_input(env: ToolEnv) -> None:
    out = await Edit().call({"file_path": "a.py", "old_string": "x"}, _ctx(env))
    assert out.is_error
    assert out.as_text == "Invalid input for Edit:\n- new_string: Field required"


def test_schemas() -> None:
    assert Write().spec.input_schema["required"] == ["file_path", "content"]
    schema = Edit().spec.input_schema
    assert schema["required"] == ["file_path", "old_string", "new_string"]
    assert schema["properties"]["replace_all"]["default"] is False
    edit = {"file_path": "a.py", "old_string": "a", "new_string": "b"}
    assert Edit().bind(edit).subject == "a.py"  # type: ignore[union-attr]
    assert not Edit.read_only and not Write.read_only


# ---------------------------------------------------------------------------- bounded


async def test_edit_is_linear_on_a_3_mb_one_line_file(env: ToolEnv) -> None:
    path = env.cwd / "bundle.min.js"
    path.write_text("var a=1;" * 393_216 + "UNIQUE;")  # 3 MB, one line
    await read(env, "bundle.min.js")
    with cpu_time() as spent:
        out = await edit(env, "bundle.min.js", "var a=1;", "var b=2;")
    assert spent.seconds < 5  # was > 40 s (quadratic line numbering)
    assert out.as_text.startswith(
        "old_string occurs 393,216 times in bundle.min.js (at lines 1, 1, 1, 1, 1, 1, 1, 1, 1, "
        "1 and 393,206 more)."
    )
    out = await edit(env, "bundle.min.js", "UNIQUE;", "CHANGED;")
    assert not out.is_error
    echo = out.as_text.splitlines()[1]
    assert len(echo) < 2100  # the echo is capped like Read's lines, around the change
    assert echo.startswith("     1\t[… 3,143,736 characters] var a=1;")
    assert echo.endswith("CHANGED;")


async def test_a_slow_edit_can_be_cancelled_and_writes_nothing(
    env: ToolEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import threading

    from caliban.tools import edit as edit_module

    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    real = edit_module._prepare

    def slow(*args: Any) -> Any:
        entered.set()
        release.wait(HANG_S)  # stands for a huge file: the work happens off the event loop
        try:
            return real(*args)
        finally:
            finished.set()

    monkeypatch.setattr(edit_module, "_prepare", slow)
    (env.cwd / "a.py").write_text("x = 1\n")
    await read(env, "a.py")
    task = asyncio.ensure_future(edit(env, "a.py", "x = 1", "x = 2"))
    await until(entered.is_set)
    task.cancel()
    with hang_guard(), pytest.raises(asyncio.CancelledError):
        await task
    assert not finished.is_set()  # the cancellation did not wait for the work
    release.set()
    await until(finished.is_set)
    assert (env.cwd / "a.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("tool", ["Write", "Edit"])
async def test_a_read_only_file_is_not_replaced(env: ToolEnv, tool: str) -> None:
    path = env.cwd / "locked.txt"
    path.write_text("keep\n")
    await read(env, "locked.txt")
    path.chmod(0o444)
    if tool == "Write":
        out = await write(env, "locked.txt", "changed\n")
    else:
        out = await edit(env, "locked.txt", "keep", "changed")
    assert out.is_error and out.as_text == (
        "locked.txt is read-only (mode 0444), so it was not changed. If it should change, "
        "ask the user to make it writable."
    )
    assert path.read_text() == "keep\n" and stat.S_IMODE(path.stat().st_mode) == 0o444


@pytest.mark.parametrize("tool", ["Read", "Write", "Edit"])
async def test_fifos_and_devices_are_refused_at_once(env: ToolEnv, tool: str) -> None:

    os.mkfifo(env.cwd / "pipe")
    with hang_guard():  # opening a FIFO would wait for a writer forever
        if tool == "Read":
            out = await Read().call({"file_path": "pipe"}, _ctx(env))
            device = await Read().call({"file_path": "/dev/zero"}, _ctx(env))
            assert device.as_text == (
                "/dev/zero is a character device, not a regular file; the file tools only "
                "read and write files."
            )
        elif tool == "Write":
            out = await write(env, "pipe", "x")
        else:
            out = await edit(env, "pipe", "a", "b")
    assert out.is_error and out.as_text.startswith("pipe is a FIFO (named pipe), not a regular")


async def test_temporary_files_left_by_a_killed_write_are_removed(env: ToolEnv) -> None:
    import time

    (env.cwd / "a.py").write_text("x = 1\n")
    stale = env.cwd / ".a.py.k1ll3d_x.tmp"
    fresh = env.cwd / ".a.py.wr1t1ng_.tmp"  # another process writing right now
    other = env.cwd / ".b.py.k1ll3d_x.tmp"
    for leftover in (stale, fresh, other):
        leftover.write_text("half a file")
    old = time.time() - 3600
    for leftover in (stale, other):
        os.utime(leftover, (old, old))
    await read(env, "a.py")
    assert not (await edit(env, "a.py", "x = 1", "x = 2")).is_error
    assert not stale.exists()
    assert fresh.exists() and other.exists()  # in progress, or another file's
