"""Measuring parts: one RFC 9162 tree in canonical order (table, then primary key)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from .._parts import LeafSink, Part, TableCount
from ..digest import EMPTY_ROOT, MerkleTree, leaf_hash, units_root
from .types import ErasureBackend, Measurement

__all__ = ["export_leaves", "measure_parts", "measure_rows"]


def _role(part: Part) -> str:
    return part.role


def _unit(part: Part) -> str:
    return part.unit


def _add(total: dict[str, TableCount], table: str, c: TableCount) -> None:
    t = total.setdefault(table, TableCount())
    t.rows += c.rows
    t.bytes += c.bytes


def _deferred(part: Part) -> bool:
    """Measured in the transaction, swept after the commit (an erasure target in another
    database, an item target): only measured here."""
    return bool(getattr(part, "deferred", False))


def _swept(part: Part) -> bool:
    """Deleted outside the transaction (a store swept through its API): not undone by a
    rollback."""
    return part.method == "sweep" and not _deferred(part)


def _late(part: Part) -> bool:
    """Erased once everything the transaction can undo is deleted and checked: a swept
    store, and a dependent target (``after="threads_verified_gone"``)."""
    return _swept(part) or (bool(getattr(part, "after", None)) and not _deferred(part))


def _take(part: Part, sink: LeafSink) -> TableCount:
    return part.measure(sink) if _deferred(part) else part.erase(sink)


def measure_parts(
    parts: Sequence[Part],
    erase: bool,
    settled: Callable[[dict[str, TableCount]], None] | None = None,
) -> Measurement:
    """Measure every part (deleting the removed ones when ``erase``), all before any
    deferred delete runs. Removed parts form one tree in table order - or, when they
    carry units, one tree per unit and a root over the units (RECEIPT_SPEC.md 9.3).
    Kept parts are only measured, into their own tree.

    With ``erase``, ``settled(tables)`` is called once everything the transaction can
    undo is deleted (with those parts' counts) and before any part is swept outside it,
    so a check that refuses the erasure runs before anything irreversible. The swept
    parts then go last; the leaf hashes are kept meanwhile (32 bytes a row) and the
    trees built in table order, as always."""
    removed = sorted((p for p in parts if _role(p) != "kept"), key=lambda p: (_unit(p), p.table))
    kept = sorted((p for p in parts if _role(p) == "kept"), key=lambda p: p.table)
    late = [p for p in removed if _late(p)] if erase else []
    done: dict[int, tuple[list[bytes], TableCount]] = {}  # id(part) -> its hashes, counts
    if late:
        for part in (p for p in removed if not _late(p)):
            hashes: list[bytes] = []
            done[id(part)] = (hashes, _take(part, hashes.append))
    by_unit: dict[str, list[Part]] = {}
    for p in removed:
        by_unit.setdefault(_unit(p), []).append(p)
    tables: dict[str, TableCount] = {}
    units: list[tuple[str, bytes, dict[str, TableCount]]] = []

    def build() -> None:
        for name, group in by_unit.items():
            tree, unit_tables = MerkleTree(), {}
            for part in group:
                if id(part) in done:
                    hashes, c = done[id(part)]
                    for h in hashes:
                        tree.append_hash(h)
                else:
                    c = _take(part, tree.append_hash) if erase else part.measure(tree.append_hash)
                unit_tables[part.table] = c
                _add(tables, part.table, c)
            units.append((name, tree.root(), unit_tables))

    if not late:
        build()
    kept_tree, kept_tables = MerkleTree(), {}
    for part in kept:
        kept_tables[part.table] = part.measure(kept_tree.append_hash)
    if erase:
        for part in sorted(removed, key=lambda p: p.table, reverse=True):
            if not _late(part) and not _deferred(part):
                part.finish()
        if settled is not None:
            counted: dict[str, TableCount] = {}
            if not late:
                counted = {k: replace(c) for k, c in tables.items()}
            for part in removed if late else ():
                if not _late(part):
                    _add(counted, part.table, done[id(part)][1])
            settled(counted)
        for part in late:
            hashes = []
            done[id(part)] = (hashes, part.erase(hashes.append))
            part.finish()
        if late:
            build()
    if not any(c.rows for c in tables.values()):
        root = EMPTY_ROOT  # an empty scope has the empty root, whatever its units
    elif any(name for name, _, _ in units):
        root = units_root((name, sum(c.rows for c in t.values()), r) for name, r, t in units)
    else:
        root = units[0][1] if units else EMPTY_ROOT
    return Measurement(root, tables, units, kept_tree.root(), kept_tables)


def measure_rows(backend: ErasureBackend) -> tuple[str, dict[str, TableCount]]:
    """The pre-deletion digest a real erasure would compute now (nothing is deleted)."""
    with backend.read_snapshot():
        m = measure_parts(backend.parts(), erase=False)
    return m.root.hex(), m.tables


def _safe_measure(backend: ErasureBackend) -> dict[str, TableCount]:
    try:
        return measure_rows(backend)[1]
    except Exception:
        return {}


def export_leaves(
    backend: ErasureBackend, select: Callable[[bytes], bool] | None = None
) -> tuple[list[bytes], list[tuple[int, bytes]]]:
    """Legal hold: the tree an erasure would measure now, in one read snapshot.

    Returns every leaf hash in tree order, and ``(index, leaf data)`` of the leaves
    ``select`` keeps (all when None). Each part must offer ``leaves()`` - its leaf data
    in the order ``measure`` hashes them. Nothing is deleted.
    """
    hashes: list[bytes] = []
    chosen: list[tuple[int, bytes]] = []
    with backend.read_snapshot():
        for part in sorted(backend.parts(), key=lambda p: p.table):
            for data in part.leaves():
                if select is None or select(data):
                    chosen.append((len(hashes), data))
                hashes.append(leaf_hash(data))
    return hashes, chosen
