"""PostgreSQL: the erasure backend - enumerate, lock, delete and report residue of one
thread's rows through a :class:`~.session.Session`, under the thread's exclusive advisory
lock (the package's docstring says how it serialises with the triggers' shared one).

Rows are ordered by primary key with ``COLLATE "C"`` (code-point order, the same as
SQLite's ``BINARY``); each column is read as :mod:`.leaves` says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ..._clock import fresh_after
from ..._parts import LeafSink, Part, TableCount
from ...digest import RowLeafHasher
from .._table import PlannedRows, TableBackend
from ..keep_latest import KeepLatest, Removed
from .journal import take_lease
from .leaves import _Table, describe_all, wire_expression
from .queries import (
    _with_checkpoints,
    find_needles,
    namespace_condition,
    newest_ids,
    plan_keep_latest,
)
from .residue import WAL_RESIDUE, vacuum_residue
from .schema import (
    ADVISORY_CLASS,
    CHECKPOINT_TABLES,
    SCHEMA_VERSION,
    STORE_ADVISORY_CLASS,
    _server_version,
    database_label,
    ensure_store_tombstones,
    has_store_table,
    installed_version,
)
from .session import FETCH_ROWS, Session, stream, text_of

__all__ = ["PgTablePart", "PlannedPgPart", "PostgresBackend"]

_ROWS_PER_THREAD: dict[str, float] = {}
"""Rows per thread the last many-thread read of each checkpoint table found: the next
one's guess of its size (a batch of a sweep is much like the one before it). Only a
hint for :func:`~.session.stream`: a wrong guess costs a round trip, never a row."""


class _ThreadsRows:
    """One checkpoint table's rows of many threads (a subject or a batch of a sweep),
    read, deleted and counted by one statement each instead of one per thread.

    Every thread's part still gets exactly what its own statement would return: rows come
    in primary-key order, and ``thread_id`` leads each table's key, so one thread's rows
    are contiguous and in its own order. A read answers each thread once, and only in
    the generation it was made in: the backend starts a new generation with every
    transaction or snapshot and after every DELETE, so nothing read before a change can
    answer after it; a thread asked again is read again."""

    def __init__(self, backend: PostgresBackend, table: str, shape: _Table) -> None:
        self.backend = backend
        self.table = table
        self.shape = shape
        self._measured: dict[str, tuple[list[bytes], TableCount, set[str]]] = {}
        self._measured_in: tuple[int, set[str]] = (-1, set())
        self._left: dict[str, int] = {}
        self._left_in: tuple[int, set[str]] = (-1, set())
        self._deleted: dict[str, int] = {}
        self._deleted_in: tuple[int, set[str]] = (-1, set())

    @property
    def _threads(self) -> list[str]:
        return sorted(set(self.backend.threads))

    @staticmethod
    def _fresh(read_in: tuple[int, set[str]], gen: int, thread: str) -> bool:
        """Whether a read made in ``read_in`` can still answer ``thread`` in ``gen``."""
        made, served = read_in
        return made == gen and thread not in served

    def measured(self, thread: str) -> tuple[list[bytes], TableCount, set[str]]:
        """The thread's leaf hashes, counts and checkpoint namespaces in this table."""
        gen = self.backend.generation
        if not self._fresh(self._measured_in, gen, thread):
            self._measured = self._read()
            self._measured_in = (gen, set())
        self._measured_in[1].add(thread)
        return self._measured.pop(thread, None) or ([], TableCount(), set())

    def _read(self) -> dict[str, tuple[list[bytes], TableCount, set[str]]]:
        s = self.shape
        stored = RowLeafHasher(self.table, s.columns, s.pk).stored
        mask = PgTablePart._mask(s)
        t_idx = s.columns.index("thread_id")
        ns_idx = s.columns.index("checkpoint_ns")
        cols = ", ".join(wire_expression(c, t)[0] for c, t in zip(s.columns, s.types, strict=True))
        order = ", ".join(f'"{c}" COLLATE "C"' if c in s.collatable else f'"{c}"' for c in s.pk)
        sql = f'SELECT {cols} FROM "{self.table}" WHERE thread_id = ANY(%s) ORDER BY {order}'
        out: dict[str, tuple[list[bytes], TableCount, set[str]]] = {}
        threads = self._threads
        # After this table's DELETE (the re-measure) nothing is expected. Before it, a
        # scope of more checkpoints than a page goes to the cursor at once: its blobs,
        # read first and most of its bytes, would have a first page read twice. A
        # batch's rows are also predicted by the batch before.
        deleted = self._deleted_in[0] >= 0
        expect = 0.0 if deleted else _ROWS_PER_THREAD.get(self.table, 0.0) * len(threads)
        if not deleted and self.backend.large_scope:
            expect = max(expect, FETCH_ROWS + 1.0)
        n = 0
        for row in stream(self.backend.session, sql, [threads], f"mb_{self.table}", expect):
            n += 1
            thread = text_of(row[t_idx])
            entry = out.get(thread)
            if entry is None:
                entry = out[thread] = ([], TableCount(), set())
            leaf, size = stored(row, mask)
            entry[0].append(leaf)
            entry[1].rows += 1
            entry[1].bytes += size
            entry[2].add(text_of(row[ns_idx]))
        if len(threads) > 1 and not deleted:
            _ROWS_PER_THREAD[self.table] = n / len(threads)
        return out

    def deleted(self, thread: str) -> int:
        """Rows of the thread this table's one DELETE removed (it runs on first ask)."""
        if not self._fresh(self._deleted_in, self.backend.transactions, thread):
            rows = self.backend.session.query(
                f'WITH d AS (DELETE FROM "{self.table}" WHERE thread_id = ANY(%s) '
                "RETURNING thread_id) SELECT thread_id, count(*) FROM d GROUP BY thread_id",
                [self._threads],
            )
            self.backend.next_generation()
            self._deleted = {text_of(r[0]): int(r[1]) for r in rows}
            self._deleted_in = (self.backend.transactions, set())
        self._deleted_in[1].add(thread)
        return self._deleted.pop(thread, 0)

    def left(self, thread: str) -> int:
        """Rows of the thread still in the table, by SQL."""
        gen = self.backend.generation
        if not self._fresh(self._left_in, gen, thread):
            rows = self.backend.session.query(
                f'SELECT thread_id, count(*) FROM "{self.table}" WHERE thread_id = ANY(%s) '
                "GROUP BY thread_id",
                [self._threads],
            )
            self._left = {text_of(r[0]): int(r[1]) for r in rows}
            self._left_in = (gen, set())
        self._left_in[1].add(thread)
        return self._left.pop(thread, 0)


@dataclass
class PgTablePart:
    """One table's rows of the scope, streamed in primary-key order from raw storage."""

    session: Session
    table: str
    group: str
    where: str
    params: Sequence[Any]
    shape: _Table
    lock_rows: bool = False
    """``FOR UPDATE`` while erasing (store rows: no row lock-free writer can slip by)."""
    unit: str = ""
    """The receipt unit the rows belong to (``thread:<id>``, ``store``; "" = one tree)."""
    role: str = "removed"
    """``removed`` (measured and deleted) or ``kept`` (measured only: history receipts)."""
    method: str = "atomic-transaction"
    irreversible_deleted: int = 0
    namespaces_seen: set[str] = field(default_factory=set)
    source: str = ""
    """The stored table's name when ``table`` (the receipt's name) differs: an
    erasure target's ``target:<name>``."""
    _measured: int = 0
    rows: _ThreadsRows | None = None
    """Several threads' parts of one checkpoint table share one reader (one statement
    for all of them); None: this part reads its own rows."""
    thread: str = ""
    """The thread whose rows ``rows`` hands this part."""
    large: Callable[[], bool] | None = None
    """Whether the scope is known to be larger than a page (then read by the cursor at
    once, see :func:`~.session.stream`)."""

    @property
    def stored(self) -> str:
        """The table's name in the database."""
        return self.source or self.table

    def _cursor(self, what: str) -> str:
        """A server-side cursor's name for this table (an identifier, never quoted)."""
        if self.source:
            return f"{what}_target_{abs(hash(self.table)) % 10**12}"
        return f"{what}_{self.table}"

    def _select(self, lock: bool) -> str:
        s = self.shape
        cols = ", ".join(wire_expression(c, t)[0] for c, t in zip(s.columns, s.types, strict=True))
        order = ", ".join(f'"{c}" COLLATE "C"' if c in s.collatable else f'"{c}"' for c in s.pk)
        sql = f'SELECT {cols} FROM "{self.stored}" WHERE {self.where} ORDER BY {order}'
        return sql + (" FOR UPDATE" if lock else "")

    @staticmethod
    def _mask(s: _Table) -> int:
        return sum(
            1 << i
            for i, (c, t) in enumerate(zip(s.columns, s.types, strict=True))
            if wire_expression(c, t)[1]
        )

    def _text_mask(self) -> int:
        return self._mask(self.shape)

    def _measure(self, sink: LeafSink, lock: bool) -> TableCount:
        if self.rows is not None and not lock:
            hashes, counted, namespaces = self.rows.measured(self.thread)
            for leaf in hashes:
                sink(leaf)
            self.namespaces_seen |= namespaces
            return replace(counted)
        s = self.shape
        stored = RowLeafHasher(self.stored, s.columns, s.pk).stored
        mask = self._text_mask()
        ns_idx = s.columns.index("checkpoint_ns") if "checkpoint_ns" in s.columns else None
        seen = self.namespaces_seen
        count = TableCount()
        rows = nbytes = 0
        expect = FETCH_ROWS + 1.0 if self.large is not None and self.large() else 0.0
        select = self._select(lock)
        for row in stream(self.session, select, self.params, self._cursor("m"), expect):
            leaf, size = stored(row, mask)
            sink(leaf)
            rows += 1
            nbytes += size
            if ns_idx is not None:
                seen.add(row[ns_idx].decode("utf-8"))
        count.rows, count.bytes = rows, nbytes
        return count

    def measure(self, sink: LeafSink) -> TableCount:
        """Hash every row of the scope into ``sink`` in primary-key order (streamed by a
        server-side cursor: run it in a transaction), recording the checkpoint namespaces
        seen; takes no row locks."""
        return self._measure(sink, lock=False)

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of every row, in the order ``measure`` hashes them (legal hold)."""
        s = self.shape
        data = RowLeafHasher(self.stored, s.columns, s.pk).stored_data
        mask = self._text_mask()
        for row in stream(self.session, self._select(False), self.params, self._cursor("l")):
            yield data(row, mask)

    def erase(self, sink: LeafSink) -> TableCount:
        """Measure only (``FOR UPDATE`` if ``lock_rows``): the DELETE is deferred to
        :meth:`finish`."""
        count = self._measure(sink, lock=self.lock_rows)
        self._measured = count.rows
        return count

    def finish(self) -> None:
        """DELETE the scope's rows; raises ``RuntimeError`` if the number deleted differs
        from the number :meth:`erase` measured."""
        if self.rows is not None:
            deleted = self.rows.deleted(self.thread)
            if deleted != self._measured:
                raise RuntimeError(
                    f"{self.table}: measured {self._measured} rows but deleted {deleted}"
                )
            return
        # Counted by the server (a pipeline-mode cursor has no rowcount until a sync).
        rows = self.session.query(
            f'WITH d AS (DELETE FROM "{self.stored}" WHERE {self.where} RETURNING 1) '
            "SELECT count(*) FROM d",
            self.params,
        )
        deleted = int(rows[0][0])
        if deleted != self._measured:
            raise RuntimeError(
                f"{self.table}: measured {self._measured} rows but deleted {deleted}"
            )

    def key_columns(self) -> list[str]:
        """The primary-key columns."""
        return list(self.shape.pk)

    def records(self) -> Iterator[dict[str, Any]]:
        """Redaction: every row of the scope as ``{column: value}`` in the order
        :meth:`measure` hashes them (JSON columns as their text, ``bytea`` as bytes)."""
        s = self.shape
        cols = ", ".join(
            f'"{c}"::text' if t in ("json", "jsonb") else f'"{c}"'
            for c, t in zip(s.columns, s.types, strict=True)
        )
        order = ", ".join(f'"{c}" COLLATE "C"' if c in s.collatable else f'"{c}"' for c in s.pk)
        sql = f'SELECT {cols} FROM "{self.table}" WHERE {self.where} ORDER BY {order}'
        for row in stream(self.session, sql, self.params, f"r_{self.table}"):
            yield {
                c: v.decode("utf-8") if isinstance(v, bytes) and t != "bytea" else v
                for c, t, v in zip(s.columns, s.types, row, strict=True)
            }

    def only(self, keys: list[dict[str, Any]]) -> PgTablePart:
        """This part restricted to the rows with ``keys`` (primary keys)."""
        conds, params = [], list(self.params)
        for key in keys:
            conds.append("(" + " AND ".join(f'"{c}" = %s' for c in key) + ")")
            params += list(key.values())
        where = f"({self.where}) AND ({' OR '.join(conds) or 'false'})"
        return replace(self, where=where, params=params, namespaces_seen=set(), rows=None)

    def rewrite(self, key: dict[str, Any], values: dict[str, Any]) -> None:
        """Redaction, inside the transaction: UPDATE one row by its primary key."""
        types = dict(zip(self.shape.columns, self.shape.types, strict=True))
        sets = ", ".join(
            f'"{c}" = %s::{types[c]}' if types[c] in ("json", "jsonb") else f'"{c}" = %s'
            for c in values
        )
        cond = " AND ".join(f'"{c}" = %s' for c in key)
        rows = self.session.query(
            f'WITH u AS (UPDATE "{self.table}" SET {sets} WHERE {self.where} AND {cond} '
            "RETURNING 1) SELECT count(*) FROM u",
            [*values.values(), *self.params, *key.values()],
        )
        if int(rows[0][0]) != 1:
            raise RuntimeError(f"{self.table}: rewrote {rows[0][0]} rows for one key")

    def remaining(self) -> int:
        """Rows of the scope still in the table, by SQL."""
        if self.rows is not None:
            return self.rows.left(self.thread)
        rows = self.session.query(
            f'SELECT count(*) FROM "{self.stored}" WHERE {self.where}', self.params
        )
        return int(rows[0][0])


@dataclass
class PlannedPgPart(PgTablePart, PlannedRows):
    """A table's removed (or kept) rows of a history erasure: ``where`` and ``params``
    come from the plan the first time the part reads - inside the erasure transaction,
    after the advisory lock."""

    resolve: Callable[[], tuple[str, list[Any]]] | None = None
    record: Callable[[list[tuple[str, ...]]], None] | None = None
    """``checkpoints`` and ``checkpoint_blobs``, removed: receives the keys each
    ``finish`` deletes."""

    def _measure(self, sink: LeafSink, lock: bool) -> TableCount:
        self._ready()
        return super()._measure(sink, lock)

    def leaves(self) -> Iterator[bytes]:
        """Plan first (if not yet), then :meth:`PgTablePart.leaves`."""
        self._ready()
        return super().leaves()

    def finish(self) -> None:
        """Plan first (if not yet), record the keys deleted, then
        :meth:`PgTablePart.finish`."""
        self._ready()
        if self.record is not None:
            cols = "checkpoint_id" if self.table == "checkpoints" else "channel, version"
            rows = self.session.query(
                f'SELECT checkpoint_ns, {cols} FROM "{self.table}" WHERE {self.where}',
                self.params,
            )
            self.record([tuple(str(v) for v in r) for r in rows])
        super().finish()

    def remaining(self) -> int:
        """Plan first (if not yet), then :meth:`PgTablePart.remaining`."""
        self._ready()
        return super().remaining()


# -- the backend ------------------------------------------------------------------------


class PostgresBackend(TableBackend):
    """An :class:`~erasure_receipts._engine.ErasureBackend` over one PostgreSQL session."""

    kind = "postgres"
    PARAM = "%s"
    ORDER_COLLATE = ' COLLATE "C"'
    TABLE_PART = PgTablePart
    PLANNED_PART = PlannedPgPart

    def __init__(
        self,
        session: Session,
        thread_id: str,
        *,
        saver: str,
        store: str | None,
        store_rows_namespaces: Sequence[Sequence[str]] = (),
        extra_parts: Sequence[Part] = (),
        extra_residue: Callable[[], list[dict[str, Any]]] | None = None,
        versions: dict[str, str],
        vacuum: bool | str = False,
        lock_timeout_ms: int = 30_000,
        residue_scan: bool = False,
        threads: Sequence[str] | None = None,
        keep: str = "none",
        kept: Sequence[Sequence[str]] = (),
        removed: Removed | None = None,
        tombstone_policy: str = "new_conversations",
        tombstone_store: bool = True,
    ) -> None:
        if vacuum not in (False, True, "full"):
            raise ValueError('vacuum= must be False, True or "full"')
        self._init_keep(keep, kept, removed)
        self._deleted: dict[str, list[tuple[str, ...]]] = {}
        self._policy = tombstone_policy
        self._enforced: str | None = None
        self._current: bool | None = None  # the schema is this version's (asked once)
        self._newest: dict[str, str] = {}
        self.session = session
        self.thread_id = thread_id
        self.saver = saver
        self.store = store
        self.database = database_label(session.info)
        self.versions = {**versions, "postgresql": _server_version(session.info)}
        self.extra_residue = extra_residue
        self.vacuum = vacuum
        self.lock_timeout_ms = int(lock_timeout_ms)
        self.residue_scan = residue_scan
        self.erasure_xids: list[int] = []
        """``txid_current()`` of each committed erasure transaction (empty at recovery):
        the horizon check after ``VACUUM`` looks for what is older than these."""
        self.large_scope = False
        """The scope has more checkpoints than a page (``newest_ids``, under the lock)."""
        self.lock_tables: tuple[str, ...] = ()
        """Tables locked ``SHARE ROW EXCLUSIVE`` first in the transaction: their writers
        (every thread's) wait for the commit, readers do not. Set when the scope was
        found by a search (subject discovery, database-wide needles) that must still
        hold at commit."""
        # Several threads (a subject): one unit per thread and one for the store.
        self.threads = list(threads) if threads is not None else [thread_id]
        units = bool(threads)  # a namespace erasure (no thread) is one tree
        self.store_prefixes = [".".join(ns) for ns in store_rows_namespaces]
        self.tombstone_store = tombstone_store
        specs = [
            (table, "checkpoints", "thread_id = %s", [t], f"thread:{t}" if units else "")
            for t in self.threads
            for table in CHECKPOINT_TABLES
        ]
        if store_rows_namespaces:
            where, params = namespace_condition(store_rows_namespaces)
            specs += [
                ("store", "store", where, params, "store" * units),
                ("store_vectors", "store", where, params, "store" * units),
            ]
        self._parts: list[Part] = []
        self.generation = 0
        """Bumped by every transaction, snapshot and shared DELETE (:class:`_ThreadsRows`)."""
        self.transactions = 0
        """Bumped by every transaction and snapshot (:class:`_ThreadsRows`)."""
        shapes = describe_all(session, list(dict.fromkeys(spec[0] for spec in specs)))
        shared: dict[str, _ThreadsRows] = {}
        several = len(set(self.threads)) > 1

        def large() -> bool:
            return self.large_scope

        for table, group, where, params, unit in specs:
            shape = shapes[table]
            if shape is None:
                # A table the database does not have (store_vectors without pgvector)
                # holds nothing of the scope: left out of the receipt, not shown as 0.
                continue
            reader = None
            if several and group == "checkpoints":  # one statement for all the threads
                reader = shared.setdefault(table, _ThreadsRows(self, table, shape))
            self._parts.append(
                PgTablePart(session, table, group, where, params, shape,
                            lock_rows=group == "store", unit=unit, rows=reader,
                            thread=str(params[0]) if reader is not None else "",
                            large=large if group == "checkpoints" else None)
            )  # fmt: skip
        if keep == "latest":
            rows = [p for p in self._parts
                    if isinstance(p, PgTablePart) and p.group == "checkpoints"]  # fmt: skip
            self._parts = [
                PlannedPgPart(session, p.table, p.group, "", (), p.shape, role=role,
                              resolve=self._planned_where(p.table, role == "kept"),
                              record=self._deleted.setdefault(p.table, []).extend
                              if role == "removed" and p.table != "checkpoint_writes"
                              else None)
                for p in rows
                for role in ("removed", "kept")
            ] + [p for p in self._parts if p not in rows]  # fmt: skip
        self._parts += list(extra_parts)

    def next_generation(self) -> int:
        """Start a new generation: nothing a shared reader read before answers after."""
        self.generation += 1
        return self.generation

    def _next_transaction(self) -> None:
        self.transactions += 1
        self.next_generation()

    def parts(self) -> Sequence[Part]:
        """The three checkpoint tables of every thread (one unit per thread when several
        were given; with ``keep="latest"`` a removed and a kept part each),
        ``store``/``store_vectors`` under ``store_rows_namespaces``, existing tables only,
        then any extra (swept) parts."""
        return self._parts

    def _run(self, sql: str, params: Sequence[Any]) -> None:
        self.session.execute(sql, params)

    def _first(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        rows = self.session.query(sql, params)
        return rows[0] if rows else None

    def _take_lease(self, receipt_id: str) -> Any:
        return take_lease(self.session, receipt_id)

    def has_store_table(self) -> bool:
        """Whether the database has a ``store`` table (a subject erasure's database-wide
        needle search then locks it too)."""
        return has_store_table(self.session)

    @property
    def tables(self) -> list[str]:
        """The tables the scope's parts read, each once, in part order: what ``VACUUM``
        processes (a subject's threads share tables)."""
        return list(dict.fromkeys(p.table for p in self._parts if isinstance(p, PgTablePart)))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """READ COMMITTED with ``lock_timeout``; before anything is read it takes
        ``lock_tables`` (if set), then each thread's exclusive advisory lock in sorted
        order. Commit on success, roll back on any error."""
        s = self.session
        self._next_transaction()
        with s.transaction():
            # READ COMMITTED: every statement after the lock sees what committed before it
            # (a snapshot taken before the lock wait would miss a writer we waited for).
            s.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            s.execute(f"SET LOCAL lock_timeout = {self.lock_timeout_ms}")
            if self.store_prefixes:
                # The store trigger first (created once, its table lock held until the
                # commit): every writer of the store then takes the prefixes' shared lock.
                ensure_store_tombstones(s)
            if self.lock_tables:
                # Before the advisory locks: every writer holding a thread's shared lock
                # also holds ROW EXCLUSIVE on a table here, so it has committed by now.
                names = ", ".join('"' + t.replace('"', '""') + '"' for t in self.lock_tables)
                s.execute(f"LOCK TABLE {names} IN SHARE ROW EXCLUSIVE MODE")
            ordered = sorted(set(self.threads))  # one order for every erasure: no deadlock
            if len(ordered) == 1:
                s.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (ADVISORY_CLASS, ordered[0])
                )
            elif ordered:  # one round trip; unnest yields the array's order
                s.query(
                    "SELECT count(pg_advisory_xact_lock(%s, hashtext(u.t))) "
                    "FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)",
                    (ADVISORY_CLASS, ordered),
                )
            for prefix in sorted(set(self.store_prefixes)):  # the store trigger's, shared
                s.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (STORE_ADVISORY_CLASS, prefix)
                )
            if self.keep == "none":  # may tombstone: the newest id it will have erased
                self._newest, checkpoints = newest_ids(s, self.threads)
                self.large_scope = checkpoints > FETCH_ROWS
            self._writing = True
            try:
                yield
                # The xid whose deletions VACUUM must be able to remove (None: wrote
                # nothing). Everything here runs in the top transaction (no savepoints).
                xid = s.query("SELECT txid_current_if_assigned()")[0][0]
                if xid is not None:
                    self.erasure_xids.append(int(xid))
            finally:
                self._writing = False
                self.large_scope = False  # the re-measure after the commit finds nothing
                self._next_transaction()
        self._settle_plan()  # committed

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A REPEATABLE READ, READ ONLY transaction; takes no advisory lock, so writers
        are not held back."""
        s = self.session
        self._next_transaction()
        try:
            with s.transaction():
                s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield
        finally:
            self._next_transaction()

    @property
    def tombstone_policy(self) -> str:
        """What a tombstone of this erasure enforces: the saver's policy where the
        installed triggers are this version's, else ``refuse_all``."""
        if self._enforced is None:
            self._enforced = self._policy if self._schema_current() else "refuse_all"
        return self._enforced

    def _schema_current(self) -> bool:
        if self._current is None:  # one backend serves one erasure's transaction
            self._current = installed_version(self.session) == SCHEMA_VERSION
        return self._current

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """Tombstone every thread of the scope (the triggers then refuse their writes); an
        existing tombstone is kept. Its policy row is (re)written: a later erasure of a
        new conversation moves ``fresh_after`` past what it erased."""
        current = self._schema_current()  # else no policy columns: every write refused
        threads = list(dict.fromkeys(self.threads))
        if current and len(threads) > 1:
            self._write_tombstones(threads, receipt_id, erased_at)
            threads = []
        for t in threads:
            if not current:
                self.session.execute(
                    "INSERT INTO erasure_tombstones (thread_id, receipt_id, erased_at) "
                    "VALUES (%s, %s, %s) ON CONFLICT (thread_id) DO NOTHING",
                    (t, receipt_id, erased_at),
                )
                continue
            bound = fresh_after(erased_at, self._newest.get(t))
            inserted = self.session.query(
                "INSERT INTO erasure_tombstones "
                "(thread_id, receipt_id, erased_at, policy, fresh_after) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread_id) DO NOTHING "
                "RETURNING 1",
                (t, receipt_id, erased_at, self._policy, bound),
            )
            if inserted:
                continue
            # An existing tombstone keeps its receipt; its bound moves past this erasure.
            # A separate UPDATE (not ON CONFLICT DO UPDATE, which needs UPDATE even when
            # nothing conflicts), so a worker role granted SELECT, INSERT on the table
            # can still tombstone a thread for the first time.
            self.session.execute(
                "UPDATE erasure_tombstones SET policy = %s, "
                'fresh_after = GREATEST(fresh_after COLLATE "C", %s) WHERE thread_id = %s',
                (self._policy, bound, t),
            )
        if self.store_tombstoned:  # the store's prefixes too, guarded by its trigger
            self.write_store_tombstones(receipt_id, erased_at)

    def _write_tombstones(self, threads: list[str], receipt_id: str, erased_at: str) -> None:
        """:meth:`write_tombstone` for several threads: one INSERT, then an UPDATE for each
        thread that already had a tombstone (same rows as one statement per thread)."""
        bounds = [fresh_after(erased_at, self._newest.get(t)) for t in threads]
        inserted = self.session.query(
            "INSERT INTO erasure_tombstones "
            "(thread_id, receipt_id, erased_at, policy, fresh_after) "
            "SELECT u.t, %s, %s, %s, u.b FROM unnest(%s::text[], %s::text[]) AS u(t, b) "
            "ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id",
            (receipt_id, erased_at, self._policy, threads, bounds),
        )
        new = {text_of(r[0]) for r in inserted}
        for t, bound in zip(threads, bounds, strict=True):
            if t not in new:
                self.session.execute(
                    "UPDATE erasure_tombstones SET policy = %s, "
                    'fresh_after = GREATEST(fresh_after COLLATE "C", %s) WHERE thread_id = %s',
                    (self._policy, bound, t),
                )

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Where any of ``forms`` occurs in a stored value (see the SQLite backend's
        ``find_needles``): ``text`` compared as text, ``jsonb`` as its ``::text`` form,
        ``bytea`` as bytes."""
        found = find_needles(self.session, forms, None if scope == "database" else threads)
        if self.keep != "none":
            found = [_with_checkpoints(self.session, loc) for loc in found]
        return found

    # -- keep="latest": the history erasure's plan (backends/keep_latest.py) ------------

    def _plan_condition(self, table: str, k: KeepLatest) -> tuple[str, list[Any]]:
        if table == "checkpoint_blobs":
            return k.blobs_where(self.thread_id)
        return k.where("%s")

    def _plan_keep_latest(self) -> KeepLatest:
        return plan_keep_latest(self.session, self.thread_id, write=self._writing)

    def _late_where(self, table: str) -> tuple[str, list[Any]]:
        """After the commit: the rows of the checkpoints (and the blobs) the transaction
        deleted - a checkpoint saved since, whatever its id, is not one of them."""
        assert self._removed is not None
        clauses: list[str] = []
        params: list[Any] = [self.thread_id]
        for ns, keys in self._removed.by_ns(table).items():
            if table == "checkpoint_blobs":
                # ... unless a checkpoint saved since references the key again: its data.
                clauses.append("(checkpoint_ns = %s AND (channel, version) IN "
                               "(SELECT * FROM unnest(%s::text[], %s::text[])) AND NOT EXISTS "
                               "(SELECT 1 FROM checkpoints c WHERE c.thread_id = "
                               "checkpoint_blobs.thread_id AND c.checkpoint_ns = "
                               "checkpoint_blobs.checkpoint_ns AND c.checkpoint -> "
                               "'channel_versions' ->> checkpoint_blobs.channel = "
                               "checkpoint_blobs.version))")  # fmt: skip
                params += [ns, [c for c, _ in keys], [v for _, v in keys]]
            else:
                clauses.append("(checkpoint_ns = %s AND checkpoint_id = ANY(%s::text[]))")
                params += [ns, [i for (i,) in keys]]
        return f"thread_id = %s AND ({' OR '.join(clauses) or '1 = 0'})", params

    def removed_keys(self) -> Removed:
        """``keep="latest"``: the checkpoints and blobs the transaction deletes (once
        finished)."""
        if self._removed is not None:
            return self._removed
        return Removed(
            frozenset((a, b) for a, b in self._deleted.get("checkpoints", ())),
            frozenset((a, b, c) for a, b, c in self._deleted.get("checkpoint_blobs", ())),
        )

    def reduce_residue(self) -> list[dict[str, Any]]:
        """After commit: ``VACUUM`` (or ``VACUUM (FULL)``) of the tables if ``vacuum`` asks
        and the connection is not in pipeline mode, the note that WAL cannot be scrubbed,
        the residue scan's "not applicable", then the extra parts' residue."""
        out = vacuum_residue(self.session, self.tables, self.vacuum, self.erasure_xids)
        out.append({**WAL_RESIDUE, "detail": dict(WAL_RESIDUE["detail"])})
        if self.residue_scan:
            out.append(
                {"action": "residue_scan", "status": "not_applicable",
                 "detail": {"reason": "the residue scan reads SQLite database files; a "
                                      "PostgreSQL cluster's files are not readable through "
                                      "a database connection"}}
            )  # fmt: skip
        if self.extra_residue is not None:
            out += self.extra_residue()
        return out
