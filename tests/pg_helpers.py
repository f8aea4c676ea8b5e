"""Raw-table helpers for the PostgreSQL tests, written independently of the library.

The independent digest reads rows with plain psycopg and encodes them per
RECEIPT_SPEC.md "PostgreSQL leaves" in Python (timestamps formatted here, not by the
server), so it checks the spec rather than re-running the library's SQL.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from erasure_receipts.digest import encode_row, leaf_hash
from scenario import naive_root


def connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True, row_factory=tuple_row)


def table_shape(
    conn: psycopg.Connection[Any], table: str
) -> tuple[list[tuple[str, str]], list[str]]:
    cols = conn.execute(
        "SELECT column_name, udt_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    pk = conn.execute(
        "SELECT kcu.column_name FROM information_schema.table_constraints tc "
        "JOIN information_schema.key_column_usage kcu USING (constraint_schema, constraint_name) "
        "WHERE tc.table_schema = current_schema() AND tc.table_name = %s "
        "AND tc.constraint_type = 'PRIMARY KEY' ORDER BY kcu.ordinal_position",
        (table,),
    ).fetchall()
    return [(c[0], c[1]) for c in cols], [p[0] for p in pk]


def _value(v: Any, udt: str) -> Any:
    if v is None:
        return None
    if udt == "timestamptz":
        assert isinstance(v, datetime)
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if udt in ("jsonb", "json"):
        return v  # selected as ::text below (the server's jsonb output, per the spec)
    return v


def raw_rows(dsn: str, table: str, where: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every column of the matching rows in the spec's leaf representation, pk order."""
    with connect(dsn) as conn:
        cols, pk = table_shape(conn, table)
        if not cols:
            return []
        select = sql.SQL(", ").join(
            sql.SQL("{}::text").format(sql.Identifier(c)) if u in ("jsonb", "json")
            else sql.Identifier(c)
            for c, u in cols
        )  # fmt: skip
        order = sql.SQL(", ").join(
            sql.SQL('{} COLLATE "C"').format(sql.Identifier(c))
            if dict(cols)[c] in ("text", "varchar") else sql.Identifier(c)
            for c in pk
        )  # fmt: skip
        q = sql.SQL("SELECT {} FROM {} WHERE " + where + " ORDER BY {}").format(
            select, sql.Identifier(table), order
        )
        rows = conn.execute(q, params).fetchall()
    return [tuple(_value(v, u) for v, (_, u) in zip(r, cols, strict=True)) for r in rows]


def independent_digest(dsn: str, tables: dict[str, tuple[str, tuple[Any, ...]]]) -> str:
    hashes = []
    with connect(dsn) as conn:
        shapes = {t: table_shape(conn, t) for t in tables}
    for table in sorted(tables):
        cols, pk = shapes[table]
        if not cols:
            continue
        names = [c for c, _ in cols]
        where, params = tables[table]
        for row in raw_rows(dsn, table, where, params):
            pkv = [row[names.index(c)] for c in pk]
            hashes.append(leaf_hash(encode_row(table, pkv, list(zip(names, row, strict=True)))))
    return naive_root(hashes).hex()


def count(dsn: str, table: str, where: str, params: tuple[Any, ...]) -> int:
    with connect(dsn) as conn:
        q = sql.SQL("SELECT count(*) FROM {} WHERE " + where).format(sql.Identifier(table))
        row = conn.execute(q, params).fetchone()
    assert row is not None
    return int(row[0])


def fingerprint(dsn: str, table: str, where: str, params: tuple[Any, ...]) -> str:
    """SHA-256 over the rows' full text representation (``t::text``), in pk order."""
    with connect(dsn) as conn:
        _, pk = table_shape(conn, table)
        order = sql.SQL(", ").join(sql.Identifier(c) for c in pk)
        q = sql.SQL("SELECT t::text FROM {} t WHERE " + where + " ORDER BY {}").format(
            sql.Identifier(table), order
        )
        rows = conn.execute(q, params).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest() + f":{len(rows)}"


def marker_rows(dsn: str, marker: str) -> dict[str, int]:
    """Rows anywhere in the LangGraph tables whose raw content contains ``marker``."""
    out = {}
    with connect(dsn) as conn:
        for table, col in (("checkpoints", "checkpoint::text || metadata::text"),
                           ("checkpoint_blobs", "encode(coalesce(blob, ''), 'escape')"),
                           ("checkpoint_writes", "encode(blob, 'escape')"),
                           ("store", "value::text")):  # fmt: skip
            row = conn.execute(
                f"SELECT count(*) FROM {table} WHERE strpos({col}, %s) > 0", (marker,)
            ).fetchone()
            assert row is not None
            out[table] = int(row[0])
    return out


def all_raw_text(dsn: str) -> str:
    """Every row of the three checkpoint tables as text, and every blob's bytes (Latin-1),
    read through a separate connection: where a plaintext value would show."""
    with connect(dsn) as c:
        out = []
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            out += [str(r[0]) for r in c.execute(f"SELECT t::text FROM {table} t").fetchall()]
        out += [
            bytes(r[0]).decode("latin-1")
            for r in c.execute(
                "SELECT blob FROM checkpoint_blobs WHERE blob IS NOT NULL "
                "UNION ALL SELECT blob FROM checkpoint_writes"
            ).fetchall()
        ]
    return "\n".join(out)
