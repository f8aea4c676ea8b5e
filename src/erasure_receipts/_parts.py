"""What a backend hands the engine: *parts* (one per stored table, or per store
swept through its API) and their counts. Below both, so backends never import the
engine (dependencies point one way: engine -> backends -> here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["LeafSink", "Part", "Rewritable", "TableCount", "iter_pages"]


LeafSink = Callable[[bytes], Any]
"""Receives each row's leaf *hash* (32 bytes), in order."""


@dataclass
class TableCount:
    """Rows and stored bytes of one table in a measurement (a receipt's ``tables`` entry)."""

    rows: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        """The receipt's ``{"rows": ..., "bytes": ...}`` form (also what the journal keeps)."""
        return {"rows": self.rows, "bytes": self.bytes}


class Part(Protocol):
    """One table (or swept store) of the thread's data, as seen by the engine."""

    table: str
    """Leaf table name; parts are processed in sorted table order."""
    group: str
    """What the part belongs to in the receipt's ``methods`` ("checkpoints", "store")."""
    method: str
    """How it is deleted: "atomic-transaction" or "sweep"."""
    irreversible_deleted: int
    """Items deleted outside the transaction so far (sweeps): survive a rollback."""
    unit: str
    """The receipt unit the rows belong to (``thread:<id>``, ``store``; "" = one tree)."""
    role: str
    """``removed`` (erased and measured) or ``kept`` (only measured: history's kept rows)."""

    def measure(self, sink: LeafSink) -> TableCount:
        """Feed every row's leaf hash to ``sink`` in primary-key order; do not delete."""
        ...

    def erase(self, sink: LeafSink) -> TableCount:
        """Measure like ``measure`` and delete (now, or in ``finish``) what was measured."""
        ...

    def finish(self) -> None:
        """Complete a deferred delete. Called for every part after all were measured, in
        reverse table order, so e.g. a cascade from ``store`` to ``store_vectors``
        cannot remove rows before they were measured."""
        ...

    def remaining(self) -> int:
        """Rows of the scope still present (inside the transaction)."""
        ...

    def leaves(self) -> Iterator[bytes]:
        """Legal hold: the leaf data, in the order ``measure`` hashes them."""
        ...


class Rewritable(Protocol):
    """A table part whose rows a redaction reads and rewrites in place (same keys)."""

    table: str
    group: str
    method: str

    def key_columns(self) -> list[str]:
        """The table's primary-key columns (a rewrite never changes them)."""
        ...

    def records(self) -> Iterator[dict[str, Any]]:
        """Every row of the scope as ``{column: value}``, in the order ``measure`` hashes
        them (primary-key order); values as the driver returns them, JSON columns as
        their text."""
        ...

    def only(self, keys: list[dict[str, Any]]) -> Part:
        """The same table part restricted to the rows with these primary keys."""
        ...

    def rewrite(self, key: dict[str, Any], values: dict[str, Any]) -> None:
        """Inside the transaction: set ``values`` on the one row whose primary key is
        ``key`` (JSON columns given as text); raises ``RuntimeError`` unless one row."""
        ...


def iter_pages(fetch: Callable[[int], list[Any]], page: int) -> Iterator[Any]:
    """Yield every item of an offset-paginated API; never trusts a default page size."""
    offset = 0
    while True:
        items = fetch(offset)
        yield from items
        if len(items) < page:
            return
        offset += len(items)
