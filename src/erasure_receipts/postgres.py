"""Attesting checkpointers for PostgreSQL: ``PostgresSaver`` / ``AsyncPostgresSaver``
plus signed, verified erasure.

Normal operation (``put``, ``put_writes``, ``get_tuple``, ``list``) is the parent's;
tombstone refusals from the database trigger become ``ThreadErasedError``. Erasure runs
the backend-agnostic engine over :mod:`erasure_receipts.backends.postgres`. The async
saver runs the very same synchronous code on a worker thread, its database calls
bridged onto the event loop that owns the ``AsyncConnection`` (``AsyncBridgeSession``):
there is one implementation of the erasure, not two.

Requires the ``postgres`` extra: ``pip install 'langgraph-erasure-receipts[postgres]'``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres import _ainternal as _pg_ainternal
from langgraph.checkpoint.postgres import _internal as _pg_internal
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import BaseStore
from psycopg.rows import dict_row

from . import __version__
from .backends.postgres import (
    AsyncBridgeSession,
    PostgresBackend,
    Session,
    SyncSession,
    ensure_schema,
    is_erased,
    is_tombstone_error,
    journal_receipts,
    mark_issued,
    pending_journal,
    record_statement,
    reopen,
    retryable,
    schema_installed,
    server_identity,
)
from .backends.store import StoreSweepPart, acount_items, count_items
from .engine import (
    ErasureRequest,
    Part,
    RowsOutcome,
    erase_rows,
    measure_rows,
    request_from_journal,
    resume_rows,
)
from .errors import ErasureIncompleteError, Error, NothingToEraseError, ThreadErasedError
from .proof import LeafRecord, head_filter, leaf_records
from .receipt import Receipt
from .savers import NamespacesFor, PendingErasure, ThreadDigest, _api_results, _Attesting
from .signing import Signer

__all__ = ["AsyncAttestingPostgresSaver", "AttestingPostgresSaver"]

log = logging.getLogger("erasure_receipts")

MAX_ATTEMPTS = 5
"""Erasure attempts on serialization failures, deadlocks and lock timeouts."""


@cache
def _versions() -> dict[str, str]:
    out = {"langgraph-erasure-receipts": __version__}
    for dist in ("langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg"):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def _thread_of(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


@contextmanager
def _tombstone_errors(config: RunnableConfig) -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        if is_tombstone_error(exc):
            raise ThreadErasedError(_thread_of(config)) from None
        raise


class _PgAttesting(_Attesting):
    """What the sync and async Postgres savers share; every method is synchronous and
    takes a :class:`Session`, so the async saver runs it on a worker thread."""

    vacuum: bool | str
    lock_timeout_ms: int

    def _init_pg(self, vacuum: bool | str, lock_timeout_ms: int) -> None:
        if vacuum not in (False, True, "full"):
            raise ValueError('vacuum= must be False, True or "full"')
        self.vacuum = vacuum
        self.lock_timeout_ms = int(lock_timeout_ms)

    def _pg_backend(
        self, session: Session, request: ErasureRequest, residue_scan: object = False
    ) -> PostgresBackend:
        rows_ns: Sequence[tuple[str, ...]] = ()
        extra: list[Part] = []
        if request.store_namespaces:
            assert self.store is not None
            if self._store_rows:
                rows_ns = request.store_namespaces
            else:
                extra.append(StoreSweepPart(self.store, request.store_namespaces))
        return PostgresBackend(
            session,
            request.thread_id,
            saver=type(self).__name__,
            store=type(self.store).__name__ if self.store is not None else None,
            store_rows_namespaces=rows_ns,
            extra_parts=extra,
            extra_residue=self._swept_store_residue if extra else None,
            versions=_versions(),
            vacuum=self.vacuum,
            lock_timeout_ms=self.lock_timeout_ms,
            residue_scan=bool(residue_scan),
        )

    def _swept_store_residue(self) -> list[dict[str, Any]]:
        return [
            {"action": "store.scrub", "status": "skipped",
             "detail": {"store": type(self.store).__name__,
                        "reason": "deleted through the BaseStore API; its storage is not "
                                  "scrubbed by this library"}}
        ]  # fmt: skip

    def _pg_phase_one(
        self, session: Session, request: ErasureRequest, residue_scan: object = False
    ) -> tuple[RowsOutcome, PostgresBackend]:
        """The engine's phase one, retried (bounded) on transient conflicts."""
        clock = {"clock": self.clock} if self.clock is not None else {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            backend = self._pg_backend(session, request, residue_scan)
            try:
                outcome = erase_rows(backend, request, generator_version=__version__, **clock)
            except ErasureIncompleteError as exc:
                swept = any(p.irreversible_deleted for p in backend.parts())
                if not retryable(exc) or swept:
                    raise
                if attempt == MAX_ATTEMPTS:
                    raise ErasureIncompleteError(
                        f"erasure of thread {request.thread_id!r} gave up after {attempt} "
                        f"attempts on concurrent transactions (serialization failure, "
                        f"deadlock or lock timeout); nothing was deleted: {exc.message}",
                        remaining=exc.remaining,
                    ) from exc
                time.sleep(random.uniform(0.01, 0.05) * 2**attempt)
                continue
            log.info(
                "erased thread %r: %d rows, receipt %s",
                request.thread_id,
                sum(t.rows for t in outcome.pre_tables.values()),
                outcome.receipt_id,
            )
            return outcome, backend
        raise AssertionError("unreachable")  # pragma: no cover

    def _pg_resume(
        self, session: Session, receipt_id: str, issued_at: str, entry: str
    ) -> RowsOutcome:
        request = request_from_journal(entry)
        backend = self._pg_backend(session, request, self.residue_scan)
        return resume_rows(backend, request, receipt_id, issued_at, entry)

    def _pg_digest(self, session: Session, request: ErasureRequest) -> ThreadDigest:
        digest, tables = measure_rows(self._pg_backend(session, request))
        return ThreadDigest(digest, tables)

    def _pg_record(self, session: Session, receipt_id: str, statement: str) -> str:
        try:
            return record_statement(session, receipt_id, statement)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc

    @staticmethod
    def _identity(session: Session) -> tuple[Any, ...] | None:
        """Which database (and schema) a connection writes to; None if unknown."""
        try:
            return server_identity(session)
        except psycopg.Error:
            return None


class AttestingPostgresSaver(PostgresSaver, _PgAttesting):
    """``PostgresSaver`` whose deletions are measured, verified and signed.

    Args:
        conn: a ``psycopg.Connection`` (autocommit, ``dict_row``, as for the parent) or
            a ``psycopg_pool.ConnectionPool``.
        pipe: a pipeline of ``conn`` (as for the parent).
        signer: the Ed25519 key that signs receipts.
        store: the application's ``BaseStore``. A ``PostgresStore`` in the same database
            (even with its own connection or pool) is erased in the erasure's
            transaction, expired-TTL rows included; any other store is swept.
        archive: directory where every receipt is written durably before returning.
        namespaces_for: ``thread_id -> store namespace prefixes`` for ``delete_thread``.
        clock: returns the current time (inject for deterministic tests).
        vacuum: ``True`` runs ``VACUUM`` on the affected tables after commit,
            ``"full"`` runs ``VACUUM (FULL)`` (rewrites them; takes an ACCESS EXCLUSIVE
            lock); the outcome is recorded in the receipt's residue either way.
        lock_timeout_ms: longest wait for a lock inside the erasure transaction.
    """

    def __init__(
        self,
        conn: _pg_internal.Conn,
        pipe: psycopg.Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        signer: Signer,
        store: BaseStore | None = None,
        archive: str | Path | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        vacuum: bool | str = False,
        lock_timeout_ms: int = 30_000,
        residue_scan: bool = False,
    ) -> None:
        super().__init__(conn, pipe=pipe, serde=serde)
        self._init_attesting(signer, store, archive, namespaces_for, clock, residue_scan)
        self._init_pg(vacuum, lock_timeout_ms)
        self._schema_ready = False

    @classmethod
    @contextmanager
    def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, *, signer: Signer, pipeline: bool = False, **kwargs: Any
    ) -> Iterator[AttestingPostgresSaver]:
        with psycopg.Connection.connect(
            conn_string, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            if pipeline:
                with conn.pipeline() as pipe:
                    yield cls(conn, pipe, signer=signer, **kwargs)
            else:
                yield cls(conn, signer=signer, **kwargs)

    @contextmanager
    def _session(self) -> Iterator[SyncSession]:
        with self.lock, _pg_internal.get_connection(self.conn) as conn:
            if self.pipe:
                self.pipe.sync()
            yield SyncSession(conn)

    def setup(self) -> None:
        super().setup()
        if not self._schema_ready:
            with self._session() as s:
                ensure_schema(s)
            self._schema_ready = True

    def _ready(self) -> None:
        """Install on first use, unless already installed (then no privilege is needed)."""
        if self._schema_ready:
            return
        with self._session() as s:
            self._schema_ready = schema_installed(s)
        if not self._schema_ready:
            self.setup()

    # -- normal operation: the parent's, with tombstone errors made explicit -----------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        with _tombstone_errors(config):
            return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        with _tombstone_errors(config):
            super().put_writes(config, writes, task_id, task_path)

    # -- erasure ------------------------------------------------------------------------

    def _resolve_store_rows(self) -> None:
        from langgraph.store.postgres import PostgresStore

        if self._store_rows is not None:
            return
        store = self.store
        if not isinstance(store, PostgresStore):
            self._store_rows = False
            return
        # One connection at a time: a store sharing a small pool must not deadlock here.
        with self._session() as mine:
            ours = self._identity(mine)
        with _pg_internal.get_connection(store.conn) as theirs:
            self._store_rows = ours is not None and ours == self._identity(SyncSession(theirs))

    def erase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] = (),
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: bool | None = None,
    ) -> Receipt:
        """Erase every row of the thread (3 tables, all namespaces) and its store items.

        Returns the signed receipt (also written to ``archive`` if set). Raises
        ``ErasureIncompleteError`` - and issues no receipt - if anything fails or remains;
        ``NothingToEraseError`` (nothing deleted, no tombstone) if the scope holds no rows,
        unless ``allow_empty``; ``ConfigurationError`` before deleting if the receipt could
        not be archived. ``residue_scan`` is accepted for API parity: on PostgreSQL the
        receipt records it as ``not_applicable``.
        """
        request = self._request(thread_id, store_namespaces, tombstone, allow_empty)
        self._preflight()
        self._ready()
        self._resolve_store_rows()
        with self._session() as s:
            outcome, backend = self._pg_phase_one(s, request, self._scan(residue_scan))
        try:
            api = self._api_checks(request, backend.checkpoint_namespaces)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        statement = self._statement_of(outcome, api)
        with self._session() as s:
            statement = self._pg_record(s, outcome.receipt_id, statement)
        receipt = self._sign(statement)
        self._mark_issued(receipt)
        return receipt

    def _mark_issued(self, receipt: Receipt) -> None:
        with suppress(psycopg.Error), self._session() as s:
            mark_issued(s, receipt.receipt_id, receipt.to_json())

    def _api_checks(
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

    def digest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] = ()
    ) -> ThreadDigest:
        """The measurement an erasure would take now, without deleting anything."""
        request = self._request(thread_id, store_namespaces, False)
        self._ready()
        self._resolve_store_rows()
        with self._session() as s:
            return self._pg_digest(s, request)

    def delete_thread(self, thread_id: str) -> None:
        """Attested ``delete_thread``: erases with ``namespaces_for(thread_id)``.

        A thread with nothing stored is a no-op (like the parent's), not an error.
        """
        try:
            self.erase_thread(thread_id, store_namespaces=self._default_namespaces(thread_id))
        except NothingToEraseError as exc:
            log.info("delete_thread: %s", exc.message)

    def pending_erasures(self) -> list[PendingErasure]:
        """Erasures that committed but have no receipt yet, oldest first, with their age."""
        self._ready()
        with self._session() as s:
            return self._pending(pending_journal(s))

    def export_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] = (),
        *,
        select: Callable[[str, tuple[Any, ...]], bool] | None = None,
    ) -> list[LeafRecord]:
        """Legal hold: the scope's rows with their inclusion proofs (see the SQLite
        saver's ``export_leaves``). Read-only, one REPEATABLE READ snapshot."""
        from .engine import export_leaves as collect

        request = self._request(thread_id, store_namespaces, False)
        self._ready()
        self._resolve_store_rows()
        with self._session() as s:
            hashes, chosen = collect(self._pg_backend(s, request), head_filter(select))
        return leaf_records(request.thread_id, hashes, chosen)

    def reopen_thread(self, thread_id: str) -> bool:
        """Remove the tombstone so the thread id can be written again (explicit opt-in)."""
        self._ready()
        with self._session() as s:
            return reopen(s, str(thread_id))

    def is_erased(self, thread_id: str) -> bool:
        self._ready()
        with self._session() as s:
            return is_erased(s, str(thread_id))

    def journal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Every receipt this database's erasure journal holds (optionally of one thread)."""
        self._ready()
        with self._session() as s:
            blobs = journal_receipts(s, thread_id)
        return [Receipt.from_json(b) for b in blobs]

    def recover_receipts(self, *, min_age_seconds: float = 300.0) -> list[Receipt]:
        """Issue the receipts of erasures that committed but never got one (see the
        SQLite saver's ``recover_receipts``: same semantics)."""
        self._ready()
        self._resolve_store_rows()
        with self._session() as s:
            pending = pending_journal(s, self._recovery_cutoff(min_age_seconds))
        if pending:
            self._preflight()
        out: list[Receipt] = []
        failures: dict[str, str] = {}
        for receipt_id, issued_at, entry, statement in pending:
            try:
                if statement is None:
                    request = request_from_journal(entry)
                    self._needs_store(request)
                    with self._session() as s:
                        outcome = self._pg_resume(s, receipt_id, issued_at, entry)
                    statement = self._statement_of(outcome, self._api_checks(request, set()))
                    with self._session() as s:
                        statement = self._pg_record(s, receipt_id, statement)
                receipt = self._sign(statement)
            except Exception as exc:
                failures[receipt_id] = exc.message if isinstance(exc, Error) else repr(exc)
                continue
            self._mark_issued(receipt)
            out.append(receipt)
        self._recovery_error(failures, out)
        return out


class AsyncAttestingPostgresSaver(AsyncPostgresSaver, _PgAttesting):
    """``AsyncPostgresSaver`` whose deletions are measured, verified and signed.

    Same arguments as :class:`AttestingPostgresSaver` (``conn`` an ``AsyncConnection``
    or ``AsyncConnectionPool``). The erasure holds the saver's lock and one connection;
    the synchronous engine runs on a worker thread and its statements run on the event
    loop, which stays free meanwhile.
    """

    def __init__(
        self,
        conn: _pg_ainternal.Conn,
        pipe: psycopg.AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        signer: Signer,
        store: BaseStore | None = None,
        archive: str | Path | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        vacuum: bool | str = False,
        lock_timeout_ms: int = 30_000,
        residue_scan: bool = False,
    ) -> None:
        super().__init__(conn, pipe=pipe, serde=serde)
        self._init_attesting(signer, store, archive, namespaces_for, clock, residue_scan)
        self._init_pg(vacuum, lock_timeout_ms)
        self._schema_ready = False

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, *, signer: Signer, pipeline: bool = False, **kwargs: Any
    ) -> AsyncIterator[AsyncAttestingPostgresSaver]:
        async with await psycopg.AsyncConnection.connect(
            conn_string, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            if pipeline:
                async with conn.pipeline() as pipe:
                    yield cls(conn, pipe, signer=signer, **kwargs)
            else:
                yield cls(conn, signer=signer, **kwargs)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncBridgeSession]:
        async with self.lock, _pg_ainternal.get_connection(self.conn) as conn:
            if self.pipe:
                await self.pipe.sync()
            yield AsyncBridgeSession(conn, asyncio.get_running_loop())

    async def _in_session(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the synchronous ``fn(session, *args)`` on a worker thread."""
        async with self._session() as s:
            return await asyncio.to_thread(fn, s, *args)

    async def setup(self) -> None:
        await super().setup()
        if not self._schema_ready:
            await self._in_session(ensure_schema)
            self._schema_ready = True

    async def _aready(self) -> None:
        if self._schema_ready:
            return
        self._schema_ready = bool(await self._in_session(schema_installed))
        if not self._schema_ready:
            await self.setup()

    @asynccontextmanager
    async def _atombstone_errors(self, config: RunnableConfig) -> AsyncIterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            if is_tombstone_error(exc):
                raise ThreadErasedError(_thread_of(config)) from None
            raise

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        async with self._atombstone_errors(config):
            return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        async with self._atombstone_errors(config):
            await super().aput_writes(config, writes, task_id, task_path)

    async def _resolve_store_rows_async(self) -> None:
        from langgraph.store.postgres.aio import AsyncPostgresStore

        if self._store_rows is not None:
            return
        store = self.store
        if not isinstance(store, AsyncPostgresStore):
            self._store_rows = False
            return
        ours = await self._in_session(self._identity)
        async with _pg_ainternal.get_connection(store.conn) as theirs:
            bridge = AsyncBridgeSession(theirs, asyncio.get_running_loop())
            other = await asyncio.to_thread(self._identity, bridge)
        self._store_rows = ours is not None and ours == other

    async def aerase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] = (),
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: bool | None = None,
    ) -> Receipt:
        """Async :meth:`AttestingPostgresSaver.erase_thread`."""
        request = self._request(thread_id, store_namespaces, tombstone, allow_empty)
        self._preflight()
        await self._aready()
        await self._resolve_store_rows_async()
        outcome, backend = await self._in_session(
            self._pg_phase_one, request, self._scan(residue_scan)
        )
        try:
            api = await self._aapi_checks(request, backend.checkpoint_namespaces)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        statement = self._statement_of(outcome, api)
        statement = await self._in_session(self._pg_record, outcome.receipt_id, statement)
        receipt: Receipt = await asyncio.to_thread(self._sign, statement)
        self._set_last(receipt)  # in this task's context (to_thread ran in a copy)
        await self._amark_issued(receipt)
        return receipt

    async def _amark_issued(self, receipt: Receipt) -> None:
        with suppress(psycopg.Error):
            await self._in_session(mark_issued, receipt.receipt_id, receipt.to_json())

    async def _aapi_checks(
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

    async def adigest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] = ()
    ) -> ThreadDigest:
        request = self._request(thread_id, store_namespaces, False)
        await self._aready()
        await self._resolve_store_rows_async()
        result: ThreadDigest = await self._in_session(self._pg_digest, request)
        return result

    async def adelete_thread(self, thread_id: str) -> None:
        """Attested ``adelete_thread``: erases with ``namespaces_for(thread_id)``."""
        try:
            await self.aerase_thread(
                thread_id, store_namespaces=self._default_namespaces(thread_id)
            )
        except NothingToEraseError as exc:
            log.info("adelete_thread: %s", exc.message)

    async def apending_erasures(self) -> list[PendingErasure]:
        """Async :meth:`AttestingPostgresSaver.pending_erasures`."""
        await self._aready()
        rows = await self._in_session(pending_journal)
        return self._pending(rows)

    async def aexport_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] = (),
        *,
        select: Callable[[str, tuple[Any, ...]], bool] | None = None,
    ) -> list[LeafRecord]:
        """Async :meth:`AttestingPostgresSaver.export_leaves`."""
        from .engine import export_leaves as collect

        request = self._request(thread_id, store_namespaces, False)
        await self._aready()
        await self._resolve_store_rows_async()

        def run(s: Session) -> tuple[list[bytes], list[tuple[int, bytes]]]:
            return collect(self._pg_backend(s, request), head_filter(select))

        hashes, chosen = await self._in_session(run)
        return leaf_records(request.thread_id, hashes, chosen)

    async def areopen_thread(self, thread_id: str) -> bool:
        await self._aready()
        return bool(await self._in_session(reopen, str(thread_id)))

    async def ais_erased(self, thread_id: str) -> bool:
        await self._aready()
        return bool(await self._in_session(is_erased, str(thread_id)))

    async def ajournal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        await self._aready()
        blobs = await self._in_session(journal_receipts, thread_id)
        return [Receipt.from_json(b) for b in blobs]

    async def arecover_receipts(self, *, min_age_seconds: float = 300.0) -> list[Receipt]:
        await self._aready()
        await self._resolve_store_rows_async()
        cutoff = self._recovery_cutoff(min_age_seconds)
        pending = await self._in_session(pending_journal, cutoff)
        if pending:
            self._preflight()
        out: list[Receipt] = []
        failures: dict[str, str] = {}
        for receipt_id, issued_at, entry, statement in pending:
            try:
                if statement is None:
                    request = request_from_journal(entry)
                    self._needs_store(request)
                    outcome = await self._in_session(self._pg_resume, receipt_id, issued_at, entry)
                    api = await self._aapi_checks(request, set())
                    statement = await self._in_session(
                        self._pg_record, receipt_id, self._statement_of(outcome, api)
                    )
                receipt = await asyncio.to_thread(self._sign, statement)
            except Exception as exc:
                failures[receipt_id] = exc.message if isinstance(exc, Error) else repr(exc)
                continue
            await self._amark_issued(receipt)
            out.append(receipt)
        self._recovery_error(failures, out)
        return out
