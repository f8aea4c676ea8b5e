"""Writes that arrived before their checkpoint, held until it is saved.

Under ``new_conversations`` the tombstone triggers accept a write for a tombstoned thread
only once its checkpoint row exists (so a run begun before the erasure, whose checkpoint
was refused, cannot leave writes behind). LangGraph saves checkpoints and writes in the
background (``durability="async"``) and a task's writes often reach the saver before
the checkpoint they belong to. The attesting savers therefore hold such a write in
memory and save it right after its checkpoint lands; if the checkpoint is refused, the
held writes are dropped (they belong to the erased conversation).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig

from .errors import ThreadErasedError

T = TypeVar("T")

Key = tuple[str, str, str]
Held = tuple[RunnableConfig, Any, str, str]
LIMIT = 4096
"""Checkpoints remembered as saved or refused, and checkpoints with writes held."""


def key_of(config: RunnableConfig, checkpoint_id: str | None = None) -> Key:
    conf = config["configurable"]
    cid = checkpoint_id if checkpoint_id is not None else conf["checkpoint_id"]
    return (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), str(cid))


def may_follow(checkpoint_id: str, bound: str | None) -> bool:
    """Whether a checkpoint of this id could still be accepted by a ``new_conversations``
    tombstone of bound ``bound`` (None: no such tombstone, nothing to wait for)."""
    return (
        bound is not None
        and checkpoint_id > bound
        and len(checkpoint_id) == 36
        and checkpoint_id[14] == "6"
    )


class HeldWrites:
    """Per saver: writes waiting for their checkpoint, and what became of recent ones.

    The lock guards memory only (never held across a database call), so the sync and
    the async savers share this class.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: OrderedDict[Key, list[Held]] = OrderedDict()
        self._done: OrderedDict[Key, bool] = OrderedDict()  # True saved, False refused

    def hold(self, key: Key, item: Held) -> bool | None:
        """Hold ``item`` until ``key``'s checkpoint is saved: True if held, False if it was
        saved meanwhile (write again now), None if it was refused (refuse the write)."""
        with self._lock:
            if key in self._done:
                return False if self._done[key] else None
            self._held.setdefault(key, []).append(item)
            while len(self._held) > LIMIT:  # checkpoints that never came
                self._held.popitem(last=False)
            return True

    def settle(self, key: Key, saved: bool) -> list[Held]:
        """Record the outcome of ``key``'s checkpoint; returns the writes to save now."""
        with self._lock:
            self._done[key] = saved
            self._done.move_to_end(key)
            while len(self._done) > LIMIT:
                self._done.popitem(last=False)
            held = self._held.pop(key, [])
        return held if saved else []

    def refused(self, item: Held, bound: str | None) -> bool | None:
        """A write of ``item`` the trigger refused, under a tombstone of bound ``bound``:
        True if held for its checkpoint, False if that checkpoint was saved meanwhile
        (write again now), None if the refusal stands (re-raise)."""
        key = key_of(item[0])
        if not may_follow(key[2], bound):
            return None
        return self.hold(key, item)

    # -- a saver's put and put_writes around its parent's (once for all four savers) --

    def put(self, key: Key, save: Callable[[], T], write: Callable[[Held], None]) -> T:
        """``save()`` a checkpoint (the parent's ``put``, tombstone errors made
        ``ThreadErasedError``), then ``write`` the writes held for it; refused, drop them."""
        try:
            out = save()
        except ThreadErasedError:
            self.settle(key, saved=False)
            raise
        for item in self.settle(key, saved=True):
            write(item)
        return out

    def put_writes(
        self, item: Held, write: Callable[[], None], bound: Callable[[], str | None]
    ) -> None:
        """``write()`` (the parent's ``put_writes``); a refusal under a ``new_conversations``
        tombstone of bound ``bound()`` holds the write for its checkpoint, or writes again
        if that checkpoint was saved meanwhile."""
        try:
            write()
            return
        except ThreadErasedError:
            held = self.refused(item, bound())
            if held is None:
                raise
        if not held:
            write()

    async def aput(
        self, key: Key, save: Callable[[], Awaitable[T]], write: Callable[[Held], Awaitable[Any]]
    ) -> T:
        """Async :meth:`put`."""
        try:
            out = await save()
        except ThreadErasedError:
            self.settle(key, saved=False)
            raise
        for item in self.settle(key, saved=True):
            await write(item)
        return out

    async def aput_writes(
        self,
        item: Held,
        write: Callable[[], Awaitable[None]],
        bound: Callable[[], Awaitable[str | None]],
    ) -> None:
        """Async :meth:`put_writes`."""
        try:
            await write()
            return
        except ThreadErasedError:
            held = self.refused(item, await bound())
            if held is None:
                raise
        if not held:
            await write()
