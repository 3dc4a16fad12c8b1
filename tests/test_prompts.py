from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from caliban.prompts import memory_files, system_prompt


def test_memory_is_read_from_root_down_to_cwd(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    sub = root / "pkg" / "mod"
    sub.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    (root / "AGENTS.md").write_text("root rules")
    (root / "pkg" / "CLAUDE.md").write_text("pkg rules")
    (sub / "CALIBAN.md").write_text("module rules")
    (tmp_path / "AGENTS.md").write_text("outside the repo: ignored")

    assert [m.path for m in memory_files(sub, root)] == [
        root / "AGENTS.md",
        root / "pkg/CLAUDE.md",
        sub / "CALIBAN.md",
    ]
    prompt = system_prompt(sub, root, today=dt.date(2026, 11, 22))
    assert prompt.index("root rules") < prompt.index("pkg rules") < prompt.index("module rules")
    assert "outside the repo" not in prompt
    assert (
        "branch feature/x" in prompt
        and "2026-11-22" in prompt
        and f"Working directory: {sub}" in prompt
    )


def test_no_memory_no_section(tmp_path: Path) -> None:
    prompt = system_prompt(tmp_path, tmp_path)
    assert "<memory" not in prompt and "Is a git repository: no" in prompt


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


RECORDING = Path(__file__).parent / "fixtures" / "claude_code" / "memory_files"
# The files of Claude Code's recorded scenario fixtures/claude_code/memory_files.
CLAUDE_CODE_PROJECT = {
    "CLAUDE.md": "Project rules: PROJECT-MEMORY.\n@docs/extra.md\nSee @~/personal.md too.\n"
    "Missing: @docs/missing.md\nIn code: `@docs/not-imported.md`\n",
    "docs/extra.md": "IMPORTED-EXTRA.\n@nested.md\n",
    "docs/nested.md": "NESTED-IMPORT.\n",
    "docs/not-imported.md": "SHOULD-NOT-BE-IMPORTED.\n",
    "CLAUDE.local.md": "LOCAL-MEMORY.\n",
    ".claude/CLAUDE.md": "DOT-CLAUDE-MEMORY.\n",
    ".claude/rules/style.md": "RULES-DIR-MEMORY.\n",
    "src/CLAUDE.md": "SUBDIR-SRC-MEMORY.\n",
}


def test_claude_code_memory_order_and_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order Claude Code loaded them in (fixtures/claude_code/memory_files*), with
    caliban's AGENTS.md first in its directory."""
    root, home = tmp_path / "proj", tmp_path / "home"
    (root / ".git").mkdir(parents=True)
    write(root, {**CLAUDE_CODE_PROJECT, "AGENTS.md": "AGENTS-MD-MEMORY.\n"})
    write(home, {".claude/CLAUDE.md": "USER-MEMORY.\n", "personal.md": "HOME-PERSONAL-IMPORT.\n"})
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("HOME", str(home))
    recorded = json.loads((RECORDING / "requests.json").read_text())[0]["claude_md"]
    claude_code_order = [
        Path(path.replace("/tmp/ccrec/proj", str(root)).replace("/tmp/ccrec/home", str(home)))
        for path in re.findall(r"^Contents of (\S+) \(", recorded, re.MULTILINE)
    ]
    assert claude_code_order == [
        home / ".claude/CLAUDE.md",
        root / "CLAUDE.md",
        root / "docs/extra.md",
        root / "docs/nested.md",  # relative to the importing file
        root / ".claude/CLAUDE.md",
        root / ".claude/rules/style.md",
        root / "CLAUDE.local.md",
    ]
    expected = [claude_code_order[0], root / "AGENTS.md", *claude_code_order[1:]]
    assert [m.path for m in memory_files(root, root, trusted=False)] == expected
    # From a subdirectory: the parents' files first, then the directory's own.
    assert [m.path for m in memory_files(root / "src", root, trusted=False)] == [
        *expected,
        root / "src/CLAUDE.md",
    ]
    # Outside the project: only in a trusted folder.
    trusted = [m.path for m in memory_files(root, root, trusted=True)]
    assert trusted.index(home / "personal.md") == trusted.index(root / "CLAUDE.md") + 3
    prompt = system_prompt(root, root, trusted=False)
    assert "SHOULD-NOT-BE-IMPORTED" not in prompt and "HOME-PERSONAL-IMPORT" not in prompt
    assert (
        prompt.index("USER-MEMORY") < prompt.index("PROJECT-MEMORY") < prompt.index("LOCAL-MEMORY")
    )
    assert "@docs/extra.md" in prompt  # the import line stays in the importer's text


def test_import_cycles_and_depth_are_bounded(tmp_path: Path) -> None:
    write(tmp_path, {"CLAUDE.md": "@a.md\n", "a.md": "@b.md\n", "b.md": "@a.md @CLAUDE.md\n"})
    chain = {f"d{i}.md": f"@d{i + 1}.md\n" for i in range(10)}
    write(tmp_path / "deep", {"CLAUDE.md": "@d0.md\n", **chain})
    assert [m.path.name for m in memory_files(tmp_path, tmp_path, trusted=False)] == [
        "CLAUDE.md",
        "a.md",
        "b.md",
    ]
    deep = memory_files(tmp_path / "deep", tmp_path / "deep", trusted=False)
    assert [m.path.name for m in deep] == ["CLAUDE.md", "d0.md", "d1.md", "d2.md", "d3.md", "d4.md"]


def test_memory_honours_read_deny_rules(tmp_path: Path) -> None:
    """A cloned repository's CLAUDE.md importing ``.env`` (or a link to it) does not put a
    file the user denied reading into the prompt."""
    from caliban.config.settings import PermissionsSettings
    from caliban.permissions.policy import PermissionPolicy

    write(tmp_path, {"CLAUDE.md": "NOTES\n@.env\n@notes.md\n", ".env": "SECRET=hunter2\n"})
    (tmp_path / "notes.md").symlink_to(tmp_path / ".env")
    policy = PermissionPolicy.from_settings(
        PermissionsSettings(), project_root=tmp_path, disallowed=["Read(.env)"]
    )
    prompt = system_prompt(tmp_path, tmp_path, trusted=True, read_denied=policy.read_denial)
    assert "NOTES" in prompt and "hunter2" not in prompt
    assert "hunter2" in system_prompt(tmp_path, tmp_path, trusted=True)  # without the rule


def test_a_huge_memory_file_is_read_only_as_far_as_the_prompt_goes(tmp_path: Path) -> None:
    write(tmp_path, {"CLAUDE.md": "x" * 5_000_000})
    prompt = system_prompt(tmp_path, tmp_path, trusted=True)
    assert "[… truncated]" in prompt and len(prompt) < 50_000


def test_system_prompt_flags_and_additional_directories(tmp_path: Path) -> None:
    write(tmp_path, {"CLAUDE.md": "RULES.\n"})
    extra = tmp_path / "extra"
    prompt = system_prompt(tmp_path, tmp_path, add_dirs=[extra], append="APPENDED RULE.")
    assert prompt.endswith("\n\nAPPENDED RULE.") and "RULES." in prompt
    assert f"Additional working directories:\n  - {extra}" in prompt
    replaced = system_prompt(tmp_path, tmp_path, replace="CUSTOM.", append="APPENDED RULE.")
    assert replaced == "CUSTOM.\n\nAPPENDED RULE."
