from __future__ import annotations

import datetime as dt
from pathlib import Path

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

    assert memory_files(sub, root) == [
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
    assert "Project instructions" not in prompt and "Is a git repository: no" in prompt
