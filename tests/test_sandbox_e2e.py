"""Issue 24 through the real ``caliban -p``, a scripted model (the fake server) running the
commands: what a sandboxed command may write, read and reach, the attacks that got past
the parser (issue 28) stopped by the sandbox with the parser allowing everything
(``bypassPermissions``: the sandbox is the only wall), escalation, excluded commands, and a
machine where no backend works. Runs with each backend that works here (bubblewrap,
Landlock), chosen with ``CALIBAN_SANDBOX_BACKEND``; each is skipped with the reason where
it cannot run. HOME is a temporary directory, so ``~/.ssh`` and ``~/.gitconfig`` are the
test's."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import CapturedRequest, FakeModelServer
from sandbox_helpers import (
    backend,
    http_server,
    launch_server_stopped,  # noqa: F401  (an autouse fixture)
)
from test_boundary_e2e import caliban, calls, results
from test_boundary_e2e import repo as git_repository  # noqa: F401 (a fixture: a git project)

from caliban.permissions.trust import trust

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux backends"),
]
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


@pytest.fixture(params=["bubblewrap", "landlock"])
def box(request: pytest.FixtureRequest) -> str:
    """The backend the session must use (skipped where it does not work)."""
    backend(request.param)
    return str(request.param)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_ed25519").write_text("PRIVATE KEY MATERIAL\n")
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


def _settings(project: Path, sandbox: dict[str, Any], **more: Any) -> None:
    """The project's ``.claude/settings.json`` (trusted by the test, see :func:`_run`)."""
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"sandbox": sandbox, **more}))


def _run(
    steps: list[Any], project: Path, home: Path, box: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``caliban -p`` in the trusted ``project`` with ``box`` as the sandbox backend, the
    model playing ``steps`` then saying "done"."""
    trust(project)
    with FakeModelServer([*steps, {"text": "done"}]) as server:
        done = caliban(
            server, project, *args, "go", home=home, env={"CALIBAN_SANDBOX_BACKEND": box}
        )
    assert done.returncode == 0, done.stderr
    return done


def bash(command: str, **extra: Any) -> dict[str, Any]:
    return calls(("Bash", {"command": command, **extra}))


# ---------------------------------------------------------------------------- Done when


def _task_output(request: CapturedRequest) -> dict[str, Any]:
    """The model's next step after starting a background task: wait for it."""
    said = json.dumps(request.body["messages"][-1])
    task = re.search(r"background with ID: (\w+)", said)
    assert task is not None, said
    return calls(("TaskOutput", {"task_id": task.group(1), "block": True}))


@needs_curl
@pytest.mark.parametrize(
    "permissions",
    [
        pytest.param((), id="auto-allow"),
        pytest.param(("--permission-mode", "bypassPermissions"), id="bypass"),
    ],
)
def test_sandboxed_commands_are_confined(
    project: Path,
    home: Path,
    outside: Path,
    box: str,
    tmp_path: Path,
    permissions: tuple[str, ...],
) -> None:
    """With autoAllowBashIfSandboxed and no allow rule, in the default mode (or with the
    parser allowing everything): a command writes inside the project, not outside it nor
    under /tmp, also from a background task; it cannot read ~/.ssh under a Read deny rule,
    nor reach a server on 127.0.0.1 whose domain is not allowed; an allowed one works
    through the proxy."""
    marker = Path(f"/tmp/caliban-e2e-{tmp_path.name}-{box}")
    with http_server() as port:
        fetch = f"curl -sS -m 10 http://127.0.0.1:{port}/"
        for allowed in (False, True):
            network = {"network": {"allowedDomains": ["127.0.0.1"]}} if allowed else {}
            _settings(
                project,
                {"enabled": True, "autoAllowBashIfSandboxed": True, **network},
                permissions={"deny": ["Read(~/.ssh/**)"]},
            )
            steps = [
                bash(f"echo in > in.txt; echo out > {outside}/x; echo tmp > {marker}; echo end"),
                bash(f"echo bg > bg.txt; echo out > {outside}/bg", run_in_background=True),
                _task_output,
                bash("cat ~/.ssh/id_ed25519"),
                bash(fetch),
            ]
            done = _run(steps, project, home, box, *permissions)
            if box == "landlock" and not permissions:
                # Landlock cannot keep .git/config read-only: auto-allow does not apply, and
                # headless what would ask is denied.
                (failed, said), *_ = results(done.stdout)
                assert failed and "Permission denied for Bash" in said
                assert not (project / "in.txt").exists()
                return
            writes, _, _, secret, reached = (text for _, text in results(done.stdout))
            assert (project / "in.txt").read_text() == "in\n"
            assert (project / "bg.txt").read_text() == "bg\n"
            assert not (outside / "x").exists() and not (outside / "bg").exists()
            assert not marker.exists()
            assert f"blocked by the sandbox: write outside the project ({outside}/x)" in writes
            assert "dangerouslyDisableSandbox" in writes
            assert "PRIVATE KEY MATERIAL" not in secret
            assert "blocked by the sandbox: read of" in secret
            assert ("hello from the test server" in reached) is allowed, reached
            if not allowed:
                assert "blocked by the sandbox" in reached


# ---------------------------------------------------------------------------- issue 28's attacks

CD_TRICKS = [
    "(cd ~); echo '[core] fsmonitor = touch PWNED' >> ~/.gitconfig",
    "cd /nonexistent-xyz || cd ~; echo '[core] fsmonitor = touch PWNED' >> .gitconfig",
    "false && cd sub; cd ~ | true; echo x >> ~/.gitconfig",
    "if false; then cd sub; fi; cd ~ && echo x > .gitconfig",
    "for d in; do cd $d; done; cd ~; echo x >> .gitconfig",
]


def test_the_attacks_that_passed_the_parser_are_stopped(
    git_repository: Path,  # noqa: F811 (the fixture imported above)
    home: Path,
    outside: Path,
    box: str,
) -> None:
    """The parser allows everything (bypassPermissions): only the sandbox stands. Writes
    after a cd that did or did not happen stay in the project; .git/config cannot change,
    directly, through git config, or through a hard link made to it; a planted repository's
    core.fsmonitor runs, but inside the sandbox."""
    repo = git_repository
    (repo / "sub").mkdir()
    before = (repo / ".git" / "config").read_text()
    hook = f'\\n[core]\\n\\tfsmonitor = "touch {outside}/PWNED; false"\\n'  # for printf
    plant = (
        "git init -q vendor/x && "
        f"git -C vendor/x config core.fsmonitor 'touch ran-inside; touch {outside}/PWNED2; false'"
    )
    steps = [
        *(bash(f"cd {repo}; {trick}") for trick in CD_TRICKS),
        bash(f"cd {repo}; git config core.fsmonitor 'touch {outside}/PWNED'"),
        bash("echo '[alias] x = !id' >> .git/config"),
        bash("ln .git/config cfg"),
        bash(f"printf '{hook}' >> cfg; git status --short"),
        bash(plant),
        bash("cd vendor/x && git status --short; true"),
    ]
    done = _run(steps, repo, home, box, "--sandbox", "workspace-write",
                "--permission-mode", "bypassPermissions")  # fmt: skip
    said = [text for _, text in results(done.stdout)]
    assert not (home / ".gitconfig").exists()
    assert (repo / "vendor" / "x" / "ran-inside").exists()  # the planted hook ran...
    assert not (outside / "PWNED2").exists()  # ...in the sandbox
    if box == "landlock":
        return  # .git/config inside the project is the rules' to protect (docs/sandbox.md)
    assert (repo / ".git" / "config").read_text() == before
    assert not (outside / "PWNED").exists()
    config, append, link = said[len(CD_TRICKS) : len(CD_TRICKS) + 3]
    assert "a protected path (read-only in the sandbox)" in config + append
    assert "hard link to" in link


# ---------------------------------------------------------------------------- escalation


def test_escalation_headless_is_denied_unless_a_rule_allows_it(
    project: Path, home: Path, outside: Path
) -> None:
    box = _default_box()
    _settings(project, {"enabled": True, "autoAllowBashIfSandboxed": True})
    write = f"touch {outside}/escaped"
    done = _run([bash(write, dangerouslyDisableSandbox=True)], project, home, box)
    (failed, text), *_ = results(done.stdout)
    assert failed and "Permission denied for Bash" in text
    assert not (outside / "escaped").exists()

    steps = [bash(write), bash(write, dangerouslyDisableSandbox=True)]
    done = _run(steps, project, home, box, "--allowed-tools", "Bash(touch:*)")
    (_, sandboxed), _ = results(done.stdout)
    assert "blocked by the sandbox" in sandboxed  # allowed, but confined
    assert (outside / "escaped").exists()  # then allowed outside, by the rule


def test_excluded_commands_run_outside_and_a_retry_can_be_turned_off(
    project: Path, home: Path, outside: Path
) -> None:
    _settings(
        project,
        {"enabled": True, "excludedCommands": ["touch:*"], "allowUnsandboxedCommands": False},
    )
    steps = [
        bash(f"touch {outside}/made"),
        bash(f"mkdir {outside}/escaped", dangerouslyDisableSandbox=True),
    ]
    done = _run(steps, project, home, _default_box(), "--allowed-tools", "Bash(touch:*)",
                "--allowed-tools", "Bash(mkdir:*)")  # fmt: skip
    assert (outside / "made").exists()
    assert not (outside / "escaped").exists()
    _, (_, retried) = results(done.stdout)
    assert "dangerouslyDisableSandbox was ignored" in retried


def _default_box() -> str:
    for name in ("bubblewrap", "landlock"):
        try:
            backend(name)
        except pytest.skip.Exception:
            continue
        return name
    pytest.skip("no sandbox backend works here")


# ---------------------------------------------------------------------------- no backend


@pytest.mark.parametrize("strict", [False, True])
def test_no_backend_is_said_once_and_refused_with_fail_if_unavailable(
    project: Path, home: Path, strict: bool
) -> None:
    _settings(project, {"enabled": True, "failIfUnavailable": strict})
    done = _run([bash("echo ran > ran.txt")], project, home, "none",
                "--permission-mode", "bypassPermissions")  # fmt: skip
    assert done.stderr.count("the sandbox is on but cannot work here") == 1
    assert (project / "ran.txt").exists() is not strict
    (failed, text), *_ = results(done.stdout)
    if strict:
        assert failed and "sandbox.failIfUnavailable" in text
