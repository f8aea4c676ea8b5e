"""PostgreSQL: recorded deferrals (RECEIPT_SPEC.md 9.14) - signed decisions to retain a
scope until a date, and the threads each retains, so erasures and retention sweeps of
every worker find them. Tables ``erasure_deferrals`` and ``erasure_deferral_threads``,
created by ``setup()`` (:func:`ensure_deferrals`, in ``current_schema()``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any

from psycopg import errors as pg_errors

from .schema import ADVISORY_CLASS
from .session import Session

__all__ = [
    "DEFERRALS_SQL",
    "close_deferral",
    "deferrals",
    "ensure_deferrals",
    "open_deferrals",
    "record_deferral",
]

log = logging.getLogger("erasure_receipts")

DEFERRALS_SQL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS erasure_deferrals (
    receipt_id text PRIMARY KEY,
    kind text NOT NULL,
    scope_id text NOT NULL,
    until text NOT NULL,
    issued_at text NOT NULL,
    entry text NOT NULL,
    receipt text NOT NULL,
    state text NOT NULL DEFAULT 'open',
    closed_at text,
    closed_by text,
    note text
)""",
    """CREATE TABLE IF NOT EXISTS erasure_deferral_threads (
    thread_id text NOT NULL,
    receipt_id text NOT NULL,
    PRIMARY KEY (thread_id, receipt_id)
)""",
)

Row = tuple[str, str, str, str, str, str, str, str, "str | None", "str | None", "str | None"]
_COLUMNS = (
    "receipt_id, kind, scope_id, until, issued_at, entry, receipt, state, closed_at, "
    "closed_by, note"
)
_INSTALLED = (
    "SELECT to_regclass('erasure_deferrals') IS NOT NULL "
    "AND to_regclass('erasure_deferral_threads') IS NOT NULL"
)


_SEEN: weakref.WeakSet[Any] = weakref.WeakSet()
"""Connections on which the tables were found (tables are not dropped while in use; a
connection that has not seen them asks again, so a later ``setup()`` is noticed)."""


def _installed(session: Session) -> bool:
    conn = getattr(session, "conn", None)
    if conn is not None and conn in _SEEN:
        return True  # saves a round trip per thread in a sweep
    found = bool(session.query(_INSTALLED)[0][0])
    if found and conn is not None:
        _SEEN.add(conn)
    return found


def ensure_deferrals(session: Session) -> None:
    """Create the deferral tables if they are missing (``setup()``); a role that may not
    create them gets a warning, and ``defer()`` then fails with the database's error."""
    if _installed(session):
        return
    try:
        with session.transaction():
            for statement in DEFERRALS_SQL:
                session.execute(statement)
    except pg_errors.InsufficientPrivilege as exc:
        log.warning("deferral tables not created (%s); run setup() once as the tables' owner",
                    str(exc).strip().splitlines()[0])  # fmt: skip
    except pg_errors.UniqueViolation:  # another worker created them at the same moment
        pass


def _text(v: Any) -> Any:
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).decode("utf-8")
    return v


def record_deferral(
    session: Session, row: Row, threads: Sequence[str], present: Sequence[str]
) -> list[str]:
    """Record a deferral and its threads in one transaction holding each thread's
    advisory lock shared (an erasure holds it exclusively until its commit: one that
    started first is waited for, one that starts later waits and then sees the
    deferral), unless a thread of ``present`` lost its checkpoints since it was
    measured: then nothing is recorded and those threads are returned. The tables are
    created first if this database's schema predates them."""
    ensure_deferrals(session)
    with session.transaction():
        for t in sorted(set(threads)):  # the erasures' order: no deadlock
            session.execute(
                "SELECT pg_advisory_xact_lock_shared(%s, hashtext(%s))", (ADVISORY_CLASS, t)
            )
        gone = [
            t for t in dict.fromkeys(present)
            if not session.query("SELECT 1 FROM checkpoints WHERE thread_id = %s LIMIT 1", (t,))
        ]  # fmt: skip
        if gone:
            return gone  # nothing written: the transaction commits nothing
        session.execute(
            f"INSERT INTO erasure_deferrals ({_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            tuple(row),
        )
        for t in dict.fromkeys(threads):
            session.execute(
                "INSERT INTO erasure_deferral_threads (thread_id, receipt_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (t, row[0]),
            )
    return []


def deferrals(session: Session, state: str | None) -> list[Row]:
    """Recorded deferrals (of one ``state``), oldest first."""
    if not _installed(session):
        return []
    where, params = ("WHERE state = %s", (state,)) if state is not None else ("", ())
    rows = session.query(
        f"SELECT {_COLUMNS} FROM erasure_deferrals {where} "
        'ORDER BY issued_at COLLATE "C", receipt_id COLLATE "C"',
        params,
    )
    return [tuple(_text(v) for v in r) for r in rows]


def open_deferrals(session: Session, thread_ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(receipt id, until)`` of open deferrals retaining any of ``thread_ids`` (inside
    an erasure's transaction: what committed before its statement)."""
    if not thread_ids or not _installed(session):
        return []
    rows = session.query(
        "SELECT d.receipt_id, d.until FROM erasure_deferrals d "
        "JOIN erasure_deferral_threads t ON t.receipt_id = d.receipt_id "
        "WHERE d.state = 'open' AND t.thread_id = ANY(%s) "
        'ORDER BY d.issued_at COLLATE "C", d.receipt_id COLLATE "C"',
        (list(dict.fromkeys(thread_ids)),),
    )
    found = {str(_text(r[0])): str(_text(r[1])) for r in rows}  # in order, once each
    return list(found.items())


def close_deferral(
    session: Session,
    receipt_id: str,
    state: str,
    closed_at: str,
    closed_by: str | None,
    note: str | None,
) -> bool:
    """Close an open deferral; False if it is not open."""
    if not _installed(session):
        return False
    with session.transaction():
        n = session.execute(
            "UPDATE erasure_deferrals SET state = %s, closed_at = %s, closed_by = %s, "
            "note = %s WHERE receipt_id = %s AND state = 'open'",
            (state, closed_at, closed_by, note, receipt_id),
        )
    return n > 0
