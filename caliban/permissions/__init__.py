"""Permissions: which tool calls run, which ask the user, which are refused.

- :mod:`~caliban.permissions.rules`: the rule grammar and what a rule matches;
- :mod:`~caliban.permissions.bash_rules`: Bash rules matched on an analysed command line
  (what the line does is :mod:`caliban.shell`'s);
- :mod:`~caliban.permissions.protected`: files whose writes always ask;
- :mod:`~caliban.permissions.policy`: the pure decision from a call's subject and effects,
  and a session's permission state;
- :mod:`~caliban.permissions.approval`: asking the user, and the call pipeline's authorizer.
"""
