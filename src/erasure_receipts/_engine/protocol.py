"""The erasure protocol, written once for every backend: measure -> delete -> verify.

A backend supplies *parts* and a transaction. :func:`erase_rows` streams each part's
rows into one RFC 9162 tree in canonical order, deletes them, proves inside the
transaction that nothing is left, tombstones and journals, commits, scrubs residue and
re-measures the raw tables (the post-state digest). :func:`resume_rows` does the part
after the commit again for a journaled erasure (recovery). The caller (the
:class:`~erasure_receipts._engine.eraser.Eraser`) adds the public-API read-back, then
signs. If anything fails or remains, :class:`ErasureIncompleteError` is raised and no
receipt exists; an ``_Abort`` (and the errors in ``PASS_THROUGH``) leaves the
rolled-back transaction as it is, for the operation that raised it to decide.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from .._backends.keep_latest import Removed
from .._clock import format_time, utc_now
from .._parts import Part, TableCount
from ..digest import units_root
from ..errors import (
    AuthorizationError,
    DeltaChannelError,
    ErasureIncompleteError,
    NeedlesFoundError,
    NothingToEraseError,
)
from .codec import _sealed_request, _withhold_paths, request_to_journal
from .measure import _deferred, _late, _role, _safe_measure, measure_parts, measure_rows
from .needles import _check_needles
from .statement import _kept_checkpoints, _members, _self_check, preflight
from .targets import dependent_note, kept_check, sweep_deferred
from .types import Check, ErasureBackend, ErasureRequest, RowsOutcome

__all__ = ["PASS_THROUGH", "GuardedBackend", "erase_rows", "resume_rows"]


class _Abort(Exception):
    """An operation's own reason to stop an erasure inside its transaction (its scope
    changed under the lock, the thread became active): the transaction rolls back and
    the abort reaches the operation unwrapped, which decides (rescan, skip)."""

    reason = "aborted"


class _ScopeChanged(_Abort):
    """Inside the erasure transaction, the subject has threads its scope lacks (found
    again under the write lock): the operation rescans and starts again."""

    reason = "scope_changed"

    def __init__(self, threads: list[str]) -> None:
        super().__init__(f"{len(threads)} thread(s) of the subject appeared meanwhile")
        self.threads = threads


PASS_THROUGH: tuple[type[BaseException], ...] = (
    _Abort,
    NothingToEraseError,
    AuthorizationError,
    DeltaChannelError,
)
"""Raised through :func:`erase_rows` as they are (after the rollback), never wrapped into
``ErasureIncompleteError``: each is a decision, not a failure of the erasure."""


class GuardedBackend:
    """A saver's backend with a check run first inside its erasure transaction, under
    the write lock (a sweep re-checks that a thread is still idle, a subject erasure
    that its thread list is complete). Everything else is the inner backend's;
    subclasses override what they add."""

    def __init__(self, inner: ErasureBackend, guard: Callable[[], None] | None) -> None:
        self.inner = inner
        self.kind: str = inner.kind
        self.saver: str = inner.saver
        self.store: str | None = inner.store
        self.database: str = inner.database
        self.versions: dict[str, str] = inner.versions
        self._guard = guard

    def parts(self) -> Sequence[Part]:
        """The inner backend's parts."""
        return self.inner.parts()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The inner transaction, with the guard run first inside it."""
        with self.inner.transaction():
            if self._guard is not None:
                self._guard()
            yield

    def read_snapshot(self) -> AbstractContextManager[None]:
        """The inner backend's read view."""
        return self.inner.read_snapshot()

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """The inner backend's tombstone."""
        self.inner.write_tombstone(receipt_id, erased_at)

    def previous_erasure(self) -> str | None:
        """The inner backend's earlier erasure, if any."""
        return self.inner.previous_erasure()

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        """The inner backend's journal entry."""
        self.inner.write_journal(receipt_id, issued_at, entry, thread_id=thread_id)

    def reduce_residue(self) -> list[dict[str, Any]]:
        """The inner backend's residue steps."""
        return self.inner.reduce_residue()

    def lease_entry(self, receipt_id: str) -> None:
        """The inner backend's lease."""
        self.inner.lease_entry(receipt_id)

    @property
    def tombstone_policy(self) -> str:
        """The inner backend's policy."""
        return str(self.inner.tombstone_policy)

    @property
    def checkpoint_namespaces(self) -> set[str]:
        """The inner backend's namespaces."""
        return set(self.inner.checkpoint_namespaces)

    @property
    def store_tombstoned(self) -> bool:
        """The inner backend's store tombstones."""
        return bool(self.inner.store_tombstoned)

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The inner backend's search."""
        return self.inner.find_needles(forms, scope, threads)

    def find_store_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The inner backend's search of a store outside the database."""
        return self.inner.find_store_needles(forms, scope, threads)

    def kept_checkpoints(self) -> list[tuple[str, str]]:
        """The inner backend's kept checkpoints."""
        return list(self.inner.kept_checkpoints())

    def removed_keys(self) -> Removed:
        """The inner backend's removed keys."""
        return self.inner.removed_keys()


def erase_rows(
    backend: ErasureBackend,
    request: ErasureRequest,
    *,
    clock: Callable[[], datetime] = utc_now,
    generator_version: str = "0",
) -> RowsOutcome:
    """Phase one: measure and delete atomically, commit, scrub residue, re-measure.

    The transaction also writes a journal entry (pre-state digest, counts, methods), so
    if the process dies after commit the receipt can still be issued later from the
    database (``resume_rows``) instead of the measurement being lost with the rows.
    """
    parts = list(backend.parts())
    methods = {p.group: p.method for p in sorted(parts, key=lambda p: p.table)}
    preflight(backend, request, parts, methods, generator_version)
    checks: list[Check] = [
        {"name": "raw_rows_zero_in_transaction", "result": "pass",
         "detail": f"{len(parts)} tables counted after delete, before commit"},
    ]  # fmt: skip
    deferred = [p for p in parts if _deferred(p)]
    if deferred:
        checks[0]["detail"] = (
            f"{len(parts) - len(deferred)} tables counted after delete, before commit; "
            f"{len(deferred)} measured, to be swept after the commit"
        )
    kept_targets = kept_check(request)
    if kept_targets is not None:
        checks.append(kept_targets)
    try:
        with backend.transaction():
            # Identity and time are taken once the write lock is held, so receipts of
            # erasures that queued behind each other are ordered like the erasures.
            receipt_id = str(uuid.uuid4())
            # Leased before anything irreversible (a store swept through its API): a
            # lease that cannot be taken fails the erasure while all of it rolls back.
            backend.lease_entry(receipt_id)
            issued_at = format_time(clock())
            if request.authorization is not None:  # 9.6: refused before anything is deleted
                from ..request import Authorization

                Authorization.from_obj(request.authorization).check_time(issued_at)
            needles: dict[str, Any] | None = None

            def settled(deleted: dict[str, TableCount]) -> None:
                # Every refusal the database rows can decide, before a store is swept.
                nonlocal needles
                if not any(_late(p) for p in parts):
                    _nothing_check(backend, request, deleted)
                _own_rows_check(backend, request, parts, deleted)
                _left_check(p for p in parts if not _late(p) and not _deferred(p))
                needles = _check_needles(backend, request)

            m = measure_parts(parts, erase=True, settled=settled)
            _nothing_check(backend, request, m.tables)
            _left_check(p for p in parts if _late(p))
            _check_needles(backend, request, outside=True)
            if request.tombstone:
                backend.write_tombstone(receipt_id, issued_at)
            kept = _kept_checkpoints(backend, request)
            members = _members(backend, request, m, kept, needles)
            root = m.root
            if "units" in members and any(c.rows for c in m.tables.values()):
                # Bind the units as the receipt names them (committed, sorted).
                root = units_root(
                    (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"]))
                    for u in members["units"]
                )
            draft = _self_check(
                backend, request, members, root, m.tables, methods, generator_version,
                receipt_id=receipt_id, issued_at=issued_at, checks=checks,
            )  # fmt: skip
            if request.kind == "history":
                request = replace(request, kept=kept, removed=backend.removed_keys())
            entry = {
                **request_to_journal(replace(request, kept=kept)),
                "pre_digest": root.hex(),
                "pre_tables": {k: v.to_json() for k, v in m.tables.items()},
                "methods": methods,
                "checks": checks,
                "members": members,
            }
            if request.privacy is not None:
                entry.update(_sealed_request(replace(request, kept=kept), receipt_id))
            text = json.dumps(entry, sort_keys=True)
            if request.privacy is None:
                backend.write_journal(receipt_id, issued_at, text)
            else:  # never a raw id in the journal row, not even in its first version
                backend.write_journal(receipt_id, issued_at, text, thread_id=request.journal_id)
    except NeedlesFoundError as exc:
        swept = {p.table: p.irreversible_deleted for p in parts if p.irreversible_deleted}
        if swept:  # the rows rolled back, but a swept store cannot: say so
            again = NeedlesFoundError(exc.locations, swept)
            again.args = (again.args[0] + dependent_note(request),)
            raise again from exc
        if exc.args:
            exc.args = (str(exc.args[0]) + dependent_note(request), *exc.args[1:])
        raise
    except PASS_THROUGH as exc:
        note = dependent_note(request)
        if note and exc.args and isinstance(exc.args[0], str):
            exc.args = (exc.args[0] + note, *exc.args[1:])
        raise
    except Exception as exc:
        swept = {p.table: p.irreversible_deleted for p in parts if p.irreversible_deleted}
        extra = (
            f"; items already swept outside the transaction (not restorable): {swept}"
            if swept
            else "; nothing was deleted"
        )
        what = (
            str(exc)
            if isinstance(exc, ErasureIncompleteError)
            else (f"{type(exc).__name__}: {exc}")
        )
        raise ErasureIncompleteError(
            f"erasure of {request.label} aborted and rolled back: {what}{extra}"
            f"{dependent_note(request)}",
            remaining={k: v.rows for k, v in _safe_measure(backend).items() if v.rows},
        ) from exc
    try:
        return _after_commit(backend, request, receipt_id, issued_at, entry, draft=draft)
    except ErasureIncompleteError:
        raise
    except Exception as exc:
        # Committed: never retried (no cause to find a transient conflict in), and said.
        raise ErasureIncompleteError(
            f"the erasure of {request.label} committed, but checking it afterwards failed "
            f"({type(exc).__name__}: {exc}); the erasure journal in the database keeps the "
            "measurement: fix the cause and call recover_receipts(), which re-verifies the "
            "scope and issues it"
        ) from None


def _nothing_check(
    backend: ErasureBackend, request: ErasureRequest, tables: Mapping[str, TableCount]
) -> None:
    """Refuse a scope that held no rows (nothing was deleted; the rollback also drops
    no tombstone for a typo)."""
    if not request.allow_empty and not any(t.rows for t in tables.values()):
        previous = backend.previous_erasure() if request.kind == "thread" else None
        raise NothingToEraseError(request.journal_id, previous)


def _left_check(parts: Iterable[Part]) -> None:
    """Inside the transaction, after the deletion: nothing of the removed set remains."""
    left = {p.table: n for p in parts if _role(p) != "kept" and (n := p.remaining())}
    if left:
        raise ErasureIncompleteError(
            f"rows remain inside the erasure transaction: {left}", remaining=left
        )


def _own_rows_check(
    backend: ErasureBackend,
    request: ErasureRequest,
    parts: Sequence[Part],
    deleted: Mapping[str, TableCount],
) -> None:
    """Store namespaces the saver's ``namespaces_for`` mapped the thread to are erased
    only with rows of the thread itself: a thread id with none (a typo, an erased
    thread) is no reason to erase the memory of the user it maps to."""
    if not request.mapped_store or not request.store_namespaces:
        return
    own = {p.table for p in parts if p.group == "checkpoints"}
    if any(c.rows for t, c in deleted.items() if t in own):
        return
    previous = backend.previous_erasure() if request.kind == "thread" else None
    exc = NothingToEraseError(request.journal_id, previous)
    what = "history to remove" if request.kind == "history" else "stored rows"
    exc.args = (
        f"{request.label} has no {what}; the store namespaces namespaces_for maps it to "
        "are erased only with rows of the thread itself: nothing was erased (name them "
        "with store_namespaces= to erase them on their own)",
    )
    raise exc


LATE_ROUNDS = 3


def _remove_late_writes(backend: ErasureBackend) -> Check | None:
    """History erasure: a graph still running on the thread saves a node's writes in
    the background, so writes for a checkpoint older than the kept one can land after
    the commit (LangGraph does this). They belong to removed checkpoints - orphans no
    read will ever return - and match the removed set: delete them too, measured, in
    their own short transactions, with the same plan (never re-planned), and say so in
    a check. They are not part of the pre-state. Store items are left alone: new store
    items are new data, not late writes."""
    rows, roots = 0, []
    for _ in range(LATE_ROUNDS):
        parts = [p for p in backend.parts() if _role(p) != "kept" and p.group == "checkpoints"]
        with backend.read_snapshot():
            found = sum(p.measure(lambda _h: None).rows for p in parts)
        if not found:
            break
        with backend.transaction():
            m = measure_parts(parts, erase=True)
        rows += sum(c.rows for c in m.tables.values())
        roots.append(m.root.hex())
    if not rows:
        return None
    return {
        "name": "late_writes_removed", "result": "pass",
        "detail": f"{rows} row(s) written for removed checkpoints after the commit (a run "
                  f"still saving) were deleted too; not part of the pre-state; sha256 of "
                  f"their tree(s): {', '.join(roots)}",
    }  # fmt: skip


def resume_rows(
    backend: ErasureBackend,
    request: ErasureRequest,
    receipt_id: str,
    issued_at: str,
    entry_json: str,
) -> RowsOutcome:
    """Phase one again for an erasure whose receipt was never issued (crash, I/O error).

    The rows were deleted and the journal committed in one transaction; what is left is
    to scrub, re-measure the (still empty) scope, and let phase two issue the receipt
    with the journaled pre-state, original receipt id and time.
    """
    entry = json.loads(entry_json)
    checks = list(entry["checks"])
    checks.append(
        {"name": "issued_from_journal", "result": "pass",
         "detail": "receipt issued after an interruption, from the committed erasure journal"}
    )  # fmt: skip
    entry = {**entry, "checks": checks}
    return _after_commit(backend, request, receipt_id, issued_at, entry, at_recovery=True)


def _after_commit(
    backend: ErasureBackend,
    request: ErasureRequest,
    receipt_id: str,
    issued_at: str,
    entry: dict[str, Any],
    *,
    at_recovery: bool = False,
    draft: dict[str, Any] | None = None,
) -> RowsOutcome:
    # Late writes first, so the residue steps (WAL truncation, scan) cover them too.
    late = _remove_late_writes(backend) if request.kind == "history" else None
    residue = backend.reduce_residue()
    scope = (entry.get("members") or {}).get("scope") or {}
    if at_recovery and "privacy" in scope:
        residue = _withhold_paths(residue, backend.database)
    # The scope's own rows verified gone, the targets waiting for that are swept.
    swept = sweep_deferred(backend, request.label)
    # Re-read the raw tables after commit: this *is* the post-state measurement.
    post_root, post_tables = measure_rows(backend)
    left = {t: c.rows for t, c in post_tables.items() if c.rows}
    if left:
        store_tables = {p.table for p in backend.parts() if p.group == "store"}
        why = (
            "; the transaction had emptied them, so these items were written after the "
            "commit (a graph still running on the thread writes memory: stop it, or use "
            "refuse_erased_reads=True); the erasure committed - remove them (or erase "
            "again) and call recover_receipts()"
            if set(left) <= store_tables
            else ""
        )
        raise ErasureIncompleteError(
            f"rows of {request.label} present after commit: {left}{why}", remaining=left
        )
    # A recovery measures later than the commit and says so: nothing is claimed about
    # the moment right after a commit that nobody measured.
    checks = [
        *entry["checks"],
        {"name": "raw_rows_zero_at_recovery", "result": "pass",
         "detail": "post-state digest re-measured from the raw tables when the receipt "
                   "was issued from the journal"}
        if at_recovery else
        {"name": "raw_rows_zero_after_commit", "result": "pass",
         "detail": "post-state digest re-measured from the raw tables"},
    ]  # fmt: skip
    if late is not None:
        checks.append(late)
    checks += swept
    return RowsOutcome(
        request=request,
        backend=backend,
        receipt_id=receipt_id,
        issued_at=issued_at,
        pre_digest=entry["pre_digest"],
        pre_tables={k: TableCount(**v) for k, v in entry["pre_tables"].items()},
        post_digest=post_root,
        post_tables=post_tables,
        methods=dict(entry["methods"]),
        checks=checks,
        residue=residue,
        members=dict(entry.get("members") or {}),
        draft=draft,
    )
