"""The Linux sandbox backends, run for real: bubblewrap and Landlock+seccomp (each skipped
with the reason where it cannot run), the launcher, the seccomp filter, and both backends
as an unprivileged user. Every command goes through caliban.exec.run, which reaps its
whole process group."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from hang import HANG_S
from sandbox_helpers import (
    Unprivileged,
    backend,
    http_server,
    launch_server_stopped,  # noqa: F401  (an autouse fixture)
    sh,
    text,
    unprivileged_user,
)

from caliban.exec import (
    AllNetwork,
    Command,
    NoNetwork,
    ProxyNetwork,
    SandboxProfile,
    group_alive,
    launch,
    run,
    spawn,
    stop_group,
)
from caliban.sandbox import seccomp
from caliban.sandbox.proxy import DomainPolicy, DomainProxy

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

BACKENDS = ["bubblewrap", "landlock"]
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A project with a git directory, a folder beside it, and a secret folder."""
    project = tmp_path / "proj"
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE KEY\n")
    return {"project": project, "outside": outside, "secret": secret}


def _profile(place: dict[str, Path], **changes: object) -> SandboxProfile:
    project = place["project"]
    values: dict[str, object] = {
        "writable": (project,),
        "read_only": (project / ".git" / "config", project / ".git" / "hooks"),
        "unreadable": (place["secret"],),
        "network": NoNetwork(),
    }
    values.update(changes)
    return SandboxProfile(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", BACKENDS)
def test_writes_inside_the_project_only(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    project, outside = place["project"], place["outside"]
    script = f"echo in > made.txt && mkdir -p sub && echo deep > sub/f; echo out > {outside}/x"
    result = sh(sandbox, _profile(place), script, project)
    assert (project / "made.txt").read_text() == "in\n"
    assert (project / "sub" / "f").read_text() == "deep\n"
    assert not (outside / "x").exists()
    assert "Read-only file system" in text(result) or "Permission denied" in text(result)


@pytest.mark.parametrize("name", BACKENDS)
def test_tmp_is_not_writable_but_a_private_tmpdir_is(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    private = place["project"].parent / "private-tmp"
    private.mkdir()
    profile = _profile(place, writable=(place["project"], private))
    marker = f"/tmp/caliban-sandbox-test-{os.getpid()}-{name}"
    result = sh(sandbox, profile, f"echo x > {marker}; echo y > {private}/ok", place["project"])
    assert not os.path.exists(marker), text(result)
    assert (private / "ok").read_text() == "y\n"


@pytest.mark.parametrize("name", BACKENDS)
def test_unreadable_paths_cannot_be_read(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    result = sh(sandbox, _profile(place), f"cat {place['secret']}/id_ed25519", place["project"])
    assert result.returncode != 0
    assert "PRIVATE KEY" not in text(result)


def test_bubblewrap_keeps_protected_paths_read_only(place: dict[str, Path]) -> None:
    sandbox = backend("bubblewrap")
    project = place["project"]
    script = (
        "echo '[core] fsmonitor = touch pwned' >> .git/config; "
        "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit; "
        "ln .git/config cfg; mv .git/config x"
    )
    result = sh(sandbox, _profile(place), script, project)
    assert (project / ".git" / "config").read_text() == "[core]\n"
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert not (project / "cfg").exists()
    assert "Read-only file system" in text(result)
    assert "cross-device" in text(result)  # the hard link


def test_bubblewrap_protects_a_hard_link_made_earlier(place: dict[str, Path]) -> None:
    sandbox = backend("bubblewrap")
    project = place["project"]
    os.link(project / ".git" / "config", project / "cfg")  # made outside the sandbox
    result = sh(sandbox, _profile(place), "echo '[alias] x = !id' >> cfg", project)
    assert (project / ".git" / "config").read_text() == "[core]\n", text(result)


def _settled(folder: Path, expected: list[str]) -> list[str]:
    """The names in ``folder`` once they are ``expected`` (placeholders are removed by a
    thread after the command), or after a minute."""
    deadline = time.monotonic() + 60
    while (names := sorted(p.name for p in folder.iterdir())) != expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return names


def _without_protected_files(place: dict[str, Path]) -> SandboxProfile:
    project = place["project"]
    names = (".mcp.json", ".claude", ".caliban", ".git/config", ".git/commondir")
    return _profile(place, read_only=tuple(project / name for name in names))


@pytest.mark.parametrize(
    "script",
    [
        "echo x > .mcp.json",
        "mkdir -p .claude && echo {} > .claude/settings.json",
        "mkdir .caliban",
        "rmdir .mcp.json",  # the placeholder itself
        "ln -s elsewhere .claude",
    ],
)
def test_bubblewrap_keeps_missing_protected_paths_uncreatable(
    place: dict[str, Path], script: str
) -> None:
    sandbox = backend("bubblewrap")
    project = place["project"]
    before = sorted(p.name for p in project.iterdir())
    result = sh(sandbox, _without_protected_files(place), script, project)
    assert result.returncode != 0, text(result)
    assert _settled(project, before) == before  # nothing left behind


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_init_in_a_folder_that_is_not_a_repository_is_explained(tmp_path: Path) -> None:
    from caliban.sandbox.runtime import SandboxRuntime
    from caliban.sandbox.settings import SandboxConfig

    sandbox = backend("bubblewrap")
    project = tmp_path / "plain"
    project.mkdir()
    runtime = SandboxRuntime(
        SandboxConfig(mode="workspace-write"), project_root=project, backend=sandbox
    )
    try:
        result = sh(sandbox, runtime.profile(), "git init", project)
        assert result.returncode != 0
        assert not (project / ".git" / "HEAD").exists()
        said = runtime.explain(text(result), cwd=project)
    finally:
        runtime.close()
    assert said is not None and "git init in a folder that is not a repository" in said, said


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_bubblewrap_keeps_a_missing_commondir_uncreatable_and_git_working(
    tmp_path: Path,
) -> None:
    """git refuses a folder at .git/commondir: the placeholder there is a file naming the
    git directory itself, with which git works as before; it is gone afterwards."""
    sandbox = backend("bubblewrap")
    project = tmp_path / "repo"
    project.mkdir()
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
    run(Command(argv=(*git, "init", "-q"), cwd=project), timeout=HANG_S)
    run(
        Command(argv=(*git, "commit", "-q", "--allow-empty", "-m", "x"), cwd=project),
        timeout=HANG_S,
    )
    profile = SandboxProfile(writable=(project,), read_only=(project / ".git" / "commondir",))
    script = (
        "git status --short && git rev-parse --git-common-dir && echo status-ok; "
        "echo ../elsewhere > .git/commondir || echo refused; rm -f .git/commondir || echo kept"
    )
    result = sh(sandbox, profile, script, project)
    said = text(result)
    assert "status-ok" in said and "refused" in said and "kept" in said, said
    deadline = time.monotonic() + 60
    while (project / ".git" / "commondir").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # removed by a thread once the command has exited
    assert not (project / ".git" / "commondir").exists()
    status = run(Command(argv=("git", "status", "--short"), cwd=project), timeout=HANG_S)
    assert status.ok, status.stderr


def test_bubblewrap_placeholder_under_a_missing_git_dir(tmp_path: Path) -> None:
    sandbox = backend("bubblewrap")
    project = tmp_path / "plain"
    project.mkdir()
    profile = SandboxProfile(writable=(project,), read_only=(project / ".git" / "hooks",))
    result = sh(sandbox, profile, "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit", project)
    assert result.returncode != 0
    assert _settled(project, []) == []


def test_bubblewrap_never_removes_what_the_user_put_at_a_placeholder(
    place: dict[str, Path],
) -> None:
    import asyncio

    sandbox = backend("bubblewrap")
    project = place["project"]

    async def scenario() -> None:
        child = await spawn(
            Command(argv=("sleep", "300"), cwd=project),
            profile=_without_protected_files(place),
            sandbox=sandbox,
        )
        try:
            assert (project / ".claude").is_dir() and (project / ".mcp.json").is_dir()
            # Meanwhile, outside the sandbox, the user writes into one placeholder and
            # replaces another with a file of their own.
            (project / ".claude" / "settings.json").write_text("{}")
            (project / ".mcp.json").rmdir()
            (project / ".mcp.json").write_text('{"mcpServers": {}}')
        finally:
            await stop_group(child, grace=0.5)

    asyncio.run(scenario())
    kept = [".claude", ".git", ".mcp.json"]
    assert _settled(project, kept) == kept  # the untouched placeholder is gone
    assert (project / ".claude" / "settings.json").read_text() == "{}"
    assert (project / ".mcp.json").read_text() == '{"mcpServers": {}}'


@pytest.mark.parametrize("sessions", ["one session", "two sessions"])
def test_a_placeholder_stays_while_another_command_uses_it(
    place: dict[str, Path], sessions: str
) -> None:
    """Removing a mount point lifts the mounts on it in other namespaces: the first
    command's end must not free the second one to write .mcp.json."""
    import asyncio

    from caliban.sandbox.bubblewrap import BubblewrapSandbox

    first = backend("bubblewrap")
    second = first if sessions == "one session" else BubblewrapSandbox()
    project = place["project"]
    profile = _without_protected_files(place)
    wait_then_write = "while [ ! -e go ]; do sleep 0.01; done; echo x > .mcp.json"

    async def scenario() -> int:
        early = await spawn(Command(argv=("sleep", "300"), cwd=project), profile=profile,
                            sandbox=first)  # fmt: skip
        late = await spawn(
            Command(argv=("sh", "-c", wait_then_write), cwd=project),
            profile=profile,
            sandbox=second,
        )
        await stop_group(early, grace=0.5)
        (project / "go").touch()
        return await asyncio.wait_for(late.wait(), 60)

    assert asyncio.run(scenario()) != 0
    assert not (project / ".mcp.json").is_file()
    # The first session removes its placeholders once the second's command is over.
    assert _settled(project, [".git", "go"]) == [".git", "go"]


def test_a_placeholder_removed_from_outside_is_not_counted_against_its_successor(
    tmp_path: Path,
) -> None:
    from caliban.sandbox.bubblewrap import Placeholders

    placeholders, site = Placeholders(), tmp_path / ".mcp.json"
    release_first = placeholders.hold([site])
    site.rmdir()  # by the user, while the first command runs
    release_second = placeholders.hold([site])
    release_first()
    assert site.is_dir()  # still the second command's
    release_second()
    release_second()  # once only
    assert _settled(tmp_path, []) == []


def test_sites_are_looked_for_again_when_a_placeholder_on_the_way_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The previous command's ``.git`` placeholder is removed (by its thread) between
    finding the sites (``.git/config`` inside it) and making them: the next command looks
    again and holds ``.git`` instead of failing to start."""
    from caliban.sandbox import bubblewrap

    (tmp_path / ".git").mkdir()  # the previous command's placeholder, still there
    profile = SandboxProfile(writable=(tmp_path,), read_only=(tmp_path / ".git" / "config",))
    found = bubblewrap.placeholder_sites

    def stale_once(profile: SandboxProfile) -> list[Path]:
        sites = found(profile)
        if (tmp_path / ".git").exists():
            (tmp_path / ".git").rmdir()  # removed as the previous command ended
        return sites

    monkeypatch.setattr(bubblewrap, "placeholder_sites", stale_once)
    sites, release = bubblewrap.Placeholders().hold_for(profile)
    assert sites == [tmp_path / ".git"] and (tmp_path / ".git").is_dir()
    release()
    assert _settled(tmp_path, []) == []


def test_placeholders_are_released_when_the_command_cannot_start(place: dict[str, Path]) -> None:
    sandbox = backend("bubblewrap")
    project = place["project"]
    with pytest.raises(OSError):
        run(
            Command(argv=("true",), cwd=project / "no-such-folder"),
            timeout=60,
            profile=_without_protected_files(place),
            sandbox=sandbox,
        )
    assert _settled(project, [".git"]) == [".git"]


def test_landlock_says_what_it_does_not_enforce(place: dict[str, Path]) -> None:
    from caliban.sandbox.landlocked import LandlockSandbox

    notes = LandlockSandbox().limits(_profile(place, unreadable=(place["project"] / ".env",)))
    assert "not kept read-only" in notes[0] and ".git/config" in notes[0]
    assert "those missing may be created" in notes[0]
    assert "readable under Landlock" in notes[1]


@needs_curl
@pytest.mark.parametrize("name", BACKENDS)
def test_no_network_reaches_no_local_server(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    with http_server() as port:
        script = f"curl -s -m 5 http://127.0.0.1:{port}/ || echo unreachable"
        result = sh(sandbox, _profile(place), script, place["project"])
    assert "hello" not in text(result)
    assert "unreachable" in text(result)


@needs_curl
@pytest.mark.parametrize("name", BACKENDS)
def test_the_proxy_lets_allowed_domains_through_only(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    proxy = DomainProxy(DomainPolicy(allowed=("127.0.0.1",)).refusal)
    proxy.start()
    try:
        network = ProxyNetwork(port=proxy.port, serve=proxy.serve)
        mark = proxy.mark()
        with http_server() as port:
            script = (
                f"curl -s -m 10 http://127.0.0.1:{port}/; "
                f"curl -s -m 10 http://localhost:{port}/; "
                f"curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/ || echo direct-failed"
            )
            result = sh(sandbox, _profile(place, network=network), script, place["project"])
        said = text(result)
        assert said.count("hello from the test server") == 1, said
        assert "blocked by caliban's sandbox: localhost is not in" in said
        assert "direct-failed" in said
        assert proxy.blocked_since(mark) == ["localhost is not in the sandbox's allowed domains"]
    finally:
        proxy.close()


@needs_curl
@pytest.mark.parametrize("name", BACKENDS)
def test_all_network_is_unfiltered(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    with http_server() as port:
        script = f"curl -s -m 10 http://127.0.0.1:{port}/"
        result = sh(sandbox, _profile(place, network=AllNetwork()), script, place["project"])
    assert "hello from the test server" in text(result)


@pytest.mark.parametrize("name", BACKENDS)
def test_new_unix_sockets_are_refused(name: str, place: dict[str, Path]) -> None:
    sandbox = backend(name)
    code = (
        "import socket\n"
        "a, b = socket.socketpair(); print('pair ok')\n"
        "try:\n    socket.socket(socket.AF_UNIX)\n"
        "except OSError as e:\n    print('unix', e.strerror)\n"
    )
    argv = (sys.executable, "-I", "-c", code)
    for allowed in (False, True):
        profile = _profile(place, network=AllNetwork(), all_unix_sockets=allowed)
        result = run(
            Command(argv=argv, cwd=place["project"]),
            timeout=HANG_S,
            profile=profile,
            sandbox=sandbox,
        )
        assert "pair ok" in text(result)
        assert ("unix Operation not permitted" in text(result)) is not allowed


@pytest.mark.parametrize("name", BACKENDS)
def test_stop_group_stops_a_sandboxed_command_and_its_children(
    name: str, place: dict[str, Path]
) -> None:
    import asyncio

    sandbox = backend(name)

    async def scenario() -> int:
        child = await spawn(
            Command(argv=("sh", "-c", "trap '' TERM; sleep 300 & sleep 300"), cwd=place["project"]),
            profile=_profile(place),
            sandbox=sandbox,
        )
        await asyncio.sleep(0.2)
        await stop_group(child, grace=0.5)
        return child.pid

    pid = asyncio.run(scenario())
    assert not group_alive(pid)


def test_the_launcher_fails_closed(place: dict[str, Path]) -> None:
    prefix = launch.invocation()[:-1]  # without its "--"
    bad = run(Command(argv=(*prefix, "--net", "sideways", "--", "true")), timeout=HANG_S)
    assert bad.returncode == launch.EXIT_SETUP_FAILED
    assert bad.stderr.startswith(b"caliban sandbox: bad arguments")
    missing = run(Command(argv=(*launch.invocation(), "no-such-program-xyz")), timeout=HANG_S)
    assert missing.returncode == launch.EXIT_NOT_FOUND


# ----------------------------------------------------------------- the launch server


def _spawned(
    sandbox: object, profile: SandboxProfile, script: str, cwd: Path
) -> tuple[int, str, int]:
    """``sh -c script`` started through spawn (as Bash starts it: output into a file) and
    waited for: its exit code, its output, and the pid it ran as."""
    import asyncio

    async def scenario(output: IO[bytes]) -> tuple[int, int]:
        child = await spawn(
            Command(argv=("sh", "-c", script), cwd=cwd),
            stdout=output,
            stderr=output,
            profile=profile,
            sandbox=sandbox,  # type: ignore[arg-type]
        )
        code = await asyncio.wait_for(child.wait(), HANG_S)
        await stop_group(child, grace=0)
        child.close()
        return code, child.pid

    with open(cwd.parent / "out.txt", "wb") as output:
        code, pid = asyncio.run(scenario(output))
    return code, (cwd.parent / "out.txt").read_text(), pid


def test_landlock_commands_are_forked_by_the_launch_server(place: dict[str, Path]) -> None:
    from caliban.exec.launch_server import LaunchServer

    sandbox = backend("landlock")
    script = (
        f"echo parent $PPID; echo in > made.txt; "
        f"echo out > {place['outside']}/x; cat {place['secret']}/id_ed25519; exit 7"
    )
    code, said, pid = _spawned(sandbox, _profile(place), script, place["project"])
    assert code == 7, said
    assert f"parent {LaunchServer.shared().pid}" in said
    assert (place["project"] / "made.txt").exists()
    assert not (place["outside"] / "x").exists()
    assert "PRIVATE KEY" not in said
    assert not group_alive(pid)


@pytest.mark.parametrize("name", BACKENDS)
def test_a_sandboxed_command_gets_default_signals(name: str, place: dict[str, Path]) -> None:
    """Python ignores SIGPIPE; the launcher's command must not (``yes | head`` ends)."""
    code, said, _ = _spawned(backend(name), _profile(place), "yes | head -1", place["project"])
    assert code == 0 and said == "y\n", said


def _is_loader_file(target: str) -> bool:
    """A file the dynamic loader holds open for a moment while a program starts."""
    name = os.path.basename(target)
    return name == "ld.so.cache" or ".so" in name


def test_a_forked_command_holds_only_its_own_descriptors(place: dict[str, Path]) -> None:
    import asyncio

    sandbox = backend("landlock")

    async def scenario() -> list[str]:
        child = await spawn(
            Command(argv=("sleep", "300"), cwd=place["project"]),
            profile=_profile(place),
            sandbox=sandbox,
        )
        try:
            deadline = time.monotonic() + HANG_S
            # Until sleep has exec'd (and its dynamic loader has closed the libraries it
            # opens as it starts) the descriptors are not yet the command's own.
            while not os.readlink(f"/proc/{child.pid}/exe").endswith("sleep") or any(
                _is_loader_file(os.readlink(f"/proc/{child.pid}/fd/{fd}"))
                for fd in os.listdir(f"/proc/{child.pid}/fd")
            ):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            return sorted(os.listdir(f"/proc/{child.pid}/fd"))
        finally:
            await stop_group(child, grace=0)
            child.close()

    assert asyncio.run(scenario()) == ["0", "1", "2"]  # nothing of caliban's leaks in


def test_the_launch_server_fails_closed(place: dict[str, Path]) -> None:
    """A launcher that cannot apply its options, under the server: nothing runs."""
    bad = Command(
        argv=(*launch.invocation()[:-1], "--net", "sideways", "--", "touch", "ran"),
        cwd=place["project"],
        by_launcher=True,
    )
    import asyncio

    async def scenario(output: IO[bytes]) -> int:
        child = await spawn(bad, stdout=output, stderr=output)
        return await asyncio.wait_for(child.wait(), HANG_S)

    with open(place["outside"] / "out.txt", "wb") as output:
        assert asyncio.run(scenario(output)) == launch.EXIT_SETUP_FAILED
    said = (place["outside"] / "out.txt").read_text()
    assert said.startswith("caliban sandbox: bad arguments"), said
    assert not (place["project"] / "ran").exists()


def test_without_the_launch_server_a_command_starts_a_launcher(
    place: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from caliban.exec.launch_server import LaunchServer

    sandbox = backend("landlock")

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("no server here")

    monkeypatch.setattr(LaunchServer, "launch", refuse)
    script = f"echo parent $PPID; echo in > made.txt; echo out > {place['outside']}/x"
    _, said, _ = _spawned(sandbox, _profile(place), script, place["project"])
    assert f"parent {os.getpid()}" in said  # a launcher of its own, exec'd into the shell
    assert (place["project"] / "made.txt").exists()
    assert not (place["outside"] / "x").exists()


def test_a_served_command_leads_its_own_group_once_its_pid_is_known(
    place: dict[str, Path],
) -> None:
    """caliban stops a command by its process group: a pid reported before the forked
    child's setsid named no group yet, and a stop at once (Ctrl-C, a lost server) missed it."""
    import asyncio

    sandbox = backend("landlock")

    async def scenario() -> list[tuple[int, int]]:
        groups = []
        for _ in range(10):
            child = await spawn(
                Command(argv=("sleep", "300"), cwd=place["project"]),
                profile=_profile(place),
                sandbox=sandbox,
            )
            groups.append((child.pid, os.getpgid(child.pid)))
            await stop_group(child, grace=0)
            child.close()
        return groups

    for pid, group in asyncio.run(scenario()):
        assert group == pid


def test_commands_of_a_lost_launch_server_are_killed(place: dict[str, Path]) -> None:
    import asyncio
    import signal

    from caliban.exec.launch_server import LaunchServer

    sandbox = backend("landlock")

    async def scenario() -> tuple[int, int]:
        child = await spawn(
            Command(argv=("sleep", "300"), cwd=place["project"]),
            profile=_profile(place),
            sandbox=sandbox,
        )
        server = LaunchServer.shared().pid
        assert server is not None
        os.kill(server, signal.SIGKILL)
        return await asyncio.wait_for(child.wait(), HANG_S), child.pid

    code, pid = asyncio.run(scenario())
    assert code == -signal.SIGKILL
    deadline = time.monotonic() + HANG_S
    while group_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not group_alive(pid)


@needs_curl
def test_bubblewrap_reaches_the_proxy_with_no_process_of_caliban_inside(
    place: dict[str, Path],
) -> None:
    sandbox = backend("bubblewrap")
    proxy = DomainProxy(DomainPolicy(allowed=("127.0.0.1",)).refusal)
    proxy.start()
    try:
        profile = _profile(place, network=ProxyNetwork(port=proxy.port, serve=proxy.serve))
        code = (
            "import os, socket\n"
            "names = {open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')[0] "
            "for p in os.listdir('/proc') if p.isdigit()}\n"
            "print('processes', sorted(n.decode() for n in names if n))\n"
            "try:\n    socket.socket(socket.AF_UNIX)\n"
            "except OSError as e:\n    print('unix', e.strerror)\n"
        )
        with http_server() as port:
            script = f'curl -s -m 10 http://127.0.0.1:{port}/; {sys.executable} -I -c "{code}"'
            result = sh(sandbox, profile, script, place["project"])
    finally:
        proxy.close()
    said = text(result)
    assert "hello from the test server" in said
    assert "unix Operation not permitted" in said
    processes = next(line for line in said.splitlines() if line.startswith("processes"))
    assert "launch.py" not in processes and processes.count("python") == 1, processes


def test_bubblewrap_does_not_start_a_command_that_cannot_reach_the_proxy(
    place: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import concurrent.futures

    from caliban.exec.launch_server import LaunchServer

    sandbox = backend("bubblewrap")

    def broken(self: object, pid: int, port: int) -> concurrent.futures.Future[object]:
        failed: concurrent.futures.Future[object] = concurrent.futures.Future()
        failed.set_exception(OSError("setns: Operation not permitted"))
        return failed

    monkeypatch.setattr(LaunchServer, "listen_in", broken)
    profile = _profile(place, network=ProxyNetwork(port=9, serve=lambda listener: lambda: None))
    with pytest.raises(OSError, match="cannot reach its proxy"):
        _spawned(sandbox, profile, "touch ran", place["project"])
    assert not (place["project"] / "ran").exists()


def test_seccomp_program_shape() -> None:
    for machine in ("x86_64", "aarch64"):
        for inet in ("all", "tcp", "none"):
            code = seccomp.program(inet=inet, machine=machine)  # type: ignore[arg-type]
            assert len(code) % 8 == 0 and 8 < len(code) < 8 * 64
    with pytest.raises(ValueError, match="no seccomp filter"):
        seccomp.program(machine="riscv64")


@pytest.mark.parametrize(
    ("inet", "expected"),
    [
        ("all", "unix:denied tcp:ok udp:ok"),
        ("tcp", "unix:denied tcp:ok udp:denied"),
        ("none", "unix:denied tcp:denied udp:denied"),
    ],
)
def test_seccomp_filter_in_a_child(inet: str, expected: str) -> None:
    if not seccomp.supported():
        pytest.skip(f"no filter for {os.uname().machine}")
    code = (
        "import socket, sys\n"
        "from caliban.sandbox import seccomp\n"
        f"seccomp.install(seccomp.program(inet={inet!r}))\n"
        "def t(*a):\n"
        "    try:\n        socket.socket(*a).close(); return 'ok'\n"
        "    except OSError:\n        return 'denied'\n"
        "print(f'unix:{t(socket.AF_UNIX)} tcp:{t(socket.AF_INET)} "
        "udp:{t(socket.AF_INET, socket.SOCK_DGRAM)}')\n"
    )
    result = run(Command(argv=(sys.executable, "-c", code)), timeout=HANG_S)
    assert result.stdout.decode().strip() == expected, result.stderr


# ---------------------------------------------------------------------------- unprivileged


@pytest.fixture(scope="module")
def user() -> Iterator[Unprivileged]:
    yield from unprivileged_user()


@pytest.fixture
def user_tmp() -> Iterator[Path]:
    """A folder the test user can reach (pytest's tmp_path is private to root)."""
    place = Path(tempfile.mkdtemp(prefix="caliban-sbx-user-"))
    place.chmod(0o755)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def _user_place(user: Unprivileged, tmp_path: Path) -> dict[str, Path]:
    project = tmp_path / "proj"
    project.mkdir()
    user.own(project)
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("[core]\n")
    for path in (project / ".git", project / ".git" / "config"):
        user.own(path)
    outside = tmp_path / "outside"
    outside.mkdir()
    user.own(outside)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("PRIVATE KEY\n")
    for path in (secret, secret / "key"):
        user.own(path)
    return {"project": project, "outside": outside, "secret": secret}


def test_landlock_without_root(user: Unprivileged, user_tmp: Path) -> None:
    from caliban.sandbox import landlock

    if landlock.abi() < 4:
        pytest.skip(f"Landlock ABI {landlock.abi()} (needs 4)")
    place = _user_place(user, user_tmp)
    script = (
        f"id -u; echo in > made.txt; echo out > {place['outside']}/x; "
        f"cat {place['secret']}/key || echo secret-hidden"
    )
    argv = user.argv(
        user.python, "-I", "-S", str(user.launcher), "--landlock",
        "--write", str(place["project"]), "--hide", str(place["secret"]), "--net", "none",
        "--", "sh", "-c", script,
    )  # fmt: skip
    result = run(Command(argv=argv, cwd=place["project"]), timeout=HANG_S)
    said = text(result)
    assert said.splitlines()[0] == str(user.uid)
    assert (place["project"] / "made.txt").exists()
    assert not (place["outside"] / "x").exists()
    assert "secret-hidden" in said and "PRIVATE KEY" not in said


def test_bubblewrap_without_root(user: Unprivileged, user_tmp: Path) -> None:
    from caliban.sandbox.bubblewrap import BubblewrapSandbox

    sandbox = BubblewrapSandbox()
    if sandbox.executable is None:
        pytest.skip("bwrap is not installed")
    place = _user_place(user, user_tmp)
    profile = SandboxProfile(
        writable=(place["project"],),
        read_only=(place["project"] / ".git" / "config",),
        unreadable=(place["secret"],),
    )
    script = (
        f"id -u; echo in > made.txt; echo out > {place['outside']}/x; "
        f"echo x >> .git/config; cat {place['secret']}/key || echo secret-hidden"
    )
    wrapped = sandbox.wrap(Command(argv=("sh", "-c", script), cwd=place["project"]), profile)
    as_user = Command(
        argv=user.relaunch(wrapped.argv),
        cwd=place["project"],
        pass_fds=wrapped.pass_fds,  # the seccomp filter, opened by root
        on_exit=wrapped.on_exit,
    )
    result = run(as_user, timeout=HANG_S)
    said = text(result)
    if "setting up uid map" in said or "No permissions to creat" in said:
        pytest.skip(f"unprivileged user namespaces are not allowed here: {said.strip()}")
    assert said.splitlines()[0] == str(user.uid), said
    assert (place["project"] / "made.txt").exists()
    assert not (place["outside"] / "x").exists()
    assert (place["project"] / ".git" / "config").read_text() == "[core]\n"
    assert "secret-hidden" in said and "PRIVATE KEY" not in said


@needs_curl
def test_bubblewrap_reaches_the_proxy_without_root(
    user: Unprivileged, user_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap as a user makes a user namespace of its own: the launch server, run as
    that user too, joins it to make the proxy's socket in the network namespace."""
    from caliban.exec.launch_server import LaunchServer
    from caliban.sandbox.bubblewrap import BubblewrapSandbox

    sandbox = BubblewrapSandbox()
    if sandbox.executable is None:
        pytest.skip("bwrap is not installed")
    server = LaunchServer(program=user.argv(user.python, "-I", "-S", str(user.launcher)))
    monkeypatch.setattr(LaunchServer, "shared", classmethod(lambda cls: server))
    place = _user_place(user, user_tmp)
    proxy = DomainProxy(DomainPolicy(allowed=("127.0.0.1",)).refusal)
    proxy.start()
    try:
        profile = SandboxProfile(
            writable=(place["project"],),
            network=ProxyNetwork(port=proxy.port, serve=proxy.serve),
        )
        with http_server() as port:
            script = f"id -u; curl -s -m 10 http://127.0.0.1:{port}/"
            wrapped = sandbox.wrap(
                Command(argv=("sh", "-c", script), cwd=place["project"]), profile
            )
            as_user = Command(
                argv=user.relaunch(wrapped.argv),
                cwd=place["project"],
                env=wrapped.env,
                pass_fds=wrapped.pass_fds,
                started=wrapped.started,
                on_exit=wrapped.on_exit,
            )
            result = run(as_user, timeout=HANG_S)
    finally:
        server.close()
        proxy.close()
    said = text(result)
    if "setting up uid map" in said or "No permissions to creat" in said:
        pytest.skip(f"unprivileged user namespaces are not allowed here: {said.strip()}")
    assert said.splitlines()[0] == str(user.uid), said
    assert "hello from the test server" in said
