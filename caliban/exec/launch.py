"""The sandbox launcher: restricts itself, then ``exec``s the command.

    python -I -S /…/caliban/sandbox/launch.py [OPTIONS] -- PROGRAM [ARG…]

Run by :class:`~caliban.sandbox.landlocked.LandlockSandbox` (Landlock and seccomp) and
inside bubblewrap by :class:`~caliban.sandbox.bubblewrap.BubblewrapSandbox` (the proxy
bridge and seccomp): the child's side of the one door. Doing this in a process of its own
keeps it out of caliban, which has threads: nothing runs between ``fork`` and ``exec``
there (no ``preexec_fn``). ``-I -S`` skips site-packages, so it starts in a few
milliseconds; it imports only the standard library and :mod:`caliban.sandbox.landlock` and
:mod:`caliban.sandbox.seccomp` (never :mod:`caliban.exec`'s own ``__init__``).

Options, each at most once unless said:

- ``--landlock``: apply Landlock: read everything but the ``--hide`` paths, write under the
  ``--write`` paths (each repeatable);
- ``--net all|tcp|none``: ``tcp``: TCP only, and (with ``--landlock``) connections only to
  the ``--connect-port`` ports (repeatable); ``none``: no network sockets at all;
- ``--unix``: allow new unix sockets (by default seccomp refuses them);
- ``--bridge PORT:SOCKET``: inside a network namespace, forward ``127.0.0.1:PORT`` to the
  proxy's unix socket, from a process started before seccomp (it needs a unix socket).

Anything that cannot be applied stops it with exit status 126 and a line on stderr that
starts with ``caliban sandbox:``; nothing runs unconfined. A program that cannot be run
exits 127 like a shell's.
"""

from __future__ import annotations

import os
import sys

EXIT_SETUP_FAILED = 126
EXIT_NOT_FOUND = 127
PREFIX = "caliban sandbox: "


class _Options:
    def __init__(self) -> None:
        self.landlock = False
        self.hide: list[str] = []
        self.write: list[str] = []
        self.net = "all"
        self.ports: list[int] = []
        self.unix = False
        self.bridge: tuple[int, str] | None = None


def invocation(
    *,
    landlock: bool = False,
    hide: tuple[str, ...] = (),
    write: tuple[str, ...] = (),
    net: str = "all",
    ports: tuple[int, ...] = (),
    unix: bool = False,
    bridge: tuple[int, str] | None = None,
) -> list[str]:
    """The launcher's argv up to and including ``--`` (the command follows)."""
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
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
    if bridge is not None:
        argv += ["--bridge", f"{bridge[0]}:{bridge[1]}"]
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
        elif flag in ("--hide", "--write", "--net", "--connect-port", "--bridge"):
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
    elif flag == "--connect-port":
        options.ports.append(int(value))
    else:
        port, _, path = value.partition(":")
        options.bridge = (int(port), path)


def main(args: list[str]) -> int:
    try:
        options, command = parse(args)
    except ValueError as exc:
        return _fail(f"bad arguments: {exc}")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        # Imported before the bridge forks (ctypes with it), so the bridge sets its death
        # signal at once: it must not keep bubblewrap waiting after a quick command.
        from caliban.sandbox import seccomp

        if options.bridge is not None:
            _start_bridge(*options.bridge)
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
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
        return EXIT_NOT_FOUND
    return EXIT_NOT_FOUND  # not reached


def _fail(what: str) -> int:
    sys.stderr.write(f"{PREFIX}{what}\n")
    return EXIT_SETUP_FAILED


def _start_bridge(port: int, path: str) -> None:
    """Listen on ``127.0.0.1:port`` now (so a connection made at once waits in the backlog)
    and serve it from a child process that forwards each connection to the unix socket
    ``path``. The child dies with the command (``PR_SET_PDEATHSIG``) and holds none of its
    output pipes."""
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    pid = os.fork()
    if pid:
        listener.close()
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the command is gone already
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _serve(listener, path)
    finally:
        os._exit(0)


def _serve(listener: object, path: str) -> None:
    import contextlib
    import socket
    import threading

    assert isinstance(listener, socket.socket)

    def pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def pair(client: socket.socket) -> None:
        with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
            try:
                upstream.connect(path)
            except OSError:
                return
            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join()

    while True:
        client, _ = listener.accept()
        threading.Thread(target=pair, args=(client,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
