"""Erasure targets as parts (``erasure_receipts.targets``): a table of the saver's own
database (a table part of its backend, in the erasure transaction), a table of another
database and any item target (measured in the transaction, swept after the commit).

A part swept after the commit carries ``deferred = True``: the engine measures it with
the rest (so a target that fails to read stops the erasure before anything is
deleted), journals the measurement with the deletion, and calls :meth:`sweep` once the
checkpoints' commit is re-measured empty - again at recovery, if the process died in
between.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._parts import LeafSink, Part, TableCount
from ..digest import encode_row, leaf_hash
from ..errors import ConfigurationError
from ..targets import SqlTarget

__all__ = ["ItemsPart", "OtherDatabasePart", "check_sql_target", "sql_target_part"]

_SQLITE_TEXT = ("CHAR", "CLOB", "TEXT")


def label(target: Any) -> str:
    """The receipt's table and method group of a target."""
    return f"target:{target.name}"


# -- a table: shape checks ----------------------------------------------------------


def _sqlite_shape(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, int]]:
    rows = conn.execute(
        "SELECT name, upper(type), pk FROM pragma_table_info(?) ORDER BY cid", (table,)
    ).fetchall()
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


def check_sql_target(kind: str, handle: Any, target: SqlTarget, where: str = "") -> None:
    """Before anything is deleted: the table exists, has a primary key (the order of its
    rows in the digest) and ``key_column``, which holds text; else ``ConfigurationError``
    naming what is wrong."""
    db = where or ("the saver's database" if target.database is None else target.database)
    what = f"target {target.name!r}: table {target.table!r} in {db}"
    if kind == "sqlite":
        shape = _sqlite_shape(handle, target.table)
        if not shape:
            raise ConfigurationError(f"{what} does not exist")
        cols = {name: decl for name, decl, _ in shape}
        if not any(pk for _, _, pk in shape):
            raise ConfigurationError(f"{what} has no primary key (its rows need a stable order)")
        if target.key_column not in cols:
            raise ConfigurationError(f"{what} has no column {target.key_column!r}")
        decl = cols[target.key_column]
        # SQLite's affinity rules: INT, REAL, FLOA, DOUB or anything else non-text would
        # turn a thread id like "42" into a number - no longer equal to the text key.
        if (
            decl
            and ("INT" in decl or not any(t in decl for t in _SQLITE_TEXT))
            and (decl != "BLOB")
        ):
            raise ConfigurationError(
                f"{what}: key column {target.key_column!r} is {decl}, not text (thread ids "
                "and subjects are text)"
            )
        return
    from .postgres.leaves import describe

    pg = describe(handle, target.table)
    if pg is None:
        raise ConfigurationError(f"{what} does not exist")
    if not pg.pk:
        raise ConfigurationError(f"{what} has no primary key (its rows need a stable order)")
    if target.key_column not in pg.columns:
        raise ConfigurationError(f"{what} has no column {target.key_column!r}")
    typ = pg.types[pg.columns.index(target.key_column)]
    if typ not in ("text", "varchar"):
        raise ConfigurationError(
            f"{what}: key column {target.key_column!r} is {typ}, not text (thread ids and "
            "subjects are text)"
        )


def sql_target_part(kind: str, handle: Any, target: SqlTarget, value: str, unit: str) -> Part:
    """The table part of ``target``'s rows of ``value`` on ``handle`` (the backend's
    connection or session: a part of its transaction)."""
    name = label(target)
    col = '"' + target.key_column + '"'
    if kind == "sqlite":
        from .sqlite.backend import SqlTablePart

        return SqlTablePart(handle, name, name, f"{col} = ?", [value], unit=unit,
                            source=target.table)  # fmt: skip
    from .postgres.backend import PgTablePart
    from .postgres.leaves import describe

    shape = describe(handle, target.table)
    assert shape is not None  # checked before
    return PgTablePart(handle, name, name, f"{col} = %s", [value], shape, lock_rows=True,
                       unit=unit, source=target.table)  # fmt: skip


def handle_kind(handle: Any) -> str:
    """``sqlite`` for a ``sqlite3.Connection``, else ``postgres`` (a session)."""
    return "sqlite" if isinstance(handle, sqlite3.Connection) else "postgres"


def find_sql_needles(
    kind: str, handle: Any, target: SqlTarget, forms: Sequence[bytes], values: Sequence[str]
) -> list[dict[str, Any]]:
    """Rows of the target's table outside the erased ``values`` holding any of
    ``forms`` in a text or blob column (compared as stored bytes)."""
    out: list[dict[str, Any]] = []
    col = '"' + target.key_column + '"'
    if kind == "sqlite":
        shape = _sqlite_shape(handle, target.table)
        names = [n for n, _, _ in shape]
        marks = ", ".join("?" for _ in values)
        sel = ", ".join(
            f"CASE WHEN typeof(\"{n}\") IN ('text', 'blob') THEN CAST(\"{n}\" AS BLOB) END"
            for n in names
        )
        where = f"{col} IS NULL OR {col} NOT IN ({marks})" if values else "1 = 1"
        rows = handle.execute(
            f'SELECT {sel} FROM "{target.table}" WHERE {where}', list(values)
        ).fetchall()
    else:
        from .postgres.leaves import describe

        pg = describe(handle, target.table)
        assert pg is not None
        names = pg.columns
        sel = ", ".join(
            f'"{n}"' if t == "bytea" else f"convert_to(\"{n}\"::text, 'UTF8')"
            for n, t in zip(names, pg.types, strict=True)
        )
        rows = handle.query(
            f'SELECT {sel} FROM "{target.table}" WHERE {col} IS NULL OR NOT ({col} = ANY(%s))',
            (list(values),),
        )
    for row in rows:
        for n, v in zip(names, row, strict=True):
            if isinstance(v, bytes | memoryview) and any(f in bytes(v) for f in forms):
                out.append({"table": label(target), "column": n, "via": "target"})
    return out


# -- swept after the commit ------------------------------------------------------------


@dataclass
class OtherDatabasePart:
    """``SqlTarget(database=...)``: a table part on a connection of its own, measured in
    the erasure transaction and swept (in a transaction of that database) after the
    checkpoints' commit."""

    target: SqlTarget
    value: str
    table: str
    group: str
    unit: str = ""
    method: str = "sweep"
    role: str = "removed"
    irreversible_deleted: int = 0
    deferred: bool = True
    after: str | None = None
    _handle: Any = None
    _kind: str = ""
    _inner: Any = None

    def open(self) -> None:
        """Connect and check the table (before anything is deleted)."""
        if self._inner is not None:
            return
        t = self.target
        assert t.database is not None
        if t.postgres_dsn:
            import psycopg

            from .postgres.session import SyncSession

            conn = psycopg.connect(t.database, autocommit=True)
            self._kind, self._handle = "postgres", SyncSession(conn)
        else:
            from pathlib import Path
            from urllib.request import pathname2url

            self._kind = "sqlite"
            # mode=rw: a mistyped path is an error, never a new empty database file
            uri = f"file:{pathname2url(str(Path(t.database).absolute()))}?mode=rw"
            self._handle = sqlite3.connect(uri, uri=True, isolation_level=None,
                                           check_same_thread=False)  # fmt: skip
        check_sql_target(self._kind, self._handle, t)
        self._inner = sql_target_part(self._kind, self._handle, t, self.value, self.unit)

    def measure(self, sink: LeafSink) -> TableCount:
        """The target's rows (read in a transaction of their database)."""
        self.open()
        if self._kind == "sqlite":
            conn = self._handle
            conn.execute("BEGIN")
            try:
                return self._inner.measure(sink)  # type: ignore[no-any-return]
            finally:
                conn.rollback()
        with self._handle.transaction():
            return self._inner.measure(sink)  # type: ignore[no-any-return]

    def erase(self, sink: LeafSink) -> TableCount:
        """Measured only here: :meth:`sweep` deletes after the commit."""
        return self.measure(sink)

    def find_needles(self, forms: Sequence[bytes], values: Sequence[str]) -> list[dict[str, Any]]:
        """Rows of the target's whole table in its database, outside the key ``values``
        (those the sweep deletes), holding any of ``forms`` (read in one snapshot)."""
        self.open()
        if self._kind == "sqlite":
            conn = self._handle
            conn.execute("BEGIN")
            try:
                return find_sql_needles(self._kind, conn, self.target, forms, values)
            finally:
                conn.rollback()
        with self._handle.transaction():
            return find_sql_needles(self._kind, self._handle, self.target, forms, values)

    def finish(self) -> None:
        """Nothing here (:meth:`sweep`)."""

    def sweep(self) -> tuple[int, bytes]:
        """In a write transaction of the target's database: measure, delete and count
        zero left; returns the rows deleted and their tree's root."""
        from ..digest import MerkleTree

        self.open()
        tree = MerkleTree()
        if self._kind == "sqlite":
            conn = self._handle
            conn.execute("BEGIN IMMEDIATE")
            try:
                n = self._inner.erase(tree.append_hash).rows
                self._inner.finish()
                if self._inner.remaining():
                    raise RuntimeError(f"{self.table}: rows remain after the sweep")
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        else:
            with self._handle.transaction():
                n = self._inner.erase(tree.append_hash).rows
                self._inner.finish()
                if self._inner.remaining():
                    raise RuntimeError(f"{self.table}: rows remain after the sweep")
        self.irreversible_deleted += n
        return n, tree.root()

    def remaining(self) -> int:
        """The target's rows of the scope still present."""
        self.open()
        return int(self._inner.remaining())

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of the rows (legal hold)."""
        self.open()
        yield from self._inner.leaves()

    def close(self) -> None:
        """Close the connection of its own."""
        if self._handle is not None:
            (self._handle if self._kind == "sqlite" else self._handle.conn).close()
            self._handle = self._inner = None


@dataclass
class ItemsPart:
    """An :class:`~erasure_receipts.targets.ErasureTarget`'s items of one key value:
    one leaf per item (table ``target:<name>``: key TEXT, data BLOB; RECEIPT_SPEC.md
    9.13), measured in the erasure transaction, swept after the commit."""

    target: Any
    value: str
    table: str
    group: str
    unit: str = ""
    method: str = "sweep"
    role: str = "removed"
    irreversible_deleted: int = 0
    deferred: bool = True
    after: str | None = None
    _items: dict[str, bytes] = field(default_factory=dict)

    def _read(self) -> dict[str, bytes]:
        raw = self.target.items(self.value)
        out: dict[str, bytes] = {}
        for k, v in dict(raw).items():
            if not isinstance(k, str) or not k or not isinstance(v, bytes | bytearray):
                raise TypeError(
                    f"target {self.target.name!r}: items() maps non-empty str keys to bytes, got "
                    f"{type(k).__name__} -> {type(v).__name__}"
                )
            out[k] = bytes(v)
        return out

    @property
    def measured(self) -> list[str]:
        """The keys of the items last measured."""
        return list(self._items)

    def _leaf(self, key: str, data: bytes) -> bytes:
        return encode_row(self.target.name, [key], [("key", key), ("data", data)])

    def measure(self, sink: LeafSink) -> TableCount:
        """Every item, by key (byte-wise on UTF-8)."""
        self._items = self._read()
        count = TableCount()
        for key in sorted(self._items, key=lambda k: k.encode("utf-8", "surrogatepass")):
            data = self._items[key]
            sink(leaf_hash(self._leaf(key, data)))
            count.rows += 1
            count.bytes += len(key.encode("utf-8", "surrogatepass")) + len(data)
        return count

    def erase(self, sink: LeafSink) -> TableCount:
        """Measured only here: :meth:`sweep` deletes after the commit."""
        return self.measure(sink)

    def finish(self) -> None:
        """Nothing here (:meth:`sweep`)."""

    def sweep(self) -> tuple[int, bytes]:
        """Delete every item the target has now; returns how many and their root."""
        from ..digest import MerkleTree

        items = self._read()
        tree = MerkleTree()
        for key in sorted(items, key=lambda k: k.encode("utf-8", "surrogatepass")):
            tree.append(self._leaf(key, items[key]))
        if items:
            self.target.delete(self.value, sorted(items))
        self.irreversible_deleted += len(items)
        left = self.remaining()
        if left:
            raise RuntimeError(f"{self.table}: {left} item(s) remain after the sweep")
        return len(items), tree.root()

    def remaining(self) -> int:
        """Items the target still has."""
        return len(self._read())

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of every item (legal hold)."""
        items = self._read()
        for key in sorted(items, key=lambda k: k.encode("utf-8", "surrogatepass")):
            yield self._leaf(key, items[key])


# -- tombstones: a late insert for an erased thread refused ------------------------------

_TOMBSTONE_MESSAGE = "erasure_receipts: thread erased"


def _trigger_name(target: SqlTarget) -> str:
    import hashlib

    h = hashlib.sha256(f"{target.table}\x00{target.key_column}".encode()).hexdigest()[:16]
    return f"erasure_target_{h}"


def ensure_target_trigger(kind: str, handle: Any, target: SqlTarget) -> None:
    """Inside the erasure transaction, with the tombstone: a trigger on the target's
    table refuses an insert (or a key update) for a tombstoned thread id - a late grant
    written by a graph still running on the erased thread - unless, under the
    ``new_conversations`` policy, a new conversation has started under the id (it has
    checkpoints again, which the checkpoint triggers only allow for a fresh one)."""
    name, col = _trigger_name(target), '"' + target.key_column + '"'
    if kind == "sqlite":
        when = (
            f"EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.{col}) "
            "AND NOT EXISTS (SELECT 1 FROM erasure_tombstone_policies p "
            f"WHERE p.thread_id = NEW.{col} AND p.policy = 'new_conversations' "
            f"AND EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = NEW.{col}))"
        )
        for event, suffix in (("INSERT", "i"), (f"UPDATE OF {col}", "u")):
            handle.execute(
                f'CREATE TRIGGER IF NOT EXISTS "{name}_{suffix}" BEFORE {event} ON '
                f'"{target.table}" WHEN {when} '
                f"BEGIN SELECT RAISE(ABORT, '{_TOMBSTONE_MESSAGE}'); END"
            )
        return
    from .postgres.schema import ADVISORY_CLASS

    rows = handle.query(
        "SELECT to_regprocedure('erasure_receipts_refuse_erased_target()') IS NOT NULL, "
        "EXISTS (SELECT FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s), "
        "current_schema()",
        (target.table, name),
    )
    has_function, has_trigger, schema = rows[0]
    if has_trigger:
        return
    if not has_function:
        s = '"' + str(schema).replace('"', '""') + '"'
        handle.execute(f"""CREATE OR REPLACE FUNCTION erasure_receipts_refuse_erased_target()
RETURNS trigger LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    k pg_catalog.text;
    locked pg_catalog.text;
    bound pg_catalog.text;
    receipt pg_catalog.text;
BEGIN
    k := pg_catalog.to_jsonb(NEW) OPERATOR(pg_catalog.->>) TG_ARGV[0];
    IF k IS NULL THEN
        RETURN NEW;
    END IF;
    -- The erasure holds the thread's lock exclusively until its commit (as for the
    -- checkpoint triggers): a write that waited for it sees its tombstone.
    locked := pg_catalog.pg_advisory_xact_lock_shared(
        {ADVISORY_CLASS}, pg_catalog.hashtext(k))::pg_catalog.text;
    SELECT t.receipt_id, CASE WHEN t.policy OPERATOR(pg_catalog.=) 'new_conversations'
        THEN t.fresh_after END INTO receipt, bound FROM {s}.erasure_tombstones t
        WHERE t.thread_id OPERATOR(pg_catalog.=) k;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    IF bound IS NOT NULL AND EXISTS (SELECT FROM {s}.checkpoints c
            WHERE c.thread_id OPERATOR(pg_catalog.=) k) THEN
        RETURN NEW;  -- a new conversation has started under the id
    END IF;
    RAISE EXCEPTION '{_TOMBSTONE_MESSAGE}'
        USING ERRCODE = 'P0001',
              DETAIL = pg_catalog.format('erased by receipt %s', receipt);
END
$fn$""")
    handle.execute(
        f'CREATE TRIGGER "{name}" BEFORE INSERT OR UPDATE OF {col} ON "{target.table}" '
        f"FOR EACH ROW EXECUTE FUNCTION erasure_receipts_refuse_erased_target("
        f"'{target.key_column}')"
    )


def guarded(request_tombstone: bool, target: Any) -> bool:
    """Whether an erasure's tombstone guards ``target``'s table: a thread-keyed table of
    the saver's database, when the erasure tombstones."""
    return (
        request_tombstone
        and isinstance(target, SqlTarget)
        and target.database is None
        and target.key == "thread"
    )
