"""The erasure protocol, written once for every backend: measure -> delete -> verify -> sign.

A backend supplies *parts* (one per stored table, or one per store swept through its
API) and a transaction. The engine streams each part's rows into one RFC 9162 tree in
canonical order (table name, then primary key), deletes them, proves inside the
transaction that nothing is left, commits, re-measures the raw tables (the post-state
digest), lets the caller run its public-API checks, and only then signs.

The protocol is split in two phases so async savers can run phase one in their
database thread and the API checks on their event loop:

* :func:`erase_rows` - everything up to and including the post-commit raw re-measure;
* :func:`issue_receipt` - add the caller's API checks, build, sign and archive.

If anything fails or anything remains, :class:`ErasureIncompleteError` is raised and no
receipt exists.
"""

from __future__ import annotations

import base64
import json
import os
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .backends.keep_latest import Removed
from .canonical import MAX_INPUT_BYTES, canonicalize
from .digest import EMPTY_ROOT, MerkleTree, leaf_hash, units_root
from .errors import (
    AuthorizationError,
    ConfigurationError,
    ErasureIncompleteError,
    MalformedReceiptError,
    NeedlesFoundError,
    NothingToEraseError,
    ReceiptSemanticsError,
)
from .receipt import Receipt, build_statement, validate_statement
from .signing import Signer

if TYPE_CHECKING:
    from .log import ReceiptLog

__all__ = [
    "Check",
    "ErasureBackend",
    "ErasureRequest",
    "GuardedBackend",
    "NeedlesFoundError",
    "Part",
    "RowsOutcome",
    "TableCount",
    "erase_rows",
    "export_leaves",
    "final_statement",
    "measure_parts",
    "measure_rows",
    "preflight",
    "request_from_journal",
    "resume_rows",
    "sign_and_archive",
]

# Tombstone policies (``TOMBSTONE_POLICIES``, the receipt's ``scope.tombstone_policy``):
# ``new_conversations`` refuses every write that continues the erased conversation - a
# checkpoint whose parent (or subgraph root) is an erased checkpoint, writes for an erased
# checkpoint, a run that began before the erasure - and lets a new conversation start
# under the id; ``refuse_all`` refuses every write until ``reopen_thread()``.


def fresh_after(erased_at: str, newest: str | None) -> str:
    """The bound a ``new_conversations`` tombstone compares checkpoint ids with: the
    smallest uuid6 of the erasure's time, or the newest id it erased if that is later
    (a writer's clock ahead of this one)."""
    from .history import uuid6_floor

    floor = uuid6_floor(datetime.fromisoformat(erased_at.replace("Z", "+00:00")))
    return max(floor, newest) if newest is not None else floor


RECEIPT_HEADROOM = 16 * 1024
"""Room the preflight keeps for what is only known later (residue, checks, signature)."""

LeafSink = Callable[[bytes], Any]
"""Receives each row's leaf *hash* (32 bytes), in order."""
Check = dict[str, str]


@dataclass
class TableCount:
    """Rows and stored bytes of one table in a measurement (a receipt's ``tables`` entry)."""

    rows: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        """The receipt's ``{"rows": ..., "bytes": ...}`` form (also what the journal keeps)."""
        return {"rows": self.rows, "bytes": self.bytes}


class Part(Protocol):
    """One table (or swept store) of the thread's data, as seen by the engine."""

    table: str
    """Leaf table name; parts are processed in sorted table order."""
    group: str
    """What the part belongs to in the receipt's ``methods`` ("checkpoints", "store")."""
    method: str
    """How it is deleted: "atomic-transaction" or "sweep"."""
    irreversible_deleted: int
    """Items deleted outside the transaction so far (sweeps): survive a rollback."""

    def measure(self, sink: LeafSink) -> TableCount:
        """Feed every row's leaf hash to ``sink`` in primary-key order; do not delete."""
        ...

    def erase(self, sink: LeafSink) -> TableCount:
        """Measure like ``measure`` and delete (now, or in ``finish``) what was measured."""
        ...

    def finish(self) -> None:
        """Complete a deferred delete. Called for every part after all were measured, in
        reverse table order, so e.g. a cascade from ``store`` to ``store_vectors``
        cannot remove rows before they were measured."""
        ...

    def remaining(self) -> int:
        """Rows of the scope still present (inside the transaction)."""
        ...


class ErasureBackend(Protocol):
    """One database as the engine sees it: its parts, transactions, tombstone and journal.

    ``kind``, ``saver``, ``store``, ``database`` and ``versions`` become the receipt's
    ``backend`` member.
    """

    kind: str
    saver: str
    store: str | None
    database: str
    versions: dict[str, str]

    def parts(self) -> Sequence[Part]:
        """The scope's parts (tables, swept stores); the engine orders them by table."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Exclusive write transaction: commit on success, roll back on any error."""
        ...

    def read_snapshot(self) -> AbstractContextManager[None]:
        """A consistent read view for measuring without deleting."""
        ...

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """Inside the transaction: mark the thread id erased so later writes are rejected."""
        ...

    def previous_erasure(self) -> str | None:
        """Inside the transaction: the receipt id of an earlier erasure of this thread
        (its tombstone, else its newest journal entry), or None."""
        ...

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        """Inside the transaction: record what was erased (digests and counts only),
        under ``thread_id`` (privacy mode: the commitment) or the backend's own."""
        ...

    def reduce_residue(self) -> list[dict[str, Any]]:
        """After commit: scrub what the engine can (never raises; reports outcomes)."""
        ...


class GuardedBackend:
    """A saver's backend with a check run first inside its erasure transaction, under
    the write lock (a sweep re-checks that a thread is still idle, a subject erasure
    that its thread list is complete). Everything else is the inner backend's;
    subclasses override what they add."""

    def __init__(self, inner: Any, guard: Callable[[], None] | None) -> None:
        self.inner = inner
        self.kind: str = inner.kind
        self.saver: str = inner.saver
        self.store: str | None = inner.store
        self.database: str = inner.database
        self.versions: dict[str, str] = inner.versions
        self._guard = guard

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def parts(self) -> Sequence[Part]:
        """The inner backend's parts."""
        return self.inner.parts()  # type: ignore[no-any-return]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The inner transaction, with the guard run first inside it."""
        with self.inner.transaction():
            if self._guard is not None:
                self._guard()
            yield

    def read_snapshot(self) -> AbstractContextManager[None]:
        """The inner backend's read view."""
        return self.inner.read_snapshot()  # type: ignore[no-any-return]

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """The inner backend's tombstone."""
        self.inner.write_tombstone(receipt_id, erased_at)

    def previous_erasure(self) -> str | None:
        """The inner backend's earlier erasure, if any."""
        return self.inner.previous_erasure()  # type: ignore[no-any-return]

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        """The inner backend's journal entry."""
        self.inner.write_journal(receipt_id, issued_at, entry, thread_id=thread_id)

    def reduce_residue(self) -> list[dict[str, Any]]:
        """The inner backend's residue steps."""
        return self.inner.reduce_residue()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ErasureRequest:
    """The scope of one erasure and how its receipt describes it (RECEIPT_SPEC.md 9).

    ``kind`` is ``thread`` (every row of ``thread_id``), ``history`` (every row of
    ``thread_id`` except the kept checkpoints', ``keep="latest"``) or ``subject`` (every
    row of every thread in ``threads``, one unit each). Backends never see the kind:
    they turn ``all_threads``, ``keep`` and ``store_namespaces`` into parts.
    """

    thread_id: str
    store_namespaces: tuple[tuple[str, ...], ...] = ()
    tombstone: bool = True
    allow_empty: bool = False
    """Attest a scope that holds no rows (otherwise ``NothingToEraseError``)."""
    kind: str = "thread"
    threads: tuple[str, ...] = ()
    """``subject``: every thread erased (sorted, unique); ``thread_id`` is the subject."""
    subject: str | None = None
    discovery: str | None = None
    """``subject``: the checkpoint-metadata key that found threads, if any."""
    keep: str = "none"
    """``history``: ``"latest"``."""
    kept: tuple[tuple[str, str], ...] = ()
    """``history``: ``(checkpoint_ns, checkpoint_id)`` kept, once known (recovery)."""
    removed: Removed | None = None
    """``history``: the keys the transaction deleted, once known: after the commit the
    removed set is these (never re-derived from ``kept``: see backends/keep_latest.py)."""
    needles: tuple[str, ...] = ()
    """Values that must occur nowhere in ``needle_scope`` after the deletion (never
    written anywhere: only their commitments are)."""
    needle_scope: str = "thread"
    mapped_store: bool = False
    """``store_namespaces`` came from the saver's ``namespaces_for``: erased only with
    rows of the thread itself (a thread id with none erases nothing)."""
    privacy: Any = None
    """A :class:`~erasure_receipts.privacy.CommitmentKey`: identifiers are committed."""
    context: dict[str, Any] | None = None
    """The receipt's ``request`` member (who asked, why), ready to embed."""
    authorization: dict[str, Any] | None = None
    """The receipt's ``authorization`` member (an approver's signed consent)."""

    @property
    def all_threads(self) -> tuple[str, ...]:
        """The thread ids whose rows are in scope."""
        return self.threads if self.kind == "subject" else (self.thread_id,)

    @property
    def label(self) -> str:
        """How errors name the scope (by its commitment in privacy mode)."""
        return (
            f"subject {self.journal_id!r}"
            if self.kind == "subject"
            else (f"thread {self.journal_id!r}")
        )

    @property
    def journal_id(self) -> str:
        """The id the journal, logs and errors name: the commitment in privacy mode."""
        label = "subject" if self.kind == "subject" else "thread"
        return _committed(self, label, self.thread_id)


@dataclass
class RowsOutcome:
    """What phase one established; phase two turns it into a receipt."""

    request: ErasureRequest
    backend: ErasureBackend
    receipt_id: str
    issued_at: str
    pre_digest: str
    pre_tables: dict[str, TableCount]
    post_digest: str
    post_tables: dict[str, TableCount]
    methods: dict[str, str]
    checks: list[Check] = field(default_factory=list)
    residue: list[dict[str, Any]] = field(default_factory=list)
    members: dict[str, Any] = field(default_factory=dict)
    """Kind-specific statement parts fixed in the transaction (scope, subject name,
    units, kept_state, needles, request, authorization), as journaled."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(t: datetime) -> str:
    """The receipts' UTC form ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (fraction only if non-zero).

    A naive datetime is taken as UTC (as ``digest.utc_timestamp`` does), never as the
    machine's local time, so an injected ``clock`` cannot shift ``issued_at``.
    """
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    frac = f".{t.microsecond:06d}" if t.microsecond else ""
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def _role(part: Part) -> str:
    return str(getattr(part, "role", "removed"))


def _unit(part: Part) -> str:
    return str(getattr(part, "unit", ""))


@dataclass
class Measurement:
    """One pass over the scope: the removed rows' root and tables, per unit when the
    parts carry units (subject receipts), and the kept rows' (history receipts)."""

    root: bytes
    tables: dict[str, TableCount]
    units: list[tuple[str, bytes, dict[str, TableCount]]] = field(default_factory=list)
    kept_root: bytes = EMPTY_ROOT
    kept_tables: dict[str, TableCount] = field(default_factory=dict)


def _add(total: dict[str, TableCount], table: str, c: TableCount) -> None:
    t = total.setdefault(table, TableCount())
    t.rows += c.rows
    t.bytes += c.bytes


def _swept(part: Part) -> bool:
    """Deleted outside the transaction (a store swept through its API): not undone by a
    rollback."""
    return part.method == "sweep"


def measure_parts(
    parts: Sequence[Part],
    erase: bool,
    settled: Callable[[dict[str, TableCount]], None] | None = None,
) -> Measurement:
    """Measure every part (deleting the removed ones when ``erase``), all before any
    deferred delete runs. Removed parts form one tree in table order - or, when they
    carry units, one tree per unit and a root over the units (RECEIPT_SPEC.md 9.3).
    Kept parts are only measured, into their own tree.

    With ``erase``, ``settled(tables)`` is called once everything the transaction can
    undo is deleted (with those parts' counts) and before any part is swept outside it,
    so a check that refuses the erasure runs before anything irreversible. The swept
    parts then go last; the leaf hashes are kept meanwhile (32 bytes a row) and the
    trees built in table order, as always."""
    removed = sorted((p for p in parts if _role(p) != "kept"), key=lambda p: (_unit(p), p.table))
    kept = sorted((p for p in parts if _role(p) == "kept"), key=lambda p: p.table)
    late = [p for p in removed if _swept(p)] if erase else []
    done: dict[int, tuple[list[bytes], TableCount]] = {}  # id(part) -> its hashes, counts
    if late:
        for part in (p for p in removed if not _swept(p)):
            hashes: list[bytes] = []
            done[id(part)] = (hashes, part.erase(hashes.append))
    by_unit: dict[str, list[Part]] = {}
    for p in removed:
        by_unit.setdefault(_unit(p), []).append(p)
    tables: dict[str, TableCount] = {}
    units: list[tuple[str, bytes, dict[str, TableCount]]] = []

    def build() -> None:
        for name, group in by_unit.items():
            tree, unit_tables = MerkleTree(), {}
            for part in group:
                if id(part) in done:
                    hashes, c = done[id(part)]
                    for h in hashes:
                        tree.append_hash(h)
                else:
                    c = part.erase(tree.append_hash) if erase else part.measure(tree.append_hash)
                unit_tables[part.table] = c
                _add(tables, part.table, c)
            units.append((name, tree.root(), unit_tables))

    if not late:
        build()
    kept_tree, kept_tables = MerkleTree(), {}
    for part in kept:
        kept_tables[part.table] = part.measure(kept_tree.append_hash)
    if erase:
        for part in sorted(removed, key=lambda p: p.table, reverse=True):
            if not _swept(part):
                part.finish()
        if settled is not None:
            counted: dict[str, TableCount] = {}
            if not late:
                counted = {k: replace(c) for k, c in tables.items()}
            for part in removed if late else ():
                if not _swept(part):
                    _add(counted, part.table, done[id(part)][1])
            settled(counted)
        for part in late:
            hashes = []
            done[id(part)] = (hashes, part.erase(hashes.append))
            part.finish()
        if late:
            build()
    if not any(c.rows for c in tables.values()):
        root = EMPTY_ROOT  # an empty scope has the empty root, whatever its units
    elif any(name for name, _, _ in units):
        root = units_root((name, sum(c.rows for c in t.values()), r) for name, r, t in units)
    else:
        root = units[0][1] if units else EMPTY_ROOT
    return Measurement(root, tables, units, kept_tree.root(), kept_tables)


def measure_rows(backend: ErasureBackend) -> tuple[str, dict[str, TableCount]]:
    """The pre-deletion digest a real erasure would compute now (nothing is deleted)."""
    with backend.read_snapshot():
        m = measure_parts(backend.parts(), erase=False)
    return m.root.hex(), m.tables


def erase_rows(
    backend: ErasureBackend,
    request: ErasureRequest,
    *,
    clock: Callable[[], datetime] = _utc_now,
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
    try:
        with backend.transaction():
            # Identity and time are taken once the write lock is held, so receipts of
            # erasures that queued behind each other are ordered like the erasures.
            receipt_id = str(uuid.uuid4())
            issued_at = format_time(clock())
            if request.authorization is not None:  # 9.6: refused before anything is deleted
                from .request import Authorization

                Authorization.from_obj(request.authorization).check_time(issued_at)
            needles: dict[str, Any] | None = None

            def settled(deleted: dict[str, TableCount]) -> None:
                # Every refusal the database rows can decide, before a store is swept.
                nonlocal needles
                if not any(_swept(p) for p in parts):
                    _nothing_check(backend, request, deleted)
                _own_rows_check(backend, request, parts, deleted)
                _left_check(p for p in parts if not _swept(p))
                needles = _check_needles(backend, request)

            m = measure_parts(parts, erase=True, settled=settled)
            _nothing_check(backend, request, m.tables)
            _left_check(p for p in parts if _swept(p))
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
            _self_check(backend, request, members, root, m.tables, methods, generator_version)
            removed_keys = getattr(backend, "removed_keys", None)
            if request.kind == "history" and removed_keys is not None:
                request = replace(request, kept=kept, removed=removed_keys())
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
            raise NeedlesFoundError(exc.locations, swept) from exc
        raise
    except (NothingToEraseError, AuthorizationError):
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
            f"erasure of {request.label} aborted and rolled back: {what}{extra}",
            remaining={k: v.rows for k, v in _safe_measure(backend).items() if v.rows},
        ) from exc
    return _after_commit(backend, request, receipt_id, issued_at, entry)


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


def _self_check(
    backend: ErasureBackend,
    request: ErasureRequest,
    members: Mapping[str, Any],
    root: bytes,
    tables: Mapping[str, TableCount],
    methods: dict[str, str],
    generator_version: str,
) -> None:
    """Inside the transaction, before anything commits: the receipt this erasure will
    issue must pass the verifier's own rules (structure and semantics), or the erasure
    is refused - data is never deleted for a receipt that could not verify."""
    from .verify import check_semantics

    zero = {k: {"rows": 0, "bytes": 0} for k in tables}
    st = _statement(
        members, request=request, backend=backend,
        receipt_id="00000000-0000-4000-8000-000000000000", issued_at="2000-01-01T00:00:00Z",
        pre_digest=root.hex(), pre_tables={k: v.to_json() for k, v in tables.items()},
        post_digest=EMPTY_ROOT.hex(), post_tables=zero, methods=methods,
        checks=[{"name": "self_check", "result": "pass"}], residue=[],
        generator_version=generator_version,
    )  # fmt: skip
    try:
        check_semantics(validate_statement(json.loads(json.dumps(st))))
    except (MalformedReceiptError, ReceiptSemanticsError) as exc:
        raise ErasureIncompleteError(
            f"the receipt of this erasure would not verify ({exc.reason}: {exc.message})"
        ) from None


def redact_entry(entry_json: str) -> tuple[str, str] | None:
    """Privacy mode: the journal entry with its raw ids replaced by the commitments its
    statement uses (a sealed entry: without its sealed request), and the committed scope
    id - or None outside privacy mode. Only for an entry whose statement is journaled:
    recovery then just signs that statement."""
    entry = json.loads(entry_json)
    scope = (entry.get("members") or {}).get("scope") or {}
    if "privacy" not in scope:
        return None
    if "sealed" in entry:  # no raw id in clear; the sealed request is needed no more
        del entry["sealed"]
        return str(entry["thread_id"]), json.dumps(entry, sort_keys=True)
    committed = str(scope.get("subject") or scope.get("thread_id"))
    entry.update(
        thread_id=committed,
        threads=list(scope.get("threads", [])),
        store_namespaces=scope["store_namespaces"],
    )
    return committed, json.dumps(entry, sort_keys=True)


def _withhold_paths(residue: list[dict[str, Any]], database: str) -> list[dict[str, Any]]:
    """Privacy mode at recovery (the commitment key is not at hand): residue details
    that name a file are withheld rather than committed."""
    out = []
    for r in residue:
        detail = {
            k: "withheld (privacy mode)"
            if k == "database" or (isinstance(v, str) and database and database in v)
            else v
            for k, v in r["detail"].items()
        }
        out.append({**r, "detail": detail})
    return out


def request_to_journal(request: ErasureRequest) -> dict[str, Any]:
    """The parts of a request recovery needs (never its needles or commitment key)."""
    return {
        "thread_id": request.thread_id,
        "store_namespaces": [list(ns) for ns in request.store_namespaces],
        "tombstone": request.tombstone,
        "kind": request.kind,
        "threads": list(request.threads),
        "keep": request.keep,
        "kept": [list(k) for k in request.kept],
        **({"removed": request.removed.to_json()} if request.removed is not None else {}),
    }


def _sealed_request(request: ErasureRequest, receipt_id: str) -> dict[str, Any]:
    """Privacy mode: the journal entry's request members as commitments (as the
    statement names them), and the raw request recovery needs, sealed under a key
    derived from the commitment key (bound to the receipt id)."""
    key = request.privacy
    raw = json.dumps(request_to_journal(request), sort_keys=True, ensure_ascii=False)
    return {
        "thread_id": request.journal_id,
        "threads": sorted(_committed(request, "thread", t) for t in request.threads),
        "store_namespaces": [
            [_committed(request, "store_namespace", ".".join(ns))]
            for ns in request.store_namespaces
        ],
        "sealed": key.seal(raw.encode("utf-8", "surrogatepass"), receipt_id.encode("ascii")),
    }


def request_from_journal(
    entry_json: str, receipt_id: str = "", keys: Mapping[str, Any] | None = None
) -> ErasureRequest:
    """The request a journal entry recorded, for recovery (``allow_empty`` is not kept:
    the rows are already deleted, so it no longer matters; entries from before kinds
    existed are thread erasures). A privacy-mode entry's request is sealed: it opens
    with its commitment key from ``keys`` (key id -> ``CommitmentKey``)."""
    entry = json.loads(entry_json)
    key = None
    if "sealed" in entry:
        key = (keys or {}).get(str(entry["sealed"].get("key_id")))
        if key is None:
            raise ErasureIncompleteError(
                f"privacy-mode erasure of {entry.get('kind', 'thread')} "
                f"{entry.get('thread_id')}: its journal entry is sealed with commitment key "
                f"{str(entry['sealed'].get('key_id'))[:16]}...; recover with that key "
                "(recover_receipts(commitment_key=K), receipt recover --commitment-key K)"
            )
        entry = json.loads(key.unseal(entry["sealed"], receipt_id.encode("ascii")))
    return ErasureRequest(
        str(entry["thread_id"]),
        tuple(tuple(ns) for ns in entry["store_namespaces"]),
        bool(entry["tombstone"]),
        kind=str(entry.get("kind", "thread")),
        threads=tuple(entry.get("threads", ())),
        keep=str(entry.get("keep", "none")),
        kept=tuple((str(a), str(b)) for a, b in entry.get("kept", ())),
        privacy=key,  # so recovery's errors name commitments too
        # Entries from before it was journaled: the rule over ``kept`` (as then).
        removed=Removed.from_json(entry["removed"]) if "removed" in entry else None,
    )


NEEDLE_FORMS = (
    "raw", "json", "json-escaped", "json-escaped-upper", "json-nested",
    "json-escaped-nested", "json-solidus", "unicode-nfc", "unicode-nfd",
)  # fmt: skip
"""How a needle can be stored, all searched (RECEIPT_SPEC.md 9.4): its UTF-8 bytes
(msgpack); JSON string text with only ``"``, ``\\`` and control characters escaped
(orjson, PostgreSQL jsonb, ``json.dumps(..., ensure_ascii=False)``); the same with every
non-ASCII character as ``\\uXXXX`` (Python's ``json.dumps`` default), also with
upper-case hex digits; either JSON text stored inside a JSON string again (pasted JSON:
every backslash doubled); any of these with ``/`` written ``\\/``; and each of them
for the needle's Unicode NFC and NFD forms. Not searched: other letter cases, other
normalisations (NFKC), and a value split across several stored values."""


def named_needle_forms(needle: str) -> list[tuple[str, bytes]]:
    """``(form name, bytes)`` searched for one needle; a form equal to an earlier one is
    left out (an ASCII needle without characters JSON escapes has one form)."""
    named: dict[bytes, str] = {}
    variants = {"": needle}
    for nf in ("NFC", "NFD"):
        variants.setdefault(f"+unicode-{nf.lower()}", unicodedata.normalize(nf, needle))
    for suffix, v in variants.items():
        raw = v.encode("utf-8", "surrogatepass")
        plain = json.dumps(v, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
        escaped = json.dumps(v)[1:-1].encode("ascii")
        upper = re.sub(rb"\\u([0-9a-f]{4})", lambda m: b"\\u" + m.group(1).upper(), escaped)
        jsonish = {"json": plain, "json-escaped": escaped, "json-escaped-upper": upper}
        for name, form in list(jsonish.items()):
            if b"/" in form:
                jsonish[f"{name}+json-solidus"] = form.replace(b"/", b"\\/")
        forms = {"raw": raw, **jsonish}
        for name, form in jsonish.items():  # that JSON text pasted into a JSON string
            text = form.decode("utf-8", "surrogatepass")
            nested = json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
            forms[name.replace("json", "json-nested", 1) if name == "json" else f"{name}-nested"
                  if "+" not in name else name.replace("+", "-nested+", 1)] = nested  # fmt: skip
        for name, form in forms.items():
            named.setdefault(form, name + suffix)
    return [(name, form) for form, name in named.items() if form]


def needle_forms(needle: str) -> list[bytes]:
    """The byte strings a backend searches for one needle (see ``NEEDLE_FORMS``)."""
    return [form for _, form in named_needle_forms(needle)]


def _check_needles(
    backend: ErasureBackend, request: ErasureRequest, *, outside: bool = False
) -> dict[str, Any] | None:
    """Inside the transaction, after the deletion: no needle may occur in the searched
    scope, or the erasure is refused (rolled back) and the locations reported.

    First the database's rows, before anything is swept outside the transaction (so a
    refusal deletes nothing anywhere); then (``outside``), after the sweep, a store
    outside the database, if the backend searches one (``find_store_needles``)."""
    if not request.needles:
        return None
    find = getattr(backend, "find_store_needles" if outside else "find_needles", None)
    if find is None and outside:
        return None
    if find is None:  # pragma: no cover - every backend has it
        raise ErasureIncompleteError(f"{backend.kind} cannot search for needles")
    forms = [(i, f) for i, n in enumerate(request.needles) for f in needle_forms(n)]
    found = find([f for _, f in forms], request.needle_scope, request.all_threads)
    if found:
        raise NeedlesFoundError(_redact_locations(found, request, forms))
    if outside:
        return None
    if request.privacy is not None:
        values, salt = [request.privacy.needle(n) for n in request.needles], None
    else:
        from .privacy import needle_commitment

        key = os.urandom(16)
        values = [needle_commitment(key, n) for n in request.needles]
        salt = base64.b64encode(key).decode("ascii")
    return {
        "commitment": "hmac-sha256", "salt": salt, "values": sorted(set(values)),
        "forms": list(NEEDLE_FORMS), "searched": request.needle_scope,
        "occurrences_after": 0,
    }  # fmt: skip


_LOCATION_LABELS = {"thread_id": "thread", "prefix": "store_namespace"}


def _redact_locations(
    locations: list[dict[str, Any]], request: ErasureRequest, forms: list[tuple[int, bytes]]
) -> list[dict[str, Any]]:
    """Locations fit to print: a key that contains a needle (a store key, a thread id)
    names the needle by number instead, and in privacy mode ids are committed and store
    keys withheld."""
    texts = [(i, f.decode("utf-8", "replace")) for i, f in forms]
    out = []
    for loc in locations:
        clean: dict[str, Any] = {}
        for k, v in loc.items():
            if k in ("table", "column", "form") or not isinstance(v, str):
                clean[k] = v
                continue
            hit = next((i for i, t in texts if t and t in v), None)
            if hit is not None:
                clean[k] = f"<contains needle #{hit + 1}>"
            elif request.privacy is not None and k in _LOCATION_LABELS:
                clean[k] = _committed(request, _LOCATION_LABELS[k], v)
            elif request.privacy is not None and k == "key":  # a store key names people too
                clean[k] = "withheld (privacy mode)"
            else:
                clean[k] = v
        out.append(clean)
    return out


def _kept_checkpoints(
    backend: ErasureBackend, request: ErasureRequest
) -> tuple[tuple[str, str], ...]:
    if request.keep == "none":
        return ()
    kept = getattr(backend, "kept_checkpoints", None)
    return tuple(sorted(kept())) if kept is not None else ()


def _committed(request: ErasureRequest, label: str, value: str) -> str:
    return value if request.privacy is None else str(request.privacy.commit(label, value))


def _members(
    backend: ErasureBackend,
    request: ErasureRequest,
    m: Measurement,
    kept: tuple[tuple[str, str], ...],
    needles: dict[str, Any] | None,
) -> dict[str, Any]:
    """The kind-specific parts of the statement, fixed while the rows are known."""
    ns = [list(n) for n in request.store_namespaces]
    if request.privacy is not None:
        ns = [[_committed(request, "store_namespace", ".".join(n))] for n in ns]
    scope: dict[str, Any]
    if request.kind == "subject":
        subject = _committed(request, "subject", request.thread_id)
        threads = {t: _committed(request, "thread", t) for t in request.threads}
        scope = {
            "subject": subject,
            "threads": sorted(threads.values()),
            "discovery": None if request.discovery is None else {"metadata_key": request.discovery},
            "checkpoint_namespaces": "all", "store_namespaces": ns,
            "tombstone": request.tombstone,
        }  # fmt: skip
        name = f"langgraph-subject:{subject}"
    else:
        tid = _committed(request, "thread", request.thread_id)
        scope = {"thread_id": tid, "checkpoint_namespaces": "all",
                 "store_namespaces": ns, "tombstone": request.tombstone}  # fmt: skip
        if request.kind == "history":
            scope["keep"] = request.keep
        prefix = "langgraph-thread-history:" if request.kind == "history" else "langgraph-thread:"
        name = prefix + tid
    if request.privacy is not None:
        scope["privacy"] = {"mode": "hmac-sha256", "key_id": request.privacy.key_id}
    policy = getattr(backend, "tombstone_policy", None)
    if request.tombstone and policy is not None:
        scope["tombstone_policy"] = policy  # what the tombstone's triggers enforce
    out: dict[str, Any] = {"kind": request.kind, "scope": scope, "subject_name": name}
    if request.privacy is not None:
        out["database"] = _committed(request, "database", backend.database)
    if request.kind == "subject":
        rename = {f"thread:{t}": f"thread:{c}" for t, c in threads.items()}
        present = {unit for unit, _, _ in m.units}
        missing = [f"thread:{t}" for t in request.threads if f"thread:{t}" not in present]
        if request.store_namespaces and "store" not in present:
            missing.append("store")  # e.g. the store's tables do not exist (yet): 0 rows
        m = replace(m, units=[*m.units, *((u, EMPTY_ROOT, {}) for u in missing)])
        units = [
            {"name": rename.get(unit, unit), "digest": {"sha256": root.hex()},
             "leaves": sum(c.rows for c in t.values()),
             "tables": {k: c.to_json() for k, c in t.items()}}
            for unit, root, t in m.units
        ]  # fmt: skip
        out["units"] = sorted(units, key=lambda u: u["name"])
    if request.kind == "history":
        out["kept_state"] = {
            "digest": {"sha256": m.kept_root.hex()},
            "leaves": sum(c.rows for c in m.kept_tables.values()),
            "tables": {k: c.to_json() for k, c in m.kept_tables.items()},
            "checkpoints": [{"checkpoint_ns": a, "checkpoint_id": b} for a, b in kept],
        }
    if needles is not None:
        out["needles"] = needles
    if request.context is not None:
        out["request"] = request.context
    if request.authorization is not None:
        out["authorization"] = request.authorization
    return out


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
) -> RowsOutcome:
    # Late writes first, so the residue steps (WAL truncation, scan) cover them too.
    late = _remove_late_writes(backend) if request.kind == "history" else None
    residue = backend.reduce_residue()
    scope = (entry.get("members") or {}).get("scope") or {}
    if at_recovery and "privacy" in scope:
        residue = _withhold_paths(residue, backend.database)
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
    )


def preflight(
    backend: ErasureBackend,
    request: ErasureRequest,
    parts: Sequence[Part],
    methods: dict[str, str],
    generator_version: str,
) -> None:
    """Refuse, before deleting anything, an erasure whose receipt could not be written.

    (A thread id over 4,096 characters, a lone surrogate in a namespace, ...: the data
    would be gone and the receipt impossible.)
    """
    zero = {p.table: {"rows": 0, "bytes": 0} for p in parts}
    units: list[tuple[str, bytes, dict[str, TableCount]]] = [
        (f"thread:{t}", EMPTY_ROOT, {}) for t in request.threads
    ]
    if request.store_namespaces and request.kind == "subject":
        units.append(("store", EMPTY_ROOT, {}))
    placeholder = {
        "commitment": "hmac-sha256", "salt": None, "values": ["0" * 64] * len(request.needles),
        "forms": list(NEEDLE_FORMS), "searched": request.needle_scope, "occurrences_after": 0,
    }  # fmt: skip
    kept = tuple(("", "0" * 36) for _ in request.kept)
    members = _members(
        backend, request, Measurement(EMPTY_ROOT, {}, units), kept,
        placeholder if request.needles else None,
    )  # fmt: skip
    try:
        st = _statement(
            members,
            request=request,
            backend=backend,
            receipt_id="00000000-0000-4000-8000-000000000000",
            issued_at="2000-01-01T00:00:00Z",
            pre_digest=EMPTY_ROOT.hex(),
            pre_tables=zero,
            post_digest=EMPTY_ROOT.hex(),
            post_tables=zero,
            methods=methods,
            checks=[{"name": "preflight", "result": "pass"}],
            residue=[],
            generator_version=generator_version,
        )
        canonicalize(validate_statement(st))
        size = len(json.dumps(st, indent=2, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (MalformedReceiptError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"cannot attest an erasure of this scope: {exc}") from None
    if size + RECEIPT_HEADROOM > MAX_INPUT_BYTES:
        raise ConfigurationError(
            f"cannot attest an erasure of this scope: its receipt (~{size} bytes) would be "
            f"over the {MAX_INPUT_BYTES}-byte limit verifiers enforce"
        )


_EXTRA = ("kept_state", "units", "needles", "request", "authorization")


def _statement(
    members: Mapping[str, Any],
    *,
    request: ErasureRequest,
    backend: ErasureBackend,
    **fields: Any,
) -> dict[str, Any]:
    """Build the statement from the counts and the kind-specific ``members`` (an entry
    journaled before kinds existed has none: a thread receipt without ``kind``)."""
    info = _backend_info(backend)
    if "database" in members:
        info["database"] = members["database"]
    return build_statement(
        thread_id=request.thread_id,
        store_namespaces=request.store_namespaces,
        tombstone=request.tombstone,
        backend=info,
        kind=members.get("kind"),
        scope=members.get("scope"),
        subject_name=members.get("subject_name"),
        extra={k: members[k] for k in _EXTRA if k in members},
        **fields,
    )


def _backend_info(backend: ErasureBackend) -> dict[str, Any]:
    return {
        "kind": backend.kind,
        "saver": backend.saver,
        "store": backend.store,
        "database": backend.database,
        "versions": dict(backend.versions),
    }


def _safe_measure(backend: ErasureBackend) -> dict[str, TableCount]:
    try:
        return measure_rows(backend)[1]
    except Exception:
        return {}


def final_statement(
    outcome: RowsOutcome,
    api_checks: Sequence[tuple[str, int, str]],
    *,
    generator_version: str,
) -> dict[str, Any]:
    """Phase two, part one: add the public-API checks and build the statement.

    ``api_checks`` holds ``(name, items_found, detail)``; any non-zero count aborts.
    The statement is journaled before it is signed: Ed25519 is deterministic, so every
    process that signs a journaled statement with the same key produces the same bytes
    (a recovery racing the original erasure can only ever issue the identical receipt).
    """
    found = {name: n for name, n, _ in api_checks if n}
    if found:
        raise ErasureIncompleteError(
            f"public API still returns data for {outcome.request.label}: {found}",
            remaining=found,
        )
    checks = outcome.checks + [
        {"name": name, "result": "pass", "detail": detail} for name, _, detail in api_checks
    ]
    if outcome.post_digest != EMPTY_ROOT.hex():  # pragma: no cover - guarded above
        raise ErasureIncompleteError("post-state digest is not the empty root")
    return _statement(
        outcome.members,
        request=outcome.request,
        backend=outcome.backend,
        receipt_id=outcome.receipt_id,
        issued_at=outcome.issued_at,
        pre_digest=outcome.pre_digest,
        pre_tables={k: v.to_json() for k, v in outcome.pre_tables.items()},
        post_digest=outcome.post_digest,
        post_tables={k: v.to_json() for k, v in outcome.post_tables.items()},
        methods=outcome.methods,
        checks=checks,
        residue=outcome.residue,
        generator_version=generator_version,
    )


def sign_and_archive(
    statement: Mapping[str, Any], signer: Signer, archive: Path | ReceiptLog | None
) -> Receipt:
    """Phase two, part two: sign and write ``<archive>/<receipt_id>.json`` durably, or
    append the receipt to a :class:`~erasure_receipts.log.ReceiptLog`.

    Idempotent: if the file already holds this very receipt (another process signed the
    same journaled statement), that is success; anything else there is never replaced.
    A log returns the existing entry for identical bytes and refuses a different receipt
    under the same id.
    """
    receipt = Receipt.sign(statement, signer)
    if archive is None:
        return receipt
    if not isinstance(archive, Path):
        from .log import LogConflictError

        try:
            archive.append(receipt)
        except LogConflictError as exc:
            raise ErasureIncompleteError(exc.message) from None
        return receipt
    archive.mkdir(parents=True, exist_ok=True)
    path = archive / f"{receipt.receipt_id}.json"
    try:
        receipt.save(path)
    except FileExistsError:
        if path.read_bytes() != receipt.to_json():
            raise ErasureIncompleteError(
                f"{path} already exists with different content; not overwriting it"
            ) from None
    return receipt


def iter_pages(fetch: Callable[[int], list[Any]], page: int) -> Iterator[Any]:
    """Yield every item of an offset-paginated API; never trusts a default page size."""
    offset = 0
    while True:
        items = fetch(offset)
        yield from items
        if len(items) < page:
            return
        offset += len(items)


def export_leaves(
    backend: ErasureBackend, select: Callable[[bytes], bool] | None = None
) -> tuple[list[bytes], list[tuple[int, bytes]]]:
    """Legal hold: the tree an erasure would measure now, in one read snapshot.

    Returns every leaf hash in tree order, and ``(index, leaf data)`` of the leaves
    ``select`` keeps (all when None). Each part must offer ``leaves()`` - its leaf data
    in the order ``measure`` hashes them. Nothing is deleted.
    """
    hashes: list[bytes] = []
    chosen: list[tuple[int, bytes]] = []
    with backend.read_snapshot():
        for part in sorted(backend.parts(), key=lambda p: p.table):
            leaves: Callable[[], Iterator[bytes]] | None = getattr(part, "leaves", None)
            if leaves is None:
                raise TypeError(f"{type(part).__name__} cannot export its leaves")
            for data in leaves():
                if select is None or select(data):
                    chosen.append((len(hashes), data))
                hashes.append(leaf_hash(data))
    return hashes, chosen
