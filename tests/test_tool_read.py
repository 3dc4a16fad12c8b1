"""The Read tool."""

from __future__ import annotations

import base64
import codecs
import os
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hang import cpu_time

from caliban.messages import ImagePart
from caliban.tools.base import CallContext, ToolEnv, ToolOutput
from caliban.tools.read import MAX_IMAGE_BYTES, Read

pytestmark = pytest.mark.anyio

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00"
    b"\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture
def env(tmp_path: Path) -> ToolEnv:
    return ToolEnv(cwd=tmp_path, project_root=tmp_path)


async def read(env: ToolEnv, **args: Any) -> ToolOutput:
    return await Read().call(args, CallContext(env=env, call_id="r1"))


async def test_lines_are_numbered_like_cat_n(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("import os\n\n    x = 1\n")
    out = await read(env, file_path="a.py")
    assert not out.is_error
    assert out.as_text == "     1\timport os\n     2\t\n     3\t    x = 1"
    assert out.summary == "3 lines"


async def test_default_limit_and_how_to_read_more(env: ToolEnv) -> None:
    (env.cwd / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    out = await read(env, file_path="big.txt")
    lines = out.as_text.splitlines()
    assert lines[0] == "     1\tline 1"
    assert lines[1999] == "  2000\tline 2000"
    assert "  2001\t" not in out.as_text
    assert "big.txt has 5,000 lines" in out.as_text
    assert "showing lines 1–2,000" in out.as_text
    assert "call Read with offset=2001" in out.as_text
    assert out.summary == "2,000 lines of 5,000"


async def test_offset_and_limit(env: ToolEnv) -> None:
    (env.cwd / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    out = await read(env, file_path="big.txt", offset=40, limit=3)
    assert out.as_text.splitlines()[:3] == ["    40\tline 40", "    41\tline 41", "    42\tline 42"]
    assert "offset=43" in out.as_text
    tail = await read(env, file_path="big.txt", offset=99)
    assert tail.as_text == "    99\tline 99\n   100\tline 100"  # nothing remains: no note


async def test_offset_past_the_end(env: ToolEnv) -> None:
    (env.cwd / "short.txt").write_text("a\nb\n")
    out = await read(env, file_path="short.txt", offset=10)
    assert out.is_error
    assert out.as_text == (
        "short.txt has only 2 lines, so offset 10 is past the end. Use an offset between 1 and 2."
    )


async def test_long_lines_are_cut_with_a_marker(env: ToolEnv) -> None:
    (env.cwd / "min.js").write_text("x" * 5000 + "\nshort\n")
    out = await read(env, file_path="min.js")
    first, second = out.as_text.splitlines()
    assert first == "     1\t" + "x" * 2000 + " … [line cut at 2,000 characters]"
    assert second == "     2\tshort"


async def test_missing_file_suggests_close_names(env: ToolEnv) -> None:
    (env.cwd / "config.toml").write_text("")
    (env.cwd / "README.md").write_text("")
    out = await read(env, file_path="confg.toml")
    assert out.is_error
    assert out.as_text.startswith(f"File does not exist: {env.cwd / 'confg.toml'}.")
    assert "Did you mean: config.toml?" in out.as_text


async def test_missing_file_without_close_names_points_to_glob(env: ToolEnv) -> None:
    out = await read(env, file_path="nothing/here.txt")
    assert out.is_error
    assert "does not exist" in out.as_text and "Use Glob to find files by name" in out.as_text


async def test_directory(env: ToolEnv) -> None:
    (env.cwd / "src").mkdir()
    out = await read(env, file_path="src")
    assert out.is_error
    assert out.as_text == (
        "src is a directory, not a file. To list it, use Glob (e.g. pattern '*' with path "
        "'src') or run `ls` with Bash."
    )


async def test_binary_files_name_their_kind_and_size(env: ToolEnv) -> None:
    (env.cwd / "prog").write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 2041)
    with zipfile.ZipFile(env.cwd / "bundle.zip", "w") as archive:
        archive.writestr("a.txt", "hello")
    (env.cwd / "blob.dat").write_bytes(b"abc\x00def" * 10)
    elf = await read(env, file_path="prog")
    assert elf.is_error
    assert elf.as_text.startswith(
        "Cannot read prog: it is a binary file (ELF executable, 2.0 KB), not text."
    )
    assert "Bash" in elf.as_text
    zipped = await read(env, file_path="bundle.zip")
    assert "(zip archive, " in zipped.as_text
    blob = await read(env, file_path="blob.dat")
    assert "(binary data, 70 bytes)" in blob.as_text


async def test_empty_file_says_so_and_counts_as_read(env: ToolEnv) -> None:
    (env.cwd / "empty.txt").write_text("")
    out = await read(env, file_path="empty.txt")
    assert not out.is_error
    assert out.as_text == "empty.txt exists but is empty (0 bytes)."
    assert (env.cwd / "empty.txt").resolve() in env.file_reads


@pytest.mark.parametrize(
    ("data", "label"),
    [
        ("café\nnaïve\n".encode("latin-1"), "latin-1 (not valid UTF-8)"),
        (codecs.BOM_UTF16_LE + "café\nnaïve\n".encode("utf-16-le"), "UTF-16 LE"),
        (codecs.BOM_UTF16_BE + "café\r\nnaïve\r\n".encode("utf-16-be"), "UTF-16 BE"),
        (codecs.BOM_UTF8 + "café\nnaïve\n".encode(), "UTF-8 with BOM"),
    ],
)
async def test_other_encodings_are_read_and_named(env: ToolEnv, data: bytes, label: str) -> None:
    (env.cwd / "t.txt").write_bytes(data)
    out = await read(env, file_path="t.txt")
    assert not out.is_error
    assert out.as_text == (
        f"     1\tcafé\n     2\tnaïve\n\n[Decoded as {label}; Edit and Write keep this encoding.]"
    )


async def test_crlf_lines_are_shown_without_carriage_returns(env: ToolEnv) -> None:
    (env.cwd / "w.txt").write_bytes(b"a\r\nb\r\n")
    assert (await read(env, file_path="w.txt")).as_text == "     1\ta\n     2\tb"


async def test_records_the_mtime(env: ToolEnv) -> None:
    path = env.cwd / "a.txt"
    path.write_text("x\n")
    os.utime(path, ns=(1_000_000_000, 1_234_567_890_123))
    await read(env, file_path=str(path))
    assert env.file_reads == {path.resolve(): 1_234_567_890_123}


async def test_failed_read_records_nothing(env: ToolEnv) -> None:
    (env.cwd / "prog").write_bytes(b"\x7fELF" + b"\x00" * 100)
    await read(env, file_path="prog")
    assert env.file_reads == {}


async def test_images_come_back_as_images(env: ToolEnv) -> None:
    (env.cwd / "dot.png").write_bytes(PNG)
    out = await read(env, file_path="dot.png")
    assert not out.is_error
    text, image = out.content
    assert isinstance(image, ImagePart)
    assert image.media_type == "image/png"
    assert base64.b64decode(image.data) == PNG
    assert text.text == f"dot.png (PNG image, {len(PNG)} bytes)"  # type: ignore[union-attr]


async def test_too_large_images_are_refused(env: ToolEnv) -> None:
    with (env.cwd / "huge.png").open("wb") as file:
        file.write(PNG)
        file.truncate(MAX_IMAGE_BYTES + 1)
    out = await read(env, file_path="huge.png")
    assert out.is_error
    assert "too large to view (the limit is 5.0 MB)" in out.as_text


async def test_a_50_mb_file_is_streamed(env: ToolEnv) -> None:
    path = env.cwd / "huge.log"
    line = b"2024-01-01 12:00:00 INFO request ok\n"
    count = 50 * 1024 * 1024 // len(line) + 1
    with path.open("wb") as file:
        for _ in range(count // 10_000):
            file.write(line * 10_000)
        file.write(line * (count % 10_000))
    assert path.stat().st_size > 50 * 1024 * 1024
    tracemalloc.start()
    try:
        with cpu_time() as spent:
            out = await read(env, file_path="huge.log")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.as_text.count("\n") >= 1999
    assert "  2000\t2024-01-01 12:00:00 INFO request ok" in out.as_text
    assert f"huge.log has {count:,} lines" in out.as_text
    assert peak < 8 * 1024 * 1024, f"peak {peak:,} bytes: the file was loaded whole"
    assert spent.seconds < 5


async def test_a_single_huge_line_is_not_loaded_whole(env: ToolEnv) -> None:
    path = env.cwd / "one-line.json"
    with path.open("wb") as file:
        for _ in range(20):
            file.write(b"x" * (1024 * 1024))
    tracemalloc.start()
    try:
        out = await read(env, file_path="one-line.json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.as_text.endswith("… [line cut at 2,000 characters]")
    assert peak < 8 * 1024 * 1024


async def test_output_size_is_capped(env: ToolEnv) -> None:
    (env.cwd / "wide.txt").write_text(("y" * 1500 + "\n") * 1000)
    out = await read(env, file_path="wide.txt")
    assert len(out.as_text) < 110_000
    assert "output is limited to 100,000 characters" in out.as_text
    assert "and a smaller limit" in out.as_text


async def test_invalid_input_lists_the_problems(env: ToolEnv) -> None:
    out = await read(env, offset="ten")
    assert out.is_error
    assert out.as_text.splitlines() == [
        "Invalid input for Read:",
        "- file_path: Field required",
        "- offset: Input should be a valid integer, unable to parse string as an integer",
    ]


def test_schema_and_permission_subject() -> None:
    spec = Read().spec
    assert spec.input_schema["required"] == ["file_path"]
    assert set(spec.input_schema["properties"]) == {"file_path", "offset", "limit"}
    assert all(p.get("description") for p in spec.input_schema["properties"].values())
    assert Read().bind({"file_path": "src/a.py"}).subject == "src/a.py"
    assert Read.read_only
