"""SQLite: the erasure backend - enumerate, lock, delete and scrub one thread's rows on a
sqlite3 connection.

Everything here runs on one ``sqlite3.Connection`` (for the async saver, the raw
connection inside aiosqlite's worker thread), so the sync and async savers share it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ..._clock import fresh_after
from ..._parts import LeafSink, Part, TableCount
from ...digest import RowLeafHasher
from .._table import PlannedRows, TableBackend
from ..keep_latest import KeepLatest, Removed
from .connection import _quote, database_path, text_encoding
from .journal import take_lease
from .queries import find_needles, namespace_condition, newest_ids, plan_keep_latest
from .residue import LIVE_PAGE_RESIDUE, Needles, residue_scan, scrub
from .schema import ensure_store_triggers

__all__ = ["PlannedSqlPart", "SqlTablePart", "SqliteBackend"]


@dataclass
class SqlTablePart:
    """One table's rows of the scope, streamed in primary-key order from raw storage."""

    conn: sqlite3.Connection
    table: str
    group: str
    where: str
    params: Sequence[Any]
    method: str = "atomic-transaction"
    irreversible_deleted: int = 0
    namespaces_seen: set[str] = field(default_factory=set)
    observer: Callable[[Sequence[Any]], None] | None = None
    """Sees every measured row (the residue scan's needle collector)."""
    unit: str = ""
    """The receipt unit the rows belong to (``thread:<id>``, ``store``; "" = one tree)."""
    role: str = "removed"
    """``removed`` (measured and deleted) or ``kept`` (measured only: history receipts)."""
    source: str = ""
    """The stored table's name when ``table`` (the receipt's name) differs: an
    erasure target's ``target:<name>``."""
    _columns: list[str] | None = None
    _pk: list[str] | None = None
    _measured: int = 0
    _last_bytes: int = 0
    _encoding: str = "utf-8"

    @property
    def stored(self) -> str:
        """The table's name in the database."""
        return self.source or self.table

    def _describe(self) -> tuple[list[str], list[str]] | None:
        if self._columns is None:
            # Names read as BLOBs: a connection's text_factory must not change them.
            info = self.conn.execute(
                "SELECT CAST(name AS BLOB), pk FROM pragma_table_info(?) ORDER BY cid",
                (self.stored,),
            ).fetchall()
            if not info:
                return None  # the table does not exist (e.g. store without vectors)
            self._encoding = text_encoding(self.conn)
            self._columns = [bytes(r[0]).decode(self._encoding) for r in info]
            pk = sorted((r[1], c) for c, r in zip(self._columns, info, strict=True) if r[1])
            self._pk = [c for _, c in pk]
        assert self._pk is not None
        return self._columns, self._pk

    def _rows(self) -> Iterator[tuple[Sequence[Any], int]]:
        """``(values, text_mask)`` per row in primary-key order, read by storage class.

        Every column is selected as an aliased expression - so no declared type or
        column name reaches ``detect_types`` converters - and TEXT is cast to BLOB, so
        no ``text_factory`` applies: values are exactly None, int, float or bytes (the
        stored bytes, in the database's encoding), and bit i of ``text_mask`` says
        column i holds TEXT. Items after the columns are the mask columns.
        """
        desc = self._describe()
        if desc is None:
            return
        cols, pk = desc
        quoted = [_quote(c) for c in cols]
        values = ", ".join(
            f"CASE WHEN typeof({q}) = 'text' THEN CAST({q} AS BLOB) ELSE {q} END AS \"v{i}\""
            for i, q in enumerate(quoted)
        )
        masks = [
            " | ".join(f"((typeof({q}) = 'text') << {j})" for j, q in enumerate(quoted[s : s + 62]))
            + f' AS "m{s}"'
            for s in range(0, len(quoted), 62)
        ]
        order = ", ".join(_quote(c) for c in pk)
        sql = (
            f"SELECT {values}, {', '.join(masks)} FROM {_quote(self.stored)} "
            f"WHERE {self.where} ORDER BY {order}"
        )
        cur = self.conn.cursor()
        cur.row_factory = None  # plain tuples whatever the connection's row_factory
        cur.execute(sql, list(self.params))
        n, k = len(cols), len(masks)
        for row in cur:
            yield row, row[n] if k == 1 else sum(row[n + j] << (62 * j) for j in range(k))

    def _utf8(self, row: Sequence[Any], mask: int) -> Sequence[Any]:
        """The row with its TEXT as UTF-8 (a no-op unless the database is UTF-16)."""
        if self._encoding == "utf-8":
            return row
        return tuple(
            v.decode(self._encoding, "surrogatepass").encode("utf-8", "surrogatepass")
            if mask >> i & 1 else v
            for i, v in enumerate(row[: len(self._columns or ())])
        )  # fmt: skip

    def measure(self, sink: LeafSink) -> TableCount:
        """Hash every row of the scope into ``sink`` in primary-key order, recording the
        checkpoint namespaces seen and feeding ``observer``; a missing table is empty."""
        desc = self._describe()
        count = TableCount()
        if desc is None:
            return count
        cols, pk = desc
        leaf = RowLeafHasher(self.stored, cols, pk).stored
        ns_idx = cols.index("checkpoint_ns") if "checkpoint_ns" in cols else None
        utf8 = self._encoding == "utf-8"
        for row, mask in self._rows():
            h, size = leaf(row if utf8 else self._utf8(row, mask), mask)
            sink(h)
            count.rows += 1
            count.bytes += size
            if ns_idx is not None:
                ns = row[ns_idx]
                ns = ns.decode(self._encoding, "replace") if type(ns) is bytes else ns
                self.namespaces_seen.add(ns)
            if self.observer is not None:
                self.observer(row[: len(cols)])  # stored bytes, in the database's encoding
        self._last_bytes = count.bytes
        return count

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of every row, in the order ``measure`` hashes them (legal hold)."""
        desc = self._describe()
        if desc is None:
            return
        leaf = RowLeafHasher(self.stored, *desc).stored_data
        for row, mask in self._rows():
            yield leaf(self._utf8(row, mask), mask)

    def erase(self, sink: LeafSink) -> TableCount:
        """Measure only: the DELETE is deferred to :meth:`finish` (cascade order)."""
        self._measured = self.measure(sink).rows
        return TableCount(self._measured, self._last_bytes)

    def finish(self) -> None:
        """DELETE the scope's rows; raises ``RuntimeError`` if the number deleted differs
        from the number :meth:`erase` measured."""
        if self._describe() is None:
            return
        cur = self.conn.execute(
            f"DELETE FROM {_quote(self.stored)} WHERE {self.where}", list(self.params)
        )
        if cur.rowcount != self._measured:
            raise RuntimeError(
                f"{self.table}: measured {self._measured} rows but deleted {cur.rowcount}"
            )

    def key_columns(self) -> list[str]:
        """The primary-key columns (none for a table that does not exist)."""
        desc = self._describe()
        return [] if desc is None else list(desc[1])

    def records(self) -> Iterator[dict[str, Any]]:
        """Redaction: every row of the scope as ``{column: value}`` in primary-key order
        (the order :meth:`measure` hashes them), values as stored (TEXT as ``str``)."""
        desc = self._describe()
        if desc is None:
            return
        cols, pk = desc
        cur = self.conn.cursor()
        cur.row_factory = None
        cur.execute(
            f"SELECT {', '.join(_quote(c) for c in cols)} FROM {_quote(self.table)} "
            f"WHERE {self.where} ORDER BY {', '.join(_quote(c) for c in pk)}",
            list(self.params),
        )
        for row in cur:
            yield dict(zip(cols, row, strict=True))

    def only(self, keys: list[dict[str, Any]]) -> SqlTablePart:
        """This part restricted to the rows with ``keys`` (primary keys)."""
        conds, params = [], list(self.params)
        for key in keys:
            conds.append("(" + " AND ".join(f"{_quote(c)} = ?" for c in key) + ")")
            params += list(key.values())
        where = f"({self.where}) AND ({' OR '.join(conds) or '1 = 0'})"
        return replace(self, where=where, params=params, namespaces_seen=set())

    def rewrite(self, key: dict[str, Any], values: dict[str, Any]) -> None:
        """Redaction, inside the transaction: UPDATE one row by its primary key."""
        sets = ", ".join(f"{_quote(c)} = ?" for c in values)
        cond = " AND ".join(f"{_quote(c)} = ?" for c in key)
        cur = self.conn.execute(
            f"UPDATE {_quote(self.table)} SET {sets} WHERE {self.where} AND {cond}",
            [*values.values(), *self.params, *key.values()],
        )
        if cur.rowcount != 1:
            raise RuntimeError(f"{self.table}: rewrote {cur.rowcount} rows for one key")

    def remaining(self) -> int:
        """Rows of the scope still in the table, by SQL (0 if the table does not exist)."""
        if self._describe() is None:
            return 0
        row = self.conn.execute(
            f"SELECT count(*) FROM {_quote(self.stored)} WHERE {self.where}", list(self.params)
        ).fetchone()
        return int(row[0])


@dataclass
class PlannedSqlPart(SqlTablePart, PlannedRows):
    """A table's removed (or kept) rows of a history erasure: ``where`` and ``params``
    come from the plan the first time the part reads - inside the erasure transaction,
    so the plan sees what the write lock protects."""

    resolve: Callable[[], tuple[str, list[Any]]] | None = None
    record: Callable[[list[tuple[str, str]]], None] | None = None
    """``checkpoints``, removed: receives the keys each ``finish`` deletes."""

    def _rows(self) -> Iterator[tuple[Sequence[Any], int]]:
        self._ready()
        return super()._rows()

    def finish(self) -> None:
        """Plan first (if not yet), record the keys deleted, then
        :meth:`SqlTablePart.finish`."""
        self._ready()
        if self.record is not None and self._describe() is not None:
            enc = self._encoding
            self.record([
                (bytes(ns).decode(enc, "surrogatepass"), bytes(cid).decode(enc, "surrogatepass"))
                for ns, cid in self.conn.execute(
                    "SELECT CAST(checkpoint_ns AS BLOB), CAST(checkpoint_id AS BLOB) "
                    f"FROM checkpoints WHERE {self.where}", list(self.params))
            ])  # fmt: skip
        super().finish()

    def remaining(self) -> int:
        """Plan first (if not yet), then :meth:`SqlTablePart.remaining`."""
        self._ready()
        return super().remaining()


class SqliteBackend(TableBackend):
    """An :class:`~erasure_receipts._engine.ErasureBackend` over one sqlite3 connection."""

    kind = "sqlite"
    PARAM = "?"
    TABLE_PART = SqlTablePart
    PLANNED_PART = PlannedSqlPart

    def __init__(
        self,
        conn: sqlite3.Connection,
        thread_id: str,
        *,
        saver: str,
        store: str | None,
        store_rows_namespaces: Sequence[Sequence[str]] = (),
        extra_parts: Sequence[Part] = (),
        extra_residue: Callable[[], list[dict[str, Any]]] | None = None,
        versions: dict[str, str],
        residue_scan: bool | str = False,
        threads: Sequence[str] | None = None,
        keep: str = "none",
        kept: Sequence[Sequence[str]] = (),
        removed: Removed | None = None,
        tombstone_policy: str = "new_conversations",
        tombstone_store: bool = True,
    ) -> None:
        self.extra_residue = extra_residue
        self.tombstone_policy = tombstone_policy
        """What a tombstone written by this erasure enforces (the receipt says it)."""
        self._newest: dict[str, str] = {}
        self.force_vacuum = residue_scan == "vacuum"
        self._init_keep(keep, kept, removed)
        self._deleted: list[tuple[str, str]] = []
        self.needles: Needles | None = None
        self._erased = False
        self.conn = conn
        self.thread_id = thread_id
        self.saver = saver
        self.store = store
        self.database = database_path(conn)
        self.versions = versions
        # Several threads (a subject): one unit per thread and one for the store.
        self.threads = list(threads) if threads is not None else [thread_id]
        units = bool(threads)  # a namespace erasure (no thread) is one tree
        self.store_prefixes = [".".join(ns) for ns in store_rows_namespaces]
        self.tombstone_store = tombstone_store
        self._parts: list[Part] = [
            SqlTablePart(conn, table, "checkpoints", "thread_id = ?", [t],
                         unit=f"thread:{t}" if units else "")
            for t in self.threads
            for table in ("checkpoints", "writes")
        ]  # fmt: skip
        if keep == "latest":
            self._parts = [
                PlannedSqlPart(conn, table, "checkpoints", "", (), role=role,
                               resolve=self._planned_where(table, role == "kept"),
                               record=self._deleted.extend
                               if role == "removed" and table == "checkpoints" else None)
                for table in ("checkpoints", "writes")
                for role in ("removed", "kept")
            ]  # fmt: skip
        if store_rows_namespaces:
            where, params = namespace_condition(store_rows_namespaces)
            self._parts += [
                SqlTablePart(conn, "store", "store", where, params, unit="store" * units),
                SqlTablePart(conn, "store_vectors", "store", where, params, unit="store" * units),
            ]
        # Tables the database does not have (e.g. store_vectors without an index) hold
        # nothing of the thread and are left out of the receipt rather than shown as 0.
        enc = text_encoding(conn)
        if enc != "utf-8":
            # The triggers read checkpoint metadata (UTF-8 JSON in a BLOB) as TEXT, which
            # only works in a UTF-8 database: elsewhere they refuse every write.
            self.tombstone_policy = "refuse_all"
        existing = {
            bytes(r[0]).decode(enc)  # as a BLOB: whatever the connection's text_factory
            for r in conn.execute("SELECT CAST(name AS BLOB) FROM sqlite_master WHERE type='table'")
        }
        self._parts = [
            p for p in self._parts if not isinstance(p, SqlTablePart) or p.table in existing
        ]
        if residue_scan:
            prefixes = [".".join(ns) for ns in store_rows_namespaces]
            self.needles = Needles(enc, exclude=[*self.threads, *prefixes])
            for p in self._parts:
                assert isinstance(p, SqlTablePart)
                if p.role != "kept":  # kept rows are not erased: not needles
                    p.observer = self.needles.add_row
        self._parts += list(extra_parts)

    def parts(self) -> Sequence[Part]:
        """``checkpoints`` and ``writes`` (with ``store``/``store_vectors`` if the store
        shares this database), existing tables only, then any extra (swept) parts."""
        return self._parts

    def _run(self, sql: str, params: Sequence[Any]) -> None:
        self.conn.execute(sql, params)

    def _first(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def _take_lease(self, receipt_id: str) -> Any:
        return take_lease(self.conn, receipt_id)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` with ``secure_delete`` on; commit on success, roll back on
        any error. Refuses a connection that is already inside a transaction."""
        conn = self.conn
        if conn.in_transaction:
            raise RuntimeError("the saver's connection has an open transaction; refusing")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("BEGIN IMMEDIATE")
        self._writing = True
        if self.keep == "none":  # may tombstone: the newest id it will have erased
            self._newest = newest_ids(conn, self.threads)
        try:
            yield
            conn.commit()  # inside the try: a failed COMMIT leaves the transaction open
            self._erased = True
            self._settle_plan()
        except BaseException:
            try:
                conn.rollback()
            except sqlite3.Error as exc:  # pragma: no cover - connection unusable
                raise RuntimeError(f"erasure transaction could not be rolled back: {exc}") from exc
            raise
        finally:
            self._writing = False

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A read transaction, rolled back afterwards; a transaction already open on the
        connection is used as it is (and left open)."""
        conn = self.conn
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            yield
        finally:
            if own:
                conn.rollback()

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """Tombstone the thread (the triggers then reject its writes) and the store
        prefixes erased as rows here; an existing tombstone is kept. Its policy row is
        (re)written: a later erasure of a new conversation moves ``fresh_after`` past
        what it erased."""
        self.conn.executemany(
            # An existing tombstone keeps pointing at the erasure that removed the data.
            "INSERT INTO erasure_tombstones (thread_id, receipt_id, erased_at) "
            "VALUES (?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            [(t, receipt_id, erased_at) for t in self.threads],
        )
        self.conn.executemany(
            "INSERT INTO erasure_tombstone_policies (thread_id, policy, fresh_after) "
            "VALUES (?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET policy = excluded.policy, "
            "fresh_after = max(fresh_after, excluded.fresh_after)",
            [(t, self.tombstone_policy, fresh_after(erased_at, self._newest.get(t)))
             for t in self.threads],
        )  # fmt: skip
        if self.store_tombstoned:  # the store's prefixes too, guarded by its triggers
            ensure_store_triggers(self.conn)
            self.write_store_tombstones(receipt_id, erased_at)

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Where any of ``forms`` occurs in a stored value: the scope's threads' rows
        (``scope="thread"``) or every row of every LangGraph table (``"database"``).

        Values are compared as stored bytes (TEXT cast to BLOB), so no connection
        setting can hide a match. Each location names the table, primary key, column
        and form index - never the value searched for.
        """
        return find_needles(self.conn, forms, None if scope == "database" else threads)

    def reduce_residue(self) -> list[dict[str, Any]]:
        """After commit: ``secure_delete`` and WAL truncation (:func:`scrub`), the residue
        scan or the note that it was skipped, then the swept store's residue."""
        out = scrub(self.conn)
        if self.needles is not None:
            # Needles exist only if this backend measured the rows it deleted; a receipt
            # issued by recovery scans conservatively instead.
            needles = self.needles if self._erased else None
            out.append(residue_scan(self.conn, self.database, needles, vacuum=self.force_vacuum))
        else:
            out.append(LIVE_PAGE_RESIDUE)
        if self.extra_residue is not None:
            out += self.extra_residue()
        return out

    # -- keep="latest": the history erasure's plan (backends/keep_latest.py) ------------

    def _plan_keep_latest(self) -> KeepLatest:
        return plan_keep_latest(self.conn, self.thread_id, write=self._writing)

    def _late_where(self, table: str) -> tuple[str, list[Any]]:
        """After the commit: the rows of the checkpoints the transaction deleted (a
        checkpoint saved since, whatever its id, is not one of them)."""
        assert self._removed is not None
        clauses, params = [], [self.thread_id]
        for ns, ids in self._removed.by_ns(table).items():
            clauses.append(
                "(checkpoint_ns = ? AND checkpoint_id IN (SELECT value FROM json_each(?)))"
            )
            params += [ns, json.dumps([i for (i,) in ids])]
        return f"thread_id = ? AND ({' OR '.join(clauses) or '1 = 0'})", params

    def removed_keys(self) -> Removed:
        """``keep="latest"``: the checkpoints the transaction deletes (once finished)."""
        if self._removed is not None:
            return self._removed
        return Removed(frozenset(self._deleted))
