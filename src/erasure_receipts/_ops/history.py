"""History erasure, attested ``prune`` and retention sweeps: requests and guards.

A ``RemoveMessage`` or a summarizer removes a value from a thread's *current* state, but
every earlier checkpoint and pending write still holds it. ``erase_history`` deletes
everything of the thread that LangGraph would no longer load - every checkpoint except
the latest of each namespace, with their writes and the blobs only they reference - in
one attested transaction (receipt kind ``history``, RECEIPT_SPEC.md 9.2), and the
thread goes on from its latest state. Retention sweeps erase whole threads (or their
history) whose latest checkpoint is older than a cutoff, one receipt per thread,
resumable; ``prune`` is LangGraph's own API, attested.

The flow is the eraser's (:meth:`~erasure_receipts._engine.eraser.Eraser.erase`); this
module builds the requests and the sweep's guard (the thread is still idle, checked
under the erasure's write lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from .._clock import checkpoint_time, format_time, uuid6_floor
from .._engine.eraser import Eraser, Guard
from .._engine.protocol import _Abort
from .._engine.types import ErasureRequest
from ..errors import (
    ArgumentTypeError,
    ConfigurationError,
    DeferredError,
    DeltaChannelError,
    ErasureIncompleteError,
    Error,
    NothingToEraseError,
)
from ..receipt import MAX_THREAD_ID, Receipt
from . import defer as _defer
from .sweep_batch import Batcher, batch_size

if TYPE_CHECKING:
    from ..request import Authorization, RequestContext

__all__ = ["SweepEvent", "SweepResult", "candidates", "history_request", "prune", "sweep"]

log = logging.getLogger("erasure_receipts")

PAGE = 500
"""Candidate threads read per page of a sweep (memory stays flat in the thread count)."""
MAX_PASSES = 200
"""Passes of a batched sweep at most, while threads are held by other sweepers."""
MAX_FAILURES_LISTED = 20
"""Failures a ``SweepResult`` keeps messages of (all are counted)."""


class SweepEvent(NamedTuple):
    """One thread a sweep looked at (passed to ``progress``)."""

    thread_id: str
    outcome: str
    """``erased`` / ``pruned`` (a receipt was issued; ``would_*`` in a dry run), or why
    it was skipped: ``nothing_to_remove``, ``became_active`` (a newer checkpoint),
    ``active`` (a run, e.g. a resume, may be going on: see ``run_in_flight`` of the
    backends), ``deferred`` (an open deferral retains it until its ``until``),
    ``invalid_id`` (``""`` or not valid text: no request can name it),
    ``undated``, ``delta_channel``, ``claimed`` (a batched sweep: another sweeper
    held it all along), ``failed`` (counted in ``SweepResult.failed``: the
    erasure failed, or the id is too long for a receipt; the sweep goes on)."""
    rows: int = 0
    bytes: int = 0
    receipt_id: str | None = None
    latest: str | None = None
    """The thread's latest checkpoint id when it was selected."""


@dataclass
class SweepResult:
    """What one retention sweep did: counts only, so memory stays flat in the number of
    threads (each receipt is in the archive and the erasure journal)."""

    mode: str
    """``idle`` (whole threads erased) or ``history`` (histories erased)."""
    cutoff: str
    """Threads whose latest checkpoint was made before this time were selected."""
    dry_run: bool
    threads: int = 0
    """Threads erased (or pruned) by this run: one receipt each (in a dry run: would be)."""
    receipts: int = 0
    """Receipts issued by this run: ``threads`` plus any recovered."""
    recovered: int = 0
    """Receipts of earlier, interrupted erasures issued from the journal first."""
    rows: int = 0
    bytes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    """``(thread id, message)`` of the first failures."""
    limited: bool = False
    """The sweep stopped at ``limit``; run it again to continue."""
    deferrals: int = 0
    """Ended deferrals carried out by this run (RECEIPT_SPEC.md 9.14): each erasure is
    counted in ``threads`` too, its receipt's ``deferral_of`` naming the deferral."""

    @property
    def ok(self) -> bool:
        """Whether nothing failed."""
        return self.failed == 0

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def _fail(self, thread_id: str, message: str) -> None:
        self.failed += 1
        if len(self.failures) < MAX_FAILURES_LISTED:
            self.failures.append((thread_id, message))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "mode": self.mode, "cutoff": self.cutoff, "dry_run": self.dry_run,
            "threads": self.threads, "receipts": self.receipts, "recovered": self.recovered,
            "rows": self.rows, "bytes": self.bytes, "skipped": dict(sorted(self.skipped.items())),
            "failed": self.failed, "limited": self.limited, "deferrals": self.deferrals,
            "failures": [{"thread_id": t, "error": m} for t, m in self.failures],
        }  # fmt: skip


Progress = Callable[[SweepEvent], None]


class _BecameActive(_Abort):
    """Inside the erasure transaction, under the write lock: the thread a sweep chose is
    no longer idle (a newer checkpoint, a run in flight); the sweep skips it."""

    def __init__(self, thread_id: str, latest: str | None, reason: str = "became_active") -> None:
        self.reason = reason
        if reason == "active":
            super().__init__(f"thread {thread_id!r} may be running (a resume or a step in "
                             "progress under its latest checkpoint); skipped")  # fmt: skip
        else:
            super().__init__(
                f"thread {thread_id!r} has a checkpoint newer than the cutoff ({latest}); skipped"
            )


def _valid_thread_id(thread_id: str) -> bool:
    """Whether a request can name the thread: not ``""`` (LangGraph accepts it, a
    request does not), and valid text (the SQLite backend returns an id stored as
    invalid UTF-8 with lone surrogates)."""
    if not thread_id:
        return False
    try:
        thread_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(thread_id: str, limit: int = 80) -> str:
    """A thread id for a log or error line: ``repr``, cut to ``limit`` characters."""
    if len(thread_id) <= limit:
        return repr(thread_id)
    return f"{thread_id[:limit]!r}... ({len(thread_id)} characters)"


def _needles(needles: Iterable[str]) -> tuple[str, ...]:
    if isinstance(needles, str):
        raise ArgumentTypeError("needles= is a list of strings, not one string")
    out = tuple(dict.fromkeys(needles))
    for n in out:
        if not isinstance(n, str) or not n:
            raise ConfigurationError(f"a needle is a non-empty string, not {n!r}")
    return out


def _thread_ids(thread_ids: Sequence[str]) -> list[str]:
    if isinstance(thread_ids, str):
        raise ArgumentTypeError("thread_ids must be a sequence of thread IDs, not a str")
    return list(dict.fromkeys(str(t) for t in thread_ids))


# -- requests ---------------------------------------------------------------------------


def history_request(
    er: Eraser,
    thread_id: Any,
    keep: str,
    needles: Iterable[str],
    store_namespaces: Iterable[Sequence[str]] | None,
    request: RequestContext | None = None,
    authorization: Authorization | None = None,
) -> ErasureRequest:
    """The request of ``erase_history`` (keep the latest checkpoint of each namespace)."""
    if keep != "latest":
        raise ConfigurationError(f'keep= must be "latest", not {keep!r}')
    base = er.request(thread_id, store_namespaces, False)
    req = replace(base, kind="history", keep="latest", needles=_needles(needles),
                  needle_scope="thread")  # fmt: skip
    return er.with_context(req, request, authorization)


# -- prune (LangGraph's API, attested) --------------------------------------------------


def prune(
    er: Eraser, thread_ids: list[str], strategy: str, context: RequestContext | None
) -> list[Receipt]:
    """One receipt per thread, each with its ``namespaces_for`` store items.
    ``keep_latest``: a history erasure of each thread (a ``DeltaChannel`` thread
    refuses the whole call before anything is deleted, as LangGraph does).
    ``delete``: ``delete_thread`` of each thread - tombstoned, like this saver's
    ``delete_thread``. A thread with nothing to remove is skipped (no receipt). A
    failure stops the call; the threads before it keep their receipts."""
    if strategy not in ("keep_latest", "delete"):
        raise ConfigurationError(f"Unknown prune strategy: {strategy!r}")
    if strategy == "keep_latest":
        delta = [t for t in thread_ids if er.db.run(partial(_uses_delta, er), t)]
        if delta:
            raise DeltaChannelError(delta)
    out: list[Receipt] = []
    for tid in thread_ids:
        if strategy == "keep_latest":
            request = history_request(er, tid, "latest", (), None, context)
        else:
            base = er.request(tid, None, True)
            request = er.with_context(base, context, None)
        try:
            out.append(er.erase(request, er.residue_scan))
        except NothingToEraseError as exc:
            log.info("prune(%s): %s", strategy, exc.message)
    return out


def _uses_delta(er: Eraser, handle: Any, thread_id: str) -> bool:
    try:
        er.journal.plan_keep_latest(handle, thread_id, write=False)
    except DeltaChannelError:
        return True
    return False


# -- retention sweeps ---------------------------------------------------------------------


def sweep(
    er: Eraser,
    mode: str,
    older_than: timedelta | datetime,
    limit: int | None,
    dry_run: bool,
    tombstone: bool,
    context: RequestContext | None,
    progress: Progress | None,
    batch: Any = False,
) -> SweepResult:
    """Select threads whose latest checkpoint (any namespace) was made before the
    cutoff, page by page from the ``checkpoints`` primary key, and erase each (mode
    ``idle``) or its history (``history``), one receipt per thread.

    Resumable: it first issues the receipts of erasures that committed without one
    (a sweep killed after a commit; not those of erasures still running, here or in
    another process: they hold their journal entry's lease), then selects again; an
    erased thread has no checkpoint left, a pruned one nothing older than its
    latest, so a re-run skips what is done and never issues a second receipt for
    it. Inside each erasure's
    transaction, under its write lock, the thread is checked to be still idle.

    ``batch`` (mode ``idle``, not in a dry run): many threads per transaction and
    receipt, see :mod:`.sweep_batch`."""
    if limit is not None and limit < 0:
        raise ConfigurationError("limit= must not be negative")
    most = batch_size(batch)
    cutoff = er.cutoff(older_than)
    before = uuid6_floor(cutoff)
    result = SweepResult(mode, format_time(cutoff), dry_run)

    def emit(event: SweepEvent) -> None:
        if progress is not None:
            progress(event)

    batcher = None
    if most is not None and mode == "idle" and not dry_run:

        def single(tid: str, latest: str) -> SweepEvent:
            event = _sweep_one(er, mode, tid, latest, True, before, dry_run, tombstone,
                               context, result)  # fmt: skip
            assert event is not None
            return event

        batcher = Batcher(
            er, most=most, before=before, cutoff=result.cutoff, tombstone=tombstone,
            context=context, result=result, emit=emit, make_event=SweepEvent, single=single,
        )  # fmt: skip

    if not dry_run:
        try:
            recovered = er.recover(0.0)
        except ErasureIncompleteError as exc:
            recovered = list(exc.recovered)
            result._fail("(journal)", exc.message)
        result.recovered = result.receipts = len(recovered)
    # Deferrals that ended (by the saver's clock) first: an idle sweep carries out every
    # kind, a history sweep only retained histories.
    carried: set[str] = set()  # a dry run: threads its deferrals would erase
    for d in _defer.due_deferrals(er, ("history",) if mode == "history" else ("thread",
                                  "history", "subject")):  # fmt: skip
        if limit is not None and result.threads >= limit:
            result.limited = True
            break
        event = _carry_out(er, d, dry_run, context, result)
        if dry_run and event.outcome.startswith("would_be_"):
            carried.update(d.threads)
        emit(event)
    with nullcontext() if batcher is None else batcher:  # closed (or abandoned) at the end
        after: str | None = None
        while not result.limited:
            page = er.db.run(er.journal.idle_threads, before, after, PAGE)
            if not page:
                if batcher is not None and _next_pass(batcher):
                    after = None
                    continue
                break
            after = page[-1][0]
            # A batched sweep asks once per page whether any of its threads is retained; only
            # a page that has one asks again per thread (the batch's transaction checks too).
            clear = batcher is not None and not er.db.run(
                er.journal.open_deferrals, [row[0] for row in page]
            )
            # Batched: the page in claimed chunks (another sweeper's are passed over).
            chunks = (p for p in (page,)) if batcher is None else batcher.chunks(page)
            with closing(chunks):
                for rows in chunks:
                    for tid, latest, checkpoints, namespaces in rows:
                        if tid in carried:
                            continue  # counted with its deferral above
                        queued = 0 if batcher is None else len(batcher)
                        if limit is not None and result.threads + queued >= limit:
                            result.limited = True
                            break
                        swept = _sweep_one(
                            er, mode, tid, latest, checkpoints > namespaces, before, dry_run,
                            tombstone, context, result,
                            None if batcher is None else batcher.offer, clear,
                        )  # fmt: skip
                        if swept is not None:
                            emit(swept)
                    if result.limited:
                        break
        if batcher is not None:
            batcher.flush()
    return result


def _next_pass(batcher: Batcher) -> bool:
    """End of a batched pass: erase what is queued; another pass if threads were
    passed over because another sweeper held them (it may have let them go)."""
    batcher.flush()
    if not batcher.passed_over:
        return False
    batcher.passes += 1
    if batcher.passes >= MAX_PASSES:  # a sweeper that holds them for so long: its own
        for _ in range(batcher.passed_over):
            batcher.result._skip("claimed")
        return False
    batcher.start_pass()
    time.sleep(0.05)
    return True


def candidates(er: Eraser, older_than: timedelta | datetime) -> int:
    """How many threads a sweep with this cutoff would look at (one pass over the
    ``checkpoints`` primary key; for progress bars)."""
    before = uuid6_floor(er.cutoff(older_than))
    n, after = 0, None
    while page := er.db.run(er.journal.idle_threads, before, after, PAGE):
        n += len(page)
        after = page[-1][0]
    return n


def _sweep_one(
    er: Eraser,
    mode: str,
    tid: str,
    latest: str,
    has_history: bool,
    before: str,
    dry_run: bool,
    tombstone: bool,
    context: RequestContext | None,
    result: SweepResult,
    queue: Callable[[str, str], None] | None = None,
    not_deferred: bool = False,
) -> SweepEvent | None:
    if checkpoint_time(latest) is None:
        result._skip("undated")
        return SweepEvent(tid, "undated", latest=latest)
    if mode == "history" and not has_history:
        # One checkpoint per namespace: the latest only, nothing LangGraph no longer
        # loads (also what a pruned thread looks like on a re-run).
        result._skip("nothing_to_remove")
        return SweepEvent(tid, "nothing_to_remove", latest=latest)
    if not _valid_thread_id(tid):
        result._skip("invalid_id")
        log.warning("retention sweep: thread id %r cannot be erased by id; skipped", tid)
        return SweepEvent(tid, "invalid_id", latest=latest)
    if len(tid) > MAX_THREAD_ID:
        # LangGraph stores it, a receipt cannot name it: due for erasure but not
        # erasable, so a failure (the operator must act), not a silent skip.
        why = (f"thread id is {len(tid)} characters, over the {MAX_THREAD_ID} a receipt "
               "can name; not erased")  # fmt: skip
        result._fail(tid, why)
        log.warning("retention sweep: thread %s failed: %s", _short(tid), why)
        return SweepEvent(tid, "failed", latest=latest)
    if queue is not None:  # a batched sweep: erased with its batch
        # Retained threads stay out of the batch (the batch's transaction checks again:
        # a deferral recorded meanwhile fails the batch, which is redone per thread).
        if not not_deferred and er.db.run(er.journal.open_deferrals, [tid]):
            result._skip("deferred")
            return SweepEvent(tid, "deferred", latest=latest)
        queue(tid, latest)
        return None
    done = "pruned" if mode == "history" else "erased"
    try:
        if mode == "history":
            request = history_request(er, tid, "latest", (), None, context)
        else:
            base = er.request(tid, None, tombstone)
            request = er.with_context(base, context, None)
        if dry_run:
            if er.db.run(er.journal.run_in_flight, tid):
                result._skip("active")
                return SweepEvent(tid, "active", latest=latest)
            if er.db.run(er.journal.open_deferrals, [tid]):
                result._skip("deferred")
                return SweepEvent(tid, "deferred", latest=latest)
            tables = er.db.run(er.measure, request).tables
            rows = sum(c.rows for c in tables.values())
            nbytes = sum(c.bytes for c in tables.values())
            if not rows:
                raise NothingToEraseError(tid)
            result.threads += 1
            result.rows += rows
            result.bytes += nbytes
            return SweepEvent(tid, f"would_be_{done}", rows, nbytes, latest=latest)
        receipt = er.erase(request, er.residue_scan, _still_idle(er, tid, before))
    except NothingToEraseError:
        result._skip("nothing_to_remove")
        return SweepEvent(tid, "nothing_to_remove", latest=latest)
    except DeltaChannelError:
        result._skip("delta_channel")
        return SweepEvent(tid, "delta_channel", latest=latest)
    except DeferredError:  # an open deferral retains it (checked in the transaction)
        result._skip("deferred")
        return SweepEvent(tid, "deferred", latest=latest)
    except _BecameActive as exc:  # the guard's own abort, raised through unwrapped
        result._skip(exc.reason)
        return SweepEvent(tid, exc.reason, latest=latest)
    except Exception as exc:  # one bad thread must not stop the sweep
        message = exc.message if isinstance(exc, Error) else f"{type(exc).__name__}: {exc}"
        result._fail(tid, message)
        log.warning("retention sweep: thread %s failed: %s", _short(tid), message)
        return SweepEvent(tid, "failed", latest=latest)
    pre = receipt.predicate["pre_state"]
    nbytes = sum(int(t["bytes"]) for t in pre["tables"].values())
    result.threads += 1
    result.receipts += 1
    result.rows += int(pre["leaves"])
    result.bytes += nbytes
    return SweepEvent(tid, done, int(pre["leaves"]), nbytes, receipt.receipt_id, latest)


def _carry_out(
    er: Eraser,
    d: _defer.Deferral,
    dry_run: bool,
    context: RequestContext | None,
    result: SweepResult,
) -> SweepEvent:
    """Erase the scope of a deferral that ended (one receipt naming it)."""
    done = "pruned" if d.kind == "history" else "erased"
    try:
        if dry_run:
            request = _defer.erasure_request(er, d, context)
            tables = er.db.run(er.measure, request).tables
            rows = sum(c.rows for c in tables.values())
            nbytes = sum(c.bytes for c in tables.values())
            if not rows:
                result._skip("nothing_to_remove")
                return SweepEvent(d.scope_id, "nothing_to_remove")
            result.threads += 1
            result.deferrals += 1
            result.rows += rows
            result.bytes += nbytes
            return SweepEvent(d.scope_id, f"would_be_{done}", rows, nbytes)
        receipt = _defer.carry_out(er, d, context)
    except Exception as exc:  # one bad deferral must not stop the sweep
        message = exc.message if isinstance(exc, Error) else f"{type(exc).__name__}: {exc}"
        result._fail(d.scope_id, f"deferral {d.receipt_id}: {message}")
        log.warning("retention sweep: deferral %s failed: %s", d.receipt_id, message)
        return SweepEvent(d.scope_id, "failed")
    if receipt is None:
        result._skip("nothing_to_remove")
        return SweepEvent(d.scope_id, "nothing_to_remove")
    pre = receipt.predicate["pre_state"]
    nbytes = sum(int(t["bytes"]) for t in pre["tables"].values())
    result.threads += 1
    result.receipts += 1
    result.deferrals += 1
    result.rows += int(pre["leaves"])
    result.bytes += nbytes
    return SweepEvent(d.scope_id, done, int(pre["leaves"]), nbytes, receipt.receipt_id)


def _still_idle(er: Eraser, thread_id: str, before: str) -> Guard:
    def check(handle: Any) -> None:
        latest = er.journal.latest_checkpoint(handle, thread_id)
        if latest is not None and latest >= before:
            raise _BecameActive(thread_id, latest)
        if er.journal.run_in_flight(handle, thread_id):
            raise _BecameActive(thread_id, latest, "active")

    return check
