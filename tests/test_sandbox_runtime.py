"""A session's sandbox runtime: the profile a command gets (writable folders, protected and
unreadable paths from the settings and the Read deny rules, the network), which commands
it confines, how a failure is explained to the model, and what /sandbox shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from caliban.exec import AllNetwork, Availability, Command, NoNetwork, ProxyNetwork, SandboxProfile
from caliban.sandbox.runtime import SandboxRuntime, rule_paths
from caliban.sandbox.settings import SandboxConfig
from caliban.shell import analyze


class _Works:
    """A backend that works and wraps nothing (the runtime's logic alone is tested)."""

    name = "test"
    keeps_protected_paths = True

    def available(self) -> Availability:
        return Availability(usable=True, detail="a test backend")

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        return command


class _Broken(_Works):
    def available(self) -> Availability:
        return Availability(usable=False, detail="bwrap is not installed")


def _runtime(tmp_path: Path, **config: object) -> SandboxRuntime:
    project = tmp_path / "proj"
    (project / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    (project / ".git" / "config").write_text("[core]\n")
    values: dict[str, object] = {"mode": "workspace-write"}
    values.update(config)
    runtime = SandboxRuntime(
        SandboxConfig(**values),  # type: ignore[arg-type]
        project_root=project,
        working_dirs=lambda: (tmp_path / "extra",),
        read_deny_patterns=lambda: ("~/.ssh/**", "secrets/**", ".env", "**/*.pem"),
        domain_rules=lambda: (("docs.python.org",), ("evil.python.org",)),
        backend=_Works(),
        home=tmp_path / "home",
    )
    return runtime


def test_the_profile_of_a_workspace_write_command(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, allowed_domains=(), deny_write=("vendor",))
    private = runtime.tmpdir.parent
    try:
        profile = runtime.profile()
        project = (tmp_path / "proj").resolve()
        assert profile.writable[:2] == (project, (tmp_path / "extra").resolve())
        assert profile.writable[-1] == runtime.tmpdir and runtime.tmpdir.is_dir()
        for protected in (
            ".git/config",
            ".git/hooks",
            ".mcp.json",
            ".caliban",
            ".bashrc",
            "vendor",
        ):
            assert project / protected in profile.read_only
        assert tmp_path / "home" / ".ssh" in profile.unreadable
        assert project / "secrets" in profile.unreadable and project / ".env" in profile.unreadable
        assert isinstance(profile.network, ProxyNetwork)  # docs.python.org is allowed by a rule
    finally:
        runtime.close()
    assert not private.exists()


def test_read_only_mode_writes_only_its_temporary_folder(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, mode="read-only")
    try:
        assert runtime.profile().writable == (runtime.tmpdir,)
    finally:
        runtime.close()


def test_network_none_or_all(tmp_path: Path) -> None:
    runtime = SandboxRuntime(
        SandboxConfig(mode="workspace-write"), project_root=tmp_path, backend=_Works()
    )
    assert isinstance(runtime.profile().network, NoNetwork)
    everything = SandboxRuntime(
        SandboxConfig(mode="workspace-write", allowed_domains=("*",)),
        project_root=tmp_path,
        backend=_Works(),
    )
    assert isinstance(everything.profile().network, AllNetwork)
    runtime.close()
    everything.close()


def test_the_proxy_follows_the_rules_live(tmp_path: Path) -> None:
    allowed: list[str] = []
    runtime = SandboxRuntime(
        SandboxConfig(mode="workspace-write", allowed_domains=("pypi.org",)),
        project_root=tmp_path,
        domain_rules=lambda: (tuple(allowed), ()),
        backend=_Works(),
    )
    try:
        profile = runtime.profile()
        assert isinstance(profile.network, ProxyNetwork)
        assert runtime.refusal("docs.python.org") is not None
        allowed.append("docs.python.org")  # "don't ask again" on a WebFetch
        assert runtime.refusal("docs.python.org") is None
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("pattern", "expected", "exact"),
    [
        ("~/.ssh/**", ["HOME/.ssh"], True),
        ("~/.aws", ["HOME/.aws"], True),
        ("//etc/secret/**", ["/etc/secret"], True),
        ("/data", ["/data", "ROOT/data"], True),
        ("secrets/**", ["ROOT/secrets"], True),
        ("./config/prod.env", ["ROOT/config/prod.env"], True),
        (".env", ["ROOT/.env"], False),  # any depth: only the top is hidden
        ("**/*.pem", [], False),
        ("src/*.key", [], False),
    ],
)
def test_rule_paths(tmp_path: Path, pattern: str, expected: list[str], exact: bool) -> None:
    home, root = tmp_path / "home", tmp_path / "root"
    paths, complete = rule_paths(pattern, root, home)
    named = [str(p).replace(str(home), "HOME").replace(str(root), "ROOT") for p in paths]
    assert named == expected and complete is exact


def test_which_commands_are_confined(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, excluded_commands=("docker:*",))
    assert runtime.placement(analyze("ls -la")) == "sandbox"
    assert runtime.placement(analyze("docker ps")) == "excluded"
    assert runtime.placement(analyze("docker ps && rm -rf ~")) == "sandbox"  # all must be excluded
    assert runtime.placement(analyze("ls"), outside_requested=True) == "outside"
    strict = _runtime(tmp_path, allow_unsandboxed=False)
    assert (
        strict.placement(analyze("ls"), outside_requested=True) == "sandbox"
    )  # the retry is ignored
    assert _runtime(tmp_path, mode="off").placement(analyze("ls")) == "off"


def test_unavailable_is_said_once_and_refuses_with_fail_if_unavailable(tmp_path: Path) -> None:
    runtime = SandboxRuntime(
        SandboxConfig(mode="workspace-write"), project_root=tmp_path, backend=_Broken()
    )
    assert runtime.placement(analyze("ls")) == "unconfined"
    assert "bwrap is not installed" in (runtime.unavailable_notice() or "")
    assert "run without it" in (runtime.unavailable_notice() or "")
    strict = SandboxRuntime(
        SandboxConfig(mode="workspace-write", fail_if_unavailable=True),
        project_root=tmp_path,
        backend=_Broken(),
    )
    assert "will not run" in (strict.unavailable_notice() or "")
    assert strict.placement(analyze("ls")) == "refused"
    assert SandboxRuntime(SandboxConfig(), project_root=tmp_path).unavailable_notice() is None


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("bash: line 1: /tmp/x/out.txt: Read-only file system", "write outside the project"),
        ("touch: cannot touch '/tmp/x/y': Permission denied", "write outside the project"),
        (
            "bash: line 1: .git/config: Read-only file system",
            "write to PROJ/.git/config, a protected",
        ),
        (
            "ln: failed to create hard link 'cfg' => '.git/config': Invalid cross-device link",
            "hard link to PROJ/.git/config",
        ),
        ("cat: HOME/.ssh/id_rsa: Permission denied", "read of HOME/.ssh/id_rsa"),
        ("cat: HOME/.ssh/id_rsa: No such file or directory", "read of HOME/.ssh/id_rsa"),
        ("cat: notes.txt: No such file or directory", None),
        (
            "PermissionError: [Errno 13] Permission denied: '/tmp/x/data.json'",
            "write outside the project",
        ),
        ("curl: (6) Could not resolve host: pypi.org", "no network access"),
        ("mkdir: cannot create directory 'build': File exists", None),
        (
            "mkdir: cannot create directory '.caliban': File exists",
            "write to PROJ/.caliban, a protected",
        ),
        ("sh: 1: cannot create .mcp.json: Is a directory", "write to PROJ/.mcp.json, a protected"),
        ("sh: 1: cannot create src: Is a directory", None),
        ("bash: line 1: out.txt: Permission denied", None),  # inside the project: not us
        (
            "fatal: cannot copy '/usr/share/git-core/templates/description' to "
            "'.git/description': Read-only file system",
            "PROJ/.git does not exist, and the sandbox keeps it so (git init in a folder",
        ),
    ],
)
def test_explaining_a_failure(tmp_path: Path, output: str, expected: str | None) -> None:
    runtime = SandboxRuntime(
        SandboxConfig(mode="workspace-write"),
        project_root=tmp_path / "proj",
        read_deny_patterns=lambda: ("~/.ssh/**",),
        backend=_Works(),
        home=tmp_path / "home",
    )
    (tmp_path / "proj").mkdir(exist_ok=True)
    try:
        project = str((tmp_path / "proj").resolve())
        said = runtime.explain(output.replace("HOME", str(tmp_path / "home")), cwd=Path(project))
        if expected is None:
            assert said is None
        else:
            wanted = expected.replace("PROJ", project).replace("HOME", str(tmp_path / "home"))
            assert said is not None and wanted in said
    finally:
        runtime.close()


def test_describe_says_mode_backend_and_what_is_not_enforced(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, auto_allow_bash=True, excluded_commands=("docker:*",))
    try:
        lines = runtime.describe()
        text = "\n".join(lines)
        assert lines[0] == "Sandbox: workspace-write"
        assert "Backend: test — a test backend" in text
        assert "Writable: " in text and str(runtime.tmpdir) in text
        assert "Network: through the proxy to docs.python.org (never evil.python.org)" in text
        assert "run without asking (autoAllowBashIfSandboxed" in text
        runtime.backend.keeps_protected_paths = False  # type: ignore[attr-defined]  # Landlock
        assert "autoAllowBashIfSandboxed does not apply" in "\n".join(runtime.describe())
        assert "Outside the sandbox: docker:*" in text
        assert "Not enforced: Read(.env), Read(**/*.pem)" in text
    finally:
        runtime.close()
    off = SandboxRuntime(SandboxConfig(), project_root=tmp_path).describe()
    assert off[0].startswith("Sandbox: off")


def test_describe_under_landlock_says_missing_protected_paths_may_be_created(
    tmp_path: Path,
) -> None:
    from caliban.sandbox.landlocked import LandlockSandbox

    class _Landlock(LandlockSandbox):
        def available(self) -> Availability:
            return Availability(usable=True, detail="Landlock (test)")

    (tmp_path / "proj").mkdir()
    runtime = SandboxRuntime(
        SandboxConfig(mode="workspace-write"), project_root=tmp_path / "proj", backend=_Landlock()
    )
    try:
        text = "\n".join(runtime.describe())
    finally:
        runtime.close()
    assert "Not enforced: protected paths inside writable folders are not kept" in text
    assert "those missing may be created" in text and ".git/config" in text


@pytest.mark.anyio
async def test_the_sandbox_command_in_the_repl(tmp_path: Path) -> None:
    from test_repl import CTRL_D, ENTER, harness

    runtime = _runtime(tmp_path, auto_allow_bash=True)
    try:
        async with harness([], tmp_path, sandbox=runtime) as h:
            await h.run("/sandbox" + ENTER + CTRL_D)
    finally:
        runtime.close()
    assert "Sandbox: workspace-write" in h.lines
    assert any(line.startswith("Backend: test") for line in h.lines)
    assert any(line.startswith("Writable: ") for line in h.lines)
    async with harness([], tmp_path) as h:
        await h.run("/sandbox" + ENTER + CTRL_D)
    assert any(line.startswith("Sandbox: off") for line in h.lines)
