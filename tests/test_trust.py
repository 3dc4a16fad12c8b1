"""The trusted-folder store: per folder, inherited below, kept outside the project."""

from __future__ import annotations

from pathlib import Path

import pytest

from caliban.trust import is_trusted, revoke, trust, trust_file, trusted_folders


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CALIBAN_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_nothing_is_trusted_until_the_user_says_so(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / "sub").mkdir(parents=True)
    assert not is_trusted(project)
    assert trust(project) == project.resolve()
    assert is_trusted(project) and is_trusted(project / "sub")
    assert not is_trusted(tmp_path) and not is_trusted(tmp_path / "repo-other")
    assert trusted_folders() == [project.resolve()]


def test_revoke_and_trusting_twice(tmp_path: Path) -> None:
    trust(tmp_path)
    trust(tmp_path)
    assert trusted_folders() == [tmp_path.resolve()]
    assert revoke(tmp_path) is True and revoke(tmp_path) is False
    assert not is_trusted(tmp_path)


def test_a_symlink_is_trusted_as_the_folder_it_points_to(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    trust(tmp_path / "link")
    assert is_trusted(real)


@pytest.mark.parametrize(
    "content",
    ["", "not json", '{"folders": "/"}', '{"folders": ["relative/path"]}', "[]", "x" * 2_000_000],
)
def test_a_damaged_trust_file_trusts_nothing(tmp_path: Path, content: str) -> None:
    path = trust_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    assert not is_trusted(tmp_path)
    assert not is_trusted(Path("/"))
