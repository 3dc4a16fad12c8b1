"""Each MCP server's last tool list, kept in the user's cache directory.

With it, a session knows every server's tools before any server has started: the deferred
paragraph of turn 1 is complete (and byte-identical from one session to the next, so the
provider's prompt cache holds), ToolSearch and ``caliban mcp search`` answer at once, and a
call of a cached tool waits for its own server only.

An entry is keyed by what decides which program answers — transport, command, arguments,
the *names* of the environment variables and headers, working directory, URL — and never
stores a secret value. It is rewritten whenever the server lists different tools, and
removed when the server fails to start (other than by timing out), so a server that is gone
is not announced again. A change of an environment variable's value alone keeps the key:
the server's own listing, moments later, corrects the catalog.

Pure file I/O and JSON: no MCP SDK.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caliban.config import paths
from caliban.mcp.tools import McpDispatcher, McpTool, sanitize, unique_wire_names
from caliban.util.fsutil import atomic_write_text

if TYPE_CHECKING:
    from caliban.mcp.config import ServerConfig

__all__ = ["FORMAT", "CachedListing", "CatalogCache", "cache_identity", "user_cache"]

FORMAT = 1
"""Bumped when the file layout changes; entries of another format are ignored."""

logger = logging.getLogger(__name__)


def cache_identity(config: ServerConfig) -> dict[str, Any]:
    """What keys a server's entry: everything that decides which program answers, no secret."""
    return {
        "format": FORMAT,
        "name": config.name,
        "transport": config.transport,
        "command": config.command,
        "args": list(config.args),
        "env": sorted(config.env),
        "cwd": str(config.cwd) if config.cwd is not None else None,
        "url": config.url,
        "headers": sorted(config.headers),
    }


_TOOL_FIELDS: tuple[tuple[str, type], ...] = (
    ("name", str),
    ("description", str),
    ("input_schema", dict),
)
_OPTIONAL_FIELDS: tuple[tuple[str, type], ...] = (
    ("annotations", dict),
    ("title", str),
    ("always_load", bool),
)
_KNOWN = frozenset(key for key, _ in (*_TOOL_FIELDS, *_OPTIONAL_FIELDS))
_ENTRY_KEYS = frozenset({"identity", "listed_at", "tools"})


def _tools(data: object) -> list[dict[str, Any]] | None:
    """The tools of a decoded entry, or ``None`` when it is not one this format wrote.

    Checked field by field rather than by a pydantic model: a 10,000-tool list (5 MB) took
    ~0.35 s to validate that way, before the first request could leave."""
    if not isinstance(data, dict) or data.keys() - {"instructions", "resources"} != _ENTRY_KEYS:
        return None
    tools = data["tools"]
    if not isinstance(tools, list):
        return None
    for tool in tools:
        if not isinstance(tool, dict) or not _KNOWN.issuperset(tool):
            return None
        for key, kind in _TOOL_FIELDS:
            if not isinstance(tool.get(key), kind):
                return None
        for key, kind in _OPTIONAL_FIELDS:
            if (value := tool.get(key)) is not None and not isinstance(value, kind):
                return None
    return tools


@dataclass(frozen=True, kw_only=True)
class CachedListing:
    """What a server said last time: its tools, its instructions, whether it offers
    resources."""

    tools: tuple[McpTool, ...]
    instructions: str | None = None
    resources: bool = False


class CatalogCache:
    """Tool lists on disk, one JSON file per server configuration, under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, config: ServerConfig) -> Path:
        """``<directory>/<server>-<16 hex digits of the identity's SHA-256>.json``."""
        identity = json.dumps(cache_identity(config), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
        return self.directory / f"{sanitize(config.name)}-{digest}.json"

    def load(
        self, config: ServerConfig, *, dispatcher: McpDispatcher | None = None
    ) -> CachedListing | None:
        """The server's cached listing (calls of its tools go to ``dispatcher``), or ``None``
        when there is no usable entry: missing, unreadable, of another format or another
        configuration. The file is read and decoded once (at 10,000 tools that is most of
        what loading costs)."""
        path = self.path(config)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            logger.info("ignoring the tool cache %s: %s", path, exc)
            return None
        tools = _tools(data)
        if tools is None:
            logger.info("ignoring the tool cache %s: not a tool list", path)
            return None
        if data["identity"] != cache_identity(config):
            return None
        names = unique_wire_names(config.name, [t["name"] for t in tools])
        timeout = config.tool_timeout
        instructions = data.get("instructions")
        return CachedListing(
            tools=tuple(
                McpTool(
                    server=config.name,
                    tool_name=t["name"],
                    name=wire,
                    description=t["description"],
                    input_schema=t["input_schema"],
                    annotations=t.get("annotations"),
                    title=t.get("title"),
                    timeout=timeout,
                    always_load=t.get("always_load") is True,
                    dispatcher=dispatcher,
                )
                for t, wire in zip(tools, names, strict=True)
            ),
            instructions=instructions if isinstance(instructions, str) else None,
            resources=data.get("resources") is True,
        )

    def store(
        self,
        config: ServerConfig,
        tools: Sequence[McpTool],
        instructions: str | None = None,
        *,
        resources: bool = False,
    ) -> None:
        """Remember ``tools`` (with the server's ``instructions`` and whether it offers
        ``resources``) as the server's list (best effort: a failure is only logged)."""
        entry: dict[str, Any] = {
            "identity": cache_identity(config),
            "listed_at": time.time(),
            "tools": [
                {
                    "name": t.tool_name,
                    "description": t.description,
                    "input_schema": dict(t.input_schema),
                    "annotations": dict(t.annotations) if t.annotations is not None else None,
                    "title": t.title,
                    # only when set: entries written before the field stay readable as they are
                    **({"always_load": True} if t.always_load else {}),
                }
                for t in tools
            ],
        }
        if instructions:
            entry["instructions"] = instructions
        if resources:
            entry["resources"] = True
        try:
            atomic_write_text(self.path(config), json.dumps(entry, separators=(",", ":")))
        except OSError as exc:
            logger.warning("could not cache the tools of MCP server %s: %s", config.name, exc)

    def forget(self, config: ServerConfig) -> None:
        """Drop the server's entry (it failed to start: do not announce its tools again)."""
        with contextlib.suppress(OSError):
            self.path(config).unlink()


def user_cache() -> CatalogCache:
    """The user's cache: ``<cache dir>/mcp-tools`` (``~/.cache/caliban/mcp-tools``)."""
    return CatalogCache(paths.cache_dir() / "mcp-tools")
