"""Errors the CLI maps to exit codes. Kept import-free so start-up stays fast."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem the user must fix (exit code 78). The message says where and how."""


class UsageError(Exception):
    """The command line asks for something impossible (exit code 2)."""
