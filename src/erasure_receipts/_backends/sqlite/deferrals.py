"""SQLite: recorded deferrals (RECEIPT_SPEC.md 9.14) - signed decisions to retain a scope
until a date, and the threads each retains, so erasures and retention sweeps of every
process find them. Tables ``erasure_deferrals`` and ``erasure_deferral_threads``
(created by ``setup()`` with the other library tables, :data:`DEFERRALS_DDL`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .connection import _autocommit

__all__ = [
    "DEFERRALS_DDL",
    "close_deferral",
    "deferrals",
    "open_deferrals",
    "record_deferral",
]

DEFERRALS_DDL = """
CREATE TABLE IF NOT EXISTS erasure_deferrals (
    receipt_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    until TEXT NOT NULL,
    issued_at TEXT NOT NULL,
    entry TEXT NOT NULL,
    receipt TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    closed_at TEXT,
    closed_by TEXT,
    note TEXT
);
CREATE TABLE IF NOT EXISTS erasure_deferral_threads (
    thread_id TEXT NOT NULL,
    receipt_id TEXT NOT NULL,
    PRIMARY KEY (thread_id, receipt_id)
);
"""

Row = tuple[str, str, str, str, str, str, str, str, "str | None", "str | None", "str | None"]
_COLUMNS = (
    "receipt_id, kind, scope_id, until, issued_at, entry, receipt, state, closed_at, "
    "closed_by, note"
)


def _installed(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
        "AND name IN ('erasure_deferrals', 'erasure_deferral_threads')"
    ).fetchone()
    return bool(row and row[0] == 2)


def _end_read(conn: sqlite3.Connection, was: bool) -> None:
    if not was and conn.in_transaction:
        conn.commit()  # end an implicit read transaction (never the caller's)


def record_deferral(
    conn: sqlite3.Connection, row: Row, threads: Sequence[str], present: Sequence[str]
) -> list[str]:
    """Record a deferral and its threads in one ``BEGIN IMMEDIATE`` transaction (no
    erasure runs meanwhile), unless a thread of ``present`` lost its checkpoints since
    it was measured: then nothing is recorded and those threads are returned. The
    tables are created first if the database's library tables predate them."""
    if not _installed(conn):
        conn.executescript(DEFERRALS_DDL)
    with _autocommit(conn):
        conn.execute("BEGIN IMMEDIATE")
        gone = [
            t for t in dict.fromkeys(present)
            if conn.execute("SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1",
                            (t,)).fetchone() is None
        ]  # fmt: skip
        if gone:
            conn.rollback()
            return gone
        conn.execute(
            f"INSERT INTO erasure_deferrals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            tuple(row),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO erasure_deferral_threads (thread_id, receipt_id) VALUES (?, ?)",
            [(t, row[0]) for t in threads],
        )
    return []


def deferrals(conn: sqlite3.Connection, state: str | None) -> list[Row]:
    """Recorded deferrals (of one ``state``), oldest first."""
    was = conn.in_transaction
    if not _installed(conn):
        _end_read(conn, was)
        return []
    where, params = ("WHERE state = ?", (state,)) if state is not None else ("", ())
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM erasure_deferrals {where} ORDER BY issued_at, receipt_id",
        params,
    ).fetchall()
    _end_read(conn, was)
    return [tuple(r) for r in rows]


def open_deferrals(conn: sqlite3.Connection, thread_ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(receipt id, until)`` of open deferrals retaining any of ``thread_ids``. Inside
    the caller's transaction when there is one (an erasure's guard): never committed."""
    if not thread_ids:
        return []
    was = conn.in_transaction
    if not _installed(conn):
        _end_read(conn, was)
        return []
    out: dict[str, str] = {}
    ids = list(dict.fromkeys(thread_ids))
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ", ".join("?" * len(chunk))
        for rid, until, _ in conn.execute(
            "SELECT d.receipt_id, d.until, d.issued_at FROM erasure_deferrals d "
            "JOIN erasure_deferral_threads t ON t.receipt_id = d.receipt_id "
            f"WHERE d.state = 'open' AND t.thread_id IN ({marks}) "
            "ORDER BY d.issued_at, d.receipt_id",
            chunk,
        ).fetchall():
            out.setdefault(str(rid), str(until))
    _end_read(conn, was)
    return list(out.items())


def close_deferral(
    conn: sqlite3.Connection,
    receipt_id: str,
    state: str,
    closed_at: str,
    closed_by: str | None,
    note: str | None,
) -> bool:
    """Close an open deferral; False if it is not open."""
    if not _installed(conn):
        return False
    with _autocommit(conn):
        cur = conn.execute(
            "UPDATE erasure_deferrals SET state = ?, closed_at = ?, closed_by = ?, note = ? "
            "WHERE receipt_id = ? AND state = 'open'",
            (state, closed_at, closed_by, note, receipt_id),
        )
    return cur.rowcount > 0
