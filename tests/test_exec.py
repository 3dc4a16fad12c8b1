"""The one door for child processes: starting, stopping whole groups (also when cancelled
twice), the bounded synchronous run, commands that cannot start, and the sandbox seam.

Every test waits on what the processes say (a line on a pipe, an exit), never on a timer,
and checks in /proc that nothing it started is left running."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hang import HANG_S, hang_guard, until

from caliban.exec import (
    PIPE,
    AllNetwork,
    Child,
    Command,
    NoNetwork,
    NoSandbox,
    SandboxProfile,
    group_alive,
    run,
    spawn,
    stop_group,
)

pytestmark = pytest.mark.anyio

BASH = shutil.which("bash") or "/bin/bash"

STUBBORN = r"""
import os, signal, time
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)
signal.signal(signal.SIGTERM, lambda *_: print("term", flush=True))
print(child, flush=True)
while True:
    signal.pause()
"""
"""A leader that says "term" on SIGTERM and goes on, and a child (its pid printed first)
that ignores SIGTERM."""


def reaped(pid: int) -> bool:
    """Gone from the process table: exited and waited for."""
    return not Path(f"/proc/{pid}").exists()


def not_running(pid: int) -> bool:
    """Exited: gone, or a zombie (an orphan's zombie waits for init, not for us)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


async def start_stubborn() -> tuple[Child, int]:
    child = await spawn(Command(argv=(sys.executable, "-c", STUBBORN)), stdout=PIPE)
    assert child.stdout is not None
    with hang_guard():
        grandchild = int(await child.stdout.readline())
    assert group_alive(child.pid) and not not_running(grandchild)
    return child, grandchild


# ---------------------------------------------------------------------------- stop_group


async def test_a_group_whose_members_ignore_sigterm_is_killed_and_reaped() -> None:
    child, grandchild = await start_stubborn()
    with hang_guard():
        await stop_group(child, grace=0.2)
    assert child.returncode == -9  # the leader caught SIGTERM and stayed: SIGKILL
    assert reaped(child.pid) and not_running(grandchild)
    assert not group_alive(child.pid)
    child.close()


async def test_a_second_cancellation_during_stop_leaves_nothing_running() -> None:
    """Ctrl-C cancels a command, its stop begins (SIGTERM, a long grace), and Ctrl-C again
    cancels the stop itself: the group is killed before the cancellation goes on."""
    child, grandchild = await start_stubborn()
    assert child.stdout is not None
    waiting = asyncio.Event()

    async def command() -> None:
        try:
            waiting.set()
            await child.wait()
        except asyncio.CancelledError:
            await stop_group(child, grace=3600)
            raise

    task = asyncio.create_task(command())
    with hang_guard():
        await waiting.wait()
        task.cancel()  # the first Ctrl-C
        assert await child.stdout.readline() == b"term\n"  # stop_group is in its grace
        task.cancel()  # the second
        with pytest.raises(asyncio.CancelledError):
            await task
    assert reaped(child.pid) and not_running(grandchild)
    assert not group_alive(child.pid)
    child.close()


async def test_a_cancellation_while_the_process_starts_stops_its_whole_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM during a Bash call whose shell had started before asyncio finished starting
    it: asyncio's own clean-up killed the shell only, and the `sleep 600` it had started
    lived on. The start is let finish, then the whole group is stopped."""
    pid_file = tmp_path / "pid"
    loop = asyncio.get_running_loop()
    start = loop.subprocess_exec
    released = asyncio.Event()

    async def start_slowly(*args: object, **kwargs: object) -> object:
        started = await start(*args, **kwargs)  # type: ignore[arg-type]
        await released.wait()  # where a busy machine was when the signal came
        return started

    monkeypatch.setattr(loop, "subprocess_exec", start_slowly)
    command = Command(argv=(BASH, "-c", f"sleep 3600 & echo $! > {pid_file}; wait"))
    task = asyncio.create_task(spawn(command))
    with hang_guard():
        await until(lambda: pid_file.exists() and pid_file.read_text().strip())
        sleeper = int(pid_file.read_text())
        task.cancel()
        released.set()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not_running(sleeper)


async def test_wait_returns_when_the_leader_exits_though_a_child_holds_its_pipe() -> None:
    child = await spawn(Command(argv=(BASH, "-c", "sleep 3600 & echo $!")), stdout=PIPE)
    assert child.stdout is not None
    with hang_guard():
        sleeper = int(await child.stdout.readline())
        assert await child.wait() == 0
        assert group_alive(child.pid)  # the sleep is still in the group
        await stop_group(child)
    assert not_running(sleeper) and not group_alive(child.pid)
    child.close()


async def test_stopping_a_group_that_already_ended_returns_at_once() -> None:
    child = await spawn(Command(argv=("true",)))
    with hang_guard():
        await child.wait()
        started = time.monotonic()
        await stop_group(child, grace=3600)
    assert time.monotonic() - started < HANG_S and reaped(child.pid)  # not the grace


# ---------------------------------------------------------------------------- run


def test_an_entry_point_ends_with_a_start_in_flight() -> None:
    """``asyncio.run`` ending while a process starts cancels the start mid-way, and Python
    3.11's subprocess transport then waits for ever for pipes it never connected (a REPL
    that did not exit, once in a few hundred runs). :func:`run_main` lets the start finish
    first; each number of loop turns below hung plain ``asyncio.run`` for some value."""
    script = (
        "import asyncio\n"
        "from caliban.exec import PIPE, Command, run_main, spawn\n"
        "async def main(turns):\n"
        "    asyncio.ensure_future(spawn(Command(argv=('true',)), stdout=PIPE, stderr=PIPE))\n"
        "    for _ in range(turns):\n"
        "        await asyncio.sleep(0)\n"
        "    return turns\n"
        "print(sum(run_main(main(turns)) for turns in range(8)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_S
    )
    assert (done.returncode, done.stdout) == (0, "28\n"), done.stderr


def test_run_keeps_the_first_bytes_of_each_stream_up_to_the_cap() -> None:
    script = "import sys; sys.stdout.write('x' * 300_000); sys.stderr.write('e' * 10)"
    result = run(Command(argv=(sys.executable, "-c", script)), timeout=HANG_S, max_output=1000)
    assert result.ok and result.truncated
    assert result.stdout == b"x" * 1000 and result.stderr == b"e" * 10


def running_as(name: str) -> list[int]:
    """Live processes whose argv[0] is ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[0] == (
                name.encode()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if not not_running(pid)]


def test_run_kills_the_whole_group_on_timeout() -> None:
    name = f"caliban-test-sleeper-{os.getpid()}"
    script = f"(exec -a {name} sleep 3600) & echo $!; wait"
    started = time.monotonic()
    result = run(Command(argv=(BASH, "-c", script)), timeout=3)
    assert result.timed_out and not result.ok and result.returncode == -9
    assert time.monotonic() - started < HANG_S  # not the sleeper's hour
    assert running_as(name) == []
    if result.stdout:  # printed in time (not on a very busy machine)
        assert not_running(int(result.stdout))


def test_run_leaves_no_process_behind_in_its_group() -> None:
    result = run(Command(argv=(BASH, "-c", "sleep 3600 >/dev/null 2>&1 & echo $!")), timeout=HANG_S)
    assert result.ok and not result.timed_out
    assert not_running(int(result.stdout))


def test_run_passes_cwd_and_env(tmp_path: Path) -> None:
    command = Command(
        argv=("sh", "-c", "pwd; echo $GREETING"), cwd=tmp_path, env={"GREETING": "hi"}
    )
    assert run(command, timeout=HANG_S).stdout == f"{tmp_path}\nhi\n".encode()


# ---------------------------------------------------------------------------- cannot start


async def test_a_command_that_cannot_start_raises_oserror(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    cases = [
        (Command(argv=("caliban-no-such-program",)), FileNotFoundError),
        (Command(argv=(str(script),)), PermissionError),
        (Command(argv=("true",), cwd=tmp_path / "gone"), FileNotFoundError),
    ]
    for command, error in cases:
        with pytest.raises(error):
            await spawn(command)
        with pytest.raises(error):
            run(command, timeout=HANG_S)


# ---------------------------------------------------------------------------- sandbox seam


class Marking:
    """A stand-in backend: it starts the command under ``env`` with one more variable, so a
    test can see that what started is what the backend made of it."""

    name = "marking"

    def __init__(self) -> None:
        self.profiles: list[SandboxProfile] = []

    def available(self) -> NoSandbox:  # pragma: no cover - not asked here
        raise NotImplementedError

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        self.profiles.append(profile)
        return Command(argv=("env", "SANDBOXED=yes", *command.argv), cwd=command.cwd)


async def test_a_profile_starts_the_command_as_the_sandbox_wrapped_it() -> None:
    backend = Marking()
    profile = SandboxProfile(writable=(Path("/tmp"),))
    command = Command(argv=("sh", "-c", "echo ${SANDBOXED:-no}"))
    child = await spawn(command, stdout=PIPE, profile=profile, sandbox=backend)  # type: ignore[arg-type]
    assert child.stdout is not None
    with hang_guard():
        assert await child.stdout.read() == b"yes\n"
        await child.wait()
    assert child.command.argv[:2] == ("env", "SANDBOXED=yes") and backend.profiles == [profile]
    ran = run(command, timeout=HANG_S, profile=profile, sandbox=backend)  # type: ignore[arg-type]
    assert ran.stdout == b"yes\n"
    plain = await spawn(command, stdout=PIPE)
    assert plain.stdout is not None
    with hang_guard():
        assert await plain.stdout.read() == b"no\n"
        await plain.wait()


async def test_a_sandbox_without_a_profile_is_refused_not_run_unconfined() -> None:
    with pytest.raises(ValueError, match="profile"):
        await spawn(Command(argv=("true",)), sandbox=NoSandbox())
    with pytest.raises(ValueError, match="profile"):
        run(Command(argv=("true",)), timeout=HANG_S, sandbox=NoSandbox())


def test_no_sandbox_is_available_and_starts_the_command_as_given() -> None:
    command = Command(argv=("true",))
    assert NoSandbox().available().usable
    assert NoSandbox().wrap(command, SandboxProfile()) is command


def test_the_default_profile_grants_nothing_and_paths_must_be_absolute() -> None:
    profile = SandboxProfile()
    assert profile.writable == profile.unreadable == profile.unix_sockets == ()
    assert profile.network == NoNetwork()
    assert SandboxProfile(network=AllNetwork()).network != profile.network
    with pytest.raises(ValueError, match="absolute"):
        SandboxProfile(writable=(Path("project"),))


def test_a_command_is_a_frozen_value() -> None:
    env = {"A": "1"}
    command = Command(argv=("true",), env=env)
    env["A"] = "2"
    assert command.env == {"A": "1"}
    assert command.environment() == {"A": "1"} and command.environment() is not command.env
    with pytest.raises(TypeError):
        command.env["B"] = "3"  # type: ignore[index]
    with pytest.raises(ValueError):
        Command(argv=())
    assert os.environ.get("PATH") == Command(argv=("true",)).environment().get("PATH")
