"""Batched retention sweeps: many idle threads per transaction and per receipt.

A sweep with ``batch=`` collects the threads it selected (after the same per-thread
checks as a thread-by-thread sweep) and erases them in batches. Each batch is one
``subject`` erasure (RECEIPT_SPEC.md 9.3, 9.15): one transaction, one receipt whose
``units`` bind each thread's measured rows under one root, one journal entry, one
archive write and one residue step (WAL truncation) for the whole batch; ``receipt
prove`` shows that one thread's rows are in it. Inside the transaction, under the
write lock, every thread of the batch is checked to be still idle and still there;
the ones that are not are dropped and the batch is erased without them (nothing was
deleted). A batch that fails for another reason is erased again thread by thread, so
one bad thread costs only its own receipt.

Batch size adapts: after each batch the number of threads is scaled so the batch's
phase one (from its transaction's start, through the write locks, to the commit and
the residue step; not the read-back, signature and archive write that follow, during
which nobody waits) stays near :data:`BUDGET_SECONDS`, and a batch measures at most
:data:`BUDGET_ROWS` rows; a writer of a live thread waits at most about that long.

Read-back beside the next batch. Where the saver's reader has a detached copy (a
second PostgreSQL connection, ``Reader.detached``), a batch's read-back through
LangGraph's API starts on it as the batch commits (``Eraser.begin``), and the batch's
receipt is issued (``Eraser.finish``) once the next batch has committed: the two
overlap. A pending batch is counted in ``len()`` (so ``limit`` holds) and issued by
:meth:`Batcher.close` at the end; a sweep failing meanwhile releases its lease instead,
leaving its journal entry to ``recover_receipts`` like a crash after the commit.

Workers. On PostgreSQL a sweeper *claims* the threads it selects a chunk of two batches
at a time, in one round trip, before it looks at them, with session-level advisory
locks (``pg_try_advisory_lock``, class ``CLAIM_CLASS``; on a pool, on one connection of
their own for the whole sweep): the threads another sweeper holds are passed over, so
several processes (or machines) running the same sweep take turns along the selected
threads instead of reading the same ones in step and colliding batch after batch. A
claim ends with its thread's batch; at the end of its chunk, for a thread the per-thread
checks skipped; when the sweep stops (``limit=``, an error); or with the holder's
connection if it dies. A pass that passed over claimed threads is followed by another,
which looks only at those threads, until none is left claimed: every idle thread is
erased by exactly one of the sweepers, and the in-transaction check makes sure none is
erased (or listed in a receipt) twice even if two sweepers were to pick the same thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

from .._engine.eraser import Committed, Eraser, Guard
from .._engine.protocol import _Abort
from .._engine.seams import Reader
from .._engine.types import ErasureRequest
from ..errors import ConfigurationError, NothingToEraseError
from ..receipt import Receipt

__all__ = ["BUDGET_ROWS", "BUDGET_SECONDS", "MAX_BATCH", "Batcher", "batch_size", "subject_of"]

log = logging.getLogger("erasure_receipts")

MAX_BATCH = 1000
"""Threads per batch at most (the threads one subject receipt may list)."""
FIRST_BATCH = 16
"""Threads of the first batch, before anything is measured."""
BUDGET_SECONDS = 0.1
"""Target time of a batch's phase one (its transaction, holding the write locks)."""
BUDGET_ROWS = 50_000
"""Rows one batch measures at most (as far as the rows per thread so far predict)."""
MAX_RETRIES = 8
"""Times a batch is rebuilt without threads that stopped being idle under the lock."""

Event = Any  # history.SweepEvent (imported there; this module does not import history)
Row = tuple[Any, ...]
"""A selected thread's row from the journal's ``idle_threads`` (its id first)."""


def batch_size(batch: Any) -> int | None:
    """``batch=`` of a sweep as the largest batch (None: one receipt per thread)."""
    if batch is False or batch is None:
        return None
    if batch is True:
        return MAX_BATCH
    if isinstance(batch, int) and not isinstance(batch, bool) and 1 <= batch <= MAX_BATCH:
        return batch
    raise ConfigurationError(
        f"batch= is True, False or a number of threads from 1 to {MAX_BATCH}, not {batch!r}"
    )


def subject_of(mode: str, cutoff: str) -> str:
    """The ``scope.subject`` of a batch receipt (RECEIPT_SPEC.md 9.15)."""
    return f"retention:{mode}:before:{cutoff}"


class _BatchChanged(_Abort):
    """Inside a batch's transaction, under the write lock: some threads are no longer
    idle (or are gone); rolled back, the batch is erased again without them."""

    def __init__(self, dropped: dict[str, str]) -> None:
        self.dropped = dropped
        super().__init__(f"{len(dropped)} thread(s) of the batch are no longer idle")


class Batcher:
    """Collects a sweep's selected threads and erases them in batches.

    ``make_event(tid, outcome, rows, bytes, receipt_id, latest)`` builds the sweep's
    events; ``single(tid, latest)`` erases one thread the thread-by-thread way (used
    when a batch fails); ``emit`` reports an event; ``result`` is the sweep's result
    (``SweepResult``: counts only)."""

    def __init__(
        self,
        er: Eraser,
        *,
        most: int,
        before: str,
        cutoff: str,
        tombstone: bool,
        context: Any,
        result: Any,
        emit: Callable[[Event], None],
        make_event: Callable[..., Event],
        single: Callable[[str, str], Event],
    ) -> None:
        self.er = er
        self.most = most
        self.size = min(FIRST_BATCH, most)
        self.before = before
        self.subject = subject_of("idle", cutoff)
        self.tombstone = tombstone
        self.context = context
        self.result = result
        self.emit = emit
        self.event = make_event
        self.single = single
        self.queue: list[tuple[str, str]] = []
        self.passed_over = 0
        """Threads passed over because another sweeper held them (this pass)."""
        self.batches = 0
        self.passes = 0
        self.claims = getattr(er.journal, "claim_threads", None)
        self.unclaim = getattr(er.journal, "release_claims", None)
        self._claimed: dict[str, Any] = {}
        """Threads this sweeper holds a claim on, each with its claim's token."""
        self._holder: Any = None
        """The last claim's token: on a pool, the connection the claims are held on,
        reused for the next ones and closed by :meth:`close`."""
        self._passed: set[str] = set()
        """Threads passed over in this pass (another sweeper held them)."""
        self.revisit: set[str] | None = None
        """In a later pass, the threads passed over in the one before: the only ones it
        looks at (the others were erased or skipped, and counted, already)."""
        self.pending: tuple[Committed, dict[str, str]] | None = None
        """The last batch: committed, its read-back running beside the next batch."""
        self._readback: tuple[Executor, Reader] | None = None
        self._open: list[Committed] = []
        """Batches begun whose receipt is neither issued nor failed: their leases are
        released by ``close(abandon=True)`` however the sweep was interrupted."""
        self.unreceipted = 0
        """Threads of batches that committed but whose receipt failed (left to recovery)."""
        self._opened = False
        self._stack = ExitStack()

    def __len__(self) -> int:
        """Threads selected and not counted in the result: queued, pending, or erased
        by a batch whose receipt failed (``limit`` counts them all)."""
        pending = len(self.pending[1]) if self.pending else 0
        return len(self.queue) + pending + self.unreceipted

    def __enter__(self) -> Batcher:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.close(abandon=exc is not None)

    def close(self, *, abandon: bool = False) -> None:
        """End of the sweep: the last batch's receipt issued (with ``abandon``, when the
        sweep is failing, only its lease released: the entry stays open for
        ``recover_receipts``); the read-back's connection closed."""
        try:
            if abandon:
                self.pending = None
                for done in self._open:  # begun, receipt neither issued nor failed
                    done.scope.close()
                self._open.clear()
            self._settle()
        finally:
            try:
                self.release(list(self._claimed))
                holder, self._holder = self._holder, None
                if holder is not None and self.unclaim is not None:
                    try:  # a pool's claim connection closed (nothing left on it)
                        self.er.db.run(self.unclaim, [], holder, True)
                    except Exception as exc:
                        log.warning("the sweep's claim connection not closed: %s", exc)
            finally:
                self._stack.close()

    def _readback_for(self, request: ErasureRequest) -> tuple[Executor, Reader] | None:
        """The executor and detached reader a batch's read-back runs on, opened on first
        use (none for a store's namespaces: the store may share the saver's connection)."""
        if not self._opened:
            self._opened = True
            reader = self._stack.enter_context(self.er.reader.detached())
            if reader is not None:
                pool = self._stack.enter_context(
                    ThreadPoolExecutor(1, thread_name_prefix="erasure-readback")
                )
                self._readback = (pool, reader)
        return None if request.store_namespaces else self._readback

    def _settle(self) -> None:
        """Issue the pending batch's receipt (its read-back is done or nearly so)."""
        pending, self.pending = self.pending, None
        self._issue(pending)

    def _issue(self, pending: tuple[Committed, dict[str, str]] | None) -> None:
        """Issue the receipt of a batch taken off ``pending``."""
        if pending is None:
            return
        done, latest = pending
        try:
            receipt = self.er.finish(done)  # releases the leases, whatever happens
        except Exception as exc:
            # Committed without a receipt (its entry stays open for recover_receipts):
            # its threads are gone, so they count against the sweep's limit.
            self.unreceipted += len(latest)
            self._failed(sorted(latest), latest, exc)
            return
        finally:
            self._open[:] = [d for d in self._open if d is not done]
            if done.readback is not None and done.readback.exception() is not None:
                self._readback = None  # that connection failed: the next read in turn
        self._done(receipt, latest)

    def _failed(self, tids: list[str], latest: dict[str, str], exc: Exception) -> None:
        log.warning("retention sweep: a batch of %d thread(s) failed (%s); erasing "
                    "them one by one", len(tids), exc)  # fmt: skip
        self.size = max(1, self.size // 4)
        for t in tids:
            self.emit(self.single(t, latest[t]))

    def offer(self, tid: str, latest: str) -> None:
        """Queue one selected thread; erase the batch once it is full."""
        self.queue.append((tid, latest))
        if len(self.queue) >= self.size:
            self.flush()

    def flush(self) -> None:
        """Erase the queued threads (claimed with their chunk, on PostgreSQL); their
        claims end with the batch."""
        queue, self.queue = self.queue, []
        if not queue:
            return
        try:
            self._erase(queue)
        finally:
            self.release(t for t, _ in queue)

    # -- claims (PostgreSQL: several sweepers) --------------------------------------------

    def chunks(self, page: list[Row]) -> Generator[list[Row], None, None]:
        """A page of selected threads (rows whose first item is the thread id) in chunks
        of two batches, each claimed in one round trip when it is reached: yields the
        rows this sweeper holds. Rows another sweeper holds are passed over (looked at
        again in the next pass); a chunk's claims on threads that were not queued (the
        per-thread checks skipped them, or the sweep stopped) end when the next chunk
        is asked for, or when this generator is closed. Without claims (SQLite): the
        page as it is."""
        if self.claims is None or self.unclaim is None:
            yield page
            return
        if self.revisit is not None:
            page = [row for row in page if row[0] in self.revisit]
        start = 0
        try:
            while start < len(page):
                chunk = page[start : start + 2 * self.size]
                start += len(chunk)
                tids = [row[0] for row in chunk]
                got, self._holder = self.er.db.run(self.claims, tids, self._holder)
                for t in got:
                    self._claimed[t] = self._holder
                held = set(got)
                passed = [t for t in tids if t not in held]
                self.passed_over += len(passed)
                self._passed.update(passed)
                yield [row for row in chunk if row[0] in held]
                self._release_unqueued()
        finally:
            self._release_unqueued()

    def start_pass(self) -> None:
        """Another pass: it looks only at the threads this one passed over."""
        self.revisit, self._passed = self._passed, set()
        self.passed_over = 0

    def _release_unqueued(self) -> None:
        queued = {t for t, _ in self.queue}
        self.release([t for t in self._claimed if t not in queued])

    def release(self, tids: Iterable[str]) -> None:
        """End this sweeper's claims on ``tids`` (those it holds); a failure is logged:
        the claims end with their connection anyway."""
        unclaim = self.unclaim
        if unclaim is None:
            return
        groups: dict[int, tuple[Any, list[str]]] = {}
        for t in tids:
            token = self._claimed.get(t)
            if token is not None:
                groups.setdefault(id(token), (token, []))[1].append(t)
        for token, threads in groups.values():
            try:
                self.er.db.run(unclaim, threads, token, False)
            except Exception as exc:
                log.warning("claims on %d thread(s) not released: %s", len(threads), exc)
            # Forgotten once released (or failed, logged): one interrupted before leaves
            # the rest to close().
            for t in threads:
                self._claimed.pop(t, None)

    # -- one batch ----------------------------------------------------------------------

    def _request(self, tids: list[str]) -> ErasureRequest:
        er = self.er
        namespaces: dict[tuple[str, ...], None] = {}
        if er.namespaces_for is not None:
            for t in tids:
                mapped = er.request(t, None, self.tombstone).store_namespaces
                namespaces.update(dict.fromkeys(mapped))
        base = er.request(self.subject, tuple(namespaces), self.tombstone)
        req = ErasureRequest(
            self.subject, base.store_namespaces, base.tombstone, False, kind="subject",
            threads=tuple(sorted(tids)), subject=self.subject, needle_scope="database",
        )  # fmt: skip
        return er.with_context(req, self.context, None)

    def _guard(self, tids: list[str]) -> Guard:
        er, before = self.er, self.before

        states = getattr(er.journal, "idle_states", None)  # all threads in one look-up

        def check(handle: Any) -> None:
            dropped: dict[str, str] = {}
            found = states(handle, tids) if states is not None else {}
            for t in tids:
                if states is not None:
                    latest, busy = found.get(t, (None, False))
                else:
                    latest, busy = er.journal.latest_checkpoint(handle, t), None
                if latest is None:
                    dropped[t] = "nothing_to_remove"  # erased meanwhile (another sweeper)
                elif latest >= before:
                    dropped[t] = "became_active"
                elif busy if busy is not None else er.journal.run_in_flight(handle, t):
                    dropped[t] = "active"
            if dropped:
                raise _BatchChanged(dropped)

        return check

    def _erase(self, items: list[tuple[str, str]]) -> None:
        latest = dict(items)
        for _ in range(MAX_RETRIES):
            tids = sorted(latest)
            if not tids:
                return
            request = self._request(tids)
            try:
                done = self.er.begin(request, self.er.residue_scan, self._guard(tids),
                                     readback=self._readback_for(request))  # fmt: skip
            except _BatchChanged as exc:
                for t, why in sorted(exc.dropped.items()):
                    self.result._skip(why)
                    self.emit(self.event(t, why, latest=latest.pop(t)))
                continue
            except NothingToEraseError:
                for t in tids:
                    self.result._skip("nothing_to_remove")
                    self.emit(self.event(t, "nothing_to_remove", latest=latest[t]))
                return
            except Exception as exc:
                self._settle()
                self._failed(tids, latest, exc)
                return
            # The previous batch's read-back ran beside this transaction: issue its
            # receipt now; this one's read-back runs beside the next. This one is pending
            # first, so whatever interrupts the other's receipt, close() releases it.
            self._open.append(done)
            # Sized now, from this transaction, not when its receipt is issued (a batch
            # later with the read-back beside the next one).
            self._adapt(len(latest), sum(t.rows for t in done.outcome.pre_tables.values()),
                        self.er.phase_one_seconds)  # fmt: skip
            previous, self.pending = self.pending, (done, latest)
            self._issue(previous)
            if done.readback is None:
                self._settle()
            return
        self._settle()
        for t in sorted(latest):  # kept changing: thread by thread
            self.emit(self.single(t, latest[t]))

    def _done(self, receipt: Receipt, latest: dict[str, str]) -> None:
        r = self.result
        pre = receipt.predicate["pre_state"]
        rows = int(pre["leaves"])
        r.receipts += 1
        r.rows += rows
        r.bytes += sum(int(t["bytes"]) for t in pre["tables"].values())
        self.batches += 1
        for unit in receipt.predicate["units"]:
            name = str(unit["name"])
            if not name.startswith("thread:"):
                continue
            tid = name[len("thread:") :]
            r.threads += 1
            nbytes = sum(int(t["bytes"]) for t in unit["tables"].values())
            self.emit(self.event(tid, "erased", int(unit["leaves"]), nbytes,
                                 receipt.receipt_id, latest.get(tid)))  # fmt: skip

    def _adapt(self, n: int, rows: int, elapsed: float) -> None:
        """The next batch's size from this one's time and rows per thread."""
        if n < self.size:
            return  # a short batch (the end of a pass) says little about a full one
        by_time = BUDGET_SECONDS / max(elapsed / n, 1e-6)
        by_rows = BUDGET_ROWS / max(rows / n, 1.0)
        target = int(min(by_time, by_rows))
        self.size = max(1, min(self.most, 2 * self.size, target))
