"""Leases on open erasure-journal entries: each erasure is attested exactly once.

An erasure's journal entry commits with its deletion, then the erasure signs its
receipt. Between the two, the entry is open - the same state an erasure killed after
its commit leaves, which a recovery (``recover_receipts``, every sweep) completes. A
recovery must not complete an entry whose erasure is still running, or the same
erasure is attested twice; so the erasure holds a *lease* on its entry from before the
commit until it is done, and a recovery takes only entries it can lease itself (their
owner is gone), holding the lease while it completes them. The erasure leases its
entry first in its transaction, right after creating the receipt id (the backend's
``lease_entry``): before anything irreversible (a store outside the database swept
through its API), so a lease that cannot be taken fails it while all of it still rolls
back.

Two levels, because the backends' locks exclude other processes but not the same one:

* in this process, a set of the receipt ids leased (:func:`claim` / :func:`drop`);
* across processes, the backend's ``take_lease`` / ``release_lease``: on PostgreSQL a
  session-level advisory lock keyed by the receipt id (released by the server when the
  owner's connection ends; with a pool, held on a connection of its own that lives as
  long as the lease, since the pool may close the connection the erasure ran on while
  it is still signing), on SQLite an exclusive ``fcntl`` lock on one byte, keyed by the
  receipt id, of one lease file per database, of a fixed-length name, in its directory
  (released by the kernel when the owner dies).

The owner's leases are recorded per flow (:func:`bind`), so a flow releases whatever
its erasure leased, even when it fails before knowing the receipt id.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["bind", "claim", "drop", "owned", "owner_scope", "owning"]

T = TypeVar("T")

_LOCK = threading.Lock()
_HELD: set[str] = set()
_OWNED: ContextVar[list[tuple[str, Any]] | None] = ContextVar(
    "erasure_receipts_owned_leases", default=None
)


def claim(receipt_id: str) -> bool:
    """Lease ``receipt_id`` in this process; False if it is already leased here."""
    with _LOCK:
        if receipt_id in _HELD:
            return False
        _HELD.add(receipt_id)
        return True


def drop(receipt_id: str) -> None:
    """End this process's lease on ``receipt_id``."""
    with _LOCK:
        _HELD.discard(receipt_id)


def owning() -> bool:
    """Whether an erasure flow asked for the leases of the entries written now."""
    return _OWNED.get() is not None


def owned(receipt_id: str, token: Any) -> None:
    """Called by a backend that leased a new entry (inside the erasure transaction,
    when :func:`owning`): the enclosing :func:`owner_scope` releases it."""
    claim(receipt_id)
    scope = _OWNED.get()
    assert scope is not None
    scope.append((receipt_id, token))


def bind(leases: list[tuple[str, Any]], fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` recording the leases it takes in ``leases``, on whatever thread runs it
    (a driver's own thread does not see the flow's context variables)."""

    def run(*args: Any) -> T:
        token = _OWNED.set(leases)
        try:
            return fn(*args)
        finally:
            _OWNED.reset(token)

    return run


@contextmanager
def owner_scope(release: Callable[[str, Any], None]) -> Iterator[list[tuple[str, Any]]]:
    """Around an erasure flow: yields the list :func:`bind` records leases in; at the
    end (success or failure) each is released with ``release`` and dropped here."""
    leases: list[tuple[str, Any]] = []
    try:
        yield leases
    finally:
        for receipt_id, held in leases:
            try:
                release(receipt_id, held)
            finally:
                drop(receipt_id)
