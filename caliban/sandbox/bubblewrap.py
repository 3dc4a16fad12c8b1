"""The bubblewrap backend (Linux): a command sees the file system read-only but for its
writable roots, protected paths inside them bound read-only again, hidden paths covered,
and a network namespace of its own.

The argv, in order (later mounts cover earlier ones)::

    bwrap --die-with-parent --unshare-pid --unshare-ipc [--unshare-net] --seccomp FD
          [--info-fd I --block-fd B]
          --ro-bind / /  --bind ROOT ROOT …  --ro-bind PROTECTED PROTECTED …
          --tmpfs HIDDEN_DIR --remount-ro HIDDEN_DIR …  --ro-bind /dev/null HIDDEN_FILE …
          --dev /dev --proc /proc [--chdir CWD] -- COMMAND…

The seccomp filter (no new unix sockets, :mod:`caliban.sandbox.seccomp`) is loaded by
bubblewrap itself from a file this backend writes once, opened for each command and
passed as a descriptor: no Python starts, so a command costs bubblewrap's few
milliseconds. With the proxy network, the proxy serves a socket
listening on ``127.0.0.1:PORT`` inside the namespace, made there by the launch server
while bubblewrap waits (:class:`_ProxyHandshake`): no process relays inside, and the
filter covers everything there.
A read-only bind mount of a protected file also stops a hard link to it (``ln`` across
mounts fails with ``EXDEV``), and hard links made to it earlier are found by identity
and bound read-only too (:func:`hard_links`). A protected path that does not exist is
kept from being created by an empty folder bound read-only at its first missing component
(:class:`Placeholders`), removed once the command has exited (``Command.on_exit``). The
command stays in its launcher's process group, and the PID namespace ends with
bubblewrap, so :func:`caliban.exec.stop_group` stops everything.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from caliban.exec import AllNetwork, Availability, Command, ProxyNetwork, SandboxProfile

__all__ = ["BubblewrapSandbox", "Placeholders", "hard_links", "placeholder_sites"]

HARD_LINK_SCAN_LIMIT = 50_000
"""Directory entries looked at, at most, to find the other names of a protected file that
has several (beyond that the file's other names are not known: see :func:`hard_links`)."""
_SKIP_DIRS = frozenset({"node_modules", ".venv", "__pycache__"})


class BubblewrapSandbox:
    """Commands confined by ``bwrap`` (found on ``PATH``, or given)."""

    name = "bubblewrap"
    keeps_protected_paths = True
    """Protected paths inside writable folders stay read-only (bound read-only over them)."""

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable or shutil.which("bwrap")
        self._availability: Availability | None = None
        self._filters: dict[tuple[bool, str], Path] = {}
        self._lock = threading.Lock()
        self._placeholders = Placeholders()

    def available(self) -> Availability:
        """Whether ``bwrap`` is installed and can make namespaces here (Ubuntu 24.04's
        AppArmor forbids it to unprivileged users by default): a probe runs ``true``
        through the whole wrap once, and the answer is kept."""
        if self._availability is None:
            self._availability = self._probe()
        return self._availability

    def _probe(self) -> Availability:
        if self.executable is None:
            return Availability(usable=False, detail="bwrap is not installed")
        from caliban.sandbox.probe import failure

        if (broken := failure(self, "bwrap")) is not None:
            return broken
        return Availability(usable=True, detail=f"bubblewrap ({self.executable})")

    def wrap(self, command: Command, profile: SandboxProfile) -> Command:
        assert self.executable is not None, "wrap() called on an unavailable sandbox"
        argv = [self.executable, "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
        network = profile.network
        if not isinstance(network, AllNetwork):
            argv.append("--unshare-net")
        env = command.environment()
        pass_fds = command.pass_fds
        undo: list[Callable[[], None]] = []  # once the command has exited, or failed to
        handshake = None
        filter_file = None
        try:
            if isinstance(network, ProxyNetwork):
                if network.serve is None:
                    raise ValueError("bubblewrap serves the proxy in its namespace: none given")
                env.update(proxy_environment(network.port))
                handshake = _ProxyHandshake(network.port, network.serve)
                undo.append(handshake.close)
                argv += ["--info-fd", str(handshake.info), "--block-fd", str(handshake.block)]
                pass_fds += (handshake.info, handshake.block)
            if not profile.all_unix_sockets:
                # Opened for each command: bubblewrap reads it to the end.
                filter_file = self._filter(block_unix=True)
                filter_fd = os.open(filter_file, os.O_RDONLY | os.O_CLOEXEC)
                undo.append(lambda: os.close(filter_fd))
                argv += ["--seccomp", str(filter_fd)]
                pass_fds += (filter_fd,)
            sites, release = self._placeholders.hold_for(profile)
            undo.append(release)
            also = [*sites, *([] if filter_file is None else [filter_file])]
            argv += mounts(profile, also_read_only=also)
        except BaseException:
            _run_all(undo)
            raise
        argv += ["--dev", "/dev", "--proc", "/proc"]
        if command.cwd is not None:
            argv += ["--chdir", str(command.cwd)]
        argv += ["--", *command.argv]
        return Command(
            argv=tuple(argv),
            cwd=command.cwd,
            env=env,
            pass_fds=pass_fds,
            started=None if handshake is None else handshake.run,
            on_exit=lambda: _run_all(undo),
        )

    def _filter(self, *, block_unix: bool) -> Path:
        """The seccomp program as a file, written once per backend in a folder of its own
        (removed when the backend is)."""
        from caliban.sandbox import seccomp

        key = (block_unix, "all")
        with self._lock:
            if key not in self._filters:
                if not self._filters:
                    folder = tempfile.mkdtemp(prefix="caliban-seccomp-")
                    weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
                    self._folder = Path(folder)
                path = self._folder / f"filter-{'unix' if block_unix else 'none'}.bpf"
                path.write_bytes(seccomp.program(block_unix=block_unix))
                self._filters[key] = path
            return self._filters[key]


def mounts(profile: SandboxProfile, *, also_read_only: Sequence[Path] = ()) -> list[str]:
    """The mount arguments for ``profile``: read-only root, writable roots, protected
    paths (and their other hard links) read-only again, hidden paths covered. Paths are
    resolved here, when the command starts; one that does not exist is left out."""
    args = ["--ro-bind", "/", "/"]
    writable = _existing(profile.writable)
    for root in sorted(writable, key=lambda p: len(p.parts)):
        args += ["--bind", str(root), str(root)]
    kept = _existing([*profile.read_only, *also_read_only])
    protected = [p for p in kept if _under_any(p, writable)]
    for path in sorted({*protected, *hard_links(protected, writable)}, key=_depth):
        args += ["--ro-bind", str(path), str(path)]
    for path in sorted(_existing(profile.unreadable), key=_depth):
        if path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def placeholder_sites(profile: SandboxProfile) -> list[Path]:
    """Where placeholders keep protected paths that do not exist from being created: each
    one's first missing component (symbolic links followed), when that lies under a
    writable root in an existing folder; and a protected path that is an empty folder
    (perhaps another session's placeholder, held while the command runs). A missing
    ``.git/commondir`` in a git directory gets a file naming that directory itself
    (:data:`COMMONDIR_PLACEHOLDER`; git refuses a folder there)."""
    writable = _existing(profile.writable)
    found: list[Path] = []
    for path in profile.read_only:
        site = Path(os.path.realpath(path))
        if not _under_any(site, writable):
            continue
        if os.path.lexists(site):
            if _empty_folder(site) or _commondir_placeholder(site):
                found.append(site)
            continue
        while not os.path.lexists(site.parent) and site.parent != site:
            site = site.parent
        if site.parent.is_dir() and _under_any(site, writable):
            found.append(site)
    return list(dict.fromkeys(found))


class Placeholders:
    """Empty folders made on the host where protected paths did not exist, bound read-only
    over themselves for the command (bubblewrap would make a mount point there itself, and
    leave it behind), and removed once the last command of this backend using one has
    exited.

    A folder, whatever the path names: nothing can be written in it, no file or folder can
    be made at its name, and git does not list it. But ``.git/commondir``, where git
    refuses anything but a file naming a git directory: a file naming its own (``.``), with
    which git works as without one. Every command using one holds a shared
    ``flock`` on it, and it is removed only under an exclusive one: removing a mount point
    lifts the mounts on it in other namespaces, so while another session's command uses it,
    it stays (a thread removes it when that command ends). Only the folder made here (same
    device and inode) is removed, by ``rmdir``, which removes only an empty one (the
    ``commondir`` file only while it still says ``.``): never a user's file.
    """

    BUSY_TRIES = 200
    """Attempts, a millisecond apart, to use a placeholder another session is removing,
    before the command is refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[Path, _Made] = {}

    def hold_for(self, profile: SandboxProfile) -> tuple[list[Path], Callable[[], None]]:
        """:func:`placeholder_sites` for ``profile``, held (:meth:`hold`): the sites, and
        what releases them. Sites are looked for again when a folder on the way to one went
        meanwhile (another command's placeholder, removed as that command ended)."""
        tries = self.BUSY_TRIES
        while True:
            sites = placeholder_sites(profile)
            try:
                return sites, self.hold(sites)
            except FileNotFoundError:
                tries -= 1
                if tries == 0:
                    raise

    def hold(self, sites: Sequence[Path]) -> Callable[[], None]:
        """Make or share a placeholder at each of ``sites``; returns what releases them
        (once). Raises OSError when one cannot be made: the command must not start."""
        made: list[tuple[Path, _Made]] = []
        shared: list[int] = []
        release = _once(lambda: self._release(made, shared))
        try:
            with self._lock:
                for site in sites:
                    self._take(site, made, shared)
        except BaseException:
            release()
            raise
        return release

    def _take(self, site: Path, made: list[tuple[Path, _Made]], shared: list[int]) -> None:
        for _ in range(self.BUSY_TRIES):
            if (ours := self._made.get(site)) is not None:
                if _identity(site) == ours.identity:
                    ours.users += 1
                    made.append((site, ours))
                    return
                del self._made[site]  # replaced from outside: no longer ours to remove
            try:
                _make(site)
                mine = True
            except FileExistsError:
                mine = False
            try:
                fd = os.open(site, os.O_RDONLY | os.O_NOFOLLOW | _kind_flag(site))
            except FileNotFoundError:
                continue
            except OSError:
                return  # a file or a link made meanwhile: bound read-only as it is
            if not mine and site.name == "commondir" and not _commondir_placeholder(site):
                os.close(fd)
                return  # the user's own, made meanwhile: bound read-only as it is
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # being removed by the session that made it
                time.sleep(0.001)
                continue
            identity = _identity_of(os.fstat(fd))
            if _identity(site) != identity:
                os.close(fd)
                continue
            if mine:
                self._made[site] = ours = _Made(fd=fd, identity=identity)
                made.append((site, ours))
            else:
                shared.append(fd)
            return
        raise OSError(f"{site}: another session is removing its sandbox placeholder there")

    def _release(self, made: Sequence[tuple[Path, _Made]], shared: Sequence[int]) -> None:
        for fd in shared:
            os.close(fd)
        unused: list[tuple[Path, _Made]] = []
        with self._lock:
            for site, ours in made:
                ours.users -= 1
                if ours.users == 0:
                    if self._made.get(site) is ours:
                        del self._made[site]
                    unused.append((site, ours))
        if unused:
            # Removing a folder costs milliseconds on a busy disk: not on the event loop.
            threading.Thread(
                target=_remove_all, args=(unused,), name="caliban-placeholders"
            ).start()


def _remove_all(unused: Sequence[tuple[Path, _Made]]) -> None:
    """Remove each placeholder no command of this session uses; one another session's
    command still uses is removed by a thread of its own, when that command ends."""
    for site, ours in unused:
        try:
            fcntl.flock(ours.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiter = threading.Thread(target=_remove, args=(site, ours, True), daemon=True)
            waiter.start()
            continue
        _remove(site, ours, False)


def _remove(site: Path, ours: _Made, wait: bool) -> None:
    """Remove ``site`` if it is still the placeholder made there (after an exclusive
    lock, waited for when ``wait``)."""
    try:
        if wait:
            fcntl.flock(ours.fd, fcntl.LOCK_EX)
        if _identity(site) == ours.identity:
            if site.name != "commondir":
                os.rmdir(site)
            elif _commondir_placeholder(site):
                os.unlink(site)
    except OSError:
        pass  # filled meanwhile, or gone: left alone
    finally:
        os.close(ours.fd)


@dataclass(kw_only=True, slots=True)
class _Made:
    """A placeholder made here: the descriptor holding its shared lock, its device and
    inode, and how many commands use it."""

    fd: int
    identity: tuple[int, int]
    users: int = 1


class _ProxyHandshake:
    """How a command in bubblewrap's network namespace reaches the proxy with no process
    of caliban's inside: bubblewrap tells the pid of its child (``--info-fd``) and waits
    (``--block-fd``) while the launch server makes a socket listening on
    ``127.0.0.1:PORT`` in that namespace, which the proxy then serves; only then does the
    command start. Nothing in the sandbox holds a unix socket, so seccomp applies to all
    of it. When it fails, the command never starts (:attr:`Command.started` raising)."""

    TIMEOUT_S = 60.0
    """How long the launch server may take to answer (a busy machine; it is a fork)."""

    def __init__(self, port: int, serve: Callable[[socket.socket], Callable[[], None]]) -> None:
        self._port = port
        self._serve = serve
        self._info_r, self.info = os.pipe()
        self.block, self._block_w = os.pipe()
        self._stop: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def run(self) -> None:
        """Once bubblewrap has started: read its child's pid, have the proxy serve a
        socket made in its namespace, let the command run."""
        self._close("info", "block")  # the child's ends: bubblewrap has its own now
        report = b""
        while chunk := os.read(self._info_r, 4096):
            report += chunk
        if not report:
            return  # bubblewrap failed before its child started: its own error says why
        pid = json.loads(report)["child-pid"]
        from caliban.exec.launch_server import LaunchServer

        try:
            listener = LaunchServer.shared().listen_in(pid, self._port).result(self.TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise OSError(f"the sandbox cannot reach its proxy: {exc}") from exc
        stop = self._serve(listener)
        with self._lock:
            self._stop = stop
        os.write(self._block_w, b"go")

    def close(self) -> None:
        """Once the command has exited: stop serving its socket, close the pipes."""
        with self._lock:
            stop, self._stop = self._stop, None
        if stop is not None:
            stop()
        self._close("_info_r", "info", "block", "_block_w")

    def _close(self, *names: str) -> None:
        with self._lock:
            for name in names:
                fd = getattr(self, name)
                setattr(self, name, -1)
                if fd >= 0:
                    os.close(fd)


def _run_all(actions: Sequence[Callable[[], None]]) -> None:
    """Each of ``actions``, in order, whichever fails."""
    for index, action in enumerate(actions):
        try:
            action()
        except BaseException:
            _run_all(actions[index + 1 :])
            raise


def proxy_environment(port: int) -> dict[str, str]:
    """What points HTTP clients (curl, pip, npm, git, Python, Node) at the proxy. Nothing
    is exempt: ``localhost`` goes through it too, so the rules decide."""
    url = f"http://127.0.0.1:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = ""
    return env


def hard_links(protected: Sequence[Path], roots: Iterable[Path]) -> list[Path]:
    """Other names, under ``roots``, of the protected files that have more than one: a
    hard link made earlier is the same file, and writing it writes the protected one. The
    search looks at up to :data:`HARD_LINK_SCAN_LIMIT` entries (not in ``.git/objects`` or
    ``node_modules``) and only when some protected file has a second name."""
    wanted: dict[tuple[int, int], Path] = {}
    for path in protected:
        try:
            info = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            wanted[(info.st_dev, info.st_ino)] = path
    if not wanted:
        return []
    found: list[Path] = []
    budget = HARD_LINK_SCAN_LIMIT
    for root in roots:
        for directory, dirs, files in os.walk(root):
            in_git = os.path.basename(directory) == ".git"
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not (in_git and d == "objects")]
            budget -= len(dirs) + len(files)
            for name in files:
                path = Path(directory, name)
                try:
                    info = path.lstat()
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) in wanted and path not in protected:
                    found.append(path)
            if budget <= 0:
                return found
    return found


def _existing(paths: Iterable[Path]) -> list[Path]:
    """The paths that exist, symbolic links resolved (most protected names do not exist:
    one ``lstat`` each tells)."""
    resolved = []
    for path in paths:
        if os.path.lexists(path) and os.path.lexists(real := os.path.realpath(path)):
            resolved.append(Path(real))
    return list(dict.fromkeys(resolved))


COMMONDIR_PLACEHOLDER = b".\n"
"""What the placeholder at a missing ``.git/commondir`` says: the common directory is the
git directory itself (git with it works as git without it)."""


def _make(site: Path) -> None:
    """Make the placeholder at ``site``; FileExistsError when something is there."""
    if site.name != "commondir":
        os.mkdir(site, 0o755)
        return
    fd = os.open(site, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, COMMONDIR_PLACEHOLDER)
    finally:
        os.close(fd)


def _kind_flag(site: Path) -> int:
    return 0 if site.name == "commondir" else os.O_DIRECTORY


def _commondir_placeholder(path: Path) -> bool:
    """Whether ``path`` is a ``commondir`` file saying only ``.`` (a placeholder)."""
    if path.name != "commondir":
        return False
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        return path.read_bytes() == COMMONDIR_PLACEHOLDER
    except OSError:
        return False


def _empty_folder(path: Path) -> bool:
    try:
        if not stat.S_ISDIR(path.lstat().st_mode):
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        return _identity_of(path.lstat())
    except OSError:
        return None


def _identity_of(info: os.stat_result) -> tuple[int, int]:
    return (info.st_dev, info.st_ino)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = threading.Event()

    def run_once() -> None:
        if not done.is_set():
            done.set()
            action()

    return run_once


def _under_any(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _depth(path: Path) -> int:
    return len(path.parts)
