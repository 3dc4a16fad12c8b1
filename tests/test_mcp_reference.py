"""The public reference MCP servers, through McpManager.

Installed by ``.ci/install-reference-servers PREFIX``; the tests find them through
``CALIBAN_REFERENCE_SERVERS=PREFIX`` and are skipped when it is unset.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hang import hang_guard
from mcp_servers.reference import reference_servers

from caliban.mcp.client import McpManager
from caliban.mcp.tools import call_output, unmark
from caliban.messages import ImagePart
from caliban.tools.base import ToolOutput

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.reference_servers]

ENV_VAR = "CALIBAN_REFERENCE_SERVERS"


@pytest.fixture
def prefix() -> Path:
    value = os.environ.get(ENV_VAR)
    if not value:
        pytest.skip(
            f"{ENV_VAR} is not set: run `.ci/install-reference-servers /tmp/refsrv` and "
            f"`export {ENV_VAR}=/tmp/refsrv` to run the reference-server tests"
        )
    root = Path(value)
    expected = [
        root / "npm/node_modules/.bin/mcp-server-everything",
        root / "npm/node_modules/.bin/mcp-server-filesystem",
        root / "npm/node_modules/.bin/mcp-server-memory",
        root / "venv/bin/mcp-server-time",
        root / "venv/bin/mcp-server-git",
    ]
    missing = [str(p) for p in expected if not p.exists()]
    assert not missing, f"{ENV_VAR}={root} lacks {missing}; run .ci/install-reference-servers"
    return root


async def call(manager: McpManager, server: str, name: str, args: dict[str, Any]) -> ToolOutput:
    """``manager.call_tool`` as the model sees its outcome."""
    outcome = await manager.call_tool(server, name, args)
    return call_output(outcome, server=server, tool=name)


def running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie waiting to be reaped is dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one untracked file."""
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "new.txt").write_text("x")
    return path


async def test_all_reference_servers_connect_list_and_answer_a_call(
    prefix: Path, tmp_path: Path, repo: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("remember the milk\n")

    async with McpManager(reference_servers(prefix, work)) as manager:
        with hang_guard():
            statuses = await manager.wait_ready()
        assert {s.name: s.state for s in statuses} == dict.fromkeys(
            ["everything", "filesystem", "memory", "time", "git"], "connected"
        ), [(s.name, s.error, s.stderr_tail) for s in statuses]
        counts = {s.name: s.tool_count for s in statuses}
        assert all(n > 0 for n in counts.values()), counts
        names = {t.name for t in manager.tools()}
        for wire in (
            "mcp__everything__echo",
            "mcp__filesystem__list_directory",
            "mcp__memory__create_entities",
            "mcp__time__get_current_time",
            "mcp__git__git_status",
        ):
            assert wire in names

        echo = await call(manager, "everything", "echo", {"message": "hello caliban"})
        assert unmark(echo.as_text) == "Echo: hello caliban" and not echo.is_error

        listing = await call(manager, "filesystem", "list_directory", {"path": str(work)})
        assert "[FILE] notes.txt" in listing.as_text
        outside = await call(manager, "filesystem", "read_text_file", {"path": "/etc/hostname"})
        assert outside.is_error  # the server's own sandbox error comes back as a result

        entity = {"name": "caliban", "entityType": "agent", "observations": ["uses MCP"]}
        await call(manager, "memory", "create_entities", {"entities": [entity]})
        graph = await call(manager, "memory", "read_graph", {})
        assert json.loads(unmark(graph.as_text))["entities"][0]["name"] == "caliban"

        now = await call(manager, "time", "get_current_time", {"timezone": "UTC"})
        assert json.loads(unmark(now.as_text))["timezone"] == "UTC"

        status = await call(manager, "git", "git_status", {"repo_path": str(repo)})
        assert "new.txt" in status.as_text and not status.is_error

        pids = [s.pid for s in statuses if s.pid is not None]
        assert len(pids) == 5
    assert not [pid for pid in pids if running(pid)]


async def test_reference_content_types_and_annotations(prefix: Path, tmp_path: Path) -> None:
    [everything] = reference_servers(prefix, tmp_path)[:1]
    async with McpManager([everything]) as manager:
        with hang_guard():
            await manager.wait_ready()
        by_name = {t.tool_name: t for t in manager.tools()}
        assert by_name["echo"].read_only and not by_name["toggle-simulated-logging"].read_only
        image = await call(manager, "everything", "get-tiny-image", {})
        assert any(isinstance(p, ImagePart) and p.media_type == "image/png" for p in image.content)
        structured = await call(
            manager, "everything", "get-structured-content", {"location": "New York"}
        )
        assert "temperature" in json.loads(unmark(structured.as_text))
        reference = await call(
            manager,
            "everything",
            "get-resource-reference",
            {"resourceType": "Text", "resourceId": 1},
        )
        assert "Resource 1" in reference.as_text
        blob = await call(
            manager,
            "everything",
            "get-resource-reference",
            {"resourceType": "Blob", "resourceId": 2},
        )
        assert "Resource 2: This is a base64 blob created at" in blob.as_text  # text/plain, read
