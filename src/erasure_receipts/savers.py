"""Attesting checkpointers: LangGraph's SQLite savers plus signed, verified erasure.

Normal operation (``put``, ``put_writes``, ``get_tuple``, ``list``) is the parent's;
these subclasses add ``erase_thread`` / ``aerase_thread``, ``digest_thread``, tombstones
and attested ``delete_thread``. They depend on parent internals (``conn``, ``lock``,
``setup``); the supported version ranges are pinned in ``pyproject.toml`` and checked
by LangGraph's conformance suite in the tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, closing, contextmanager, nullcontext, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, NamedTuple

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.base import BaseStore

from . import __version__
from .backends.sqlite import (
    SqliteBackend,
    database_path,
    ensure_tombstones,
    is_tombstone_error,
    journal_receipts,
    mark_issued,
    pending_journal,
    record_statement,
    scrub,
)
from .backends.store import PAGE_SIZE, StoreSweepPart, acount_items, count_items
from .engine import (
    ErasureRequest,
    Part,
    RowsOutcome,
    TableCount,
    erase_rows,
    final_statement,
    format_time,
    measure_rows,
    request_from_journal,
    resume_rows,
    sign_and_archive,
)
from .errors import (
    ConfigurationError,
    ErasureIncompleteError,
    Error,
    NotALangGraphDatabaseError,
    NothingToEraseError,
    ThreadErasedError,
)
from .proof import LeafRecord, head_filter, leaf_records
from .receipt import Receipt
from .signing import Signer

__all__ = ["AsyncAttestingSqliteSaver", "AttestingSqliteSaver", "PendingErasure", "ThreadDigest"]

log = logging.getLogger("erasure_receipts")

Namespace = tuple[str, ...]
ResidueScan = bool | Literal["vacuum"]
"""``residue_scan=``: off, on (VACUUM only if a copy is found), or "vacuum" (always)."""
NamespacesFor = Callable[[str], Iterable[Sequence[str]]]


@contextmanager
def _tombstone_errors(config: RunnableConfig) -> Iterator[None]:
    """The database's tombstone trigger fired: say so in the library's own terms."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if is_tombstone_error(exc):
            raise ThreadErasedError(str(config["configurable"]["thread_id"])) from None
        raise


@dataclass(frozen=True)
class ThreadDigest:
    """What an erasure would measure now: the pre-deletion digest and per-table counts."""

    digest: str
    tables: dict[str, TableCount]

    @property
    def leaves(self) -> int:
        """Rows measured in all tables: the tree's leaf count (``pre_state.leaves``)."""
        return sum(t.rows for t in self.tables.values())


class PendingErasure(NamedTuple):
    """An erasure that committed but has no receipt yet (see ``recover_receipts``)."""

    receipt_id: str
    issued_at: str
    age_seconds: float


# Per execution context (thread or asyncio task), so concurrent erasures on one saver
# each see their own receipt; keyed by saver id, copied on write.
_LAST_RECEIPT: ContextVar[dict[int, Receipt] | None] = ContextVar(
    "erasure_receipts_last_receipt", default=None
)


_API_CHECK: ContextVar[bool] = ContextVar("erasure_receipts_api_check", default=False)
"""Set while the saver checks its own erasure through the public API: the erased thread
must then be *read* (and found empty), not refused."""


def check_archive(archive: Path | None) -> None:
    """Refuse, before anything is deleted, an archive the receipt could not be written to."""
    if archive is None:
        return
    if archive.exists() and not archive.is_dir():
        raise ConfigurationError(f"archive {str(archive)!r} exists and is not a directory")
    try:
        archive.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".erasure-receipts-probe.", dir=archive)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigurationError(
            f"archive {str(archive)!r} is not writable: {exc.strerror or exc}"
        ) from None


@cache
def _versions() -> dict[str, str]:
    out = {"langgraph-erasure-receipts": __version__, "sqlite": sqlite3.sqlite_version}
    for dist in ("langgraph-checkpoint", "langgraph-checkpoint-sqlite"):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def _normalise(namespaces: Iterable[Sequence[str]]) -> tuple[Namespace, ...]:
    out = []
    for ns in namespaces:
        if isinstance(ns, str):
            raise TypeError(f"a store namespace is a tuple of strings, not {ns!r}")
        t = tuple(ns)
        if not t or not all(isinstance(p, str) and p for p in t):
            raise ValueError(f"invalid store namespace {ns!r}: non-empty strings required")
        out.append(t)
    return tuple(dict.fromkeys(out))


class _Attesting:
    """State and helpers shared by the sync and async savers."""

    signer: Signer
    store: BaseStore | None
    archive: Path | None
    namespaces_for: NamespacesFor | None
    clock: Callable[[], datetime] | None
    residue_scan: ResidueScan

    def _init_attesting(
        self,
        signer: Signer,
        store: BaseStore | None,
        archive: str | Path | None,
        namespaces_for: NamespacesFor | None,
        clock: Callable[[], datetime] | None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
    ) -> None:
        if not isinstance(signer, Signer):
            raise TypeError("signer= must be an erasure_receipts.Signer")
        if namespaces_for is not None and store is None:
            raise ConfigurationError(
                "namespaces_for= names store namespaces to erase, but no store= was given"
            )
        if namespaces_for is not None and not callable(namespaces_for):
            raise TypeError("namespaces_for= must be a function thread_id -> namespaces")
        self.signer = signer
        self.store = store
        self.archive = Path(archive) if archive is not None else None
        if self.archive is not None and self.archive.exists() and not self.archive.is_dir():
            raise ConfigurationError(f"archive {str(archive)!r} exists and is not a directory")
        self.namespaces_for = namespaces_for
        self.clock = clock
        self.residue_scan = _residue_mode(residue_scan)
        self.refuse_erased_reads = bool(refuse_erased_reads)
        self._store_rows: bool | None = None  # store tables live in the saver's database

    @property
    def last_receipt(self) -> Receipt | None:
        """The receipt of the last erasure made *in this thread or asyncio task*.

        Per context, so concurrent erasures (threads, tasks) never see each other's.
        """
        return (_LAST_RECEIPT.get() or {}).get(id(self))

    def _set_last(self, receipt: Receipt) -> None:
        _LAST_RECEIPT.set({**(_LAST_RECEIPT.get() or {}), id(self): receipt})

    def _request(
        self,
        thread_id: Any,
        store_namespaces: Iterable[Sequence[str]],
        tombstone: bool,
        allow_empty: bool = False,
    ) -> ErasureRequest:
        if isinstance(thread_id, int) and not isinstance(thread_id, bool):
            thread_id = str(thread_id)
        if not isinstance(thread_id, str) or not thread_id:
            raise ConfigurationError(f"thread_id must be a non-empty string, not {thread_id!r}")
        namespaces = _normalise(store_namespaces)
        if namespaces and self.store is None:
            raise ConfigurationError("store_namespaces were given but the saver has no store=")
        return ErasureRequest(thread_id, namespaces, bool(tombstone), bool(allow_empty))

    def _scan(self, residue_scan: ResidueScan | None) -> ResidueScan:
        return self.residue_scan if residue_scan is None else _residue_mode(residue_scan)

    def _backend(
        self, conn: sqlite3.Connection, request: ErasureRequest, residue_scan: ResidueScan = False
    ) -> SqliteBackend:
        rows_ns: Sequence[Namespace] = ()
        extra: list[Part] = []
        if request.store_namespaces:
            assert self.store is not None
            if self._store_rows:
                rows_ns = request.store_namespaces
            else:
                extra.append(StoreSweepPart(self.store, request.store_namespaces))
        return SqliteBackend(
            conn,
            request.thread_id,
            saver=type(self).__name__,
            store=type(self.store).__name__ if self.store is not None else None,
            store_rows_namespaces=rows_ns,
            extra_parts=extra,
            extra_residue=(lambda: self._store_residue(bool(residue_scan))) if extra else None,
            versions=_versions(),
            residue_scan=residue_scan,
        )

    def _store_residue(self, scanned: bool) -> list[dict[str, Any]]:
        """Residue of a swept store: scrub it if it is SQLite we can reach, else say so."""
        from langgraph.store.sqlite import SqliteStore

        store = self.store
        if isinstance(store, SqliteStore):
            with store.lock:
                out = scrub(store.conn, "store")
                path = database_path(store.conn)
            # Only the saver's own database file is scanned: say so for the store's.
            action = "residue_scan.store" if scanned else "sqlite.live_page_free_space.store"
            reason = (
                "the store's database file is not scanned (only the saver's is); copies "
                "of erased items can remain in the free space of its live pages"
            )
            out.append(
                {
                    "action": action,
                    "status": "skipped",
                    "detail": {"database": path, "reason": reason},
                }
            )
            return out
        return [
            {"action": "store.scrub", "status": "skipped",
             "detail": {"store": type(store).__name__,
                        "reason": "deleted through the BaseStore API; its storage is not "
                                  "scrubbed by this library"}}
        ]  # fmt: skip

    def _phase_one(
        self, conn: sqlite3.Connection, request: ErasureRequest, residue_scan: ResidueScan
    ) -> tuple[RowsOutcome, SqliteBackend]:
        backend = self._backend(conn, request, residue_scan)
        clock = {"clock": self.clock} if self.clock is not None else {}
        outcome = erase_rows(backend, request, generator_version=__version__, **clock)
        log.info(
            "erased thread %r: %d rows, receipt %s",
            request.thread_id,
            sum(t.rows for t in outcome.pre_tables.values()),
            outcome.receipt_id,
        )
        _log_residue(outcome.residue)
        return outcome, backend

    def _resume(
        self, conn: sqlite3.Connection, receipt_id: str, issued_at: str, entry: str
    ) -> RowsOutcome:
        request = request_from_journal(entry)
        backend = self._backend(conn, request, self.residue_scan)
        outcome = resume_rows(backend, request, receipt_id, issued_at, entry)
        _log_residue(outcome.residue)
        return outcome

    def _preflight(self) -> None:
        check_archive(self.archive)

    def _statement_of(self, outcome: RowsOutcome, api: list[tuple[str, int, str]]) -> str:
        statement = final_statement(outcome, api, generator_version=__version__)
        return json.dumps(statement, sort_keys=True, ensure_ascii=False)

    def _sign(self, statement_json: str) -> Receipt:
        """Sign a journaled statement and archive the receipt (deterministic bytes)."""
        try:
            receipt = sign_and_archive(json.loads(statement_json), self.signer, self.archive)
        except ErasureIncompleteError:
            raise
        except Exception as exc:
            raise ErasureIncompleteError(
                "the erasure committed, but its receipt could not be issued "
                f"({type(exc).__name__}: {exc}); the erasure journal in the database keeps "
                "the measurement: call recover_receipts() to issue it"
            ) from exc
        self._set_last(receipt)
        log.info(
            "receipt %s issued%s", receipt.receipt_id, f" into {self.archive}" * bool(self.archive)
        )
        return receipt

    @staticmethod
    def _after_commit_failed(exc: BaseException) -> ErasureIncompleteError:
        """Anything failing between commit and signature: the journal entry committed with
        the deletion keeps the measurement, so the receipt is recoverable."""
        if isinstance(exc, ErasureIncompleteError):
            return exc
        return ErasureIncompleteError(
            f"the erasure committed, but no receipt was issued ({type(exc).__name__}: {exc}); "
            "the erasure journal in the database keeps the measurement: fix the cause and "
            "call recover_receipts(), which re-verifies the scope and issues it"
        )

    def _now(self) -> datetime:
        now = self.clock() if self.clock is not None else datetime.now(UTC)
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def _recovery_cutoff(self, min_age_seconds: float) -> str:
        return format_time(self._now() - timedelta(seconds=min_age_seconds))

    def _pending(self, rows: list[tuple[str, str, str, str | None]]) -> list[PendingErasure]:
        now = self._now()
        out = []
        for receipt_id, issued_at, _, _ in rows:
            t = datetime.fromisoformat(issued_at.replace("Z", "+00:00"))
            out.append(PendingErasure(receipt_id, issued_at, (now - t).total_seconds()))
        return out

    def _needs_store(self, request: ErasureRequest) -> None:
        if request.store_namespaces and self.store is None:
            raise ErasureIncompleteError(
                "this journal entry covers store namespaces; recover with the same store= "
                "as the erasure"
            )

    @staticmethod
    def _recovery_error(failures: dict[str, str], recovered: list[Receipt]) -> None:
        if failures:
            raise ErasureIncompleteError(
                f"{len(failures)} journaled erasure(s) could not be attested "
                f"({len(recovered)} recovered): "
                + "; ".join(f"{rid}: {why}" for rid, why in failures.items()),
                recovered=recovered,
            )

    def _digest(self, conn: sqlite3.Connection, request: ErasureRequest) -> ThreadDigest:
        """Read-only: never creates tables, triggers or changes the journal mode, so a
        preview also works on a ``mode=ro`` connection."""
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'"
        ).fetchone():
            raise NotALangGraphDatabaseError(
                f"{database_path(conn)}: no LangGraph checkpoint tables (not a LangGraph database)"
            )
        digest, tables = measure_rows(self._backend(conn, request))
        return ThreadDigest(digest, tables)

    def _default_namespaces(self, thread_id: str) -> Iterable[Sequence[str]]:
        return self.namespaces_for(str(thread_id)) if self.namespaces_for else ()


def _residue_mode(value: Any) -> ResidueScan:
    if value is True or value is False or value == "vacuum":
        return value  # type: ignore[no-any-return]
    raise ConfigurationError(f'residue_scan must be True, False or "vacuum", not {value!r}')


def _log_residue(residue: list[dict[str, Any]]) -> None:
    for r in residue:
        if r["status"] in ("partial", "failed"):
            log.warning("residue %s: %s %s", r["action"], r["status"], r["detail"])


def _api_results(
    namespaces: set[str], found: int, listed: int, stored: int | None
) -> list[tuple[str, int, str]]:
    """The public-API checks as ``(name, items_found, detail)``, sync and async alike."""
    checks = [
        ("api_get_tuple_none", found,
         f"get_tuple checked for {len(namespaces | {''})} checkpoint namespace(s)"),
        ("api_list_empty", listed, "list() over all namespaces returned nothing"),
    ]  # fmt: skip
    if stored is not None:
        checks.append(
            ("api_store_search_empty", stored,
             f"store.search paginated with limit={PAGE_SIZE} under every namespace")
        )  # fmt: skip
    return checks


class AttestingSqliteSaver(SqliteSaver, _Attesting):
    """``SqliteSaver`` whose deletions are measured, verified and signed.

    Args:
        conn: the SQLite connection (as for ``SqliteSaver``).
        signer: the Ed25519 key that signs receipts.
        store: the application's ``BaseStore``; its items under the namespaces given to
            ``erase_thread`` are erased with the thread. A ``SqliteStore`` in the same
            database file is erased in the same transaction; any other store is swept.
        archive: directory where every receipt is written durably before returning.
        namespaces_for: ``thread_id -> store namespace prefixes`` used by
            ``delete_thread`` (which other code, e.g. LangGraph itself, may call).
            Requires ``store``.
        clock: returns the current time (inject for deterministic tests).
        residue_scan: after every erasure, scan the database file's free space and its
            ``-wal``/``-shm`` files for copies of the erased rows, ``VACUUM`` if any is
            found, and record the checked result in the receipt (costs about one read
            of the file; see README "Residue").
        refuse_erased_reads: ``get_tuple`` of an erased (tombstoned) thread raises
            ``ThreadErasedError`` instead of returning None, so a graph still running on
            an erased thread stops at its first read - before its nodes write anything
            (e.g. user memory into an erased store namespace). Off by default: LangGraph's
            saver contract returns None for unknown threads.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
    ) -> None:
        super().__init__(conn, serde=serde)
        self._init_attesting(
            signer, store, archive, namespaces_for, clock, residue_scan, refuse_erased_reads
        )

    @classmethod
    @contextmanager
    def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
    ) -> Iterator[AttestingSqliteSaver]:
        """Open ``conn_string`` (a path or ``:memory:``) and yield a saver on it; the
        connection is closed on exit. Other arguments as for the constructor."""
        with closing(sqlite3.connect(conn_string, check_same_thread=False)) as conn:
            yield cls(
                conn, signer=signer, serde=serde, store=store, archive=archive,
                namespaces_for=namespaces_for, clock=clock, residue_scan=residue_scan,
                refuse_erased_reads=refuse_erased_reads,
            )  # fmt: skip

    def setup(self) -> None:
        """The parent's ``setup``, then the tombstone and journal tables, the tombstone
        triggers and ``secure_delete`` on this connection (skipped once set up)."""
        if self.is_setup:
            return
        super().setup()
        try:
            ensure_tombstones(self.conn)
        except BaseException:
            self.is_setup = False  # retried next time, never silently without triggers
            raise

    # -- normal operation: the parent's, with tombstone errors made explicit -----------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The parent's ``get_tuple``, except that with ``refuse_erased_reads`` a
        tombstoned thread raises ``ThreadErasedError`` instead of returning None (the
        saver's own post-erasure API checks still read it and find nothing)."""
        if self.refuse_erased_reads and not _API_CHECK.get():
            thread_id = config["configurable"].get("thread_id")
            if thread_id is not None and self.is_erased(str(thread_id)):
                raise ThreadErasedError(str(thread_id))
        return super().get_tuple(config)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The parent's ``put``; a write to a tombstoned thread raises
        ``ThreadErasedError`` instead of ``sqlite3.IntegrityError``."""
        with _tombstone_errors(config):
            return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The parent's ``put_writes``; a write to a tombstoned thread raises
        ``ThreadErasedError`` instead of ``sqlite3.IntegrityError``."""
        with _tombstone_errors(config):
            super().put_writes(config, writes, task_id, task_path)

    # -- erasure ------------------------------------------------------------------------

    def _store_lock(self) -> Any:
        lock = getattr(self.store, "lock", None)
        same_conn = getattr(self.store, "conn", None) is self.conn
        return lock if same_conn and lock is not None else nullcontext()

    def _resolve_store_rows(self) -> None:
        from langgraph.store.sqlite import SqliteStore

        if self._store_rows is not None:
            return
        store = self.store
        if not isinstance(store, SqliteStore):
            self._store_rows = False
        elif store.conn is self.conn:
            self._store_rows = True
        else:
            try:
                with store.lock:
                    # Overwrites made through the store's own connection must be zeroed
                    # too, or old item versions linger in free space (connection-scoped).
                    store.conn.execute("PRAGMA secure_delete = ON")
                    other = database_path(store.conn)
                self._store_rows = other != ":memory:" and other == database_path(self.conn)
            except sqlite3.Error:
                self._store_rows = False

    def erase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] = (),
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
    ) -> Receipt:
        """Erase every checkpoint row of the thread (all namespaces) and its store items.

        Returns the signed receipt (also written to ``archive`` if set). Raises
        ``ErasureIncompleteError`` - and issues no receipt - if anything fails or remains;
        ``NothingToEraseError`` (nothing deleted, no tombstone) if the scope holds no rows,
        unless ``allow_empty``; ``ConfigurationError`` before deleting if the receipt could
        not be archived. ``residue_scan`` overrides the saver's setting for this call.
        """
        request = self._request(thread_id, store_namespaces, tombstone, allow_empty)
        self._preflight()
        self._resolve_store_rows()
        with self.lock, self._store_lock():
            self.setup()
            outcome, backend = self._phase_one(self.conn, request, self._scan(residue_scan))
        try:
            api = self._api_checks(request, backend.checkpoint_namespaces)
            statement = self._statement_of(outcome, api)
            with self.lock:
                statement = record_statement(self.conn, outcome.receipt_id, statement)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        receipt = self._sign(statement)
        self._mark_issued(receipt)
        return receipt

    def _mark_issued(self, receipt: Receipt) -> None:
        # Best effort (it rolls back on failure): if it fails, the journal entry stays
        # open with its statement, and recover_receipts() re-signs that statement -
        # producing this very receipt again, byte for byte.
        try:
            with self.lock:
                mark_issued(self.conn, receipt.receipt_id, receipt.to_json())
        except Exception as exc:
            log.warning(
                "receipt %s issued but not marked in the journal: %s", receipt.receipt_id, exc
            )

    def journal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Every receipt this database's erasure journal holds (optionally of one thread).

        Receipts are kept in the journal as well as returned/archived, so one is never
        lost with the process that received it.
        """
        with self.lock:
            self.setup()
            return [Receipt.from_json(b) for b in journal_receipts(self.conn, thread_id)]

    def recover_receipts(self, *, min_age_seconds: float = 300.0) -> list[Receipt]:
        """Issue the receipts of erasures that committed but never got one.

        Only entries older than ``min_age_seconds`` are touched: a younger one may still
        be signing in another process. An entry whose statement was journaled is simply
        signed (the same receipt the original process would have produced); otherwise
        the scope is re-verified now (``raw_rows_zero_at_recovery``) and the receipt
        issued under the original id, time and pre-state digest. Entries that cannot be
        attested stay open and are listed in the ``ErasureIncompleteError`` raised at the
        end, whose ``recovered`` attribute holds the receipts that were issued.
        """
        self._resolve_store_rows()
        with self.lock:
            self.setup()
            pending = pending_journal(self.conn, self._recovery_cutoff(min_age_seconds))
        if pending:
            self._preflight()
            log.info("recovering %d journaled erasure(s) without a receipt", len(pending))
        out: list[Receipt] = []
        failures: dict[str, str] = {}
        for receipt_id, issued_at, entry, statement in pending:
            try:  # one entry that cannot be attested must not block the others
                if statement is None:
                    request = request_from_journal(entry)
                    self._needs_store(request)
                    with self.lock, self._store_lock():
                        outcome = self._resume(self.conn, receipt_id, issued_at, entry)
                    statement = self._statement_of(outcome, self._api_checks(request, set()))
                    with self.lock:
                        statement = record_statement(self.conn, receipt_id, statement)
                receipt = self._sign(statement)
            except Exception as exc:
                failures[receipt_id] = exc.message if isinstance(exc, Error) else repr(exc)
                continue
            self._mark_issued(receipt)
            out.append(receipt)
        self._recovery_error(failures, out)
        return out

    def _api_checks(
        self, request: ErasureRequest, namespaces: set[str]
    ) -> list[tuple[str, int, str]]:
        token = _API_CHECK.set(True)
        try:
            return self._api_checks_unguarded(request, namespaces)
        finally:
            _API_CHECK.reset(token)

    def _api_checks_unguarded(
        self, request: ErasureRequest, namespaces: set[str]
    ) -> list[tuple[str, int, str]]:
        tid = request.thread_id
        found = sum(
            1
            for ns in namespaces | {""}
            if self.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ns}})
        )
        listed = sum(1 for _ in self.list({"configurable": {"thread_id": tid}}))
        stored = None
        if request.store_namespaces:
            assert self.store is not None
            stored = count_items(self.store, request.store_namespaces)
        return _api_results(namespaces, found, listed, stored)

    def pending_erasures(self) -> list[PendingErasure]:
        """Erasures that committed but have no receipt yet, oldest first, with their age
        (``recover_receipts(min_age_seconds=...)`` skips the younger ones)."""
        with self.lock:
            self.setup()
            return self._pending(pending_journal(self.conn))

    def digest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] = ()
    ) -> ThreadDigest:
        """The measurement an erasure would take now, without deleting anything.

        Read-only: works on a ``mode=ro`` connection and writes nothing to the database;
        raises ``NotALangGraphDatabaseError`` if it has no checkpoint tables.
        """
        request = self._request(thread_id, store_namespaces, False)
        self._resolve_store_rows()
        with self.lock, self._store_lock():
            return self._digest(self.conn, request)

    def delete_thread(self, thread_id: str) -> None:
        """Attested ``delete_thread``: erases with ``namespaces_for(thread_id)``.

        The receipt is archived (if ``archive`` is set) and kept in ``last_receipt``. A
        thread with no stored rows is a no-op, as for ``SqliteSaver`` (no receipt, no
        tombstone).
        """
        try:
            self.erase_thread(thread_id, store_namespaces=self._default_namespaces(thread_id))
        except NothingToEraseError as exc:
            log.info("delete_thread: %s", exc.message)

    def reopen_thread(self, thread_id: str) -> bool:
        """Remove the tombstone so the thread id can be written again (explicit opt-in)."""
        with self.cursor() as cur:
            cur.execute("DELETE FROM erasure_tombstones WHERE thread_id = ?", (str(thread_id),))
            return cur.rowcount > 0

    def is_erased(self, thread_id: str) -> bool:
        """Whether the thread id is tombstoned (erased and not reopened)."""
        with self.cursor(transaction=False) as cur:
            cur.execute("SELECT 1 FROM erasure_tombstones WHERE thread_id = ?", (str(thread_id),))
            return cur.fetchone() is not None

    def export_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] = (),
        *,
        select: Callable[[str, tuple[Any, ...]], bool] | None = None,
    ) -> list[LeafRecord]:
        """Legal hold: the scope's rows with their inclusion proofs, before an erasure.

        Every row an erasure with the same arguments would measure now - or those for
        which ``select(table, primary_key)`` is true - as a :class:`LeafRecord`: its
        exact leaf data, leaf index, the tree size and root, and its RFC 9162 audit
        path. Keep ``record.to_json()`` (ROW.json); after the erasure ``receipt prove``
        shows the row was inside it. Read-only. The proofs hold only if nothing in the
        scope changes before the erasure (tree size and root must equal the receipt's).
        """
        from .engine import export_leaves as collect

        request = self._request(thread_id, store_namespaces, False)
        self._resolve_store_rows()
        with self.lock, self._store_lock():
            hashes, chosen = collect(self._backend(self.conn, request), head_filter(select))
        return leaf_records(request.thread_id, hashes, chosen)


class AsyncAttestingSqliteSaver(AsyncSqliteSaver, _Attesting):
    """``AsyncSqliteSaver`` whose deletions are measured, verified and signed.

    Same arguments as :class:`AttestingSqliteSaver`. The measurement and deletion run
    on aiosqlite's own database thread inside one ``BEGIN IMMEDIATE`` transaction; the
    public-API checks run on the event loop afterwards.
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
    ) -> None:
        super().__init__(conn, serde=serde)
        self._init_attesting(
            signer, store, archive, namespaces_for, clock, residue_scan, refuse_erased_reads
        )
        self._tombstones_ready = False

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
    ) -> AsyncIterator[AsyncAttestingSqliteSaver]:
        """Open ``conn_string`` with aiosqlite and yield a saver on it; closed on exit."""
        async with aiosqlite.connect(conn_string) as conn:
            yield cls(
                conn, signer=signer, serde=serde, store=store, archive=archive,
                namespaces_for=namespaces_for, clock=clock, residue_scan=residue_scan,
                refuse_erased_reads=refuse_erased_reads,
            )  # fmt: skip

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        # aiosqlite owns the sqlite3 connection on its worker thread; run there.
        return await self.conn._execute(fn, *args)  # type: ignore[no-untyped-call]

    async def setup(self) -> None:
        """The parent's ``setup``, then (once per saver, on aiosqlite's thread) the
        tombstone and journal tables, the tombstone triggers and ``secure_delete``."""
        await super().setup()
        if not self._tombstones_ready:
            async with self.lock:
                if not self._tombstones_ready:
                    await self._run(lambda: ensure_tombstones(self.conn._conn))
                    self._tombstones_ready = True

    @asynccontextmanager
    async def _atombstone_errors(self, config: RunnableConfig) -> AsyncIterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as exc:
            if not is_tombstone_error(exc):
                raise
            # The parent neither commits nor rolls back when its INSERT fails; don't
            # leave the connection holding the write lock in a half-open transaction.
            async with self.lock:
                if self.conn.in_transaction:
                    await self.conn.rollback()
            raise ThreadErasedError(str(config["configurable"]["thread_id"])) from None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The parent's ``aget_tuple``, except that with ``refuse_erased_reads`` a
        tombstoned thread raises ``ThreadErasedError`` instead of returning None."""
        if self.refuse_erased_reads and not _API_CHECK.get():
            thread_id = config["configurable"].get("thread_id")
            if thread_id is not None and await self.ais_erased(str(thread_id)):
                raise ThreadErasedError(str(thread_id))
        return await super().aget_tuple(config)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The parent's ``aput``; a write to a tombstoned thread raises
        ``ThreadErasedError`` (and the transaction the parent left open is rolled back)."""
        async with self._atombstone_errors(config):
            return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The parent's ``aput_writes``; a write to a tombstoned thread raises
        ``ThreadErasedError`` (and the transaction the parent left open is rolled back)."""
        async with self._atombstone_errors(config):
            await super().aput_writes(config, writes, task_id, task_path)

    async def _resolve_store_rows_async(self) -> None:
        from langgraph.store.sqlite import SqliteStore
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        if self._store_rows is not None:
            return
        store = self.store
        if getattr(store, "conn", None) is self.conn:
            # One aiosqlite connection for both: its rows are ours, in our transaction
            # (and its sync API must never be called from that connection's own thread).
            self._store_rows = True
            return
        mine = await self._run(lambda: database_path(self.conn._conn))
        other = None
        try:
            if isinstance(store, AsyncSqliteStore):
                await store.conn.execute("PRAGMA secure_delete = ON")
                async with store.conn.execute("PRAGMA database_list") as cur:
                    rows = await cur.fetchall()
                other = next((r[2] or ":memory:" for r in rows if r[1] == "main"), None)
            elif isinstance(store, SqliteStore):
                with store.lock:
                    store.conn.execute("PRAGMA secure_delete = ON")
                    other = database_path(store.conn)
        except sqlite3.Error:
            other = None
        self._store_rows = other is not None and other != ":memory:" and other == mine

    async def aerase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] = (),
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
    ) -> Receipt:
        """Async :meth:`AttestingSqliteSaver.erase_thread`."""
        request = self._request(thread_id, store_namespaces, tombstone, allow_empty)
        self._preflight()
        await self.setup()
        await self._resolve_store_rows_async()
        scan = self._scan(residue_scan)
        async with self.lock:
            outcome, backend = await self._run(self._phase_one, self.conn._conn, request, scan)
        try:
            api = await self._aapi_checks(request, backend.checkpoint_namespaces)
            unsigned = self._statement_of(outcome, api)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        statement = await self._arecord(outcome.receipt_id, unsigned)
        receipt: Receipt = await asyncio.to_thread(self._sign, statement)
        self._set_last(receipt)  # in this task's context (to_thread ran in a copy)
        await self._amark_issued(receipt)
        return receipt

    async def _arecord(self, receipt_id: str, statement: str) -> str:
        try:
            async with self.lock:
                recorded: str = await self._run(
                    record_statement, self.conn._conn, receipt_id, statement
                )
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        return recorded

    async def _amark_issued(self, receipt: Receipt) -> None:
        try:
            async with self.lock:
                data = receipt.to_json()
                await self._run(mark_issued, self.conn._conn, receipt.receipt_id, data)
        except Exception as exc:
            log.warning(
                "receipt %s issued but not marked in the journal: %s", receipt.receipt_id, exc
            )

    async def ajournal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Async :meth:`AttestingSqliteSaver.journal_receipts`."""
        await self.setup()
        async with self.lock:
            blobs = await self._run(journal_receipts, self.conn._conn, thread_id)
        return [Receipt.from_json(b) for b in blobs]

    async def arecover_receipts(self, *, min_age_seconds: float = 300.0) -> list[Receipt]:
        """Async :meth:`AttestingSqliteSaver.recover_receipts`."""
        await self.setup()
        await self._resolve_store_rows_async()
        cutoff = self._recovery_cutoff(min_age_seconds)
        async with self.lock:
            pending = await self._run(pending_journal, self.conn._conn, cutoff)
        if pending:
            self._preflight()
            log.info("recovering %d journaled erasure(s) without a receipt", len(pending))
        out: list[Receipt] = []
        failures: dict[str, str] = {}
        for receipt_id, issued_at, entry, statement in pending:
            try:
                if statement is None:
                    request = request_from_journal(entry)
                    self._needs_store(request)
                    async with self.lock:
                        outcome = await self._run(
                            self._resume, self.conn._conn, receipt_id, issued_at, entry
                        )
                    api = await self._aapi_checks(request, set())
                    statement = await self._arecord(receipt_id, self._statement_of(outcome, api))
                receipt = await asyncio.to_thread(self._sign, statement)
                self._set_last(receipt)
            except Exception as exc:
                failures[receipt_id] = exc.message if isinstance(exc, Error) else repr(exc)
                continue
            await self._amark_issued(receipt)
            out.append(receipt)
        self._recovery_error(failures, out)
        return out

    async def _aapi_checks(
        self, request: ErasureRequest, namespaces: set[str]
    ) -> list[tuple[str, int, str]]:
        token = _API_CHECK.set(True)
        try:
            return await self._aapi_checks_unguarded(request, namespaces)
        finally:
            _API_CHECK.reset(token)

    async def _aapi_checks_unguarded(
        self, request: ErasureRequest, namespaces: set[str]
    ) -> list[tuple[str, int, str]]:
        tid = request.thread_id
        found = 0
        for ns in namespaces | {""}:
            if await self.aget_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ns}}):
                found += 1
        listed = 0
        async for _ in self.alist({"configurable": {"thread_id": tid}}):
            listed += 1
        stored = None
        if request.store_namespaces:
            assert self.store is not None
            stored = await acount_items(self.store, request.store_namespaces)
        return _api_results(namespaces, found, listed, stored)

    async def apending_erasures(self) -> list[PendingErasure]:
        """Async :meth:`AttestingSqliteSaver.pending_erasures`."""
        await self.setup()
        async with self.lock:
            rows = await self._run(pending_journal, self.conn._conn)
        return self._pending(rows)

    async def adigest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] = ()
    ) -> ThreadDigest:
        """Async :meth:`AttestingSqliteSaver.digest_thread` (read-only too)."""
        request = self._request(thread_id, store_namespaces, False)
        await self._resolve_store_rows_async()
        async with self.lock:
            result: ThreadDigest = await self._run(self._digest, self.conn._conn, request)
        return result

    async def adelete_thread(self, thread_id: str) -> None:
        """Attested ``adelete_thread``: erases with ``namespaces_for(thread_id)``; a thread
        with no stored rows is a no-op (no receipt, no tombstone)."""
        try:
            await self.aerase_thread(
                thread_id, store_namespaces=self._default_namespaces(thread_id)
            )
        except NothingToEraseError as exc:
            log.info("adelete_thread: %s", exc.message)

    async def areopen_thread(self, thread_id: str) -> bool:
        """Async :meth:`AttestingSqliteSaver.reopen_thread`."""
        await self.setup()
        async with self.lock:
            cur = await self.conn.execute(
                "DELETE FROM erasure_tombstones WHERE thread_id = ?", (str(thread_id),)
            )
            await self.conn.commit()
            return bool(cur.rowcount and cur.rowcount > 0)

    async def ais_erased(self, thread_id: str) -> bool:
        """Async :meth:`AttestingSqliteSaver.is_erased`."""
        await self.setup()
        async with (
            self.lock,
            self.conn.execute(
                "SELECT 1 FROM erasure_tombstones WHERE thread_id = ?", (str(thread_id),)
            ) as cur,
        ):
            return await cur.fetchone() is not None

    async def aexport_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] = (),
        *,
        select: Callable[[str, tuple[Any, ...]], bool] | None = None,
    ) -> list[LeafRecord]:
        """Async :meth:`AttestingSqliteSaver.export_leaves` (read-only too)."""
        from .engine import export_leaves as collect

        request = self._request(thread_id, store_namespaces, False)
        await self._resolve_store_rows_async()

        def run() -> tuple[list[bytes], list[tuple[int, bytes]]]:
            return collect(self._backend(self.conn._conn, request), head_filter(select))

        async with self.lock:
            hashes, chosen = await self._run(run)
        return leaf_records(request.thread_id, hashes, chosen)
