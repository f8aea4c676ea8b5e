"""What the engine works on: the request (scope), the backend it erases through, and
what phase one established.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._backends.keep_latest import Removed
from .._parts import Part, TableCount
from ..digest import EMPTY_ROOT

__all__ = [
    "RECEIPT_HEADROOM",
    "Check",
    "ErasureBackend",
    "ErasureRequest",
    "Measurement",
    "RowsOutcome",
]


RECEIPT_HEADROOM = 16 * 1024
"""Room the preflight keeps for what is only known later (residue, checks, signature)."""


Check = dict[str, str]


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

    def lease_entry(self, receipt_id: str) -> None:
        """Inside the transaction, before anything irreversible: lease the journal entry
        ``receipt_id`` will be (when the flow asked for leases), or raise."""
        ...

    @property
    def tombstone_policy(self) -> str:
        """What a tombstone of this erasure enforces (``TOMBSTONE_POLICIES``)."""
        ...

    @property
    def checkpoint_namespaces(self) -> set[str]:
        """Checkpoint namespaces seen while measuring: where the API read-back looks."""
        ...

    @property
    def store_tombstoned(self) -> bool:
        """Whether a tombstone of this erasure also tombstones its store prefixes."""
        ...

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Inside the transaction, after the deletion: where any of ``forms`` occurs in
        the database's rows of ``scope`` (``thread``: the threads', ``database``: all)."""
        ...

    def find_store_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """After a store outside the database was swept: where ``forms`` occur in it
        (``[]`` when there is none to search)."""
        ...

    def kept_checkpoints(self) -> list[tuple[str, str]]:
        """``keep="latest"``: the kept ``(checkpoint_ns, checkpoint_id)`` pairs."""
        ...

    def removed_keys(self) -> Removed:
        """``keep="latest"``: the keys the transaction deleted (once finished)."""
        ...


@dataclass(frozen=True)
class ErasureRequest:
    """The scope of one erasure and how its receipt describes it (RECEIPT_SPEC.md 9).

    ``kind`` is ``thread`` (every row of ``thread_id``), ``history`` (every row of
    ``thread_id`` except the kept checkpoints', ``keep="latest"``), ``subject`` (every
    row of every thread in ``threads``, one unit each) or ``namespace`` (the store rows
    under one prefix, ``store_namespaces[0]``; ``thread_id`` is its ``.``-joined text).
    Backends never see the kind: they turn ``all_threads``, ``keep`` and
    ``store_namespaces`` into parts.
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
    replay_of: str | None = None
    """A replay after a restore: the receipt id of the erasure this one repeats (the
    receipt's ``replay_of`` member, RECEIPT_SPEC.md 9.11)."""
    targets: tuple[Any, ...] = ()
    """Erasure targets (``erasure_receipts.targets``): the saver's and the call's; the
    engine applies those of the request's kind (RECEIPT_SPEC.md 9.13)."""

    @property
    def all_threads(self) -> tuple[str, ...]:
        """The thread ids whose rows are in scope (none for a ``namespace`` erasure,
        whose ``thread_id`` is the erased prefix)."""
        return self.threads if self.kind in ("subject", "namespace") else (self.thread_id,)

    @property
    def label(self) -> str:
        """How errors name the scope (by its commitment in privacy mode)."""
        what = {"subject": "subject", "namespace": "store namespace"}.get(self.kind, "thread")
        return f"{what} {self.journal_id!r}"

    @property
    def journal_id(self) -> str:
        """The id the journal, logs and errors name: the commitment in privacy mode."""
        label = {"subject": "subject", "namespace": "store_namespace"}.get(self.kind, "thread")
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
    draft: dict[str, Any] | None = None
    """The statement built and checked in the transaction (None at recovery, which
    builds it from the journaled members)."""


@dataclass
class Measurement:
    """One pass over the scope: the removed rows' root and tables, per unit when the
    parts carry units (subject receipts), and the kept rows' (history receipts)."""

    root: bytes
    tables: dict[str, TableCount]
    units: list[tuple[str, bytes, dict[str, TableCount]]] = field(default_factory=list)
    kept_root: bytes = EMPTY_ROOT
    kept_tables: dict[str, TableCount] = field(default_factory=dict)


def _committed(request: ErasureRequest, label: str, value: str) -> str:
    return value if request.privacy is None else str(request.privacy.commit(label, value))
