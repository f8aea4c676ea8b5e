"""Attesting checkpointers for PostgreSQL: ``PostgresSaver`` / ``AsyncPostgresSaver``
plus signed, verified erasure.

Normal operation (``put``, ``put_writes``, ``get_tuple``, ``list``) is the parent's;
tombstone refusals from the database trigger become ``ThreadErasedError``. The erasure
operations are the eraser's flows (:mod:`erasure_receipts._engine.eraser`) over
:mod:`erasure_receipts._backends.postgres`; this module only says how to reach the
database (the ``Database`` seam). The async saver runs the very same synchronous flows
on a worker thread, its database calls bridged onto the event loop that owns the
``AsyncConnection`` (``AsyncBridgeSession``): one implementation of the erasure.

Requires the ``postgres`` extra: ``pip install 'langgraph-erasure-receipts[postgres]'``.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres import _ainternal as _pg_ainternal
from langgraph.checkpoint.postgres import _internal as _pg_internal
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import BaseStore
from psycopg.rows import dict_row

from .. import __version__
from .._backends import postgres as pg_backend
from .._backends.keys import KEY_STORE_TABLES_SQL, key_store_tokens_sql, postgres_tokens
from .._backends.postgres import (
    AsyncBridgeSession,
    PostgresBackend,
    Session,
    SyncSession,
    asecond_connection,
    ensure_deferrals,
    ensure_schema,
    is_tombstone_error,
    retryable,
    schema_installed,
    second_connection,
    server_identity,
)
from .._backends.sealing import SEALED_TYPE, Encryption, SealingSerde
from .._backends.store import StoreSweepPart, hides_expired
from .._engine import ErasureRequest, Part, measure_rows
from .._engine.eraser import Eraser, NamespacesFor, ThreadDigest
from .._engine.readback import API_CHECK, AsyncSaverReader, SaverReader
from .._engine.seams import ResidueScan
from .._held import HeldWrites, key_of
from .._ops import compaction as _compaction
from .._ops.compaction import Compactions, policy_of
from .._surface import AsyncErasureMethods, ErasureMethods
from ..errors import ConfigurationError, ErasureIncompleteError, ThreadErasedError
from ..log import ReceiptLog
from ..signing import Signer
from ._base import LoopBridge, store_parts

__all__ = ["AsyncAttestingPostgresSaver", "AttestingPostgresSaver", "digest_read_only"]

T = TypeVar("T")
Select = Callable[[str, tuple[Any, ...]], bool]


@cache
def _versions() -> dict[str, str]:
    out = {"langgraph-erasure-receipts": __version__}
    for dist in ("langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg"):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def _thread_of(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


def _identity(session: Session) -> tuple[Any, ...] | None:
    """Which database (and schema) a connection writes to; None if unknown."""
    try:
        return server_identity(session)
    except psycopg.Error:
        return None


def _may_read_back_beside(saver: Any) -> bool:
    """Whether a batched sweep on one connection (not a pool) may read back on a second
    one: no pipeline, store or encryption holds state tied to the first."""
    return saver.pipe is None and saver._eraser.store is None and saver.encryption is None


def _pg_options(vacuum: bool | str, lock_timeout_ms: int) -> tuple[bool | str, int]:
    if vacuum not in (False, True, "full"):
        raise ConfigurationError('vacuum= must be False, True or "full"')
    return vacuum, int(lock_timeout_ms)


class _PgDatabase:
    """The sync PostgreSQL saver's database seam: a
    :class:`~erasure_receipts._backends.postgres.Session` on one connection of the
    saver's (pool), under its lock."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self._store_rows: bool | None = None

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(session, *args)`` under the saver's lock."""
        with self.saver._session() as s:
            return fn(s, *args)

    def backend(
        self, session: Session, request: ErasureRequest, residue_scan: ResidueScan
    ) -> PostgresBackend:
        """The PostgreSQL backend of ``request`` (a store elsewhere is swept)."""
        saver = self.saver
        store = saver._eraser.store
        rows_ns, extra = store_parts(store, self._store_rows, request)
        return PostgresBackend(
            session,
            request.thread_id,
            saver=type(saver).__name__,
            store=type(store).__name__ if store is not None else None,
            store_rows_namespaces=rows_ns,
            extra_parts=extra,
            extra_residue=(lambda: _swept_store_residue(store, extra)) if extra else None,
            versions=_versions(),
            vacuum=saver.vacuum,
            lock_timeout_ms=saver.lock_timeout_ms,
            residue_scan=bool(residue_scan),
            threads=list(request.threads) if request.kind in ("subject", "namespace") else None,
            keep=request.keep,
            kept=request.kept,
            removed=request.removed,
            tombstone_policy=saver._eraser.tombstone_policy,
            tombstone_store=not request.mapped_store,
        )

    def retryable(self, exc: ErasureIncompleteError) -> bool:
        """Serialization failures, deadlocks and lock timeouts are retried."""
        return retryable(exc)

    def check_readable(self, session: Session) -> None:
        """Any database the saver connects to is read as it is."""

    def forget_store(self) -> None:
        """The store changed: locate it again."""
        self._store_rows = None

    def store_rows(self) -> bool:
        """Whether the store's tables are in the saver's database (and schema)."""
        return bool(self._store_rows)

    def resolve_store(self) -> None:
        """Whether a ``PostgresStore`` writes to the saver's database (no writes)."""
        from langgraph.store.postgres import PostgresStore

        if self._store_rows is not None:
            return
        store = self.saver._eraser.store
        if not isinstance(store, PostgresStore):
            self._store_rows = False
            return
        # One connection at a time: a store sharing a small pool must not deadlock here.
        with self.saver._session() as mine:
            ours = _identity(mine)
        with _pg_internal.get_connection(store.conn) as theirs:
            self._store_rows = ours is not None and ours == _identity(SyncSession(theirs))

    def prepare(self) -> None:
        """Install (or check) the library's schema, then locate the store."""
        self.saver._ready()
        self.resolve_store()

    def ensure_journal(self) -> None:
        """The library's schema is installed."""
        self.saver._ready()


class _AsyncPgDatabase(LoopBridge, _PgDatabase):
    """The async PostgreSQL saver's database seam: a flow runs on a worker thread; each
    database call enters the saver's lock and connection on the event loop."""

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        # Called by a flow, already on a worker thread: run ``fn`` right here, with the
        # session (lock + connection) entered and left on the event loop. Handing ``fn``
        # to yet another pool thread could exhaust the pool under concurrent erasures.
        session = self.saver._session()
        s = self.on_loop(session.__aenter__())
        try:
            result = fn(s, *args)
        except BaseException as exc:
            self.on_loop(session.__aexit__(type(exc), exc, exc.__traceback__))
            raise
        self.on_loop(session.__aexit__(None, None, None))
        return result

    async def arun(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the synchronous ``fn(session, *args)`` on a worker thread."""
        async with self.saver._session() as s:
            return await asyncio.to_thread(fn, s, *args)

    async def aresolve_store(self) -> None:
        """Async ``resolve_store``."""
        from langgraph.store.postgres.aio import AsyncPostgresStore

        if self._store_rows is not None:
            return
        store = self.saver._eraser.store
        if not isinstance(store, AsyncPostgresStore):
            self._store_rows = False
            return
        ours = await self.arun(_identity)
        async with _pg_ainternal.get_connection(store.conn) as theirs:
            bridge = AsyncBridgeSession(theirs, asyncio.get_running_loop())
            other = await asyncio.to_thread(_identity, bridge)
        self._store_rows = ours is not None and ours == other

    async def aprepare(self) -> None:
        """Async ``prepare``."""
        await self.saver._aready()
        await self.aresolve_store()

    async def aensure_journal(self) -> None:
        """Async ``ensure_journal``."""
        await self.saver._aready()


def _swept_store_residue(store: Any, parts: Sequence[Part]) -> list[dict[str, Any]]:
    detail: dict[str, Any] = {
        "store": type(store).__name__,
        "reason": "deleted through the BaseStore API; its storage is not scrubbed by "
                  "this library",
    }  # fmt: skip
    if store is not None and hides_expired(store):
        # search() hides expired rows here: they were read by SQL and deleted too.
        detail["expired_rows_hidden_from_search"] = sum(
            p.hidden_deleted for p in parts if isinstance(p, StoreSweepPart)
        )
    return [{"action": "store.scrub", "status": "skipped", "detail": detail}]


# -- encryption (erasure_receipts.shredding): the parent's row hooks, sealed ------------


class _Boxed:
    """A primitive channel value kept out of the checkpoint's JSON (where the parent
    stores ``str``/``int``/``float``/``bool``/``None`` in plaintext): it goes to
    ``checkpoint_blobs``, encrypted, like every other value."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _init_encryption(saver: Any, encryption: Encryption | None) -> None:
    saver.encryption = encryption
    saver._key_store_checked = encryption is None
    if encryption is not None:
        saver._plain_serde = saver.serde
        saver.serde = SealingSerde(saver.serde)


def _check_key_store(saver: Any, conn: Any) -> None:
    """Refuse a key store that is this saver's own database (its token is here)."""
    if saver.encryption is None or saver._key_store_checked:
        return
    saver.encryption.keys.refuse_tokens(postgres_tokens(conn), "the saver's PostgreSQL database")
    saver._key_store_checked = True


def _boxed(saver: Any, config: RunnableConfig, checkpoint: Checkpoint) -> Checkpoint:
    """With encryption: the thread's key resolved, primitive values boxed into blobs."""
    if saver.encryption is None:
        return checkpoint
    if not saver._key_store_checked:
        saver._ready()
    saver.encryption.bind(config)
    values = {
        k: _Boxed(v) if v is None or isinstance(v, (str, int, float, bool)) else v
        for k, v in checkpoint["channel_values"].items()
    }
    return {**checkpoint, "channel_values": values}


def _sealed_blobs(
    saver: Any, thread_id: str, ns: str, values: dict[str, Any], versions: ChannelVersions
) -> list[tuple[str, str, str, str, str, bytes | None]]:
    out: list[tuple[str, str, str, str, str, bytes | None]] = []
    for k, ver in versions.items():
        if k not in values:
            out.append((thread_id, ns, k, str(ver), "empty", None))
            continue
        v = values[k]
        v = v.value if isinstance(v, _Boxed) else v
        identity = ("blob", str(thread_id), ns, k, str(ver))
        blob = saver.encryption.seal_for_thread(saver._plain_serde, v, str(thread_id), identity)
        out.append((thread_id, ns, k, str(ver), SEALED_TYPE, blob))
    return out


def _sealed_writes(
    saver: Any,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[tuple[str, Any]],
) -> list[tuple[str, str, str, str, str, int, str, str, bytes]]:
    t = str(thread_id)
    return [
        (
            thread_id,
            ns,
            checkpoint_id,
            task_id,
            task_path,
            WRITES_IDX_MAP.get(channel, idx),
            channel,
            SEALED_TYPE,
            saver.encryption.seal_for_thread(
                saver._plain_serde,
                value,
                t,
                ("write", t, ns, str(checkpoint_id), str(task_id), channel),
            ),
        )
        for idx, (channel, value) in enumerate(writes)
    ]


class AttestingPostgresSaver(ErasureMethods, PostgresSaver):
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
        namespaces_for: ``thread_id -> store namespace prefixes``: the store scope of
            every thread-scoped operation not given ``store_namespaces=`` (as for
            ``AttestingSqliteSaver``).
        clock: returns the current time (inject for deterministic tests).
        vacuum: ``True`` runs ``VACUUM`` on the affected tables after commit,
            ``"full"`` runs ``VACUUM (FULL)`` (rewrites them; takes an ACCESS EXCLUSIVE
            lock); the outcome is recorded in the receipt's residue either way.
        lock_timeout_ms: longest wait for a lock inside the erasure transaction.
        residue_scan: accepted for parity with the SQLite savers; the receipt records
            it as ``not_applicable`` (it reads SQLite files).
        refuse_erased_reads: ``get_tuple`` of an erased thread raises
            ``ThreadErasedError`` instead of returning None (see the SQLite saver).
        erase_compacted: ``True``/``"erase_history"`` or ``"redact"``: the history a
            compaction (``RemoveMessage``) left behind, erased or redacted once the
            checkpoint applying it is saved (see the SQLite saver).
    """

    encryption: Encryption | None
    _key_store_checked: bool
    _plain_serde: SerializerProtocol

    def __init__(
        self,
        conn: _pg_internal.Conn,
        pipe: psycopg.Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        signer: Signer,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        vacuum: bool | str = False,
        lock_timeout_ms: int = 30_000,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        check_erasures: str | Path | ReceiptLog | None = None,
        targets: Sequence[Any] | None = None,
        erase_compacted: bool | str = False,
        encryption: Encryption | None = None,
    ) -> None:
        super().__init__(conn, pipe=pipe, serde=serde)
        self._held_writes = HeldWrites()
        self.vacuum, self.lock_timeout_ms = _pg_options(vacuum, lock_timeout_ms)
        self._schema_ready = False
        self._eraser = Eraser(
            _PgDatabase(self), pg_backend.JOURNAL, SaverReader(self),
            signer=signer, store=store, archive=archive, namespaces_for=namespaces_for,
            clock=clock, residue_scan=residue_scan, refuse_erased_reads=refuse_erased_reads,
            tombstone_policy=tombstone_policy, targets=targets,
        )  # fmt: skip
        self.check_erasures = check_erasures
        self._compactions = Compactions(policy_of(erase_compacted))
        _init_encryption(self, encryption)

    @classmethod
    @contextmanager
    def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, *, signer: Signer, pipeline: bool = False, **kwargs: Any
    ) -> Iterator[AttestingPostgresSaver]:
        """Connect to ``conn_string`` (autocommit, ``dict_row``, as the parent does) and
        yield a saver on it (in a pipeline if asked); other arguments as the constructor."""
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
            yield SyncSession(
                conn, None if isinstance(self.conn, psycopg.Connection) else self.conn
            )

    @contextmanager
    def _readback_saver(self) -> Iterator[AttestingPostgresSaver | None]:
        """A copy of this saver on a second connection to the same database, for a
        batched sweep's read-back beside its next transaction (the saver's own lock is
        held by that transaction); None where the read-back runs in turn: a pool (its
        leases hold connections of their own, a small pool could run dry), a pipeline,
        a store or encryption (they hold state tied to this connection), or a second
        connection that cannot be opened, or that would not see the same tables."""
        conn = self.conn
        if not isinstance(conn, psycopg.Connection) or not _may_read_back_beside(self):
            yield None
            return
        with self.lock:  # the saver's connection, between its transactions
            other = second_connection(conn, pg_backend.CHECKPOINT_TABLES)
        if other is None:
            yield None
            return
        try:
            twin = copy.copy(self)
            twin.conn, twin.lock = other, threading.Lock()
            yield twin
        finally:
            other.close()

    def setup(self) -> None:
        """The parent's ``setup`` (migrations), then this library's tables, functions and
        tombstone triggers (idempotent; needs the privileges the README lists)."""
        super().setup()
        with self._session() as s:  # a catalog check when current; upgrades otherwise
            ensure_schema(s)
            ensure_deferrals(s)  # RECEIPT_SPEC.md 9.14 (tables only: no trigger, no version)
            _check_key_store(self, s.conn)
        self._schema_ready = True
        self._check_erasures()  # check_erasures=: refuse while erased data is back

    def _ready(self) -> None:
        """Install on first use, unless already installed (then no privilege is needed)."""
        if self._schema_ready:
            return
        with self._session() as s:
            self._schema_ready = schema_installed(s)
            if self._schema_ready:
                _check_key_store(self, s.conn)
        if not self._schema_ready:
            self.setup()

    # -- normal operation: the parent's, with tombstone errors made explicit -----------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The parent's ``get_tuple``; with ``refuse_erased_reads`` an erased thread
        raises ``ThreadErasedError`` instead of returning None."""
        if self._eraser.refuse_erased_reads and not API_CHECK.get():
            thread_id = config["configurable"].get("thread_id")
            if thread_id is not None and self.is_erased(str(thread_id)):
                raise ThreadErasedError(str(thread_id))
        if self.encryption is not None:
            self._ready()  # the key store is checked before the first read
        return super().get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The parent's ``list`` (with ``encryption``, every row decrypted)."""
        if self.encryption is not None:
            self._ready()
        return super().list(config, filter=filter, before=before, limit=limit)

    def _load_checkpoint_tuple(self, value: Any) -> CheckpointTuple:
        tup = super()._load_checkpoint_tuple(value)
        if self.encryption is None:
            return tup
        inline = value["checkpoint"].get("channel_values")
        return self.encryption.open_pg_tuple(self._plain_serde, tup, inline)

    def _dump_blobs(
        self, thread_id: str, checkpoint_ns: str, values: dict[str, Any], versions: ChannelVersions
    ) -> builtins.list[tuple[str, str, str, str, str, bytes | None]]:
        if self.encryption is None:
            return super()._dump_blobs(thread_id, checkpoint_ns, values, versions)
        return _sealed_blobs(self, thread_id, checkpoint_ns, values, versions)

    def _dump_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[tuple[str, Any]],
    ) -> builtins.list[tuple[str, str, str, str, str, int, str, str, bytes]]:
        if self.encryption is None:
            return super()._dump_writes(
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes
            )
        return _sealed_writes(
            self, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """With ``encryption``: LangGraph's generic walk over ``get_tuple``."""
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
        ``ThreadErasedError`` instead of the trigger's database error. Writes held for
        this checkpoint are saved after it."""

        def save() -> RunnableConfig:
            stored = _boxed(self, config, checkpoint)
            try:  # inline, not a generator-based context manager: ~3 us less per write
                return super(AttestingPostgresSaver, self).put(
                    config, stored, metadata, new_versions
                )
            except psycopg.Error as exc:
                if is_tombstone_error(exc):
                    raise ThreadErasedError(_thread_of(config)) from None
                raise

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
        ``ThreadErasedError`` instead of the trigger's database error; writes that come
        before their checkpoint of a new conversation are held until it is saved (see
        :mod:`erasure_receipts._held`)."""

        def write() -> None:
            if self.encryption is not None:
                self._ready()
                self.encryption.bind(config)
            try:
                super(AttestingPostgresSaver, self).put_writes(config, writes, task_id, task_path)
            except psycopg.Error as exc:
                if is_tombstone_error(exc):
                    raise ThreadErasedError(_thread_of(config)) from None
                raise

        def bound() -> str | None:
            return self._eraser.db.run(pg_backend.tombstone_bound, key_of(config)[0])

        self._held_writes.put_writes((config, writes, task_id, task_path), write, bound)
        if self._compactions.note(config, writes):  # erase_compacted=: messages removed
            _compaction.handle_late(self, self._compactions, config)


class AsyncAttestingPostgresSaver(AsyncErasureMethods, AsyncPostgresSaver):
    """``AsyncPostgresSaver`` whose deletions are measured, verified and signed.

    Same arguments as :class:`AttestingPostgresSaver` (``conn`` an ``AsyncConnection``
    or ``AsyncConnectionPool``). The shared flows run on a worker thread; each database
    call holds the saver's lock and one connection on the event loop, which stays free.
    """

    encryption: Encryption | None
    _key_store_checked: bool
    _plain_serde: SerializerProtocol

    def __init__(
        self,
        conn: _pg_ainternal.Conn,
        pipe: psycopg.AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        signer: Signer,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        vacuum: bool | str = False,
        lock_timeout_ms: int = 30_000,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        check_erasures: str | Path | ReceiptLog | None = None,
        targets: Sequence[Any] | None = None,
        erase_compacted: bool | str = False,
        encryption: Encryption | None = None,
    ) -> None:
        super().__init__(conn, pipe=pipe, serde=serde)
        self._held_writes = HeldWrites()
        self.vacuum, self.lock_timeout_ms = _pg_options(vacuum, lock_timeout_ms)
        self._schema_ready = False
        db = _AsyncPgDatabase(self)
        self._eraser = Eraser(
            db, pg_backend.JOURNAL, AsyncSaverReader(self, db.on_loop),
            signer=signer, store=store, archive=archive, namespaces_for=namespaces_for,
            clock=clock, residue_scan=residue_scan, refuse_erased_reads=refuse_erased_reads,
            tombstone_policy=tombstone_policy, targets=targets,
        )  # fmt: skip
        self.check_erasures = check_erasures
        self._compactions = Compactions(policy_of(erase_compacted))
        _init_encryption(self, encryption)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, *, signer: Signer, pipeline: bool = False, **kwargs: Any
    ) -> AsyncIterator[AsyncAttestingPostgresSaver]:
        """Async :meth:`AttestingPostgresSaver.from_conn_string`."""
        async with await psycopg.AsyncConnection.connect(
            conn_string, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            if pipeline:
                async with conn.pipeline() as pipe:
                    yield cls(conn, pipe, signer=signer, **kwargs)
            else:
                yield cls(conn, signer=signer, **kwargs)

    @asynccontextmanager
    async def _areadback_saver(self) -> AsyncIterator[AsyncAttestingPostgresSaver | None]:
        """Async :meth:`AttestingPostgresSaver._readback_saver`: a copy on a second
        connection, whose read-back the event loop interleaves with the next batch."""
        conn = self.conn
        if not isinstance(conn, psycopg.AsyncConnection) or not _may_read_back_beside(self):
            yield None
            return
        async with self.lock:  # the saver's connection, between its transactions
            other = await asecond_connection(conn, pg_backend.CHECKPOINT_TABLES)
        if other is None:
            yield None
            return
        try:
            twin = copy.copy(self)
            twin.conn, twin.lock = other, asyncio.Lock()
            yield twin
        finally:
            await other.close()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncBridgeSession]:
        async with self.lock, _pg_ainternal.get_connection(self.conn) as conn:
            if self.pipe:
                await self.pipe.sync()
            pool = None if isinstance(self.conn, psycopg.AsyncConnection) else self.conn
            yield AsyncBridgeSession(conn, asyncio.get_running_loop(), pool)

    async def setup(self) -> None:
        """Async :meth:`AttestingPostgresSaver.setup`."""
        await super().setup()
        await self._adb.arun(ensure_schema)  # a catalog check when current; upgrades otherwise
        await self._adb.arun(ensure_deferrals)
        await self._acheck_key_store()
        self._schema_ready = True
        await self._acheck_erasures()  # check_erasures=: refuse while erased data is back

    async def _aready(self) -> None:
        if self._schema_ready:
            return
        self._schema_ready = bool(await self._adb.arun(schema_installed))
        if self._schema_ready:
            await self._acheck_key_store()
        if not self._schema_ready:
            await self.setup()

    async def _acheck_key_store(self) -> None:
        if self.encryption is None or self._key_store_checked:
            return
        async with _pg_ainternal.get_connection(self.conn) as conn:
            cur = await conn.execute(KEY_STORE_TABLES_SQL)
            tables = [r["t"] for r in await cur.fetchall()]
            seen = []
            for t in tables:
                cur = await conn.execute(key_store_tokens_sql(t))
                seen += [str(r["token"]) for r in await cur.fetchall()]
        self.encryption.keys.refuse_tokens(seen, "the saver's PostgreSQL database")
        self._key_store_checked = True

    @asynccontextmanager
    async def _atombstone_errors(self, config: RunnableConfig) -> AsyncIterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            if is_tombstone_error(exc):
                raise ThreadErasedError(_thread_of(config)) from None
            raise

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The parent's ``aget_tuple``; with ``refuse_erased_reads`` an erased thread
        raises ``ThreadErasedError`` instead of returning None."""
        if self._eraser.refuse_erased_reads and not API_CHECK.get():
            thread_id = config["configurable"].get("thread_id")
            if thread_id is not None and await self.ais_erased(str(thread_id)):
                raise ThreadErasedError(str(thread_id))
        if self.encryption is not None:
            await self._aready()
        return await super().aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The parent's ``alist`` (with ``encryption``, every row decrypted)."""
        if self.encryption is not None:
            await self._aready()
        async for tup in super().alist(config, filter=filter, before=before, limit=limit):
            yield tup

    async def _load_checkpoint_tuple(self, value: Any) -> CheckpointTuple:
        tup = await super()._load_checkpoint_tuple(value)
        if self.encryption is None:
            return tup
        inline = value["checkpoint"].get("channel_values")
        return self.encryption.open_pg_tuple(self._plain_serde, tup, inline)

    def _dump_blobs(
        self, thread_id: str, checkpoint_ns: str, values: dict[str, Any], versions: ChannelVersions
    ) -> builtins.list[tuple[str, str, str, str, str, bytes | None]]:
        if self.encryption is None:
            return super()._dump_blobs(thread_id, checkpoint_ns, values, versions)
        return _sealed_blobs(self, thread_id, checkpoint_ns, values, versions)

    def _dump_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[tuple[str, Any]],
    ) -> builtins.list[tuple[str, str, str, str, str, int, str, str, bytes]]:
        if self.encryption is None:
            return super()._dump_writes(
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes
            )
        return _sealed_writes(
            self, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes
        )

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
        ``ThreadErasedError`` instead of the trigger's database error."""

        async def save() -> RunnableConfig:
            if self.encryption is not None:
                await self._aready()
            stored = _boxed(self, config, checkpoint)
            async with self._atombstone_errors(config):
                return await super(AsyncAttestingPostgresSaver, self).aput(
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
        ``ThreadErasedError`` instead of the trigger's database error."""

        async def write() -> None:
            if self.encryption is not None:
                await self._aready()
                self.encryption.bind(config)
            async with self._atombstone_errors(config):
                await super(AsyncAttestingPostgresSaver, self).aput_writes(
                    config, writes, task_id, task_path
                )

        async def bound() -> str | None:
            return await self._adb.arun(pg_backend.tombstone_bound, key_of(config)[0])

        item = (config, writes, task_id, task_path)
        await self._held_writes.aput_writes(item, write, bound)
        if self._compactions.note(config, writes):  # erase_compacted=: messages removed
            await _compaction.ahandle_late(self, self._compactions, config)


def digest_read_only(
    conn: psycopg.Connection[Any],
    thread_id: str,
    store_namespaces: Sequence[tuple[str, ...]] = (),
    *,
    has_store: bool | None = None,
) -> ThreadDigest:
    """The pre-deletion digest and per-table counts an erasure of ``thread_id`` (and
    ``store_namespaces`` of a ``PostgresStore``) would record now, measured exactly as
    the saver measures, but installing nothing: for a LangGraph database this library
    never set up, or a read-only connection (``receipt digest``). ``conn`` is an
    autocommit connection with ``dict_row`` rows, as the saver's. ``has_store`` says
    whether the database has a ``store`` table (looked up when None).
    ``ConfigurationError`` for an empty thread id, or namespaces without a store."""
    if not thread_id:
        raise ConfigurationError(f"thread_id must be a non-empty string, not {thread_id!r}")
    namespaces = list(dict.fromkeys(store_namespaces))
    if has_store is None and namespaces:
        has_store = pg_backend.has_store_table(SyncSession(conn))
    if namespaces and not has_store:
        raise ConfigurationError("store namespaces were given but the database has no store")
    backend = PostgresBackend(
        SyncSession(conn), thread_id, saver="AttestingPostgresSaver",
        store="PostgresStore" if namespaces else None, store_rows_namespaces=namespaces,
        versions={},
    )  # fmt: skip
    digest, tables = measure_rows(backend)
    return ThreadDigest(digest, tables)
