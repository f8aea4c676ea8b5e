"""A real LangGraph graph with the properties that make erasure hard (shared by tests)."""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from erasure_receipts.digest import EMPTY_ROOT, encode_row, leaf_hash, node_hash

# The graph is the example's own (examples/erase_thread.py), so the suite also proves the
# example does what its docstring says: marker in turn 1, store item, compaction.
sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
from erase_thread import MARKER as MARKER
from erase_thread import build_graph as build_graph

TURNS = [f"my SSN is {MARKER}", "what's the weather?", "book a table", "thanks", "bye"]


def human(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=text)]}


def marker_in_files(db: Path, marker: str = MARKER) -> dict[str, int]:
    needle = marker.encode()
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        out[p.name] = p.read_bytes().count(needle) if p.exists() else 0
    return out


def raw_rows(db: Path, table: str, where: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows read with a fresh connection, in primary-key order, all columns."""
    with sqlite3.connect(db) as conn:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        if not info:
            return []
        pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        return conn.execute(
            f"SELECT * FROM {table} WHERE {where} ORDER BY {', '.join(pk)}", params
        ).fetchall()


def columns(db: Path, table: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def pk_columns(db: Path, table: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        return [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]


def naive_root(hashes: list[bytes]) -> bytes:
    """RFC 9162 MTH, written recursively and independently of MerkleTree."""
    if not hashes:
        return EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return node_hash(naive_root(hashes[:k]), naive_root(hashes[k:]))


def independent_digest(db: Path, tables: dict[str, tuple[str, tuple[Any, ...]]]) -> str:
    """Recompute the pre-digest from raw rows: tables in name order, rows in pk order."""
    hashes = []
    for table in sorted(tables):
        where, params = tables[table]
        cols, pk = columns(db, table), pk_columns(db, table)
        for row in raw_rows(db, table, where, params):
            named = list(zip(cols, row, strict=True))
            pkv = [row[cols.index(c)] for c in pk]
            hashes.append(leaf_hash(encode_row(table, pkv, named)))
    return naive_root(hashes).hex()


def sha(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()
