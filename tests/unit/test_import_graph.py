"""The verify side's import graph has no cycles (every import counts: top-level, inside
functions, and under ``TYPE_CHECKING``), and trust and receipt rules sit below it.

Read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "erasure_receipts"
VERIFY_SIDE = ("erasure_receipts.verify", "erasure_receipts.proof", "erasure_receipts.log")


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its source."""
    base = pkg.name
    mods: dict[str, Path] = {}
    for f in pkg.rglob("*.py"):
        parts = f.relative_to(pkg.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {}
    for name, f in mods.items():
        here = name if f.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    target = ".".join(up + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names]
                found = [m for m in subs if m in mods] or [target]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            deps |= {m for m in found if m in mods and m != name and m.startswith(base)}
        graph[name] = deps
    return graph


def reachable(graph: dict[str, set[str]], roots: tuple[str, ...]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_detector_finds_a_cycle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_verify_side_has_no_import_cycles() -> None:
    graph = import_graph()
    side = reachable(graph, VERIFY_SIDE)
    assert {"erasure_receipts.receipt", "erasure_receipts.request"} <= side
    sub = {m: graph[m] & side for m in side}
    assert cycles(sub) == []


def test_the_verify_side_does_not_reach_the_erasure_side_or_the_cli() -> None:
    side = reachable(import_graph(), VERIFY_SIDE)
    erasure = {"engine", "attesting", "savers", "postgres", "history", "subject", "thread",
               "backends", "app", "app_postgres", "cli", "_cli", "index", "_ops",
               "_surface", "_engine", "_savers", "_backends", "_lease"}  # fmt: skip
    assert sorted(m for m in side if m.split(".")[1] in erasure) == []


def test_rules_sit_below_request_and_trust() -> None:
    """receipt.py (the statement's rules) imports neither request.py nor trust.py nor
    verify.py; trust.py imports no verifier."""
    graph = import_graph()
    assert not graph["erasure_receipts.receipt"] & {
        "erasure_receipts.request", "erasure_receipts.trust", "erasure_receipts.verify"
    }  # fmt: skip
    assert not graph["erasure_receipts.trust"] & {
        "erasure_receipts.request", "erasure_receipts.verify"
    }  # fmt: skip


def test_the_whole_package_has_no_import_cycles() -> None:
    """Function-level imports included (import-linter's acyclic contract sees runtime
    imports between sibling packages; this sees every module). The package root is left
    out: it is the public face, re-exporting (lazily) what the modules define, and
    modules import only ``__version__`` from it."""
    root = "erasure_receipts"
    graph = {m: deps - {root} for m, deps in import_graph().items() if m != root}
    assert cycles(graph) == []


def test_a_saver_is_its_langgraph_parent_plus_one_surface() -> None:
    """Composition, not a mixin chain: between each saver and its LangGraph parent there
    is only the public-method surface; the flows live in the eraser it holds."""
    from erasure_receipts import AsyncAttestingSqliteSaver, AttestingSqliteSaver
    from erasure_receipts._engine.eraser import Eraser

    for saver in (AttestingSqliteSaver, AsyncAttestingSqliteSaver):
        ours = [c.__name__ for c in saver.__mro__ if c.__module__.startswith("erasure_receipts")]
        assert len(ours) == 3, ours  # the saver, its surface, the configuration properties
        assert not issubclass(saver, Eraser)
