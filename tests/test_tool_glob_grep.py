"""The Glob and Grep tools (ripgrep underneath)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from caliban.tools import _files
from caliban.tools.base import CallContext, ToolEnv, ToolOutput
from caliban.tools.glob import Glob
from caliban.tools.grep import Grep, GrepInput, split_globs

pytestmark = pytest.mark.anyio

KEPT_DIRS = 50
FILES_PER_DIR = 180
IGNORED_FILES = 1000


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # faster than write_text
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10,000 files: 9,000 kept .py files, 1,000 under an ignored directory, and logs."""
    root = tmp_path_factory.mktemp("tree")
    (root / ".gitignore").write_text("build/\n*.log\n")
    for d in range(KEPT_DIRS):
        directory = root / "src" / f"pkg{d:02}"
        directory.mkdir(parents=True)
        for f in range(FILES_PER_DIR):
            body = f"def func_{d}_{f}():\n    return {f}\n"
            if f == 0:
                body += "# NEEDLE here\n"
            _write(f"{directory}/mod{f:03}.py", body.encode())
    (root / "build").mkdir()
    for f in range(IGNORED_FILES - 2):
        _write(f"{root}/build/gen{f:04}.py", b"# NEEDLE generated\n")
    (root / "debug.log").write_text("NEEDLE in a log\n")
    (root / "src" / "trace.log").write_text("NEEDLE in a log\n")
    newest = root / "src" / "pkg07" / "mod005.py"
    os.utime(newest, ns=(0, 4_000_000_000_000_000_000))
    return root


@pytest.fixture
def env(tmp_path: Path) -> ToolEnv:
    return ToolEnv(cwd=tmp_path, project_root=tmp_path)


def ctx(env: ToolEnv) -> CallContext:
    return CallContext(env=env, call_id="g1")


async def glob(env: ToolEnv, **args: Any) -> ToolOutput:
    return await Glob().call(args, ctx(env))


async def grep(env: ToolEnv, **args: Any) -> ToolOutput:
    return await Grep().call(args, ctx(env))


# ---------------------------------------------------------------------------- Glob


async def test_glob_caps_at_100_newest_first_and_respects_gitignore(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    out = await glob(env, pattern="**/*.py")
    lines = out.as_text.splitlines()
    assert len(lines) == 101
    assert lines[0] == "src/pkg07/mod005.py"  # newest first
    assert all(line.startswith("src/") for line in lines[:100])
    total = KEPT_DIRS * FILES_PER_DIR
    assert lines[100] == (
        f"… {total - 100:,} more (showing the 100 newest of {total:,}; narrow the pattern "
        "or the path to see others)"
    )
    assert out.summary == f"{total:,} files"


async def test_glob_does_not_return_ignored_files(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    out = await glob(env, pattern="build/**")
    assert out.as_text == "No files match 'build/**' in .."
    logs = await glob(env, pattern="*.log")
    assert logs.as_text.startswith("No files match")


async def test_glob_with_path_shows_paths_relative_to_cwd(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    out = await glob(env, pattern="mod00[0-2].py", path="src/pkg03")
    assert sorted(out.as_text.splitlines()) == [
        "src/pkg03/mod000.py",
        "src/pkg03/mod001.py",
        "src/pkg03/mod002.py",
    ]
    dotted = await glob(env, pattern="./src/pkg03/mod00[0-2].py")
    assert len(dotted.as_text.splitlines()) == 3
    outside = ToolEnv(cwd=tree / "src" / "pkg01", project_root=tree)
    out = await glob(outside, pattern="mod000.py", path=str(tree / "src" / "pkg02"))
    assert out.as_text == str(tree / "src" / "pkg02" / "mod000.py")


async def test_glob_with_an_absolute_pattern(tree: Path, env: ToolEnv) -> None:
    out = await glob(env, pattern=f"{tree}/src/pkg04/mod17*.py")
    assert len(out.as_text.splitlines()) == 10
    assert out.as_text.splitlines()[0].startswith(f"{tree}/src/pkg04/mod17")


async def test_glob_includes_hidden_files_but_not_git(env: ToolEnv) -> None:
    (env.cwd / ".github" / "workflows").mkdir(parents=True)
    (env.cwd / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (env.cwd / ".git").mkdir()
    (env.cwd / ".git" / "config.yml").write_text("")
    out = await glob(env, pattern="**/*.yml")
    assert out.as_text == ".github/workflows/ci.yml"


async def test_glob_errors(env: ToolEnv) -> None:
    (env.cwd / "source").mkdir()
    (env.cwd / "file.txt").write_text("")
    missing = await glob(env, pattern="*.py", path="sourc")
    assert missing.is_error
    assert missing.as_text.startswith(f"Directory does not exist: {env.cwd / 'sourc'}")
    assert "Did you mean: source?" in missing.as_text
    not_dir = await glob(env, pattern="*.py", path="file.txt")
    assert not_dir.is_error and "is a file, not a directory" in not_dir.as_text
    empty = await glob(env, pattern="")
    assert empty.is_error and empty.as_text.startswith("Invalid input for Glob:\n- pattern:")


async def test_missing_ripgrep_is_a_clear_error(
    env: ToolEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_files.shutil, "which", lambda name: None)
    monkeypatch.setattr(_files.sys, "executable", str(env.cwd / "nowhere" / "python"))
    for out in (await glob(env, pattern="*"), await grep(env, pattern="x")):
        assert out.is_error
        assert out.as_text.startswith("ripgrep (rg) is not installed, so Glob and Grep cannot run")


def test_rg_is_found_next_to_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files.shutil, "which", lambda name: None)
    assert _files.find_rg() == str(Path(sys.executable).parent / "rg")


# ---------------------------------------------------------------------------- Grep


async def test_grep_lists_files_and_skips_ignored_ones(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    out = await grep(env, pattern="NEEDLE")
    lines = out.as_text.splitlines()
    assert lines[0] == f"Found {KEPT_DIRS} files"
    assert sorted(lines[1:]) == [f"src/pkg{d:02}/mod000.py" for d in range(KEPT_DIRS)]
    assert out.summary == f"{KEPT_DIRS} files"


async def test_a_grep_glob_does_not_bring_back_ignored_files(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    logs = await grep(env, pattern="NEEDLE", glob="*.log")
    assert logs.as_text == (
        "No files to search in .: none match the glob/type filter (files .gitignore "
        "excludes are never searched)."
    )
    generated = await grep(env, pattern="NEEDLE", glob="**/gen*.py")
    assert not generated.is_error and generated.as_text.startswith("No files to search")
    some = await grep(env, pattern="NEEDLE", glob="src/pkg0[0-2]/*.py")
    assert some.as_text.splitlines()[0] == "Found 3 files"


async def test_grep_negated_glob(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("x\n")
    (env.cwd / "a.test.py").write_text("x\n")
    out = await grep(env, pattern="x", glob="!*.test.py")
    assert out.as_text == "Found 1 file\na.py"


async def test_grep_content_with_line_numbers_and_context(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("one\ntwo\nthree TARGET\nfour\nfive\n")
    out = await grep(env, pattern="TARGET", output_mode="content", **{"-C": 1})
    assert out.as_text.splitlines() == ["a.py-2-two", "a.py:3:three TARGET", "a.py-4-four"]
    bare = await grep(env, pattern="TARGET", output_mode="content", **{"-n": False, "-B": 2})
    assert bare.as_text.splitlines() == ["a.py-one", "a.py-two", "a.py:three TARGET"]
    after = await grep(env, pattern="TARGET", output_mode="content", **{"-A": 1})
    assert after.as_text.splitlines() == ["a.py:3:three TARGET", "a.py-4-four"]


async def test_grep_case_insensitive_count_and_filters(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("Error\nerror\nERROR error\n")
    (env.cwd / "b.js").write_text("error\n")
    count = await grep(env, pattern="error", output_mode="count", **{"-i": True})
    assert count.as_text.splitlines()[0] == "Found 5 matches in 2 files"
    assert sorted(count.as_text.splitlines()[1:]) == ["a.py:4", "b.js:1"]
    assert (await grep(env, pattern="error", glob="*.js")).as_text == "Found 1 file\nb.js"
    assert (await grep(env, pattern="error", type="py")).as_text == "Found 1 file\na.py"
    assert (await grep(env, pattern="error", glob="*.{js,ts} *.md")).as_text == "Found 1 file\nb.js"


async def test_grep_multiline(env: ToolEnv) -> None:
    (env.cwd / "a.rs").write_text("struct Foo {\n    field: u8,\n}\n")
    single = await grep(env, pattern=r"Foo \{.*field")
    assert single.as_text.startswith("No matches")
    multi = await grep(env, pattern=r"Foo \{.*field", multiline=True)
    assert multi.as_text == "Found 1 file\na.rs"


async def test_grep_head_limit(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    files = await grep(env, pattern="NEEDLE", head_limit=3)
    lines = files.as_text.splitlines()
    assert lines[0] == f"Found {KEPT_DIRS} files"
    assert len(lines) == 5
    assert lines[4] == (
        f"[showing entries 1–3 of {KEPT_DIRS} (offset=0, head_limit=3); offset=3 shows the "
        "next ones]"
    )
    assert files.data["appliedLimit"] == 3 and len(files.data["filenames"]) == 3
    content = await grep(env, pattern="def func", output_mode="content", head_limit=5)
    assert len(content.as_text.splitlines()) == 6
    total = KEPT_DIRS * FILES_PER_DIR
    assert f"of {total:,} (offset=0, head_limit=5)" in content.as_text


async def test_grep_head_limit_defaults_to_250_and_0_is_unlimited(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    default = await grep(env, pattern="def func", output_mode="content")
    assert len(default.as_text.splitlines()) == 251  # 250 lines and the note
    unlimited = await grep(env, pattern="NEEDLE", head_limit=0)
    assert unlimited.as_text.splitlines()[0] == f"Found {KEPT_DIRS} files"
    assert len(unlimited.as_text.splitlines()) == KEPT_DIRS + 1


async def test_grep_offset_pages_through_results(env: ToolEnv) -> None:
    (env.cwd / "a.txt").write_text("".join(f"hit {n}\n" for n in range(1, 11)))
    page = await grep(env, pattern="hit", output_mode="content", offset=4, head_limit=3)
    assert page.as_text.splitlines()[:3] == ["a.txt:5:hit 5", "a.txt:6:hit 6", "a.txt:7:hit 7"]
    assert "offset=7 shows the next ones" in page.as_text
    assert page.data["appliedOffset"] == 4 and page.data["numLines"] == 3


async def test_grep_context_and_only_matching(env: ToolEnv) -> None:
    (env.cwd / "a.txt").write_text("one\ntwo needle here\nthree\n")
    for key in ("context", "-C"):
        around = await grep(env, pattern="needle", output_mode="content", **{key: 1})
        assert around.as_text.splitlines() == [
            "a.txt-1-one",
            "a.txt:2:two needle here",
            "a.txt-3-three",
        ]
    only = await grep(env, pattern="ne+dle", output_mode="content", **{"-o": True})
    assert only.as_text == "a.txt:2:needle"
    assert {"context", "-C", "-A", "-B", "-o", "offset"} <= Grep().spec.input_schema[
        "properties"
    ].keys()


async def test_grep_output_is_capped(tree: Path) -> None:
    env = ToolEnv(cwd=tree, project_root=tree)
    out = await grep(env, pattern="return", output_mode="content", head_limit=0)
    assert len(out.as_text) < 31_000
    total = KEPT_DIRS * FILES_PER_DIR
    assert out.as_text.splitlines()[-1].startswith("[Output cut at 30,000 characters: showing ")
    assert f"of {total:,} lines. Narrow the search" in out.as_text
    assert out.summary == f"{total:,} lines"


async def test_grep_long_lines_are_abbreviated(env: ToolEnv) -> None:
    (env.cwd / "min.js").write_text("x" * 10_000 + "NEEDLE" + "y" * 10_000 + "\n")
    out = await grep(env, pattern="NEEDLE", output_mode="content")
    assert len(out.as_text) < 1_000


async def test_grep_in_a_single_file(env: ToolEnv) -> None:
    (env.cwd / "sub").mkdir()
    (env.cwd / "sub" / "a.txt").write_text("alpha\nbeta\n")
    out = await grep(env, pattern="beta", path="sub/a.txt", output_mode="content")
    assert out.as_text == "sub/a.txt:2:beta"


async def test_grep_invalid_regex_is_an_error_result(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("f(x)\n")
    out = await grep(env, pattern="f(x")
    assert out.is_error
    assert out.as_text.startswith("Invalid regular expression 'f(x':")
    assert "regex parse error" in out.as_text
    assert "Escape characters such as ( ) [ ] { }" in out.as_text


async def test_grep_unknown_type(env: ToolEnv) -> None:
    out = await grep(env, pattern="x", type="notatype")
    assert out.is_error and "unrecognized file type" in out.as_text


async def test_grep_no_matches_and_missing_path(env: ToolEnv) -> None:
    (env.cwd / "a.py").write_text("hello\n")
    none = await grep(env, pattern="goodbye")
    assert not none.is_error and none.as_text == "No matches for 'goodbye' in .."
    missing = await grep(env, pattern="x", path="nope")
    assert missing.is_error and missing.as_text.startswith("Path does not exist:")


async def test_grep_pattern_starting_with_a_dash(env: ToolEnv) -> None:
    (env.cwd / "a.txt").write_text("use --force here\n")
    out = await grep(env, pattern="--force", output_mode="content")
    assert out.as_text == "a.txt:1:use --force here"


def test_grep_schema_uses_the_flag_names() -> None:
    """Every parameter of Claude Code 2.1.197's Grep, under the same names."""
    schema = Grep().spec.input_schema
    assert set(schema["properties"]) == {
        "pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C",
        "context", "-o", "multiline", "head_limit", "offset",
    }  # fmt: skip
    assert schema["required"] == ["pattern"]
    assert schema["properties"]["output_mode"]["enum"] == [
        "files_with_matches",
        "content",
        "count",
    ]
    assert all(prop.get("description") for prop in schema["properties"].values())
    parsed = GrepInput.model_validate({"pattern": "x", "-i": True, "-C": 2})
    assert parsed.case_insensitive and parsed.context_short == 2


async def test_grep_invalid_flag_value(env: ToolEnv) -> None:
    out = await grep(env, pattern="x", **{"-A": -1, "bogus": 1})
    assert out.is_error
    assert out.as_text.splitlines() == [
        "Invalid input for Grep:",
        "- -A: Input should be greater than or equal to 0",
        "- bogus: Extra inputs are not permitted",
    ]


def test_split_globs() -> None:
    assert split_globs("*.ts, *.{js,jsx} src/**") == ["*.ts", "*.{js,jsx}", "src/**"]


def test_permission_subjects() -> None:
    assert Grep().bind({"pattern": "x"}).subject == "."
    assert Grep().bind({"pattern": "x", "path": "src"}).subject == "src"
    assert Glob().bind({"pattern": "/abs/dir/**/*.py"}).subject == "/abs/dir"
    assert Glob().bind({"pattern": "*.py", "path": "lib"}).subject == "lib"


# ---------------------------------------------------------------------------- deny rules


@pytest.fixture
def secrets(tmp_path: Path) -> ToolEnv:
    """A project whose rules deny reading secrets/** and .env; ``a:b.txt`` tests parsing."""
    from caliban.config.settings import PermissionsSettings
    from caliban.permissions.policy import PermissionPolicy

    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api.txt").write_text("TOKEN=hunter2\n")
    (tmp_path / ".env").write_text("TOKEN=swordfish\n")
    (tmp_path / "app.py").write_text("TOKEN = os.environ['TOKEN']\n")
    (tmp_path / "a:b.txt").write_text("before\nTOKEN: colon\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / ".env")
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(deny=["Read(secrets/**)", "Read(.env)"]), project_root=tmp_path
    )
    return ToolEnv(cwd=tmp_path, project_root=tmp_path, read_denied=policy.read_denial)


def left_out(text: str) -> tuple[int, set[str]]:
    """The count and the rules of the "left out" note that ends ``text``."""
    match = re.fullmatch(
        r"\[(\d+) files? left out: the permission rules? (.*) den(?:y|ies) reading (?:it|them)\]",
        text.splitlines()[-1],
    )
    assert match, text
    return int(match.group(1)), set(match.group(2).split(", "))


@pytest.mark.parametrize("mode", ["files_with_matches", "content", "count"])
@pytest.mark.parametrize("path", [None, ".", "secrets"])
async def test_grep_leaves_out_files_the_rules_deny(
    secrets: ToolEnv, mode: str, path: str | None
) -> None:
    args: dict[str, Any] = {"pattern": "TOKEN", "output_mode": mode, "-C": 1}
    if path:
        args["path"] = path
    out = await Grep().call(args, CallContext(env=secrets, call_id="g"))
    assert not out.is_error
    shown = out.as_text.splitlines()[:-1]
    assert not any("hunter2" in line or "swordfish" in line for line in shown)
    assert not any(line.startswith(("secrets", ".env", "api.txt")) for line in shown)
    if path == "secrets":
        assert left_out(out.as_text) == (1, {"Read(secrets/**)"})
    else:
        assert left_out(out.as_text) == (2, {"Read(secrets/**)", "Read(.env)"})
        assert any(line.startswith("app.py") for line in shown)


async def test_grep_of_a_symlink_to_a_denied_file_is_left_out(secrets: ToolEnv) -> None:
    out = await Grep().call(
        {"pattern": "TOKEN", "path": "link.txt", "output_mode": "content"},
        CallContext(env=secrets, call_id="g"),
    )
    assert "swordfish" not in out.as_text
    assert left_out(out.as_text) == (1, {"Read(.env)"})


async def test_grep_output_keeps_its_format_with_the_file_names_exact(secrets: ToolEnv) -> None:
    ctx = CallContext(env=secrets, call_id="g")
    args = {"pattern": "colon", "output_mode": "content", "glob": "*.txt", "-B": 1}
    out = await Grep().call(args, ctx)
    assert out.as_text.splitlines()[:2] == ["a:b.txt-1-before", "a:b.txt:2:TOKEN: colon"]
    out = await Grep().call({**args, "-n": False}, ctx)
    assert out.as_text.splitlines()[:2] == ["a:b.txt-before", "a:b.txt:TOKEN: colon"]


async def test_glob_hides_files_the_rules_deny(secrets: ToolEnv) -> None:
    out = await Glob().call({"pattern": "**/*"}, CallContext(env=secrets, call_id="g"))
    assert sorted(out.as_text.splitlines()[:-1]) == ["a:b.txt", "app.py"]
    assert left_out(out.as_text) == (2, {"Read(secrets/**)", "Read(.env)"})
