"""Snapshots of a project's files in caliban's own git object store.

One store per project (``state_dir()/checkpoints/<project-slug>/``) holds the objects of all
its sessions, so an unchanged file is stored once however many snapshots name it. A session
has its own index there (its stat cache: a snapshot hashes only what changed since the last
one) and its own refs, which keep its snapshots' trees alive. A snapshot is a tree id.

What a snapshot skips: what ``.gitignore`` ignores, files over :data:`MAX_FILE_BYTES`, the
contents of nested git repositories, and ``.git`` itself. A restore never touches a path that
neither the snapshot nor the project holds now (a skipped file stays as it is).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from caliban.checkpoints.git import ATTRIBUTES, Git, GitFailed

MAX_FILE_BYTES = 10 * 2**20
"""Files larger than this are not captured."""
MAX_NEW_FILES = 50_000
"""A snapshot that would add more new files than this is refused (caliban started in a home
directory, say): it would take long and store much for little."""
GITLINK = "160000"
LIST_PATHS_UP_TO = 200
"""Changed files a snapshot names to git one by one; past this, git walks the tree itself."""
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

ChangeKind = Literal["added", "modified", "deleted"]


class StoreError(OSError):
    """The store cannot take or restore a snapshot (git missing or failing, a full or
    read-only disk, a corrupt store)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """What one snapshot captured."""

    tree: str
    skipped: tuple[str, ...] = ()
    """Paths over the size limit, left out (relative to the project, ``/``-separated)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """How one file differs between two snapshots."""

    path: str
    kind: ChangeKind
    added_lines: int = 0
    removed_lines: int = 0
    binary: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class _Entry:
    """A file of a tree (``git diff-tree`` raw output's new side)."""

    path: str
    mode: str
    blob: str


class SnapshotStore:
    """One session's view of a project's store: take snapshots, compare them, restore one."""

    def __init__(self, store: Path, project: Path, session_id: str) -> None:
        self.store = store
        self.project = project
        # A session id names a file and a ref: anything but a plain name is hashed.
        if not _PLAIN_NAME.fullmatch(session_id):
            session_id = hashlib.sha256(session_id.encode()).hexdigest()[:32]
        self.session_id = session_id
        self.git = Git(store, project, store / "indexes" / session_id)
        self._lock = asyncio.Lock()
        self._ready = False

    # -- taking

    async def ensure(self) -> None:
        """Create the store on first use; (re)write the files that make it safe."""
        if self._ready:
            return
        # This session's index is this process's alone: a lock left by a git killed earlier
        # (a crash, a timeout) would fail every snapshot.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{self.git.index}.lock")
        if not (self.store / "HEAD").is_file():
            self.store.mkdir(parents=True, exist_ok=True)
            await self.git.run("init", "--quiet", "--bare", "--template=", str(self.store))
        (self.store / "indexes").mkdir(exist_ok=True)
        info = self.store / "info"
        info.mkdir(exist_ok=True)
        attributes = info / "attributes"
        if not attributes.is_file() or attributes.read_bytes() != ATTRIBUTES:
            attributes.write_bytes(ATTRIBUTES)
        self._ready = True

    async def snapshot(self) -> Snapshot:
        """Capture the project's files now (what changed since this session's last snapshot
        is hashed; the rest comes from the index's stat cache)."""
        async with self._lock:
            try:
                return await self._snapshot()
            except (GitFailed, OSError) as exc:
                raise StoreError(str(exc)) from exc

    async def _snapshot(self) -> Snapshot:
        await self.ensure()
        listed = await self.git.run(
            "ls-files", "-z", "--others", "--modified", "--deleted", "--exclude-standard"
        )
        changed = sorted({p for p in listed.decode("utf-8", "surrogateescape").split("\0") if p})
        inside_store = self._store_prefix()
        if inside_store is not None:
            changed = [p for p in changed if not (p + "/").startswith(inside_store)]
        if len(changed) > MAX_NEW_FILES:
            raise StoreError(
                f"{len(changed)} files changed or new since the last snapshot (over "
                f"{MAX_NEW_FILES}); not captured"
            )
        skipped, gone, add = [], [], []
        for path in changed:
            info = self._lstat(path)
            if info is None:
                gone.append(path)
            elif stat.S_ISREG(info.st_mode) and info.st_size > MAX_FILE_BYTES:
                skipped.append(path)
            else:
                add.append(path)
        if skipped or gone:
            await self._with_paths(
                ["update-index", "-z", "--force-remove", "--stdin"], [*skipped, *gone]
            )
        if add:
            # git matches a long pathspec list against every file (quadratic): many changes
            # (the first snapshot) are added as "everything but the skipped".
            pathspecs = [f":(literal){p}" for p in add]
            if len(add) > LIST_PATHS_UP_TO:
                pathspecs = [":/", *(f":(exclude,literal){p}" for p in skipped)]
                if inside_store is not None:
                    pathspecs.append(f":(exclude,literal){inside_store}")
            await self._with_paths(
                ["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"],
                pathspecs,
                unreadable_ok=True,
            )
        tree = (await self.git.run("write-tree")).decode().strip()
        return Snapshot(tree=tree, skipped=tuple(skipped))

    def _lstat(self, relative: str) -> os.stat_result | None:
        """The file itself (not a link's target); None when it is gone, or lies beyond a
        symbolic link (a folder replaced by a link: its old files are gone)."""
        path = self.project / relative
        parent = path.parent
        while parent != self.project:
            if parent.is_symlink():
                return None
            parent = parent.parent
        try:
            return path.lstat()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _store_prefix(self) -> str | None:
        """The store's path inside the project (caliban run in a home directory), if it is."""
        try:
            relative = self.store.resolve().relative_to(self.project.resolve())
        except ValueError:
            return None
        return relative.as_posix() + "/"

    async def _with_paths(
        self, args: list[str], paths: Sequence[str], *, unreadable_ok: bool = False
    ) -> None:
        data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
        with tempfile.TemporaryFile() as stdin:
            stdin.write(data)
            stdin.seek(0)
            try:
                await self.git.run(*args, stdin=stdin)
            except GitFailed as exc:
                # --ignore-errors: a file that vanished or cannot be read mid-add is left out,
                # the rest is staged, and git exits 1; the snapshot goes on.
                if not (unreadable_ok and exc.code == 1):
                    raise

    async def keep(self, tree: str) -> None:
        """Name ``tree`` with a ref of this session, so pruning keeps its objects."""
        try:
            await self.git.run("update-ref", f"refs/caliban/{self.session_id}/{tree}", tree)
        except GitFailed as exc:
            raise StoreError(str(exc)) from exc

    async def forget(self, trees: Iterable[str]) -> None:
        """Drop this session's refs to ``trees`` (their objects go at the next :meth:`prune`)."""
        lines = "".join(f"delete refs/caliban/{self.session_id}/{tree}\n" for tree in trees)
        if not lines:
            return
        with tempfile.TemporaryFile() as stdin:
            stdin.write(lines.encode())
            stdin.seek(0)
            with contextlib.suppress(GitFailed):
                await self.git.run("update-ref", "--stdin", stdin=stdin)

    # -- comparing

    async def changes(self, old: str, new: str) -> list[Change]:
        """What differs from tree ``old`` to tree ``new``, file by file, with line counts."""
        try:
            raw = await self.git.run("diff-tree", "-r", "-z", "--no-renames", "--numstat", old, new)
        except GitFailed as exc:
            raise StoreError(str(exc)) from exc
        counts: dict[str, tuple[int, int, bool]] = {}
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        for field in fields:
            parts = field.split("\t", 2)
            if len(parts) == 3:
                added, removed, path = parts
                binary = added == "-"
                counts[path] = (0 if binary else int(added), 0 if binary else int(removed), binary)
        kinds = {path: kind for kind, path in await self._kinds(old, new)}
        return [
            Change(
                path=path,
                kind=kinds.get(path, "modified"),
                added_lines=added,
                removed_lines=removed,
                binary=binary,
            )
            for path, (added, removed, binary) in sorted(counts.items())
        ]

    async def _kinds(self, old: str, new: str) -> list[tuple[ChangeKind, str]]:
        raw = await self.git.run("diff-tree", "-r", "-z", "--no-renames", "--name-status", old, new)
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        names: dict[str, ChangeKind] = {"A": "added", "D": "deleted"}
        return [
            (names.get(status[:1], "modified"), path)
            for status, path in zip(fields[0::2], fields[1::2], strict=False)
            if path
        ]

    # -- restoring

    async def restore(self, target: str, current: str) -> list[Change]:
        """Make the project's files what ``target`` holds, given that they are ``current``
        now (a snapshot just taken): write what differs, delete what ``target`` lacks.
        Returns what changed on disk."""
        try:
            changes = await self.changes(current, target)
            entries = await self._entries(current, target)
            # Removals first: a link the model put where a folder was goes before the
            # folder's files are written back.
            for change in changes:
                if change.kind == "deleted" and change.path in entries:
                    self._remove(change.path)
            await self._write_blobs(
                [entries[c.path] for c in changes if c.kind != "deleted" and c.path in entries]
            )
        except (GitFailed, OSError) as exc:
            raise StoreError(str(exc)) from exc
        return changes

    async def _entries(self, old: str, new: str) -> dict[str, _Entry]:
        raw = await self.git.run("diff-tree", "-r", "-z", "--no-renames", old, new)
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        entries: dict[str, _Entry] = {}
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            parts = meta.lstrip(":").split(" ")
            # A nested repository (a gitlink, 160000) has no content here to write back.
            if len(parts) >= 4 and parts[1] != GITLINK:
                entries[path] = _Entry(path=path, mode=parts[1], blob=parts[3])
        return entries

    async def _write_blobs(self, entries: Sequence[_Entry]) -> None:
        if not entries:
            return
        wanted = "".join(f"{entry.blob}\n" for entry in entries).encode()
        with tempfile.TemporaryFile() as stdin:
            stdin.write(wanted)
            stdin.seek(0)
            async with self.git.stream("cat-file", "--batch", stdin=stdin) as child:
                assert child.stdout is not None
                for entry in entries:
                    header = (await child.stdout.readline()).split()
                    if len(header) != 3 or header[1] != b"blob":
                        raise StoreError(f"the store lacks {entry.path}'s content (corrupt?)")
                    data = await child.stdout.readexactly(int(header[2]))
                    await child.stdout.readexactly(1)
                    self._write(entry, data)
                if await child.wait() != 0:
                    raise StoreError("git cat-file failed")

    def _safe_path(self, relative: str) -> Path:
        """The file at ``relative`` in the project; refused when a directory on the way is a
        symbolic link (a write must not land outside the project)."""
        path = self.project / relative
        if ".." in path.relative_to(self.project).parts:
            raise StoreError(f"{relative} is outside the project; not restored")
        for ancestor in path.parents:
            if ancestor == self.project:
                break
            if ancestor.is_symlink():
                raise StoreError(f"{relative}: {ancestor} is a symbolic link; not restored")
        return path

    def _write(self, entry: _Entry, data: bytes) -> None:
        path = self._safe_path(entry.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            raise StoreError(f"{entry.path} is a directory now; not restored")
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            if entry.mode == "120000":
                os.close(fd)
                os.unlink(temporary)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                os.symlink(os.fsdecode(data), path)
                return
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.chmod(temporary, 0o755 if entry.mode == "100755" else 0o644)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def _remove(self, relative: str) -> None:
        path = self._safe_path(relative)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        parent = path.parent
        while parent != self.project and parent.is_relative_to(self.project):
            try:
                parent.rmdir()  # only an empty one: a directory the snapshot did not have
            except OSError:
                break
            parent = parent.parent

    # -- size

    def usage_bytes(self) -> int:
        """Disk space the whole store takes now (every session of this project)."""
        total = 0
        for folder, _dirs, files in os.walk(self.store):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(folder, name)).st_size
        return total

    async def prune(self) -> None:
        """Delete the objects no ref names any more, and pack the rest."""
        try:
            await self.git.run("gc", "--prune=now", "--quiet")
        except GitFailed as exc:
            raise StoreError(str(exc)) from exc
