"""The Bash tool: output, exit codes, cd persistence, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hang import hang_guard

from caliban.calls.effects import command_effects
from caliban.exec import process as exec_process
from caliban.shell import analyze
from caliban.tools import bash as bash_module
from caliban.tools.base import CallContext, ToolEnv, ToolOutput
from caliban.tools.bash import Bash

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(tmp_path: Path) -> ToolEnv:
    return ToolEnv(cwd=tmp_path, project_root=tmp_path)


async def run(env: ToolEnv, command: str, **args: Any) -> ToolOutput:
    with hang_guard():
        return await Bash().call({"command": command, **args}, CallContext(env=env, call_id="b"))


def is_gone(pid: int) -> bool:
    """Dead, or a zombie waiting for a parent that may never reap it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


async def wait_until(check: Any) -> None:
    """Poll another process's state (there is no event to wait on), for at most 10 s."""
    with hang_guard():
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_output_and_summary(env: ToolEnv) -> None:
    out = await run(env, "echo hello; echo world")
    assert not out.is_error
    assert out.as_text == "hello\nworld"
    assert out.summary == "exit 0 · 2 lines"


async def test_stdout_and_stderr_are_interleaved(env: ToolEnv) -> None:
    out = await run(env, "echo one; echo two >&2; echo three")
    assert out.as_text == "one\ntwo\nthree"


async def test_non_zero_exit_is_a_result(env: ToolEnv) -> None:
    out = await run(env, "echo partial; ls /definitely/not/here; exit 3")
    assert out.is_error
    lines = out.as_text.splitlines()
    assert lines[0] == "partial"
    assert "No such file or directory" in lines[1]
    assert lines[-1] == "[exit code 3]"
    assert out.summary == "exit 3 · 2 lines"


async def test_no_output(env: ToolEnv) -> None:
    out = await run(env, "true")
    assert out.as_text == "(no output)" and out.summary == "exit 0 · 0 lines"


async def test_cd_persists_between_calls(env: ToolEnv) -> None:
    (env.cwd / "sub" / "deeper").mkdir(parents=True)
    out = await run(env, "cd sub/deeper && echo moved")
    assert env.cwd == (env.project_root / "sub" / "deeper").resolve()
    assert out.as_text == f"moved\n[working directory is now {env.cwd}]"
    assert (await run(env, "pwd")).as_text == str(env.cwd)
    await run(env, "cd ..; exit 1")  # the directory sticks even when the command fails
    assert env.cwd == (env.project_root / "sub").resolve()


async def test_a_deleted_working_directory_falls_back_to_the_project(env: ToolEnv) -> None:
    gone = env.project_root / "gone"
    gone.mkdir()
    env.cwd = gone
    gone.rmdir()
    out = await run(env, "pwd")
    assert out.as_text.splitlines() == [
        str(env.project_root),
        f"[the working directory {gone} no longer exists; ran in {env.project_root}]",
    ]
    assert env.cwd == env.project_root


async def test_stdin_is_empty(env: ToolEnv) -> None:
    out = await run(env, "cat; read -r line || echo no-input")
    assert out.as_text == "no-input"


async def test_long_output_is_cut_in_the_middle(env: ToolEnv) -> None:
    out = await run(env, "for i in $(seq 1 20000); do echo line-$i; done")
    text = out.as_text
    assert len(text) < 30_400
    assert text.startswith("line-1\nline-2\n")
    assert text.endswith("line-19999\nline-20000")
    total = sum(len(f"line-{i}\n") for i in range(1, 20001))
    cut = total - 30_000
    assert f"[… {cut:,} characters (" in text
    assert f"cut from the middle of the output: {total:,} characters in all." in text
    assert out.summary == "exit 0 · 20,000 lines"


async def test_timeout_kills_the_whole_process_group(env: ToolEnv) -> None:
    pidfile = env.cwd / "pid"
    out = await run(env, f"sleep 300 & echo $! > {pidfile}; echo started; wait", timeout=500)
    assert out.is_error
    assert out.as_text.startswith("started\n[Command timed out after 0.5 s and was killed")
    assert out.summary == "timed out after 0.5 s"
    pid = int(pidfile.read_text())
    await wait_until(lambda: is_gone(pid))


async def test_timeout_escalates_to_sigkill(env: ToolEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exec_process, "KILL_GRACE_S", 0.2)
    pidfile = env.cwd / "pid"
    command = f"trap '' TERM; echo $$ > {pidfile}; while :; do sleep 0.05; done"
    out = await run(env, command, timeout=300)
    assert "timed out" in out.as_text
    pid = int(pidfile.read_text())
    await wait_until(lambda: is_gone(pid))


async def test_cancellation_kills_the_whole_process_group(env: ToolEnv) -> None:
    pidfile = env.cwd / "pid"
    ctx = CallContext(env=env, call_id="b")
    task = asyncio.ensure_future(
        Bash().call({"command": f"sleep 300 & echo $! > {pidfile}; wait"}, ctx)
    )
    await wait_until(lambda: pidfile.exists() and pidfile.read_text().strip())
    pid = int(pidfile.read_text())
    assert not is_gone(pid)
    task.cancel()
    with hang_guard(), pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: is_gone(pid))


async def test_background_jobs_do_not_hang_the_call(
    env: ToolEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bash_module, "DRAIN_S", 0.1)
    pidfile = env.cwd / "pid"
    out = await run(env, f"sleep 300 & echo $! > {pidfile}; echo started")
    try:
        assert out.as_text.startswith("started\n[a background process still holds the output")
        assert not out.is_error
    finally:
        os.kill(int(pidfile.read_text()), 9)


async def test_killed_by_a_signal(env: ToolEnv) -> None:
    out = await run(env, "kill -TERM $$")
    assert out.is_error
    assert out.as_text.endswith("[killed by signal SIGTERM]")


async def test_timeout_validation(env: ToolEnv) -> None:
    out = await Bash().call(
        {"command": "ls", "timeout": 900_000}, CallContext(env=env, call_id="b")
    )
    assert out.is_error
    assert out.as_text == (
        "Invalid input for Bash:\n- timeout: Input should be less than or equal to 600000"
    )


async def test_pagers_are_disabled(env: ToolEnv) -> None:
    out = await run(env, 'echo "$PAGER $GIT_PAGER"')
    assert out.as_text == "cat cat"


@pytest.mark.parametrize(
    "line",
    ["cd .. && echo x > escaped", "cd ../.. && echo x > escaped", "echo x > ../escaped"],
)
async def test_cd_dotdot_goes_where_the_permission_check_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    """Differential: caliban started through a symlink has that path as its PWD, and bash
    took it for where it was: `cd ..` went up from the symlink while the check had read
    the line from the directory itself. The file bash writes is the one that was checked."""
    real = tmp_path / "real" / "proj"
    real.mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "link").symlink_to(real)
    monkeypatch.setenv("PWD", str(tmp_path / "other" / "link"))
    env = ToolEnv(cwd=real, project_root=real)  # Path.cwd(): the physical directory
    checked = command_effects(analyze(line), env.cwd).writes
    await run(env, line)
    written = _named(tmp_path, "escaped")
    assert written and set(written) <= set(checked), (written, checked)


def _named(top: Path, name: str) -> list[Path]:
    return sorted(top.rglob(name))


def test_schema_and_subject() -> None:
    schema = Bash().spec.input_schema
    assert schema["required"] == ["command"]
    [timeout, _null] = schema["properties"]["timeout"]["anyOf"]
    assert timeout == {"type": "integer", "minimum": 1, "maximum": 600_000}
    assert Bash().bind({"command": "  git status \n"}).subject == "git status"
    assert shutil.which("bash") is not None


# ---------------------------------------------------------------------------- background


async def test_run_in_background_then_task_output_and_task_stop(env: ToolEnv) -> None:
    from caliban.events import BackgroundTaskUpdate
    from caliban.tools.tasks import BackgroundTasks, TaskOutput, TaskStop

    tasks = BackgroundTasks()
    events: list[Any] = []
    ctx = CallContext(env=env, call_id="toolu_bg", emit=events.append)
    bash, output, stop = Bash(tasks), TaskOutput(tasks), TaskStop(tasks)
    try:
        with hang_guard():
            started = await bash.call(
                {"command": "echo bg-done", "run_in_background": True, "description": "Echo"}, ctx
            )
            task_id = started.data["backgroundTaskId"]
            assert started.as_text.startswith(f"Command running in background with ID: {task_id}.")
            done = await output.call({"task_id": task_id}, ctx)
            assert done.data["retrieval_status"] == "success"
            assert done.data["task"]["exitCode"] == 0
            assert "<status>completed</status>" in done.as_text
            assert "<output>\nbg-done\n</output>" in done.as_text

            long = await bash.call({"command": "sleep 30", "run_in_background": True}, ctx)
            long_id = long.data["backgroundTaskId"]
            waiting = await output.call({"task_id": long_id, "block": False}, ctx)
            assert waiting.data["retrieval_status"] == "not_ready"
            stopped = await stop.call({"task_id": long_id}, ctx)
            assert stopped.data["message"] == f"Successfully stopped task: {long_id} (sleep 30)"
            assert tasks.get(long_id).status == "killed"  # type: ignore[union-attr]
            missing = await stop.call({"task_id": "nosuchtask"}, ctx)
            assert missing.is_error and missing.as_text == "No task found with ID: nosuchtask"
    finally:
        await tasks.aclose()
    statuses = [(e.task_id, e.status) for e in events if isinstance(e, BackgroundTaskUpdate)]
    assert statuses == [
        (task_id, "running"),
        (task_id, "completed"),
        (long_id, "running"),
        (long_id, "killed"),
    ]


async def test_closing_the_registry_stops_running_tasks(env: ToolEnv) -> None:
    from caliban.tools.tasks import BackgroundTasks

    tasks = BackgroundTasks()
    started = await Bash(tasks).call(
        {"command": "sleep 60", "run_in_background": True}, CallContext(env=env, call_id="b")
    )
    task = tasks.get(started.data["backgroundTaskId"])
    assert task is not None
    await tasks.aclose()
    await wait_until(lambda: is_gone(task.process.pid))


async def test_task_stop_kills_children_that_ignore_sigterm(
    env: ToolEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from caliban.tools.tasks import BackgroundTasks, TaskStop

    monkeypatch.setattr(exec_process, "KILL_GRACE_S", 0.2)
    pidfile = env.cwd / "pid"
    # The shell dies of SIGTERM at once; the subshell it started ignores SIGTERM.
    command = f"(trap '' TERM; echo $BASHPID > {pidfile}; while :; do sleep 0.05; done) & wait"
    tasks = BackgroundTasks()
    ctx = CallContext(env=env, call_id="b")
    try:
        started = await Bash(tasks).call({"command": command, "run_in_background": True}, ctx)
        await wait_until(lambda: pidfile.exists() and pidfile.read_text().strip())
        stopped = await TaskStop(tasks).call({"task_id": started.data["backgroundTaskId"]}, ctx)
        assert not stopped.is_error
        await wait_until(lambda: is_gone(int(pidfile.read_text())))
    finally:
        await tasks.aclose()


async def test_background_without_a_registry_is_refused(env: ToolEnv) -> None:
    out = await run(env, "sleep 1", run_in_background=True)
    assert out.is_error and "not available" in out.as_text
