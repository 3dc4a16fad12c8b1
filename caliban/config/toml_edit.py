"""Editing TOML files in place with tomlkit: comments, order and formatting are kept.

Used by ``caliban config set|unset`` and ``caliban mcp add|remove``. tomlkit is imported
when a file is edited, never at start-up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caliban.errors import ConfigError
from caliban.util.fsutil import atomic_write_text, updating

if TYPE_CHECKING:
    from tomlkit import TOMLDocument

__all__ = ["edited", "remove_key", "set_key", "toml_value"]


@contextlib.contextmanager
def edited(path: Path) -> Iterator[TOMLDocument]:
    """The file as an editable document, written back (atomically, when it changed) if the
    block ends without an exception. Another process editing the same file waits: neither
    loses the other's change (:func:`caliban.util.fsutil.updating`)."""
    with updating(path):
        document = _load_document(path)
        before = document.as_string()
        yield document
        if document.as_string() != before:
            _save_document(path, document)


def _load_document(path: Path) -> TOMLDocument:
    """The file as an editable document (empty when the file does not exist)."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise ConfigError(f"{path}: invalid TOML: line {exc.line}, column {exc.col}") from None


def _save_document(path: Path, document: TOMLDocument) -> None:
    """Write ``document`` to ``path`` atomically (blank lines a removal left at the end go)."""
    text = document.as_string()
    atomic_write_text(path, text.rstrip("\n") + "\n" if text.strip() else "")


def set_key(document: TOMLDocument, key: Sequence[str], value: Any) -> None:
    """Set the value at ``key`` (table names, then the leaf), creating tables as needed.

    A mapping value replaces the whole table at ``key``.
    """

    *tables, leaf = key
    node: Any = document
    for name in tables:
        child = node.get(name)
        if not isinstance(child, Mapping):
            node[name] = _item({}, inline=_is_inline(node))
            child = node[name]
        node = child
    node[leaf] = _item(value, inline=_is_inline(node))


def remove_key(document: TOMLDocument, key: Sequence[str]) -> bool:
    """Remove the value at ``key``; tables left empty by it go too. False when absent."""
    *tables, leaf = key
    path: list[Any] = [document]
    for name in tables:
        child = path[-1].get(name)
        if not isinstance(child, Mapping):
            return False
        path.append(child)
    if leaf not in path[-1]:
        return False
    del path[-1][leaf]
    for parent, name, child in reversed(list(zip(path[:-1], tables, path[1:], strict=True))):
        if len(child) == 0:
            del parent[name]
    return True


def toml_value(value: Any) -> str:
    """``value`` written as a TOML value (``true``, ``"x"``, ``["a", "b"]``, ``{ a = 1 }``)."""
    return str(_item(value, inline=True).as_string())


def _is_inline(node: Any) -> bool:
    from tomlkit.items import InlineTable

    return isinstance(node, InlineTable)


def _item(value: Any, *, inline: bool = False) -> Any:
    """A tomlkit item for ``value``; mappings become tables (inline ones inside an inline
    table, where TOML allows nothing else)."""
    import tomlkit

    if isinstance(value, Mapping):
        table = tomlkit.inline_table() if inline else tomlkit.table()
        for name, inner in value.items():
            table[name] = _item(inner, inline=inline)
        return table
    return tomlkit.item(value)
