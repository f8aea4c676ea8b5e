"""Store items through the public ``BaseStore`` API: the sweep for non-SQL stores.

Used when the store's rows cannot be reached inside the checkpoint transaction (an
``InMemoryStore``, a store in another database file, any custom ``BaseStore``). The
sweep pages through ``search`` with an explicit limit - never the default of 10 - and
keeps deleting the first page until the namespace is verifiably empty, so items added
while it runs are swept (and hashed) too. Deletions here cannot be rolled back; the
receipt records the method as "sweep" and its leaves as API-level JSON.

``search`` is not always the whole namespace: a LangGraph ``PostgresStore`` (sync or
async) with ``ttl={"omit_expired": True}`` hides expired rows that its TTL sweeper has
not yet purged. For such a store the hidden rows are read by SQL on the store's own
connection (:func:`hidden_items`) and measured, deleted and re-checked with the rest,
so a namespace is never attested from a partial view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import BaseStore, Item

from .._parts import LeafSink, TableCount, iter_pages
from ..digest import leaf_hash, store_item_leaf

__all__ = [
    "PAGE_SIZE",
    "StoreSweepPart",
    "acount_items",
    "count_items",
    "hidden_items",
    "hides_expired",
    "item_leaf",
]

PAGE_SIZE = 100


def item_leaf(item: Item) -> tuple[tuple[str, str], bytes, int]:
    """Sort key, leaf hash and byte size for one store item seen through the API.

    The leaf is specified in RECEIPT_SPEC.md section 4 ("Swept store items"): value as
    RFC 8785 JSON, timestamps as UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.
    """
    key, data, size = item_leaf_data(item)
    return key, leaf_hash(data), size


def item_leaf_data(item: Item) -> tuple[tuple[str, str], bytes, int]:
    """Sort key, leaf *data* and byte size of one store item (legal-hold export)."""
    return store_item_leaf(item.namespace, item.key, item.value, item.created_at, item.updated_at)


def _search(store: BaseStore, ns: tuple[str, ...], offset: int) -> list[Any]:
    return list(store.search(ns, limit=PAGE_SIZE, offset=offset, refresh_ttl=False))


def count_items(store: BaseStore, namespaces: Iterable[tuple[str, ...]]) -> int:
    """Items under the prefixes, counted by paging through the whole result set."""
    total = 0
    for ns in namespaces:
        for _ in _all_items(store, ns):
            total += 1
    return total


async def acount_items(store: BaseStore, namespaces: Iterable[tuple[str, ...]]) -> int:
    """Async :func:`count_items` (``asearch``, same explicit page size).

    A sync-only store (``SqliteStore`` raises ``NotImplementedError`` from its async API)
    is counted through its sync API on a worker thread instead.
    """
    namespaces = list(namespaces)
    if _sync_only(store):
        return await asyncio.to_thread(count_items, store, namespaces)
    total = 0
    for ns in namespaces:
        offset = 0
        while True:
            page = await store.asearch(ns, limit=PAGE_SIZE, offset=offset, refresh_ttl=False)
            total += len(page)
            if len(page) < PAGE_SIZE:
                break
            offset += len(page)
    return total


def _sync_only(store: BaseStore) -> bool:
    from langgraph.store.sqlite import SqliteStore
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    return isinstance(store, SqliteStore) and not isinstance(store, AsyncSqliteStore)


def _all_items(store: BaseStore, ns: tuple[str, ...]) -> Iterator[Any]:
    def fetch(offset: int) -> list[Any]:
        return _search(store, ns, offset)

    return iter_pages(fetch, PAGE_SIZE)


def hides_expired(store: BaseStore) -> bool:
    """Whether ``search`` of ``store`` leaves out stored rows: a LangGraph
    ``PostgresStore``/``AsyncPostgresStore`` whose ``ttl`` config sets ``omit_expired``
    (its reads filter ``expires_at <= NOW()`` until the TTL sweeper deletes the rows)."""
    from langgraph.store.postgres import PostgresStore
    from langgraph.store.postgres.aio import AsyncPostgresStore

    if not isinstance(store, PostgresStore | AsyncPostgresStore):
        return False
    return bool((store.ttl_config or {}).get("omit_expired"))


_HIDDEN_SQL = (
    "SELECT prefix, key, value, created_at, updated_at FROM store "
    "WHERE (prefix = %s OR prefix LIKE %s ESCAPE '\\') "
    "AND expires_at IS NOT NULL AND expires_at <= NOW() ORDER BY prefix, key"
)
"""The complement of ``PostgresStore``'s ``omit_expired`` filter under one prefix, with
its own namespace condition (the prefix itself or below it, metacharacters escaped)."""


def hidden_items(store: BaseStore, ns: tuple[str, ...]) -> list[Item]:
    """Items under ``ns`` that ``search`` does not return (see :func:`hides_expired`),
    read by SQL on the store's own connection and converted as the store converts its
    rows; ``[]`` for any other store. An async store is queried on its event loop: call
    this from a worker thread, as its synchronous API requires."""
    if not hides_expired(store):
        return []
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from langgraph.store.postgres.base import _decode_ns_bytes, _row_to_item

    text = ".".join(ns)
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    params = (text, escaped + ".%")
    pg: Any = store
    if isinstance(store, AsyncPostgresStore):

        async def fetch() -> list[Any]:
            async with pg._cursor() as cur:
                await cur.execute(_HIDDEN_SQL, params)
                return list(await cur.fetchall())

        try:
            on_loop = asyncio.get_running_loop() is store.loop
        except RuntimeError:  # no event loop in this thread
            on_loop = False
        if on_loop:  # it would wait for itself
            raise RuntimeError("an AsyncPostgresStore must be read from a worker thread here")
        rows = asyncio.run_coroutine_threadsafe(fetch(), store.loop).result()
    else:
        with pg._cursor() as cur:
            cur.execute(_HIDDEN_SQL, params)
            rows = list(cur.fetchall())
    loader = getattr(store, "_deserializer", None)
    return [_row_to_item(_decode_ns_bytes(r["prefix"]), r, loader=loader) for r in rows]


def _every_item(store: BaseStore, ns: tuple[str, ...]) -> Iterator[Any]:
    """What ``search`` returns under ``ns``, then the rows it hides (may overlap)."""
    yield from _all_items(store, ns)
    yield from hidden_items(store, ns)


@dataclass
class StoreSweepPart:
    """Store items under namespace prefixes, measured and deleted through the
    ``BaseStore`` API (method "sweep": its deletions are not undone by a rollback)."""

    store: BaseStore
    namespaces: Sequence[tuple[str, ...]]
    table: str = "store"
    group: str = "store"
    method: str = "sweep"
    unit: str = ""
    """``store`` in a subject receipt (its own unit), else ""."""
    role: str = "removed"
    irreversible_deleted: int = 0
    hidden_deleted: int = 0
    """Of those, rows ``search`` did not show (expired, see :func:`hidden_items`)."""
    max_rounds: int = 100_000
    _seen: dict[tuple[str, str], tuple[bytes, int]] = field(default_factory=dict)

    def _emit(self, sink: LeafSink) -> TableCount:
        # Leaves must be in primary-key order like every other table; the API returns
        # its own order, so sort what was collected (keys and 32-byte leaf hashes only).
        count = TableCount()
        for key in sorted(self._seen):
            leaf, size = self._seen[key]
            sink(leaf)
            count.rows += 1
            count.bytes += size
        self._seen.clear()
        return count

    def measure(self, sink: LeafSink) -> TableCount:
        """Hash every item under the prefixes in ``(prefix, key)`` order; deletes nothing."""
        self._seen.clear()  # a measure after a failed erase must not count stale items
        for ns in self.namespaces:
            for item in _every_item(self.store, ns):
                key, leaf, size = item_leaf(item)
                self._seen[key] = (leaf, size)
        return self._emit(sink)

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of every item, in the order ``measure`` hashes them (legal hold)."""
        found: dict[tuple[str, str], bytes] = {}
        for ns in self.namespaces:
            for item in _every_item(self.store, ns):
                key, data, _ = item_leaf_data(item)
                found[key] = data
        for key in sorted(found):
            yield found[key]

    def erase(self, sink: LeafSink) -> TableCount:
        """Delete the first page until ``search`` returns nothing, then the rows it hides
        (:func:`hidden_items`), hashing every item deleted (items added meanwhile too);
        raises if deletes do not take effect or the sweep does not converge within
        ``max_rounds`` pages per namespace."""
        self._seen.clear()
        for ns in self.namespaces:
            for _ in range(self.max_rounds):
                page = _search(self.store, ns, 0)
                if not page:
                    # ``delete`` removes a hidden row too (it does not filter on expiry).
                    page = hidden_items(self.store, ns)
                    self.hidden_deleted += len(page)
                if not page:
                    break
                fresh = 0
                for item in page:
                    key, leaf, size = item_leaf(item)
                    if key not in self._seen:
                        fresh += 1
                    self._seen[key] = (leaf, size)
                    self.store.delete(item.namespace, item.key)
                    self.irreversible_deleted += 1
                if not fresh:
                    raise RuntimeError(
                        f"store keeps returning deleted items under {'/'.join(ns)}; "
                        "its delete does not take effect"
                    )
            else:
                raise RuntimeError(f"store sweep of {'/'.join(ns)} did not converge")
        return self._emit(sink)

    def finish(self) -> None:
        """Nothing deferred: the sweep deletes as it goes."""

    def remaining(self) -> int:
        """Items ``search`` still returns under the prefixes (paged to the end), plus the
        rows it hides (:func:`hidden_items`)."""
        hidden = sum(len(hidden_items(self.store, ns)) for ns in self.namespaces)
        return count_items(self.store, self.namespaces) + hidden
