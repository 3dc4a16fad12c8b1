"""The OS sandbox under the commands caliban runs (issue 24): backends behind
:class:`caliban.exec.Sandbox`, the domain-filtering proxy, and the ``sandbox`` settings.

- :mod:`~caliban.sandbox.bubblewrap`: Linux, ``bwrap`` (mount and network namespaces).
- :mod:`~caliban.sandbox.landlock` and :mod:`~caliban.sandbox.seccomp`, applied in the
  child by :mod:`~caliban.exec.launch`: Linux without bubblewrap (no root, no namespaces).
- :mod:`~caliban.sandbox.seatbelt`: macOS ``sandbox-exec`` with a generated profile.
- :mod:`~caliban.sandbox.proxy`: the HTTP/``CONNECT`` proxy that lets allowed domains through.
- :mod:`~caliban.sandbox.settings`: Claude Code's ``sandbox`` settings and ``--sandbox``.

This package's ``__init__`` imports nothing: the launcher runs with ``python -I -S`` and
imports its sibling modules alone, so a sandboxed command starts fast.
"""
