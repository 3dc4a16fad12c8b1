"""The sandbox launcher: restricts itself, then ``exec``s the command.

    python -I -S /…/caliban/exec/launch.py [OPTIONS] -- PROGRAM [ARG…]

Run by :class:`~caliban.sandbox.landlocked.LandlockSandbox` (Landlock and seccomp): the
child's side of the one door. Doing this in a process of its own keeps it out of caliban,
which has threads: nothing runs between ``fork`` and ``exec`` there (no ``preexec_fn``).
``-I -S`` skips site-packages; it imports only the standard library and
:mod:`caliban.sandbox.landlock` and :mod:`caliban.sandbox.seccomp` (never
:mod:`caliban.exec`'s own ``__init__``).

Options, each at most once unless said:

- ``--landlock``: apply Landlock: read everything but the ``--hide`` paths, write under the
  ``--write`` paths (each repeatable);
- ``--net all|tcp|none``: ``tcp``: TCP only, and (with ``--landlock``) connections only to
  the ``--connect-port`` ports (repeatable); ``none``: no network sockets at all;
- ``--unix``: allow new unix sockets (by default seccomp refuses them).

Anything that cannot be applied stops it with exit status 126 and a line on stderr that
starts with ``caliban sandbox:``; nothing runs unconfined. A program that cannot be run
exits 127 like a shell's.

    python -I -S /…/caliban/exec/launch.py --serve

runs it as the **launch server** instead (:mod:`caliban.exec.launch_server`: one per
caliban process, its socket on stdin), a Python started once that forks for each request,
so that a command costs a ``fork`` rather than a Python start. A forked child either runs
:func:`main` for a command (the same options, the same code, once it has taken the
command's file descriptors, working directory, session and environment), or makes a TCP
socket listening inside another process's network namespace (bubblewrap's, for the proxy)
and sends it back.
"""

from __future__ import annotations

import os
import sys

EXIT_SETUP_FAILED = 126
EXIT_NOT_FOUND = 127
PREFIX = "caliban sandbox: "
PROGRAM = (sys.executable, "-I", "-S", os.path.abspath(__file__))
"""How the launcher starts (its options and the command follow)."""


class _Options:
    def __init__(self) -> None:
        self.landlock = False
        self.hide: list[str] = []
        self.write: list[str] = []
        self.net = "all"
        self.ports: list[int] = []
        self.unix = False


def invocation(
    *,
    landlock: bool = False,
    hide: tuple[str, ...] = (),
    write: tuple[str, ...] = (),
    net: str = "all",
    ports: tuple[int, ...] = (),
    unix: bool = False,
) -> list[str]:
    """The launcher's argv up to and including ``--`` (the command follows)."""
    argv = [*PROGRAM]
    if landlock:
        argv.append("--landlock")
    for path in hide:
        argv += ["--hide", path]
    for path in write:
        argv += ["--write", path]
    if net != "all":
        argv += ["--net", net]
    for port in ports:
        argv += ["--connect-port", str(port)]
    if unix:
        argv.append("--unix")
    return [*argv, "--"]


def parse(args: list[str]) -> tuple[_Options, list[str]]:
    """The options and the command; raises ValueError on anything else."""
    options = _Options()
    index = 0
    while index < len(args):
        flag = args[index]
        if flag == "--":
            command = args[index + 1 :]
            if not command:
                raise ValueError("no command after --")
            return options, command
        if flag == "--landlock":
            options.landlock = True
        elif flag == "--unix":
            options.unix = True
        elif flag in ("--hide", "--write", "--net", "--connect-port"):
            index += 1
            if index == len(args):
                raise ValueError(f"{flag} needs a value")
            _set(options, flag, args[index])
        else:
            raise ValueError(f"unknown option {flag!r}")
        index += 1
    raise ValueError("no -- before the command")


def _set(options: _Options, flag: str, value: str) -> None:
    if flag == "--hide":
        options.hide.append(value)
    elif flag == "--write":
        options.write.append(value)
    elif flag == "--net":
        if value not in ("all", "tcp", "none"):
            raise ValueError(f"--net {value!r}: expected all, tcp or none")
        options.net = value
    else:
        options.ports.append(int(value))


def main(args: list[str], env: dict[str, str] | None = None) -> int:
    """Apply the options in ``args`` to this process and ``exec`` the command after them,
    with ``env`` (or this process's environment); the exit status when that fails."""
    try:
        options, command = parse(args)
    except ValueError as exc:
        return _fail(f"bad arguments: {exc}")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        from caliban.sandbox import seccomp

        if options.landlock:
            from caliban.sandbox import landlock

            whole, split = landlock.grants_except("/", options.hide)
            landlock.restrict(
                read=whole,
                listable=split,
                write=options.write,
                connect_ports=options.ports if options.net != "all" else None,
            )
        if not options.unix or options.net != "all":
            seccomp.install(seccomp.program(block_unix=not options.unix, inet=options.net))  # type: ignore[arg-type]
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    # Python ignores these; a command starts with them as a shell would give them.
    import signal

    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    try:
        os.execvpe(command[0], command, os.environ if env is None else env)
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
        return EXIT_NOT_FOUND
    return EXIT_NOT_FOUND  # not reached


def _fail(what: str) -> int:
    sys.stderr.write(f"{PREFIX}{what}\n")
    return EXIT_SETUP_FAILED


# -------------------------------------------------------------------------- the server

MAX_MESSAGE_BYTES = 1 << 20
"""The largest request (a command's argv and environment, as JSON) the server takes."""
MAX_FDS = 64
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace


def serve(channel_fd: int) -> int:
    """The launch server: read requests from the ``SOCK_SEQPACKET`` socket ``channel_fd``
    until caliban closes it, fork for each, and report each launched command's exit.
    Single-threaded, so that a forked child may join namespaces."""
    import json
    import select
    import signal
    import socket

    # What each child needs, imported once here rather than in every child.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    import caliban.sandbox.landlock
    import caliban.sandbox.seccomp  # noqa: F401

    channel = socket.socket(fileno=channel_fd)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    launched: set[int] = set()
    while True:
        try:
            ready, _, _ = select.select([channel_fd, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            while len(os.read(wake_r, 512)) == 512:
                pass
            for pid, status in _reaped():
                if pid in launched:
                    launched.discard(pid)
                    code = os.waitstatus_to_exitcode(status)
                    channel.send(json.dumps({"exited": pid, "code": code}).encode())
        if channel_fd in ready:
            data, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE_BYTES, MAX_FDS)
            if not data:
                return 0  # caliban has gone
            request = json.loads(data)
            # closed by a launched child once it leads a session of its own (or has died):
            # caliban stops a command by its group, so it may not know the pid before
            led_r, led_w = os.pipe2(os.O_CLOEXEC)
            pid = os.fork()
            if pid == 0:
                os.close(led_r)
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                code = EXIT_SETUP_FAILED
                try:
                    code = _child(channel, request, fds, led_w)
                finally:
                    os._exit(code)
            os.close(led_w)
            for fd in fds:
                os.close(fd)
            if "launch" in request:
                os.read(led_r, 1)
                launched.add(pid)
                channel.send(json.dumps({"id": request["id"], "pid": pid}).encode())
            os.close(led_r)


def _reaped() -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        found.append((pid, status))


def _child(channel: object, request: dict[str, object], fds: list[int], led: int) -> int:
    """In a forked child of the server: do what ``request`` asks; the exit status. ``led``
    is closed once this process leads a session (and so a process group) of its own."""
    import json
    import socket

    assert isinstance(channel, socket.socket)
    if "listen" in request:
        os.close(led)
        target = request["listen"]
        assert isinstance(target, list)
        try:
            listener = _listen_in(int(target[0]), int(target[1]))
        except OSError as exc:
            channel.send(json.dumps({"id": request["id"], "error": str(exc)}).encode())
            return 1
        socket.send_fds(channel, [json.dumps({"id": request["id"]}).encode()], [listener])
        return 0
    launch = request["launch"]
    assert isinstance(launch, dict)
    channel.close()
    os.setsid()
    os.close(led)
    targets: list[int] = launch["fds"]
    # Each descriptor received becomes the number caliban gave it: first staged above all
    # of those numbers, then put in place; every other one is closed.
    base = max([*fds, *targets]) + 1
    staged = [os.dup2(fd, base + i) for i, fd in enumerate(fds)]
    for source, target in zip(staged, targets, strict=True):
        os.dup2(source, target)
    after = 0
    for fd in sorted(set(targets)):
        if fd > after:  # os.closerange(n, n) may close every descriptor (close_range)
            os.closerange(after, fd)
        after = fd + 1
    os.closerange(after, os.sysconf("SC_OPEN_MAX"))
    try:
        os.chdir(launch["cwd"])
    except OSError as exc:
        return _fail(f"{launch['cwd']}: {exc.strerror}")
    code = main(launch["args"], launch["env"])
    sys.stderr.flush()
    return code


def _listen_in(pid: int, port: int) -> int:
    """A TCP socket listening on ``127.0.0.1:port`` in the network namespace of ``pid``
    (joining the user namespace that owns it first, when that is not this process's: as its
    owner's user, this process may). It stays there: a forked child that exits next."""
    import ctypes
    import fcntl
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    owner = fcntl.ioctl(net, _NS_GET_USERNS)
    joined = os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino
    if not joined and libc.setns(owner, _CLONE_NEWUSER) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns(user namespace of {pid}): {os.strerror(code)}")
    if libc.setns(net, _CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns(network namespace of {pid}): {os.strerror(code)}")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener.detach()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve(0))
    sys.exit(main(sys.argv[1:]))
