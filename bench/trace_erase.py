"""Structural figures of the package, to compare before and after a redesign.

    .venv/bin/python bench/trace_erase.py [--json PATH] [--store] [--cold]

Prints one JSON report (and writes it to ``PATH`` with ``--json``):

* ``source``: lines of every ``.py`` under ``src/erasure_receipts``, the number of
  modules, the largest module and the lines per module.
* ``trace``: ONE ``AttestingSqliteSaver.erase_thread`` on a temporary SQLite file
  whose target thread holds 3 checkpoints written by a small LangGraph graph (a second
  thread is kept), traced with ``sys.setprofile``:
  * ``cross_module_transfers``: profiler ``call`` events whose caller frame and callee
    frame are both in the package and in different modules (``calls`` are new frames,
    ``cross_room_transfers`` the same between different top-level modules or packages
    of the package - ``engine.protocol`` and ``engine.measure`` are one room,
    ``generator_resumes`` re-entries of a suspended generator frame); ``edges`` counts
    them per (caller module, callee module);
  * ``via_outside_frames``: package-to-package transfers between different modules
    whose direct caller is outside the package (e.g. through ``contextlib`` or
    LangGraph), attributed to the nearest package frame up the stack - not included
    in ``cross_module_transfers``;
  * ``modules_touched``: every package module with a frame during the call;
  * ``returns_across_modules``: the matching ``return`` events (informative);
  * ``statement``: how often the receipt statement is built, schema-validated and
    canonicalised. Functions are matched by code object: the name and a file in the
    package, wherever it lives - ``built``: ``build_statement``; ``validated``:
    ``validate_statement``, ``statement_is_valid``, and ``_validate`` of a file that
    also defines ``validate_statement``; ``canonicalized``: ``canonicalize`` (with
    ``floats=True``, the store-leaf mode, counted apart as ``canonicalized_store_leaf``);
    ``canonicalized_fast``: ``canonicalize_ascii_keys``, the second emitter.
    ``outermost`` counts a call only when no call of the same group is already on the
    stack (``validate_statement`` -> ``_validate`` is one validation);
    ``per_function`` gives every raw count, ``outermost_callers`` who made them and
    ``matched`` the files and lines of the functions found.
* ``mro``: the MRO of the public savers, classes from the package, from LangGraph and
  others counted separately.
* ``import_cycles``: the import graph built from the source with ``ast`` (module- and
  function-level imports, ``if TYPE_CHECKING:`` blocks ignored, ``from p import m``
  is an import of ``p.m`` when ``p.m`` is a module, else of ``p``, as import-linter
  reads it); strongly connected components of more than one module, with the edges
  inside each. String-based imports (``__import__``/``importlib`` with a computed
  name) cannot be followed; their sites are listed.

Modules are found by walking ``src/``: nothing but the public saver classes (imported
from ``erasure_receipts``) is named here, so the figures stay comparable when modules
move. By default the erasure is traced warm (one untraced erase on another database
first, so lazy imports are done); ``--cold`` traces the first erase of the process.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SRC = REPO_ROOT / "src"
PKG = "erasure_receipts"
PKG_DIR = SRC / PKG
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(BENCH_DIR))

from _common import code_state  # noqa: E402

CHECKPOINTS = 3
GROUPS = (
    "built",
    "validated",
    "canonicalized",
    "canonicalized_fast",
    "canonicalized_store_leaf",
)
GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


# -- source ---------------------------------------------------------------------------


def discover() -> dict[str, Path]:
    """Module name -> file, for every .py under src/erasure_receipts."""
    out: dict[str, Path] = {}
    for f in sorted(PKG_DIR.rglob("*.py")):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def source_figures(mods: dict[str, Path]) -> dict[str, Any]:
    lines = {m: len(f.read_text(encoding="utf-8").splitlines()) for m, f in mods.items()}
    largest = max(lines, key=lambda m: lines[m])
    return {
        "src_lines": sum(lines.values()),
        "modules": len(mods),
        "largest_module": {
            "path": str(mods[largest].relative_to(REPO_ROOT)),
            "lines": lines[largest],
        },
        "lines_per_module": dict(sorted(lines.items(), key=lambda kv: -kv[1])),
    }


# -- import graph ---------------------------------------------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_pkg: bool, mods: set[str]) -> None:
        self.package = module if is_pkg else module.rpartition(".")[0]
        self.mods = mods
        self.depth = 0
        self.found: list[tuple[str, int, str]] = []  # (target, line, "module"|"function")
        self.dynamic: list[int] = []

    def _target(self, name: str) -> str | None:
        while name and name not in self.mods:
            name = name.rpartition(".")[0]
        return name or None

    def _add(self, name: str, line: int) -> None:
        t = self._target(name)
        if t is not None:
            self.found.append((t, line, "function" if self.depth else "module"))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for n in node.orelse:
                self.visit(n)
            return
        self.generic_visit(node)

    def _scope(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = _scope
    visit_AsyncFunctionDef = _scope
    visit_Lambda = _scope

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._add(a.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            if node.level > 1:
                base = base[: len(base) - (node.level - 1)]
            src = ".".join(base + ([node.module] if node.module else []))
        else:
            src = node.module or ""
        for a in node.names:
            sub = f"{src}.{a.name}"
            self._add(sub if sub in self.mods else src, node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in ("__import__", "import_module") and not (
            node.args and isinstance(node.args[0], ast.Constant)
        ):
            self.dynamic.append(node.lineno)
        elif name in ("__import__", "import_module") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self._add(arg.value, node.lineno)
        self.generic_visit(node)


def _scc(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # recursion depth <= number of modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    return out


def import_cycles(mods: dict[str, Path]) -> dict[str, Any]:
    names = set(mods)
    graph: dict[str, dict[str, list[str]]] = {}
    dynamic: list[str] = []
    for m, f in mods.items():
        v = _Imports(m, f.name == "__init__.py", names)
        v.visit(ast.parse(f.read_text(encoding="utf-8"), str(f)))
        rel = str(f.relative_to(REPO_ROOT))
        for target, line, where in v.found:
            site = f"{rel}:{line} ({where})"
            sites = graph.setdefault(m, {}).setdefault(target, []) if target != m else [site]
            if site not in sites:
                sites.append(site)
        dynamic += [f"{rel}:{line}" for line in v.dynamic]

    def cycles(keep: str | None) -> list[dict[str, Any]]:
        edges = {
            a: {b for b, sites in bs.items() if keep is None or any(keep in s for s in sites)}
            for a, bs in graph.items()
        }
        comps = [c for c in _scc(sorted(names), edges) if len(c) > 1]
        return [
            {
                "modules": c,
                "edges": [
                    f"{a} -> {b}: " + ", ".join(graph[a][b])
                    for a in c
                    for b in sorted(edges.get(a, ()))
                    if b in c
                ],
            }
            for c in sorted(comps, key=lambda c: (-len(c), c))
        ]

    every = cycles(None)
    top = cycles("(module)")
    return {
        "count": len(every),
        "sccs": every,
        "module_level_only": {"count": len(top), "sccs": [c["modules"] for c in top]},
        "import_edges": sum(len(bs) for bs in graph.values()),
        "string_imports_not_followed": dynamic,
    }


# -- MRO ------------------------------------------------------------------------------


def mro_figures() -> dict[str, Any]:
    import erasure_receipts

    out: dict[str, Any] = {}
    for name in ("AttestingSqliteSaver", "AsyncAttestingSqliteSaver", "AttestingPostgresSaver"):
        try:
            cls = getattr(erasure_receipts, name)
        except ImportError as e:  # e.g. no psycopg
            out[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        groups: dict[str, list[str]] = {"package": [], "langgraph": [], "other": []}
        for c in cls.__mro__:
            top = c.__module__.split(".")[0]
            key = "package" if top == PKG else "langgraph" if top == "langgraph" else "other"
            groups[key].append(f"{c.__module__}.{c.__qualname__}")
        out[name] = {
            "length": len(cls.__mro__),
            "package": len(groups["package"]),
            "langgraph": len(groups["langgraph"]),
            "other": len(groups["other"]),
            "classes": groups,
        }
    return out


# -- the traced erasure ---------------------------------------------------------------


def _graph(saver: Any) -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        text: str

    def answer(state: State) -> dict[str, Any]:
        return {"text": state["text"] + " / noted"}

    g = StateGraph(State)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def _prepare(db: Path, archive: Path, store: bool) -> tuple[Any, Any, list[Any]]:
    """An open saver (and store) on ``db`` with thread 'target' (3 checkpoints) and
    thread 'other'. Returns (saver, store namespaces or None, contexts to close)."""
    from contextlib import ExitStack

    from erasure_receipts import AttestingSqliteSaver, Signer

    stack = ExitStack()
    kw: dict[str, Any] = {}
    namespaces = None
    if store:
        from langgraph.store.sqlite import SqliteStore

        st = stack.enter_context(SqliteStore.from_conn_string(str(db)))
        st.setup()
        st.put(("users", "target"), "fact", {"v": "secret"})
        st.put(("users", "other"), "fact", {"v": "kept"})
        namespaces = [("users", "target")]
        kw = {"store": st}
    saver = stack.enter_context(
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=Signer.from_seed(bytes(range(32))), archive=archive, **kw
        )
    )
    graph = _graph(saver)
    for tid in ("target", "other"):
        graph.invoke({"text": f"hello from {tid}"}, {"configurable": {"thread_id": tid}})
    n = sum(1 for _ in saver.list({"configurable": {"thread_id": "target"}}))
    if n != CHECKPOINTS:
        raise SystemExit(f"expected {CHECKPOINTS} checkpoints in the target thread, got {n}")
    return saver, namespaces, [stack]


class _Tracer:
    def __init__(self, mods: dict[str, Path]) -> None:
        self.by_file = {os.path.realpath(f): m for m, f in mods.items()}
        self.file_cache: dict[str, str | None] = {}
        self.validate_files = {
            os.path.realpath(f)
            for f in mods.values()
            if "def validate_statement(" in f.read_text(encoding="utf-8")
        }
        self.calls: Counter[tuple[str, str]] = Counter()
        self.resumes: Counter[tuple[str, str]] = Counter()
        self.via_outside: Counter[tuple[str, str]] = Counter()
        self.returns = 0
        self.touched: set[str] = set()
        self.seen_gen: dict[int, FrameType] = {}
        self.per_function: Counter[str] = Counter()
        self.outermost: Counter[str] = Counter()
        self.callers: dict[str, Counter[str]] = {}
        self.active: Counter[str] = Counter()
        self.group_frames: dict[int, str] = {}
        self.matched: dict[str, set[str]] = {}

    def module(self, filename: str) -> str | None:
        try:
            return self.file_cache[filename]
        except KeyError:
            m = self.by_file.get(os.path.realpath(filename))
            self.file_cache[filename] = m
            return m

    def group(self, frame: FrameType, code: Any, filename: str) -> str | None:
        name = code.co_name
        if name == "build_statement":
            return "built"
        if name in ("validate_statement", "statement_is_valid"):
            return "validated"
        if name == "_validate" and os.path.realpath(filename) in self.validate_files:
            return "validated"
        if name == "canonicalize":
            # floats=True is the store-leaf mode (digests of store values), not a statement
            leaf = frame.f_locals.get("floats") is True
            return "canonicalized_store_leaf" if leaf else "canonicalized"
        if name == "canonicalize_ascii_keys":
            return "canonicalized_fast"
        return None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "return":
            g = self.group_frames.pop(id(frame), None)
            if g is not None:
                self.active[g] -= 1
            back = frame.f_back
            if back is not None:
                callee = self.module(frame.f_code.co_filename)
                caller = self.module(back.f_code.co_filename)
                if callee is not None and caller is not None and caller != callee:
                    self.returns += 1
            return
        if event != "call":
            return
        code = frame.f_code
        callee = self.module(code.co_filename)
        if callee is None:
            return
        self.touched.add(callee)
        resumed = False
        if code.co_flags & GENERATOR_FLAGS:
            resumed = id(frame) in self.seen_gen
            self.seen_gen[id(frame)] = frame  # keep it alive: ids stay unique
        back = frame.f_back
        caller = self.module(back.f_code.co_filename) if back is not None else None
        if caller is not None and caller != callee:
            (self.resumes if resumed else self.calls)[(caller, callee)] += 1
        elif caller is None and back is not None:
            up = back.f_back
            while up is not None and self.module(up.f_code.co_filename) is None:
                up = up.f_back
            if up is not None and self.module(up.f_code.co_filename) != callee:
                self.via_outside[(str(self.module(up.f_code.co_filename)), callee)] += 1
        if resumed:
            return
        g = self.group(frame, code, code.co_filename)
        if g is None:
            return
        key = f"{callee}.{code.co_name}"
        self.per_function[key] += 1
        self.matched.setdefault(g, set()).add(
            f"{Path(code.co_filename).resolve().relative_to(REPO_ROOT)}:{code.co_firstlineno}"
            f" {code.co_name}"
        )
        if self.active[g] == 0:
            self.outermost[g] += 1
            who = f"{caller}.{back.f_code.co_name}" if back is not None else "?"
            self.callers.setdefault(g, Counter())[who] += 1
        self.active[g] += 1
        self.group_frames[id(frame)] = g

    def report(self) -> dict[str, Any]:
        def edges(c: Counter[tuple[str, str]]) -> dict[str, int]:
            return {f"{a} -> {b}": n for (a, b), n in sorted(c.items(), key=lambda kv: -kv[1])}

        both = self.calls + self.resumes

        def room(module: str) -> str:  # erasure_receipts._engine.protocol -> engine
            parts = module.split(".")
            return parts[1] if len(parts) > 1 else parts[0]

        rooms = Counter[tuple[str, str]]()
        for (a, b), n in both.items():
            if room(a) != room(b):
                rooms[(room(a), room(b))] += n
        return {
            "cross_module_transfers": sum(both.values()),
            "cross_room_transfers": sum(rooms.values()),
            "room_edges": edges(rooms),
            "calls": sum(self.calls.values()),
            "generator_resumes": sum(self.resumes.values()),
            "returns_across_modules": self.returns,
            "distinct_module_pairs": len(both),
            "edges": edges(both),
            "via_outside_frames": {
                "transfers": sum(self.via_outside.values()),
                "edges": edges(self.via_outside),
            },
            "modules_touched_count": len(self.touched),
            "modules_touched": sorted(self.touched),
            "statement": {
                "outermost": {g: self.outermost.get(g, 0) for g in GROUPS},
                "canonicalized_any_emitter": self.outermost.get("canonicalized", 0)
                + self.outermost.get("canonicalized_fast", 0),
                "per_function": dict(sorted(self.per_function.items())),
                "outermost_callers": {
                    g: dict(c.most_common()) for g, c in sorted(self.callers.items())
                },
                "matched": {g: sorted(s) for g, s in sorted(self.matched.items())},
            },
        }


def trace_erase(mods: dict[str, Path], store: bool, cold: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="trace-erase-") as tmp:
        root = Path(tmp)
        if not cold:  # warm-up: lazy imports and first-use caches, on another database
            (root / "warm").mkdir()
            saver, ns, ctx = _prepare(root / "warm" / "w.db", root / "warm" / "r", store)
            saver.erase_thread("target", store_namespaces=ns)
            for c in ctx:
                c.close()
        saver, ns, ctx = _prepare(root / "t.db", root / "receipts", store)
        tracer = _Tracer(mods)
        t0 = time.perf_counter()
        threading.setprofile(tracer)
        sys.setprofile(tracer)
        try:
            receipt = saver.erase_thread("target", store_namespaces=ns)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - t0
        kept = sum(1 for _ in saver.list({"configurable": {"thread_id": "other"}}))
        for c in ctx:
            c.close()
        out = {
            "setup": {
                "saver": "AttestingSqliteSaver (from_conn_string, archive directory)",
                "store": "SqliteStore in the same file" if store else None,
                "target_checkpoints": CHECKPOINTS,
                "other_thread_checkpoints_kept": kept,
                "warm": not cold,
                "receipt_pre_state_rows": _rows(receipt),
                "traced_seconds": round(elapsed, 3),
            },
        }
        out.update(tracer.report())
        return out


def _rows(receipt: Any) -> Any:
    try:
        tables = receipt.predicate["pre_state"]["tables"]
        return {"status": receipt.status, **{t: v["rows"] for t, v in sorted(tables.items())}}
    except (AttributeError, KeyError, TypeError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write the report to PATH")
    ap.add_argument("--store", action="store_true", help="erase a SqliteStore namespace too")
    ap.add_argument("--cold", action="store_true", help="trace the first erase (no warm-up)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    mods = discover()
    doc: dict[str, Any] = {
        "benchmark": "trace_erase",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "code": code_state(),
        "source": source_figures(mods),
        "trace": trace_erase(mods, args.store, args.cold),
        "mro": mro_figures(),
        "import_cycles": import_cycles(mods),
    }
    import erasure_receipts

    loaded = Path(erasure_receipts.__file__).resolve().parent
    if loaded != PKG_DIR.resolve():
        doc["warning"] = f"erasure_receipts imported from {loaded}, not {PKG_DIR}"
    doc["seconds"] = round(time.perf_counter() - t0, 2)
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
