"""The Agent SDK's ``rewind_files`` control request, answered as Claude Code 2.1.197 does
(``tests/fixtures/claude_code/rewind_files``) — except that what Bash changed is restored too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from caliban.checkpoints import SDK_CHECKPOINTING
from caliban.checkpoints.manager import (
    CheckpointNotFound,
    Checkpoints,
    RewindPlan,
)
from caliban.checkpoints.store import StoreError

NOT_ENABLED = (
    f"File checkpointing is not enabled (set {SDK_CHECKPOINTING}, the Agent SDK's "
    "enable_file_checkpointing)."
)
NOT_FOUND = "No file checkpoint found for this message."


async def rewind_files(
    checkpoints: Checkpoints | None, request: Mapping[str, Any]
) -> dict[str, Any] | str:
    """Restore the files to before user message ``user_message_id``: the response's body, or
    the error to answer with. ``dry_run`` says what would change without changing it."""
    if checkpoints is None:
        return NOT_ENABLED
    message_id = request.get("user_message_id")
    if not isinstance(message_id, str) or not message_id:
        return "rewind_files needs a user_message_id."
    try:
        if request.get("dry_run"):
            return {"canRewind": True, **_figures(await checkpoints.plan(message_id))}
        await checkpoints.rewind_files(message_id)
    except CheckpointNotFound:
        return NOT_FOUND
    except StoreError as exc:
        return f"The files could not be restored: {exc}"
    return {"canRewind": True}


def _figures(plan: RewindPlan) -> dict[str, Any]:
    return {
        "filesChanged": [change.path for change in plan.changes],
        "insertions": sum(change.added_lines for change in plan.changes),
        "deletions": sum(change.removed_lines for change in plan.changes),
    }
