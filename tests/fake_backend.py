"""An in-memory database behind the engine's seams, with faults injected through them.

:class:`Memory` is the "database file": tables of rows (``checkpoints`` keyed by
``(thread_id, checkpoint_ns, checkpoint_id)``, ``writes`` by ``(thread_id,
checkpoint_ns, checkpoint_id, task_id, idx)``, values ``bytes``), the library's
journal, tombstones and leases, one lock, and real transactions (a snapshot on begin,
restored on rollback). :class:`FakeDatabase`, :class:`FakeJournal` and
:class:`FakeReader` are the ``engine.seams`` protocols over it; the database's
:class:`FakeBackend` is the engine's ``ErasureBackend`` with one :class:`FakePart` per
table (and per unit or role). :func:`fake_eraser` composes a real ``Eraser`` from them.

Faults are named points in a ``faults`` mapping shared by the seams of one eraser
(one "process"): the value is an exception (instance or class) raised there, a
callable called there (it may raise, or change rows; a non-None result is used where
the point returns something), or :data:`DIE` - :class:`ProcessDied`, a
``BaseException`` standing for the death of the process. After a death the memory is
what a crashed process leaves: the open transaction rolled back, whatever committed
kept; :meth:`Memory.restart` drops the dead process's leases, and a new eraser over
the same memory is the next process.

Fault points, in the order an erasure meets them:

- database/backend: ``begin``, ``lease_entry``, ``erase`` (a part measured for
  deletion), ``finish`` (its delete), ``remaining`` (a count inside the transaction),
  ``write_tombstone``, ``write_journal``, ``commit`` (before the commit: rolls back),
  ``after_commit`` (the commit is durable; use with :data:`DIE`), ``reduce_residue``,
  ``re_measure`` (the read snapshot of the measurement after the commit, or at
  recovery, or of a preview);
- reader: ``api_read_back`` (every ``get_tuple``/``list``/``count_store``);
- signer (:class:`FaultySigner`): ``sign``;
- journal: ``record_statement``, ``mark_issued``, ``release_lease``, and for recovery
  ``pending_journal``, ``take_lease``, ``still_pending``; every other journal method
  has a point of its own name too.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from erasure_receipts import Signer
from erasure_receipts import _lease as lease
from erasure_receipts._backends.keep_latest import Head, KeepLatest, Removed, plan
from erasure_receipts._engine.eraser import Eraser
from erasure_receipts._engine.types import ErasureRequest
from erasure_receipts._parts import TableCount
from erasure_receipts.digest import leaf_hash
from erasure_receipts.errors import ErasureIncompleteError

__all__ = [
    "CHECKPOINTS",
    "DIE",
    "WRITES",
    "FakeBackend",
    "FakeConflict",
    "FakeDatabase",
    "FakeJournal",
    "FakePart",
    "FakeReader",
    "Faults",
    "FaultySigner",
    "Memory",
    "ProcessDied",
    "fake_eraser",
    "fire",
    "once",
]

CHECKPOINTS = "checkpoints"
WRITES = "writes"
DIE = "die"
Faults = MutableMapping[str, Any]


class ProcessDied(BaseException):
    """The process died at a fault point: no ``except Exception`` handler sees it."""


class FakeConflict(Exception):
    """A transient conflict (deadlock, serialization failure): the database retries."""


def fire(faults: Mapping[str, Any], point: str, *args: Any) -> Any:
    """Run the fault at ``point``, if any (see the module docstring)."""
    fault = faults.get(point)
    if fault is None:
        return None
    if isinstance(fault, str) and fault == DIE:
        raise ProcessDied(point)
    if isinstance(fault, BaseException):
        raise fault
    if isinstance(fault, type) and issubclass(fault, BaseException):
        raise fault(point)
    return fault(*args)


def once(exc: BaseException | str) -> Callable[..., None]:
    """A fault that fires the first time only (``exc`` or :data:`DIE`)."""
    fired: list[bool] = []

    def fault(*_: Any) -> None:
        if not fired:
            fired.append(True)
            if isinstance(exc, str):
                raise ProcessDied(exc)
            raise exc

    return fault


def checkpoint_id(n: int) -> str:
    """A uuid6-like checkpoint id that sorts by ``n``."""
    return f"1ef{n:05x}-0000-6000-8000-{n:012x}"


@dataclass
class JournalRow:
    thread_id: str
    issued_at: str
    entry: str
    statement: str | None = None
    receipt: bytes | None = None


@dataclass
class Memory:
    """The in-memory database: tables, journal, tombstones, leases, one lock."""

    tables: dict[str, dict[tuple[str, ...], bytes]] = field(
        default_factory=lambda: {CHECKPOINTS: {}, WRITES: {}}
    )
    journal: dict[str, JournalRow] = field(default_factory=dict)
    tombstones: dict[str, tuple[str, str]] = field(default_factory=dict)
    leases: dict[str, object] = field(default_factory=dict)
    deferrals: dict[str, tuple[list[Any], list[str]]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    name: str = "memory:fake"
    _snapshot: tuple[Any, ...] | None = None

    # -- transactions ----------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        return self._snapshot is not None

    def begin(self) -> None:
        if self._snapshot is not None:
            raise RuntimeError("a transaction is already open")
        self._snapshot = copy.deepcopy((self.tables, self.journal, self.tombstones))

    def commit(self) -> None:
        assert self._snapshot is not None
        self._snapshot = None

    def rollback(self) -> None:
        if self._snapshot is not None:
            self.tables, self.journal, self.tombstones = self._snapshot
            self._snapshot = None

    def restart(self) -> None:
        """The dead process is gone: its leases (and any open transaction) with it."""
        self.rollback()
        for receipt_id in list(self.leases):
            lease.drop(receipt_id)
        self.leases.clear()

    # -- rows ------------------------------------------------------------------------

    def put(self, thread_id: str, ns: str, n: int, value: bytes = b"state", writes: int = 1) -> str:
        """A checkpoint ``n`` of ``thread_id`` in ``ns`` with ``writes`` pending writes."""
        cid = checkpoint_id(n)
        self.tables[CHECKPOINTS][(thread_id, ns, cid)] = value
        for i in range(writes):
            self.tables[WRITES][(thread_id, ns, cid, f"task-{n}", str(i))] = value + b"-w%d" % i
        return cid

    def rows(self, thread_id: str | None = None) -> dict[str, list[tuple[str, ...]]]:
        """The raw keys per table (of one thread)."""
        return {
            t: sorted(k for k in rows if thread_id is None or k[0] == thread_id)
            for t, rows in self.tables.items()
        }

    def open_entries(self) -> list[str]:
        return sorted(rid for rid, row in self.journal.items() if row.receipt is None)

    def heads(self, thread_id: str) -> dict[str, str]:
        """The latest checkpoint id of each namespace of the thread."""
        out: dict[str, str] = {}
        for tid, ns, cid in self.tables[CHECKPOINTS]:
            if tid == thread_id and cid > out.get(ns, ""):
                out[ns] = cid
        return out


def _leaf_data(table: str, key: tuple[str, ...], value: bytes) -> bytes:
    return json.dumps([table, *key, value.hex()]).encode()


def _of_thread(thread_id: str) -> Callable[[tuple[str, ...]], bool]:
    return lambda key: key[0] == thread_id


class FakePart:
    """One table's rows of the scope (one unit, one role), in key order."""

    method = "atomic-transaction"

    def __init__(
        self,
        backend: FakeBackend,
        table: str,
        select: Callable[[tuple[str, ...]], bool],
        *,
        unit: str = "",
        role: str = "removed",
    ) -> None:
        self.backend = backend
        self.table = table
        self.group = "checkpoints"
        self.unit = unit
        self.role = role
        self.irreversible_deleted = 0
        self._select = select
        self._measured: list[tuple[str, ...]] = []

    def _keys(self) -> list[tuple[str, ...]]:
        rows = self.backend.mem.tables[self.table]
        return sorted(k for k in rows if self._select(k))

    def measure(self, sink: Callable[[bytes], Any]) -> TableCount:
        count = TableCount()
        rows = self.backend.mem.tables[self.table]
        for key in self._keys():
            sink(leaf_hash(_leaf_data(self.table, key, rows[key])))
            count.rows += 1
            count.bytes += len(rows[key])
            self.backend.checkpoint_namespaces.add(key[1])
        return count

    def leaves(self) -> Iterator[bytes]:
        rows = self.backend.mem.tables[self.table]
        for key in self._keys():
            yield _leaf_data(self.table, key, rows[key])

    def erase(self, sink: Callable[[bytes], Any]) -> TableCount:
        fire(self.backend.faults, "erase", self)
        self._measured = self._keys()
        return self.measure(sink)

    def finish(self) -> None:
        fire(self.backend.faults, "finish", self)
        rows = self.backend.mem.tables[self.table]
        for key in self._measured:
            del rows[key]
        if self.table == CHECKPOINTS and self.role == "removed":
            self.backend.deleted.extend((k[1], k[2]) for k in self._measured)

    def remaining(self) -> int:
        forced = fire(self.backend.faults, "remaining", self)
        return int(forced) if forced is not None else len(self._keys())


class FakeBackend:
    """The engine backend of one request over :class:`Memory`."""

    kind: str = "memory"  # no kind verifiers hold to a table list or residue disclosures
    saver: str = "FakeSaver"
    store: str | None = None
    tombstone_policy: str = "refuse_all"  # the fake's tombstone refuses every write
    store_tombstoned: bool = False  # the fake has no store tombstones

    def __init__(self, mem: Memory, request: ErasureRequest, faults: Faults) -> None:
        self.mem = mem
        self.request = request
        self.faults = faults
        self.database = mem.name
        self.versions = {"fake-backend": "1"}
        self.thread_id = request.thread_id
        self.threads = list(request.all_threads)
        self.checkpoint_namespaces: set[str] = set()
        self.deleted: list[tuple[str, str]] = []
        self.committed = False
        self.opened = False
        self._plan: KeepLatest | None = KeepLatest.of(request.kept) if request.kept else None
        self._removed: Removed | None = request.removed
        units = request.kind == "subject"
        if request.keep == "latest":
            self._parts = [
                FakePart(self, table, self._history_rule(role == "kept"), role=role)
                for table in (CHECKPOINTS, WRITES)
                for role in ("removed", "kept")
            ]
        else:
            self._parts = [
                FakePart(self, table, _of_thread(t), unit=f"thread:{t}" if units else "")
                for t in self.threads
                for table in (CHECKPOINTS, WRITES)
            ]

    # -- keep="latest" ---------------------------------------------------------------

    def _history_rule(self, kept: bool) -> Callable[[tuple[str, ...]], bool]:
        def select(key: tuple[str, ...]) -> bool:
            if key[0] != self.thread_id:
                return False
            if self._removed is not None:  # after the commit: what was deleted, by key
                hit = (key[1], key[2]) in self._removed.checkpoints
            else:
                hit = self._resolve_plan().removes(key[1], key[2])
            return hit != kept

        return select

    def _resolve_plan(self) -> KeepLatest:
        if self._plan is None:
            self._plan = plan(Head(ns, cid) for ns, cid in self.mem.heads(self.thread_id).items())
        return self._plan

    def kept_checkpoints(self) -> list[tuple[str, str]]:
        return list(self._resolve_plan().kept)

    def removed_keys(self) -> Removed:
        if self._removed is not None:
            return self._removed
        return Removed(frozenset(self.deleted))

    # -- ErasureBackend ----------------------------------------------------------------

    def parts(self) -> Sequence[FakePart]:
        return self._parts

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.mem.lock:
            fire(self.faults, "begin")
            self.opened = True
            self.mem.begin()
            try:
                yield
                fire(self.faults, "commit")
                self.mem.commit()
            except BaseException:
                self.mem.rollback()
                raise
            self.committed = True
            if self.request.keep == "latest" and self._removed is None:
                self._removed = self.removed_keys()
        fire(self.faults, "after_commit")

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        if self.committed or not self.opened:  # after the commit, or at recovery
            fire(self.faults, "re_measure")
        with self.mem.lock:
            yield

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        fire(self.faults, "write_tombstone")
        for t in self.threads:
            self.mem.tombstones.setdefault(t, (receipt_id, erased_at))

    def previous_erasure(self) -> str | None:
        if self.thread_id in self.mem.tombstones:
            return self.mem.tombstones[self.thread_id][0]
        own = [(r.issued_at, rid) for rid, r in self.mem.journal.items()
               if r.thread_id == self.thread_id]  # fmt: skip
        return max(own)[1] if own else None

    def lease_entry(self, receipt_id: str) -> None:
        fire(self.faults, "lease_entry", receipt_id)
        if lease.owning():
            if receipt_id in self.mem.leases:
                raise RuntimeError(f"the lease on journal entry {receipt_id} is taken")
            token = self.mem.leases[receipt_id] = object()
            lease.owned(receipt_id, token)

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        fire(self.faults, "write_journal", receipt_id)
        self.mem.journal[receipt_id] = JournalRow(
            self.thread_id if thread_id is None else thread_id, issued_at, entry
        )

    def reduce_residue(self) -> list[dict[str, Any]]:
        fire(self.faults, "reduce_residue", self)
        return []

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Every row (of ``threads``, or of all with ``scope="database"``) holding a form."""
        return [
            {"table": table, "thread_id": key[0], "column": "value"}
            for table, rows in sorted(self.mem.tables.items())
            for key, value in sorted(rows.items())
            if (scope == "database" or key[0] in threads) and any(f in value for f in forms)
        ]

    def find_store_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """No store outside the fake database."""
        return []


class FakeDatabase:
    """``seams.Database`` over :class:`Memory` (the handle is the memory itself)."""

    def __init__(self, mem: Memory, faults: Faults | None = None) -> None:
        self.mem = mem
        self.faults: Faults = {} if faults is None else faults
        self.backends: list[FakeBackend] = []

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self.mem.lock:
            return fn(self.mem, *args)

    def backend(self, handle: Any, request: ErasureRequest, residue_scan: Any) -> FakeBackend:
        backend = FakeBackend(handle, request, self.faults)
        self.backends.append(backend)
        return backend

    def retryable(self, exc: ErasureIncompleteError) -> bool:
        return isinstance(exc.__cause__, FakeConflict)

    def check_readable(self, handle: Memory) -> None:
        pass

    def store_rows(self) -> bool:
        return False

    def prepare(self) -> None:
        pass

    def ensure_journal(self) -> None:
        pass

    def resolve_store(self) -> None:
        pass

    def forget_store(self) -> None:
        pass


class FakeJournal:
    """``seams.Journal`` over :class:`Memory`: every method is also a fault point."""

    def __init__(self, faults: Faults | None = None) -> None:
        self.faults: Faults = {} if faults is None else faults
        self._tokens = itertools.count(1)

    def record_statement(self, mem: Memory, receipt_id: str, statement: str, /) -> str:
        fire(self.faults, "record_statement", receipt_id)
        row = mem.journal.get(receipt_id)
        if row is None:
            raise RuntimeError(f"erasure journal entry {receipt_id} is missing")
        if row.statement is None:
            row.statement = statement
        return row.statement

    def mark_issued(self, mem: Memory, receipt_id: str, receipt_json: bytes, /) -> None:
        fire(self.faults, "mark_issued", receipt_id)
        row = mem.journal[receipt_id]
        if row.receipt is None:
            row.receipt = bytes(receipt_json)

    def pending_journal(self, mem: Memory, /) -> list[tuple[str, str, str, str | None]]:
        fire(self.faults, "pending_journal")
        rows = sorted((r.issued_at, rid, r) for rid, r in mem.journal.items() if r.receipt is None)
        return [(rid, r.issued_at, r.entry, r.statement) for _, rid, r in rows]

    def journal_receipts(self, mem: Memory, thread_id: str | None = None, /) -> list[bytes]:
        fire(self.faults, "journal_receipts")
        rows = sorted((r.issued_at, rid, r) for rid, r in mem.journal.items())
        return [r.receipt for _, _, r in rows
                if r.receipt is not None and thread_id in (None, r.thread_id)]  # fmt: skip

    def still_pending(self, mem: Memory, receipt_id: str, /) -> bool:
        fire(self.faults, "still_pending", receipt_id)
        row = mem.journal.get(receipt_id)
        return row is not None and row.receipt is None

    def take_lease(self, mem: Memory, receipt_id: str, /) -> Any:
        fire(self.faults, "take_lease", receipt_id)
        if receipt_id in mem.leases:
            return None
        token = mem.leases[receipt_id] = next(self._tokens)
        return token

    def release_lease(self, mem: Memory, receipt_id: str, token: Any, /) -> None:
        fire(self.faults, "release_lease", receipt_id)
        if mem.leases.get(receipt_id) is token:
            del mem.leases[receipt_id]

    def redact_journal(
        self, mem: Memory, receipt_id: str, committed: str, rewrite: Callable[[str], str], /
    ) -> object:
        fire(self.faults, "redact_journal", receipt_id)
        row = mem.journal.get(receipt_id)
        if row is None:
            return None
        row.thread_id, row.entry = committed, rewrite(row.entry)
        return row

    def purge_journal(self, mem: Memory, older_than: str, /) -> int:
        fire(self.faults, "purge_journal")
        old = [rid for rid, r in mem.journal.items()
               if r.receipt is not None and r.issued_at < older_than]  # fmt: skip
        for rid in old:
            del mem.journal[rid]
        return len(old)

    def reopen(self, mem: Memory, thread_id: str, /) -> bool:
        fire(self.faults, "reopen", thread_id)
        return mem.tombstones.pop(thread_id, None) is not None

    def is_erased(self, mem: Memory, thread_id: str, /) -> bool:
        fire(self.faults, "is_erased", thread_id)
        return thread_id in mem.tombstones

    def replay_state(self, mem: Memory, /) -> tuple[set[str], set[str], set[str]]:
        fire(self.faults, "replay_state")
        threads = {k[0] for k in mem.tables[CHECKPOINTS]}
        return set(mem.journal), threads, set(mem.tombstones)

    def reopen_namespace(self, mem: Memory, prefix: str, /) -> bool:
        return False  # the fake has no store tombstones

    def namespace_erased(self, mem: Memory, prefix: str, /) -> str | None:
        return None

    def idle_threads(
        self, mem: Memory, before: str, after: str | None, limit: int, /
    ) -> list[tuple[str, str, int, int]]:
        fire(self.faults, "idle_threads")
        out = []
        for tid in sorted({k[0] for k in mem.tables[CHECKPOINTS]}):
            heads = mem.heads(tid)
            latest = max(heads.values())
            if latest < before and (after is None or tid > after):
                n = sum(1 for k in mem.tables[CHECKPOINTS] if k[0] == tid)
                out.append((tid, latest, n, len(heads)))
        return out[:limit]

    def latest_checkpoint(self, mem: Memory, thread_id: str, /) -> str | None:
        fire(self.faults, "latest_checkpoint", thread_id)
        return max(mem.heads(thread_id).values(), default=None)

    def run_in_flight(self, mem: Memory, thread_id: str, /) -> bool:
        fire(self.faults, "run_in_flight", thread_id)
        return False

    def threads_by_metadata(self, mem: Memory, key: str, value: str, /) -> list[str]:
        fire(self.faults, "threads_by_metadata")
        return []

    def locate(
        self, mem: Memory, forms: Sequence[tuple[int, str, bytes]], /
    ) -> list[dict[str, Any]]:
        fire(self.faults, "locate")
        return []

    def plan_keep_latest(self, mem: Memory, thread_id: str, /, *, write: bool) -> Any:
        fire(self.faults, "plan_keep_latest", thread_id)
        return plan(Head(ns, cid) for ns, cid in mem.heads(thread_id).items())

    # deferrals: rows as the backends keep them (receipt id first, state at index 7)

    def record_deferral(
        self, mem: Memory, row: Any, threads: Sequence[str], present: Sequence[str], /
    ) -> list[str]:
        fire(self.faults, "record_deferral", row[0])
        gone = [t for t in present if not mem.heads(t)]
        if not gone:
            mem.deferrals[row[0]] = (list(row), list(threads))
        return gone

    def deferrals(self, mem: Memory, state: str | None, /) -> list[Any]:
        rows = [tuple(r) for r, _ in mem.deferrals.values()]
        return [r for r in rows if state is None or r[7] == state]

    def open_deferrals(self, mem: Memory, thread_ids: Sequence[str], /) -> list[tuple[str, str]]:
        fire(self.faults, "open_deferrals")
        return [(r[0], r[3]) for r, ts in mem.deferrals.values()
                if r[7] == "open" and set(ts) & set(thread_ids)]  # fmt: skip

    def close_deferral(
        self,
        mem: Memory,
        receipt_id: str,
        state: str,
        closed_at: str,
        closed_by: str | None,
        note: str | None,
        /,
    ) -> bool:
        found = mem.deferrals.get(receipt_id)
        if found is None or found[0][7] != "open":
            return False
        found[0][7:] = [state, closed_at, closed_by, note]
        return True


class FakeTuple(NamedTuple):
    config: dict[str, Any]
    checkpoint: bytes


class FakeReader:
    """``seams.Reader``: the checkpoints as LangGraph's public API returns them."""

    def __init__(self, mem: Memory, faults: Faults | None = None) -> None:
        self.mem = mem
        self.faults: Faults = {} if faults is None else faults

    def _tuples(self, config: Any) -> list[FakeTuple]:
        c = config["configurable"]
        rows = self.mem.tables[CHECKPOINTS]
        keys = sorted(
            (k for k in rows
             if k[0] == c["thread_id"] and c.get("checkpoint_ns", k[1]) == k[1]),
            key=lambda k: k[2], reverse=True,
        )  # fmt: skip
        return [
            FakeTuple({"configurable": {"thread_id": k[0], "checkpoint_ns": k[1],
                                        "checkpoint_id": k[2]}}, rows[k])
            for k in keys
        ]  # fmt: skip

    def get_tuple(self, config: Any) -> Any:
        stale = fire(self.faults, "api_read_back", config)
        if stale is not None:
            return stale
        found = self._tuples(config)
        return found[0] if found else None

    def list(self, config: Any) -> list[FakeTuple]:
        fire(self.faults, "api_read_back", config)
        return self._tuples(config)

    def count_store(self, namespaces: Sequence[tuple[str, ...]]) -> int:
        fire(self.faults, "api_read_back", namespaces)
        return 0

    def detached(self) -> AbstractContextManager[FakeReader | None]:
        return nullcontext(None)  # one in-memory database: read back in turn


class FaultySigner(Signer):
    """A real Ed25519 signer whose ``sign`` is the fault point ``sign``."""

    def __init__(self, signer: Signer, faults: Faults) -> None:
        super().__init__(signer._key)
        self.faults = faults

    def sign(self, message: bytes) -> bytes:
        fire(self.faults, "sign")
        return super().sign(message)


def fake_eraser(
    mem: Memory,
    signer: Signer,
    archive: Path | None = None,
    faults: Faults | None = None,
    **kwargs: Any,
) -> Eraser:
    """A real ``Eraser`` over ``mem`` (one process), with ``faults`` shared by its seams."""
    faults = {} if faults is None else faults
    return Eraser(
        FakeDatabase(mem, faults), FakeJournal(faults), FakeReader(mem, faults),
        signer=FaultySigner(signer, faults) if "sign" in faults else signer,
        archive=archive, **kwargs,
    )  # fmt: skip


def receipt_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


if TYPE_CHECKING:  # the engine's protocols, checked by ``mypy --strict tests/fake_backend.py``
    from erasure_receipts._engine.seams import Database, Journal, Reader
    from erasure_receipts._engine.types import ErasureBackend
    from erasure_receipts._parts import Part

    def _conforms(mem: Memory) -> None:
        backend = FakeBackend(mem, ErasureRequest("t"), {})
        _db: Database = FakeDatabase(mem)
        _journal: Journal = FakeJournal()
        _reader: Reader = FakeReader(mem)
        _backend: ErasureBackend = backend
        _part: Part = backend.parts()[0]
