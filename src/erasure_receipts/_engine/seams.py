"""The seams an :class:`~erasure_receipts._engine.eraser.Eraser` is composed from.

A saver is LangGraph's saver plus an eraser built from three objects, each typed here
and checked by mypy: the **database** (how to run a function on the saver's connection
under its lock, build the engine backend of a request, set up), the **journal** (the
library's tables: statements, leases, tombstones, and the queries operations need) and
the **reader** (LangGraph's own public API, to read an erased scope back). A third
backend is a package that provides these; the engine's tests use in-memory ones.

Journal methods take the database *handle* (what ``Database.run`` passes to ``fn``) as
their first argument, positional-only: a backend may implement them as plain functions
of a module or as methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, TypeVar

from ..errors import ErasureIncompleteError
from .types import ErasureBackend, ErasureRequest

__all__ = ["Database", "DeferralRow", "Journal", "PendingRow", "Reader", "ResidueScan"]

T = TypeVar("T")
ResidueScan = bool | Literal["vacuum"]
"""``residue_scan=``: off, on (VACUUM only if a copy is found), or "vacuum" (always)."""
PendingRow = tuple[str, str, str, "str | None"]
"""An open journal entry: receipt id, issued_at, entry JSON, journaled statement."""
DeferralRow = tuple[
    str, str, str, str, str, str, str, str, "str | None", "str | None", "str | None"
]
"""A recorded deferral: receipt id, kind, scope id, until, issued_at, entry JSON (basis,
code, threads, store namespaces, discovery), receipt JSON, state, closed_at, closed_by,
note."""


class Database(Protocol):
    """One saver's database, as the eraser reaches it."""

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(handle, *args)`` on the database handle, under the saver's lock (from a
        worker thread for an async saver: the handle's own thread or loop is used)."""
        ...

    def backend(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan
    ) -> ErasureBackend:
        """The engine backend that erases ``request`` on ``handle``."""
        ...

    def retryable(self, exc: ErasureIncompleteError) -> bool:
        """Whether a rolled-back erasure failed on a transient conflict (retry it)."""
        ...

    def check_readable(self, handle: Any) -> None:
        """Before a read-only preview: refuse a database that is no LangGraph database."""
        ...

    def store_rows(self) -> bool:
        """Whether the store's items are rows of this database (resolved by ``prepare``
        or ``resolve_store``)."""
        ...

    def prepare(self) -> None:
        """Before an erasure: the library's tables exist, the store is located."""
        ...

    def ensure_journal(self) -> None:
        """The library's tables exist (installing them if needed)."""
        ...

    def resolve_store(self) -> None:
        """Locate the store (no writes: previews work on read-only connections)."""
        ...

    def forget_store(self) -> None:
        """The saver's store changed: locate it again before it is next used."""
        ...


class Reader(Protocol):
    """LangGraph's public API of the saver and its store, for the read-back after an
    erasure (the eraser sets ``API_CHECK`` around it, so ``refuse_erased_reads`` reads)."""

    def get_tuple(self, config: Any) -> Any:
        """The saver's ``get_tuple`` (``aget_tuple`` on the event loop, for async)."""
        ...

    def list(self, config: Any) -> Iterable[Any]:
        """The saver's ``list``."""
        ...

    def count_store(self, namespaces: Sequence[tuple[str, ...]]) -> int:
        """Items the store's paginated ``search`` returns under ``namespaces``."""
        ...

    def detached(self) -> AbstractContextManager[Reader | None]:
        """The same API of the same saver on a connection of its own, usable from another
        thread while the saver runs its next transaction (a batched sweep reads one
        batch back beside the next); None where there is none (the read-back then runs
        in turn)."""
        ...


class Journal(Protocol):
    """The library's tables in the saver's database: the erasure journal (one entry per
    erasure: its measurement, then its statement, then its receipt), leases on open
    entries, tombstones, and the read queries operations use."""

    def record_statement(self, handle: Any, receipt_id: str, statement: str, /) -> str:
        """Journal the statement (first one wins); returns the journaled one."""
        ...

    def mark_issued(self, handle: Any, receipt_id: str, receipt_json: bytes, /) -> None:
        """Close the entry with its receipt."""
        ...

    def pending_journal(self, handle: Any, /) -> list[PendingRow]:
        """Open entries, oldest first."""
        ...

    def journal_receipts(self, handle: Any, thread_id: str | None = None, /) -> list[bytes]:
        """Receipts of closed entries (of one thread)."""
        ...

    def still_pending(self, handle: Any, receipt_id: str, /) -> bool:
        """Whether the entry is still open."""
        ...

    def take_lease(self, handle: Any, receipt_id: str, /) -> Any:
        """Lease an open entry: a token, or None if another process holds it."""
        ...

    def release_lease(self, handle: Any, receipt_id: str, token: Any, /) -> None:
        """Release a lease ``take_lease`` returned."""
        ...

    def redact_journal(
        self, handle: Any, receipt_id: str, committed: str, rewrite: Callable[[str], str], /
    ) -> object:
        """Privacy mode: the entry under its committed id, its text rewritten."""
        ...

    def purge_journal(self, handle: Any, older_than: str, /) -> int:
        """Delete closed entries issued before ``older_than``; how many."""
        ...

    def reopen(self, handle: Any, thread_id: str, /) -> bool:
        """Remove a thread's tombstone."""
        ...

    def is_erased(self, handle: Any, thread_id: str, /) -> bool:
        """Whether a thread is tombstoned."""
        ...

    def replay_state(self, handle: Any, /) -> tuple[set[str], set[str], set[str]]:
        """Receipt ids in the journal, thread ids with checkpoints, tombstoned thread ids
        (a replay after a restore compares its receipts with them)."""
        ...

    def reopen_namespace(self, handle: Any, prefix: str, /) -> bool:
        """Remove a store prefix's tombstone."""
        ...

    def namespace_erased(self, handle: Any, prefix: str, /) -> str | None:
        """The tombstoned prefix (``prefix`` or an ancestor) refusing writes to it."""
        ...

    def idle_threads(
        self, handle: Any, before: str, after: str | None, limit: int, /
    ) -> list[tuple[str, str, int, int]]:
        """Threads whose newest checkpoint id sorts before ``before``, after ``after``:
        ``(thread_id, latest, checkpoints, namespaces)``."""
        ...

    def latest_checkpoint(self, handle: Any, thread_id: str, /) -> str | None:
        """The thread's newest checkpoint id (any namespace)."""
        ...

    def run_in_flight(self, handle: Any, thread_id: str, /) -> bool:
        """Whether a run may be in progress on the thread."""
        ...

    def threads_by_metadata(self, handle: Any, key: str, value: str, /) -> list[str]:
        """Threads with a checkpoint whose metadata has ``key == value``."""
        ...

    def locate(
        self, handle: Any, forms: Sequence[tuple[int, str, bytes]], /
    ) -> list[dict[str, Any]]:
        """Every stored location of each needle form."""
        ...

    def plan_keep_latest(self, handle: Any, thread_id: str, /, *, write: bool) -> Any:
        """The keep-latest plan of a history erasure (raises ``DeltaChannelError``)."""
        ...

    # -- deferrals (RECEIPT_SPEC.md 9.14): signed decisions to retain ------------------

    def record_deferral(
        self, handle: Any, row: DeferralRow, threads: Sequence[str], present: Sequence[str], /
    ) -> list[str]:
        """Record a signed deferral and the threads it retains, in one transaction that
        excludes erasures of those threads, unless one of ``present`` (threads that had
        rows when the deferral was measured) has no checkpoint any more: then nothing is
        recorded and those threads are returned (an erasure committed meanwhile)."""
        ...

    def deferrals(self, handle: Any, state: str | None, /) -> list[DeferralRow]:
        """Every recorded deferral (of one ``state``), oldest first; ``[]`` before the
        library's tables exist."""
        ...

    def open_deferrals(self, handle: Any, thread_ids: Sequence[str], /) -> list[tuple[str, str]]:
        """``(receipt id, until)`` of the open deferrals retaining any of ``thread_ids``,
        oldest first (inside an erasure's transaction: what committed before it)."""
        ...

    def close_deferral(
        self,
        handle: Any,
        receipt_id: str,
        state: str,
        closed_at: str,
        closed_by: str | None,
        note: str | None,
        /,
    ) -> bool:
        """Close an open deferral (``executed``, ``released``, ``lapsed``); False if it
        is not open (unknown, or closed already)."""
        ...
