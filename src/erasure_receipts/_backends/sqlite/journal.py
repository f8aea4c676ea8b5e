"""SQLite: the erasure journal (one entry per erasure, closed by its signed receipt),
the leases on open entries, and the tombstone look-ups (reopen, is it erased, its bound).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from .connection import _autocommit, database_path, text_encoding

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process lease only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "is_erased",
    "journal_receipts",
    "lease_file",
    "mark_issued",
    "pending_journal",
    "purge_journal",
    "record_statement",
    "redact_journal",
    "release_lease",
    "reopen",
    "replay_state",
    "still_pending",
    "take_lease",
    "tombstone_bound",
]


def record_statement(conn: sqlite3.Connection, receipt_id: str, statement: str) -> str:
    """Journal the statement about to be signed, first writer wins; returns the winner.

    Whoever signs the journaled statement (this process or a later recovery) produces
    the identical receipt, because Ed25519 signatures are deterministic.
    """
    with _autocommit(conn):
        conn.execute(
            "UPDATE erasure_journal SET statement = ? WHERE receipt_id = ? AND statement IS NULL",
            (statement, receipt_id),
        )
        row = conn.execute(
            "SELECT statement FROM erasure_journal WHERE receipt_id = ?", (receipt_id,)
        ).fetchone()
    if row is None or row[0] is None:
        raise RuntimeError(f"erasure journal entry {receipt_id} is missing")
    return str(row[0])


def mark_issued(conn: sqlite3.Connection, receipt_id: str, receipt_json: bytes) -> None:
    """Close a journal entry with its signed receipt, so the receipt can never be lost
    (it holds digests and counts, no row content). First writer wins."""
    with _autocommit(conn):
        conn.execute(
            "UPDATE erasure_journal SET receipt_sha256 = ?, receipt = ? "
            "WHERE receipt_id = ? AND receipt_sha256 IS NULL",
            (hashlib.sha256(receipt_json).hexdigest(), receipt_json.decode("utf-8"), receipt_id),
        )


def journal_receipts(conn: sqlite3.Connection, thread_id: str | None = None) -> list[bytes]:
    """The signed receipts kept in the journal, oldest first (optionally of one thread)."""
    where, params = ("AND thread_id = ?", (thread_id,)) if thread_id is not None else ("", ())
    rows = conn.execute(
        f"SELECT CAST(receipt AS BLOB) FROM erasure_journal WHERE receipt IS NOT NULL {where} "
        "ORDER BY issued_at, receipt_id",
        params,
    ).fetchall()
    enc = text_encoding(conn)
    if conn.in_transaction:
        conn.commit()  # end the implicit read transaction
    # Bytes as stored (a damaged row fails to parse on its own, not the query).
    if enc == "utf-8":
        return [bytes(r[0]) for r in rows]
    return [bytes(r[0]).decode(enc, "replace").encode() for r in rows]


def pending_journal(
    conn: sqlite3.Connection, older_than: str | None = None
) -> list[tuple[str, str, str, str | None]]:
    """``(receipt_id, issued_at, entry, statement)`` of erasures committed without a
    receipt, optionally only those that began before ``older_than`` (an erasure still
    signing in another process is younger than any sensible lease)."""
    cutoff, params = ("AND issued_at < ?", (older_than,)) if older_than else ("", ())
    with _autocommit(conn):
        # As stored bytes: one row whose text is not valid (a damaged or foreign write)
        # must not fail the whole query; it is decoded with lone surrogates, named by
        # the caller and left alone.
        rows = conn.execute(
            "SELECT CAST(receipt_id AS BLOB), CAST(issued_at AS BLOB), CAST(entry AS BLOB), "
            "CAST(statement AS BLOB) FROM erasure_journal "
            f"WHERE receipt_sha256 IS NULL {cutoff} ORDER BY issued_at, receipt_id",
            params,
        ).fetchall()
        enc = text_encoding(conn)
    errors = "surrogateescape" if enc == "utf-8" else "surrogatepass"

    def text(v: Any) -> str:
        return bytes(v or b"").decode(enc, errors)

    return [(text(a), text(b), text(c), None if d is None else text(d)) for a, b, c, d in rows]


_NO_FILE = "in-process"
"""The lease token of a database without a file (``:memory:``: no other process sees
it) or a platform without ``fcntl``: the in-process lease only."""

_LEASE_FILES: dict[str, int] = {}
"""Lease file path -> this process's descriptor on it, kept open for the process's life:
a POSIX record lock belongs to the process and ends when *any* of its descriptors on
the file is closed, so one per file is opened and never closed."""
_LEASE_FILES_LOCK = threading.Lock()


def lease_file(path: str) -> str:
    """The lease file of the database at ``path``: one per database, in its directory,
    named by a hash of its real path - a fixed length, so it fits wherever the database
    (and SQLite's own ``-wal``/``-shm`` next to it) fits, whatever its name's length."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:24]
    return os.path.join(os.path.dirname(real), f"erasure-lease-{digest}")


def _lease_offset(receipt_id: str) -> int:
    """The byte of the lease file locked for ``receipt_id`` (62 bits of its hash: two
    concurrent receipt ids sharing one is as likely as a hash collision)."""
    return int.from_bytes(hashlib.sha256(receipt_id.encode()).digest()[:8], "big") >> 2


def _lease_fd(name: str) -> int:
    with _LEASE_FILES_LOCK:
        fd = _LEASE_FILES.get(name)
        try:
            if fd is not None and os.fstat(fd).st_ino == os.stat(name).st_ino:
                return fd
        except FileNotFoundError:
            pass
        # First use, or the file was removed or replaced: other processes lock the one
        # at the path now. The old descriptor stays open (closing it would end this
        # process's other locks on that file).
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        _LEASE_FILES[name] = fd
        return fd


def take_lease(conn: sqlite3.Connection, receipt_id: str) -> Any:
    """Lease an open journal entry: an exclusive ``fcntl`` lock on one byte (keyed by
    the receipt id) of the database's :func:`lease_file`, held until released or until
    the holder dies (the kernel drops it). Returns the token for :func:`release_lease`,
    or None if another process holds it. Record locks do not exclude the process
    itself: within it, ``lease.claim`` does."""
    path = database_path(conn)
    if path == ":memory:" or fcntl is None:
        return _NO_FILE
    fd = _lease_fd(lease_file(path))
    offset = _lease_offset(receipt_id)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: another holder
        return None
    return (fd, offset)


def release_lease(conn: sqlite3.Connection, receipt_id: str, token: Any) -> None:
    """End a lease taken by :func:`take_lease` (the lease file stays: removing it would
    let a new file at its path be locked beside the old one)."""
    if token == _NO_FILE:
        return
    fd, offset = token
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


def still_pending(conn: sqlite3.Connection, receipt_id: str) -> bool:
    """Whether the journal entry is still open (no receipt marked issued)."""
    with _autocommit(conn):
        row = conn.execute(
            "SELECT 1 FROM erasure_journal WHERE receipt_id = ? AND receipt_sha256 IS NULL",
            (receipt_id,),
        ).fetchone()
    return row is not None


def reopen(conn: sqlite3.Connection, thread_id: str) -> bool:
    """Remove a thread's tombstone (explicit opt-in to reuse its id); True if one existed."""
    with _autocommit(conn):
        cur = conn.execute("DELETE FROM erasure_tombstones WHERE thread_id = ?", (thread_id,))
        conn.execute("DELETE FROM erasure_tombstone_policies WHERE thread_id = ?", (thread_id,))
    return cur.rowcount > 0


def is_erased(conn: sqlite3.Connection, thread_id: str) -> bool:
    """Whether the thread id is tombstoned."""
    row = conn.execute(
        "SELECT 1 FROM erasure_tombstones WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if conn.in_transaction:
        conn.commit()  # end an implicit read transaction (legacy isolation modes)
    return row is not None


def reopen_namespace(conn: sqlite3.Connection, prefix: str) -> bool:
    """Remove a store prefix's tombstone (RECEIPT_SPEC.md 8.1); True if one existed. A
    tombstone of an ancestor prefix still refuses writes below it."""
    if not _has_store_tombstones(conn):
        return False
    with _autocommit(conn):
        cur = conn.execute("DELETE FROM erasure_store_tombstones WHERE prefix = ?", (prefix,))
    return cur.rowcount > 0


def namespace_erased(conn: sqlite3.Connection, prefix: str) -> str | None:
    """The tombstoned prefix (this one or an ancestor) that refuses writes to ``prefix``."""
    if not _has_store_tombstones(conn):
        return None
    row = conn.execute(
        "SELECT prefix FROM erasure_store_tombstones WHERE ? = prefix "
        "OR substr(?, 1, length(prefix) + 1) = prefix || '.' ORDER BY length(prefix) LIMIT 1",
        (prefix, prefix),
    ).fetchone()
    if conn.in_transaction:
        conn.commit()  # end an implicit read transaction (legacy isolation modes)
    return None if row is None else str(row[0])


def _has_store_tombstones(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erasure_store_tombstones'"
    ).fetchone()
    return row is not None


def purge_journal(conn: sqlite3.Connection, older_than: str) -> int:
    """Delete closed journal entries (their receipt was issued) of erasures that began
    before ``older_than``; returns how many. Open entries are never purged (their
    receipt is still to be issued); tombstones are untouched."""
    with _autocommit(conn):
        cur = conn.execute(
            "DELETE FROM erasure_journal WHERE receipt_sha256 IS NOT NULL AND issued_at < ?",
            (older_than,),
        )
    return int(cur.rowcount)


def redact_journal(
    conn: sqlite3.Connection, receipt_id: str, thread_id: str, rewrite: Callable[[str], str]
) -> bool:
    """Privacy mode: once an entry's statement is journaled (recovery then only signs
    it), replace the raw ids it kept for recovery: ``thread_id`` becomes the given
    commitment and ``entry`` is passed through ``rewrite``. False if the entry has no
    statement yet (then it is left as it is)."""
    with _autocommit(conn):
        row = conn.execute(
            "SELECT entry FROM erasure_journal WHERE receipt_id = ? AND statement IS NOT NULL",
            (receipt_id,),
        ).fetchone()
        if row is not None:
            conn.execute(
                "UPDATE erasure_journal SET thread_id = ?, entry = ? WHERE receipt_id = ?",
                (thread_id, rewrite(str(row[0])), receipt_id),
            )
    return row is not None


def tombstone_bound(conn: sqlite3.Connection, thread_id: str) -> str | None:
    """The thread's ``new_conversations`` tombstone bound (``fresh_after``), if it has
    one: a refused write of it may be a new conversation's that arrived too early."""
    row = conn.execute(
        "SELECT fresh_after FROM erasure_tombstone_policies "
        "WHERE thread_id = ? AND policy = 'new_conversations'",
        (thread_id,),
    ).fetchone()
    return str(row[0]) if row else None


def replay_state(conn: sqlite3.Connection) -> tuple[set[str], set[str], set[str]]:
    """What a replay after a restore compares receipts with, in one read: the receipt ids
    the journal holds (erasures this database has seen), the thread ids with checkpoints,
    and the tombstoned thread ids."""
    enc = text_encoding(conn)
    errors = "surrogateescape" if enc == "utf-8" else "surrogatepass"

    def ids(sql: str) -> set[str]:
        return {bytes(r[0]).decode(enc, errors) for r in conn.execute(sql)}

    try:
        have = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
        journal = ids("SELECT CAST(receipt_id AS BLOB) FROM erasure_journal") if (
            "erasure_journal" in have) else set()  # fmt: skip
        tombstoned = ids("SELECT CAST(thread_id AS BLOB) FROM erasure_tombstones") if (
            "erasure_tombstones" in have) else set()  # fmt: skip
        tables = [t for t in ("checkpoints", "writes") if t in have]
        threads = ids(" UNION ".join(
            f"SELECT DISTINCT CAST(thread_id AS BLOB) FROM {t}" for t in tables
        )) if tables else set()  # fmt: skip
    finally:
        if conn.in_transaction:
            conn.commit()  # end the implicit read transaction
    return journal, threads, tombstoned
