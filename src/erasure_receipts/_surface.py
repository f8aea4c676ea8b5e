"""The erasure methods every attesting saver has, written once for sync and once for
async: each builds its request through an operation (:mod:`erasure_receipts._ops`) and
runs it on the saver's :class:`~erasure_receipts._engine.eraser.Eraser`.

A saver puts :class:`ErasureMethods` (or :class:`AsyncErasureMethods`) before its
LangGraph parent class, so ``delete_thread`` / ``adelete_thread`` and ``prune`` override
the parent's, and builds ``self._eraser`` in its constructor. The async methods run the
same synchronous flows on a worker thread (``AsyncDatabase.flow``); their database and
reader bridge onto the event loop that owns the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from ._engine.eraser import Eraser, NamespacesFor, PendingErasure, ThreadDigest
from ._engine.seams import Database, ResidueScan
from ._ops import defer as _defer
from ._ops import history as _history
from ._ops import namespace as _namespace
from ._ops import redact as _redact
from ._ops import replay as _replay
from ._ops import shred as _shred
from ._ops import subject as _subject
from ._ops.defer import Deferral, DeferralScope
from ._ops.history import Progress, SweepResult
from ._ops.replay import ReplayedScope, ReplayResult
from ._ops.subject import Location, SubjectDigest
from .errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasedDataRestoredError,
    KeyShreddedError,
    NothingToEraseError,
)
from .log import ReceiptLog
from .privacy import CommitmentKey
from .proof import LeafRecord
from .receipt import Receipt
from .request import Authorization, RequestContext
from .signing import Signer

__all__ = ["AsyncDatabase", "AsyncErasureMethods", "ErasureMethods"]

log = logging.getLogger("erasure_receipts")

T = TypeVar("T")
Select = Callable[[str, tuple[Any, ...]], bool]


class AsyncDatabase(Database, Protocol):
    """An async saver's database: the sync seam (used from the flow's worker thread)
    plus its coroutines on the event loop."""

    async def arun(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(handle, *args)`` under the saver's lock, from the event loop."""
        ...

    async def flow(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the synchronous flow ``fn(*args)`` on a worker thread of this loop."""
        ...

    async def aprepare(self) -> None:
        """Async ``prepare``."""
        ...

    async def aensure_journal(self) -> None:
        """Async ``ensure_journal``."""
        ...

    async def aresolve_store(self) -> None:
        """Async ``resolve_store``."""
        ...


def _key_or_none(key: CommitmentKey | str | os.PathLike[str] | None) -> CommitmentKey | None:
    return None if key is None else _subject._commitment_key("commitments", key)


class _Configured:
    """The saver's configuration, kept by its eraser (one place), read and set here."""

    _eraser: Eraser

    @property
    def signer(self) -> Signer:
        """The Ed25519 key that signs receipts."""
        return self._eraser.signer

    @signer.setter
    def signer(self, value: Signer) -> None:
        self._eraser.signer = value

    @property
    def store(self) -> Any:
        """The application's ``BaseStore`` (or None)."""
        return self._eraser.store

    @store.setter
    def store(self, value: Any) -> None:
        if value is None and self._eraser.namespaces_for is not None:
            raise ConfigurationError("namespaces_for= needs a store=")
        self._eraser.store = value
        self._eraser.db.forget_store()  # located again before the next erasure

    @property
    def archive(self) -> Path | ReceiptLog | None:
        """Where receipts are written (a directory or a ``ReceiptLog``)."""
        return self._eraser.archive

    @archive.setter
    def archive(self, value: str | Path | ReceiptLog | None) -> None:
        self._eraser.archive = (
            value if value is None or isinstance(value, ReceiptLog) else Path(value)
        )

    @property
    def namespaces_for(self) -> NamespacesFor | None:
        """``thread_id -> store namespaces`` of thread-scoped operations."""
        return self._eraser.namespaces_for

    @namespaces_for.setter
    def namespaces_for(self, value: NamespacesFor | None) -> None:
        if value is not None and not callable(value):
            raise ArgumentTypeError("namespaces_for= must be a function thread_id -> namespaces")
        if value is not None and self._eraser.store is None:
            raise ConfigurationError(
                "namespaces_for= names store namespaces to erase, but no store= was given"
            )
        self._eraser.namespaces_for = value

    @property
    def clock(self) -> Callable[[], datetime] | None:
        """The injected clock (None: the system's)."""
        return self._eraser.clock

    @clock.setter
    def clock(self, value: Callable[[], datetime] | None) -> None:
        self._eraser.clock = value

    @property
    def residue_scan(self) -> ResidueScan:
        """The saver's residue scan setting."""
        return self._eraser.residue_scan

    @residue_scan.setter
    def residue_scan(self, value: ResidueScan) -> None:
        from ._engine.eraser import residue_mode

        self._eraser.residue_scan = residue_mode(value)

    @property
    def refuse_erased_reads(self) -> bool:
        """Whether ``get_tuple`` of a tombstoned thread raises ``ThreadErasedError``."""
        return self._eraser.refuse_erased_reads

    @refuse_erased_reads.setter
    def refuse_erased_reads(self, value: bool) -> None:
        self._eraser.refuse_erased_reads = bool(value)

    @property
    def tombstone_policy(self) -> str:
        """``new_conversations`` or ``refuse_all`` (what the tombstone refuses)."""
        return self._eraser.tombstone_policy

    @tombstone_policy.setter
    def tombstone_policy(self, value: str) -> None:
        from .receipt import TOMBSTONE_POLICIES

        if value not in TOMBSTONE_POLICIES:
            raise ConfigurationError(
                f"tombstone_policy= must be one of {TOMBSTONE_POLICIES}, not {value!r}"
            )
        self._eraser.tombstone_policy = value

    @property
    def erase_compacted(self) -> str | None:
        """The compaction policy (``erase_compacted=``): None, ``"erase_history"`` or
        ``"redact"``; settable (``True`` means ``"erase_history"``)."""
        return cast(Any, self)._compactions.policy  # type: ignore[no-any-return]

    @erase_compacted.setter
    def erase_compacted(self, value: bool | str | None) -> None:
        from ._ops.compaction import policy_of

        cast(Any, self)._compactions.policy = policy_of(value)

    @property
    def last_receipt(self) -> Receipt | None:
        """The receipt of the last erasure made *in this thread or asyncio task*.

        Per context, so concurrent erasures (threads, tasks) never see each other's.
        """
        return self._eraser.last_receipt

    @property
    def check_erasures(self) -> str | os.PathLike[str] | ReceiptLog | None:
        """The startup guard's receipt archive or log (None: off): ``setup()`` refuses
        to serve while an erasure it attests has data again (see ``replay_erasures``)."""
        return self._eraser.check_erasures

    @check_erasures.setter
    def check_erasures(self, value: str | os.PathLike[str] | ReceiptLog | None) -> None:
        if value is not None and not isinstance(value, str | os.PathLike | ReceiptLog):
            raise ConfigurationError(
                "check_erasures= must be a receipt archive directory, a ReceiptLog or None"
            )
        self._eraser.check_erasures = value

    def _replay_args(
        self, trust: Any, privacy_key: Any, subject_ids: Iterable[str]
    ) -> tuple[CommitmentKey | None, Any, tuple[str, ...]]:
        if isinstance(subject_ids, str):
            raise ArgumentTypeError("subject_ids= must be a list of subject ids, not a str")
        keys = [self._eraser.signer.public_key] if trust is None else trust
        return _key_or_none(privacy_key), keys, tuple(str(x) for x in subject_ids)

    def _check_erasures(self, check: Callable[[], list[str]] | None = None) -> None:
        """The startup guard (``check_erasures=``): raise ``ErasedDataRestoredError``
        while an erased scope has data again. Checked once per saver; a failure is kept
        (every later ``setup`` raises it at once) until ``replay_erasures`` succeeds."""
        er = self._eraser
        if er.check_erasures is None or _replay.guard_is_off() or er.guard_state is True:
            return
        if er.guard_state is None:
            with _replay.guard_off():
                stale = check() if check is not None else self._stale()
            if not stale:
                er.guard_state = True
                return
            shown = ", ".join(stale[:5]) + (f" and {len(stale) - 5} more" * (len(stale) > 5))
            er.guard_state = (
                f"erased data is back in this database (restored from a backup?): {shown}; "
                "run replay_erasures() (receipt replay) before serving"
            )
        raise ErasedDataRestoredError(str(er.guard_state))

    def _stale(self) -> list[str]:
        er = self._eraser
        er.db.resolve_store()  # a store in this database is read as rows, not through its API
        return _replay.stale_scopes(er, er.check_erasures, [er.signer.public_key], None)

    def _replayed(self, result: ReplayResult) -> ReplayResult:
        if not result.dry_run and result.ok:
            self._eraser.guard_state = None  # checked again at the next setup()
        return result


class ErasureMethods(_Configured):
    """``erase_thread``, attested ``delete_thread``, recovery, previews, legal hold,
    history erasure, ``prune``, retention sweeps and subject erasure."""

    def erase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        targets: Sequence[Any] | None = None,
        override_deferral: bool = False,
    ) -> Receipt:
        """Erase every row of the thread (all tables, all namespaces) and its store items.

        The store items are those under ``store_namespaces`` - or, if it is not given,
        under the saver's ``namespaces_for(thread_id)``, which are erased only with rows
        of the thread itself: a thread id with no stored rows raises
        ``NothingToEraseError`` and erases nothing (even with ``allow_empty``; name the
        namespaces to erase them on their own).

        Returns the signed receipt (also written to ``archive`` if set). Raises
        ``ErasureIncompleteError`` - and issues no receipt - if anything fails or remains;
        ``NothingToEraseError`` (nothing deleted, no tombstone) if the scope holds no rows,
        unless ``allow_empty``; ``ConfigurationError`` before deleting if the receipt could
        not be archived. ``residue_scan`` overrides the saver's setting for this call
        (PostgreSQL records it as ``not_applicable``). ``request`` (a
        :class:`RequestContext`) and ``authorization`` (an approver's
        :class:`Authorization`) become the receipt's ``request``/``authorization``
        (RECEIPT_SPEC.md 9.6); an authorization for another scope or request id, or past
        its ``not_after`` by the saver's clock, is refused before anything is deleted
        (``AuthorizationError``). ``targets`` (``erasure_receipts.targets``) are erased
        with the thread, after the saver's (RECEIPT_SPEC.md 9.13).

        A thread retained by an open deferral (:meth:`defer`) raises ``DeferredError``
        (checked inside the erasure's transaction; nothing deleted) unless
        ``override_deferral=True``: the receipt then names the deferral in
        ``deferral_of`` and the deferral is closed as executed.
        """
        erasure = self._eraser.request(
            thread_id,
            store_namespaces,
            tombstone,
            allow_empty,
            request=request,
            authorization=authorization,
            targets=targets,
        )
        erasure = replace(erasure, override_deferral=bool(override_deferral))
        self._eraser.preflight()
        self._eraser.db.prepare()
        return self._eraser.erase(erasure, self._eraser.scan(residue_scan))

    def delete_thread(self, thread_id: str) -> None:
        """Attested ``delete_thread``: ``erase_thread(thread_id)``, so with its
        ``namespaces_for`` store namespaces.

        The receipt is archived (if ``archive`` is set) and kept in ``last_receipt``. A
        thread with no stored rows is a no-op, as for LangGraph's savers: nothing is
        erased - not its ``namespaces_for`` store items either -, no receipt, no
        tombstone.
        """
        try:
            self.erase_thread(thread_id)
        except NothingToEraseError as exc:
            log.info("delete_thread: %s", exc.message)

    def recover_receipts(
        self,
        *,
        min_age_seconds: float = 300.0,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> list[Receipt]:
        """Issue the receipts of erasures that committed but never got one.

        Only entries older than ``min_age_seconds`` are touched, and only those whose
        erasure is gone: a running erasure holds the lease of its entry until its
        receipt is issued (``lease.py``), so it is never attested twice. An entry whose
        statement was journaled is simply signed (the same receipt the original process
        would have produced); otherwise the scope is re-verified now
        (``raw_rows_zero_at_recovery``) and the receipt issued under the original id,
        time and pre-state digest. Entries that cannot be attested stay open and are
        listed in the ``ErasureIncompleteError`` raised at the end, whose ``recovered``
        attribute holds the receipts that were issued and ``unparsable`` the receipt
        ids of entries that could not be read (not UTF-8, a time or JSON that does not
        parse: left as they are, the others still recovered).
        A privacy-mode erasure's entry holds its request sealed: it opens with the
        ``commitment_key`` (key or key file; the saver that ran the erasure already
        holds it), otherwise that entry is listed as not attested.
        """
        key = _key_or_none(commitment_key)
        self._eraser.db.prepare()
        return self._eraser.recover(min_age_seconds, key)

    def pending_erasures(self) -> list[PendingErasure]:
        """Erasures that committed but have no receipt yet, oldest first, with their age
        (``recover_receipts(min_age_seconds=...)`` skips the younger ones)."""
        self._eraser.db.ensure_journal()
        return self._eraser.pending()

    def journal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Every receipt this database's erasure journal holds (optionally of one thread).

        Receipts are kept in the journal as well as returned/archived, so one is never
        lost with the process that received it.
        """
        self._eraser.db.ensure_journal()
        return self._eraser.journal_receipts(thread_id)

    def digest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] | None = None
    ) -> ThreadDigest:
        """The measurement an erasure would take now, without deleting anything (the
        store scope as for ``erase_thread``: ``namespaces_for`` unless given).

        Read-only: it writes nothing and installs nothing (SQLite: it also works on a
        ``mode=ro`` connection and raises ``NotALangGraphDatabaseError`` for a database
        without checkpoint tables).
        """
        request = self._eraser.request(thread_id, store_namespaces, False)
        self._eraser.db.resolve_store()
        return self._eraser.db.run(self._eraser.preview, request)

    def export_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        *,
        select: Select | None = None,
    ) -> list[LeafRecord]:
        """Legal hold: the scope's rows with their inclusion proofs, before an erasure.

        Every row an erasure with the same arguments would measure now - or those for
        which ``select(table, primary_key)`` is true - as a :class:`LeafRecord`: its
        exact leaf data, leaf index, the tree size and root, and its RFC 9162 audit
        path. Keep ``record.to_json()`` (ROW.json); after the erasure ``receipt prove``
        shows the row was inside it. Read-only. The proofs hold only if nothing in the
        scope changes before the erasure (tree size and root must equal the receipt's).
        """
        request = self._eraser.request(thread_id, store_namespaces, False)
        self._eraser.db.resolve_store()
        return self._eraser.export(request, select)

    def reopen_thread(self, thread_id: str) -> bool:
        """Remove the tombstone so the thread id can be written again (explicit opt-in)."""
        self._eraser.db.ensure_journal()
        return bool(self._eraser.db.run(self._eraser.journal.reopen, str(thread_id)))

    def is_erased(self, thread_id: str) -> bool:
        """Whether the thread id is tombstoned (erased and not reopened)."""
        self._eraser.db.ensure_journal()
        return bool(self._eraser.db.run(self._eraser.journal.is_erased, str(thread_id)))

    def _prepare_sweep(self, dry_run: bool) -> None:
        if dry_run:  # read-only: installs nothing (works on a read-only connection)
            self._eraser.db.resolve_store()
        else:
            self._eraser.preflight()
            self._eraser.db.prepare()

    def count_idle_threads(self, older_than: timedelta | datetime) -> int:
        """How many threads a sweep with this ``older_than`` would look at (their
        latest checkpoint is older, or undated); read-only, for progress bars."""
        return _history.candidates(self._eraser, older_than)

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
        override_deferral: bool = False,
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
        receipt). ``request``/``authorization``/``override_deferral`` as for
        ``erase_thread``.
        """
        er = _history.history_request(
            self._eraser, thread_id, keep, needles, store_namespaces, request, authorization
        )
        er = replace(er, override_deferral=bool(override_deferral))
        self._eraser.preflight()
        self._eraser.db.prepare()
        return self._eraser.erase(er, self._eraser.scan(residue_scan))

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
        ids = _history._thread_ids(thread_ids)
        if strategy not in ("keep_latest", "delete"):
            raise ConfigurationError(f"Unknown prune strategy: {strategy!r}")
        if not ids:
            return []
        self._eraser.preflight()
        self._eraser.db.prepare()
        return _history.prune(self._eraser, ids, strategy, request)

    def erase_idle_threads(
        self,
        older_than: timedelta | datetime,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        tombstone: bool = True,
        request: RequestContext | None = None,
        progress: Progress | None = None,
        batch: bool | int = False,
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

        ``batch``: ``True`` (or a largest number of threads, up to 1000) erases the
        threads in batches, one transaction and one ``subject`` receipt per batch whose
        units bind each thread's rows (``receipt prove`` shows one thread is in it),
        sized so the write lock is held about 100 ms; on PostgreSQL several sweepers
        with ``batch`` split the threads between them (RECEIPT_SPEC.md 9.15). Default
        ``False``: one ``thread`` receipt per thread.
        """
        self._prepare_sweep(dry_run)
        return _history.sweep(
            self._eraser, "idle", older_than, limit, dry_run, tombstone, request, progress,
            batch,
        )  # fmt: skip

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
        return _history.sweep(
            self._eraser, "history", older_than, limit, dry_run, False, request, progress
        )

    def erase_subject(
        self,
        subject_id: str,
        *,
        threads: Iterable[str] = (),
        metadata_key: str | None = None,
        store_namespaces: Iterable[Sequence[str]] = (),
        needles: Iterable[str] = (),
        privacy: str | None = None,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        targets: Sequence[Any] | None = None,
        override_deferral: bool = False,
    ) -> Receipt:
        """Erase every thread of one data subject and its store prefixes, in one
        transaction, into one receipt (kind ``subject``) with one unit per thread.

        The threads are ``threads`` plus, with ``metadata_key``, every thread with a
        checkpoint whose metadata has ``metadata_key == subject_id`` (found again under
        the write lock; see the module docs). With ``needles``, the whole database is
        searched after the deletion and before commit (raw bytes and JSON ``\\uXXXX``
        forms): a needle left anywhere - another thread, an unlisted store namespace -
        refuses the erasure with ``NeedlesFoundError`` naming every location, and
        nothing is deleted. ``privacy="commitments"`` with a ``commitment_key``
        (``CommitmentKey`` or key file) puts only HMAC commitments of the subject,
        thread ids, namespaces, needles and database path into the receipt, and into
        the erasure journal, errors and log lines (the journal seals the raw request
        for recovery with the key; see ``recover_receipts(commitment_key=)``).

        Raises ``NothingToEraseError`` if no thread is found or the scope holds no rows
        (unless ``allow_empty``), ``ErasureIncompleteError`` if anything fails or
        remains (no receipt), ``ConfigurationError`` for bad arguments.
        ``request``/``authorization`` as for ``erase_thread`` (RECEIPT_SPEC.md 9.6): the
        authorization names the subject, store namespaces, the explicit ``threads`` and
        the ``metadata_key`` (all must be the authorized ones), not the threads found.
        ``targets`` as for ``erase_thread``; a ``key="subject"`` target is erased by the
        subject's id (its own unit), a ``key="thread"`` one by each thread's.
        ``override_deferral`` as for ``erase_thread``.
        """
        spec = _subject.subject_spec(
            self._eraser,
            subject_id,
            threads,
            metadata_key,
            store_namespaces,
            needles,
            privacy,
            commitment_key,
            tombstone,
            allow_empty,
        )
        spec = replace(
            spec,
            context=request,
            authorization=authorization,
            targets=self._eraser.with_targets(targets),
            override_deferral=bool(override_deferral),
        )
        self._eraser.preflight()
        self._eraser.db.prepare()
        return _subject.erase_subject(self._eraser, spec, self._eraser.scan(residue_scan))

    def digest_subject(
        self,
        subject_id: str,
        *,
        threads: Iterable[str] = (),
        metadata_key: str | None = None,
        store_namespaces: Iterable[Sequence[str]] = (),
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> SubjectDigest:
        """Preview ``erase_subject`` (read-only): the threads it would erase, each
        unit's digest and counts, and the pre-state root (with ``commitment_key``, the
        root a privacy-mode receipt would record)."""
        spec = _subject.subject_spec(
            self._eraser,
            subject_id,
            threads,
            metadata_key,
            store_namespaces,
            (),
            None if commitment_key is None else "commitments",
            commitment_key,
            False,
            True,
        )
        self._eraser.db.resolve_store()
        return _subject.digest_subject(self._eraser, spec)

    def locate(self, needles: Iterable[str]) -> list[Location]:
        """Every stored location of each value: all checkpoint tables and the store
        (rows of this database by raw byte search, a store elsewhere through its API),
        and the saver's erasure targets that can be searched (tables of this database,
        vector stores whose documents can be listed), in its raw UTF-8 form and its
        JSON ``\\uXXXX``-escaped forms. Read-only."""
        values = _subject._needles(needles)
        self._eraser.db.resolve_store()
        return _subject.locate(self._eraser, values)

    def replay_erasures(
        self,
        source: str | os.PathLike[str] | ReceiptLog,
        *,
        dry_run: bool = False,
        trust: Any = None,
        privacy_key: CommitmentKey | str | os.PathLike[str] | None = None,
        subject_ids: Iterable[str] = (),
        progress: Callable[[ReplayedScope], None] | None = None,
        jobs: int = 1,
    ) -> ReplayResult:
        """After a restore: re-erase what came back of every erasure ``source`` (a
        receipt archive directory or a :class:`ReceiptLog`) attests.

        Only receipts that verify against ``trust`` (a ``TrustStore`` or a list of
        ``PublicKey``; default: this saver's signing key) are used; the others are
        listed in the result's ``rejected``. For each erased scope (thread, history,
        subject; privacy-mode receipts opened with ``privacy_key``, a subject's id from
        ``subject_ids``) what has rows again is re-erased through the ordinary flow, its
        tombstones re-created, and a new receipt issued whose ``replay_of`` names the
        original; a scope still empty is counted, not attested again (a missing
        tombstone is re-created by an attested empty erasure). A scope whose receipt
        this database's journal holds is ``postdated`` (the database is not older than
        the erasure) and left alone. ``dry_run`` lists what reappeared and changes
        nothing. Returns a :class:`ReplayResult` (counts; ``ok`` is False if a scope
        failed or a receipt was rejected); failures are counted there, not raised.
        ``jobs`` > 1 verifies the receipts in that many forked processes (as ``receipt
        verify --jobs``): only from a process without other threads.
        """
        key, keys, ids = self._replay_args(trust, privacy_key, subject_ids)
        if type(jobs) is not int or jobs < 1:
            raise ConfigurationError(f"jobs= must be a positive integer, not {jobs!r}")
        with _replay.guard_off():
            if dry_run:
                self._eraser.db.resolve_store()
            else:
                self._eraser.preflight()
                self._eraser.db.prepare()
            return self._replayed(_replay.replay(
                self._eraser, source, keys, dry_run=dry_run, privacy_key=key, subject_ids=ids,
                progress=progress, jobs=jobs,
            ))  # fmt: skip

    # -- store namespaces (RECEIPT_SPEC.md 8.1, 9.7) -------------------------------------

    def erase_namespace(
        self,
        prefix: Sequence[str],
        *,
        tombstone: bool = True,
        needles: Iterable[str] = (),
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        privacy: str | None = None,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> Receipt:
        """Erase every store item under ``prefix`` (whole labels: ``("users", "al")``
        never touches ``("users", "alice")``; sub-namespaces, TTL-expired items and
        ``store_vectors`` rows included) in one transaction, into one receipt (kind
        ``namespace``). With ``tombstone`` the database then refuses every ``put`` at or
        below the prefix, from any process (``reopen_namespace`` lifts it). With
        ``needles``, the whole database is searched after the deletion, before commit.

        The store must keep its items in the saver's database. Raises
        ``NothingToEraseError`` if nothing is under the prefix (unless ``allow_empty``),
        ``ConfigurationError`` / ``ArgumentTypeError`` for a bad prefix (empty, an empty
        label, a label with ``.``), ``ErasureIncompleteError`` if anything fails.
        ``authorization`` is refused (authorizations name threads and subjects).
        ``privacy="commitments"`` with a ``commitment_key``: the receipt, journal and
        errors name the prefix by its commitment (the tombstone keeps the raw prefix).
        """
        erasure = _namespace.namespace_request(
            self._eraser, prefix, tombstone=tombstone, allow_empty=allow_empty,
            needles=needles, request=request, authorization=authorization,
            privacy=privacy, commitment_key=commitment_key,
        )  # fmt: skip
        self._eraser.preflight()
        self._eraser.db.prepare()
        return _namespace.erase_namespace(self._eraser, erasure, self._eraser.scan(residue_scan))

    def digest_namespace(self, prefix: Sequence[str]) -> ThreadDigest:
        """What ``erase_namespace(prefix)`` would measure now: its pre-deletion digest
        and per-table counts (read-only)."""
        erasure = _namespace.namespace_request(self._eraser, prefix, tombstone=False)
        self._eraser.db.resolve_store()
        return _namespace.digest_namespace(self._eraser, erasure)

    def reopen_namespace(self, prefix: Sequence[str]) -> bool:
        """Remove the prefix's store tombstone (explicit opt-in to write there again);
        True if one existed. An ancestor's tombstone still refuses writes below it."""
        text = ".".join(_namespace.prefix_of(prefix))
        self._eraser.db.ensure_journal()
        return bool(self._eraser.db.run(self._eraser.journal.reopen_namespace, text))

    def is_namespace_erased(self, prefix: Sequence[str]) -> bool:
        """Whether writes to ``prefix`` are refused (it or an ancestor is tombstoned)."""
        self._eraser.db.ensure_journal()
        return _namespace.namespace_erased(self._eraser, prefix) is not None

    def purge_journal(self, older_than: timedelta | datetime) -> int:
        """Delete closed erasure-journal entries (receipt issued) of erasures older than
        ``older_than`` (an age, or a cutoff time); returns how many. Open entries and
        tombstones are kept; purged receipts are no longer in ``journal_receipts()``."""
        self._eraser.db.prepare()
        return _subject.purge(self._eraser, older_than)

    def redact(
        self,
        thread_id: str,
        needles: Iterable[str],
        *,
        replacement: str = _redact.DEFAULT_REPLACEMENT,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        residue_scan: ResidueScan | None = None,
    ) -> Receipt:
        """Redact ``needles`` from the thread and keep its history: every stored row of
        the thread (checkpoints, blobs, pending writes) and of ``store_namespaces`` (in
        the saver's database) that holds a needle is decoded through the saver's serde,
        the needle replaced by ``replacement`` in every string, and re-encoded - in one
        transaction, with writers of the thread held off. Every checkpoint id stays:
        ``get_state_history`` returns the same checkpoints, each loads and can be
        resumed or forked. Receipt kind ``redaction`` (status ``redacted``): digests of
        the rewritten rows before and after, salted commitments to the needles, and 0
        occurrences afterwards (every stored form, and the decoded objects).

        Raises ``ConfigurationError`` for no needles or one shorter than
        ``MIN_NEEDLE_CHARS``, ``NothingToEraseError`` for a thread without rows,
        ``NothingToRedactError`` when no row holds a needle, ``NeedlesFoundError`` (with
        locations; nothing changed) when a needle is out of the serde's reach (a key
        column, an encrypted or compressed value), ``ErasureIncompleteError`` if
        anything fails."""
        er = _redact.redaction_request(
            self._eraser, thread_id, needles, replacement=replacement,
            store_namespaces=store_namespaces, request=request, authorization=authorization,
        )  # fmt: skip
        self._eraser.preflight()
        self._eraser.db.prepare()
        serde = _redact.saver_serde(self)
        return _redact.redact(self._eraser, er, serde, replacement, self._eraser.scan(residue_scan))

    # -- signed decisions to retain (RECEIPT_SPEC.md 9.14) --------------------------------

    def defer(
        self,
        scope: str | DeferralScope,
        *,
        basis: str,
        until: datetime | date | str,
        code: str | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> Receipt:
        """Retain ``scope`` until ``until``: a signed decision not to erase it yet.

        ``scope`` is a thread id or a :class:`DeferralScope` (``.thread(id)``,
        ``.history(id)``, ``.subject(id, threads=..., metadata_key=...)``). The scope is
        measured read-only, as an erasure of it would measure it (one read snapshot;
        nothing is written but the record), and a receipt of kind ``deferral`` (status
        ``retained``) is signed and archived: the scope and its digest now, ``basis``
        (the legal basis, free text) and ``code`` (an optional short identifier such as
        ``"gdpr-17-3-b"``), ``until`` (a ``datetime``, naive as UTC; a ``date``,
        midnight UTC at its start; or RFC 3339 text), and ``request``/``authorization``
        as for an erasure of the scope. The deferral is recorded in the database
        (``deferrals()``): until it ends, an erasure of any of its threads raises
        ``DeferredError`` (``override_deferral=True`` erases anyway) and retention sweeps
        skip them; once ``until`` passes by the saver's clock, the next sweep erases the
        scope with one receipt whose ``deferral_of`` names this receipt.

        Raises ``ConfigurationError`` for an ``until`` not in the future, an empty
        ``basis`` or a malformed ``code``, ``NothingToEraseError`` when the scope holds
        no rows (nothing to retain).
        """
        self._eraser.db.prepare()
        return _defer.defer(
            self._eraser, scope, basis=basis, until=until, code=code, context=request,
            authorization=authorization,
        )  # fmt: skip

    def deferrals(self, state: str | None = None) -> list[Deferral]:
        """Recorded deferrals, oldest first: ``open`` ones, and ``executed`` (the erasure
        receipt in ``closed_by``), ``released`` and ``lapsed`` ones; ``state`` filters.
        Read-only (``[]`` for a database without the library's tables)."""
        return _defer.deferrals(self._eraser, state)

    def release_deferral(self, receipt_id: str, *, reason: str) -> Deferral:
        """End an open deferral early, without erasing: recorded with ``reason`` and the
        time (state ``released``; no receipt is signed). The scope can then be erased,
        and sweeps no longer skip it. ``ConfigurationError`` if it is not open."""
        self._eraser.db.ensure_journal()
        return _defer.release_deferral(self._eraser, receipt_id, reason)

    # -- crypto-shredding (RECEIPT_SPEC.md 9.16; erasure_receipts.shredding) ---------------

    def shred_subject(self, subject: str) -> Receipt:
        """Destroy the data key of ``subject`` in the key store of this saver's
        ``encryption``: every row of the subject's threads, in this database and in every
        backup or copy of it, can no longer be decrypted (provided no copy of the key
        survives: the key store's own backups must expire). The key store is scrubbed
        (SQLite: ``secure_delete``, ``VACUUM``, a scan of its files for the key); each
        thread is then read through this saver and must refuse (``KeyShreddedError``).
        Returns the signed receipt (kind ``shred``). ``ConfigurationError`` without
        encryption or without a key for the subject; ``ErasureIncompleteError`` if a
        check fails after the key was destroyed (the key stays destroyed)."""
        enc = _encryption_of(self)
        name = _shred.key_to_shred(enc, subject=subject, thread_id=None)
        return _shred.shred(self._eraser, enc, type(self).__name__, name, self._shred_probe)

    def shred_thread(self, thread_id: str) -> Receipt:
        """:meth:`shred_subject` for a thread written without a subject (its own key).
        A thread under a subject's key is refused: ``shred_subject`` shreds it."""
        enc = _encryption_of(self)
        name = _shred.key_to_shred(enc, subject=None, thread_id=thread_id)
        return _shred.shred(self._eraser, enc, type(self).__name__, name, self._shred_probe)

    def _shred_probe(self, thread_id: str) -> str:
        try:
            rows = list(self.list({"configurable": {"thread_id": thread_id}}))  # type: ignore[attr-defined]
        except KeyShreddedError:
            return "refused"
        return "readable" if rows else "empty"


class AsyncErasureMethods(_Configured):
    """The async twins of :class:`ErasureMethods`: the same flows on a worker thread."""

    @property
    def _adb(self) -> AsyncDatabase:
        return cast(AsyncDatabase, self._eraser.db)

    async def aerase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        targets: Sequence[Any] | None = None,
        override_deferral: bool = False,
    ) -> Receipt:
        """Async :meth:`ErasureMethods.erase_thread`."""
        erasure = self._eraser.request(
            thread_id,
            store_namespaces,
            tombstone,
            allow_empty,
            request=request,
            authorization=authorization,
            targets=targets,
        )
        erasure = replace(erasure, override_deferral=bool(override_deferral))
        self._eraser.preflight()
        await self._adb.aprepare()
        receipt = await self._adb.flow(self._eraser.erase, erasure, self._eraser.scan(residue_scan))
        self._eraser.set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def adelete_thread(self, thread_id: str) -> None:
        """Attested ``adelete_thread``: ``aerase_thread(thread_id)``; a thread with no
        stored rows is a no-op (nothing erased, no receipt, no tombstone)."""
        try:
            await self.aerase_thread(thread_id)
        except NothingToEraseError as exc:
            log.info("adelete_thread: %s", exc.message)

    async def arecover_receipts(
        self,
        *,
        min_age_seconds: float = 300.0,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> list[Receipt]:
        """Async :meth:`ErasureMethods.recover_receipts`."""
        key = _key_or_none(commitment_key)
        await self._adb.aprepare()
        out = await self._adb.flow(self._eraser.recover, min_age_seconds, key)
        if out:
            self._eraser.set_last(out[-1])
        return out

    async def apending_erasures(self) -> list[PendingErasure]:
        """Async :meth:`ErasureMethods.pending_erasures`."""
        await self._adb.aensure_journal()
        return await self._adb.flow(self._eraser.pending)

    async def ajournal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Async :meth:`ErasureMethods.journal_receipts`."""
        await self._adb.aensure_journal()
        return await self._adb.flow(self._eraser.journal_receipts, thread_id)

    async def adigest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] | None = None
    ) -> ThreadDigest:
        """Async :meth:`ErasureMethods.digest_thread` (read-only too)."""
        request = self._eraser.request(thread_id, store_namespaces, False)
        await self._adb.aresolve_store()
        return await self._adb.arun(self._eraser.preview, request)

    async def aexport_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        *,
        select: Select | None = None,
    ) -> list[LeafRecord]:
        """Async :meth:`ErasureMethods.export_leaves` (read-only too)."""
        request = self._eraser.request(thread_id, store_namespaces, False)
        await self._adb.aresolve_store()
        return await self._adb.flow(self._eraser.export, request, select)

    async def areopen_thread(self, thread_id: str) -> bool:
        """Async :meth:`ErasureMethods.reopen_thread`."""
        await self._adb.aensure_journal()
        return bool(await self._adb.arun(self._eraser.journal.reopen, str(thread_id)))

    async def ais_erased(self, thread_id: str) -> bool:
        """Async :meth:`ErasureMethods.is_erased`."""
        await self._adb.aensure_journal()
        return bool(await self._adb.arun(self._eraser.journal.is_erased, str(thread_id)))

    async def _aprepare_sweep(self, dry_run: bool) -> None:
        if dry_run:
            await self._adb.aresolve_store()
        else:
            self._eraser.preflight()
            await self._adb.aprepare()

    async def acount_idle_threads(self, older_than: timedelta | datetime) -> int:
        """Async :meth:`ErasureMethods.count_idle_threads`."""
        return await self._adb.flow(_history.candidates, self._eraser, older_than)

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
        override_deferral: bool = False,
    ) -> Receipt:
        """Async :meth:`ErasureMethods.erase_history`."""
        er = _history.history_request(
            self._eraser, thread_id, keep, needles, store_namespaces, request, authorization
        )
        er = replace(er, override_deferral=bool(override_deferral))
        self._eraser.preflight()
        await self._adb.aprepare()
        receipt = await self._adb.flow(self._eraser.erase, er, self._eraser.scan(residue_scan))
        self._eraser.set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        request: RequestContext | None = None,
    ) -> Any:
        """Async :meth:`ErasureMethods.prune` (returns the ``list[Receipt]``)."""
        ids = _history._thread_ids(thread_ids)
        if strategy not in ("keep_latest", "delete"):
            raise ConfigurationError(f"Unknown prune strategy: {strategy!r}")
        if not ids:
            return []
        self._eraser.preflight()
        await self._adb.aprepare()
        out = await self._adb.flow(_history.prune, self._eraser, ids, strategy, request)
        if out:
            self._eraser.set_last(out[-1])
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
        batch: bool | int = False,
    ) -> SweepResult:
        """Async :meth:`ErasureMethods.erase_idle_threads`."""
        await self._aprepare_sweep(dry_run)
        return await self._adb.flow(
            _history.sweep,
            self._eraser,
            "idle",
            older_than,
            limit,
            dry_run,
            tombstone,
            request,
            progress,
            batch,
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
        """Async :meth:`ErasureMethods.prune_histories`."""
        if keep != "latest":
            raise ConfigurationError(f'keep= must be "latest", not {keep!r}')
        await self._aprepare_sweep(dry_run)
        return await self._adb.flow(
            _history.sweep,
            self._eraser,
            "history",
            older_than,
            limit,
            dry_run,
            False,
            request,
            progress,
        )

    async def aerase_subject(
        self,
        subject_id: str,
        *,
        threads: Iterable[str] = (),
        metadata_key: str | None = None,
        store_namespaces: Iterable[Sequence[str]] = (),
        needles: Iterable[str] = (),
        privacy: str | None = None,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        targets: Sequence[Any] | None = None,
        override_deferral: bool = False,
    ) -> Receipt:
        """Async :meth:`ErasureMethods.erase_subject`."""
        spec = _subject.subject_spec(
            self._eraser,
            subject_id,
            threads,
            metadata_key,
            store_namespaces,
            needles,
            privacy,
            commitment_key,
            tombstone,
            allow_empty,
        )
        spec = replace(
            spec,
            context=request,
            authorization=authorization,
            targets=self._eraser.with_targets(targets),
            override_deferral=bool(override_deferral),
        )
        self._eraser.preflight()
        await self._adb.aprepare()
        receipt = await self._adb.flow(
            _subject.erase_subject, self._eraser, spec, self._eraser.scan(residue_scan)
        )
        self._eraser.set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def adigest_subject(
        self,
        subject_id: str,
        *,
        threads: Iterable[str] = (),
        metadata_key: str | None = None,
        store_namespaces: Iterable[Sequence[str]] = (),
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> SubjectDigest:
        """Async :meth:`ErasureMethods.digest_subject`."""
        spec = _subject.subject_spec(
            self._eraser,
            subject_id,
            threads,
            metadata_key,
            store_namespaces,
            (),
            None if commitment_key is None else "commitments",
            commitment_key,
            False,
            True,
        )
        await self._adb.aresolve_store()
        return await self._adb.flow(_subject.digest_subject, self._eraser, spec)

    async def alocate(self, needles: Iterable[str]) -> list[Location]:
        """Async :meth:`ErasureMethods.locate`."""
        values = _subject._needles(needles)
        await self._adb.aresolve_store()
        return await self._adb.flow(_subject.locate, self._eraser, values)

    async def areplay_erasures(
        self,
        source: str | os.PathLike[str] | ReceiptLog,
        *,
        dry_run: bool = False,
        trust: Any = None,
        privacy_key: CommitmentKey | str | os.PathLike[str] | None = None,
        subject_ids: Iterable[str] = (),
        progress: Callable[[ReplayedScope], None] | None = None,
    ) -> ReplayResult:
        """Async :meth:`ErasureMethods.replay_erasures`."""
        key, keys, ids = self._replay_args(trust, privacy_key, subject_ids)
        with _replay.guard_off():
            if dry_run:
                await self._adb.aresolve_store()
            else:
                self._eraser.preflight()
                await self._adb.aprepare()
            result: ReplayResult = await self._adb.flow(
                partial(_replay.replay, dry_run=dry_run, privacy_key=key, subject_ids=ids,
                        progress=progress),
                self._eraser, source, keys,
            )  # fmt: skip
        if result.receipts:
            self._eraser.set_last(result.receipts[-1])
        return self._replayed(result)

    async def _acheck_erasures(self) -> None:
        """Async :meth:`_check_erasures` (the check runs on a worker thread)."""
        er = self._eraser
        if er.check_erasures is None or _replay.guard_is_off() or er.guard_state is not None:
            self._check_erasures()
            return
        with _replay.guard_off():
            await self._adb.aresolve_store()
            stale: list[str] = await self._adb.flow(
                _replay.stale_scopes, er, er.check_erasures, [er.signer.public_key], None
            )
        self._check_erasures(lambda: stale)

    async def aerase_namespace(
        self,
        prefix: Sequence[str],
        *,
        tombstone: bool = True,
        needles: Iterable[str] = (),
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        privacy: str | None = None,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> Receipt:
        """Async :meth:`ErasureMethods.erase_namespace`."""
        erasure = _namespace.namespace_request(
            self._eraser, prefix, tombstone=tombstone, allow_empty=allow_empty,
            needles=needles, request=request, authorization=authorization,
            privacy=privacy, commitment_key=commitment_key,
        )  # fmt: skip
        self._eraser.preflight()
        await self._adb.aprepare()
        receipt = await self._adb.flow(
            _namespace.erase_namespace, self._eraser, erasure, self._eraser.scan(residue_scan)
        )
        self._eraser.set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def adigest_namespace(self, prefix: Sequence[str]) -> ThreadDigest:
        """Async :meth:`ErasureMethods.digest_namespace` (read-only too)."""
        erasure = _namespace.namespace_request(self._eraser, prefix, tombstone=False)
        await self._adb.aresolve_store()
        return await self._adb.flow(_namespace.digest_namespace, self._eraser, erasure)

    async def areopen_namespace(self, prefix: Sequence[str]) -> bool:
        """Async :meth:`ErasureMethods.reopen_namespace`."""
        text = ".".join(_namespace.prefix_of(prefix))
        await self._adb.aensure_journal()
        return bool(await self._adb.arun(self._eraser.journal.reopen_namespace, text))

    async def ais_namespace_erased(self, prefix: Sequence[str]) -> bool:
        """Async :meth:`ErasureMethods.is_namespace_erased`."""
        await self._adb.aensure_journal()
        found = await self._adb.flow(_namespace.namespace_erased, self._eraser, prefix)
        return found is not None

    async def apurge_journal(self, older_than: timedelta | datetime) -> int:
        """Async :meth:`ErasureMethods.purge_journal`."""
        await self._adb.aprepare()
        return await self._adb.flow(_subject.purge, self._eraser, older_than)

    async def aredact(
        self,
        thread_id: str,
        needles: Iterable[str],
        *,
        replacement: str = _redact.DEFAULT_REPLACEMENT,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
        residue_scan: ResidueScan | None = None,
    ) -> Receipt:
        """Async :meth:`ErasureMethods.redact`."""
        er = _redact.redaction_request(
            self._eraser, thread_id, needles, replacement=replacement,
            store_namespaces=store_namespaces, request=request, authorization=authorization,
        )  # fmt: skip
        self._eraser.preflight()
        await self._adb.aprepare()
        serde = _redact.saver_serde(self)
        receipt = await self._adb.flow(
            _redact.redact, self._eraser, er, serde, replacement, self._eraser.scan(residue_scan)
        )
        self._eraser.set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def adefer(
        self,
        scope: str | DeferralScope,
        *,
        basis: str,
        until: datetime | date | str,
        code: str | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> Receipt:
        """Async :meth:`ErasureMethods.defer`."""
        await self._adb.aprepare()
        return await self._adb.flow(
            partial(_defer.defer, basis=basis, until=until, code=code, context=request,
                    authorization=authorization),
            self._eraser, scope,
        )  # fmt: skip

    async def adeferrals(self, state: str | None = None) -> list[Deferral]:
        """Async :meth:`ErasureMethods.deferrals`."""
        return await self._adb.flow(_defer.deferrals, self._eraser, state)

    async def arelease_deferral(self, receipt_id: str, *, reason: str) -> Deferral:
        """Async :meth:`ErasureMethods.release_deferral`."""
        await self._adb.aensure_journal()
        return await self._adb.flow(_defer.release_deferral, self._eraser, receipt_id, reason)

    # -- crypto-shredding (RECEIPT_SPEC.md 9.16) ------------------------------------------

    async def ashred_subject(self, subject: str) -> Receipt:
        """Async :meth:`ErasureMethods.shred_subject`."""
        enc = _encryption_of(self)
        name = _shred.key_to_shred(enc, subject=subject, thread_id=None)
        return await self._ashred(enc, name)

    async def ashred_thread(self, thread_id: str) -> Receipt:
        """Async :meth:`ErasureMethods.shred_thread`."""
        enc = _encryption_of(self)
        name = _shred.key_to_shred(enc, subject=None, thread_id=thread_id)
        return await self._ashred(enc, name)

    async def _ashred(self, enc: Any, name: str) -> Receipt:
        loop = asyncio.get_running_loop()

        async def read(thread_id: str) -> str:
            try:
                rows = [t async for t in self.alist({"configurable": {"thread_id": thread_id}})]  # type: ignore[attr-defined]
            except KeyShreddedError:
                return "refused"
            return "readable" if rows else "empty"

        def probe(thread_id: str) -> str:
            return asyncio.run_coroutine_threadsafe(read(thread_id), loop).result()

        # Through flow(): the shred reads the data database (its plaintext-row check).
        return await self._adb.flow(
            _shred.shred, self._eraser, enc, type(self).__name__, name, probe
        )


def _encryption_of(saver: Any) -> Any:
    enc = getattr(saver, "encryption", None)
    if enc is None:
        raise ConfigurationError(
            "this saver has no encryption= (erasure_receipts.shredding.Encryption): "
            "there is no key to shred"
        )
    return enc
