"""The checkpoint store: snapshots in caliban's own git store, restores byte for byte, and a
hostile repository gets nothing run and nothing of its changed."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from hang import hang_guard

from caliban.checkpoints import store as store_module
from caliban.checkpoints.manager import Checkpoints
from caliban.checkpoints.store import SnapshotStore, StoreError

pytestmark = pytest.mark.anyio


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    out = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        env=env,
    )
    return out.stdout.decode()


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "crlf.txt").write_bytes(b"line\r\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    git(root, "stash", "list")
    return root


def repo_state(root: Path) -> dict[str, str]:
    """Everything of the user's repository a snapshot must leave alone, hashed by path."""
    state: dict[str, str] = {}
    for path in sorted((root / ".git").rglob("*")):
        if path.is_file():
            state[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def tree_state(root: Path) -> dict[str, bytes]:
    """The project's files (``.git`` aside): path → content, or the link's target."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] == ".git":
            continue
        if path.is_symlink():
            files[str(relative)] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            files[str(relative)] = path.read_bytes()
    return files


def checkpoints(project: Path, session: str = "s1") -> tuple[Checkpoints, list[str]]:
    warnings: list[str] = []
    return Checkpoints(project=project, session_id=session, warn=warnings.append), warnings


async def test_rewind_restores_every_change_and_removes_new_files(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "p")
    (project / "tool.sh").write_text("#!/bin/sh\n")
    (project / "tool.sh").chmod(0o755)
    (project / "link").symlink_to("a.txt")
    before = tree_state(project)
    cps, warnings = checkpoints(project)
    with hang_guard():
        assert await cps.before_prompt("m1", "first") is not None
        (project / "a.txt").write_text("one\nTWO\nthree\n")
        (project / "crlf.txt").unlink()
        (project / "new" / "deep").mkdir(parents=True)
        (project / "new" / "deep" / "f.py").write_text("x = 1\n")
        (project / "tool.sh").chmod(0o644)
        (project / "link").unlink()
        (project / "link").symlink_to("crlf.txt")
        await cps.after_prompt("m1")
        changes = {c.path: c for c in await cps.changes_after(cps.find("m1"))}
        assert changes["a.txt"].added_lines == 2 and changes["a.txt"].removed_lines == 1
        assert changes["new/deep/f.py"].kind == "added"
        assert changes["crlf.txt"].kind == "deleted"
        result = await cps.rewind_files("m1")
    assert tree_state(project) == before
    assert not (project / "new").exists()
    assert os.access(project / "tool.sh", os.X_OK)
    assert {c.path for c in result.changes} >= {"a.txt", "crlf.txt", "new/deep/f.py"}
    assert warnings == []


async def test_works_without_a_repository_and_keeps_ignored_and_large_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MAX_FILE_BYTES", 1000)
    project = tmp_path / "plain"
    project.mkdir()
    (project / ".gitignore").write_text("*.log\n")
    (project / "keep.txt").write_text("v1")
    (project / "big.bin").write_bytes(b"x" * 2000)
    cps, _ = checkpoints(project)
    with hang_guard():
        checkpoint = await cps.before_prompt("m1", "p")
        assert checkpoint is not None and checkpoint.skipped == ("big.bin",)
        (project / "keep.txt").write_text("v2")
        (project / "run.log").write_text("ignored, made after")
        (project / "big.bin").write_bytes(b"y" * 3000)
        plan = await cps.plan("m1")
        assert plan.unrestorable == ("big.bin",)
        assert [c.path for c in plan.changes] == ["keep.txt"]
        await cps.rewind_files("m1")
    assert (project / "keep.txt").read_text() == "v1"
    assert (project / "run.log").read_text() == "ignored, made after"  # never touched
    assert (project / "big.bin").read_bytes() == b"y" * 3000  # not captured: left as it is


async def test_outside_edits_are_named_before_a_rewind(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "p")
    cps, _ = checkpoints(project)
    with hang_guard():
        await cps.before_prompt("m1", "first")
        (project / "a.txt").write_text("by the agent\n")
        (project / "b.txt").write_text("by the agent\n")
        await cps.after_prompt("m1")
        (project / "b.txt").write_text("by the user, between prompts\n")
        plan = await cps.plan("m1")
    assert plan.outside_edits == ("b.txt",)
    assert {c.path for c in plan.changes} == {"a.txt", "b.txt"}


async def test_a_hostile_repository_gets_nothing_run_and_nothing_changed(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "p")
    marker = tmp_path / "pwned"
    payload = f"touch {marker}; exit 0"
    hook = project / ".git" / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\n{payload}\n")
    hook.chmod(0o755)
    (project / ".gitattributes").write_text("* filter=evil diff=evil text eol=crlf\n")
    git(project, "add", ".gitattributes")
    git(project, "commit", "-qm", "attributes")
    with (project / ".git" / "config").open("a") as config:
        config.write(
            f'[core]\n\tfsmonitor = "{payload}"\n\thooksPath = .git/hooks\n'
            f'[filter "evil"]\n\tclean = "{payload}"\n\tsmudge = "{payload}"\n'
            f'[diff "evil"]\n\ttextconv = "{payload}"\n\tcommand = "{payload}"\n'
        )
    # The user's global config, read by their git but never by the store's.
    (tmp_path / ".gitconfig").write_text(f'[core]\n\tfsmonitor = "{payload}"\n')
    git(project, "stash", "list")
    before_git = repo_state(project)
    marker.unlink(missing_ok=True)
    cps, warnings = checkpoints(project)
    with hang_guard():
        await cps.before_prompt("m1", "p")
        (project / "a.txt").write_bytes(b"changed\n")
        (project / "new.txt").write_bytes(b"new\n")
        await cps.after_prompt("m1")
        await cps.changes_after(cps.find("m1"))
        await cps.rewind_files("m1")
    assert not marker.exists(), "a snapshot or restore ran the repository's code"
    assert repo_state(project) == before_git
    assert (project / "a.txt").read_bytes() == b"one\ntwo\n"  # no eol=crlf on the way out
    assert (project / "crlf.txt").read_bytes() == b"line\r\n"
    assert not (project / "new.txt").exists()
    assert warnings == []


async def test_the_user_repository_is_byte_identical(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "p")
    (project / "a.txt").write_text("uncommitted\n")
    git(project, "stash")
    (project / "a.txt").write_text("staged\n")
    git(project, "add", "a.txt")
    before_git = repo_state(project)
    objects = git(project, "count-objects", "-v")
    cps, _ = checkpoints(project)
    with hang_guard():
        for n in range(3):
            await cps.before_prompt(f"m{n}", "p")
            (project / f"f{n}.txt").write_text(str(n))
            await cps.after_prompt(f"m{n}")
        await cps.rewind_files("m0")
    assert repo_state(project) == before_git
    assert git(project, "count-objects", "-v") == objects
    assert "stash@{0}" in git(project, "stash", "list")


async def test_a_folder_replaced_by_a_link_comes_back_and_nothing_is_written_outside(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    outside = tmp_path / "outside"
    (project / "d").mkdir(parents=True)
    outside.mkdir()
    (project / "d" / "f.txt").write_text("inside")
    cps, _ = checkpoints(project)
    with hang_guard():
        await cps.before_prompt("m1", "p")
        (project / "d" / "f.txt").unlink()
        (project / "d").rmdir()
        (project / "d").symlink_to(outside)  # the model replaced the folder with a link
        await cps.rewind_files("m1")
    assert list(outside.iterdir()) == []
    assert not (project / "d").is_symlink()
    assert (project / "d" / "f.txt").read_text() == "inside"


def test_no_write_lands_behind_a_symbolic_link(tmp_path: Path) -> None:
    """A link appearing between the snapshot and the write (a background task) is refused."""
    project = tmp_path / "p"
    project.mkdir()
    (tmp_path / "outside").mkdir()
    (project / "d").symlink_to(tmp_path / "outside")
    store = SnapshotStore(tmp_path / "store", project, "s")
    with pytest.raises(StoreError, match="symbolic link"):
        store._safe_path("d/f.txt")


async def test_a_broken_store_costs_the_checkpoint_and_one_warning(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "f").write_text("x")
    cps, warnings = checkpoints(project)
    cps.directory.mkdir(parents=True)
    (cps.directory / "store").write_text("not a directory")  # corrupt
    with hang_guard():
        assert await cps.before_prompt("m1", "p") is None
        assert await cps.before_prompt("m2", "p") is None
    assert len(warnings) == 1 and "no checkpoint" in warnings[0]
    assert (project / "f").read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
async def test_a_read_only_store_costs_the_checkpoint(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "f").write_text("x")
    cps, warnings = checkpoints(project)
    cps.root.mkdir(parents=True)
    cps.root.chmod(0o555)
    try:
        with hang_guard():
            assert await cps.before_prompt("m1", "p") is None
    finally:
        cps.root.chmod(0o755)
    assert len(warnings) == 1


async def test_storage_is_bounded_per_session_and_in_total(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    old, _ = checkpoints(project, "old")
    old.max_per_session = 3
    with hang_guard():
        for n in range(5):
            (project / "f").write_bytes(os.urandom(20_000))
            await old.before_prompt(f"m{n}", "p")
        assert [c.id for c in old.entries()] == ["m2", "m3", "m4"]
        new, _ = checkpoints(project, "new")
        await new.before_prompt("n1", "p")
        new.max_store_bytes = 1  # everything over: the oldest session goes first
        await new.bound_storage()
    assert old.entries() == []
    assert [c.id for c in new.entries()] == ["n1"]
    refs = SnapshotStore(new.directory / "store", project, "new")
    listed = await refs.git.run("for-each-ref", "--format=%(refname)")
    assert b"refs/caliban/old/" not in listed


async def test_a_forged_manifest_cannot_put_options_on_git_command_lines(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    cps, _ = checkpoints(project)
    cps.manifest_path.parent.mkdir(parents=True)
    cps.manifest_path.write_text(
        '{"version":1,"checkpoints":[{"id":"m1","before":"--output=/tmp/x","after":null}]}'
    )
    assert cps.entries() == []


async def test_the_rewind_files_control_request(tmp_path: Path) -> None:
    from caliban.checkpoints.control import NOT_ENABLED, NOT_FOUND, rewind_files

    project = make_repo(tmp_path / "p")
    cps, _ = checkpoints(project)
    with hang_guard():
        assert await rewind_files(None, {"user_message_id": "m1"}) == NOT_ENABLED
        await cps.before_prompt("m1", "p")
        (project / "a.txt").write_text("one\n")
        (project / "new.txt").write_text("x\n")
        assert await rewind_files(cps, {"user_message_id": "other"}) == NOT_FOUND
        dry = await rewind_files(cps, {"user_message_id": "m1", "dry_run": True})
        assert dry == {
            "canRewind": True,
            "filesChanged": ["a.txt", "new.txt"],
            "insertions": 1,
            "deletions": 1,
        }
        assert (project / "new.txt").exists()  # a dry run changes nothing
        assert await rewind_files(cps, {"user_message_id": "m1"}) == {"canRewind": True}
    assert not (project / "new.txt").exists()
    assert (project / "a.txt").read_text() == "one\ntwo\n"


async def test_the_repository_s_own_excludes_are_respected(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "p")
    (project / ".git" / "info").mkdir(exist_ok=True)
    (project / ".git" / "info" / "exclude").write_text("local-notes.txt\n")
    cps, _ = checkpoints(project)
    with hang_guard():
        await cps.before_prompt("m1", "p")
        (project / "local-notes.txt").write_text("the user's, never captured\n")
        plan = await cps.plan("m1")
        await cps.rewind_files("m1")
    assert plan.changes == ()
    assert (project / "local-notes.txt").exists()


async def test_a_lock_left_by_a_killed_git_does_not_stop_checkpoints(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "f").write_text("x")
    cps, warnings = checkpoints(project)
    with hang_guard():
        await cps.warm()
        index = cps.directory / "store" / "indexes" / "s1"
        index.with_name("s1.lock").write_text("")  # a git SIGKILLed mid-add (a crash)
        again, _ = checkpoints(project)  # the next process of the session
        assert await again.before_prompt("m1", "p") is not None
    assert warnings == []


async def test_a_snapshot_that_times_out_turns_checkpoints_off_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from caliban.checkpoints import git as git_module

    project = tmp_path / "p"
    project.mkdir()
    (project / "f").write_text("x")
    monkeypatch.setattr(git_module, "GIT_TIMEOUT_S", 0.0)
    cps, warnings = checkpoints(project)
    with hang_guard():
        assert await cps.before_prompt("m1", "p") is None
        assert await cps.before_prompt("m2", "p") is None
    assert len(warnings) == 1 and "checkpoints are off for this session" in warnings[0]


async def test_odd_file_names_come_back(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    names = ["new\nline.txt", "tab\there", "caf\u00e9.txt", os.fsdecode(b"latin1-\xe9.txt"), "-rf"]
    for number, name in enumerate(names):
        (project / name).write_text(f"file {number}")
    before = tree_state(project)
    cps, warnings = checkpoints(project)
    with hang_guard():
        await cps.before_prompt("m1", "p")
        for name in names:
            (project / name).write_text("changed")
        (project / ":(glob)*").write_text("a pathspec-looking name")
        await cps.rewind_files("m1")
    assert tree_state(project) == before
    assert warnings == []


async def test_many_changes_are_added_as_a_whole_without_the_large_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "LIST_PATHS_UP_TO", 2)
    monkeypatch.setattr(store_module, "MAX_FILE_BYTES", 1000)
    project = tmp_path / "p"
    (project / "d").mkdir(parents=True)
    for n in range(5):
        (project / "d" / f"f{n}").write_text(str(n))
    (project / "big.bin").write_bytes(b"x" * 2000)
    cps, _ = checkpoints(project)
    with hang_guard():
        checkpoint = await cps.before_prompt("m1", "p")
        assert checkpoint is not None and checkpoint.skipped == ("big.bin",)
        listed = await SnapshotStore(cps.directory / "store", project, "s1").git.run(
            "ls-tree", "-r", "--name-only", checkpoint.before
        )
        assert listed.split() == [b"d/f0", b"d/f1", b"d/f2", b"d/f3", b"d/f4"]
        for n in range(5):
            (project / "d" / f"f{n}").write_text("changed")
        (project / "d" / "new").write_text("new")
        await cps.rewind_files("m1")
    assert sorted(p.name for p in (project / "d").iterdir()) == [f"f{n}" for n in range(5)]
    assert (project / "d" / "f3").read_text() == "3"
    assert (project / "big.bin").exists()
