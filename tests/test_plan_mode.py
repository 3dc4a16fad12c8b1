"""Plan mode that plans: the reminder on the user's prompt, read-only tools only, and
ExitPlanMode, whose plan the user approves before anything changes (issue 27).

The loop with a scripted model and the session's real permission policy; the Agent SDK's
frames and the REPL's dialog are in ``test_plan_mode_e2e.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from caliban.calls.effects import Effects
from caliban.config.settings import PermissionMode, Settings
from caliban.permissions.approval import (
    DenyingApprover,
    PermissionAnswer,
    PermissionRequest,
    PolicyAuthorizer,
)
from caliban.permissions.policy import (
    NOT_PLANNING_REASON,
    PLAN_APPROVAL_REASON,
    PermissionPolicy,
    decide,
)
from caliban.permissions.rules import PermissionRules
from caliban.permissions.sdk_prompt import answer_from, request_frame
from caliban.permissions.updates import ModeUpdate
from caliban.providers.base import ProviderRequest
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.session.session import Session
from caliban.tools.base import BUILTIN, ToolEnv
from caliban.tools.exit_plan_mode import (
    EXITED_PLAN_MODE_REMINDER,
    PLAN_MODE_REMINDER,
    UNATTENDED,
    ExitPlanMode,
)
from caliban.tools.read import Read
from caliban.tools.write import Write

pytestmark = pytest.mark.anyio

PLAN = "# Plan\n\n1. Create `a.txt` containing `hello`."
Approver = Callable[[PermissionRequest], PermissionAnswer]


def plan_session(
    root: Path, steps: list[Any], answer: Approver, mode: PermissionMode = "plan"
) -> tuple[Session, ScriptedProvider, list[PermissionRequest]]:
    """A session in ``mode`` with Read and Write, the real policy, and an approver that
    records each question and answers it with ``answer``."""
    asked: list[PermissionRequest] = []

    async def approver(request: PermissionRequest) -> PermissionAnswer:
        asked.append(request)
        return answer(request)

    policy = PermissionPolicy(project_root=root, mode=mode)
    provider = ScriptedProvider(steps)
    session = Session(
        settings=Settings(),
        provider=provider,
        model="m",
        system_prompt="You are a test.",
        env=ToolEnv(cwd=root, project_root=root),
        builtins=[Read(), Write()],
        permissions=policy,
        authorizer=PolicyAuthorizer(policy, approver),
    )
    return session, provider, asked


def last_user_texts(request: ProviderRequest) -> list[str]:
    return [part.text for part in request.messages[-1].parts if hasattr(part, "text")]


def write_a(root: Path) -> Any:
    return reply(
        "Writing.", tool_call("Write", {"file_path": str(root / "a.txt"), "content": "hi"})
    )


def exit_plan() -> Any:
    return reply("Here is my plan.", tool_call("ExitPlanMode", {"plan": PLAN}))


def never(request: PermissionRequest) -> PermissionAnswer:
    raise AssertionError(f"asked about {request.tool_name}")


# ---------------------------------------------------------------------------- the policy


def _decide_exit(mode: PermissionMode, rules: PermissionRules | None = None) -> Any:
    return decide(
        "ExitPlanMode",
        None,
        Effects(leaves_plan_mode=True),
        read_only=False,
        origin=BUILTIN,
        mode=mode,
        rules=rules or PermissionRules(),
        project_root=Path("/proj"),
    )


def test_a_plan_always_asks_in_plan_mode_even_with_an_allow_rule() -> None:
    assert (_decide_exit("plan").behavior, _decide_exit("plan").reason) == (
        "ask",
        PLAN_APPROVAL_REASON,
    )
    allowing = PermissionRules.parse(allow=["ExitPlanMode", "*"])
    assert _decide_exit("plan", allowing).behavior == "ask"


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
def test_outside_plan_mode_there_is_no_plan_to_approve(mode: PermissionMode) -> None:
    decision = _decide_exit(mode)
    assert (decision.behavior, decision.reason) == ("deny", NOT_PLANNING_REASON)


def test_a_deny_rule_on_exit_plan_mode_wins() -> None:
    decision = _decide_exit("plan", PermissionRules.parse(deny=["ExitPlanMode"]))
    assert decision.behavior == "deny" and decision.rule == "ExitPlanMode"


def test_a_write_in_plan_mode_is_refused_pointing_to_exit_plan_mode() -> None:
    policy = PermissionPolicy(project_root=Path("/proj"), mode="plan")
    decision = policy.decide("Write", "/proj/a.txt", read_only=False, origin=BUILTIN)
    assert decision.behavior == "deny" and "ExitPlanMode" in decision.reason


# ---------------------------------------------------------------------------- the request


async def test_the_request_names_plan_mode_on_the_prompt_and_offers_exit_plan_mode(
    project: Path,
) -> None:
    session, provider, _ = plan_session(project, ["I'll look first."], never)
    await session.run("add a feature")
    [request] = provider.requests
    assert last_user_texts(request) == ["add a feature", PLAN_MODE_REMINDER]
    assert provider.offered == [["Read", "Write", "ExitPlanMode"]]
    # The system prompt stays what it is in any other mode (prompt caches keep it).
    other, other_provider, _ = plan_session(project, ["ok"], never, mode="default")
    await other.run("add a feature")
    assert request.system == other_provider.requests[0].system
    assert other_provider.offered == [["Read", "Write"]]
    assert last_user_texts(other_provider.requests[0]) == ["add a feature"]


async def test_a_write_is_refused_and_nobody_is_asked(project: Path) -> None:
    session, provider, asked = plan_session(project, [write_a(project), "ok"], never)
    await session.run("go")
    result = provider.requests[1].messages[-1].parts[0]
    assert result.is_error and "plan mode is read-only" in str(result.content)  # type: ignore[union-attr]
    assert "ExitPlanMode" in str(result.content)  # type: ignore[union-attr]
    assert not (project / "a.txt").exists() and asked == []


# ---------------------------------------------------------------------------- approving


async def test_an_approved_plan_with_accepted_edits_lets_the_write_run(project: Path) -> None:
    steps = [exit_plan(), write_a(project), "Done."]
    session, provider, asked = plan_session(
        project, steps, lambda r: PermissionAnswer.allow_once(mode="acceptEdits")
    )
    await session.run("plan it")
    [question] = asked  # the plan only: acceptEdits lets the Write run unasked
    assert question.tool_name == "ExitPlanMode" and question.arguments == {"plan": PLAN}
    assert question.suggestions == ()  # no "don't ask again" for a plan
    assert session.permissions is not None and session.permissions.mode == "acceptEdits"
    approved = provider.requests[1].messages[-1].parts[0]
    assert str(approved.content[0].text).startswith(  # type: ignore[union-attr]
        "User has approved your plan. You can now start coding."
    )
    assert f"## Approved Plan:\n{PLAN}" in approved.content[0].text  # type: ignore[union-attr]
    assert (project / "a.txt").read_text() == "hi"
    # Out of plan mode, ExitPlanMode is not offered any more.
    assert provider.offered[1] == ["Read", "Write"]


async def test_an_approval_without_a_mode_leaves_plan_mode_for_default(project: Path) -> None:
    def answer(request: PermissionRequest) -> PermissionAnswer:
        if request.tool_name == "Write":
            return PermissionAnswer.deny("not now")
        return PermissionAnswer.allow_once()

    session, _, asked = plan_session(project, [exit_plan(), write_a(project), "ok"], answer)
    await session.run("plan it")
    assert [r.tool_name for r in asked] == ["ExitPlanMode", "Write"]  # default mode asks
    assert session.permissions is not None and session.permissions.mode == "default"


async def test_keeping_on_planning_returns_the_feedback_and_stays_in_plan_mode(
    project: Path,
) -> None:
    from caliban.tools.exit_plan_mode import rejected

    session, provider, _ = plan_session(
        project, [exit_plan(), "Revising."], lambda r: PermissionAnswer.deny(rejected("add tests"))
    )
    await session.run("plan it")
    result = provider.requests[1].messages[-1].parts[0]
    assert result.is_error and "The user said: add tests" in str(result.content)  # type: ignore[union-attr]
    assert session.permissions is not None and session.permissions.mode == "plan"
    assert provider.offered[1] == ["Read", "Write", "ExitPlanMode"]


async def test_leaving_plan_mode_by_hand_is_told_once(project: Path) -> None:
    session, provider, _ = plan_session(project, ["a", "b", "c"], never)
    await session.run("one")
    assert session.permissions is not None
    session.permissions.mode = "default"  # Shift-Tab
    await session.run("two")
    await session.run("three")
    assert last_user_texts(provider.requests[1]) == ["two", EXITED_PLAN_MODE_REMINDER]
    assert last_user_texts(provider.requests[2]) == ["three"]


async def test_a_new_conversation_is_not_told_plan_mode_ended(project: Path) -> None:
    session, provider, _ = plan_session(project, ["a", "b"], never)
    await session.run("one")
    assert session.permissions is not None
    session.permissions.mode = "default"
    session.clear()
    await session.run("two")
    assert last_user_texts(provider.requests[1]) == ["two"]


async def test_a_plan_approved_leaves_nothing_to_tell_on_the_next_prompt(project: Path) -> None:
    steps = [exit_plan(), "Starting.", "Next."]
    session, provider, _ = plan_session(project, steps, lambda r: PermissionAnswer.allow_once())
    await session.run("plan it")
    await session.run("go on")
    assert last_user_texts(provider.requests[2]) == ["go on"]


def test_a_sub_agent_gets_no_exit_plan_mode(project: Path) -> None:
    session, _, _ = plan_session(project, [], never)

    class Everything:
        inherit_active_mcp = False
        exact_tools: tuple[str, ...] = ()

        def allows(self, tool_name: str) -> bool:
            return True

    child = session.toolset.for_child(Everything())
    assert child.find("ExitPlanMode") is None
    assert [t.name for t in child.offered()] == ["Read", "Write"]


# ---------------------------------------------------------------------------- headless


async def test_headless_without_a_prompt_tool_the_plan_is_refused_and_nothing_is_summed(
    project: Path,
) -> None:
    session, provider, _ = plan_session(project, [exit_plan(), "Here is the plan."], never)
    assert session.permissions is not None
    denying = DenyingApprover()
    session.authorizer = PolicyAuthorizer(session.permissions, denying)
    await session.run("plan it")
    result = provider.requests[1].messages[-1].parts[0]
    assert UNATTENDED in str(result.content)  # type: ignore[union-attr]
    assert denying.denied == [] and session.permissions.mode == "plan"


def _plan_request(arguments: dict[str, Any]) -> PermissionRequest:
    tool = ExitPlanMode(lambda: None)
    invocation = tool.bind(arguments)
    assert not isinstance(invocation, str)
    return PermissionRequest(
        tool_name="ExitPlanMode",
        origin=BUILTIN,
        invocation=invocation,
        env=ToolEnv(cwd=Path("/p"), project_root=Path("/p")),
        subject=None,
        reason=PLAN_APPROVAL_REASON,
        suggestions=(),
        call_id="toolu_p1",
        arguments=arguments,
        effects=Effects(leaves_plan_mode=True),
    )


def test_the_sdk_sees_the_plan_as_claude_code_sends_it() -> None:
    """Claude Code 2.1.197's can_use_tool request for ExitPlanMode (recorded): no
    description, no suggestions; caliban adds only its decision_reason."""
    frame = request_frame("r1", _plan_request({"plan": PLAN}))
    assert frame["request"] == {
        "subtype": "can_use_tool",
        "tool_name": "ExitPlanMode",
        "display_name": "ExitPlanMode",
        "input": {"plan": PLAN},
        "tool_use_id": "toolu_p1",
        "decision_reason": PLAN_APPROVAL_REASON,
    }


@pytest.mark.parametrize(
    "updates, mode",
    [
        ([{"type": "setMode", "mode": "acceptEdits", "destination": "session"}], "acceptEdits"),
        ([{"type": "setMode", "mode": "default", "destination": "session"}], "default"),
        ([{"type": "setMode", "mode": "bypassPermissions", "destination": "session"}], None),
        ([{"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow"}], None),
        ("setMode", None),
        (None, None),
    ],
)
def test_an_sdk_allow_may_set_the_mode(updates: Any, mode: PermissionMode | None) -> None:
    request = _plan_request({"plan": PLAN})
    body: dict[str, Any] = {"behavior": "allow", "updatedInput": {"plan": PLAN}}
    if updates is not None:
        body["updatedPermissions"] = updates
    answer, _ = answer_from({"subtype": "success", "response": body}, request)
    modes = [update.mode for update in answer.updates if isinstance(update, ModeUpdate)]
    assert answer.behavior == "allow_once" and (modes[-1] if modes else None) == mode


# ---------------------------------------------------------------------------- the REPL


async def test_in_the_repl_keys_typed_ahead_never_answer_the_plan(project: Path) -> None:
    """A ``1`` typed while the model works ("Yes, and auto-accept edits") goes to the
    draft; the ``2`` pressed once the plan is drawn answers: the default mode."""
    import asyncio

    from test_repl import ENTER, harness, wait_until

    policy = PermissionPolicy(project_root=project, mode="plan")
    async with harness([exit_plan(), "Starting."], project, permissions=policy) as h:
        h.session.authorizer = PolicyAuthorizer(policy, h.approver)
        h.input.send_text("plan it" + ENTER + "1")
        task = asyncio.ensure_future(h.repl.run())
        await wait_until(lambda: h.approver.shown >= 1)
        h.input.send_text("2")
        await wait_until(lambda: "Starting." in h.text and h.repl.prompt.app.is_running)
        assert policy.mode == "default"
        assert "Here is caliban's plan" in h.text and " 1 Create a.txt containing" in h.text
        h.input.send_text("\x15\x04")  # Ctrl-U clears the typed-ahead "1", Ctrl-D leaves
        await task


async def test_a_rewound_plan_mode_prompt_comes_back_without_its_reminder(
    project: Path,
) -> None:
    import asyncio

    from test_repl import ENTER, harness, wait_until

    policy = PermissionPolicy(project_root=project, mode="plan")
    async with harness(["Looking.", "Again."], project, permissions=policy) as h:
        h.input.send_text("plan it" + ENTER)
        task = asyncio.ensure_future(h.repl.run())
        await wait_until(lambda: "Looking." in h.text and h.repl.prompt.app.is_running)
        shown = h.repl.menus_shown
        h.input.send_text("/rewind" + ENTER)
        await wait_until(lambda: h.repl.menus_shown > shown)
        h.input.send_text("1")
        await wait_until(lambda: h.repl.menus_shown > shown + 1)
        h.input.send_text("1")  # the conversation (no checkpoints here)
        await wait_until(lambda: "Conversation rewound" in h.text and h.repl.prompt.app.is_running)
        assert "Conversation rewound to before: plan it\n" in h.text + "\n"
        h.input.send_text(ENTER)  # the prompt is back in the input, as typed
        await wait_until(lambda: "Again." in h.text and h.repl.prompt.app.is_running)
        h.input.send_text("\x04")
        await task
    assert last_user_texts(h.provider.requests[1]) == ["plan it", PLAN_MODE_REMINDER]
