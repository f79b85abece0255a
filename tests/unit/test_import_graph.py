"""The engine's import graph, read from the source: no loops, no folders that import
each other, the run's order above the stages it calls.

Every import counts, a function's own included (``import`` inside a function is how a
loop hides). What is still owed is listed here by name and may only shrink: a new loop
or a new pair of folders importing each other fails the suite.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "distcp"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """module -> the distcp modules it imports (anywhere in its body)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    out: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                    + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target != "distcp":
                    out[name].add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _folder(module: str) -> str:
    """A module's folder under ``distcp/``; a top-level module is a room of its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else module


#: Loops still owed (each a set of modules), to be cut, never added to.
OWED_LOOPS: set[frozenset[str]] = set()

#: Folder pairs (a top-level module is a room of its own) that still import each other,
#: to be cut, never added to.
OWED_PAIRS: set[frozenset[str]] = set()


def test_no_import_loop_beyond_those_owed() -> None:
    loops = set(_cycles(_graph()))
    assert loops <= OWED_LOOPS, sorted(sorted(c) for c in loops - OWED_LOOPS)


def test_no_two_folders_import_each_other_beyond_those_owed() -> None:
    graph = _graph()
    folders: dict[str, set[str]] = defaultdict(set)
    for a, targets in graph.items():
        for b in targets:
            if _folder(a) != _folder(b):
                folders[_folder(a)].add(_folder(b))
    pairs = {frozenset({a, b}) for a, bs in folders.items() for b in bs
             if a in folders.get(b, set())}
    assert pairs <= OWED_PAIRS, sorted(sorted(p) for p in pairs - OWED_PAIRS)


def test_the_run_is_above_the_stages_it_calls() -> None:
    """``run/`` conducts; nothing it calls imports it back."""
    graph = _graph()
    back = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if b.startswith("distcp.run.") and not a.startswith("distcp.run")
                  and a not in ("distcp", "distcp.cli"))
    assert back == []


def test_the_state_directory_is_below_the_stages() -> None:
    """``state/`` is read by planning, commit and the run: it imports none of them."""
    graph = _graph()
    up = sorted(f"{a} -> {b}" for a, targets in graph.items() if a.startswith("distcp.state")
                for b in targets if b.startswith(("distcp.commit", "distcp.planning",
                                                  "distcp.run", "distcp.spark")))
    assert up == []


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = _graph()
    assert "distcp.spark.job" in graph["distcp.run.pipeline"]  # at the top
    assert "distcp.run.pipeline" in graph["distcp.run.forkjob"]  # inside fork_job
    # the loop finder itself, on a loop that a function's import closes
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        frozenset({"a", "b", "c"})]
