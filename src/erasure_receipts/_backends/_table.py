"""What the SQLite and PostgreSQL backends share: a backend over a database's tables.

Both backends keep a thread's rows in tables, tombstone it in ``erasure_tombstones``
and journal the erasure in ``erasure_journal``; where their SQL is the same up to the
parameter marker (``?`` or ``%s``) it is written once here. :class:`TableBackend` holds
the parts, the journal entry's lease and insert and the plumbing of a history erasure's
plan (``keep="latest"``, see ``keep_latest.py``); each backend supplies the statements
that really differ (its driver, locking, the plan's queries). The journal and query
functions each backend offers are the engine's ``Journal`` seam
(``erasure_receipts._engine.seams``), checked by mypy where a saver builds its eraser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .. import _lease as lease
from .._parts import Part
from .keep_latest import KeepLatest, Removed

__all__ = [
    "IDLE_HAVING",
    "RUN_IN_FLIGHT",
    "STORE_TOMBSTONE_MESSAGE",
    "TOMBSTONE_MESSAGE",
    "PlannedRows",
    "TableBackend",
    "namespace_condition",
]

TOMBSTONE_MESSAGE = "erasure_receipts: thread erased"
"""The message of the triggers' refusal (how a tombstone error is told from others)."""
STORE_TOMBSTONE_MESSAGE = "erasure_receipts: store namespace erased"
"""The store triggers' refusal of a ``put`` at or below a tombstoned prefix (8.1)."""

RUN_IN_FLIGHT = """
SELECT 1 FROM checkpoints c JOIN {writes} w ON w.thread_id = c.thread_id
  AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id
WHERE c.thread_id = {p} AND c.checkpoint_id = (
    SELECT max(c2.checkpoint_id) FROM checkpoints c2
    WHERE c2.thread_id = c.thread_id AND c2.checkpoint_ns = c.checkpoint_ns)
  AND (w.channel = '__resume__' OR NOT EXISTS (
    SELECT 1 FROM {writes} w2 WHERE w2.thread_id = w.thread_id
      AND w2.checkpoint_ns = w.checkpoint_ns AND w2.checkpoint_id = w.checkpoint_id
      AND w2.task_id = w.task_id AND w2.channel IN ('__interrupt__', '__error__')))
LIMIT 1
"""
"""A run is (or may be) going on in the thread: the latest checkpoint of one of its
namespaces has a ``__resume__`` write (``Command(resume=...)`` writes it under the
interrupted checkpoint; the next checkpoint exists only once the node finishes), or a
write of a task that neither interrupted nor failed (a task finished, its step not yet
checkpointed). Writes cannot be dated, so a thread left in such a state is skipped too.
``{writes}`` is the writes table, ``{p}`` the parameter marker."""

IDLE_HAVING = (
    "GROUP BY thread_id "
    "HAVING max(checkpoint_id) < {p} OR length(max(checkpoint_id)) <> 36 "
    "OR substr(max(checkpoint_id), 15, 1) <> '6' ORDER BY thread_id LIMIT {p}"
)
"""The tail of a retention page's query over ``checkpoints``: threads whose latest
checkpoint id sorts before the first parameter - or is not a uuid6, so its time is
unknown - in thread-id order, at most the second parameter of them."""


def namespace_condition(
    namespaces: Sequence[Sequence[str]], match: str, below: Callable[[str], str]
) -> tuple[str, list[str]]:
    """SQL matching store rows under any of the namespace prefixes: ``match`` (two
    parameters) per namespace, bound to its dotted text and ``below(text)``, the pattern
    of what lies under it. An empty namespace is refused (it would match every item)."""
    conds, params = [], []
    for ns in namespaces:
        if not ns:
            raise ValueError("an empty store namespace would match every item in the store")
        text = ".".join(ns)
        conds.append(match)
        params += [text, below(text)]
    return "(" + " OR ".join(conds) + ")", params


class PlannedRows:
    """A history erasure's table part (``keep="latest"``): ``where`` and ``params`` come
    from the plan (``resolve``) the first time the part reads - inside the erasure
    transaction, so the plan sees what its locks protect."""

    resolve: Callable[[], tuple[str, list[Any]]] | None
    where: str
    params: Sequence[Any]

    def _ready(self) -> None:
        if self.resolve is not None:
            self.where, self.params = self.resolve()
            self.resolve = None


class TableBackend:
    """The part of an :class:`~erasure_receipts._engine.ErasureBackend` both table
    backends share; a subclass supplies the statements (``_run``, ``_first``), the
    lease (``_take_lease``) and the history plan's queries."""

    PARAM: ClassVar[str]
    """The driver's parameter marker (``?``, ``%s``)."""
    ORDER_COLLATE: ClassVar[str] = ""
    """What makes ``ORDER BY`` on a text column code-point order (PostgreSQL:
    ``COLLATE "C"``; SQLite's ``BINARY`` already is)."""
    TABLE_PART: ClassVar[type[Any]]
    """The backend's table part class (its parts record the namespaces they saw)."""
    PLANNED_PART: ClassVar[type[Any]]
    """The backend's history part class (its ``where`` comes from the plan)."""

    thread_id: str
    threads: list[str]
    store_prefixes: list[str]
    """The ``.``-joined store namespaces erased as rows of this database: what
    :meth:`write_store_tombstones` tombstones (RECEIPT_SPEC.md 8.1)."""
    tombstone_store: bool = True
    """False for namespaces a saver's ``namespaces_for`` mapped the thread to: erasing
    one conversation must not close the user's memory for good."""
    keep: str
    _parts: list[Part]
    _plan: KeepLatest | None
    _removed: Removed | None
    _writing: bool

    def _init_keep(self, keep: str, kept: Sequence[Sequence[str]], removed: Removed | None) -> None:
        # keep="latest" (history): the kept checkpoints, planned inside the transaction
        # unless given (recovery); see backends/keep_latest.py.
        self.keep = keep
        self._plan = KeepLatest.of(kept) if kept else None
        # What the transaction deleted (given: recovery); from the commit on, the rule.
        self._removed = removed
        self._writing = False

    # -- what each backend supplies ------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any]) -> None:
        """Run one statement on the backend's handle."""
        raise NotImplementedError

    def _first(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """The first row of one statement on the backend's handle, or None."""
        raise NotImplementedError

    def _take_lease(self, receipt_id: str) -> Any:
        """The backend's ``take_lease`` on its handle."""
        raise NotImplementedError

    def _plan_keep_latest(self) -> KeepLatest:
        """The backend's ``plan_keep_latest`` for the thread (writing inside the
        erasure transaction)."""
        raise NotImplementedError

    def _late_where(self, table: str) -> tuple[str, list[Any]]:
        """After the commit: the rows of what the transaction deleted."""
        raise NotImplementedError

    def removed_keys(self) -> Removed:
        """``keep="latest"``: what the transaction deletes (once finished)."""
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------

    def parts(self) -> Sequence[Part]:
        """The scope's table parts (existing tables only), then any extra (swept) parts."""
        return self._parts

    @property
    def checkpoint_namespaces(self) -> set[str]:
        """Checkpoint namespaces seen while measuring: where the API checks look."""
        seen: set[str] = set()
        for p in self._parts:
            if isinstance(p, self.TABLE_PART):
                seen |= p.namespaces_seen
        return seen

    def find_store_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """No store outside the database to search (a subject erasure's backend adds
        it)."""
        return []

    def previous_erasure(self) -> str | None:
        """Receipt id of the thread's tombstone, else of its newest journal entry."""
        p, c = self.PARAM, self.ORDER_COLLATE
        row = self._first(
            f"SELECT receipt_id FROM erasure_tombstones WHERE thread_id = {p}", (self.thread_id,)
        ) or self._first(
            f"SELECT receipt_id FROM erasure_journal WHERE thread_id = {p} "
            f"ORDER BY issued_at{c} DESC, receipt_id{c} DESC LIMIT 1",
            (self.thread_id,),
        )
        return None if row is None else str(row[0])

    @property
    def store_tombstoned(self) -> bool:
        """Whether a tombstone of this erasure also tombstones its store prefixes: only
        store rows of this database, which its triggers guard (a swept store has none)."""
        return bool(self.store_prefixes) and self.tombstone_store

    def write_store_tombstones(self, receipt_id: str, erased_at: str) -> None:
        """Inside the transaction: tombstone each store prefix (the store triggers then
        refuse a ``put`` there or below); an existing tombstone keeps its receipt."""
        p = self.PARAM
        for prefix in self.store_prefixes if self.store_tombstoned else ():
            self._run(
                "INSERT INTO erasure_store_tombstones (prefix, receipt_id, erased_at) "
                f"VALUES ({p}, {p}, {p}) ON CONFLICT (prefix) DO NOTHING",
                (prefix, receipt_id, erased_at),
            )

    def lease_entry(self, receipt_id: str) -> None:
        """Lease the journal entry ``receipt_id`` will be (when :func:`lease.owning`),
        first in the erasure transaction: before anything irreversible, so a lease that
        cannot be taken fails the erasure while all of it still rolls back; and before
        the commit makes the entry visible, so no recovery completes it meanwhile."""
        if lease.owning():
            token = self._take_lease(receipt_id)
            if token is None:
                raise RuntimeError(f"the lease on journal entry {receipt_id} is taken")
            lease.owned(receipt_id, token)

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        """Insert the journal entry under ``thread_id`` (privacy mode: a commitment) or
        the erased thread's id; it commits with the deletion, so a receipt can still be
        issued after a crash (leased since :meth:`lease_entry`)."""
        p = self.PARAM
        self._run(
            "INSERT INTO erasure_journal (receipt_id, thread_id, issued_at, entry) "
            f"VALUES ({p}, {p}, {p}, {p})",
            (receipt_id, self.thread_id if thread_id is None else thread_id, issued_at, entry),
        )

    # -- keep="latest": the history erasure's plan (backends/keep_latest.py) ------------

    def _plan_condition(self, table: str, k: KeepLatest) -> tuple[str, list[Any]]:
        """The plan's condition on the kept rows of ``table``."""
        return k.where(self.PARAM)

    def _planned_where(self, table: str, kept: bool) -> Callable[[], tuple[str, list[Any]]]:
        def resolve() -> tuple[str, list[Any]]:
            if self._removed is not None and not kept:
                return self._late_where(table)
            cond, params = self._plan_condition(table, self._resolve_plan())
            return f"thread_id = {self.PARAM} AND {'NOT ' * kept}{cond}", [self.thread_id, *params]

        return resolve

    def _resolve_plan(self) -> KeepLatest:
        if self._plan is None:
            self._plan = self._plan_keep_latest()
        return self._plan

    def _settle_plan(self) -> None:
        """Once committed: the removed parts read what the transaction deleted (a
        checkpoint saved since, whatever its id, is not one of them)."""
        if self.keep == "latest" and self._removed is None:
            self._removed = self.removed_keys()
            for p in self._parts:
                if isinstance(p, self.PLANNED_PART) and p.role == "removed":
                    p.where, p.params = self._late_where(p.table)

    def kept_checkpoints(self) -> list[tuple[str, str]]:
        """``keep="latest"``: the kept ``(checkpoint_ns, checkpoint_id)`` pairs."""
        return list(self._resolve_plan().kept)
