"""Helpers for the sandbox tests: the backends that work here, a local HTTP server, and an
unprivileged user to run the launcher and bubblewrap as."""

from __future__ import annotations

import grp
import http.server
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hang import HANG_S

from caliban.exec import Command, RunResult, Sandbox, SandboxProfile, run

TEST_USER = "caliban-sbx-test"


@pytest.fixture(autouse=True)
def launch_server_stopped() -> Iterator[None]:
    """caliban keeps one launch server a process: one a test started stops with the test
    (import this fixture into a test module that runs sandboxed commands)."""
    from caliban.exec.launch_server import LaunchServer

    yield
    LaunchServer.shared().close()


def backend(name: str) -> Sandbox:
    """A backend by name, or skip the test with the reason it cannot run here."""
    from caliban.sandbox.bubblewrap import BubblewrapSandbox
    from caliban.sandbox.landlocked import LandlockSandbox

    if not sys.platform.startswith("linux"):
        pytest.skip(f"{name} runs on Linux only")
    sandbox: Sandbox = BubblewrapSandbox() if name == "bubblewrap" else LandlockSandbox()
    availability = sandbox.available()
    if not availability.usable:
        pytest.skip(f"{name} is not usable here: {availability.detail}")
    return sandbox


def sh(
    sandbox: Sandbox, profile: SandboxProfile, script: str, cwd: Path, timeout: float = HANG_S
) -> RunResult:
    """Run ``sh -c script`` confined; every process of it is reaped by ``run``."""
    return run(
        Command(argv=("sh", "-c", script), cwd=cwd),
        timeout=timeout,
        profile=profile,
        sandbox=sandbox,
    )


def text(result: RunResult) -> str:
    return (result.stdout + result.stderr).decode(errors="replace")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the test server\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def http_server() -> Iterator[int]:
    """A tiny HTTP server on 127.0.0.1; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Unprivileged:
    """Runs argv as :data:`TEST_USER` (``setpriv``), with a copy of the launcher it can
    read and a Python it can run."""

    def __init__(self, uid: int, gid: int, python: str, launcher: Path) -> None:
        self.uid, self.gid, self.python, self.launcher = uid, gid, python, launcher

    def argv(self, *argv: str) -> tuple[str, ...]:
        return ("setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", *argv)

    def own(self, path: Path) -> Path:
        os.chown(path, self.uid, self.gid)
        return path

    def relaunch(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        """``argv`` of a wrapped command with caliban's launcher and Python replaced by the
        copies the user can run."""
        from caliban.exec import launch

        mine = os.path.abspath(launch.__file__)
        swapped = (
            self.python if a == sys.executable else str(self.launcher) if a == mine else a
            for a in argv
        )
        return self.argv(*swapped)


def unprivileged_user() -> Iterator[Unprivileged]:
    """The fixture body: an unprivileged user (created with ``useradd`` when caliban's tests
    run as root), or a skip saying why there is none."""
    if not sys.platform.startswith("linux") or shutil.which("setpriv") is None:
        pytest.skip("needs Linux and setpriv (util-linux)")
    if os.geteuid() != 0:
        pytest.skip("the tests already run unprivileged: the other tests cover it")
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode not in (0, 9):  # 9: made meanwhile by a parallel run
            pytest.skip(f"cannot create a test user: {made.stderr.strip()}")
        entry = pwd.getpwnam(TEST_USER)
    gid = grp.getgrgid(entry.pw_gid).gr_gid
    place = Path(tempfile.mkdtemp(prefix="caliban-sbx-launcher-"))
    try:
        place.chmod(0o755)
        package = place / "caliban"
        source = Path(__file__).resolve().parent.parent / "caliban"
        for name in ("__init__.py", "exec/launch.py", "sandbox/__init__.py",
                     "sandbox/landlock.py", "sandbox/seccomp.py"):  # fmt: skip
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / name, package / name)
        for path in [package, *package.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        python = _python_for(entry.pw_uid, gid)
        if python is None:
            pytest.skip(f"no Python that {TEST_USER} may run (caliban's is under a private home)")
        yield Unprivileged(entry.pw_uid, gid, python, package / "exec" / "launch.py")
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _python_for(uid: int, gid: int) -> str | None:
    # The system's first: a user namespace may not reach an interpreter under /root.
    for candidate in ("/usr/bin/python3", shutil.which("python3"), sys.executable):
        if candidate is None:
            continue
        probe = (
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            candidate,
            "-I",
            "-S",
            "-c",
            "import ctypes",
        )
        if run(Command(argv=probe), timeout=HANG_S).ok:
            return candidate
    return None
