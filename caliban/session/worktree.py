"""Git worktrees a session (``caliban -w NAME``) or a sub-agent (``isolation: worktree``)
works in, laid out as Claude Code lays them out.

``<repository root>/.claude/worktrees/<name>/`` on a new branch ``worktree-<name>``, from
the current ``HEAD`` (Claude Code starts from ``origin/HEAD`` after a fetch; caliban makes no
network call, and starts from what you have checked out). Without a name one is made up
(``bright-running-fox``). Files listed in ``.worktreeinclude`` (``.gitignore`` syntax) that
git ignores — ``.env``, local settings — are copied into the new worktree, as Claude Code
does; tracked files are there already. ``.claude/worktrees/`` goes into the repository's
``.git/info/exclude`` so the worktrees do not show as untracked files.

Leaving: a worktree with no changes (nothing uncommitted, no new commit) is removed with its
branch; one with changes is the user's to keep or remove (:func:`remove_worktree`).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from caliban.errors import UsageError
from caliban.util.git import GitError, git

WORKTREES_DIR = Path(".claude") / "worktrees"
BRANCH_PREFIX = "worktree-"
INCLUDE_FILE = ".worktreeinclude"
MAX_INCLUDED_FILES = 10_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ADJECTIVES = ("bright", "calm", "eager", "gentle", "quick", "quiet", "steady", "swift")
_VERBS = ("running", "jumping", "reading", "singing", "drifting", "climbing", "hiding")
_NOUNS = ("fox", "otter", "heron", "badger", "lynx", "falcon", "marten", "wren")


class WorktreeError(UsageError):
    """No worktree could be made (not a git repository, a bad name, git failed)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Worktree:
    name: str
    path: Path
    branch: str
    repo_root: Path
    """The main checkout it was made from."""
    base: str
    """The commit it started from."""
    copied: tuple[str, ...] = ()
    """Files copied from the main checkout (``.worktreeinclude``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Changes:
    uncommitted: int
    """Files changed, added or removed and not committed."""
    commits: int
    """Commits on the worktree's branch since it was made."""

    @property
    def none(self) -> bool:
        return not self.uncommitted and not self.commits


def made_up_name() -> str:
    """``bright-running-fox``: a name nobody has to think of."""
    return "-".join(secrets.choice(words) for words in (_ADJECTIVES, _VERBS, _NOUNS))


def create_worktree(cwd: Path, name: str | None = None) -> Worktree:
    """Make (or, when it exists already, reuse) worktree ``name`` of the repository around
    ``cwd``; raises :class:`WorktreeError` saying what is wrong."""
    name = name or made_up_name()
    if not _NAME.fullmatch(name) or ".." in name:
        raise WorktreeError(
            f"worktree name {name!r}: use letters, digits, '.', '_' and '-' (up to 64)"
        )
    try:
        root = Path(git("rev-parse", "--show-toplevel", cwd=cwd).stdout.strip())
        base = git("rev-parse", "HEAD", cwd=root).stdout.strip()
    except GitError as exc:
        raise WorktreeError(f"-w needs a git repository with a commit: {exc}") from None
    path = root / WORKTREES_DIR / name
    branch = BRANCH_PREFIX + name
    if path.exists():
        if not (path / ".git").exists():
            raise WorktreeError(f"{path} exists and is not a worktree: choose another name")
        current = git("rev-parse", "HEAD", cwd=path, check=False).stdout.strip()
        return Worktree(name=name, path=path, branch=branch, repo_root=root, base=current)
    _exclude_worktrees(root)
    try:
        git("worktree", "add", "-b", branch, str(path), base, cwd=root)
    except GitError as exc:
        raise WorktreeError(str(exc)) from None
    copied = _copy_included(root, path)
    return Worktree(name=name, path=path, branch=branch, repo_root=root, base=base, copied=copied)


def changes(worktree: Worktree) -> Changes:
    """What was done in ``worktree`` since it was made."""
    status = git("status", "--porcelain", "--untracked-files=all", cwd=worktree.path).stdout
    copied = set(worktree.copied)
    uncommitted = [
        line for line in status.splitlines() if line and line[3:].strip('"') not in copied
    ]
    count = git("rev-list", "--count", f"{worktree.base}..HEAD", cwd=worktree.path, check=False)
    commits = int(count.stdout.strip() or 0) if count.stdout.strip().isdigit() else 0
    return Changes(uncommitted=len(uncommitted), commits=commits)


def remove_worktree(worktree: Worktree) -> None:
    """Remove ``worktree`` and its branch, changes and all."""
    git("worktree", "remove", "--force", str(worktree.path), cwd=worktree.repo_root)
    git("branch", "-D", worktree.branch, cwd=worktree.repo_root, check=False)


def _exclude_worktrees(root: Path) -> None:
    """Keep ``.claude/worktrees/`` out of ``git status`` in the main checkout (a local
    exclude: nothing committed changes)."""
    try:
        common = Path(git("rev-parse", "--git-common-dir", cwd=root).stdout.strip())
        exclude = (common if common.is_absolute() else root / common) / "info" / "exclude"
        entry = f"/{WORKTREES_DIR.as_posix()}/"
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if entry not in text.splitlines():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a", encoding="utf-8") as file:
                file.write(("" if not text or text.endswith("\n") else "\n") + entry + "\n")
    except (GitError, OSError):
        pass  # only tidiness: the worktree works without it


def _copy_included(root: Path, path: Path) -> tuple[str, ...]:
    """Copy the ignored files ``.worktreeinclude`` names from ``root`` into ``path``."""
    include = root / INCLUDE_FILE
    if not include.is_file():
        return ()
    listed = "ls-files", "--others", "--ignored", "-z"
    wanted = git(*listed, f"--exclude-from={include}", cwd=root).stdout.split("\0")
    ignored = set(git(*listed, "--exclude-standard", cwd=root).stdout.split("\0"))
    copied = []
    for relative in wanted[:MAX_INCLUDED_FILES]:
        if not relative or relative not in ignored or relative.startswith(WORKTREES_DIR.as_posix()):
            continue
        source, target = root / relative, path / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():  # the link itself: never what it points to
                os.symlink(os.readlink(source), target)
            else:
                shutil.copy2(source, target)
        except OSError:
            continue
        copied.append(relative)
    return tuple(copied)
