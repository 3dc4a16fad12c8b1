"""Shared fixtures. Every test runs with caliban's directories in a temporary place, with no
way to reach a non-loopback network address, and fails if a process it started outlives it."""

from __future__ import annotations

import compileall
import gc
import ipaddress
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import reaping

import caliban

EXIT_GRACE_S = 60.0
"""How long a process a test stopped but did not wait for may take to exit (a busy machine)."""


def pytest_configure(config: pytest.Config) -> None:
    reaping.become_subreaper()
    # pytest rewrites the asserts of every test module it imports (seconds of CPU for this
    # suite, in each pytest-xdist worker); with PYTHONDONTWRITEBYTECODE=1 (here and in CI) it
    # may not keep the result. Keep it, as compiled caliban is kept (pytest_sessionstart).
    sys.dont_write_bytecode = False


def _xdist_controller(config: pytest.Config) -> bool:
    """This process hands tests to pytest-xdist workers and runs none itself."""
    return config.pluginmanager.hasplugin("dsession")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than the machine has cores. An end-to-end test's worker
    idles while the process it started works or waits on a pseudo-terminal; the extra
    worker keeps the cores busy then (PYTEST_XDIST_AUTO_NUM_WORKERS still decides)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In pytest-xdist workers, the end-to-end tests (marked slow: seconds of CPU each) come
    first, the rest in their order, so the run ends on short tests and no worker is left
    with a long one while the others idle. Every worker collects the same order."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: its controller compiled caliban
    # Each caliban the end-to-end tests start would otherwise compile every module it imports
    # again (PYTHONDONTWRITEBYTECODE=1 here and in CI): compile them once, next to the source
    # as an installed caliban has them (compileall writes regardless of that variable; a
    # PYTHONPYCACHEPREFIX would hide the virtualenv's own compiled SDKs from the children).
    compileall.compile_dir(Path(caliban.__file__).parent, quiet=1)


@pytest.fixture(autouse=True)
def every_process_reaped() -> Iterator[None]:
    """Fail a test that leaves a process running (orphans included: see reaping.py)."""
    before = set(reaping.descendants())
    yield
    started = set(reaping.descendants()) - before
    left = reaping.wait_gone(reaping.running(started), EXIT_GRACE_S)
    if left:
        leaked = reaping.describe(left)
        reaping.kill_all(left)
        reaping.wait_gone(left, EXIT_GRACE_S)
    reaping.reap_zombies(keep=before)
    if left:
        pytest.fail(f"the test left {len(left)} process(es) running (now killed):\n{leaked}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _xdist_controller(session.config):
        return  # its children are the workers, which check their own
    left = reaping.running(reaping.descendants())
    if left:
        leaked = reaping.describe(left)
        reaping.kill_all(left)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nprocesses outlived the test session (now killed):\n{leaked}")


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def nothing_frozen() -> Iterator[None]:
    """A session's first prompt freezes the objects alive then (``gc.freeze``, for start-up's
    sake): thaw them after each test, so no test's garbage outlives it uncollected."""
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that opens a connection to a non-loopback address."""
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))


@pytest.fixture(autouse=True)
def isolated_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """caliban's user config, state, data and cache directories live in a temporary home."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("CALIBAN_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("CALIBAN_STATE_DIR", str(home / "state"))
    monkeypatch.setenv("CALIBAN_DATA_DIR", str(home / "data"))
    # Claude Code's user directory (~/.claude: settings, CLAUDE.md, agents) is read too.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    for var in ("ANTHROPIC_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CALIBAN_CACHE_DIR", str(home / "cache"))
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    # A loaded 2-core machine can take minutes to start a server; no test is about that limit
    # unless it sets its own startup_timeout (the hang tests do).
    monkeypatch.setenv("MCP_TIMEOUT", "600000")
    monkeypatch.delenv("MCP_TOOL_TIMEOUT", raising=False)
    # A terminal's size is the test's own (a pty's dimensions, a console's width), never the
    # suite's: GNU readline, once imported (the pytest-xdist controller does), exports
    # COLUMNS=80 and LINES=24 to every worker, and rich prefers COLUMNS to a pty's size.
    for var in ("COLUMNS", "LINES"):
        monkeypatch.delenv(var, raising=False)
    yield home


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary git-less project (it has ``.caliban/``) as the working directory."""
    root = tmp_path / "proj"
    (root / ".caliban").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def fake_model_server() -> Iterator[Any]:
    """A scripted fake Anthropic/OpenAI server on 127.0.0.1 (see tests/fake_model_server.py).

    Fails the test at teardown if a request arrived beyond the script."""
    from fake_model_server import FakeModelServer

    with FakeModelServer() as server:
        yield server
    assert not server.unexpected, f"unexpected extra requests: {server.unexpected}"
