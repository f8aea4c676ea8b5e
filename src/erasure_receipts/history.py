"""Erase what compaction left behind, keep the conversation; and retention sweeps.

A ``RemoveMessage`` or a summarizer removes a value from a thread's *current* state, but
every earlier checkpoint and pending write still holds it. :meth:`erase_history` deletes
everything of the thread that LangGraph would no longer load - every checkpoint except
the latest of each namespace, with their writes and the blobs only they reference - in
one attested transaction, and the thread goes on from its latest state. Its receipt
(kind ``history``, RECEIPT_SPEC.md 9.2) attests both sides: the removed rows' digest and
the digest of the rows that remain, with the kept checkpoint ids. ``needles`` (the
removed text, an email) must occur nowhere in the thread afterwards, or nothing is
deleted and the locations are named.

Retention: :meth:`erase_idle_threads` erases whole threads whose latest checkpoint is
older than a cutoff, :meth:`prune_histories` erases the history of such threads; one
receipt per thread, resumable. :meth:`prune` is LangGraph's own API, attested.

Written once, like every operation: :class:`HistoryFlows` holds synchronous flows over
the :class:`~erasure_receipts.attesting.Attesting` hooks (``_db``, ``_new_backend``,
``_journal``); :class:`HistoryMethods` and :class:`AsyncHistoryMethods` add the public
methods to the sync and async savers (the async ones run the same flows on a worker
thread with ``AsyncFlows._flow``).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from . import __version__, lease
from ._clock import checkpoint_time, uuid6_floor
from .attesting import API_CHECK, MAX_ATTEMPTS, AsyncFlows, Attesting, ResidueScan
from .backends.keep_latest import DeltaChannelError, KeepLatest
from .engine import ErasureRequest, GuardedBackend, RowsOutcome, erase_rows, format_time
from .errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasureIncompleteError,
    Error,
    NothingToEraseError,
)
from .receipt import MAX_THREAD_ID, Receipt

if TYPE_CHECKING:
    from .request import Authorization, RequestContext

__all__ = [
    "AsyncHistoryMethods",
    "DeltaChannelError",
    "HistoryFlows",
    "HistoryMethods",
    "SweepEvent",
    "SweepResult",
    "checkpoint_time",
    "uuid6_floor",
]

log = logging.getLogger("erasure_receipts")

PAGE = 500
"""Candidate threads read per page of a sweep (memory stays flat in the thread count)."""
MAX_FAILURES_LISTED = 20
"""Failures a ``SweepResult`` keeps messages of (all are counted)."""
# -- results ---------------------------------------------------------------------------


class SweepEvent(NamedTuple):
    """One thread a sweep looked at (passed to ``progress``)."""

    thread_id: str
    outcome: str
    """``erased`` / ``pruned`` (a receipt was issued; ``would_*`` in a dry run), or why
    it was skipped: ``nothing_to_remove``, ``became_active`` (a newer checkpoint),
    ``active`` (a run, e.g. a resume, may be going on: see ``run_in_flight`` of the
    backends), ``invalid_id`` (``""`` or not valid text: no request can name it),
    ``undated``, ``delta_channel``, ``failed`` (counted in ``SweepResult.failed``: the
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
            "failed": self.failed, "limited": self.limited,
            "failures": [{"thread_id": t, "error": m} for t, m in self.failures],
        }  # fmt: skip


Progress = Callable[[SweepEvent], None]
Guard = Callable[[Any], None]
"""Runs inside the erasure transaction, after its lock, with the database handle."""


class _BecameActive(Exception):
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


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


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


class HistoryFlows(Attesting):
    """History erasure, attested ``prune`` and retention sweeps, written once over the
    ``Attesting`` hooks."""

    # -- requests ---------------------------------------------------------------------------

    def _history_request(
        self,
        thread_id: Any,
        keep: str,
        needles: Iterable[str],
        store_namespaces: Iterable[Sequence[str]] | None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> ErasureRequest:
        if keep != "latest":
            raise ConfigurationError(f'keep= must be "latest", not {keep!r}')
        base = self._request(thread_id, store_namespaces, False)
        er = replace(base, kind="history", keep="latest", needles=_needles(needles),
                     needle_scope="thread")  # fmt: skip
        return self._with_context(er, request, authorization)

    def _cutoff(self, older_than: timedelta | datetime) -> datetime:
        if isinstance(older_than, timedelta):
            if older_than < timedelta(0):
                raise ConfigurationError("older_than= must not be negative")
            return self._now() - older_than
        if isinstance(older_than, datetime):
            return older_than if older_than.tzinfo else older_than.replace(tzinfo=UTC)
        raise ArgumentTypeError("older_than= is a timedelta (age) or a datetime (cutoff)")

    # -- public-API checks of a history erasure --------------------------------------------

    def _api_checks(
        self, request: ErasureRequest, namespaces: set[str]
    ) -> list[tuple[str, int, str]]:
        """History receipts: the thread lives on, so instead of "nothing is returned" the
        public API must return no removed checkpoint, and load a kept (or newer) one in
        every kept namespace. Other kinds: the savers' checks."""
        if request.kind != "history":
            return super()._api_checks(request, namespaces)
        rule = KeepLatest.of(request.kept)
        token = API_CHECK.set(True)
        try:
            removed = listed = 0
            for t in self.list({"configurable": {"thread_id": request.thread_id}}):  # type: ignore[attr-defined]
                c = t.config["configurable"]
                listed += 1
                key = (str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"]))
                removed += rule.removes(*key, request.removed)
            missing = 0
            for ns in rule.by_ns:
                cfg = {"configurable": {"thread_id": request.thread_id, "checkpoint_ns": ns}}
                got = self.get_tuple(cfg)  # type: ignore[attr-defined]
                cid = None if got is None else str(got.config["configurable"]["checkpoint_id"])
                missing += cid is None or rule.removes(ns, cid, request.removed)
            stored = None
            if request.store_namespaces:
                stored = self._api_counts(request, set())[2]
        finally:
            API_CHECK.reset(token)
        checks = [
            ("api_list_no_removed", removed,
             f"list() over all namespaces returned {listed} checkpoint(s), none removed"),
            ("api_get_tuple_kept", missing,
             f"get_tuple loads a kept (or newer) checkpoint in each of {len(rule.by_ns)} "
             "kept namespace(s)"),
        ]  # fmt: skip
        if stored is not None:
            checks.append(("api_store_search_empty", stored,
                           "store.search paginated under every namespace"))  # fmt: skip
        return checks

    # -- one attested erasure (thread or history), optionally guarded -----------------------

    def _guarded_phase_one(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan, guard: Guard | None
    ) -> tuple[RowsOutcome, set[str]]:
        """The engine's phase one (as ``Attesting._phase_one``, retried on transient
        conflicts), with ``guard`` run first inside the transaction."""
        clock = {"clock": self.clock} if self.clock is not None else {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            backend = self._new_backend(handle, request, residue_scan)
            if guard is not None:
                backend = GuardedBackend(backend, lambda: guard(handle))
            try:
                outcome = erase_rows(backend, request, generator_version=__version__, **clock)
            except ErasureIncompleteError as exc:
                swept = any(p.irreversible_deleted for p in backend.parts())
                if not self._retryable(exc) or swept or attempt == MAX_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0.01, 0.05) * 2**attempt)
                continue
            log.info(
                "erased %s of thread %r: %d rows, receipt %s",
                "history" if request.kind == "history" else "all",
                request.thread_id,
                sum(t.rows for t in outcome.pre_tables.values()),
                outcome.receipt_id,
            )
            return outcome, set(getattr(backend, "checkpoint_namespaces", ()))
        raise AssertionError("unreachable")  # pragma: no cover

    def _attested_flow(
        self, request: ErasureRequest, residue_scan: ResidueScan, guard: Guard | None = None
    ) -> Receipt:
        """Measure, delete, commit, check, sign and archive one erasure (the shape of
        ``Attesting._erase_flow``); a history erasure's API checks use its kept set."""
        with lease.owner_scope(self._release_lease) as leases:
            return self._attested_leased(request, residue_scan, guard, leases)

    def _attested_leased(
        self,
        request: ErasureRequest,
        residue_scan: ResidueScan,
        guard: Guard | None,
        leases: list[tuple[str, Any]],
    ) -> Receipt:
        try:
            phase_one = lease.bind(leases, self._guarded_phase_one)
            outcome, namespaces = self._db(phase_one, request, residue_scan, guard)
        except ErasureIncompleteError as exc:
            delta = _cause(exc, DeltaChannelError)
            if delta is not None:
                raise DeltaChannelError([request.thread_id]) from exc
            raise
        try:
            checked = request
            if request.kind == "history":
                kept = outcome.members["kept_state"]["checkpoints"]
                checked = replace(
                    request,
                    kept=tuple((c["checkpoint_ns"], c["checkpoint_id"]) for c in kept),
                    removed=outcome.request.removed,
                )
            api = self._api_checks(checked, namespaces)
            statement = self._statement_of(outcome, api)
            statement = self._db(self._journal.record_statement, outcome.receipt_id, statement)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        receipt = self._sign(statement)
        self._mark_issued(receipt)
        return receipt

    # -- prune (LangGraph's API, attested) --------------------------------------------------

    def _prune_flow(
        self, thread_ids: list[str], strategy: str, context: RequestContext | None
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
            delta = [t for t in thread_ids if self._db(self._uses_delta, t)]
            if delta:
                raise DeltaChannelError(delta)
        out: list[Receipt] = []
        for tid in thread_ids:
            if strategy == "keep_latest":
                request = self._history_request(tid, "latest", (), None, context)
            else:
                base = self._request(tid, None, True)
                request = self._with_context(base, context, None)
            try:
                out.append(self._attested_flow(request, self.residue_scan))
            except NothingToEraseError as exc:
                log.info("prune(%s): %s", strategy, exc.message)
        return out

    def _uses_delta(self, handle: Any, thread_id: str) -> bool:
        try:
            self._journal.plan_keep_latest(handle, thread_id, write=False)
        except DeltaChannelError:
            return True
        return False

    # -- retention sweeps ---------------------------------------------------------------------

    def _sweep_flow(
        self,
        mode: str,
        older_than: timedelta | datetime,
        limit: int | None,
        dry_run: bool,
        tombstone: bool,
        context: RequestContext | None,
        progress: Progress | None,
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
        transaction, under its write lock, the thread is checked to be still idle."""
        if limit is not None and limit < 0:
            raise ConfigurationError("limit= must not be negative")
        cutoff = self._cutoff(older_than)
        before = uuid6_floor(cutoff)
        result = SweepResult(mode, format_time(cutoff), dry_run)

        def emit(event: SweepEvent) -> None:
            if progress is not None:
                progress(event)

        if not dry_run:
            try:
                recovered = self._recover_flow(0.0)
            except ErasureIncompleteError as exc:
                recovered = list(exc.recovered)
                result._fail("(journal)", exc.message)
            result.recovered = result.receipts = len(recovered)
        after: str | None = None
        while not result.limited:
            page = self._db(self._journal.idle_threads, before, after, PAGE)
            if not page:
                break
            for tid, latest, checkpoints, namespaces in page:
                after = tid
                if limit is not None and result.threads >= limit:
                    result.limited = True
                    break
                event = self._sweep_one(
                    mode, tid, latest, checkpoints > namespaces, before, dry_run, tombstone,
                    context, result,
                )  # fmt: skip
                emit(event)
        return result

    def _candidates_flow(self, older_than: timedelta | datetime) -> int:
        """How many threads a sweep with this cutoff would look at (one pass over the
        ``checkpoints`` primary key; for progress bars)."""
        before = uuid6_floor(self._cutoff(older_than))
        n, after = 0, None
        while page := self._db(self._journal.idle_threads, before, after, PAGE):
            n += len(page)
            after = page[-1][0]
        return n

    def _sweep_one(
        self,
        mode: str,
        tid: str,
        latest: str,
        has_history: bool,
        before: str,
        dry_run: bool,
        tombstone: bool,
        context: RequestContext | None,
        result: SweepResult,
    ) -> SweepEvent:
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
        done = "pruned" if mode == "history" else "erased"
        try:
            if mode == "history":
                request = self._history_request(tid, "latest", (), None, context)
            else:
                base = self._request(tid, None, tombstone)
                request = self._with_context(base, context, None)
            if dry_run:
                if self._db(self._journal.run_in_flight, tid):
                    result._skip("active")
                    return SweepEvent(tid, "active", latest=latest)
                tables = self._db(self._measure, request).tables
                rows = sum(c.rows for c in tables.values())
                nbytes = sum(c.bytes for c in tables.values())
                if not rows:
                    raise NothingToEraseError(tid)
                result.threads += 1
                result.rows += rows
                result.bytes += nbytes
                return SweepEvent(tid, f"would_be_{done}", rows, nbytes, latest=latest)
            receipt = self._attested_flow(request, self.residue_scan, self._still_idle(tid, before))
        except NothingToEraseError:
            result._skip("nothing_to_remove")
            return SweepEvent(tid, "nothing_to_remove", latest=latest)
        except DeltaChannelError:
            result._skip("delta_channel")
            return SweepEvent(tid, "delta_channel", latest=latest)
        except Exception as exc:  # one bad thread must not stop the sweep
            active = _cause(exc, _BecameActive)
            if isinstance(active, _BecameActive):
                result._skip(active.reason)
                return SweepEvent(tid, active.reason, latest=latest)
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

    def _still_idle(self, thread_id: str, before: str) -> Guard:
        def check(handle: Any) -> None:
            latest = self._journal.latest_checkpoint(handle, thread_id)
            if latest is not None and latest >= before:
                raise _BecameActive(thread_id, latest)
            if self._journal.run_in_flight(handle, thread_id):
                raise _BecameActive(thread_id, latest, "active")

        return check


class HistoryMethods(HistoryFlows):
    """The public history and retention methods of the synchronous savers."""

    if TYPE_CHECKING:

        def _prepare(self) -> None: ...
        def _resolve_store_rows(self) -> None: ...

    def _prepare_sweep(self, dry_run: bool) -> None:
        if dry_run:  # read-only: installs nothing (works on a read-only connection)
            self._resolve_store_rows()
        else:
            self._preflight()
            self._prepare()

    def count_idle_threads(self, older_than: timedelta | datetime) -> int:
        """How many threads a sweep with this ``older_than`` would look at (their
        latest checkpoint is older, or undated); read-only, for progress bars."""
        return self._candidates_flow(older_than)

    def erase_history(
        self,
        thread_id: str,
        *,
        keep: str = "latest",
        needles: Iterable[str] = (),
        store_namespaces: Iterable[Sequence[str]] | None = None,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> Receipt:
        """Erase the thread's history, keep its latest state: every checkpoint except the
        latest of each namespace LangGraph still loads (``prune(strategy="keep_latest")``
        semantics: subgraph namespaces, pending writes of the kept checkpoint, on
        PostgreSQL the parent holding pre-v4 pending sends), the writes of the removed
        checkpoints and the blobs only they reference, plus the store items under
        ``store_namespaces`` (not given: the saver's ``namespaces_for(thread_id)``, as
        for ``erase_thread``; ``[]`` keeps the store) - atomically, measured, verified
        and signed (receipt kind ``history``). The thread is not tombstoned: the next
        ``invoke`` continues from the kept state.

        ``needles``: values that must be gone (the text a ``RemoveMessage`` removed, an
        email). After the deletion, inside the transaction and before a store outside
        the database is swept, every remaining row of the thread is searched for them
        (raw UTF-8 and JSON ``\\uXXXX`` forms); if one is still there - the latest
        state holds it - ``NeedlesFoundError`` names each location (checkpoint id,
        column or channel) and nothing is deleted anywhere. The store namespaces in
        scope are erased whole, so they keep no copy. The receipt carries salted
        commitments to the needles, never the values.

        Raises ``NothingToEraseError`` when there is no history to remove,
        ``DeltaChannelError`` (a ``NotImplementedError``) for a thread that uses a
        ``DeltaChannel``, ``ErasureIncompleteError`` if anything fails or remains (no
        receipt). ``request``/``authorization`` as for ``erase_thread``.
        """
        er = self._history_request(thread_id, keep, needles, store_namespaces, request,
                                   authorization)  # fmt: skip
        self._preflight()
        self._prepare()
        return self._attested_flow(er, self._scan(residue_scan))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        request: RequestContext | None = None,
    ) -> Any:
        """LangGraph's ``prune``, attested: one receipt per thread, returned as a
        ``list[Receipt]`` (typed ``Any`` to stay compatible with LangGraph's ``-> None``),
        archived and journaled. ``"keep_latest"`` is :meth:`erase_history` of each thread;
        ``"delete"`` is :meth:`delete_thread` of each thread (tombstoned:
        ``reopen_thread`` reuses an id); both with its ``namespaces_for`` store items. A
        thread with nothing to remove gets no receipt. A ``DeltaChannel`` thread refuses
        ``keep_latest`` for every thread before anything is pruned, as LangGraph does."""
        ids = _thread_ids(thread_ids)
        if strategy not in ("keep_latest", "delete"):
            raise ConfigurationError(f"Unknown prune strategy: {strategy!r}")
        if not ids:
            return []
        self._preflight()
        self._prepare()
        return self._prune_flow(ids, strategy, request)

    def erase_idle_threads(
        self,
        older_than: timedelta | datetime,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        tombstone: bool = True,
        request: RequestContext | None = None,
        progress: Progress | None = None,
    ) -> SweepResult:
        """Retention: erase every thread whose latest checkpoint (any namespace) was made
        more than ``older_than`` ago (or before a ``datetime``), one ``erase_thread``
        receipt per thread into the archive (with the thread's ``namespaces_for``
        store items), at most ``limit`` threads per run.

        Threads are selected from the ``checkpoints`` primary key by the time inside
        their uuid6 checkpoint ids (never reading values or blobs); a thread whose ids
        are not uuid6 is skipped as ``undated``. Each thread is checked again inside its
        erasure transaction: one that became active meanwhile is skipped. Resumable: a
        re-run after a crash first issues the receipts of committed erasures, and finds
        nothing left of the erased threads, so no receipt is duplicated or missing.
        ``dry_run`` measures what would be erased and changes nothing. ``tombstone``:
        refuse later writes to an erased thread id (default, as ``erase_thread``).
        ``progress`` is called with a :class:`SweepEvent` per thread. Returns counts
        (:class:`SweepResult`); failures are counted there, not raised.
        """
        self._prepare_sweep(dry_run)
        return self._sweep_flow("idle", older_than, limit, dry_run, tombstone, request,
                                progress)  # fmt: skip

    def prune_histories(
        self,
        older_than: timedelta | datetime,
        *,
        keep: str = "latest",
        limit: int | None = None,
        dry_run: bool = False,
        request: RequestContext | None = None,
        progress: Progress | None = None,
    ) -> SweepResult:
        """Retention: :meth:`erase_history` of every thread whose latest checkpoint was
        made more than ``older_than`` ago, with its ``namespaces_for`` store items, one
        receipt per thread (selection, re-check,
        resumption and results as :meth:`erase_idle_threads`; a thread with only its
        latest checkpoints is skipped as ``nothing_to_remove``)."""
        if keep != "latest":
            raise ConfigurationError(f'keep= must be "latest", not {keep!r}')
        self._prepare_sweep(dry_run)
        return self._sweep_flow("history", older_than, limit, dry_run, False, request,
                                progress)  # fmt: skip


class AsyncHistoryMethods(HistoryFlows, AsyncFlows):
    """The public history and retention methods of the async savers (the same flows,
    on a worker thread; ``progress`` is called from that thread)."""

    if TYPE_CHECKING:

        async def _aprepare(self) -> None: ...
        async def _resolve_store_rows_async(self) -> None: ...

    async def _aprepare_sweep(self, dry_run: bool) -> None:
        if dry_run:
            await self._resolve_store_rows_async()
        else:
            self._preflight()
            await self._aprepare()

    async def acount_idle_threads(self, older_than: timedelta | datetime) -> int:
        """Async :meth:`HistoryMethods.count_idle_threads`."""
        return await self._flow(self._candidates_flow, older_than)

    async def aerase_history(
        self,
        thread_id: str,
        *,
        keep: str = "latest",
        needles: Iterable[str] = (),
        store_namespaces: Iterable[Sequence[str]] | None = None,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> Receipt:
        """Async :meth:`HistoryMethods.erase_history`."""
        er = self._history_request(thread_id, keep, needles, store_namespaces, request,
                                   authorization)  # fmt: skip
        self._preflight()
        await self._aprepare()
        receipt = await self._flow(self._attested_flow, er, self._scan(residue_scan))
        self._set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        request: RequestContext | None = None,
    ) -> Any:
        """Async :meth:`HistoryMethods.prune` (returns the ``list[Receipt]``)."""
        ids = _thread_ids(thread_ids)
        if strategy not in ("keep_latest", "delete"):
            raise ConfigurationError(f"Unknown prune strategy: {strategy!r}")
        if not ids:
            return []
        self._preflight()
        await self._aprepare()
        out = await self._flow(self._prune_flow, ids, strategy, request)
        if out:
            self._set_last(out[-1])
        return out

    async def aerase_idle_threads(
        self,
        older_than: timedelta | datetime,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        tombstone: bool = True,
        request: RequestContext | None = None,
        progress: Progress | None = None,
    ) -> SweepResult:
        """Async :meth:`HistoryMethods.erase_idle_threads`."""
        await self._aprepare_sweep(dry_run)
        return await self._flow(
            self._sweep_flow, "idle", older_than, limit, dry_run, tombstone, request, progress
        )

    async def aprune_histories(
        self,
        older_than: timedelta | datetime,
        *,
        keep: str = "latest",
        limit: int | None = None,
        dry_run: bool = False,
        request: RequestContext | None = None,
        progress: Progress | None = None,
    ) -> SweepResult:
        """Async :meth:`HistoryMethods.prune_histories`."""
        if keep != "latest":
            raise ConfigurationError(f'keep= must be "latest", not {keep!r}')
        await self._aprepare_sweep(dry_run)
        return await self._flow(
            self._sweep_flow, "history", older_than, limit, dry_run, False, request, progress
        )
