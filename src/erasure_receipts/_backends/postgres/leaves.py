"""PostgreSQL: how each column is read for its leaf - an explicit cast per type, so the
hashed value does not depend on client settings (``DateStyle``, ``TimeZone``,
binary/text protocol); see RECEIPT_SPEC.md, "PostgreSQL leaves" - and a table's shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .session import Session

__all__ = ["LEAF_EXPRESSIONS", "describe", "describe_all", "leaf_expression", "wire_expression"]

_TEXT_TYPES = {"text", "varchar", "bpchar", "name", "char"}
_INT_TYPES = {"int2", "int4", "int8"}
_NUMERIC_WIRE = {"bool", "float4", "float8"}
_TS_FORMAT = "'YYYY-MM-DD\"T\"HH24:MI:SS.US'"


def leaf_expression(column: str, typname: str) -> str:
    """The SQL expression whose value is hashed for a column of type ``typname``.

    text-like: the stored text; ``bytea``: the raw bytes; ``int2/4/8``: the integer;
    ``bool``: 0/1; ``float4/8``: float8; ``json``/``jsonb``: ``::text`` as the server
    prints it (jsonb's normalised form: keys ordered, ``", "`` and ``": "``);
    ``timestamptz``: UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (always 6 fractional digits);
    ``timestamp``: the same without ``Z``; anything else (``numeric``, ``vector``,
    ``uuid``, ...): ``::text``. NULL is NULL.
    """
    q = '"' + column.replace('"', '""') + '"'
    if typname in _TEXT_TYPES or typname == "bytea" or typname in _INT_TYPES:
        return q
    if typname == "bool":
        return f"{q}::int4"
    if typname in ("float4", "float8"):
        return f"{q}::float8"
    if typname == "timestamptz":
        return f"to_char({q} AT TIME ZONE 'UTC', {_TS_FORMAT[:-1]}\"Z\"')"
    if typname == "timestamp":
        return f"to_char({q}, {_TS_FORMAT})"
    return f"{q}::text"


def wire_expression(column: str, typname: str) -> tuple[str, bool]:
    """What the library actually selects: ``leaf_expression``, with text values sent as
    their UTF-8 bytes (``convert_to(..., 'UTF8')``) so they are hashed without being
    decoded and re-encoded; the flag says the value is TEXT (``VAL`` tag ``t``)."""
    expr = leaf_expression(column, typname)
    if typname == "bytea" or typname in _INT_TYPES or typname in _NUMERIC_WIRE:
        return expr, False
    return f"convert_to({expr}, 'UTF8')", True


LEAF_EXPRESSIONS = {
    t: leaf_expression("c", t)
    for t in ("text", "bytea", "int4", "bool", "float8", "jsonb", "timestamptz", "numeric")
}
"""For documentation and tests: the expression used per type (column named ``c``)."""


@dataclass
class _Table:
    columns: list[str]
    types: list[str]
    pk: list[str]
    collatable: set[str]


def describe(session: Session, table: str) -> _Table | None:
    """Columns (in ``attnum`` order), their types and the primary key; None if absent.

    ``collatable`` lists the columns whose order is not already code-point order: they
    are sorted with ``COLLATE "C"``. A column whose collation is ``C``/``POSIX`` (or the
    default of a libc ``C`` database) needs none, so its primary-key index gives the
    order without a sort.
    """
    return describe_all(session, [table])[table]


def describe_all(session: Session, tables: Sequence[str]) -> dict[str, _Table | None]:
    """:func:`describe` of several tables in one statement."""
    rows = session.query(
        "SELECT n.name, a.attname, t.typname, "
        "       a.attcollation <> 0 AND NOT coalesce(co.collname IN ('C', 'POSIX') OR "
        "         (co.collname = 'default' AND (SELECT d.datcollate IN ('C', 'POSIX') "
        "            AND coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c' "
        "          FROM pg_database d WHERE d.datname = current_database())), false), "
        "       array_position(i.indkey::int2[], a.attnum) "
        "FROM unnest(%s::text[]) AS n(name) "
        "JOIN pg_attribute a ON a.attrelid = to_regclass(n.name) "
        "JOIN pg_type t ON t.oid = a.atttypid "
        "LEFT JOIN pg_collation co ON co.oid = a.attcollation "
        "LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
        "WHERE a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY n.name, a.attnum",
        (list(tables),),
    )
    found: dict[str, list[Any]] = {}
    for r in rows:
        found.setdefault(str(r[0]), []).append(r[1:])
    out: dict[str, _Table | None] = dict.fromkeys(tables)
    for name, cols in found.items():
        pk = [r[0] for r in sorted((r for r in cols if r[3] is not None), key=lambda r: r[3])]
        out[name] = _Table(
            columns=[r[0] for r in cols],
            types=[r[1] for r in cols],
            pk=pk,
            collatable={r[0] for r in cols if r[2]},
        )
    return out
