"""OAuth for remote MCP servers, end to end against the SDK's own authorization server
(``tests/mcp_servers/oauth_server.py``): login through a stand-in browser that follows the
redirects, the token stored for the user only, the tool called with it, a refresh after
expiry, logout; and each way a login can go wrong ends in a clear message, never a hang."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import anyio
import httpx2
import pytest
from hang import HANG_S, hang_guard
from mcp_servers.listening import free_port, listening
from typer.testing import CliRunner

from caliban.cli.app import app
from caliban.config.settings import user_config_path
from caliban.mcp import auth
from caliban.mcp.auth import LoginFailed, TokenStore, login, logout
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig, load_mcp_config

pytestmark = pytest.mark.anyio
SERVERS = Path(__file__).parent / "mcp_servers"
BROWSER = SERVERS / "browser.py"


def _serve(tmp_path: Path, *args: str) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "issued.log"
    script = str(SERVERS / "oauth_server.py")
    env = {**os.environ, "OAUTH_SERVER_LOG": str(log)}
    with listening(lambda port: [script, str(port), *args], env=env) as port:
        yield f"http://127.0.0.1:{port}/mcp", log


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One server for the module (its start is most of a test's CPU): each test's user has
    a home of their own, so no test sees another's client or tokens."""
    yield from _serve(tmp_path_factory.mktemp("guarded"), "--expires", "3")


@pytest.fixture
def bad_metadata(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    yield from _serve(tmp_path, "--fault", "bad-metadata")


@pytest.fixture
def hanging_token(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    yield from _serve(tmp_path, "--fault", "hang-token")


def browse(url: str, *, tamper: Callable[[str], str] = lambda location: location) -> None:
    """The stand-in browser: follows the redirects from the authorization URL to caliban's
    callback (``tamper`` may change the last hop), in a thread as a real browser would."""

    def run() -> None:
        with httpx2.Client(timeout=10) as http:
            target = url
            for _ in range(10):
                if urlsplit(target).path == "/callback":
                    target = tamper(target)
                response = http.get(target)
                if not response.is_redirect:
                    return
                target = str(response.next_request.url) if response.next_request else ""

    threading.Thread(target=run, daemon=True).start()


def config(url: str, name: str = "guarded") -> ServerConfig:
    return ServerConfig(name=name, transport="http", url=url, startup_timeout=HANG_S)


@pytest.mark.slow
async def test_login_stores_tokens_for_the_user_only_and_the_session_uses_them(
    guarded: tuple[str, Path],
) -> None:
    url, issued = guarded
    lines: list[str] = []
    with hang_guard():
        tools = await login(config(url), open_url=browse, say=lines.append, timeout=HANG_S)
    assert tools == 1
    assert "log in to 'guarded'" in lines[0] and lines[1].strip().startswith("http://127.0.0.1")
    store = TokenStore(config(url))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    saved = json.loads(store.path.read_text())
    assert saved["tokens"]["access_token"] and saved["client"]["client_id"]

    # A session sends the stored token; once it is due (3 s tokens), it is refreshed first.
    issued_before = issued.read_text().split()
    async with McpManager([config(url)]) as manager:
        with hang_guard():
            [status] = await manager.wait_ready()
        assert status.state == "connected", status.error
        result = await manager.call_tool("guarded", "whoami", {})
        assert "authorized caller" in str(result)
        await anyio.sleep(3.5)
        result = await manager.call_tool("guarded", "whoami", {})
        assert "authorized caller" in str(result)
    assert "refresh" in issued.read_text().split()[len(issued_before) :]

    assert logout(config(url)) and not store.path.exists()
    assert not logout(config(url))


@pytest.mark.slow
async def test_a_session_without_login_says_how_to_log_in_at_once(
    guarded: tuple[str, Path],
) -> None:
    async with McpManager([config(url := guarded[0])]) as manager:
        with hang_guard():  # the login it needs, not the start-up limit (see the state)
            [status] = await manager.wait_ready()
        assert status.state == "failed" and status.needs_login
        assert status.error == "needs login: run `caliban mcp login guarded`"
        assert not TokenStore(config(url)).path.exists()  # nothing registered behind the back
        # What the REPL's /mcp login does: log in, then reconnect the server in the session.
        with hang_guard():
            await login(config(url), open_url=browse, say=lambda _: None, timeout=HANG_S)
            status = await manager.reconnect("guarded")
        assert status.state == "connected" and status.tool_count == 1


@pytest.mark.slow
async def test_a_callback_with_a_wrong_state_ends_the_login(guarded: tuple[str, Path]) -> None:
    def forged(location: str) -> str:
        parts = urlsplit(location)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        query["state"] = "forged"
        return urlunsplit(parts._replace(query=urlencode(query)))

    with hang_guard(), pytest.raises(LoginFailed) as failed:
        await login(
            config(guarded[0]),
            open_url=lambda u: browse(u, tamper=forged),
            say=lambda _: None,
            timeout=HANG_S,
        )
    assert "`state` that does not belong to this login" in str(failed.value)
    assert "caliban mcp login guarded" in str(failed.value)


@pytest.mark.slow
async def test_malformed_metadata_is_a_clear_message(bad_metadata: tuple[str, Path]) -> None:
    with hang_guard(), pytest.raises(LoginFailed) as failed:
        await login(config(bad_metadata[0]), open_url=browse, say=lambda _: None, timeout=HANG_S)
    message = str(failed.value)
    assert message.startswith("OAuth failed: the OAuth metadata at http://127.0.0.1:")
    assert "/.well-known/oauth-protected-resource/mcp is malformed (resource: " in message
    assert "without it: Registration failed: 404" in message


@pytest.mark.slow
async def test_a_hanging_token_endpoint_is_bounded(hanging_token: tuple[str, Path]) -> None:
    started = time.monotonic()
    with hang_guard(), pytest.raises(LoginFailed) as failed:
        await login(
            config(hanging_token[0]),
            open_url=browse,
            say=lambda _: None,
            timeout=HANG_S,
            request_timeout=20,  # the other requests answer within it on a busy machine
        )
    assert "did not answer within 20s" in str(failed.value) and "/token" in str(failed.value)
    assert time.monotonic() - started < HANG_S


@pytest.mark.slow
async def test_no_browser_answer_is_bounded(guarded: tuple[str, Path]) -> None:
    with hang_guard(), pytest.raises(LoginFailed) as failed:
        await login(config(guarded[0]), open_url=lambda _: None, say=lambda _: None, timeout=1)
    assert "no answer from the browser within 1s" in str(failed.value)


@pytest.mark.slow
async def test_a_configured_client_id_and_callback_port_replace_registration(
    tmp_path: Path,
) -> None:
    """Claude Code's ``oauth: {clientId, callbackPort}``: against an authorization server
    that registers nobody, and knows caliban only by that id and that redirect URI."""
    callback = free_port()
    redirect = f"http://127.0.0.1:{callback}/callback"
    preregistered = ("--client", "caliban-test", "--redirect", redirect, "--no-registration")
    (project := tmp_path / "p").mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"guarded": {}}}))
    for url, issued in _serve(tmp_path, *preregistered):
        entry = {"type": "http", "url": url, "oauth": {"clientId": "caliban-test"}}
        entry["oauth"]["callbackPort"] = callback
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"guarded": entry}}))
        [server] = load_mcp_config(project, trusted=True).servers
        assert (server.oauth_client_id, server.oauth_callback_port) == ("caliban-test", callback)
        with hang_guard():
            assert await login(server, open_url=browse, say=lambda _: None, timeout=HANG_S) == 1
        assert "register" not in issued.read_text().split()
        assert "token" in issued.read_text().split()
        async with McpManager([server]) as manager:
            with hang_guard():
                [status] = await manager.wait_ready()
            assert status.state == "connected", status.error
        # Without the configured id, the same server cannot be logged in to.
        unknown = dataclasses.replace(server, oauth_client_id=None, name="other")
        with hang_guard(), pytest.raises(LoginFailed):
            await login(unknown, open_url=browse, say=lambda _: None, timeout=5)
        # The fixed port is the registration's: taken, the login says so (no other port).
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
            taken.bind(("127.0.0.1", callback))
            taken.listen()
            with pytest.raises(LoginFailed, match=f"127.0.0.1:{callback}"):
                await login(server, open_url=browse, say=lambda _: None, timeout=5)


@pytest.mark.slow
async def test_a_confidential_client_s_secret_is_kept_with_the_tokens(tmp_path: Path) -> None:
    """``caliban mcp add … --client-id ID --client-secret`` (the secret from
    ``MCP_CLIENT_SECRET``, as Claude Code reads it): kept in the user's 0600 token file,
    never in the configuration; sent to the token endpoint; kept across a logout."""
    callback = free_port()
    redirect = f"http://127.0.0.1:{callback}/callback"
    client = ("--client", "caliban-test", "--redirect", redirect, "--secret", "s3cret")
    (project := tmp_path / "p").mkdir()
    (project / ".git").mkdir()
    for url, issued in _serve(tmp_path, *client, "--no-registration"):
        flags = ["--client-id", "caliban-test", "--callback-port", str(callback)]
        added = caliban(
            project,
            *("mcp", "add", "--transport", "http", "guarded", url, *flags, "--client-secret"),
            env={"MCP_CLIENT_SECRET": "s3cret"},
        )
        assert added.returncode == 0, added.stderr
        [server] = load_mcp_config(project, trusted=True).servers
        assert "s3cret" not in json.dumps(server.raw)
        store = TokenStore(server)
        assert store.client_secret() == "s3cret"
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        with hang_guard():
            assert await login(server, open_url=browse, say=lambda _: None, timeout=HANG_S) == 1
        assert issued.read_text().split() == ["token"]
        assert logout(server) and store.client_secret() == "s3cret" and not store.has_tokens()
        store.set_client_secret("wrong")
        with hang_guard(), pytest.raises(LoginFailed):
            await login(server, open_url=browse, say=lambda _: None, timeout=30)


def test_the_token_file_is_keyed_by_url_and_unreadable_files_are_empty(tmp_path: Path) -> None:
    a = TokenStore(config("http://127.0.0.1:1/mcp"))
    b = TokenStore(config("http://127.0.0.1:2/mcp"))
    assert a.path != b.path and a.path.parent == auth.auth_dir()
    a.path.parent.mkdir(parents=True)
    a.path.write_text("{not json")
    assert anyio.run(a.get_tokens) is None


# ---------------------------------------------------------------------------- the real executable


def caliban(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caliban", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )


@pytest.mark.slow
def test_login_list_call_and_logout_through_the_executable(
    guarded: tuple[str, Path], fake_model_server: Any, tmp_path: Path
) -> None:
    url, _ = guarded
    model = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_model_server.anthropic_base_url,
    }
    # in-process: `mcp add` through the executable is test_claude_code_scripts_e2e's
    added = CliRunner().invoke(app, ["mcp", "add", "guarded", "--url", url, "--scope", "user"])
    assert added.exit_code == 0, added.stderr
    # The first request waits for the server, so its need of a login is reported.
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text("[tools]\nwait_for_mcp = true\n")

    # Headless without a login: one line, and the run goes on.
    fake_model_server.add({"text": "still here"})
    skipped = caliban(tmp_path, "-p", "hi", env=model)
    assert skipped.returncode == 0, skipped.stderr
    assert (
        "MCP server 'guarded' needs login: run `caliban mcp login guarded` (skipped)"
        in skipped.stderr.splitlines()[0]
    )
    assert skipped.stdout.strip() == "still here"
    listed = caliban(tmp_path, "mcp", "list")
    assert listed.stdout.splitlines()[1].split()[:4] == ["guarded", "http", "needs", "login"]

    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{BROWSER}" "$@"\n')
    browser.chmod(0o755)
    logged_in = caliban(tmp_path, "mcp", "login", "guarded", env={"BROWSER": str(browser)})
    assert logged_in.returncode == 0, logged_in.stderr
    assert "Logged in to 'guarded' (1 tools)" in logged_in.stderr
    assert "If it does not open, visit:" in logged_in.stderr

    fake_model_server.add(
        {"tool_calls": [{"name": "mcp__guarded__whoami", "arguments": {}}]}, {"text": "done"}
    )
    called = caliban(
        tmp_path, "-p", "who am I?", "--allowedTools", "mcp__guarded__whoami", env=model
    )
    assert called.returncode == 0, called.stderr
    assert "authorized caller" in json.dumps(fake_model_server.requests[-1].body["messages"])

    out = caliban(tmp_path, "mcp", "logout", "guarded")
    assert out.returncode == 0 and "Logged out of 'guarded'" in out.stderr
    assert not list((auth.auth_dir()).glob("guarded-*.json"))
