"""The public-API read-back after an erasure: LangGraph's own ``get_tuple``, ``list``
and the store's ``search`` must agree with the raw tables.

One rule per kind of scope: a thread (or subject) erasure must read back nothing; a
history erasure keeps the thread, so ``list`` must return no removed checkpoint and
``get_tuple`` a kept (or newer) one in every kept namespace. Each check is
``(name, items_found, detail)``; any non-zero count refuses the receipt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .._backends.keep_latest import KeepLatest
from .._backends.store import PAGE_SIZE, acount_items, count_items
from .seams import Reader
from .types import ErasureRequest

__all__ = ["API_CHECK", "ApiCheck", "AsyncSaverReader", "SaverReader", "api_checks"]

ApiCheck = tuple[str, int, str]

API_CHECK: ContextVar[bool] = ContextVar("erasure_receipts_api_check", default=False)
"""Set while the saver checks its own erasure through the public API: the erased thread
must then be *read* (and found empty), not refused by ``refuse_erased_reads``."""


def api_checks(reader: Reader, request: ErasureRequest, namespaces: set[str]) -> list[ApiCheck]:
    """The read-back of ``request`` through ``reader`` (``namespaces``: the checkpoint
    namespaces the erasure saw), with ``API_CHECK`` set."""
    token = API_CHECK.set(True)
    try:
        if request.kind == "history":
            return _history(reader, request)
        if request.kind == "namespace":  # no thread: the store's search alone
            found = reader.count_store(request.store_namespaces)
            detail = f"store.search paginated with limit={PAGE_SIZE} under the namespace"
            return [("api_store_search_empty", found, detail)]
        return _nothing_left(reader, request, namespaces)
    finally:
        API_CHECK.reset(token)


def _config(thread_id: str, ns: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        c["checkpoint_ns"] = ns
    return {"configurable": c}


def _nothing_left(reader: Reader, request: ErasureRequest, namespaces: set[str]) -> list[ApiCheck]:
    found = listed = 0
    for tid in request.all_threads:
        for ns in namespaces | {""}:
            if reader.get_tuple(_config(tid, ns)):
                found += 1
        listed += sum(1 for _ in reader.list(_config(tid)))
    checks = [
        ("api_get_tuple_none", found,
         f"get_tuple checked for {len(namespaces | {''})} checkpoint namespace(s)"),
        ("api_list_empty", listed, "list() over all namespaces returned nothing"),
    ]  # fmt: skip
    if request.store_namespaces:
        checks.append(
            ("api_store_search_empty", reader.count_store(request.store_namespaces),
             f"store.search paginated with limit={PAGE_SIZE} under every namespace")
        )  # fmt: skip
    return checks


def _history(reader: Reader, request: ErasureRequest) -> list[ApiCheck]:
    rule = KeepLatest.of(request.kept)
    removed = listed = 0
    for t in reader.list(_config(request.thread_id)):
        c = t.config["configurable"]
        listed += 1
        key = (str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"]))
        removed += rule.removes(*key, request.removed)
    missing = 0
    for ns in rule.by_ns:
        got = reader.get_tuple(_config(request.thread_id, ns))
        cid = None if got is None else str(got.config["configurable"]["checkpoint_id"])
        missing += cid is None or rule.removes(ns, cid, request.removed)
    checks = [
        ("api_list_no_removed", removed,
         f"list() over all namespaces returned {listed} checkpoint(s), none removed"),
        ("api_get_tuple_kept", missing,
         f"get_tuple loads a kept (or newer) checkpoint in each of {len(rule.by_ns)} "
         "kept namespace(s)"),
    ]  # fmt: skip
    if request.store_namespaces:
        checks.append(("api_store_search_empty", reader.count_store(request.store_namespaces),
                       "store.search paginated under every namespace"))  # fmt: skip
    return checks


class SaverReader:
    """The reader seam over a sync saver: its own ``get_tuple``/``list``, and the
    store's paginated ``search``."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def get_tuple(self, config: Any) -> Any:
        """The saver's ``get_tuple``."""
        return self.saver.get_tuple(config)

    def list(self, config: Any) -> Iterable[Any]:
        """The saver's ``list``."""
        return self.saver.list(config)  # type: ignore[no-any-return]

    def count_store(self, namespaces: Sequence[tuple[str, ...]]) -> int:
        """Items under ``namespaces``, paged through ``search``."""
        assert self.saver._eraser.store is not None
        return count_items(self.saver._eraser.store, namespaces)

    @contextmanager
    def detached(self) -> Iterator[Reader | None]:
        """The saver's ``_readback_saver()`` (a copy on a connection of its own), if it
        has one."""
        opener = getattr(self.saver, "_readback_saver", None)
        if opener is None:
            yield None
            return
        with opener() as saver:
            yield None if saver is None else SaverReader(saver)


class AsyncSaverReader:
    """The reader seam over an async saver: ``aget_tuple``, ``alist`` and ``asearch``
    on its event loop (``API_CHECK`` set in each coroutine's own task)."""

    def __init__(self, saver: Any, on_loop: Callable[[Awaitable[Any]], Any]) -> None:
        self.saver = saver
        self._on_loop = on_loop

    def get_tuple(self, config: Any) -> Any:
        """The saver's ``aget_tuple``, on its loop."""

        async def get() -> Any:
            API_CHECK.set(True)
            return await self.saver.aget_tuple(config)

        return self._on_loop(get())

    def list(self, config: Any) -> Iterable[Any]:
        """The saver's ``alist``, on its loop (collected)."""

        async def items() -> list[Any]:
            API_CHECK.set(True)
            return [t async for t in self.saver.alist(config)]

        return self._on_loop(items())  # type: ignore[no-any-return]

    def count_store(self, namespaces: Sequence[tuple[str, ...]]) -> int:
        """Items under ``namespaces``, paged through ``asearch`` on the loop."""
        store = self.saver._eraser.store
        assert store is not None

        async def count() -> int:
            API_CHECK.set(True)
            return await acount_items(store, namespaces)

        return int(self._on_loop(count()))

    @contextmanager
    def detached(self) -> Iterator[Reader | None]:
        """The saver's ``_areadback_saver()`` (a copy on a connection of its own,
        entered and left on the loop), if it has one."""
        opener = getattr(self.saver, "_areadback_saver", None)
        if opener is None:
            yield None
            return
        scope = opener()
        saver = self._on_loop(scope.__aenter__())
        try:
            yield None if saver is None else AsyncSaverReader(saver, self._on_loop)
        finally:
            self._on_loop(scope.__aexit__(None, None, None))
