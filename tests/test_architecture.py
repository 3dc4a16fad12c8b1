"""The shape of the code: no import cycles, no module too long to read, one door for child
processes."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "caliban"
MAX_MODULE_LINES = 1_000
OVERSIZE_TODAY: set[str] = set()
"""Modules still over the limit; each is being split (and leaves this set)."""
DOOR = PACKAGE / "exec"
"""The one package that may start a process (:mod:`caliban.exec`)."""
SPAWNING = re.compile(
    r"subprocess|create_subprocess_|open_process|stdio_client|Popen|posix_spawn|forkpty"
    r"|multiprocessing|ProcessPool"
    r"|\bos\.(fork|exec\w*|spawn\w*|system|popen)\b|\bpty\.spawn"
)
"""Every way Python (asyncio, anyio, the MCP SDK) starts a process, as written in code."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every caliban module ``module`` imports anywhere: at module level, inside functions
    and under ``TYPE_CHECKING`` alike."""

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [known(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base)
                for alias in node.names
            ]
        else:
            continue
        yield from (target for target in targets if target and target != module)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_not_even_inside_functions() -> None:
    modules = _modules()
    graph = {name: set(_imports(name, path, modules)) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_is_too_long_to_read() -> None:
    long = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES
    }
    assert long <= OVERSIZE_TODAY, f"over {MAX_MODULE_LINES} lines: {sorted(long - OVERSIZE_TODAY)}"


def _spawn_sites(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if SPAWNING.search(line)]


def test_every_child_process_starts_through_caliban_exec() -> None:
    """Nothing outside ``caliban/exec/`` starts a process (or names a way to, in a comment):
    a sandbox wraps every command there, and stop_group stops them all."""
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if DOOR not in path.parents
        for line in _spawn_sites(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_spawn_finder_finds_each_way_in() -> None:
    ways = [
        "import subprocess",
        "await asyncio.create_subprocess_exec(*argv)",
        "await asyncio.create_subprocess_shell(line)",
        "await anyio.open_process(argv)",
        "from mcp.client.stdio import stdio_client",
        "pid = os.fork()",
        "os.execvp(argv[0], argv)",
        "os.spawnlp(os.P_WAIT, 'ls')",
        "os.system('ls')",
        "os.popen('ls')",
        "os.posix_spawn(path, argv, env)",
        "pty.spawn(argv)",
        "loop.subprocess_exec(factory, *argv)",
        "multiprocessing.Process(target=work).start()",
        "ProcessPoolExecutor().submit(work)",
    ]
    assert _spawn_sites("\n".join(ways)) == list(range(1, len(ways) + 1))
    assert _spawn_sites("session.env.fork()\nos.path.exists(p)\nfork_session()") == []
