"""caliban's side of the launch server (``launch.py --serve``, :mod:`caliban.exec.launch`):
a Python started once per caliban process, which forks for each sandboxed command instead
of a new Python starting for it (a Python start costs 15–30 ms here; a fork of the small
server, about one).

Two requests, over a ``SOCK_SEQPACKET`` socket pair (one message each way, file
descriptors passed along):

- :meth:`LaunchServer.launch`: the launcher's arguments, the command's environment,
  working directory and file descriptors; a child of the server takes them, starts a
  session of its own and runs the launcher's code (Landlock, seccomp, ``exec``). The server
  reports its pid once it leads that session, then its exit code; caliban stops its group
  by that pid as any other.
- :meth:`LaunchServer.listen_in`: a TCP socket listening on ``127.0.0.1:PORT`` in another
  process's network namespace (bubblewrap's): a child of the server joins it (the server
  is single-threaded, caliban is not) and sends the socket back.

When the server cannot start or is lost, what was asked fails with OSError (a launch then
starts a new Python, :func:`caliban.exec.spawn`); commands it had started are killed, and
reported exited with -9.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence

from caliban.exec import launch

__all__ = ["LaunchServer"]


class LaunchServer:
    """The launch server of this process (:meth:`shared`), started when first asked, and
    again after :meth:`close` or once lost."""

    _shared: LaunchServer | None = None
    _shared_lock = threading.Lock()

    def __init__(self, program: Sequence[str] = launch.PROGRAM) -> None:
        self._program = tuple(program)
        """How the server starts (``--serve`` follows): the launcher, by default."""
        self._lock = threading.Lock()
        self._connection: _Connection | None = None
        self._owner = os.getpid()

    @classmethod
    def shared(cls) -> LaunchServer:
        """This process's server (a forked child of caliban gets its own)."""
        with cls._shared_lock:
            if cls._shared is None or cls._shared._owner != os.getpid():
                cls._shared = LaunchServer()
            return cls._shared

    def launch(
        self,
        args: list[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        fds: Mapping[int, int],
        on_exit: Callable[[int], None],
    ) -> concurrent.futures.Future[int]:
        """Have the server start the launcher with ``args`` (its options, ``--``, the
        command), ``env`` and ``cwd``, each of ``fds`` (number in the child: descriptor
        here) in place; the future gives its pid. ``on_exit`` gets its exit code (negative:
        the signal), on the server's reader thread. Raises OSError when it cannot ask."""
        launch = {"args": args, "env": dict(env), "cwd": cwd, "fds": list(fds)}
        return self._connected().ask({"launch": launch}, list(fds.values()), on_exit)  # type: ignore[return-value]

    def listen_in(self, pid: int, port: int) -> concurrent.futures.Future[socket.socket]:
        """A socket listening on ``127.0.0.1:port`` in the network namespace of ``pid``."""
        return self._connected().ask({"listen": [pid, port]}, [], None)  # type: ignore[return-value]

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        connection = self._connection
        return None if connection is None or connection.lost else connection.pid

    def close(self) -> None:
        """Stop the server; commands it started and still running are killed."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _connected(self) -> _Connection:
        with self._lock:
            if self._connection is None or self._connection.lost:
                self._connection = _Connection(self._program)
            return self._connection


class _Connection:
    """One running server: its process, the channel to it, and what waits on it."""

    def __init__(self, program: tuple[str, ...]) -> None:
        self._lock = threading.Lock()
        self.lost = False
        self._next_id = 0
        self._waiting: dict[int, tuple[concurrent.futures.Future[object], object]] = {}
        self._exits: dict[int, Callable[[int], None]] = {}
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            for side in (mine, theirs):
                with contextlib.suppress(OSError):
                    side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, launch.MAX_MESSAGE_BYTES)
            self._process = subprocess.Popen(
                [*program, "--serve"],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self._channel = mine
        self.pid = self._process.pid
        self._reader = threading.Thread(
            target=self._read, name="caliban-launch-server", daemon=True
        )
        self._reader.start()

    def ask(
        self, request: dict[str, object], fds: list[int], on_exit: Callable[[int], None] | None
    ) -> concurrent.futures.Future[object]:
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        with self._lock:
            if self.lost:
                raise OSError("the launch server has gone")
            self._next_id += 1
            request["id"] = ident = self._next_id
            data = json.dumps(request).encode()
            if len(data) > launch.MAX_MESSAGE_BYTES:
                raise OSError(f"a request of {len(data)} bytes is over the launch server's cap")
            self._waiting[ident] = (future, on_exit)
            try:
                socket.send_fds(self._channel, [data], fds)
            except OSError:
                del self._waiting[ident]
                raise
        return future

    def _read(self) -> None:
        """Settle each answer as it comes; once the channel closes, fail what waits."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self._channel, launch.MAX_MESSAGE_BYTES, 1)
            except OSError:
                data, fds = b"", []
            if not data:
                self._lose()
                return
            message = json.loads(data)
            if "exited" in message:
                with self._lock:
                    on_exit = self._exits.pop(message["exited"], None)
                if on_exit is not None:
                    on_exit(message["code"])
                continue
            with self._lock:
                future, exit_callback = self._waiting.pop(message["id"])
                if "pid" in message and exit_callback is not None:
                    self._exits[message["pid"]] = exit_callback  # type: ignore[assignment]
            if "error" in message:
                future.set_exception(OSError(message["error"]))
            elif "pid" in message:
                future.set_result(message["pid"])
            else:
                future.set_result(socket.socket(fileno=fds[0]))

    def _lose(self) -> None:
        with self._lock:
            self.lost = True
            waiting, self._waiting = self._waiting, {}
            exits, self._exits = self._exits, {}
        self._channel.close()
        for future, _ in waiting.values():
            future.set_exception(OSError("the launch server has gone"))
        for pid, on_exit in exits.items():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            on_exit(-signal.SIGKILL)
        self._process.wait()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._channel.shutdown(socket.SHUT_RDWR)
        self._reader.join()
