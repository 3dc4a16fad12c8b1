"""The macOS Seatbelt profile caliban generates: its text is checked everywhere; it is run
only on macOS (skipped elsewhere with the reason)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hang import HANG_S

from caliban.exec import AllNetwork, Command, NoNetwork, ProxyNetwork, SandboxProfile, run
from caliban.sandbox.seatbelt import SANDBOX_EXEC, SeatbeltSandbox, profile_text


def _profile(tmp_path: Path, **changes: object) -> SandboxProfile:
    project = tmp_path / "proj"
    values: dict[str, object] = {
        "writable": (project, tmp_path / "tmp"),
        "read_only": (project / ".git" / "config", project / ".mcp.json"),
        "unreadable": (tmp_path / "home" / ".ssh",),
    }
    values.update(changes)
    return SandboxProfile(**values)  # type: ignore[arg-type]


def _block(text: str, head: str) -> str:
    start = text.index(f"({head}\n")
    end = text.find("\n(", start)
    return text[start : end if end != -1 else len(text)]


def test_profile_denies_by_default_and_allows_reading(tmp_path: Path) -> None:
    text = profile_text(_profile(tmp_path))
    assert text.startswith("(version 1)\n(deny default)\n")
    assert "(allow file-read*)\n" in text
    assert "(allow process-exec)" in text and "(allow signal (target same-sandbox))" in text


def test_writable_roots_then_protected_paths_are_denied_after_them(tmp_path: Path) -> None:
    text = profile_text(_profile(tmp_path))
    real = tmp_path.resolve()
    writes = _block(text, "allow file-write*")
    assert f'(subpath "{real}/proj")' in writes and f'(subpath "{real}/tmp")' in writes
    protected = _block(text, "deny file-write*")
    # Named whether or not they exist yet: .mcp.json does not.
    assert f'(subpath "{real}/proj/.git/config")' in protected
    assert f'(subpath "{real}/proj/.mcp.json")' in protected
    # Later rules win in Seatbelt: the denial must follow the allowance.
    assert text.index("(deny file-write*") > text.index("(allow file-write*")
    moves = _block(text, "deny file-write-unlink")
    assert f'(literal "{real}/proj/.git")' in moves and f'(literal "{real}/proj")' in moves
    assert '(literal "/")' not in moves


def test_unreadable_paths_follow_the_read_allowance(tmp_path: Path) -> None:
    text = profile_text(_profile(tmp_path))
    hidden = _block(text, "deny file-read*")
    assert f'(subpath "{tmp_path.resolve()}/home/.ssh")' in hidden
    assert text.index("(deny file-read*") > text.index("(allow file-read*)")


@pytest.mark.parametrize(
    ("network", "expected", "absent"),
    [
        (NoNetwork(), None, "network"),
        (ProxyNetwork(port=43123), '(allow network-outbound (remote ip "localhost:43123"))', None),
        (AllNetwork(), "(allow network*)", None),
    ],
)
def test_network(tmp_path: Path, network: object, expected: str | None, absent: str | None) -> None:
    text = profile_text(_profile(tmp_path, network=network))
    if expected:
        assert expected in text
    if absent:
        assert f"(allow {absent}" not in text


def test_unix_sockets_only_those_named(tmp_path: Path) -> None:
    sock = tmp_path / "agent.sock"
    text = profile_text(_profile(tmp_path, unix_sockets=(sock,)))
    assert f'(remote unix-socket (path-literal "{sock.resolve()}"))' in text
    assert '(subpath "/")))' not in text
    every = profile_text(_profile(tmp_path, all_unix_sockets=True))
    assert '(allow network* (remote unix-socket (subpath "/")))' in every


def test_paths_are_quoted(tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird\\dir'
    text = profile_text(_profile(tmp_path, writable=(odd,)))
    assert (
        '(subpath "' + str(odd.resolve()).replace("\\", "\\\\").replace('"', '\\"') + '")' in text
    )
    assert text.count("(") == text.count(")")


def test_wrap_puts_the_profile_before_the_command(tmp_path: Path) -> None:
    wrapped = SeatbeltSandbox().wrap(
        Command(argv=("git", "status"), cwd=tmp_path),
        _profile(tmp_path, network=ProxyNetwork(port=9)),
    )
    assert wrapped.argv[:2] == (SANDBOX_EXEC, "-p")
    assert wrapped.argv[3:] == ("--", "git", "status")
    assert wrapped.env is not None and wrapped.env["HTTPS_PROXY"] == "http://127.0.0.1:9"


def test_unavailable_off_macos() -> None:
    if sys.platform == "darwin":
        pytest.skip("on macOS it is available")
    availability = SeatbeltSandbox().available()
    assert not availability.usable and "macOS" in availability.detail


@pytest.mark.skipif(sys.platform != "darwin", reason="sandbox-exec exists only on macOS")
def test_runs_on_macos(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    result = run(
        Command(argv=("sh", "-c", f"echo ok > in.txt; echo no > {tmp_path}/out.txt"), cwd=project),
        timeout=HANG_S,
        profile=SandboxProfile(writable=(project,)),
        sandbox=SeatbeltSandbox(),
    )
    assert (project / "in.txt").exists()
    assert not (tmp_path / "out.txt").exists(), result
