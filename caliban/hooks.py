"""Hooks: the user's own commands, run at points of a session, in Claude Code's format.

Configured as Claude Code configures them, in ``.claude/settings*.json`` ``"hooks"`` or in a
caliban config file's ``[hooks]`` table::

    {"hooks": {"PreToolUse": [{"matcher": "Bash|Edit", "hooks": [
        {"type": "command", "command": "~/bin/check.sh", "timeout": 30}]}]}}

A hook gets one JSON object on stdin (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name`` and what the event adds: ``tool_name``/``tool_input`` for tool events,
``prompt`` for UserPromptSubmit, …) and runs through ``sh -c`` in the project root with
``CLAUDE_PROJECT_DIR`` (and ``CALIBAN_PROJECT_DIR``) in its environment, bounded by its
timeout (default 60 s). Exit code 2 blocks what can be blocked and its stderr is the reason;
other non-zero codes are reported and ignored; on exit 0 stdout may be JSON
(``decision``/``reason``, ``continue``/``stopReason``, ``hookSpecificOutput`` with
``permissionDecision``, ``updatedInput`` or ``additionalContext``), else plain text that
UserPromptSubmit and SessionStart add to the context.

:class:`HookRunner` implements the agent loop's :class:`LoopHooks` seam; the loop knows
nothing of processes. Hooks from a project's own files run only in a trusted folder (the
caller decides which configurations to pass in).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from caliban.exec import PIPE, Child, Command, Confinement, spawn, stop_group
from caliban.util.text import encodable

__all__ = [
    "EVENTS",
    "NO_HOOKS",
    "HookCommand",
    "HookConfig",
    "HookRunner",
    "LoopHooks",
    "PromptVerdict",
    "ToolVerdict",
    "configured_hooks",
    "parse_hooks",
]

EventName = Literal[
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "Notification",
    "PreCompact",
]
EVENTS: tuple[EventName, ...] = get_args(EventName)
"""The events caliban runs hooks for (Claude Code's names)."""
MATCHED_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "SessionStart", "PreCompact", "Notification"}
)
"""Events whose ``matcher`` applies (Claude Code's): to the tool name, the session start's
source (``startup|resume``), the compaction's trigger (``manual|auto``), the notification's
type (``permission_prompt``). Other events run every hook."""
DEFAULT_TIMEOUT_S = 60.0
MAX_OUTPUT_BYTES = 1_000_000
"""A hook's stdout or stderr beyond this is cut (it is read, not kept)."""
STOP_BLOCK_CAP = 8
"""How many times in a row Stop hooks may send the model back to work."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HookCommand:
    command: str
    args: tuple[str, ...] | None = None
    """Claude Code's exec form: ``command`` is an executable run with these arguments,
    no shell; ``None``: ``command`` is a shell command line."""
    timeout: float = DEFAULT_TIMEOUT_S
    sandbox: bool = False
    """``"sandbox": true``: it runs in the OS sandbox (docs/sandbox.md), and not at all
    where none works."""
    source: str = ""
    """Where it is configured (a file), for messages."""

    @property
    def shown(self) -> str:
        """The command as messages name it."""
        return shlex.join([self.command, *self.args]) if self.args is not None else self.command


@dataclass(frozen=True, kw_only=True, slots=True)
class HookMatcher:
    pattern: re.Pattern[str] | None
    """What it applies to (a regex matched against the whole tool name, source, trigger or
    notification type); None: all."""
    hooks: tuple[HookCommand, ...]


@dataclass(frozen=True, kw_only=True)
class HookConfig:
    """Every configured hook, by event."""

    events: Mapping[str, tuple[HookMatcher, ...]] = field(default_factory=dict)

    def commands(self, event: str, subject: str | None = None) -> tuple[HookCommand, ...]:
        """The hooks for ``event`` whose matcher accepts ``subject`` (:data:`MATCHED_EVENTS`),
        each command once, in order."""
        found: dict[str, HookCommand] = {}
        for matcher in self.events.get(event, ()):
            pattern = matcher.pattern
            if pattern is not None and (subject is None or not pattern.fullmatch(subject)):
                continue
            for hook in matcher.hooks:
                found.setdefault(hook.shown, hook)
        return tuple(found.values())

    def merged(self, other: HookConfig) -> HookConfig:
        events = {
            name: (*self.events.get(name, ()), *other.events.get(name, ())) for name in EVENTS
        }
        return HookConfig(events={k: v for k, v in events.items() if v})

    def __bool__(self) -> bool:
        return bool(self.events)


def parse_hooks(data: object, source: str) -> tuple[HookConfig, list[str]]:
    """The ``hooks`` table of one settings file, and warnings for what was skipped (each
    naming ``source``). Unknown events and malformed entries are skipped, never fatal."""
    warnings: list[str] = []
    if not isinstance(data, Mapping):
        return HookConfig(), [f"{source}: hooks must be a table of events; ignored"]
    events: dict[str, tuple[HookMatcher, ...]] = {}
    for event, entries in data.items():
        if event not in EVENTS:
            warnings.append(f"{source}: hooks.{event}: not an event caliban runs; ignored")
            continue
        matchers: list[HookMatcher] = []
        for index, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            where = f"{source}: hooks.{event}[{index}]"
            matcher = _matcher(entry, where, warnings, matched=event in MATCHED_EVENTS)
            if matcher is not None:
                matchers.append(matcher)
        if matchers:
            events[event] = tuple(matchers)
    return HookConfig(events=events), warnings


def _matcher(
    entry: object, where: str, warnings: list[str], *, matched: bool
) -> HookMatcher | None:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("hooks"), list):
        warnings.append(f"{where}: expected {{matcher, hooks: [...]}}; ignored")
        return None
    raw = entry.get("matcher")
    pattern = None
    if matched and isinstance(raw, str) and raw not in ("", "*"):
        try:
            pattern = re.compile(raw)
        except re.error as exc:
            warnings.append(f"{where}: matcher {raw!r} is not a valid regex ({exc}); ignored")
            return None
    hooks: list[HookCommand] = []
    for hook in entry["hooks"]:
        command = hook.get("command") if isinstance(hook, Mapping) else None
        if not isinstance(command, str) or hook.get("type", "command") != "command":
            warnings.append(f"{where}: only {{type: command, command: ...}} hooks run; skipped")
            continue
        args = hook.get("args")
        if args is not None and not (
            isinstance(args, list) and all(isinstance(a, str) for a in args)
        ):
            # Run as a shell line instead, it would be another command than the one written.
            warnings.append(f"{where}: hook {command!r}: args must be a list of strings; skipped")
            continue
        sandboxed = hook.get("sandbox", False)
        if not isinstance(sandboxed, bool):
            warnings.append(f"{where}: hook {command!r}: sandbox must be true or false; skipped")
            continue
        timeout = hook.get("timeout", DEFAULT_TIMEOUT_S)
        seconds = (
            float(timeout)
            if isinstance(timeout, int | float) and timeout > 0
            else DEFAULT_TIMEOUT_S
        )
        hooks.append(
            HookCommand(
                command=command,
                args=tuple(args) if args is not None else None,
                timeout=seconds,
                sandbox=sandboxed,
                source=where,
            )
        )
    return HookMatcher(pattern=pattern, hooks=tuple(hooks)) if hooks else None


def configured_hooks(sources: Sequence[tuple[str, object]]) -> tuple[HookConfig, list[str]]:
    """The hooks of every settings source, in order: ``(name, hooks table)``.

    Callers pass only sources that may run code: an untrusted project's hooks are dropped
    when its settings are loaded (:func:`caliban.permissions.trust.drop_widening_settings`)."""
    config, warnings = HookConfig(), []
    for source, table in sources:
        if not table:
            continue
        parsed, problems = parse_hooks(table, source)
        config = config.merged(parsed)
        warnings.extend(problems)
    return config, warnings


# ---------------------------------------------------------------------------- the seam


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptVerdict:
    blocked: str | None = None
    """Why the prompt is not sent (it is then answered with this, without a request)."""
    context: str | None = None
    """Text added to the prompt."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolVerdict:
    blocked: str | None = None
    """The tool does not run; the model reads this."""
    decision: Literal["allow", "ask"] | None = None
    """A hook's word on the permission check (deny rules still apply to ``allow``)."""
    updated_input: Mapping[str, Any] | None = None
    stop: str | None = None
    """Run the tool, then end the turn (``continue: false``)."""


class LoopHooks(Protocol):
    """Where the agent loop lets hooks in; :data:`NO_HOOKS` does nothing."""

    async def prompt_submitted(self, prompt: str) -> PromptVerdict: ...

    async def before_tool(
        self, tool_name: str, tool_input: Mapping[str, Any], call_id: str
    ) -> ToolVerdict: ...

    async def after_tool(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        call_id: str,
        response: Any,
        *,
        failed: bool,
    ) -> str | None:
        """Text to add to the tool's result (a block reason or more context)."""
        ...

    async def stopping(self, last_message: str, *, subagent: bool, again: bool) -> str | None:
        """Feedback that sends the model back to work, or ``None`` to stop."""
        ...

    async def compacting(self, trigger: str, instructions: str | None) -> str | None:
        """Why compaction must not happen, or ``None``."""
        ...


class _NoHooks:
    async def prompt_submitted(self, prompt: str) -> PromptVerdict:
        return PromptVerdict()

    async def before_tool(
        self, tool_name: str, tool_input: Mapping[str, Any], call_id: str
    ) -> ToolVerdict:
        return ToolVerdict()

    async def after_tool(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        call_id: str,
        response: Any,
        *,
        failed: bool,
    ) -> str | None:
        return None

    async def stopping(self, last_message: str, *, subagent: bool, again: bool) -> str | None:
        return None

    async def compacting(self, trigger: str, instructions: str | None) -> str | None:
        return None


NO_HOOKS: LoopHooks = _NoHooks()


# ---------------------------------------------------------------------------- running


@dataclass(frozen=True, kw_only=True, slots=True)
class _Ran:
    hook: HookCommand
    exit_code: int | None
    """``None`` when it timed out or could not start."""
    stdout: str
    stderr: str

    @property
    def output(self) -> Mapping[str, Any] | None:
        """The JSON object a hook printed on success, if it printed one."""
        if self.exit_code != 0 or not self.stdout.lstrip().startswith("{"):
            return None
        with contextlib.suppress(ValueError, RecursionError):
            data = json.loads(self.stdout)
            return data if isinstance(data, Mapping) else None
        return None

    @property
    def blocking(self) -> str | None:
        """Exit code 2: stderr is the reason, prefixed with the command as Claude Code does."""
        if self.exit_code != 2:
            return None
        return f"[{self.hook.shown}]: {self.stderr.strip() or 'blocked (exit code 2)'}"


class HookRunner:
    """Runs the configured hooks of one session (see the module docstring)."""

    def __init__(
        self,
        config: HookConfig,
        *,
        project_dir: Path,
        session_id: Callable[[], str],
        transcript_path: Callable[[], Path | None] = lambda: None,
        permission_mode: str = "default",
        notice: Callable[[str], None] | None = None,
        sandbox: Confinement | None = None,
    ) -> None:
        self.config = config
        self.sandbox = sandbox
        """Where a hook with ``"sandbox": true`` gets its confinement."""
        self.project_dir = project_dir
        self.session_id = session_id
        self.transcript_path = transcript_path
        self.permission_mode = permission_mode
        self.notice = notice
        """Called with a one-line warning when a hook fails (not when it blocks)."""

    def _payload(self, event: str, **extra: Any) -> dict[str, Any]:
        return {
            "session_id": self.session_id(),
            "transcript_path": str(self.transcript_path() or ""),
            "cwd": str(self.project_dir),
            "permission_mode": self.permission_mode,
            "hook_event_name": event,
            **extra,
        }

    async def run(self, event: str, match: str | None = None, **extra: Any) -> list[_Ran]:
        """Run every hook for ``event`` whose matcher accepts ``match`` (the tool name, the
        source, the trigger: :data:`MATCHED_EVENTS`) concurrently; their results in
        configuration order."""
        hooks = self.config.commands(event, match)
        if not hooks:
            return []
        payload = encodable(
            json.dumps(self._payload(event, **extra), ensure_ascii=False, default=str)
        )
        ran = list(await asyncio.gather(*(self._one(hook, payload) for hook in hooks)))
        for one in ran:
            if one.exit_code not in (0, 2) and self.notice is not None:
                why = "timed out" if one.exit_code is None else f"exit code {one.exit_code}"
                self.notice(
                    f"{event} hook {one.hook.shown!r} failed ({why}): {one.stderr.strip()[:300]}"
                )
        return ran

    async def _one(self, hook: HookCommand, payload: str) -> _Ran:
        env = {
            **os.environ,
            "CLAUDE_PROJECT_DIR": str(self.project_dir),
            "CALIBAN_PROJECT_DIR": str(self.project_dir),
        }
        env["CLAUDE_CODE_SESSION_ID"] = env["CALIBAN_SESSION_ID"] = self.session_id()
        if hook.args is None:
            argv = ["/bin/sh", "-c", hook.command]
        else:
            # Exec form: placeholders are replaced in each word as plain text, no shell.
            project = str(self.project_dir)
            argv = [w.replace("${CLAUDE_PROJECT_DIR}", project) for w in (hook.command, *hook.args)]
        try:
            profile = backend = None
            if hook.sandbox:
                if self.sandbox is None:
                    raise OSError("it asks for the sandbox, and this session has none")
                # The first use probes the backend (it runs a command): not on the event loop.
                profile, backend = await asyncio.to_thread(self.sandbox.confinement)
                env = self.sandbox.environment(env)
            command = Command(argv=tuple(argv), cwd=self.project_dir, env=env)
            process = await spawn(
                command, stdin=PIPE, stdout=PIPE, stderr=PIPE, profile=profile, sandbox=backend
            )
        except OSError as exc:
            return _Ran(hook=hook, exit_code=None, stdout="", stderr=str(exc))
        try:
            out, err = await asyncio.wait_for(_communicate(process, payload), hook.timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            await stop_group(process, grace=0)  # its whole process group, at once
            if isinstance(exc, asyncio.CancelledError):
                raise
            return _Ran(
                hook=hook, exit_code=None, stdout="", stderr=f"timed out after {hook.timeout:g} s"
            )
        finally:
            process.close()
        return _Ran(hook=hook, exit_code=process.returncode, stdout=out, stderr=err)

    # -- the LoopHooks seam

    async def prompt_submitted(self, prompt: str) -> PromptVerdict:
        ran = await self.run("UserPromptSubmit", prompt=prompt)
        blocked = _block_reason(ran)
        if blocked is not None:
            return PromptVerdict(blocked=blocked)
        return PromptVerdict(context=_context(ran, "UserPromptSubmit"))

    async def before_tool(
        self, tool_name: str, tool_input: Mapping[str, Any], call_id: str
    ) -> ToolVerdict:
        ran = await self.run(
            "PreToolUse",
            tool_name,
            tool_name=tool_name,
            tool_input=dict(tool_input),
            tool_use_id=call_id,
        )
        if exit2 := [r.blocking for r in ran if r.blocking]:
            return ToolVerdict(blocked=f"PreToolUse:{tool_name} hook error: " + "\n".join(exit2))
        decision: Literal["allow", "ask"] | None = None
        updated: Mapping[str, Any] | None = None
        stop: str | None = None
        for one in ran:
            output = one.output or {}
            specific = output.get("hookSpecificOutput")
            specific = specific if isinstance(specific, Mapping) else {}
            verdict = specific.get("permissionDecision") or _legacy_decision(output.get("decision"))
            reason = specific.get("permissionDecisionReason") or output.get("reason")
            if verdict == "deny":
                return ToolVerdict(
                    blocked=str(reason or f"denied by a PreToolUse hook ({one.hook.shown})")
                )
            if verdict == "ask" and decision != "ask":
                decision = "ask"
            elif verdict == "allow" and decision is None:
                decision = "allow"
            if isinstance(specific.get("updatedInput"), Mapping):
                updated = specific["updatedInput"]
            if output.get("continue") is False:
                stop = str(output.get("stopReason") or "stopped by a PreToolUse hook")
        return ToolVerdict(decision=decision, updated_input=updated, stop=stop)

    async def after_tool(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        call_id: str,
        response: Any,
        *,
        failed: bool,
    ) -> str | None:
        ran = await self.run(
            "PostToolUse",
            tool_name,
            tool_name=tool_name,
            tool_input=dict(tool_input),
            tool_use_id=call_id,
            tool_response=response,
        )
        notes: list[str] = []
        for one in ran:
            output = one.output or {}
            if one.blocking:
                notes.append(
                    f"PostToolUse:{tool_name} hook blocking error from command: {one.blocking}"
                )
            elif output.get("decision") == "block":
                notes.append(
                    f"PostToolUse:{tool_name} hook blocking error from command: "
                    f'"{one.hook.shown}": {output.get("reason") or "blocked"}'
                )
            if context := _specific(output, "additionalContext"):
                notes.append(f"PostToolUse:{tool_name} hook additional context: {context}")
        return "\n".join(notes) or None

    async def stopping(self, last_message: str, *, subagent: bool, again: bool) -> str | None:
        event = "SubagentStop" if subagent else "Stop"
        ran = await self.run(event, stop_hook_active=again, last_assistant_message=last_message)
        reason = _block_reason(ran)
        return f"{event} hook feedback:\n{reason}" if reason else None

    async def compacting(self, trigger: str, instructions: str | None) -> str | None:
        ran = await self.run(
            "PreCompact", trigger, trigger=trigger, custom_instructions=instructions or ""
        )
        return _block_reason(ran)

    async def session_started(self, source: str) -> str | None:
        """SessionStart: text for the model's context, if a hook gave any."""
        ran = await self.run("SessionStart", source, source=source)
        return _context(ran, f"SessionStart:{source}")

    async def session_ended(self, reason: str) -> None:
        await self.run("SessionEnd", reason=reason)

    async def notification(self, message: str) -> None:
        kind = "permission_prompt"
        await self.run("Notification", kind, message=message, notification_type=kind)


async def _communicate(process: Child, payload: str) -> tuple[str, str]:
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(payload.encode())
        await process.stdin.drain()
    process.stdin.close()
    out, err = await asyncio.gather(_read(process.stdout), _read(process.stderr))
    await process.wait()
    return out, err


async def _read(stream: asyncio.StreamReader) -> str:
    """The stream's text, at most :data:`MAX_OUTPUT_BYTES` kept; the rest is read and dropped."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < MAX_OUTPUT_BYTES:
            kept += chunk[: MAX_OUTPUT_BYTES - len(kept)]
    return kept.decode("utf-8", errors="replace")


def _legacy_decision(value: object) -> str | None:
    """Claude Code's older ``decision: approve|block`` for PreToolUse."""
    return {"approve": "allow", "block": "deny"}.get(value) if isinstance(value, str) else None


def _specific(output: Mapping[str, Any], key: str) -> str | None:
    specific = output.get("hookSpecificOutput")
    value = specific.get(key) if isinstance(specific, Mapping) else None
    return value if isinstance(value, str) and value.strip() else None


def _block_reason(ran: Sequence[_Ran]) -> str | None:
    """Exit code 2 (stderr) or ``decision: block`` (reason), joined; ``None`` when none blocked."""
    reasons = [r.blocking for r in ran if r.blocking]
    for one in ran:
        output = one.output or {}
        if output.get("decision") == "block":
            reasons.append(str(output.get("reason") or f"blocked by {one.hook.shown}"))
    return "\n".join(reasons) or None


def _context(ran: Sequence[_Ran], label: str) -> str | None:
    """What successful hooks add to the context: JSON ``additionalContext`` or plain stdout."""
    parts: list[str] = []
    for one in ran:
        if one.exit_code != 0:
            continue
        output = one.output
        if output is not None:
            if context := _specific(output, "additionalContext"):
                parts.append(f"{label} hook additional context: {context}")
        elif one.stdout.strip():
            parts.append(f"{label} hook success: {one.stdout.strip()}")
    return "\n".join(parts) or None
