"""Compaction that compacts (``erase_compacted=``): when a step removes messages from a
messages channel (``RemoveMessage``, ``REMOVE_ALL_MESSAGES``: a summarizer such as
LangChain's ``SummarizationMiddleware``, a sliding window), the saver notes it as the
step's writes are saved; once the checkpoint that applies them is saved, the history
that held the removed messages is dealt with by the chosen policy, with a receipt:

* ``"erase_history"`` (``True``): ``erase_history`` - every checkpoint except the latest
  of each namespace, with the writes and blobs only they reference (kind ``history``);
  time travel to before the compaction is gone.
* ``"redact"``: ``redact`` of the removed messages' texts from every row of the thread
  (kind ``redaction``); every checkpoint stays, with the texts replaced.

It runs inside the saver's ``put`` of that checkpoint, after the checkpoint is saved
(so never on it, and never on the pending writes of a later step: they belong to the
kept checkpoint). A failure is logged and retried at the thread's next ``put``; it is
never raised into the graph.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError, NothingToEraseError
from .redact import MIN_NEEDLE_CHARS

__all__ = [
    "POLICIES",
    "Compactions",
    "ahandle",
    "handle",
    "policy_of",
    "removed_texts",
    "removes_messages",
]

log = logging.getLogger("erasure_receipts")

POLICIES = ("erase_history", "redact")


def policy_of(value: Any) -> str | None:
    """``erase_compacted=``: False/None (off), True or ``"erase_history"``, ``"redact"``."""
    if value is None or value is False:
        return None
    if value is True:
        return "erase_history"
    if isinstance(value, str) and value in POLICIES:
        return value
    raise ConfigurationError(
        f'erase_compacted must be True, False, "erase_history" or "redact", not {value!r}'
    )


def _is_remove(v: Any) -> bool:
    from langchain_core.messages import RemoveMessage

    return isinstance(v, RemoveMessage)


def removes_messages(writes: Sequence[tuple[str, Any]]) -> bool:
    """Whether a step's writes remove messages (a ``RemoveMessage`` in any channel)."""
    for _, value in writes:
        if _is_remove(value):
            return True
        if isinstance(value, list | tuple) and any(_is_remove(v) for v in value):
            return True
    return False


def _texts(message: Any) -> Iterable[str]:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                yield part
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


def removed_texts(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The texts of the messages in ``before``'s channel values that ``after`` no longer
    has (by message id), at least ``MIN_NEEDLE_CHARS`` long, longest first."""
    out: set[str] = set()
    for channel, old in before.items():
        if not isinstance(old, list) or not old or not hasattr(old[0], "content"):
            continue
        new = after.get(channel)
        kept = {getattr(m, "id", None) for m in new} if isinstance(new, list) else set()
        for m in old:
            if getattr(m, "id", None) not in kept:
                out.update(t.strip() for t in _texts(m) if len(t.strip()) >= MIN_NEEDLE_CHARS)
    return sorted(out, key=lambda t: (-len(t), t))


@dataclass
class _Pending:
    after: str
    """The checkpoint the removing step ran on: a ``put`` whose parent is this one (or
    newer) saves the checkpoint that applied the removal."""
    needles: list[str] = field(default_factory=list)
    attempts: int = 0
    running: bool = False
    """Claimed by one ``put`` (or late ``put_writes``): never handled twice at once."""


@dataclass
class Compactions:
    """The threads whose last step removed messages, until their history is handled."""

    policy: str | None = None
    max_attempts: int = 5
    _pending: dict[tuple[str, str], _Pending] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, config: Any, writes: Sequence[tuple[str, Any]]) -> bool:
        """From ``put_writes``: remember the thread if these writes remove messages
        (returns whether they do)."""
        if self.policy is None or not removes_messages(writes):
            return False
        key = _key(config)
        after = str(config["configurable"].get("checkpoint_id") or "")
        with self._lock:
            item = self._pending.get(key)
            if item is None:
                self._pending[key] = _Pending(after)
            elif after > item.after:
                item.after = after
        return True

    def due(self, config: Any) -> tuple[tuple[str, str], _Pending] | None:
        """From ``put``, after the checkpoint is saved: the thread's pending compaction,
        if this checkpoint applied it (its parent is the removing step's checkpoint or
        newer: with asynchronous durability the step's writes can be saved while the
        checkpoint it ran on still is)."""
        if self.policy is None or not self._pending:
            return None
        key = _key(config)
        parent = str(config["configurable"].get("checkpoint_id") or "")
        with self._lock:
            item = self._pending.get(key)
            if item is None or item.running or parent < item.after:
                return None
            item.running = True
        return key, item

    def due_key(self, config: Any) -> _Pending | None:
        """The pending, unclaimed compaction of this config's thread and namespace."""
        if self.policy is None or not self._pending:
            return None
        with self._lock:
            item = self._pending.get(_key(config))
        return None if item is None or item.running else item

    def done(self, thread: str, item: _Pending | None = None) -> None:
        """Handled: forget ``item`` (a compaction noted meanwhile stays pending)."""
        with self._lock:
            for key in [k for k, v in self._pending.items() if k[0] == thread]:
                if item is None or self._pending[key] is item:
                    del self._pending[key]

    def failed(self, thread: str, item: _Pending, exc: BaseException) -> None:
        """Logged, and kept for the thread's next ``put`` (up to ``max_attempts``)."""
        item.attempts += 1
        item.running = False
        if item.attempts >= self.max_attempts:
            log.error("erase_compacted: giving up on thread %r after %d attempts: %s",
                      thread, item.attempts, exc)  # fmt: skip
            self.done(thread, item)
            return
        log.warning("erase_compacted: thread %r not handled yet (attempt %d, retried at its "
                    "next checkpoint): %s", thread, item.attempts, exc)  # fmt: skip


def _key(config: Any) -> tuple[str, str]:
    c = config["configurable"]
    return str(c["thread_id"]), str(c.get("checkpoint_ns") or "")


def _before(config: Any, thread: str, ns: str, item: _Pending) -> Any:
    if not item.after:
        return config
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": item.after}}


def _latest(config: Any) -> Any:
    c = config["configurable"]
    ns = c.get("checkpoint_ns", "")
    return {"configurable": {"thread_id": c["thread_id"], "checkpoint_ns": ns}}


def handle_late(saver: Any, compactions: Compactions, config: Any) -> Any:
    """From ``put_writes``: with asynchronous durability a step's writes can be saved
    after the checkpoint that applied them; then that checkpoint is already the latest
    and no later ``put`` of this run may come: handle the compaction now."""
    item = compactions.due_key(config)
    if item is None:
        return None
    latest = saver.get_tuple(_latest(config))
    if latest is None or latest.checkpoint["id"] <= item.after:
        return None  # the checkpoint applying the removal is not saved yet: its put will
    return handle(saver, compactions, latest.config, latest.checkpoint)


async def ahandle_late(saver: Any, compactions: Compactions, config: Any) -> Any:
    """Async :func:`handle_late`."""
    item = compactions.due_key(config)
    if item is None:
        return None
    latest = await saver.aget_tuple(_latest(config))
    if latest is None or latest.checkpoint["id"] <= item.after:
        return None
    return await ahandle(saver, compactions, latest.config, latest.checkpoint)


def handle(saver: Any, compactions: Compactions, config: Any, checkpoint: Any) -> Any:
    """Sync ``put`` hook: the pending compaction of the thread, by the policy; returns the
    receipt or None (never raises)."""
    due = compactions.due(config)
    if due is None:
        return None
    (thread, ns), item = due
    try:
        if compactions.policy == "redact":
            if not item.needles:  # the state the removing step ran on, and this one
                parent = saver.get_tuple(_before(config, thread, ns, item))
                before = parent.checkpoint["channel_values"] if parent is not None else {}
                item.needles = removed_texts(before, checkpoint.get("channel_values", {}))
            if not item.needles:
                compactions.done(thread, item)
                return None
            receipt = saver.redact(thread, item.needles)
        else:
            receipt = saver.erase_history(thread)
    except NothingToEraseError:
        compactions.done(thread, item)
        return None
    except Exception as exc:
        compactions.failed(thread, item, exc)
        return None
    compactions.done(thread, item)
    log.info("erase_compacted: thread %r %s, receipt %s", thread, compactions.policy,
             receipt.receipt_id)  # fmt: skip
    return receipt


async def ahandle(saver: Any, compactions: Compactions, config: Any, checkpoint: Any) -> Any:
    """Async :func:`handle`."""
    due = compactions.due(config)
    if due is None:
        return None
    (thread, ns), item = due
    try:
        if compactions.policy == "redact":
            if not item.needles:
                parent = await saver.aget_tuple(_before(config, thread, ns, item))
                before = parent.checkpoint["channel_values"] if parent is not None else {}
                item.needles = removed_texts(before, checkpoint.get("channel_values", {}))
            if not item.needles:
                compactions.done(thread, item)
                return None
            receipt = await saver.aredact(thread, item.needles)
        else:
            receipt = await saver.aerase_history(thread)
    except NothingToEraseError:
        compactions.done(thread, item)
        return None
    except Exception as exc:
        compactions.failed(thread, item, exc)
        return None
    compactions.done(thread, item)
    log.info("erase_compacted: thread %r %s, receipt %s", thread, compactions.policy,
             receipt.receipt_id)  # fmt: skip
    return receipt
