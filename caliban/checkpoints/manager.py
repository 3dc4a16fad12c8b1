"""A session's checkpoints: one per user prompt, named by the prompt's message id.

Before a prompt runs, the project's files are snapshotted (``before``); when it has run, again
(``after``). Rewinding to a prompt restores its ``before``. What changed between one prompt's
``after`` and the next one's ``before`` (or now) was changed outside caliban: a rewind that
would overwrite such a file says so first (:attr:`RewindPlan.outside_edits`).

The list lives in a small JSON manifest beside the store, written atomically, so it survives
``--continue`` and ``--resume``. A failing store (a full or read-only disk, no git, a corrupt
store) costs the checkpoint and one warning, never the prompt.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from caliban.checkpoints.git import GitFailed
from caliban.checkpoints.store import Change, SnapshotStore, StoreError
from caliban.config.paths import state_dir

MAX_PER_SESSION = 100
"""Checkpoints a session keeps; the oldest are dropped."""
MAX_STORE_BYTES = 2 * 2**30
"""A project's store past this size drops its oldest sessions' checkpoints."""
MANIFEST_VERSION = 1
BOUND_EVERY = 10
"""The store's size is checked at every this many checkpoints of a session."""
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class CheckpointNotFound(LookupError):
    """No checkpoint was taken for that message (before checkpoints were on, pruned, or a
    failed snapshot)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """The project's files as they were before one user prompt."""

    id: str
    """The user message's id (the transcript's ``uuid``)."""
    prompt: str
    time: str
    before: str
    """The snapshot's tree before the prompt ran."""
    after: str | None = None
    """The snapshot once it had run (None: it did not finish, or the snapshot failed)."""
    skipped: tuple[str, ...] = ()
    """Files too large to capture."""
    active: tuple[str, ...] | None = None
    """The lazily loaded MCP tools active before the prompt, oldest first (None: no lazy
    loading)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RewindPlan:
    """What rewinding the files to a checkpoint would do, for the user to confirm."""

    checkpoint: Checkpoint
    changes: tuple[Change, ...]
    """How the files differ now from the checkpoint: what a rewind undoes."""
    outside_edits: tuple[str, ...]
    """Files among ``changes`` changed outside caliban after the checkpoint: a rewind would
    lose those edits."""
    unrestorable: tuple[str, ...]
    """Files the checkpoint could not capture (too large): left as they are."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RewindResult:
    checkpoint: Checkpoint
    changes: tuple[Change, ...]
    """What the rewind changed on disk."""
    unrestorable: tuple[str, ...] = ()


def store_root() -> Path:
    """Where every project's checkpoint store lives."""
    return state_dir() / "checkpoints"


@dataclass(kw_only=True)
class Checkpoints:
    """The checkpoints of one session of one project."""

    project: Path
    session_id: str
    warn: Callable[[str], None] = lambda text: None
    """Told, once, when a checkpoint could not be taken."""
    root: Path = field(default_factory=store_root)
    max_per_session: int = MAX_PER_SESSION
    max_store_bytes: int = MAX_STORE_BYTES
    _warned: bool = field(default=False, init=False)
    _off: bool = field(default=False, init=False)
    _store: SnapshotStore = field(init=False)

    def __post_init__(self) -> None:
        from caliban.session.store import project_slug

        self.project = self.project.resolve()
        self.directory = self.root / project_slug(self.project)
        self._store = SnapshotStore(self.directory / "store", self.project, self.session_id)

    @property
    def manifest_path(self) -> Path:
        return self.directory / "sessions" / f"{self.session_id}.json"

    def adopt(self, session_id: str) -> None:
        """Follow a resumed session: its checkpoints from now on (``--continue``, ``/resume``)."""
        self.session_id = session_id
        self._store = SnapshotStore(self.directory / "store", self.project, session_id)

    # -- taking

    async def before_prompt(
        self, message_id: str, prompt: str, active: Sequence[str] | None = None
    ) -> Checkpoint | None:
        """Snapshot the files before the prompt ``message_id`` runs; None when it failed."""
        if self._off:
            return None
        try:
            snapshot = await self._store.snapshot()
            entries = [c for c in self.entries() if c.id != message_id]
            if snapshot.tree not in _trees(entries):
                await self._store.keep(snapshot.tree)
            checkpoint = Checkpoint(
                id=message_id,
                prompt=prompt,
                time=datetime.now(UTC).isoformat(timespec="seconds"),
                before=snapshot.tree,
                skipped=snapshot.skipped,
                active=tuple(active) if active is not None else None,
            )
            entries.append(checkpoint)
            dropped, entries = entries[: -self.max_per_session], entries[-self.max_per_session :]
            self._save(entries)
            if dropped:
                await self._store.forget(_trees(dropped) - _trees(entries))
            if len(entries) % BOUND_EVERY == 1:
                await self.bound_storage()
            return checkpoint
        except (StoreError, OSError, ValueError) as exc:
            self._failed(f"no checkpoint for this prompt: {exc}", exc)
            return None

    async def after_prompt(self, message_id: str) -> None:
        """Snapshot the files once the prompt ``message_id`` has run."""
        entries = self.entries()
        index = next((i for i, c in enumerate(entries) if c.id == message_id), None)
        if index is None or self._off:
            return
        try:
            snapshot = await self._store.snapshot()
            if snapshot.tree not in _trees(entries):
                await self._store.keep(snapshot.tree)
            entries[index] = replace(entries[index], after=snapshot.tree)
            self._save(entries)
        except (StoreError, OSError, ValueError) as exc:
            self._failed(f"the files after this prompt were not captured: {exc}", exc)

    async def warm(self) -> None:
        """Hash the project into this session's index now (at start-up, in the background),
        so that the first prompt's checkpoint only looks for what changed since."""
        if self._off:
            return
        try:
            await self._store.snapshot()
        except (StoreError, OSError) as exc:
            self._failed(f"the project could not be snapshotted: {exc}", exc)

    def _failed(self, text: str, exc: Exception) -> None:
        # A snapshot that ran out of time would do so before every prompt: no more tries.
        if isinstance(exc.__cause__, GitFailed) and exc.__cause__.timed_out:
            self._off = True
            text += " (checkpoints are off for this session)"
        self._warn(text)

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            self.warn(f"checkpoints: {text}")

    # -- reading

    def entries(self) -> list[Checkpoint]:
        """This session's checkpoints, oldest first; empty when none can be read."""
        try:
            data = json.loads(self.manifest_path.read_text())
            return [_checkpoint(entry) for entry in data["checkpoints"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def find(self, message_id: str) -> Checkpoint:
        for checkpoint in self.entries():
            if checkpoint.id == message_id:
                return checkpoint
        raise CheckpointNotFound(f"no checkpoint for message {message_id}")

    async def changes_after(self, checkpoint: Checkpoint) -> list[Change]:
        """What the prompt of ``checkpoint`` changed (files, lines)."""
        if checkpoint.after is None:
            return []
        return await self._store.changes(checkpoint.before, checkpoint.after)

    def usage_bytes(self) -> int:
        """Disk space the project's checkpoint store takes (all its sessions)."""
        return self._store.usage_bytes() if self.directory.exists() else 0

    # -- rewinding

    async def plan(self, message_id: str) -> RewindPlan:
        """What rewinding the files to before ``message_id`` would do. Raises
        :class:`CheckpointNotFound` or :class:`StoreError`."""
        plan, _ = await self._plan(message_id)
        return plan

    async def _plan(self, message_id: str) -> tuple[RewindPlan, str]:
        entries = self.entries()
        index = next((i for i, c in enumerate(entries) if c.id == message_id), None)
        if index is None:
            raise CheckpointNotFound(f"no checkpoint for message {message_id}")
        checkpoint = entries[index]
        now = (await self._store.snapshot()).tree
        changes = await self._store.changes(now, checkpoint.before)
        outside: set[str] = set()
        later = entries[index:]
        for current, following in zip(later, [*later[1:], None], strict=True):
            if current.after is None:
                continue
            next_tree = following.before if following is not None else now
            if next_tree != current.after:
                outside.update(c.path for c in await self._store.changes(current.after, next_tree))
        paths = {c.path for c in changes}
        plan = RewindPlan(
            checkpoint=checkpoint,
            changes=tuple(changes),
            outside_edits=tuple(sorted(outside & paths)),
            unrestorable=checkpoint.skipped,
        )
        return plan, now

    async def rewind_files(self, message_id: str) -> RewindResult:
        """Restore the project's files to how they were before ``message_id``: what Write,
        Edit, Bash and background tasks changed since is undone, new files are removed.
        Raises :class:`CheckpointNotFound` or :class:`StoreError`."""
        plan, now = await self._plan(message_id)
        changed = await self._store.restore(plan.checkpoint.before, now)
        return RewindResult(
            checkpoint=plan.checkpoint, changes=tuple(changed), unrestorable=plan.unrestorable
        )

    # -- storage

    def _save(self, entries: Sequence[Checkpoint]) -> None:
        data = {"version": MANIFEST_VERSION, "checkpoints": [_entry(c) for c in entries]}
        path = self.manifest_path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".manifest.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as file:
                json.dump(data, file)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    async def bound_storage(self) -> None:
        """Keep the project's store under :attr:`max_store_bytes`: while it is over, the
        oldest sessions' checkpoints go (never this session's newest), then unreferenced
        objects are deleted."""
        try:
            if self.usage_bytes() <= self.max_store_bytes:
                return
            for manifest in self._manifests_oldest_first():
                session_id = manifest.stem
                other = _other_session(self, session_id)
                entries = other.entries()
                keep = entries[-1:] if session_id == self.session_id else []
                await other._store.forget(_trees(entries) - _trees(keep))
                if keep:
                    other._save(keep)
                else:
                    manifest.unlink(missing_ok=True)
                    (self.directory / "store" / "indexes" / session_id).unlink(missing_ok=True)
                await self._store.prune()
                if self.usage_bytes() <= self.max_store_bytes:
                    return
        except (StoreError, OSError) as exc:
            self._warn(f"the store could not be pruned: {exc}")

    def _manifests_oldest_first(self) -> list[Path]:
        folder = self.directory / "sessions"
        try:
            manifests = [p for p in folder.glob("*.json") if p.is_file()]
        except OSError:
            return []
        return sorted(manifests, key=lambda p: p.stat().st_mtime)


def _other_session(checkpoints: Checkpoints, session_id: str) -> Checkpoints:
    """The checkpoints of another session of the same project (for pruning)."""
    return Checkpoints(
        project=checkpoints.project,
        session_id=session_id,
        root=checkpoints.root,
        max_per_session=checkpoints.max_per_session,
        max_store_bytes=checkpoints.max_store_bytes,
    )


def _object_id(value: object) -> str:
    """A tree id read back from a manifest: only hex digits reach a git command line."""
    if not isinstance(value, str) or not _OBJECT_ID.fullmatch(value):
        raise ValueError(f"not an object id: {value!r}")
    return value


def _trees(entries: Sequence[Checkpoint]) -> set[str]:
    """The snapshots ``entries`` name (each kept alive by one ref of the session)."""
    return {tree for c in entries for tree in (c.before, c.after) if tree is not None}


def _entry(checkpoint: Checkpoint) -> dict[str, Any]:
    data = asdict(checkpoint)
    data["skipped"] = list(checkpoint.skipped)
    data["active"] = list(checkpoint.active) if checkpoint.active is not None else None
    return data


def _checkpoint(data: dict[str, Any]) -> Checkpoint:
    active = data.get("active")
    after = data.get("after")
    return Checkpoint(
        id=str(data["id"]),
        prompt=str(data.get("prompt", "")),
        time=str(data.get("time", "")),
        before=_object_id(data["before"]),
        after=_object_id(after) if after is not None else None,
        skipped=tuple(str(p) for p in data.get("skipped") or ()),
        active=tuple(str(n) for n in active) if isinstance(active, list) else None,
    )
