"""Attesting checkpointers: LangGraph's SQLite savers plus signed, verified erasure.

Normal operation (``put``, ``put_writes``, ``get_tuple``, ``list``) is the parent's;
these subclasses add ``erase_thread`` / ``aerase_thread``, ``digest_thread``, tombstones
and attested ``delete_thread``. The operations themselves are written once, in the
eraser (:mod:`erasure_receipts._engine.eraser`) each saver holds; this module only says
how to reach a SQLite database (the ``Database`` seam).
The savers depend on parent internals (``conn``, ``lock``, ``setup``, aiosqlite's worker
thread); the supported version ranges are pinned in ``pyproject.toml`` and checked by
LangGraph's conformance suite in the tests.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, closing, contextmanager, nullcontext, suppress
from datetime import datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.base import BaseStore

from .. import __version__
from .._backends import sqlite as sqlite_backend
from .._backends.sealing import Encryption, SealingSerde
from .._backends.sqlite import (
    SqliteBackend,
    asecure_store_connection,
    database_path,
    ensure_tombstones,
    has_checkpoints_table,
    is_tombstone_error,
    scrub,
    secure_store_connection,
)
from .._engine import ErasureRequest
from .._engine.eraser import Eraser, NamespacesFor, PendingErasure, ThreadDigest, check_archive
from .._engine.readback import API_CHECK, AsyncSaverReader, SaverReader
from .._engine.seams import ResidueScan
from .._held import HeldWrites, key_of
from .._ops import compaction as _compaction
from .._ops.compaction import Compactions, policy_of
from .._surface import AsyncErasureMethods, ErasureMethods
from ..errors import (
    ErasedDataRestoredError,
    ErasureIncompleteError,
    NotALangGraphDatabaseError,
    ThreadErasedError,
)
from ..log import ReceiptLog
from ..signing import Signer
from ._base import LoopBridge, store_parts

__all__ = [
    "AsyncAttestingSqliteSaver",
    "AttestingSqliteSaver",
    "PendingErasure",
    "ThreadDigest",
    "check_archive",
]

T = TypeVar("T")
Select = Callable[[str, tuple[Any, ...]], bool]


@contextmanager
def _tombstone_errors(config: RunnableConfig) -> Iterator[None]:
    """The database's tombstone trigger fired: say so in the library's own terms."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if is_tombstone_error(exc):
            raise ThreadErasedError(str(config["configurable"]["thread_id"])) from None
        raise


@cache
def _versions() -> dict[str, str]:
    out = {"langgraph-erasure-receipts": __version__, "sqlite": sqlite3.sqlite_version}
    for dist in ("langgraph-checkpoint", "langgraph-checkpoint-sqlite"):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


class _SqliteDatabase:
    """The sync SQLite saver's database seam: its ``sqlite3.Connection`` under its lock
    (and the store's, when the store shares the connection)."""

    def __init__(self, saver: AttestingSqliteSaver) -> None:
        self.saver = saver
        self._store_rows: bool | None = None

    def _store_lock(self) -> Any:
        store = self.saver._eraser.store
        lock = getattr(store, "lock", None)
        same_conn = getattr(store, "conn", None) is self.saver.conn
        return lock if same_conn and lock is not None else nullcontext()

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` under the saver's lock."""
        with self.saver.lock, self._store_lock():
            return fn(self.saver.conn, *args)

    def backend(
        self, conn: sqlite3.Connection, request: ErasureRequest, residue_scan: ResidueScan
    ) -> SqliteBackend:
        """The SQLite backend of ``request`` (a store elsewhere is swept through its API)."""
        store = self.saver._eraser.store
        rows_ns, extra = store_parts(store, self._store_rows, request)
        return SqliteBackend(
            conn,
            request.thread_id,
            saver=type(self.saver).__name__,
            store=type(store).__name__ if store is not None else None,
            store_rows_namespaces=rows_ns,
            extra_parts=extra,
            extra_residue=(lambda: _store_residue(store, bool(residue_scan))) if extra else None,
            versions=_versions(),
            residue_scan=residue_scan,
            threads=list(request.threads) if request.kind in ("subject", "namespace") else None,
            keep=request.keep,
            kept=request.kept,
            removed=request.removed,
            tombstone_policy=self.saver._eraser.tombstone_policy,
            tombstone_store=not request.mapped_store,
        )

    def retryable(self, exc: ErasureIncompleteError) -> bool:
        """SQLite's ``BEGIN IMMEDIATE`` waits for the lock: nothing to retry."""
        return False

    def check_readable(self, conn: sqlite3.Connection) -> None:
        """Read-only: never creates tables, triggers or changes the journal mode, so a
        preview also works on a ``mode=ro`` connection."""
        if not has_checkpoints_table(conn):
            raise NotALangGraphDatabaseError(
                f"{database_path(conn)}: no LangGraph checkpoint tables (not a LangGraph database)"
            )

    def forget_store(self) -> None:
        """The store changed: locate it again."""
        self._store_rows = None

    def store_rows(self) -> bool:
        """Whether the store's items are rows of the saver's database file."""
        return bool(self._store_rows)

    def resolve_store(self) -> None:
        """Whether the store's tables live in the saver's database (no writes)."""
        from langgraph.store.sqlite import SqliteStore

        if self._store_rows is not None:
            return
        store = self.saver._eraser.store
        if not isinstance(store, SqliteStore):
            self._store_rows = False
        elif store.conn is self.saver.conn:
            self._store_rows = True
        else:
            try:
                with store.lock:  # its own connection: secure_delete on it too
                    other = secure_store_connection(store.conn)
                self._store_rows = other != ":memory:" and other == database_path(self.saver.conn)
            except sqlite3.Error:
                self._store_rows = False

    def prepare(self) -> None:
        """Set up (the library's tables), then locate the store."""
        self.saver.setup()
        self.resolve_store()

    def ensure_journal(self) -> None:
        """The library's tables exist."""
        self.saver.setup()


class _AsyncSqliteDatabase(LoopBridge, _SqliteDatabase):
    """The async SQLite saver's database seam: the ``sqlite3.Connection`` inside
    aiosqlite, used on aiosqlite's own thread; a flow runs on a worker thread and
    reaches it through the event loop."""

    saver: AsyncAttestingSqliteSaver  # type: ignore[assignment]

    def __init__(self, saver: AsyncAttestingSqliteSaver) -> None:
        self.saver = saver
        self._store_rows = None

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        return self.on_loop(self.arun(fn, *args))

    async def arun(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` on aiosqlite's thread, under the saver's lock."""
        async with self.saver.lock:
            result: T = await self.saver._run(fn, self.saver.conn._conn, *args)
        return result

    async def aresolve_store(self) -> None:
        """Async ``resolve_store``."""
        from langgraph.store.sqlite import SqliteStore
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        if self._store_rows is not None:
            return
        saver = self.saver
        store = saver._eraser.store
        if getattr(store, "conn", None) is saver.conn:
            # One aiosqlite connection for both: its rows are ours, in our transaction
            # (and its sync API must never be called from that connection's own thread).
            self._store_rows = True
            return
        mine = await saver._run(lambda: database_path(saver.conn._conn))
        other = None
        try:
            if isinstance(store, AsyncSqliteStore):
                other = await asecure_store_connection(store.conn)
            elif isinstance(store, SqliteStore):
                with store.lock:
                    other = secure_store_connection(store.conn)
        except sqlite3.Error:
            other = None
        self._store_rows = other is not None and other != ":memory:" and other == mine

    async def aprepare(self) -> None:
        """Async ``prepare``."""
        await self.saver.setup()
        await self.aresolve_store()

    async def aensure_journal(self) -> None:
        """Async ``ensure_journal``."""
        await self.saver.setup()


def _store_residue(store: Any, scanned: bool) -> list[dict[str, Any]]:
    """Residue of a swept store: scrub it if it is SQLite we can reach, else say so."""
    from langgraph.store.sqlite import SqliteStore

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
            {"action": action, "status": "skipped",
             "detail": {"database": path, "reason": reason}}
        )  # fmt: skip
        return out
    return [
        {"action": "store.scrub", "status": "skipped",
         "detail": {"store": type(store).__name__,
                    "reason": "deleted through the BaseStore API; its storage is not "
                              "scrubbed by this library"}}
    ]  # fmt: skip


class AttestingSqliteSaver(ErasureMethods, SqliteSaver):
    """``SqliteSaver`` whose deletions are measured, verified and signed.

    Args:
        conn: the SQLite connection (as for ``SqliteSaver``).
        signer: the Ed25519 key that signs receipts.
        store: the application's ``BaseStore``; its items under a thread's store
            namespaces are erased with the thread. A ``SqliteStore`` in the same
            database file is erased in the same transaction; any other store is swept.
        archive: directory where every receipt is written durably before returning,
            or a ``ReceiptLog`` (erasure_receipts.log) to append it to a signed log.
        namespaces_for: ``thread_id -> store namespace prefixes``: the store scope of
            every thread-scoped operation not given ``store_namespaces=`` (erase,
            ``delete_thread`` - which other code, e.g. LangGraph itself, may call -,
            digest, history, prune, sweeps), erased only with rows of the thread
            itself. Requires ``store``.
        clock: returns the current time (inject for deterministic tests).
        residue_scan: after every erasure, scan the database file's free space and its
            ``-shm``/``-journal`` files (with the WAL emptied) for copies of the erased
            rows, ``VACUUM`` if any is found, and record the checked result in the
            receipt; ``"vacuum"`` always rewrites the file (see README, "What a receipt
            does not cover").
        refuse_erased_reads: ``get_tuple`` of an erased (tombstoned) thread raises
            ``ThreadErasedError`` instead of returning None, so a graph still running on
            an erased thread stops at its first read - before its nodes write anything
            (e.g. user memory into an erased store namespace). Off by default: LangGraph's
            saver contract returns None for unknown threads.
        erase_compacted: when a step removes messages (``RemoveMessage``, as
            ``SummarizationMiddleware`` and sliding windows do), deal with the history
            that still holds them once the checkpoint applying the removal is saved:
            ``True``/``"erase_history"`` erases every older checkpoint (a ``history``
            receipt), ``"redact"`` rewrites the removed texts out of every row of the
            thread, every checkpoint kept (a ``redaction`` receipt). Failures are logged
            and retried at the thread's next checkpoint, never raised into the graph.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        check_erasures: str | Path | ReceiptLog | None = None,
        targets: Sequence[Any] | None = None,
        erase_compacted: bool | str = False,
        encryption: Encryption | None = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        self._held_writes = HeldWrites()
        self._eraser = Eraser(
            _SqliteDatabase(self), sqlite_backend.JOURNAL, SaverReader(self),
            signer=signer, store=store, archive=archive, namespaces_for=namespaces_for,
            clock=clock, residue_scan=residue_scan, refuse_erased_reads=refuse_erased_reads,
            tombstone_policy=tombstone_policy, targets=targets,
        )  # fmt: skip
        self.check_erasures = check_erasures
        self._compactions = Compactions(policy_of(erase_compacted))
        self.encryption = encryption
        if encryption is not None:
            encryption.keys.check_not_database(sqlite_path=database_path(conn))
            self._plain_serde = self.serde
            self.serde = SealingSerde(self.serde)

    @classmethod
    @contextmanager
    def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        check_erasures: str | Path | ReceiptLog | None = None,
        targets: Sequence[Any] | None = None,
        erase_compacted: bool | str = False,
        encryption: Encryption | None = None,
    ) -> Iterator[AttestingSqliteSaver]:
        """Open ``conn_string`` (a path or ``:memory:``) and yield a saver on it; the
        connection is closed on exit. Other arguments as for the constructor."""
        with closing(sqlite3.connect(conn_string, check_same_thread=False)) as conn:
            yield cls(
                conn, signer=signer, serde=serde, store=store, archive=archive,
                namespaces_for=namespaces_for, clock=clock, residue_scan=residue_scan,
                refuse_erased_reads=refuse_erased_reads, tombstone_policy=tombstone_policy,
                check_erasures=check_erasures, targets=targets,
                erase_compacted=erase_compacted, encryption=encryption,
            )  # fmt: skip

    def setup(self) -> None:
        """The parent's ``setup``, then the tombstone and journal tables, the tombstone
        triggers and ``secure_delete`` on this connection (skipped once set up)."""
        if self.is_setup:
            return
        super().setup()
        try:
            ensure_tombstones(self.conn)
            self._check_erasures()  # check_erasures=: refuse while erased data is back
        except BaseException:
            self.is_setup = False  # retried next time, never silently without triggers
            raise

    # -- normal operation: the parent's, with tombstone errors made explicit -----------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The parent's ``get_tuple``, except that with ``refuse_erased_reads`` a
        tombstoned thread raises ``ThreadErasedError`` instead of returning None (the
        saver's own post-erasure API checks still read it and find nothing)."""
        if self._eraser.refuse_erased_reads and not API_CHECK.get():
            thread_id = config["configurable"].get("thread_id")
            if thread_id is not None and self.is_erased(str(thread_id)):
                raise ThreadErasedError(str(thread_id))
        tup = super().get_tuple(config)
        if self.encryption is not None:
            return self.encryption.open_tuple(self._plain_serde, tup)
        return tup

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The parent's ``list``; with ``encryption`` each checkpoint and pending write
        is decrypted against the row it was read from."""
        rows = super().list(config, filter=filter, before=before, limit=limit)
        if self.encryption is None:
            yield from rows
            return
        for tup in rows:
            opened = self.encryption.open_tuple(self._plain_serde, tup)
            assert opened is not None
            yield opened

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """The parent's fast path reads rows itself; with ``encryption`` LangGraph's
        generic walk over ``get_tuple`` (which decrypts) is used."""
        if self.encryption is None:
            return super().get_delta_channel_history(config=config, channels=channels)
        return BaseCheckpointSaver.get_delta_channel_history(self, config=config, channels=channels)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The parent's ``put``; a write to a tombstoned thread raises
        ``ThreadErasedError`` instead of ``sqlite3.IntegrityError``. Writes held for
        this checkpoint are saved after it."""

        def save() -> RunnableConfig:
            stored: Any = checkpoint
            if self.encryption is not None:
                stored = self.encryption.sealed_checkpoint(self._plain_serde, config, checkpoint)
            with _tombstone_errors(config):
                return super(AttestingSqliteSaver, self).put(config, stored, metadata, new_versions)

        key = key_of(config, checkpoint["id"])
        saved = self._held_writes.put(key, save, lambda item: self.put_writes(*item))
        _compaction.handle(self, self._compactions, config, checkpoint)  # erase_compacted=
        return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The parent's ``put_writes``; a write to a tombstoned thread raises
        ``ThreadErasedError`` instead of ``sqlite3.IntegrityError``;
        writes that come before their checkpoint of a new conversation are held until it
        is saved (see :mod:`erasure_receipts._held`)."""

        def write() -> None:
            stored = writes
            if self.encryption is not None:
                stored = self.encryption.sealed_writes(self._plain_serde, config, writes, task_id)
            with _tombstone_errors(config):
                super(AttestingSqliteSaver, self).put_writes(config, stored, task_id, task_path)

        def bound() -> str | None:
            return self._eraser.db.run(sqlite_backend.tombstone_bound, key_of(config)[0])

        self._held_writes.put_writes((config, writes, task_id, task_path), write, bound)
        if self._compactions.note(config, writes):  # erase_compacted=: messages removed
            _compaction.handle_late(self, self._compactions, config)


class AsyncAttestingSqliteSaver(AsyncErasureMethods, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` whose deletions are measured, verified and signed.

    Same arguments as :class:`AttestingSqliteSaver`. The shared flows run on a worker
    thread: the measurement and deletion on aiosqlite's own database thread inside one
    ``BEGIN IMMEDIATE`` transaction, the public-API checks on the event loop.
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        check_erasures: str | Path | ReceiptLog | None = None,
        targets: Sequence[Any] | None = None,
        erase_compacted: bool | str = False,
        encryption: Encryption | None = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        self._held_writes = HeldWrites()
        db = _AsyncSqliteDatabase(self)
        self._eraser = Eraser(
            db, sqlite_backend.JOURNAL, AsyncSaverReader(self, db.on_loop),
            signer=signer, store=store, archive=archive, namespaces_for=namespaces_for,
            clock=clock, residue_scan=residue_scan, refuse_erased_reads=refuse_erased_reads,
            tombstone_policy=tombstone_policy, targets=targets,
        )  # fmt: skip
        self.check_erasures = check_erasures
        self._compactions = Compactions(policy_of(erase_compacted))
        self._tombstones_ready = False
        self.encryption = encryption
        self._key_store_checked = encryption is None
        if encryption is not None:
            self._plain_serde = self.serde
            self.serde = SealingSerde(self.serde)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        signer: Signer,
        serde: SerializerProtocol | None = None,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        check_erasures: str | Path | ReceiptLog | None = None,
        targets: Sequence[Any] | None = None,
        erase_compacted: bool | str = False,
        encryption: Encryption | None = None,
    ) -> AsyncIterator[AsyncAttestingSqliteSaver]:
        """Open ``conn_string`` with aiosqlite and yield a saver on it; closed on exit."""
        async with aiosqlite.connect(conn_string) as conn:
            yield cls(
                conn, signer=signer, serde=serde, store=store, archive=archive,
                namespaces_for=namespaces_for, clock=clock, residue_scan=residue_scan,
                refuse_erased_reads=refuse_erased_reads, tombstone_policy=tombstone_policy,
                check_erasures=check_erasures, targets=targets,
                erase_compacted=erase_compacted, encryption=encryption,
            )  # fmt: skip

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        # aiosqlite owns the sqlite3 connection on its worker thread; run there.
        return await self.conn._execute(fn, *args)  # type: ignore[no-untyped-call]

    async def setup(self) -> None:
        """The parent's ``setup``, then (once per saver, on aiosqlite's thread) the
        tombstone and journal tables, the tombstone triggers and ``secure_delete``."""
        await super().setup()
        if not self._key_store_checked and self.encryption is not None:
            path = await self._run(lambda: database_path(self.conn._conn))
            self.encryption.keys.check_not_database(sqlite_path=path)
            self._key_store_checked = True
        if not self._tombstones_ready:
            async with self.lock:
                if not self._tombstones_ready:
                    await self._run(lambda: ensure_tombstones(self.conn._conn))
                    self._tombstones_ready = True
        try:
            await self._acheck_erasures()  # check_erasures=: refuse while erased data is back
        except ErasedDataRestoredError:
            self.is_setup = False
            raise

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
        if self._eraser.refuse_erased_reads and not API_CHECK.get():
            thread_id = config["configurable"].get("thread_id")
            if thread_id is not None and await self.ais_erased(str(thread_id)):
                raise ThreadErasedError(str(thread_id))
        if self.encryption is None:
            return await super().aget_tuple(config)
        if not self._key_store_checked:
            await self.setup()  # the key store is checked before the first read
        tup = await super().aget_tuple(config)
        return self.encryption.open_tuple(self._plain_serde, tup)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The parent's ``alist``; with ``encryption`` each row is decrypted."""
        if not self._key_store_checked:
            await self.setup()
        async for tup in super().alist(config, filter=filter, before=before, limit=limit):
            if self.encryption is None:
                yield tup
            else:
                opened = self.encryption.open_tuple(self._plain_serde, tup)
                assert opened is not None
                yield opened

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """With ``encryption``: LangGraph's generic walk over ``aget_tuple``."""
        if self.encryption is None:
            return await super().aget_delta_channel_history(config=config, channels=channels)
        return await BaseCheckpointSaver.aget_delta_channel_history(
            self, config=config, channels=channels
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """With ``encryption``: LangGraph's generic walk over ``get_tuple``."""
        if self.encryption is None:
            return super().get_delta_channel_history(config=config, channels=channels)
        return BaseCheckpointSaver.get_delta_channel_history(self, config=config, channels=channels)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The parent's ``aput``; a write to a tombstoned thread raises
        ``ThreadErasedError`` (and the transaction the parent left open is rolled back)."""

        async def save() -> RunnableConfig:
            stored: Any = checkpoint
            if self.encryption is not None:
                if not self._key_store_checked:
                    await self.setup()
                stored = self.encryption.sealed_checkpoint(self._plain_serde, config, checkpoint)
            async with self._atombstone_errors(config):
                return await super(AsyncAttestingSqliteSaver, self).aput(
                    config, stored, metadata, new_versions
                )

        key = key_of(config, checkpoint["id"])
        saved = await self._held_writes.aput(key, save, lambda item: self.aput_writes(*item))
        await _compaction.ahandle(self, self._compactions, config, checkpoint)
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The parent's ``aput_writes``; a write to a tombstoned thread raises
        ``ThreadErasedError`` (and the transaction the parent left open is rolled back)."""

        async def write() -> None:
            stored = writes
            if self.encryption is not None:
                if not self._key_store_checked:
                    await self.setup()
                stored = self.encryption.sealed_writes(self._plain_serde, config, writes, task_id)
            async with self._atombstone_errors(config):
                await super(AsyncAttestingSqliteSaver, self).aput_writes(
                    config, stored, task_id, task_path
                )

        async def bound() -> str | None:
            return await self._adb.arun(sqlite_backend.tombstone_bound, key_of(config)[0])

        item = (config, writes, task_id, task_path)
        await self._held_writes.aput_writes(item, write, bound)
        if self._compactions.note(config, writes):  # erase_compacted=: messages removed
            await _compaction.ahandle_late(self, self._compactions, config)
