"""The shape of the code, checked: no import cycle among the project's modules, algorithms see
only the collective context, and host-agent modules stay small.

Imports are read from the source with ``ast`` (nothing is imported), counting those a module
makes at load time; imports under ``if TYPE_CHECKING:`` are for annotations only and cannot
form a cycle at run time, so they are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controller", "host_agents", "mininet_topos")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(tree: ast.Module) -> list[str]:
    names: list[str] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.append(node.module)
                names.extend(f"{node.module}.{alias.name}" for alias in node.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(
                    node, ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    visit([n for n in inner if isinstance(n, ast.stmt)])

    visit(tree.body)
    return names


def import_graph() -> dict[str, set[str]]:
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    modules = {module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _runtime_imports(ast.parse(path.read_text())):
            if imported in modules and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_algorithms_import_only_the_context() -> None:
    graph = import_graph()
    allowed = {"host_agents.context", "host_agents.reduction"}  # context, and pure lane math
    for name, targets in graph.items():
        if name.startswith("host_agents.algorithms."):
            outside = {t for t in targets if not t.startswith("host_agents.algorithms")} - allowed
            assert not outside, f"{name} imports {sorted(outside)}: algorithms see only the context"


def test_host_agent_modules_stay_small() -> None:
    """One job per module: none of the host agent's modules grows past about 400 lines."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "host_agents").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 420
    }
    assert not long, f"split these by job: {long}"
