"""SQLite: enumerate, lock, delete and scrub one thread's rows on a sqlite3 connection.

Everything here runs on one ``sqlite3.Connection`` (for the async saver, the raw
connection inside aiosqlite's worker thread), so the sync and async savers share it.

Tombstones live in the database (table ``erasure_tombstones``) and are enforced by
``BEFORE INSERT`` triggers on ``checkpoints`` and ``writes``: a late write from any
process or connection - even a plain ``SqliteSaver`` - is rejected, not just writes
through this library. Under the ``new_conversations`` policy (its row in
``erasure_tombstone_policies``) the triggers let a new conversation start under the id
and refuse only what continues the erased one (see ``TOMBSTONE_TRIGGERS``).

The package's modules, by concept: :mod:`.connection` (the connection's file, encoding
and pragmas), :mod:`.schema` (tables and triggers), :mod:`.journal` (journal, leases,
tombstone look-ups), :mod:`.queries` (needles, metadata, keep-latest plan, retention),
:mod:`.residue` (secure_delete, WAL, rollback journal, the residue scan) and
:mod:`.backend` (:class:`SqliteBackend` and its parts). Every name is importable from
the package itself; the savers call the journal functions as attributes of the package
(or through :data:`JOURNAL`, which looks them up there on each call).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..keep_latest import KeepLatest
from . import backend, connection, journal, queries, residue, schema
from . import deferrals as _deferrals
from .backend import PlannedSqlPart, SqliteBackend, SqlTablePart
from .connection import (
    asecure_store_connection,
    database_path,
    has_checkpoints_table,
    secure_store_connection,
    table_names,
    text_encoding,
)
from .journal import (
    is_erased,
    journal_receipts,
    lease_file,
    mark_issued,
    namespace_erased,
    pending_journal,
    purge_journal,
    record_statement,
    redact_journal,
    release_lease,
    reopen,
    reopen_namespace,
    replay_state,
    still_pending,
    take_lease,
    tombstone_bound,
)
from .queries import (
    NEEDLE_TABLES,
    RUN_IN_FLIGHT,
    find_needles,
    idle_threads,
    latest_checkpoint,
    locate,
    namespace_condition,
    newest_ids,
    plan_keep_latest,
    run_in_flight,
    threads_by_metadata,
)
from .residue import (
    CHECKPOINT_WAIT_MS,
    JOURNAL_FILE_MODES,
    LIVE_PAGE_RESIDUE,
    Needles,
    bounded_checkpoint,
    clear_journal,
    journal_residue,
    residue_scan,
    scrub,
)
from .schema import (
    TOMBSTONE_DDL,
    TOMBSTONE_MESSAGE,
    TOMBSTONE_TRIGGERS,
    TRIGGER_MARKS,
    ensure_tombstones,
    is_tombstone_error,
)

__all__ = [
    "CHECKPOINT_WAIT_MS",
    "JOURNAL",
    "JOURNAL_FILE_MODES",
    "LIVE_PAGE_RESIDUE",
    "NEEDLE_TABLES",
    "RUN_IN_FLIGHT",
    "TOMBSTONE_DDL",
    "TOMBSTONE_MESSAGE",
    "TOMBSTONE_TRIGGERS",
    "TRIGGER_MARKS",
    "Needles",
    "PlannedSqlPart",
    "SqlTablePart",
    "SqliteBackend",
    "SqliteJournal",
    "asecure_store_connection",
    "bounded_checkpoint",
    "clear_journal",
    "database_path",
    "ensure_tombstones",
    "find_needles",
    "has_checkpoints_table",
    "idle_threads",
    "is_erased",
    "is_tombstone_error",
    "journal_receipts",
    "journal_residue",
    "latest_checkpoint",
    "lease_file",
    "locate",
    "mark_issued",
    "namespace_condition",
    "namespace_erased",
    "newest_ids",
    "pending_journal",
    "plan_keep_latest",
    "purge_journal",
    "record_statement",
    "redact_journal",
    "release_lease",
    "reopen",
    "reopen_namespace",
    "replay_state",
    "residue_scan",
    "run_in_flight",
    "scrub",
    "secure_store_connection",
    "still_pending",
    "table_names",
    "take_lease",
    "text_encoding",
    "threads_by_metadata",
    "tombstone_bound",
]


class SqliteJournal:
    """The journal and query functions on a ``sqlite3.Connection``, as methods: each is
    the package's function of the same name and signature, looked up on the package at
    call time (a function replaced there, e.g. by a test, is the one called)."""

    def record_statement(self, conn: sqlite3.Connection, receipt_id: str, statement: str) -> str:
        """:func:`record_statement`."""
        return record_statement(conn, receipt_id, statement)

    def mark_issued(self, conn: sqlite3.Connection, receipt_id: str, receipt_json: bytes) -> None:
        """:func:`mark_issued`."""
        mark_issued(conn, receipt_id, receipt_json)

    def journal_receipts(
        self, conn: sqlite3.Connection, thread_id: str | None = None
    ) -> list[bytes]:
        """:func:`journal_receipts`."""
        return journal_receipts(conn, thread_id)

    def pending_journal(
        self, conn: sqlite3.Connection, older_than: str | None = None
    ) -> list[tuple[str, str, str, str | None]]:
        """:func:`pending_journal`."""
        return pending_journal(conn, older_than)

    def still_pending(self, conn: sqlite3.Connection, receipt_id: str) -> bool:
        """:func:`still_pending`."""
        return still_pending(conn, receipt_id)

    def take_lease(self, conn: sqlite3.Connection, receipt_id: str) -> Any:
        """:func:`take_lease`."""
        return take_lease(conn, receipt_id)

    def release_lease(self, conn: sqlite3.Connection, receipt_id: str, token: Any) -> None:
        """:func:`release_lease`."""
        release_lease(conn, receipt_id, token)

    def redact_journal(
        self,
        conn: sqlite3.Connection,
        receipt_id: str,
        thread_id: str,
        rewrite: Callable[[str], str],
    ) -> bool:
        """:func:`redact_journal`."""
        return redact_journal(conn, receipt_id, thread_id, rewrite)

    def purge_journal(self, conn: sqlite3.Connection, older_than: str) -> int:
        """:func:`purge_journal`."""
        return purge_journal(conn, older_than)

    def reopen(self, conn: sqlite3.Connection, thread_id: str) -> bool:
        """:func:`reopen`."""
        return reopen(conn, thread_id)

    def is_erased(self, conn: sqlite3.Connection, thread_id: str) -> bool:
        """:func:`is_erased`."""
        return is_erased(conn, thread_id)

    def replay_state(self, conn: sqlite3.Connection) -> tuple[set[str], set[str], set[str]]:
        """:func:`replay_state`."""
        return replay_state(conn)

    def reopen_namespace(self, conn: sqlite3.Connection, prefix: str) -> bool:
        """:func:`reopen_namespace`."""
        return reopen_namespace(conn, prefix)

    def namespace_erased(self, conn: sqlite3.Connection, prefix: str) -> str | None:
        """:func:`namespace_erased`."""
        return namespace_erased(conn, prefix)

    def tombstone_bound(self, conn: sqlite3.Connection, thread_id: str) -> str | None:
        """:func:`tombstone_bound`."""
        return tombstone_bound(conn, thread_id)

    def idle_threads(
        self, conn: sqlite3.Connection, before: str, after: str | None, limit: int
    ) -> list[tuple[str, str, int, int]]:
        """:func:`idle_threads`."""
        return idle_threads(conn, before, after, limit)

    def latest_checkpoint(self, conn: sqlite3.Connection, thread_id: str) -> str | None:
        """:func:`latest_checkpoint`."""
        return latest_checkpoint(conn, thread_id)

    def run_in_flight(self, conn: sqlite3.Connection, thread_id: str) -> bool:
        """:func:`run_in_flight`."""
        return run_in_flight(conn, thread_id)

    def threads_by_metadata(self, conn: sqlite3.Connection, key: str, value: str) -> list[str]:
        """:func:`threads_by_metadata`."""
        return threads_by_metadata(conn, key, value)

    def locate(
        self, conn: sqlite3.Connection, forms: Sequence[tuple[int, str, bytes]]
    ) -> list[dict[str, Any]]:
        """:func:`locate`."""
        return locate(conn, forms)

    def plan_keep_latest(
        self, conn: sqlite3.Connection, thread_id: str, *, write: bool
    ) -> KeepLatest:
        """:func:`plan_keep_latest`."""
        return plan_keep_latest(conn, thread_id, write=write)

    def record_deferral(
        self,
        conn: sqlite3.Connection,
        row: _deferrals.Row,
        threads: Sequence[str],
        present: Sequence[str],
    ) -> list[str]:
        """:func:`._deferrals.record_deferral`."""
        return _deferrals.record_deferral(conn, row, threads, present)

    def deferrals(self, conn: sqlite3.Connection, state: str | None) -> list[_deferrals.Row]:
        """:func:`._deferrals.deferrals`."""
        return _deferrals.deferrals(conn, state)

    def open_deferrals(
        self, conn: sqlite3.Connection, thread_ids: Sequence[str]
    ) -> list[tuple[str, str]]:
        """:func:`._deferrals.open_deferrals`."""
        return _deferrals.open_deferrals(conn, thread_ids)

    def close_deferral(
        self,
        conn: sqlite3.Connection,
        receipt_id: str,
        state: str,
        closed_at: str,
        closed_by: str | None,
        note: str | None,
    ) -> bool:
        """:func:`._deferrals.close_deferral`."""
        return _deferrals.close_deferral(conn, receipt_id, state, closed_at, closed_by, note)


if not TYPE_CHECKING:  # typed callers see only the names above

    def __getattr__(name: str) -> Any:
        """Any other name of the former single module (an internal one): from the module of
        the package that holds it now."""
        for module in (connection, schema, journal, queries, residue, backend):
            if name in vars(module):
                return vars(module)[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


JOURNAL = SqliteJournal()
"""The one :class:`SqliteJournal` (it holds no state)."""
