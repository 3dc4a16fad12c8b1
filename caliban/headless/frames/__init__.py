"""Claude Code's headless frames (``stream-json`` lines), built from the loop's events.

:class:`FrameBuilder` is a listener: it turns :mod:`caliban.events` into the frames Claude
Code 2.1.197 prints, field for field (recorded in ``tests/fixtures/claude_code``; the
end-to-end test compares them key by key). caliban adds keys, never renames or drops one:
``permission_mode`` next to ``permissionMode``, ``context`` in the result, ``error_message``
in ``api_retry``. Frames go to a ``sink``; :mod:`caliban.headless.run` decides whether they are
printed one per line, collected into an array (``json --verbose``) or dropped.

Each kind of frame has its module (docs/headless.md has the full list of shapes):

- ``builder``: :class:`FrameBuilder`, routing each event to the piece below that frames it;
- ``assistant``: one ``assistant`` frame per content block, all blocks of a response sharing
  ``message.id``; with ``--include-partial-messages`` the Anthropic ``stream_event`` frames
  around them;
- ``tools``: one ``user`` frame per tool result, ``tool_use_result`` the tool's structured
  result;
- ``tasks``: sub-agents (``system/task_started`` … ``task_progress`` … ``task_updated`` /
  ``task_notification``; their frames carry ``parent_tool_use_id``) and background commands;
- ``system``: ``init``, ``api_retry``, ``model_fallback``, ``compact_boundary`` and
  caliban's own ``mcp_activation``;
- ``result``: the turn's figures and its ``result`` frame (``permission_denials``,
  ``stop_reason``, ``total_cost_usd`` and ``modelUsage`` from the session's ledger);
- ``common``: ids, times, the ``system`` frame shape.

A frame that shows a whole message, or its first block, carries the message's id as its
``uuid``: a replayed user message, a sub-agent's prompt, the compaction summary, the first
block of a response.
"""

from caliban.headless.frames.builder import FrameBuilder
from caliban.headless.frames.common import Frame, api_error_kind
from caliban.headless.frames.result import TurnOutcome

__all__ = ["Frame", "FrameBuilder", "TurnOutcome", "api_error_kind"]
