"""SQLite: the library's tables (tombstones, tombstone policies, the journal) and the
``BEFORE INSERT`` triggers that refuse an erased thread's writes.

Tombstones live in the database (table ``erasure_tombstones``) and are enforced by
triggers on ``checkpoints`` and ``writes``: a late write from any process or
connection - even a plain ``SqliteSaver`` - is rejected, not just writes through this
library. Under the ``new_conversations`` policy (its row in
``erasure_tombstone_policies``) the triggers let a new conversation start under the id
and refuse only what continues the erased one.
"""

from __future__ import annotations

import sqlite3

from .._table import STORE_TOMBSTONE_MESSAGE, TOMBSTONE_MESSAGE
from .deferrals import DEFERRALS_DDL

__all__ = [
    "STORE_TOMBSTONE_DDL",
    "TOMBSTONE_DDL",
    "TOMBSTONE_MESSAGE",
    "TOMBSTONE_TRIGGERS",
    "TRIGGER_MARKS",
    "ensure_store_triggers",
    "ensure_tombstones",
    "is_store_tombstone_error",
    "is_tombstone_error",
]

TOMBSTONE_DDL = (
    """
CREATE TABLE IF NOT EXISTS erasure_tombstones (
    thread_id TEXT PRIMARY KEY,
    receipt_id TEXT NOT NULL,
    erased_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS erasure_journal (
    receipt_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    issued_at TEXT NOT NULL,
    entry TEXT NOT NULL,
    statement TEXT,
    receipt_sha256 TEXT,
    receipt TEXT
);
CREATE INDEX IF NOT EXISTS erasure_journal_pending ON erasure_journal (receipt_id)
WHERE receipt_sha256 IS NULL;
CREATE TABLE IF NOT EXISTS erasure_tombstone_policies (
    thread_id TEXT PRIMARY KEY,
    policy TEXT NOT NULL,
    fresh_after TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS erasure_store_tombstones (
    prefix TEXT PRIMARY KEY,
    receipt_id TEXT NOT NULL,
    erased_at TEXT NOT NULL
);
"""
    + DEFERRALS_DDL
)

_META_ROOT = (
    "CASE WHEN json_valid(CAST(NEW.metadata AS TEXT)) "
    """THEN json_extract(CAST(NEW.metadata AS TEXT), '$.parents.""') ELSE '' END"""
)
TOMBSTONE_TRIGGERS = f"""
CREATE TRIGGER IF NOT EXISTS erasure_tombstone_checkpoints BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.thread_id)
AND NOT EXISTS (SELECT 1 FROM erasure_tombstone_policies p
    WHERE p.thread_id = NEW.thread_id AND p.policy = 'new_conversations'
    AND NEW.checkpoint_id > p.fresh_after
    AND length(NEW.checkpoint_id) = 36 AND substr(NEW.checkpoint_id, 15, 1) = '6'
    AND (NEW.parent_checkpoint_id IS NULL OR NEW.parent_checkpoint_id > p.fresh_after)
    AND NOT coalesce(({_META_ROOT}) <= p.fresh_after, 0))
BEGIN SELECT RAISE(ABORT, '{TOMBSTONE_MESSAGE}'); END;
CREATE TRIGGER IF NOT EXISTS erasure_tombstone_writes BEFORE INSERT ON writes
WHEN EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.thread_id)
AND NOT EXISTS (SELECT 1 FROM erasure_tombstone_policies p
    WHERE p.thread_id = NEW.thread_id AND p.policy = 'new_conversations'
    AND EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = NEW.thread_id
        AND c.checkpoint_ns = NEW.checkpoint_ns AND c.checkpoint_id = NEW.checkpoint_id))
BEGIN SELECT RAISE(ABORT, '{TOMBSTONE_MESSAGE}'); END;
"""
"""A tombstoned thread refuses every write, except under ``new_conversations``: a
checkpoint (and writes) of a *new* conversation - its id (a uuid6, as LangGraph makes
them), its parent's and its root's
(``metadata.parents[""]``, a subgraph call's) all sort after ``fresh_after``, the highest
id the erasure removed or the erasure's time as a uuid6, whichever is later. So a
checkpoint whose parent is an erased one, writes for an erased checkpoint and a run that
began before the erasure are refused; a conversation started afresh is not."""


TRIGGER_MARKS = {
    "erasure_tombstone_checkpoints": "erasure_tombstone_policies",
    "erasure_tombstone_writes": "FROM checkpoints c WHERE",
}
"""Text only the current version of each trigger holds: a trigger without it is older
and is replaced (version 2 of the writes trigger accepted writes for a checkpoint that
was never saved)."""


# -- store tombstones (RECEIPT_SPEC.md 8.1) ---------------------------------------------

_UNDER_TOMBSTONE = (
    "EXISTS (SELECT 1 FROM erasure_store_tombstones t WHERE NEW.prefix = t.prefix "
    "OR substr(NEW.prefix, 1, length(t.prefix) + 1) = t.prefix || '.')"
)
STORE_TOMBSTONE_DDL = {
    (table, event): f"CREATE TRIGGER IF NOT EXISTS erasure_store_tombstone_{table}_"
    f"{event[:6].lower()} BEFORE {event} ON {table} WHEN {_UNDER_TOMBSTONE} "
    f"BEGIN SELECT RAISE(ABORT, '{STORE_TOMBSTONE_MESSAGE}'); END"
    for table in ("store", "store_vectors")
    for event in ("INSERT", "UPDATE OF prefix")
}
"""A ``put`` (SqliteStore's ``INSERT OR REPLACE``) into a tombstoned prefix or below it
is refused, whichever connection or process writes. Whole labels only: ``users.al`` is
not below ``users.alice``'s tombstone, and ``_``/``%`` are plain characters (``substr``,
no pattern). The tombstones are scanned per write (a short table: one row per erased
prefix)."""


def ensure_store_triggers(conn: sqlite3.Connection) -> None:
    """Create the store triggers on whichever of ``store``/``store_vectors`` exist (inside
    the caller's transaction, or on their own)."""
    names = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' "
        "AND name IN ('store', 'store_vectors', 'erasure_store_tombstones')"
    )}  # fmt: skip
    if "erasure_store_tombstones" not in names:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS erasure_store_tombstones (prefix TEXT PRIMARY KEY, "
            "receipt_id TEXT NOT NULL, erased_at TEXT NOT NULL)"
        )
    for (table, _), statement in STORE_TOMBSTONE_DDL.items():
        if table in names:
            conn.execute(statement)


def is_store_tombstone_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the store triggers' refusal (an erased store namespace)."""
    return isinstance(exc, sqlite3.IntegrityError) and STORE_TOMBSTONE_MESSAGE in str(exc)


def ensure_tombstones(conn: sqlite3.Connection) -> None:
    """Create the tombstone tables and triggers (idempotent), replacing triggers of an
    older version in the same transaction (never a moment without them); also turn on
    secure_delete.

    secure_delete is connection-scoped: enabling it for the saver's whole life means
    every overwrite of a row (``INSERT OR REPLACE``) is zeroed too, not only erasures.
    """
    triggers = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN "
            "('erasure_tombstone_checkpoints', 'erasure_tombstone_writes')"
        ).fetchall()
    )
    old = [name for name, sql in triggers.items() if TRIGGER_MARKS[name] not in sql]
    if len(triggers) == 2 and not old:  # current: no write lock (never wait on a writer)
        conn.executescript("PRAGMA secure_delete = ON;" + TOMBSTONE_DDL)
        _store_triggers_at_setup(conn)
        return
    drop = "".join(f"DROP TRIGGER {name};" for name in old)
    conn.executescript(
        "PRAGMA secure_delete = ON; BEGIN IMMEDIATE;"
        + TOMBSTONE_DDL + drop + TOMBSTONE_TRIGGERS + "COMMIT;"
    )  # fmt: skip
    _store_triggers_at_setup(conn)


def _store_triggers_at_setup(conn: sqlite3.Connection) -> None:
    """Store triggers for a store that shares the file, when one is missing (an erasure
    that tombstones a prefix creates them too, in its own transaction)."""
    rows = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger') "
        "AND tbl_name IN ('store', 'store_vectors')"
    ).fetchall()
    tables = [n for t, n in rows if t == "table" and n in ("store", "store_vectors")]
    triggers = {n for t, n in rows if t == "trigger"}
    want = {f"erasure_store_tombstone_{t}_{e}" for t in tables for e in ("insert", "update")}
    if not want <= triggers:
        conn.execute("BEGIN IMMEDIATE")
        try:
            ensure_store_triggers(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def is_tombstone_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the tombstone trigger's abort (an ``IntegrityError`` carrying
    ``TOMBSTONE_MESSAGE``), not some other constraint failure."""
    return isinstance(exc, sqlite3.IntegrityError) and TOMBSTONE_MESSAGE in str(exc)
