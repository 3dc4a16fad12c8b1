"""Running ``/name args``: a command or skill expanded into the prompt the model gets.

The message follows Claude Code's: a ``<command-message>``/``<command-name>``/
``<command-args>`` block, then the expanded text (a skill's starts with its base directory),
preceded by a Read of each ``@file`` it mentions. ``!`command``` snippets run in a shell in
the working directory, but only from a user's own files or a trusted project
(:func:`caliban.permissions.trust.is_trusted`): a command from a project folder nobody trusted
is refused before anything runs, and its ``allowed-tools`` are ignored. A ``deny`` permission rule
covering a snippet refuses the command too. A snippet an argument was filled into
(``!`git log $ARGUMENTS```) runs only when the permission rules, with the command's
``allowed-tools``, allow that command line: the arguments are not the file's author's.
``allowed-tools`` become allow rules for that prompt only; ``model`` picks the model for it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from caliban import shell
from caliban.agent import RunResult
from caliban.calls.effects import command_effects
from caliban.events import Notice
from caliban.messages import Message, TextPart, Usage
from caliban.permissions.rules import Rule, is_within
from caliban.skills.catalog import Skill, find_skill
from caliban.skills.expand import Snippet, expand_body, run_snippets
from caliban.tools.base import BUILTIN, CallContext, ToolEnv, call_tool
from caliban.util.mentions import mentions

if TYPE_CHECKING:
    from caliban.session.session import Session


class CommandRefused(Exception):
    """The command must not run; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Expanded:
    """A command ready to run: the user message, the model and the rules for its prompt."""

    message: Message
    model: str | None = None
    allow: tuple[Rule, ...] = ()
    notes: tuple[str, ...] = ()
    """Things the user should know (attachments skipped, settings ignored)."""


def header(name: str, arguments: str) -> str:
    return (
        f"<command-message>{name}</command-message>\n<command-name>/{name}</command-name>\n"
        f"<command-args>{arguments}</command-args>\n"
    )


async def expand_invocation(session: Session, skill: Skill, arguments: str) -> Expanded:
    """Expand ``/skill.name arguments`` for ``session``; raises :class:`CommandRefused`."""
    from caliban.permissions.trust import is_trusted

    root = session.env.project_root
    trusted = skill.scope == "user" or is_trusted(root)
    notes: list[str] = []
    pieces = expand_body(skill.body, arguments)
    if skill.kind == "skill":
        pieces.insert(0, f"Base directory for this skill: {skill.base_dir}\n\n")
    if snippets := [piece for piece in pieces if isinstance(piece, Snippet)]:
        if not trusted:
            raise CommandRefused(
                f"/{skill.name} runs shell commands (!`{snippets[0].command}`) and comes from "
                f"{skill.path}, in a project folder you have not trusted ({root}); caliban "
                "does not run them. Trust the folder first, or run the commands yourself "
                "with !command at the prompt."
            )
        for snippet in snippets:
            if (reason := _refusal(session, snippet, skill.allowed_tools)) is not None:
                raise CommandRefused(f"/{skill.name} was not run: `{snippet.command}`: {reason}")
        env = session.env.fork()  # a snippet's `cd` does not move the session
        text = await run_snippets(pieces, lambda command: _shell(command, env))
    else:
        text = "".join(piece for piece in pieces if isinstance(piece, str))
    attachments, skipped = await _attach(text, session.env, skill)
    notes.extend(skipped)
    allow = skill.allowed_tools
    if allow and not trusted:
        notes.append(
            f"/{skill.name}: allowed-tools ignored: {skill.path} is in a project folder you "
            "have not trusted"
        )
        allow = ()
    parts = (*attachments, TextPart(text=header(skill.name, arguments)), TextPart(text=text))
    message = Message(role="user", parts=parts)
    model = _model(session, skill, notes)
    return Expanded(message=message, model=model, allow=allow, notes=tuple(notes))


def _model(session: Session, skill: Skill, notes: list[str]) -> str | None:
    """The frontmatter's model, a Claude Code alias (``haiku``) resolved for the session's
    provider as ``--model`` resolves it; ``None`` (the session's model) when it has no
    meaning there, with a note."""
    import os

    from caliban.claude_code.model_aliases import resolve_alias

    if skill.model is None:
        return None
    resolved = resolve_alias(skill.model, session.provider.name, os.environ)
    if resolved is None:
        notes.append(
            f"/{skill.name}: model {skill.model!r} is a Claude Code alias with no meaning for "
            f"{session.provider.name}; this prompt uses {session.model} (set "
            f"ANTHROPIC_DEFAULT_{skill.model.upper()}_MODEL to choose one)"
        )
    return resolved


async def run_command(
    session: Session, name: str, arguments: str, *, message_id: str | None = None
) -> RunResult:
    """Run ``/name arguments`` headless: unknown names and refusals make no request.
    ``message_id``: the id the prompt came with (a stream-json line's ``uuid``), kept by the
    expanded message. ``/init`` is built in (:mod:`caliban.skills.init`), as in the REPL."""
    from caliban.skills import init

    if name == init.NAME:
        message = init.init_message(session.env.project_root)
        if message_id is not None:
            message = dataclasses.replace(message, id=message_id)
        return await session.run(message)
    skill = find_skill(session.skills, name)
    if skill is None and (prompt := await mcp_prompt(session, name, arguments)) is not None:
        if isinstance(prompt, str):
            return RunResult(
                subtype="error_during_execution", text="", num_turns=0, usage=Usage(), error=prompt
            )
        if message_id is not None:
            prompt = dataclasses.replace(prompt, id=message_id)
        return await session.run(prompt)
    if skill is None:
        return RunResult(
            subtype="success", text=f"Unknown command: /{name}", num_turns=0, usage=Usage()
        )
    try:
        expanded = await expand_invocation(session, skill, arguments)
    except CommandRefused as exc:
        return RunResult(
            subtype="error_during_execution", text="", num_turns=0, usage=Usage(), error=str(exc)
        )
    for note in expanded.notes:
        session.emit(Notice(level="warning", text=note))
    message = expanded.message
    if message_id is not None:
        message = dataclasses.replace(message, id=message_id)
    return await session.run(message, model=expanded.model, allow=expanded.allow)


async def mcp_prompt(session: Session, name: str, arguments: str) -> Message | str | None:
    """``/mcp__<server>__<prompt> args`` (:mod:`caliban.mcp.prompts`): the user message, or
    why there is none; ``None`` when ``name`` is not an MCP prompt's."""
    from caliban.mcp.prompts import PROMPT_PREFIX, expand_prompt

    if session.mcp is None or not name.startswith(PROMPT_PREFIX):
        return None
    expanded = await expand_prompt(session.mcp, name, arguments)
    if expanded.text is None:
        return expanded.error or f"/{name} failed"
    parts = (TextPart(text=header(name, arguments)), TextPart(text=expanded.text))
    return Message(role="user", parts=parts)


def _refusal(session: Session, snippet: Snippet, allow: tuple[Rule, ...]) -> str | None:
    """Why ``snippet`` may not run: a deny rule covers it, or arguments were filled into it
    and the rules (with the command's ``allowed-tools``) do not allow the result."""
    policy = session.permissions
    if policy is None:
        return None
    # Decided as the Bash call it is, where it will run (the session's working directory).
    effects = command_effects(shell.analyze(snippet.command), session.env.cwd)
    with policy.allowing(allow if snippet.with_arguments else ()):
        decision = policy.decide("Bash", snippet.command, effects, read_only=False, origin=BUILTIN)
    if decision.behavior == "deny":
        return decision.reason
    if snippet.with_arguments and decision.behavior != "allow":
        return (
            f"the arguments were filled into this shell command, so it runs only when the "
            f"permission rules allow it, and {decision.reason} (allow it with an "
            "allowed-tools rule in the command's frontmatter, or --allowed-tools)"
        )
    return None


async def _shell(command: str, env: ToolEnv) -> str:
    from caliban.tools.bash import Bash

    output = await call_tool(Bash(), {"command": command}, CallContext(env=env, call_id="cmd"))
    text = output.as_text
    return "" if text == "(no output)" else text


async def _attach(text: str, env: ToolEnv, skill: Skill) -> tuple[list[TextPart], list[str]]:
    """A Read of each ``@file`` in ``text``, as Claude Code attaches it; a project command
    reads only inside the project."""
    from caliban.tools.read import Read

    parts: list[TextPart] = []
    skipped: list[str] = []
    for mention in mentions(text):
        path = env.resolve(mention)
        if not path.is_file():
            continue  # an @handle or an address, not a file
        if skill.scope == "project" and not is_within(path.resolve(), env.project_root.resolve()):
            skipped.append(f"/{skill.name}: @{mention} not attached: it is outside the project")
            continue
        arguments = {"file_path": str(path)}
        output = await call_tool(Read(), arguments, CallContext(env=env, call_id="attach"))
        if output.is_error:
            skipped.append(f"/{skill.name}: @{mention} not attached: {output.as_text}")
            continue
        called = json.dumps(arguments, separators=(",", ":"))
        parts.append(
            TextPart(
                text="<system-reminder>\nCalled the Read tool with the following input: "
                f"{called}\n</system-reminder>"
            )
        )
        parts.append(
            TextPart(
                text="<system-reminder>\nResult of calling the Read tool:\n"
                f"{output.as_text}\n</system-reminder>"
            )
        )
    return parts, skipped


__all__ = ["CommandRefused", "Expanded", "expand_invocation", "header", "run_command"]
