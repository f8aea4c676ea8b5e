"""PostgreSQL: enumerate, lock, delete and report residue of one thread's rows.

Everything here talks to the database through a :class:`Session`: a synchronous
``psycopg.Connection`` (:class:`SyncSession`), or an ``AsyncConnection`` driven from a
worker thread (:class:`AsyncBridgeSession`, each call is run on the connection's event
loop). The engine is synchronous, so the async saver runs exactly this code on a worker
thread: there is one implementation of the rows, locking, journal and residue.

Concurrency. Writes of a thread and its erasure are serialised by a transaction-scoped
advisory lock ``(ADVISORY_CLASS, hashtext(thread_id))``: ``BEFORE INSERT`` triggers on
``checkpoints``, ``checkpoint_blobs`` and ``checkpoint_writes`` take it *shared* (so
writers of a thread never block each other) and then refuse rows of a tombstoned
thread; the erasure takes it *exclusively* before its first read, under READ
COMMITTED. A write that got the lock first commits before the erasure measures (it is
measured and deleted); a write that asks later waits for the erasure's commit and then
sees the tombstone (``ThreadErasedError``). No row can be inserted between measurement
and delete, and the trigger holds for every connection and process, including plain
``PostgresSaver`` workers.

Leaves. Every column is read with an explicit cast so the hashed value does not depend
on client settings (``DateStyle``, ``TimeZone``, binary/text protocol); see
:data:`LEAF_EXPRESSIONS` and RECEIPT_SPEC.md, "PostgreSQL leaves". Rows are ordered by
primary key with ``COLLATE "C"`` (code-point order, the same as SQLite's ``BINARY``).

The package's modules, by concept: :mod:`.session` (sessions and server-side cursors),
:mod:`.schema` (tables, trigger function, triggers, version, server identity),
:mod:`.journal` (journal, leases, tombstone look-ups), :mod:`.leaves` (the cast per
column type), :mod:`.queries` (needles, metadata, keep-latest plan, retention),
:mod:`.residue` (``VACUUM`` and its verification) and :mod:`.backend`
(:class:`PostgresBackend` and its parts). Every name is importable from the package
itself; the savers call the journal functions as attributes of the package (or through
:data:`JOURNAL`, which looks them up there on each call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..keep_latest import KeepLatest
from . import backend, journal, leaves, queries, residue, schema, session
from . import deferrals as _deferrals
from .backend import PgTablePart, PlannedPgPart, PostgresBackend
from .deferrals import ensure_deferrals
from .journal import (
    LEASE_CLASS,
    is_erased,
    journal_receipts,
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
from .leaves import LEAF_EXPRESSIONS, describe, leaf_expression, wire_expression
from .queries import (
    NEEDLE_TABLES,
    find_needles,
    idle_states,
    idle_threads,
    latest_checkpoint,
    locate,
    namespace_condition,
    newest_ids,
    plan_keep_latest,
    run_in_flight,
    threads_by_metadata,
)
from .residue import WAL_RESIDUE, horizon_holders, vacuum_residue
from .schema import (
    ADVISORY_CLASS,
    CHECKPOINT_TABLES,
    ENFORCING_VERSIONS,
    RETRYABLE,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    TOMBSTONE_MESSAGE,
    TRIGGER_FUNCTION_SQL,
    TRIGGERS_SQL,
    database_label,
    ensure_schema,
    has_store_table,
    installed_version,
    is_tombstone_error,
    retryable,
    schema_installed,
    server_identity,
    tables_present,
)
from .session import (
    FETCH_ROWS,
    AsyncBridgeSession,
    Session,
    SyncSession,
    asecond_connection,
    second_connection,
    stream,
)

__all__ = [
    "ADVISORY_CLASS",
    "CHECKPOINT_TABLES",
    "ENFORCING_VERSIONS",
    "FETCH_ROWS",
    "JOURNAL",
    "LEAF_EXPRESSIONS",
    "LEASE_CLASS",
    "NEEDLE_TABLES",
    "RETRYABLE",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "TOMBSTONE_MESSAGE",
    "TRIGGERS_SQL",
    "TRIGGER_FUNCTION_SQL",
    "WAL_RESIDUE",
    "AsyncBridgeSession",
    "PgTablePart",
    "PlannedPgPart",
    "PostgresBackend",
    "PostgresJournal",
    "Session",
    "SyncSession",
    "asecond_connection",
    "database_label",
    "describe",
    "ensure_deferrals",
    "ensure_schema",
    "find_needles",
    "has_store_table",
    "horizon_holders",
    "idle_threads",
    "installed_version",
    "is_erased",
    "is_tombstone_error",
    "journal_receipts",
    "latest_checkpoint",
    "leaf_expression",
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
    "retryable",
    "run_in_flight",
    "schema_installed",
    "second_connection",
    "server_identity",
    "still_pending",
    "stream",
    "tables_present",
    "take_lease",
    "threads_by_metadata",
    "tombstone_bound",
    "vacuum_residue",
    "wire_expression",
]


class PostgresJournal:
    """The journal and query functions on a :class:`Session`, as methods: each is the
    package's function of the same name and signature, looked up on the package at call
    time (a function replaced there, e.g. by a test, is the one called)."""

    def record_statement(self, session: Session, receipt_id: str, statement: str) -> str:
        """:func:`record_statement`."""
        return record_statement(session, receipt_id, statement)

    def mark_issued(self, session: Session, receipt_id: str, receipt_json: bytes) -> None:
        """:func:`mark_issued`."""
        mark_issued(session, receipt_id, receipt_json)

    def journal_receipts(self, session: Session, thread_id: str | None = None) -> list[bytes]:
        """:func:`journal_receipts`."""
        return journal_receipts(session, thread_id)

    def pending_journal(
        self, session: Session, older_than: str | None = None
    ) -> list[tuple[str, str, str, str | None]]:
        """:func:`pending_journal`."""
        return pending_journal(session, older_than)

    def still_pending(self, session: Session, receipt_id: str) -> bool:
        """:func:`still_pending`."""
        return still_pending(session, receipt_id)

    def take_lease(self, session: Session, receipt_id: str) -> Any:
        """:func:`take_lease`."""
        return take_lease(session, receipt_id)

    def release_lease(self, session: Session, receipt_id: str, token: Any) -> None:
        """:func:`release_lease`."""
        release_lease(session, receipt_id, token)

    def redact_journal(
        self, session: Session, receipt_id: str, thread_id: str, rewrite: Callable[[str], str]
    ) -> bool:
        """:func:`redact_journal`."""
        return redact_journal(session, receipt_id, thread_id, rewrite)

    def purge_journal(self, session: Session, older_than: str) -> int:
        """:func:`purge_journal`."""
        return purge_journal(session, older_than)

    def reopen(self, session: Session, thread_id: str) -> bool:
        """:func:`reopen`."""
        return reopen(session, thread_id)

    def is_erased(self, session: Session, thread_id: str) -> bool:
        """:func:`is_erased`."""
        return is_erased(session, thread_id)

    def replay_state(self, session: Session) -> tuple[set[str], set[str], set[str]]:
        """:func:`replay_state`."""
        return replay_state(session)

    def reopen_namespace(self, session: Session, prefix: str) -> bool:
        """:func:`reopen_namespace`."""
        return reopen_namespace(session, prefix)

    def namespace_erased(self, session: Session, prefix: str) -> str | None:
        """:func:`namespace_erased`."""
        return namespace_erased(session, prefix)

    def tombstone_bound(self, session: Session, thread_id: str) -> str | None:
        """:func:`tombstone_bound`."""
        return tombstone_bound(session, thread_id)

    def idle_threads(
        self, session: Session, before: str, after: str | None, limit: int
    ) -> list[tuple[str, str, int, int]]:
        """:func:`idle_threads`."""
        return idle_threads(session, before, after, limit)

    def latest_checkpoint(self, session: Session, thread_id: str) -> str | None:
        """:func:`latest_checkpoint`."""
        return latest_checkpoint(session, thread_id)

    def run_in_flight(self, session: Session, thread_id: str) -> bool:
        """:func:`run_in_flight`."""
        return run_in_flight(session, thread_id)

    def idle_states(
        self, session: Session, threads: Sequence[str]
    ) -> dict[str, tuple[str | None, bool]]:
        """:func:`~.queries.idle_states` (PostgreSQL only: a batch's check in one trip)."""
        return idle_states(session, threads)

    def threads_by_metadata(self, session: Session, key: str, value: str) -> list[str]:
        """:func:`threads_by_metadata`."""
        return threads_by_metadata(session, key, value)

    def locate(
        self, session: Session, forms: Sequence[tuple[int, str, bytes]]
    ) -> list[dict[str, Any]]:
        """:func:`locate`."""
        return locate(session, forms)

    def plan_keep_latest(self, session: Session, thread_id: str, *, write: bool) -> KeepLatest:
        """:func:`plan_keep_latest`."""
        return plan_keep_latest(session, thread_id, write=write)

    def record_deferral(
        self, session: Session, row: _deferrals.Row, threads: Sequence[str], present: Sequence[str]
    ) -> list[str]:
        """:func:`._deferrals.record_deferral`."""
        return _deferrals.record_deferral(session, row, threads, present)

    def deferrals(self, session: Session, state: str | None) -> list[_deferrals.Row]:
        """:func:`._deferrals.deferrals`."""
        return _deferrals.deferrals(session, state)

    def open_deferrals(self, session: Session, thread_ids: Sequence[str]) -> list[tuple[str, str]]:
        """:func:`._deferrals.open_deferrals`."""
        return _deferrals.open_deferrals(session, thread_ids)

    def close_deferral(
        self,
        session: Session,
        receipt_id: str,
        state: str,
        closed_at: str,
        closed_by: str | None,
        note: str | None,
    ) -> bool:
        """:func:`._deferrals.close_deferral`."""
        return _deferrals.close_deferral(session, receipt_id, state, closed_at, closed_by, note)

    def has_store_table(self, session: Session) -> bool:
        """:func:`has_store_table` (PostgreSQL only: which tables a subject erasure locks)."""
        return has_store_table(session)

    def claim_threads(
        self, session: Session, threads: Sequence[str], holder: Any = None
    ) -> tuple[list[str], Any]:
        """:func:`~.journal.claim_threads` (PostgreSQL only: batched sweeps' workers)."""
        return journal.claim_threads(session, threads, holder)

    def release_claims(
        self, session: Session, threads: Sequence[str], token: Any, last: bool = True
    ) -> None:
        """:func:`~.journal.release_claims`."""
        journal.release_claims(session, threads, token, last)


if not TYPE_CHECKING:  # typed callers see only the names above

    def __getattr__(name: str) -> Any:
        """Any other name of the former single module (an internal one): from the module
        of the package that holds it now."""
        for module in (session, schema, journal, leaves, queries, residue, backend):
            if name in vars(module):
                return vars(module)[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


JOURNAL = PostgresJournal()
"""The one :class:`PostgresJournal` (it holds no state)."""
