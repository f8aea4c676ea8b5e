"""PostgreSQL: the erasure journal (one entry per erasure, closed by its signed receipt),
the leases on open entries (session-level advisory locks), and the tombstone look-ups.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from .schema import ADVISORY_CLASS
from .session import AsyncBridgeSession, Session, SyncSession

__all__ = [
    "CLAIM_CLASS",
    "LEASE_CLASS",
    "claim_threads",
    "is_erased",
    "journal_receipts",
    "mark_issued",
    "pending_journal",
    "purge_journal",
    "record_statement",
    "redact_journal",
    "release_claims",
    "release_lease",
    "reopen",
    "replay_state",
    "still_pending",
    "take_lease",
    "tombstone_bound",
]


def record_statement(session: Session, receipt_id: str, statement: str) -> str:
    """Journal the statement about to be signed, first writer wins; returns the winner."""
    with session.transaction():
        session.execute(
            "UPDATE erasure_journal SET statement = %s WHERE receipt_id = %s AND statement IS NULL",
            (statement, receipt_id),
        )
        rows = session.query(
            "SELECT statement FROM erasure_journal WHERE receipt_id = %s", (receipt_id,)
        )
    if not rows or rows[0][0] is None:
        raise RuntimeError(f"erasure journal entry {receipt_id} is missing")
    return str(rows[0][0])


def mark_issued(session: Session, receipt_id: str, receipt_json: bytes) -> None:
    """Close a journal entry with its signed receipt (first writer wins)."""
    with session.transaction():
        session.execute(
            "UPDATE erasure_journal SET receipt_sha256 = %s, receipt = %s "
            "WHERE receipt_id = %s AND receipt_sha256 IS NULL",
            (hashlib.sha256(receipt_json).hexdigest(), receipt_json.decode("utf-8"), receipt_id),
        )


def journal_receipts(session: Session, thread_id: str | None = None) -> list[bytes]:
    """The signed receipts kept in the journal, oldest first (``issued_at``, then receipt
    id, in code-point order), optionally of one thread."""
    where, params = ("AND thread_id = %s", (thread_id,)) if thread_id is not None else ("", ())
    rows = session.query(
        f"SELECT receipt FROM erasure_journal WHERE receipt IS NOT NULL {where} "
        'ORDER BY issued_at COLLATE "C", receipt_id COLLATE "C"',
        params,
    )
    return [str(r[0]).encode("utf-8") for r in rows]


def pending_journal(
    session: Session, older_than: str | None = None
) -> list[tuple[str, str, str, str | None]]:
    """``(receipt_id, issued_at, entry, statement)`` of erasures without a receipt."""
    cutoff, params = ('AND issued_at COLLATE "C" < %s', (older_than,)) if older_than else ("", ())
    rows = session.query(
        "SELECT receipt_id, issued_at, entry, statement FROM erasure_journal "
        f"WHERE receipt_sha256 IS NULL {cutoff} "
        'ORDER BY issued_at COLLATE "C", receipt_id COLLATE "C"',
        params,
    )
    return [(str(a), str(b), str(c), None if d is None else str(d)) for a, b, c, d in rows]


LEASE_CLASS = ADVISORY_CLASS + 1
"""Advisory-lock class of the leases on open journal entries (``erasure_receipts._lease``)."""


def take_lease(session: Session, receipt_id: str) -> Any:
    """Lease an open journal entry: a session-level advisory lock keyed by its receipt
    id, held until released or until the holder's connection ends (a killed owner's
    lease ends with it). Returns the token for :func:`release_lease`, or None if another
    session holds it.

    On a connection from a pool, the lock would last only as long as the pool keeps
    that connection, which it may close (``max_lifetime``) while the erasure is still
    signing: the lease is held on a connection of its own instead, opened with the
    pool's parameters and kept by the flow until it releases the lease (it takes no
    pool slot, so erasures never wait for one another's connections)."""
    sql = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
    pool = getattr(session, "pool", None)
    if pool is None:
        rows = session.query(sql, (LEASE_CLASS, receipt_id))
        return session if rows and rows[0][0] else None
    conninfo, kwargs = (_resolved(session, v) for v in (pool.conninfo, pool.kwargs))
    own = psycopg.Connection.connect(conninfo or "", **_lease_kwargs(kwargs))
    try:
        row = own.execute(sql, (LEASE_CLASS, receipt_id)).fetchone()
    except BaseException:
        own.close()
        raise
    if row is None or not row[0]:
        own.close()
        return None
    return own


def _resolved(session: Session, value: Any) -> Any:
    """A pool parameter: as given, or what its (sync or async) callable returns."""
    if not callable(value):
        return value
    value = value()
    if inspect.iscoroutine(value):  # an async pool's: awaited on its loop
        assert isinstance(session, AsyncBridgeSession)
        return session._call(value)
    return value


def _lease_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The pool's connection parameters, as a plain autocommit connection (an idle
    session, not one idle in a transaction; its cursor and row types are the pool's
    business, possibly async)."""
    drop = {"autocommit", "row_factory", "cursor_factory", "context", "prepare_threshold"}
    return {**{k: v for k, v in (kwargs or {}).items() if k not in drop}, "autocommit": True}


def release_lease(session: Session, receipt_id: str, token: Any) -> None:
    """End a lease taken by :func:`take_lease`, on the connection that holds it: with a
    pool, its own connection, closed (which ends the lock); else the saver's."""
    if isinstance(token, psycopg.Connection):
        token.close()
        return
    holder: Session = session
    if isinstance(token, SyncSession | AsyncBridgeSession):
        if token.conn.closed:
            return  # the lease ended with its connection
        holder = token
    holder.query("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LEASE_CLASS, receipt_id))


def still_pending(session: Session, receipt_id: str) -> bool:
    """Whether the journal entry is still open (no receipt marked issued)."""
    rows = session.query(
        "SELECT 1 FROM erasure_journal WHERE receipt_id = %s AND receipt_sha256 IS NULL",
        (receipt_id,),
    )
    return bool(rows)


def reopen(session: Session, thread_id: str) -> bool:
    """Remove a thread's tombstone (explicit opt-in to reuse its id), in a transaction of
    its own; True if one existed."""
    with session.transaction():
        rows = session.query(
            "WITH d AS (DELETE FROM erasure_tombstones WHERE thread_id = %s RETURNING 1) "
            "SELECT count(*) FROM d",
            (thread_id,),
        )
    return int(rows[0][0]) > 0


def is_erased(session: Session, thread_id: str) -> bool:
    """Whether the thread id is tombstoned."""
    rows = session.query("SELECT 1 FROM erasure_tombstones WHERE thread_id = %s", (thread_id,))
    return bool(rows)


def reopen_namespace(session: Session, prefix: str) -> bool:
    """Remove a store prefix's tombstone (RECEIPT_SPEC.md 8.1), in a transaction of its
    own; True if one existed."""
    with session.transaction():
        if not session.query("SELECT to_regclass('erasure_store_tombstones') IS NOT NULL")[0][0]:
            return False
        rows = session.query(
            "WITH d AS (DELETE FROM erasure_store_tombstones WHERE prefix = %s RETURNING 1) "
            "SELECT count(*) FROM d",
            (prefix,),
        )
    return int(rows[0][0]) > 0


def namespace_erased(session: Session, prefix: str) -> str | None:
    """The tombstoned prefix (this one or an ancestor) that refuses writes to ``prefix``."""
    if not session.query("SELECT to_regclass('erasure_store_tombstones') IS NOT NULL")[0][0]:
        return None
    rows = session.query(
        "SELECT prefix FROM erasure_store_tombstones WHERE %s = prefix "
        "OR left(%s, length(prefix) + 1) = prefix || '.' ORDER BY length(prefix) LIMIT 1",
        (prefix, prefix),
    )
    return str(rows[0][0]) if rows else None


def purge_journal(session: Session, older_than: str) -> int:
    """Delete closed journal entries of erasures that began before ``older_than``;
    returns how many (see the SQLite backend's ``purge_journal``)."""
    with session.transaction():
        rows = session.query(
            "WITH d AS (DELETE FROM erasure_journal WHERE receipt_sha256 IS NOT NULL "
            'AND issued_at COLLATE "C" < %s RETURNING 1) SELECT count(*) FROM d',
            (older_than,),
        )
    return int(rows[0][0])


def redact_journal(
    session: Session, receipt_id: str, thread_id: str, rewrite: Callable[[str], str]
) -> bool:
    """Privacy mode: replace the raw ids of a journal entry whose statement is journaled
    (see the SQLite backend's ``redact_journal``)."""
    with session.transaction():
        rows = session.query(
            "SELECT entry FROM erasure_journal WHERE receipt_id = %s AND statement IS NOT NULL "
            "FOR UPDATE",
            (receipt_id,),
        )
        if rows:
            session.execute(
                "UPDATE erasure_journal SET thread_id = %s, entry = %s WHERE receipt_id = %s",
                (thread_id, rewrite(str(rows[0][0])), receipt_id),
            )
    return bool(rows)


def tombstone_bound(session: Session, thread_id: str) -> str | None:
    """The thread's ``new_conversations`` tombstone bound (``fresh_after``), if it has
    one: a refused write of it may be a new conversation's that arrived too early."""
    rows = session.query(
        "SELECT fresh_after FROM erasure_tombstones "
        "WHERE thread_id = %s AND policy = 'new_conversations'",
        (thread_id,),
    )
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


def replay_state(session: Session) -> tuple[set[str], set[str], set[str]]:
    """Journal receipt ids, thread ids with checkpoints, tombstoned thread ids (see the
    SQLite backend's ``replay_state``), in one snapshot."""
    names = ("erasure_journal", "erasure_tombstones", "checkpoints", "checkpoint_blobs",
             "checkpoint_writes")  # fmt: skip
    with session.transaction():
        row = session.query(
            "SELECT " + ", ".join("to_regclass(%s) IS NOT NULL" for _ in names), names
        )[0]
        have = {n for n, ok in zip(names, row, strict=True) if ok}

        def ids(sql: str, table: str) -> set[str]:
            return {str(r[0]) for r in session.query(sql)} if table in have else set()

        journal = ids("SELECT receipt_id FROM erasure_journal", "erasure_journal")
        tombstoned = ids("SELECT thread_id FROM erasure_tombstones", "erasure_tombstones")
        threads: set[str] = set()
        for t in names[2:]:
            threads |= ids(f"SELECT DISTINCT thread_id FROM {t}", t)
    return journal, threads, tombstoned


CLAIM_CLASS = ADVISORY_CLASS + 2
"""Advisory-lock class of a batched retention sweep's claims on threads
(``erasure_receipts._ops.sweep_batch``): sweepers pass over threads claimed by another."""


def claim_threads(
    session: Session, threads: Sequence[str], holder: Any = None
) -> tuple[list[str], Any]:
    """Claim the threads no other session has claimed: session-level advisory locks
    (``pg_try_advisory_lock``, never waiting), held until :func:`release_claims` or the
    end of the holder's connection. Returns the claimed threads and the token for
    :func:`release_claims`. On a pool, held on a connection of its own (as a lease):
    ``holder``, a token an earlier call returned, if it is still open, so one sweep
    holds its claims on one connection."""
    sql = "SELECT t FROM unnest(%s::text[]) AS t WHERE pg_try_advisory_lock(%s, hashtext(t))"
    params = (list(threads), CLAIM_CLASS)
    pool = getattr(session, "pool", None)
    if pool is None:
        return [str(r[0]) for r in session.query(sql, params)], session
    if isinstance(holder, psycopg.Connection) and not holder.closed:
        own = holder
    else:
        conninfo, kwargs = (_resolved(session, v) for v in (pool.conninfo, pool.kwargs))
        own = psycopg.Connection.connect(conninfo or "", **_lease_kwargs(kwargs))
    try:
        rows = own.execute(sql, params).fetchall()
    except BaseException:
        own.close()  # its claims end with it (a batch's transaction still checks each thread)
        raise
    return [str(r[0]) for r in rows], own


def release_claims(session: Session, threads: Sequence[str], token: Any, last: bool = True) -> None:
    """End the claims on ``threads`` held with ``token`` (from :func:`claim_threads`);
    ``last``: nothing more is claimed with it (on a pool its connection is closed)."""
    if isinstance(token, psycopg.Connection):
        if last or token.closed:
            token.close()
        elif threads:
            token.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(t)) FROM unnest(%s::text[]) AS t",
                (CLAIM_CLASS, list(threads)),
            )
        return
    holder: Session = session
    if isinstance(token, SyncSession | AsyncBridgeSession):
        if token.conn.closed:
            return  # the claims ended with the connection
        holder = token
    if threads:
        holder.query(
            "SELECT pg_advisory_unlock(%s, hashtext(t)) FROM unnest(%s::text[]) AS t",
            (CLAIM_CLASS, list(threads)),
        )
