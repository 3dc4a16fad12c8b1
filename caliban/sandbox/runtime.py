"""A session's sandbox: the backend chosen for this machine, the profile each command runs
under, the domain proxy, and a private temporary folder.

:class:`SandboxRuntime` is built once per session from the :class:`SandboxConfig`, the
project and the permission policy (whose working directories — ``--add-dir``, an Agent
SDK's ``addDirectories`` — are writable, whose ``Read`` deny rules become unreadable paths
and whose ``WebFetch(domain:…)`` rules join the allowed and denied domains, all read live,
so a folder added or a "don't ask again" answer counts from the next command). It answers:

- :meth:`~SandboxRuntime.placement`: where this Bash call runs: in the sandbox, or
  outside it (an excluded command, a retry outside, no backend), or not at all?
- :meth:`~SandboxRuntime.profile`: what the command may touch, built when it starts
  (protected paths that appeared since are covered);
- :meth:`~SandboxRuntime.explain`: why a failed command most likely failed because of the
  sandbox ("blocked by the sandbox: write outside the project (/tmp/x)"), for the model;
- :meth:`~SandboxRuntime.describe`: what ``/sandbox`` shows.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

from caliban.exec import (
    AllNetwork,
    Availability,
    Command,
    Network,
    NoNetwork,
    ProxyNetwork,
    Sandbox,
    SandboxProfile,
)
from caliban.permissions.bash_rules import allows
from caliban.permissions.protected import SHELL_STARTUP
from caliban.sandbox.proxy import DomainPolicy, DomainProxy
from caliban.sandbox.settings import Mode, SandboxConfig
from caliban.shell import Analysis, Understood

__all__ = [
    "Placement",
    "SandboxRuntime",
    "Unavailable",
    "choose_backend",
    "protected_paths",
    "rule_paths",
]

PROJECT_PROTECTED = (
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/hooks",
    ".caliban",
    ".claude",
    ".mcp.json",
    ".husky",
)
"""Paths under each writable folder kept read-only in the sandbox: what git, caliban or
Claude Code run or obey later (:mod:`caliban.permissions.protected` has the full list the
permission check uses)."""


Placement = Literal["off", "sandbox", "excluded", "outside", "unconfined", "refused"]
"""Where a Bash call runs: ``sandbox``; outside it because it is ``off``, the command is
``excluded`` (``excludedCommands``), a retry ``outside`` was asked for
(``dangerouslyDisableSandbox``, honoured while ``allowUnsandboxedCommands``), or no backend
works (``unconfined``); or not at all (``refused``: ``failIfUnavailable``)."""


class Unavailable:
    """The backend when none works here; :meth:`available` says why, for each one tried."""

    name = "none"

    def __init__(self, detail: str) -> None:
        self.detail = detail

    def available(self) -> Availability:
        return Availability(usable=False, detail=self.detail)

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        raise RuntimeError(f"no sandbox backend works here: {self.detail}")


BACKEND_ENV = "CALIBAN_SANDBOX_BACKEND"
"""Names the one backend to use (``bubblewrap``, ``landlock``, ``seatbelt``; ``none``: no
backend works): for trying one out, and for tests."""


def choose_backend() -> Sandbox:
    """The best backend that works on this machine: bubblewrap, then Landlock (Linux), or
    Seatbelt (macOS), or the one ``$CALIBAN_SANDBOX_BACKEND`` names; otherwise one whose
    :meth:`available` says why none does. Probing runs a command once per backend tried:
    call it off the event loop."""
    from caliban.sandbox.bubblewrap import BubblewrapSandbox
    from caliban.sandbox.landlocked import LandlockSandbox
    from caliban.sandbox.seatbelt import SeatbeltSandbox

    every: dict[str, Callable[[], Sandbox]] = {
        "bubblewrap": BubblewrapSandbox,
        "landlock": LandlockSandbox,
        "seatbelt": SeatbeltSandbox,
    }
    candidates: list[Sandbox]
    if wanted := os.environ.get(BACKEND_ENV):
        if wanted == "none":
            return Unavailable(f"{BACKEND_ENV}=none")
        if wanted not in every:
            return Unavailable(f"{BACKEND_ENV}={wanted} (expected one of {', '.join(every)})")
        candidates = [every[wanted]()]
    elif sys.platform == "darwin":
        candidates = [SeatbeltSandbox()]
    elif sys.platform.startswith("linux"):
        candidates = [BubblewrapSandbox(), LandlockSandbox()]
    else:
        return Unavailable(f"no OS sandbox for {sys.platform}")
    reasons = []
    for candidate in candidates:
        availability = candidate.available()
        if availability.usable:
            return candidate
        reasons.append(f"{candidate.name}: {availability.detail}")
    return Unavailable("; ".join(reasons))


class SandboxRuntime:
    """The sandbox of one session (see the module docstring). :meth:`close` it at the end."""

    def __init__(
        self,
        config: SandboxConfig,
        *,
        project_root: Path,
        working_dirs: Callable[[], Sequence[Path]] = tuple,
        read_deny_patterns: Callable[[], Sequence[str]] = tuple,
        domain_rules: Callable[[], tuple[Sequence[str], Sequence[str]]] = lambda: ((), ()),
        backend: Sandbox | None = None,
        home: Path | None = None,
    ) -> None:
        self.config = config
        self.project_root = project_root.resolve()
        self._working_dirs = working_dirs
        self._read_deny_patterns = read_deny_patterns
        self._domain_rules = domain_rules
        self._backend = backend
        self._home = home or Path.home()
        self._lock = threading.Lock()
        self._place: Path | None = None
        self._proxy: DomainProxy | None = None

    # ------------------------------------------------------------------ backend

    @property
    def backend(self) -> Sandbox:
        """The backend (chosen, and probed, on first use)."""
        with self._lock:
            if self._backend is None:
                self._backend = choose_backend()
            return self._backend

    @property
    def availability(self) -> Availability:
        return self.backend.available()

    def unavailable_notice(self) -> str | None:
        """The one warning when the sandbox is on but cannot work here; None otherwise."""
        if not self.config.enabled or self.availability.usable:
            return None
        then = (
            "Bash commands will not run (sandbox.failIfUnavailable)"
            if self.config.fail_if_unavailable
            else "Bash commands run without it (set sandbox.failIfUnavailable to refuse them)"
        )
        return f"the sandbox is on but cannot work here ({self.availability.detail}); {then}"

    # ------------------------------------------------------------------ per command

    def excluded(self, line: Analysis) -> str | None:
        """The ``excludedCommands`` pattern that takes the command ``line`` (as the Bash call
        analysed it) out of the sandbox, matched as an allow rule is (every command of the
        line covered), or None."""
        if not self.config.excluded_commands:
            return None
        if not isinstance(line, Understood) or not line.commands:
            return None
        for pattern in self.config.excluded_commands:
            if all(allows(pattern, one) for one in line.commands):
                return pattern
        return None

    def placement(self, line: Analysis, *, outside_requested: bool = False) -> Placement:
        """Where this Bash call runs (:data:`Placement`)."""
        if not self.config.enabled:
            return "off"
        outside = outside_requested and self.config.allow_unsandboxed
        if not outside and self.excluded(line) is not None:
            return "excluded"
        if outside:
            return "outside"
        if self.availability.usable:
            return "sandbox"
        return "refused" if self.config.fail_if_unavailable else "unconfined"

    def auto_allows(self, line: Analysis, *, outside_requested: bool = False) -> bool:
        """Whether this Bash call runs without asking (``autoAllowBashIfSandboxed``): it is
        on, and the call runs in the sandbox (not excluded, not a retry outside)."""
        return self.config.auto_allow_bash and (
            self.placement(line, outside_requested=outside_requested) == "sandbox"
        )

    @property
    def keeps_protected_paths(self) -> bool:
        """Whether the backend keeps protected paths inside writable folders read-only
        (a backend that does not say so is taken not to)."""
        return bool(getattr(self.backend, "keeps_protected_paths", False))

    @property
    def tmpdir(self) -> Path:
        """A private temporary folder for sandboxed commands (``TMPDIR``), removed by
        :meth:`close`."""
        return self._private() / "tmp"

    def _private(self) -> Path:
        with self._lock:
            if self._place is None:
                self._place = Path(tempfile.mkdtemp(prefix="caliban-sandbox-"))
                (self._place / "tmp").mkdir()
            return self._place

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` for a sandboxed command: its temporary folder is the private one."""
        tmp = str(self.tmpdir)
        return {**env, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}

    def confinement(self) -> tuple[SandboxProfile, Sandbox]:
        """The profile and backend for a process that asked for the sandbox itself (an MCP
        server or a hook with ``sandbox = true``): the session's, ``workspace-write`` when the
        sandbox is off for Bash. Raises OSError when no backend works here: such a process
        does not start unconfined."""
        if not self.availability.usable:
            raise OSError(
                f"it asks for the sandbox, and none works here: {self.availability.detail}"
            )
        mode = "workspace-write" if self.config.mode == "off" else self.config.mode
        return self.profile(mode), self.backend

    def profile(self, mode: Mode | None = None) -> SandboxProfile:
        """What a command starting now may touch (in ``mode``; the session's by default)."""
        if (mode or self.config.mode) == "read-only":
            writable = [self.tmpdir]
        else:
            extra = [
                _setting_path(p, self.project_root, self._home) for p in self.config.allow_write
            ]
            added = [path.resolve() for path in self._working_dirs()]
            writable = [self.project_root, *added, *extra, self.tmpdir]
        roots = [p for p in writable if p != self.tmpdir]
        read_only = [*protected_paths(roots, self._home)]
        read_only += [
            _setting_path(p, self.project_root, self._home) for p in self.config.deny_write
        ]
        hidden, _ = self._unreadable()
        return SandboxProfile(
            writable=tuple(dict.fromkeys(writable)),
            read_only=tuple(dict.fromkeys(read_only)),
            unreadable=tuple(hidden),
            network=self._network(),
            unix_sockets=tuple(
                _setting_path(p, self.project_root, self._home)
                for p in self.config.allow_unix_sockets
            ),
            all_unix_sockets=self.config.allow_all_unix_sockets,
        )

    def _unreadable(self) -> tuple[list[Path], list[str]]:
        hidden = [_setting_path(p, self.project_root, self._home) for p in self.config.deny_read]
        loose: list[str] = []
        for pattern in self._read_deny_patterns():
            paths, exact = rule_paths(pattern, self.project_root, self._home)
            hidden += paths
            if not exact:
                loose.append(f"Read({pattern})")
        again = {_setting_path(p, self.project_root, self._home) for p in self.config.allow_read}
        return [p for p in dict.fromkeys(hidden) if p not in again], loose

    def refusal(self, host: str) -> str | None:
        """Why a sandboxed command may not reach ``host`` (the proxy asks, per connection,
        so rules allowed meanwhile count), or None."""
        return self._domains().refusal(host)

    def _domains(self) -> DomainPolicy:
        allowed, denied = self._domain_rules()
        return DomainPolicy(
            allowed=(*self.config.allowed_domains, *allowed),
            denied=(*self.config.denied_domains, *denied),
        )

    def _network(self) -> Network:
        policy = self._domains()
        if not policy.allowed:
            return NoNetwork()
        if policy.allowed == ("*",) and not policy.denied:
            return AllNetwork()
        proxy = self._running_proxy()
        return ProxyNetwork(port=proxy.port, serve=proxy.serve)

    def _running_proxy(self) -> DomainProxy:
        with self._lock:
            if self._proxy is None:
                proxy = DomainProxy(self.refusal)
                proxy.start()
                self._proxy = proxy
            return self._proxy

    def mark(self) -> int:
        """A point to ask :meth:`explain` about hosts blocked since."""
        return self._proxy.mark() if self._proxy is not None else 0

    # ------------------------------------------------------------------ after a command

    def explain(self, output: str, *, cwd: Path, since: int = 0) -> str | None:
        """Why a command that failed most likely failed because of the sandbox, as a phrase
        to follow "blocked by the sandbox: " — or None when nothing points at it."""
        reasons: list[str] = []
        if self._proxy is not None:
            for why in self._proxy.blocked_since(since):
                reasons.append(f"network access refused ({why})")
        profile = self.profile()
        for path, problem in _failed_paths(output, cwd):
            reason = _classify(path, problem, profile, self.config.mode)
            if reason is not None and reason not in reasons:
                reasons.append(reason)
        if not reasons and isinstance(profile.network, NoNetwork) and _NETWORK.search(output):
            reasons.append(
                "no network access (sandboxed commands reach only the domains in "
                "sandbox.network.allowedDomains or WebFetch(domain:…) allow rules; none are)"
            )
        if not reasons and "Operation not permitted" in output and _SOCKET.search(output):
            reasons.append("new unix sockets are refused in the sandbox")
        return "; ".join(reasons[:3]) or None

    # ------------------------------------------------------------------ reporting

    def describe(self) -> list[str]:
        """What ``/sandbox`` shows: mode, backend, what is writable and reachable, and what
        is not enforced."""
        config = self.config
        if not config.enabled:
            return ["Sandbox: off (turn it on with --sandbox workspace-write or sandbox.enabled)"]
        availability = self.availability
        source = f" (from {config.sources[0]})" if config.sources else ""
        lines = [f"Sandbox: {config.mode}{source}"]
        if not availability.usable:
            lines.append(f"Backend: none works here: {availability.detail}")
            lines.append(
                "Commands are refused (failIfUnavailable)"
                if config.fail_if_unavailable
                else "Commands run WITHOUT a sandbox"
            )
            return lines
        profile = self.profile()
        lines.append(f"Backend: {self.backend.name} — {availability.detail}")
        lines.append("Writable: " + ", ".join(map(str, profile.writable)))
        protected = [p for p in profile.read_only if os.path.lexists(p)]
        if protected:
            lines.append("Read-only inside them: " + ", ".join(map(str, protected)))
        hidden, loose = self._unreadable()
        if hidden:
            lines.append("Unreadable: " + ", ".join(map(str, hidden)))
        lines.append("Network: " + self._describe_network(profile.network))
        if profile.all_unix_sockets:
            lines.append("Unix sockets: all allowed")
        lines.append(
            "Bash commands: "
            + (
                "asked about as usual"
                if not config.auto_allow_bash
                else "run without asking (autoAllowBashIfSandboxed; ask and deny rules still apply)"
                if self.keeps_protected_paths
                else "asked about as usual (autoAllowBashIfSandboxed does not apply: this backend "
                "cannot keep protected paths read-only)"
            )
            + (
                "; may be retried outside with approval"
                if config.allow_unsandboxed
                else "; never run outside"
            )
        )
        if config.excluded_commands:
            lines.append("Outside the sandbox: " + ", ".join(config.excluded_commands))
        notes = list(getattr(self.backend, "limits", lambda _: [])(profile))
        if loose:
            notes.append(
                f"{', '.join(loose)}: patterns with wildcards are enforced by the permission "
                "rules only, not by the sandbox"
            )
        lines += [f"Not enforced: {note}" for note in notes]
        return lines

    def _describe_network(self, network: Network) -> str:
        if isinstance(network, NoNetwork):
            return "none"
        if isinstance(network, AllNetwork):
            return "all"
        policy = self._domains()
        text = "through the proxy to " + ", ".join(policy.allowed)
        if policy.denied:
            text += " (never " + ", ".join(policy.denied) + ")"
        return text

    def close(self) -> None:
        """Stop the proxy and remove the private folder."""
        with self._lock:
            proxy, place = self._proxy, self._place
            self._proxy = self._place = None
        if proxy is not None:
            proxy.close()
        if place is not None:
            shutil.rmtree(place, ignore_errors=True)


# ---------------------------------------------------------------------------- paths


def protected_paths(roots: Iterable[Path], home: Path) -> list[Path]:
    """What stays read-only under the writable ``roots``: :data:`PROJECT_PROTECTED`, the
    shell start-up files, a ``.git`` file and the git directory it points to, and the
    user's own protected places (``~/.ssh``, ``~/.gitconfig``, …) when a root holds them."""
    found: list[Path] = []
    for root in roots:
        found += [root / name for name in PROJECT_PROTECTED]
        found += [root / name for name in sorted(SHELL_STARTUP)]
        git = root / ".git"
        if git.is_file():
            found.append(git)
            found += _pointed_git_dirs(git)
    user = [
        home / ".ssh",
        home / ".gitconfig",
        home / ".config" / "git",
        home / ".config" / "fish",
        home / ".config" / "caliban",
        home / ".claude",
        *(home / name for name in sorted(SHELL_STARTUP)),
    ]
    found += [p for p in user if any(_under(p, root) for root in roots)]
    return found


def _pointed_git_dirs(git_file: Path) -> list[Path]:
    """``gitdir: X`` in a ``.git`` file (a worktree, a submodule): X's config and hooks, and
    those of its ``commondir``."""
    try:
        text = git_file.read_text(errors="replace")[:4096]
    except OSError:
        return []
    match = re.match(r"gitdir:\s*(.+)", text)
    if not match:
        return []
    target = (git_file.parent / match.group(1).strip()).resolve()
    places = [target]
    try:
        common = (target / "commondir").read_text(errors="replace").strip()
        places.append((target / common).resolve())
    except OSError:
        pass
    return [p / name for p in places for name in ("config", "config.worktree", "hooks")]


def rule_paths(pattern: str, project_root: Path, home: Path) -> tuple[list[Path], bool]:
    """The paths a ``Read(pattern)`` deny rule names, for the sandbox to hide, and whether
    that is all the rule covers. ``~/.ssh/**``, ``//etc/secret``, ``secrets/**`` and ``/x``
    (absolute and project-relative) are paths; ``.env`` (a name at any depth) is hidden at
    the project's top only; a pattern with wildcards before its end names no path."""
    written = pattern.strip().rstrip("/")
    base = written.removesuffix("/**")
    exact = True
    if not base or any(char in base for char in "*?[{"):
        return [], False
    if base.startswith("~"):
        paths = [Path(base.replace("~", str(home), 1))]
    elif base.startswith("//"):
        paths = [Path(base[1:])]
    elif base.startswith("/"):
        paths = [Path(base), project_root / base[1:]]
    elif "/" in written.removeprefix("./") or written.startswith("./"):
        paths = [project_root / base.removeprefix("./")]
    else:
        paths, exact = [project_root / base], False
    return [Path(os.path.normpath(p)) for p in paths], exact


def _setting_path(raw: str, project_root: Path, home: Path) -> Path:
    """A path in the sandbox settings: ``~/x``, ``//abs`` or ``/abs``, or relative to the
    project root."""
    if raw.startswith("~"):
        return Path(os.path.normpath(raw.replace("~", str(home), 1)))
    if raw.startswith("//"):
        return Path(os.path.normpath(raw[1:]))
    return Path(os.path.normpath(project_root / raw))


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# ---------------------------------------------------------------------------- explaining

_PROBLEMS = ("Read-only file system", "Permission denied", "Operation not permitted",
             "Invalid cross-device link", "No such file or directory", "Is a directory",
             "File exists")  # fmt: skip
"""Errors the sandbox causes (bubblewrap hides an unreadable folder under an empty one:
what was in it is not there; a protected path that did not exist is an empty read-only
folder: writing a file there finds a directory, making one finds it exists)."""
_PLACEHOLDER_PROBLEMS = ("Is a directory", "File exists")
_QUOTED = re.compile(r"['\"‘’“”`]([^'\"‘’“”`\n]+)['\"‘’“”`]")
_NETWORK = re.compile(
    r"Could not resolve host|Temporary failure in name resolution|Network is unreachable|"
    r"Name or service not known|getaddrinfo|nodename nor servname|Failed to connect to|"
    r"Connection refused|ENOTFOUND|EAI_AGAIN|No address associated|Couldn't connect to server"
)
_SOCKET = re.compile(r"socket|docker|\.sock\b", re.IGNORECASE)


def _failed_paths(output: str, cwd: Path) -> list[tuple[Path, str]]:
    """``(path, problem)`` for each line of ``output`` that reports a file error the sandbox
    may cause, with the path it names: quoted (``touch: cannot touch 'x'``, Python's
    ``…: '/x'``), or the word before the error (``bash: line 1: /x: Read-only …``)."""
    found: list[tuple[Path, str]] = []
    for line in output.splitlines()[-200:]:
        problem = next((p for p in _PROBLEMS if p in line), None)
        if problem is None:
            continue
        at = line.index(problem)
        quoted = _QUOTED.findall(line[:at]) or _QUOTED.findall(line[at:])
        if quoted:
            word = quoted[-1] if _QUOTED.findall(line[:at]) else quoted[0]
        else:
            word = line[:at].rstrip().rstrip(":").rsplit(": ", 1)[-1].strip()
            word = word.removeprefix("cannot create ")  # dash: "sh: 1: cannot create x: …"
        if not word or word.startswith("-") or " " in word.strip():
            continue
        path = Path(os.path.expanduser(word))
        found.append((Path(os.path.normpath(cwd / path)), problem))
    return found


def _classify(path: Path, problem: str, profile: SandboxProfile, mode: str) -> str | None:
    """Why the sandbox refused ``path``, or None when it was not the sandbox."""
    if any(_under(path, hidden) for hidden in profile.unreadable):
        return f"read of {path}, which a Read deny rule (or sandbox.filesystem.denyRead) hides"
    if problem == "No such file or directory":
        return None
    if any(_under(path, kept) for kept in profile.read_only):
        verb = "hard link to" if "cross-device" in problem else "write to"
        return f"{verb} {path}, a protected path (read-only in the sandbox)"
    if (site := _placeholder_over(path, problem, profile)) is not None:
        why = (
            "git init in a folder that is not a repository: a .git made in the sandbox could "
            "hold config and hooks that run outside it later"
            if site.name == ".git"
            else "a protected path"
        )
        return f"write to {path}: {site} does not exist, and the sandbox keeps it so ({why})"
    if problem in _PLACEHOLDER_PROBLEMS:
        return None
    if "cross-device" in problem or any(_under(path, root) for root in profile.writable):
        return None
    # Outside the writable folders: the sandbox's doing only if caliban itself could write
    # there (a file only root may write is refused with or without a sandbox).
    if problem != "Read-only file system" and not _writable_here(path):
        return None
    if mode == "read-only":
        return f"write in a read-only sandbox ({path})"
    return f"write outside the project ({path})"


def _placeholder_over(path: Path, problem: str, profile: SandboxProfile) -> Path | None:
    """The missing protected path that ``path`` is at or under (where bubblewrap keeps an
    empty read-only folder while a command runs: :func:`placeholder_sites`), if any."""
    from caliban.sandbox.bubblewrap import placeholder_sites

    if problem not in ("Read-only file system", *_PLACEHOLDER_PROBLEMS):
        return None
    real = Path(os.path.realpath(path))
    return next((site for site in placeholder_sites(profile) if _under(real, site)), None)


def _writable_here(path: Path) -> bool:
    """Whether caliban could write ``path`` (or create it in the nearest folder there is)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.access(path, os.W_OK)
