"""Permissions: which tool calls run, which ask the user, which are refused.

- :mod:`~caliban.permissions.rules`: the rule grammar and what a rule matches;
- :mod:`~caliban.permissions.shell`: shell command lines as rules see them;
- :mod:`~caliban.permissions.policy`: the pure decision and a session's permission state;
- :mod:`~caliban.permissions.approval`: asking the user, and the loop's ``authorize`` seam.
"""
