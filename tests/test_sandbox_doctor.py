"""``caliban doctor``'s sandbox line: the backend found, or why none works and what that
means with the session's settings (commands refused with ``failIfUnavailable``, or run
without a sandbox), with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from caliban.config.doctor import Check, run_checks
from caliban.exec import Availability
from caliban.sandbox import runtime


def _sandbox_line(project: Path) -> Check:
    [line] = [check for check in run_checks(project) if check.area == "sandbox"]
    return line


def _project(tmp_path: Path, settings: str = "") -> Path:
    project = tmp_path / "proj"
    (project / ".caliban").mkdir(parents=True)
    (project / ".caliban" / "config.toml").write_text(settings)
    return project


@pytest.fixture
def no_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime.BACKEND_ENV, "none")


def test_the_backend_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Works:
        name = "bubblewrap"
        keeps_protected_paths = True

        def available(self) -> Availability:
            return Availability(usable=True, detail="bubblewrap (/usr/bin/bwrap)")

    monkeypatch.setattr(runtime, "choose_backend", Works)
    line = _sandbox_line(_project(tmp_path, "[sandbox]\nenabled = true\n"))
    assert line.status == "ok"
    assert "sandbox workspace-write" in line.detail
    assert "backend bubblewrap: bubblewrap (/usr/bin/bwrap)" in line.detail


@pytest.mark.usefixtures("no_backend")
def test_none_with_fail_if_unavailable_fails_and_says_commands_are_refused(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path, "[sandbox]\nenabled = true\nfailIfUnavailable = true\n")
    line = _sandbox_line(project)
    assert line.status == "fail"
    assert "no backend works here (CALIBAN_SANDBOX_BACKEND=none)" in line.detail
    assert "refused (failIfUnavailable)" in line.detail
    assert line.fix


@pytest.mark.usefixtures("no_backend")
def test_none_while_enabled_warns_that_commands_run_unsandboxed(tmp_path: Path) -> None:
    line = _sandbox_line(_project(tmp_path, "[sandbox]\nenabled = true\n"))
    assert line.status == "warn"
    assert "WITHOUT a sandbox" in line.detail
    assert "failIfUnavailable" in line.fix


@pytest.mark.usefixtures("no_backend")
def test_none_while_off_is_only_said(tmp_path: Path) -> None:
    line = _sandbox_line(_project(tmp_path))
    assert line.status == "ok"
    assert line.detail.startswith("sandbox off; no backend would work here")
