"""What the savers' ``Database`` seams share: where a request's store items are erased
(rows of the saver's database, or swept through the store's API), and how an async
saver's flow, on a worker thread, reaches the event loop that owns its connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .._backends.store import StoreSweepPart
from .._engine.types import ErasureRequest
from .._parts import Part

__all__ = ["LoopBridge", "store_parts"]

T = TypeVar("T")


def store_parts(
    store: Any, store_rows: bool | None, request: ErasureRequest
) -> tuple[Sequence[tuple[str, ...]], list[Part]]:
    """``(namespaces erased as rows of the saver's database, swept parts)`` of
    ``request``: its store namespaces are rows of the database when the store lives
    there (``store_rows``), else one part swept through the store's API."""
    if not request.store_namespaces:
        return (), []
    assert store is not None
    if store_rows:
        return request.store_namespaces, []
    unit = "store" if request.kind == "subject" else ""
    return (), [StoreSweepPart(store, request.store_namespaces, unit=unit)]


class LoopBridge:
    """An async saver's seam: a flow runs on a worker thread (``flow``) and each of its
    database calls goes back to the event loop (``on_loop``); the sync lifecycle calls
    run the async ones there."""

    loop: asyncio.AbstractEventLoop | None = None

    def on_loop(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the saver's event loop from the flow's worker thread."""
        assert self.loop is not None, "async flows run through flow()"
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    async def flow(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a synchronous flow on a worker thread of this event loop."""
        self.loop = asyncio.get_running_loop()
        return await asyncio.to_thread(fn, *args)

    async def aprepare(self) -> None:
        """Async ``prepare``."""
        raise NotImplementedError

    async def aensure_journal(self) -> None:
        """Async ``ensure_journal``."""
        raise NotImplementedError

    async def aresolve_store(self) -> None:
        """Async ``resolve_store``."""
        raise NotImplementedError

    def prepare(self) -> None:
        """``aprepare`` on the loop."""
        self.on_loop(self.aprepare())

    def ensure_journal(self) -> None:
        """``aensure_journal`` on the loop."""
        self.on_loop(self.aensure_journal())

    def resolve_store(self) -> None:
        """``aresolve_store`` on the loop."""
        self.on_loop(self.aresolve_store())
