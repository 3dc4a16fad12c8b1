"""The OS sandbox follows the session's working directories as the permission rules do: a
folder an Agent SDK answer adds (``addDirectories``) is writable from the next command on,
one it removes is not, under each real backend that works here. A differential test: the
same writes are decided by the policy and run for real, and the two must agree."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import (
    backend,
    launch_server_stopped,  # noqa: F401  (an autouse fixture)
    sh,
)

from caliban.calls.effects import Effects
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.updates import PermissionUpdater, parse_updates
from caliban.sandbox.runtime import BACKEND_ENV
from caliban.sandbox.session import open_sandbox
from caliban.sandbox.settings import SandboxConfig
from caliban.tools.base import BUILTIN

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux backends")


def _policy_allows_write(policy: PermissionPolicy, path: Path) -> bool:
    """Whether the rules let a file edit write ``path`` without asking (acceptEdits: in the
    project or a working directory)."""
    decision = policy.decide(
        "Write", str(path), Effects(writes=(path,)), read_only=False, origin=BUILTIN
    )
    return decision.behavior == "allow"


@pytest.mark.parametrize("name", ["bubblewrap", "landlock"])
def test_added_and_removed_directories_are_writable_as_the_rules_say(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend(name)  # skips where it cannot run
    monkeypatch.setenv(BACKEND_ENV, name)
    project, added, other = (tmp_path / d for d in ("proj", "added", "other"))
    for place in (project, added, other):
        place.mkdir()
    policy = PermissionPolicy(project_root=project, mode="acceptEdits")
    runtime = open_sandbox(SandboxConfig(mode="workspace-write"), policy)
    box = runtime.backend
    assert box.name == name
    updater = PermissionUpdater(policy=policy, trusted=True)

    def agree(step: str) -> dict[str, bool]:
        """For each folder: the rules' answer, checked against a real write in the box."""
        seen = {}
        for place in (project, added, other):
            target = place / f"{step}.txt"
            done = sh(box, runtime.profile(), f"echo {step} > '{target}'", cwd=project)
            wrote = done.returncode == 0 and target.exists()
            allowed = _policy_allows_write(policy, target)
            assert wrote == allowed, f"{step}: {place.name}: rules {allowed}, sandbox {wrote}"
            seen[place.name] = wrote
        return seen

    try:
        assert agree("before") == {"proj": True, "added": False, "other": False}
        updater.apply(
            parse_updates(
                [{"type": "addDirectories", "directories": [str(added)], "destination": "session"}]
            )
        )
        assert agree("added") == {"proj": True, "added": True, "other": False}
        updater.apply(
            parse_updates(
                [
                    {
                        "type": "removeDirectories",
                        "directories": [str(added)],
                        "destination": "session",
                    }
                ]
            )
        )
        assert agree("removed") == {"proj": True, "added": False, "other": False}
    finally:
        runtime.close()


@pytest.mark.anyio
async def test_add_dir_in_the_repl_widens_the_rules_and_the_running_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/add-dir`` (Claude Code 2.1.197's dialog and messages): once the user says yes the
    folder is a working directory, for the rules and for the next command's sandbox
    (bubblewrap, for real), and the next request tells the model; a missing path, a file and
    a folder already inside the project are refused before anything is asked."""
    from test_checkpoints_repl import answer_menus, leave, start
    from test_repl import ENTER, harness

    backend("bubblewrap")
    monkeypatch.setenv(BACKEND_ENV, "bubblewrap")
    project, added = tmp_path / "proj", tmp_path / "added"
    (project / "sub").mkdir(parents=True)
    added.mkdir()
    (tmp_path / "file.txt").write_text("x")
    policy = PermissionPolicy(project_root=project, mode="acceptEdits")
    runtime = open_sandbox(SandboxConfig(mode="workspace-write"), policy)
    target = added / "f.txt"
    try:
        assert sh(runtime.backend, runtime.profile(), f"echo x > {target}", project).returncode
        async with harness(
            ["Noted."], project, width=400, permissions=policy, sandbox=runtime
        ) as h:
            refused = ["/add-dir ../missing", "/add-dir ../file.txt", "/add-dir sub", "/add-dir"]
            asked = []
            menu = h.repl._menu

            async def shown(question: str, options: Sequence[str]) -> int | None:
                asked.append((question, list(options)))
                return await menu(question, options)

            h.repl._menu = shown  # type: ignore[method-assign]
            task = await start(h, ENTER.join(refused) + ENTER, done="Usage: /add-dir <path>")
            assert h.repl.menus_shown == 0
            await answer_menus(h, "/add-dir ../added" + ENTER, "1", done="for this session.")
            h.input.send_text("go on" + ENTER)
            await leave(h, task)
        done = sh(runtime.backend, runtime.profile(), f"echo x > {target}", project)
    finally:
        runtime.close()
    assert f"Path {tmp_path / 'missing'} was not found." in h.text
    assert f"{tmp_path / 'file.txt'} is not a directory. Did you mean to add the parent " in h.text
    assert f"{project / 'sub'} is already accessible within the project {project}." in h.text
    assert asked == [
        (
            f"Add directory to workspace\n {added}\n caliban will be able to read files in this "
            "directory and make edits when auto-accept edits is on.",
            ["Yes, for this session", "Yes, and remember this directory", "No"],
        )
    ]
    assert f"Added {added} as a working directory for this session." in h.text
    assert policy.working_dirs == (added,)
    assert _policy_allows_write(policy, target)
    assert done.returncode == 0 and target.read_text() == "x\n"
    [request] = h.provider.requests
    told = "".join(m.text for m in request.messages)
    assert f"<system-reminder>Added {added} as a working directory for this session." in told
    assert request.system == "You are a test."  # the prompt (and its cache) keeps its bytes
    assert not (project / ".claude").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["2", "3", "\x1b"], ids=["remember", "no", "esc"])
async def test_add_dir_remembered_in_local_settings_or_declined(
    tmp_path: Path, answer: str
) -> None:
    """ "Yes, and remember this directory" writes Claude Code's
    ``permissions.additionalDirectories`` to ``.claude/settings.local.json`` (other keys kept);
    "No" and Esc add nothing, and say so as Claude Code does."""
    from test_checkpoints_repl import answer_menus, leave, start
    from test_repl import ENTER, harness

    from caliban.permissions.approval import PolicyAuthorizer
    from caliban.repl.approve import TerminalApprover

    project, added = tmp_path / "proj", tmp_path / "added"
    (project / ".claude").mkdir(parents=True)
    added.mkdir()
    local = project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"permissions": {"allow": ["Bash(ls:*)"]}, "model": "opus"}))
    policy = PermissionPolicy(project_root=project, mode="acceptEdits")
    async with harness([], project, permissions=policy, width=400) as h:
        h.session.authorizer = PolicyAuthorizer(
            policy, TerminalApprover(h.repl.console), trusted=True
        )
        task = await start(h, "", done="")
        done = "saved to local settings." if answer == "2" else "as a working directory."
        await answer_menus(h, f"/add-dir {added}" + ENTER, answer, done=done)
        await leave(h, task)
    saved = json.loads(local.read_text())
    if answer == "2":
        assert f"Added {added} as a working directory and saved to local settings." in h.text
        assert policy.working_dirs == (added,)
        assert saved == {
            "permissions": {"allow": ["Bash(ls:*)"], "additionalDirectories": [str(added)]},
            "model": "opus",
        }
    else:
        assert f"Did not add {added} as a working directory." in h.text
        assert policy.working_dirs == ()
        assert saved == {"permissions": {"allow": ["Bash(ls:*)"]}, "model": "opus"}
        assert h.session.conversation.messages == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_an_sdk_answer_adding_a_directory_widens_the_running_sandbox(tmp_path: Path) -> None:
    """The real ``claude-agent-sdk`` client drives ``caliban --sandbox workspace-write``
    (bubblewrap): a Write outside the project asks, and the answer allows it with
    ``addDirectories`` for the session. The next Bash lines run sandboxed without asking:
    the one writing into the added folder writes (the rules count it as the project), the
    one writing into another folder is stopped by the sandbox and told so."""
    from claude_agent_sdk import (
        ClaudeSDKClient,
        PermissionResultAllow,
        PermissionUpdate,
        ToolPermissionContext,
    )
    from fake_model_server import FakeModelServer
    from hang import hang_guard
    from test_permission_updates import sdk_options

    from caliban.permissions.trust import trust

    backend("bubblewrap")
    project, added, other = (tmp_path / d for d in ("proj", "added", "other"))
    for place in (project, added, other):
        place.mkdir()
    trust(project)

    def bash(command: str, index: int) -> dict[str, Any]:
        return {"id": f"toolu_b{index}", "name": "Bash", "arguments": {"command": command}}

    write = {"file_path": str(added / "by-write.txt"), "content": "w"}
    script = [
        {"text": "Write.", "tool_calls": [{"id": "toolu_w", "name": "Write", "arguments": write}]},
        {"text": "Bash.", "tool_calls": [bash(f"echo b > {added}/by-bash.txt", 1),
                                         bash(f"echo b > {other}/by-bash.txt", 2)]},
        {"text": "Done."},
    ]  # fmt: skip
    asked: list[str] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        asked.append(name)
        update = PermissionUpdate(
            type="addDirectories", directories=[str(added)], destination="session"
        )
        return PermissionResultAllow(updated_permissions=[update])

    with FakeModelServer(script) as server:
        options = sdk_options(server, project, can_use_tool)
        options.env[BACKEND_ENV] = "bubblewrap"
        options.extra_args["sandbox"] = "workspace-write"
        with hang_guard():
            async with ClaudeSDKClient(options) as client:
                await client.query("go")
                async for _ in client.receive_response():
                    pass
        results = [
            block
            for block in server.requests[2].body["messages"][-1]["content"]
            if block.get("type") == "tool_result"
        ]
    assert asked == ["Write"]
    assert (added / "by-write.txt").read_text() == "w"
    assert (added / "by-bash.txt").read_text() == "b\n"
    assert not (other / "by-bash.txt").exists()
    [into_added, into_other] = results
    assert not into_added.get("is_error")
    assert into_other.get("is_error") and "sandbox" in json.dumps(into_other)
