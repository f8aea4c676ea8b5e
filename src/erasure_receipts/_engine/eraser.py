"""Every operation's flow, once: the :class:`Eraser` a saver holds.

An eraser is composed from the saver's :class:`~.seams.Database`, :class:`~.seams.Journal`
and :class:`~.seams.Reader` and the saver's configuration (signer, store, archive,
clock, ...). Its flows are synchronous; an async saver runs them on a worker thread and
its database and reader bridge onto the event loop that owns the connection. The route
of one erasure (:meth:`Eraser.erase`):

lease scope -> (database) plan, lock, measure, delete, in-transaction checks, tombstone,
journal, commit, residue, re-measure (``protocol.erase_rows``; retried on transient
conflicts, with an operation's ``guard`` first inside the transaction) -> public-API
read-back (``readback``) -> statement -> journal the statement -> sign -> archive ->
mark issued -> release leases; :meth:`Eraser.begin` is that route up to the read-back's
start, :meth:`Eraser.finish` the rest (a batched sweep overlaps one batch's read-back
with the next batch's transaction). :meth:`Eraser.recover` completes journaled erasures
whose process died (``protocol.resume_rows``).

Operations (thread, history, subject, sweeps) only build requests and guards; the
errors in ``protocol.PASS_THROUGH`` reach them unwrapped.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from contextlib import ExitStack
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .. import __version__
from .. import _lease as lease
from .._backends.targets import (
    ItemsPart,
    OtherDatabasePart,
    check_sql_target,
    ensure_target_trigger,
    find_sql_needles,
    guarded,
    label,
    sql_target_part,
)
from .._clock import format_time
from .._parts import Part, TableCount
from ..errors import (
    ArgumentTypeError,
    ConfigurationError,
    DeferredError,
    ErasureIncompleteError,
    Error,
)
from ..log import ReceiptLog
from ..privacy import PREFIX, CommitmentKey
from ..proof import LeafRecord, head_filter, leaf_records
from ..receipt import TOMBSTONE_POLICIES, Receipt, time_key
from ..signing import Signer
from ..targets import SqlTarget, check_targets, unsearchable
from .codec import redact_entry, request_from_journal
from .measure import export_leaves, measure_rows
from .needles import store_locations
from .protocol import GuardedBackend, _ScopeChanged, erase_rows, resume_rows
from .readback import ApiCheck, api_checks
from .seams import Database, Journal, Reader, ResidueScan
from .statement import final_statement, sign_and_archive
from .targets import applies, target_values
from .types import ErasureBackend, ErasureRequest, RowsOutcome

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = [
    "MAX_ATTEMPTS",
    "Committed",
    "Eraser",
    "Guard",
    "NamespacesFor",
    "PendingErasure",
    "ThreadDigest",
    "check_archive",
    "residue_mode",
]

log = logging.getLogger("erasure_receipts")

T = TypeVar("T")
Namespace = tuple[str, ...]
NamespacesFor = Callable[[str], Iterable[Sequence[str]]]
Guard = Callable[[Any], None]
"""Runs inside the erasure transaction, after its lock, with the database handle."""

MAX_ATTEMPTS = 5
"""Erasure attempts when the backend reports a transient conflict (deadlock, ...)."""


@dataclass(frozen=True)
class Committed:
    """An erasure whose phase one committed, its receipt not yet issued
    (:meth:`Eraser.begin`; :meth:`Eraser.finish` issues it)."""

    request: ErasureRequest
    outcome: RowsOutcome
    checked: ErasureRequest
    """What the read-back checks (a history erasure's: with the kept set it fixed)."""
    namespaces: set[str]
    readback: Future[list[ApiCheck]] | None
    """The read-back running on another connection, or None (run by ``finish``)."""
    scope: ExitStack
    """The lease scope: the entry stays leased until ``finish``."""


class PendingErasure(NamedTuple):
    """An erasure that committed but has no receipt yet (see ``recover_receipts``)."""

    receipt_id: str
    issued_at: str
    age_seconds: float
    """``inf`` for an entry whose time cannot be read (``recover_receipts`` names it)."""


@dataclass(frozen=True)
class ThreadDigest:
    """What an erasure would measure now: the pre-deletion digest and per-table counts."""

    digest: str
    tables: dict[str, TableCount]

    @property
    def leaves(self) -> int:
        """Rows measured: the tree size an erasure right now would record."""
        return sum(t.rows for t in self.tables.values())


# Per execution context (thread or asyncio task), so concurrent erasures on one saver
# each see their own receipt; keyed by a per-eraser serial number (an ``id()`` can be
# reused by a later saver), copied on write.
_SERIAL = itertools.count()
_LAST_RECEIPT: ContextVar[dict[int, Receipt] | None] = ContextVar(
    "erasure_receipts_last_receipt", default=None
)


def check_archive(archive: Path | ReceiptLog | None) -> None:
    """Refuse, before anything is deleted, an archive the receipt could not be written to."""
    if archive is None:
        return
    if not isinstance(archive, Path):  # a ReceiptLog
        try:
            archive.check_writable()
        except Error as exc:
            raise ConfigurationError(f"archive log: {exc.message}") from None
        return
    if archive.exists() and not archive.is_dir():
        raise ConfigurationError(f"archive {str(archive)!r} exists and is not a directory")
    try:
        archive.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".erasure-receipts-probe.", dir=archive)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigurationError(
            f"archive {str(archive)!r} is not writable: {exc.strerror or exc}"
        ) from None


def residue_mode(value: Any) -> ResidueScan:
    """Validate a ``residue_scan=`` value (True, False or "vacuum")."""
    if value is True or value is False or value == "vacuum":
        return value  # type: ignore[no-any-return]
    raise ConfigurationError(f'residue_scan must be True, False or "vacuum", not {value!r}')


def _parse_time(t: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _parse_pending(
    receipt_id: str, issued_at: str, entry: str, statement: str | None
) -> tuple[datetime | None, str | None]:
    """An open journal row's time (None if unreadable), and why the row cannot be
    recovered as it is (text that is not UTF-8, a time or JSON that does not parse)."""
    import json

    issued = _parse_time(issued_at)
    for name, text in (("receipt_id", receipt_id), ("issued_at", issued_at),
                       ("entry", entry), ("statement", statement)):  # fmt: skip
        try:
            (text or "").encode("utf-8")
        except UnicodeEncodeError:
            return issued, f"{name} is not valid UTF-8"
    if issued is None:
        return None, f"issued_at {issued_at[:40]!r} is not an RFC 3339 time"
    try:
        if statement is None:
            parsed = json.loads(entry)
            # A privacy-mode entry's request is sealed: it opens (and is checked) only
            # with its commitment key, at recovery; here its envelope must be sound.
            if isinstance(parsed, dict) and "sealed" in parsed:
                if not isinstance(parsed["sealed"], dict):
                    raise ValueError("sealed is not a JSON object")
            else:
                request_from_journal(entry)
        elif not isinstance(json.loads(statement), dict):
            raise ValueError("not a JSON object")
    except (ValueError, KeyError, TypeError) as exc:
        what = "entry" if statement is None else "statement"
        return issued, f"{what} does not parse ({type(exc).__name__}: {str(exc)[:80]})"
    return issued, None


def _has_draft(entry: str) -> bool:
    """Whether a journal entry carries the statement its transaction checked."""
    import json

    try:
        parsed = json.loads(entry)
    except ValueError:
        return False
    return isinstance(parsed, dict) and isinstance(parsed.get("draft"), dict)


def _display_id(receipt_id: str) -> str:
    """A journal row's receipt id (or time) as text that can be printed (a damaged
    SQLite row's bytes that are not UTF-8 as ``\\xNN``)."""
    return receipt_id.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def normalise_namespaces(namespaces: Iterable[Sequence[str]]) -> tuple[Namespace, ...]:
    """Store namespaces as unique tuples of non-empty strings (or a clear error)."""
    out = []
    for ns in namespaces:
        if isinstance(ns, str):
            raise ArgumentTypeError(f"a store namespace is a tuple of strings, not {ns!r}")
        t = tuple(ns)
        if not t or not all(isinstance(p, str) and p for p in t):
            raise ConfigurationError(f"invalid store namespace {ns!r}: non-empty strings required")
        out.append(t)
    return tuple(dict.fromkeys(out))


def _log_residue(residue: list[dict[str, Any]]) -> None:
    for r in residue:
        if r["status"] in ("partial", "failed"):
            log.warning("residue %s: %s %s", r["action"], r["status"], r["detail"])


def conceal(residue: list[dict[str, Any]], key: CommitmentKey, paths: Iterable[str]) -> Any:
    """Residue entries with every database path committed: ``detail.database`` values,
    and the same paths inside any other text (an error message)."""
    known = {p: key.commit("database", p) for p in paths if p and p != ":memory:"}

    def collect(v: Any, name: str | None = None) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                collect(x, k)
        elif isinstance(v, list):
            for x in v:
                collect(x)
        elif name == "database" and isinstance(v, str) and not v.startswith(PREFIX):
            known.setdefault(v, key.commit("database", v))

    def rewrite(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: rewrite(x) for k, x in v.items()}
        if isinstance(v, list):
            return [rewrite(x) for x in v]
        if isinstance(v, str):
            if v in known:
                return known[v]
            for raw in sorted(known, key=len, reverse=True):
                v = v.replace(raw, known[raw])
        return v

    collect(residue)
    return rewrite(residue)


class _SubjectBackend(GuardedBackend):
    """The engine backend of one subject erasure: the saver's own backend, plus what
    only a subject erasure adds - the scope re-checked under the write lock, the store
    outside the database in a database-wide needle search, and (privacy mode) residue
    details without database paths. Everything else is the saver's backend's."""

    def __init__(
        self,
        inner: ErasureBackend,
        *,
        guard: Callable[[], None] | None,
        store_search: Callable[[Sequence[bytes]], list[dict[str, Any]]] | None,
        conceal: CommitmentKey | None,
    ) -> None:
        super().__init__(inner, guard)
        self._store_search = store_search
        self._conceal = conceal

    def find_store_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The store outside the database, searched after its sweep (the engine searches
        the database's rows first, before anything is swept)."""
        if scope == "database" and self._store_search is not None:
            return self._store_search(forms)
        return []

    def reduce_residue(self) -> list[dict[str, Any]]:
        """The inner backend's residue steps (database paths committed in privacy mode)."""
        out: list[dict[str, Any]] = self.inner.reduce_residue()
        if self._conceal is None:
            return out
        return conceal(out, self._conceal, [self.inner.database])  # type: ignore[no-any-return]


def _base(backend: Any) -> Any:
    while hasattr(backend, "inner"):
        backend = backend.inner
    return backend


def _handle(base: Any) -> Any:
    return base.conn if base.kind == "sqlite" else base.session


def _close_targets(backend: Any) -> None:
    """Close the connections a request's targets opened to other databases."""
    while backend is not None:
        if isinstance(backend, TargetsBackend):
            backend.close()
        backend = getattr(backend, "inner", None)


class TargetsBackend(GuardedBackend):
    """A backend with its request's targets as parts: tables of the database in its
    transaction, the rest measured there and swept after the commit."""

    def __init__(self, inner: ErasureBackend, request: ErasureRequest) -> None:
        super().__init__(inner, None)
        base = _base(inner)
        if request.privacy is not None:
            raise ConfigurationError(
                "targets= are not available in privacy mode (their names and databases "
                "would be in the receipt in clear)"
            )
        self._request = request
        self._targets = applies(request)
        tables = [t for t in self._targets if isinstance(t, SqlTarget) and t.database is None]
        if tables and base.kind not in ("sqlite", "postgres"):
            raise ConfigurationError(
                f"a table target of the saver's database needs a SQLite or PostgreSQL saver, "
                f"not {base.kind}"
            )
        self._kind = base.kind
        self._handle = _handle(base) if tables else None
        self._parts: list[Part] = []
        for t in self._targets:
            for value, unit in target_values(request, t):
                part: Any
                if isinstance(t, SqlTarget) and t.database is None:
                    check_sql_target(self._kind, self._handle, t)
                    part = sql_target_part(self._kind, self._handle, t, value, unit)
                elif isinstance(t, SqlTarget):
                    part = OtherDatabasePart(t, value, label(t), label(t), unit)
                else:
                    part = ItemsPart(t, value, label(t), label(t), unit)
                part.after = getattr(t, "after", None)
                self._parts.append(part)
        if getattr(base, "lock_tables", ()):  # PostgreSQL: a search must hold at commit
            own = [t.table for t in self._targets if isinstance(t, SqlTarget) and not t.database]
            base.lock_tables = tuple(dict.fromkeys([*base.lock_tables, *own]))
        self.prepare()

    def parts(self) -> Sequence[Part]:
        """The inner backend's parts, then the targets'."""
        return [*self.inner.parts(), *self._parts]

    def prepare(self) -> None:
        """Before the transaction: other databases connected and their tables checked."""
        for p in self._parts:
            if isinstance(p, OtherDatabasePart):
                try:
                    p.open()
                except ConfigurationError:
                    raise
                except Exception as exc:
                    raise ConfigurationError(
                        f"target {p.target.name!r}: {p.target.database} cannot be opened "
                        f"({type(exc).__name__}: {exc})"
                    ) from None

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The inner backend's search, then (``scope="database"``) every target outside
        the erased scope: every row of each table target, in the saver's database or in
        its own; every item a searchable item target finds. A target that cannot be
        searched refuses (``ConfigurationError``; the preflight refuses it first)."""
        out = list(self.inner.find_needles(forms, scope, threads))
        if scope != "database":
            return out
        for t in self._targets:
            values = [v for v, _ in target_values(self._request, t)]
            if isinstance(t, SqlTarget) and t.database is None:
                out += find_sql_needles(self._kind, self._handle, t, forms, values)
                continue
            if isinstance(t, SqlTarget):  # its table in its database, before the sweep
                part = next(p for p in self._parts
                            if isinstance(p, OtherDatabasePart) and p.target is t)  # fmt: skip
                out += part.find_needles(forms, values)
                continue
            why = unsearchable(t)
            if why is not None:
                raise ConfigurationError(f"target {t.name!r} cannot be searched for needles: {why}")
            # items outside the erased scope
            erased = {k for p in self._parts if isinstance(p, ItemsPart) and p.target is t
                      for k in p.measured}  # fmt: skip
            out += [{"table": label(t), "key": k, "column": "document", "via": "target"}
                    for k in sorted(set(t.locate(forms)) - erased)]  # fmt: skip
        return out

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """The inner tombstone, and a trigger on each thread-keyed table target of the
        database that refuses a late insert for the tombstoned thread ids."""
        self.inner.write_tombstone(receipt_id, erased_at)
        for t in self._targets:
            if guarded(True, t):
                ensure_target_trigger(self._kind, self._handle, t)

    def close(self) -> None:
        """Connections of their own closed."""
        for p in self._parts:
            if isinstance(p, OtherDatabasePart):
                p.close()


class Eraser:
    """One saver's erasures: its configuration and every flow, over its seams."""

    def __init__(
        self,
        db: Database,
        journal: Journal,
        reader: Reader,
        *,
        signer: Signer,
        store: BaseStore | None = None,
        archive: str | Path | ReceiptLog | None = None,
        namespaces_for: NamespacesFor | None = None,
        clock: Callable[[], datetime] | None = None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
        targets: Iterable[Any] | None = None,
    ) -> None:
        if not isinstance(signer, Signer):
            raise ArgumentTypeError("signer= must be an erasure_receipts.Signer")
        if tombstone_policy not in TOMBSTONE_POLICIES:
            raise ConfigurationError(
                f"tombstone_policy= must be one of {TOMBSTONE_POLICIES}, not {tombstone_policy!r}"
            )
        if namespaces_for is not None and store is None:
            raise ConfigurationError(
                "namespaces_for= names store namespaces to erase, but no store= was given"
            )
        if namespaces_for is not None and not callable(namespaces_for):
            raise ArgumentTypeError("namespaces_for= must be a function thread_id -> namespaces")
        self.db = db
        self.journal = journal
        self.reader = reader
        self.signer = signer
        self.store = store
        self.archive: Path | ReceiptLog | None = (
            archive if archive is None or isinstance(archive, ReceiptLog) else Path(archive)
        )
        if isinstance(self.archive, Path) and self.archive.exists() and not self.archive.is_dir():
            raise ConfigurationError(f"archive {str(archive)!r} exists and is not a directory")
        self.namespaces_for = namespaces_for
        self.clock = clock
        self.residue_scan = residue_mode(residue_scan)
        self.refuse_erased_reads = bool(refuse_erased_reads)
        self.tombstone_policy = tombstone_policy
        self.targets: tuple[Any, ...] = check_targets(targets)
        """The saver's erasure targets (``targets=``), erased with every thread or
        subject erasure (RECEIPT_SPEC.md 9.13)."""
        self.check_erasures: str | os.PathLike[str] | ReceiptLog | None = None
        """The startup guard's receipt archive or log (``check_erasures=``), or None."""
        self.guard_state: bool | str | None = None
        """The startup guard: None (not checked), True (passed) or why it refused."""
        self.phase_one_seconds = 0.0
        """How long the last erasure's phase one took (its transaction, with the residue
        step and re-measure after the commit): what writers of its threads could have
        waited. Batched sweeps size their batches by it."""
        self.commitment_keys: dict[str, CommitmentKey] = {}
        """Commitment keys by key id (privacy-mode erasures' and recovery's), in memory
        only: recovery opens a sealed journal entry with its key."""
        self._serial = next(_SERIAL)

    # -- context -----------------------------------------------------------------------

    @property
    def last_receipt(self) -> Receipt | None:
        """The receipt of the last erasure made *in this thread or asyncio task*."""
        return (_LAST_RECEIPT.get() or {}).get(self._serial)

    def set_last(self, receipt: Receipt) -> None:
        """Record ``receipt`` as this context's last (async: in the caller's task)."""
        _LAST_RECEIPT.set({**(_LAST_RECEIPT.get() or {}), self._serial: receipt})

    def now(self) -> datetime:
        """The saver's clock (aware, UTC if the clock gives naive times)."""
        now = self.clock() if self.clock is not None else datetime.now(UTC)
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def scan(self, residue_scan: ResidueScan | None) -> ResidueScan:
        """A call's ``residue_scan=`` (None: the saver's)."""
        return self.residue_scan if residue_scan is None else residue_mode(residue_scan)

    def preflight(self) -> None:
        """Before anything is deleted: the receipt can be archived."""
        check_archive(self.archive)

    def external_store(self) -> BaseStore | None:
        """The store, when its items are not rows of the saver's database."""
        return self.store if self.store is not None and not self.db.store_rows() else None

    # -- requests ------------------------------------------------------------------------

    def request(
        self,
        thread_id: Any,
        store_namespaces: Iterable[Sequence[str]] | None,
        tombstone: bool,
        allow_empty: bool = False,
        *,
        request: Any = None,
        authorization: Any = None,
        targets: Iterable[Any] | None = None,
    ) -> ErasureRequest:
        """The request of a thread-scoped operation. Its store scope, one rule for every
        entry point: ``store_namespaces`` if given (``[]``: no store), else (None) the
        saver's ``namespaces_for(thread_id)`` - erased only with rows of the thread.
        Its targets: the saver's, then the call's ``targets``."""
        if isinstance(thread_id, int) and not isinstance(thread_id, bool):
            thread_id = str(thread_id)
        if not isinstance(thread_id, str) or not thread_id:
            raise ConfigurationError(f"thread_id must be a non-empty string, not {thread_id!r}")
        mapped = store_namespaces is None
        if store_namespaces is None:
            store_namespaces = self.namespaces_for(thread_id) if self.namespaces_for else ()
        namespaces = normalise_namespaces(store_namespaces)
        if namespaces and self.store is None:
            raise ConfigurationError("store_namespaces were given but the saver has no store=")
        er = ErasureRequest(thread_id, namespaces, bool(tombstone), bool(allow_empty),
                            mapped_store=mapped and bool(namespaces),
                            targets=self.with_targets(targets))  # fmt: skip
        return self.with_context(er, request, authorization)

    def with_targets(self, targets: Iterable[Any] | None) -> tuple[Any, ...]:
        """The saver's targets and a call's (names unique across both)."""
        if targets is None:
            return self.targets
        return check_targets((*self.targets, *check_targets(targets)), "targets")

    def resolve_targets(self, request: ErasureRequest) -> ErasureRequest:
        """Recovery: each journaled target replaced by the saver's target of its name."""
        if not request.targets:
            return request
        mine = {t.name: t for t in self.targets}
        return replace(request, targets=tuple(mine.get(t.name, t) for t in request.targets))

    def with_context(self, er: ErasureRequest, request: Any, authorization: Any) -> ErasureRequest:
        """``er`` with the request context and authorization (RECEIPT_SPEC.md 9.6) as
        the receipt's ``request``/``authorization`` members. Call it once ``er`` has its
        final kind and scope: the authorization is checked here, with the saver's clock,
        before anything is deleted (``AuthorizationError``), and again against
        ``issued_at`` inside the transaction (engine)."""
        from ..request import Authorization, RequestContext, erasure_scope

        if request is None and authorization is None:
            return er
        if not isinstance(request, RequestContext):
            raise ConfigurationError(
                "request= must be an erasure_receipts.RequestContext (an authorization= "
                f"names a request id, so it needs one), not {type(request).__name__}"
            )
        now = format_time(self.now())
        if request.received_at is not None and time_key(request.received_at) > time_key(now):
            raise ConfigurationError(
                f"request received_at {request.received_at} is in the future (now {now})"
            )
        commit = er.privacy.commit if er.privacy is not None else None
        context = request.to_predicate(commit)
        auth = None
        if authorization is not None:
            if isinstance(authorization, dict):
                authorization = Authorization.from_obj(authorization)
            if not isinstance(authorization, Authorization):
                raise ConfigurationError(
                    "authorization= must be an erasure_receipts.Authorization (from "
                    f"authorize() or Authorization.from_json), not {type(authorization).__name__}"
                )
            target = er.thread_id  # the subject's id for subject erasures
            scope = erasure_scope(er.kind, target, er.store_namespaces, commit=commit)
            authorization.check(er.kind, scope, request.id, now)
            auth = authorization.to_dict()
        return replace(er, context=context, authorization=auth)

    # -- the engine backend of a request -------------------------------------------------

    def backend(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan
    ) -> ErasureBackend:
        """The database's backend for ``request``; a subject erasure's adds its scope
        re-check under the lock, the external store's needle search and (privacy mode)
        residue without paths."""
        backend = self._backend(handle, request, residue_scan)
        return TargetsBackend(backend, request) if applies(request) else backend

    def _backend(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan
    ) -> ErasureBackend:
        backend: Any = self.db.backend(handle, request, residue_scan)
        if request.kind != "subject":
            return backend  # type: ignore[no-any-return]
        database_needles = bool(request.needles) and request.needle_scope == "database"
        if hasattr(backend, "lock_tables") and (request.discovery or database_needles):
            # PostgreSQL: what a search found must still hold at commit.
            tables = [t for t in backend.tables if not t.startswith("store")]
            if database_needles and backend.has_store_table():
                tables.append("store")
            backend.lock_tables = tuple(dict.fromkeys(tables))
        recheck = None
        if request.discovery is not None:
            discovery = request.discovery

            def recheck() -> None:
                now = self.journal.threads_by_metadata(handle, discovery, request.thread_id)
                new = sorted(set(now) - set(request.threads))
                if new:
                    raise _ScopeChanged(new)

        store = self.external_store()
        search = None
        if store is not None and database_needles:

            def search(forms: Sequence[bytes]) -> list[dict[str, Any]]:
                return store_locations(store, forms)

        return _SubjectBackend(backend, guard=recheck, store_search=search,
                               conceal=request.privacy)  # fmt: skip

    # -- phase one, in the database -------------------------------------------------------

    def _phase_one(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan, guard: Guard | None
    ) -> tuple[RowsOutcome, set[str]]:
        """The protocol's phase one, retried (bounded) on transient conflicts, with
        ``guard`` run first inside the transaction."""
        clock = {"clock": self.clock} if self.clock is not None else {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            started = time.monotonic()
            backend = self.backend(handle, request, residue_scan)
            if guard is not None:
                backend = GuardedBackend(backend, lambda: guard(handle))
            try:
                outcome = erase_rows(backend, request, generator_version=__version__, **clock)
            except ErasureIncompleteError as exc:
                swept = any(p.irreversible_deleted for p in backend.parts())
                if not self.db.retryable(exc) or swept:
                    raise
                if attempt == MAX_ATTEMPTS:
                    raise ErasureIncompleteError(
                        f"erasure of {request.label} gave up after {attempt} "
                        "attempts on concurrent transactions (serialization failure, "
                        f"deadlock or lock timeout); nothing was deleted: {exc.message}",
                        remaining=exc.remaining,
                    ) from exc
                time.sleep(random.uniform(0.01, 0.05) * 2**attempt)
                continue
            finally:
                _close_targets(backend)
            self.phase_one_seconds = time.monotonic() - started
            log.info(
                "erased %s%s: %d rows, receipt %s",
                "the history of " if request.kind == "history" else "",
                request.label,
                sum(t.rows for t in outcome.pre_tables.values()),
                outcome.receipt_id,
            )
            _log_residue(outcome.residue)
            return outcome, backend.checkpoint_namespaces
        raise AssertionError("unreachable")  # pragma: no cover

    def _resume(self, handle: Any, receipt_id: str, issued_at: str, entry: str) -> RowsOutcome:
        request = self.resolve_targets(
            request_from_journal(entry, receipt_id, self.commitment_keys)
        )
        backend = self.backend(handle, request, self.residue_scan)
        try:
            outcome = resume_rows(backend, request, receipt_id, issued_at, entry)
        finally:
            _close_targets(backend)
        _log_residue(outcome.residue)
        return outcome

    def measure(self, handle: Any, request: ErasureRequest) -> ThreadDigest:
        """What an erasure of ``request`` would measure now (runs ``db``-side)."""
        backend = self.backend(handle, request, False)
        digest, tables = measure_rows(backend)
        own = {p.table for p in backend.parts() if p.group == "checkpoints"}
        if request.mapped_store and not any(tables[t].rows for t in own if t in tables):
            # As the erasure: namespaces_for's namespaces only with rows of the thread.
            return self.measure(handle, replace(request, store_namespaces=(), mapped_store=False))
        return ThreadDigest(digest, tables)

    def preview(self, handle: Any, request: ErasureRequest) -> ThreadDigest:
        """``digest_thread``: read-only (SQLite: the file is checked to be a LangGraph
        database first)."""
        self.db.check_readable(handle)
        return self.measure(handle, request)

    # -- after the commit ----------------------------------------------------------------

    def _statement_of(self, outcome: RowsOutcome, api: list[ApiCheck]) -> str:
        import json

        statement = final_statement(outcome, api, generator_version=__version__)
        return json.dumps(statement, sort_keys=True, ensure_ascii=False)

    def _sign(self, statement_json: str) -> Receipt:
        """Sign a journaled statement and archive the receipt (deterministic bytes)."""
        import json

        try:
            receipt = sign_and_archive(json.loads(statement_json), self.signer, self.archive)
        except ErasureIncompleteError:
            raise
        except Exception as exc:
            raise ErasureIncompleteError(
                "the erasure committed, but its receipt could not be issued "
                f"({type(exc).__name__}: {exc}); the erasure journal in the database keeps "
                "the measurement: call recover_receipts() to issue it"
            ) from exc
        self.set_last(receipt)
        log.info(
            "receipt %s issued%s", receipt.receipt_id, f" into {self.archive}" * bool(self.archive)
        )
        return receipt

    @staticmethod
    def _after_commit_failed(exc: BaseException) -> ErasureIncompleteError:
        """Anything failing between commit and signature: the journal entry committed with
        the deletion keeps the measurement, so the receipt is recoverable."""
        if isinstance(exc, ErasureIncompleteError):
            return exc
        return ErasureIncompleteError(
            f"the erasure committed, but no receipt was issued ({type(exc).__name__}: {exc}); "
            "the erasure journal in the database keeps the measurement: fix the cause and "
            "call recover_receipts(), which re-verifies the scope and issues it"
        )

    def _mark_issued(self, receipt: Receipt) -> None:
        # Best effort: if it fails, the journal entry stays open with its statement, and
        # recover_receipts() re-signs that statement - producing this receipt again.
        try:
            self.db.run(self.journal.mark_issued, receipt.receipt_id, receipt.to_json())
        except Exception as exc:
            log.warning(
                "receipt %s issued but not marked in the journal: %s", receipt.receipt_id, exc
            )

    # -- the flows --------------------------------------------------------------------------

    def erase(
        self, request: ErasureRequest, residue_scan: ResidueScan, guard: Guard | None = None
    ) -> Receipt:
        """Measure, delete, commit, check, sign and archive one erasure; ``guard`` runs
        first inside its transaction (under the write lock) with the database handle.

        An open deferral of a thread in scope refuses the erasure inside the transaction
        (``DeferredError``), unless the request carries it out (``deferral_of``) or
        overrides it (``override_deferral``: the receipt names the deferral); the
        deferral it names is closed as executed once the receipt is issued."""
        return self.finish(self.begin(request, residue_scan, guard))

    def _deferral_guard(
        self, request: ErasureRequest, guard: Guard | None
    ) -> tuple[ErasureRequest, Guard]:
        threads = list(request.all_threads)
        if request.override_deferral and request.deferral_of is None:
            found = self.db.run(self.journal.open_deferrals, threads)
            if found:
                request = replace(request, deferral_of=found[0][0])

        def check(handle: Any) -> None:
            if guard is not None:
                guard(handle)
            found = self.journal.open_deferrals(handle, threads)
            blocking = [d for d in found if d[0] != request.deferral_of]
            if blocking and not request.override_deferral:
                raise DeferredError(request.label, blocking)

        return request, check

    def _close_deferral(self, deferral_of: str, receipt: Receipt, note: str | None) -> None:
        # Best effort: the receipt names the deferral; a deferral left open is closed by
        # the next sweep (its scope then holds nothing: "lapsed").
        try:
            self.db.run(
                self.journal.close_deferral, deferral_of, "executed",
                receipt.predicate["issued_at"], receipt.receipt_id, note,
            )  # fmt: skip
        except Exception as exc:
            log.warning("deferral %s not closed: %s", deferral_of, exc)

    def begin(
        self,
        request: ErasureRequest,
        residue_scan: ResidueScan,
        guard: Guard | None = None,
        *,
        readback: tuple[Executor, Reader] | None = None,
    ) -> Committed:
        """The first half of :meth:`erase`: its lease scope opened and its phase one
        committed; :meth:`finish` issues the receipt (until then the journal entry is
        open and leased, as while :meth:`erase` signs). With ``readback``, the read-back
        starts at once on that executor through that reader (one with a connection of
        its own), so a batched sweep's next transaction need not wait for it."""
        if request.kind != "namespace":
            request, guard = self._deferral_guard(request, guard)
        scope = ExitStack()
        leases = scope.enter_context(lease.owner_scope(self._release_lease))
        try:
            phase_one = lease.bind(leases, self._phase_one)
            outcome, namespaces = self.db.run(phase_one, request, residue_scan, guard)
        except BaseException:
            scope.close()
            raise
        try:
            checked = request
            if request.kind == "history":  # read back against the kept set it fixed
                kept = outcome.members["kept_state"]["checkpoints"]
                checked = replace(
                    request,
                    kept=tuple((c["checkpoint_ns"], c["checkpoint_id"]) for c in kept),
                    removed=outcome.request.removed,
                )
            pending = None
            if readback is not None:
                executor, reader = readback
                pending = executor.submit(api_checks, reader, checked, namespaces)
        except BaseException as exc:  # the leases go now, whatever it was
            scope.close()
            if isinstance(exc, Exception):
                raise self._after_commit_failed(exc) from exc
            raise
        return Committed(request, outcome, checked, namespaces, pending, scope)

    def finish(self, done: Committed) -> Receipt:
        """The second half of :meth:`erase`: the read-back (or its result), the statement
        journaled, signed, archived and marked issued; the leases released."""
        with done.scope:
            try:
                api = None
                if done.readback is not None:
                    try:
                        api = done.readback.result()
                    except Exception as exc:  # no evidence either way: read back in turn
                        log.warning("read-back on the second connection failed (%s); "
                                    "reading back on the saver's", exc)  # fmt: skip
                if api is None:
                    api = api_checks(self.reader, done.checked, done.namespaces)
                statement = self._statement_of(done.outcome, api)
                statement = self.db.run(
                    self.journal.record_statement, done.outcome.receipt_id, statement
                )
            except Exception as exc:
                raise self._after_commit_failed(exc) from exc
            receipt = self._sign(statement)
            self._mark_issued(receipt)
        request = done.request
        if request.deferral_of is not None:
            note = "overridden" if request.override_deferral else None
            self._close_deferral(request.deferral_of, receipt, note)
        return receipt

    # -- leases on open journal entries (lease.py) -------------------------------------

    def _take_lease(self, receipt_id: str) -> Any:
        """Lease an open entry for recovery: None if its erasure (or another recovery)
        still holds it, in this process or another."""
        if not lease.claim(receipt_id):
            return None
        try:
            token = self.db.run(self.journal.take_lease, receipt_id)
        except BaseException:
            lease.drop(receipt_id)
            raise
        if token is None:
            lease.drop(receipt_id)
        return token

    def _release_lease(self, receipt_id: str, token: Any) -> None:
        try:
            self.db.run(self.journal.release_lease, receipt_id, token)
        except Exception as exc:  # it ends with the connection or process anyway
            log.warning("lease on journal entry %s not released: %s", receipt_id, exc)
        finally:
            lease.drop(receipt_id)

    def recover(self, min_age_seconds: float, key: CommitmentKey | None = None) -> list[Receipt]:
        """Issue the receipts of journaled erasures older than ``min_age_seconds`` that
        no running erasure holds; unattestable entries are listed in the error raised
        at the end (``recovered``: the receipts issued meanwhile)."""
        if key is not None:  # opens the privacy-mode entries sealed with it
            self.commitment_keys[key.key_id] = key
        cutoff = self.now() - timedelta(seconds=min_age_seconds)
        pending, unparsable = [], {}
        # Every open entry is read and checked here, not filtered in SQL: an entry whose
        # time or text cannot be read is named, never silently passed over.
        for row in self.db.run(self.journal.pending_journal):
            issued, why = _parse_pending(*row)
            if why is not None:
                unparsable[_display_id(row[0])] = why
            elif issued is not None and issued < cutoff:
                pending.append(row)
        if pending:
            self.preflight()
            log.info("recovering %d journaled erasure(s) without a receipt", len(pending))
        for rid, why in unparsable.items():
            log.warning("journal entry %s is unparsable (%s); left as it is", rid, why)
        out: list[Receipt] = []
        failures = {rid: f"unparsable journal entry ({why}); left as it is"
                    for rid, why in unparsable.items()}  # fmt: skip
        in_flight = 0
        for receipt_id, issued_at, entry, statement in pending:
            # Only entries whose erasure is gone: one still running holds its lease
            # (and another recovery holds the lease of the entry it completes).
            try:
                held = self._take_lease(receipt_id)
            except Exception as exc:  # e.g. no lease file can be made: this one waits
                failures[receipt_id] = f"cannot lease the journal entry: {exc!r}"
                continue
            if held is None:
                in_flight += 1
                continue
            try:
                receipt = self._recover_one(receipt_id, issued_at, entry, statement)
            except Exception as exc:
                failures[receipt_id] = exc.message if isinstance(exc, Error) else repr(exc)
                continue
            finally:
                self._release_lease(receipt_id, held)
            if receipt is not None:
                out.append(receipt)
        if in_flight:
            log.info("%d journaled erasure(s) skipped: still held by a running erasure or "
                     "recovery", in_flight)  # fmt: skip
        if failures:
            raise ErasureIncompleteError(
                f"{len(failures)} journaled erasure(s) could not be attested "
                f"({len(out)} recovered): "
                + "; ".join(f"{rid}: {why}" for rid, why in failures.items()),
                recovered=out,
                unparsable=list(unparsable),
            )
        return out

    def _recover_one(
        self, receipt_id: str, issued_at: str, entry: str, statement: str | None
    ) -> Receipt | None:
        """Complete one leased open entry; None if it was completed meanwhile (by its
        erasure, or a recovery that released it just now)."""
        if not self.db.run(self.journal.still_pending, receipt_id):
            return None
        if statement is None and _has_draft(entry):  # a redaction: its rows stay
            statement = self.db.run(self._resume_draft, receipt_id, entry)
        if statement is None:
            request = request_from_journal(entry, receipt_id, self.commitment_keys)
            if request.store_namespaces and self.store is None:
                raise ErasureIncompleteError(
                    "this journal entry covers store namespaces; recover with the "
                    "same store= as the erasure"
                )
            outcome = self.db.run(self._resume, receipt_id, issued_at, entry)
            api = api_checks(self.reader, request, set())
            statement = self._statement_of(outcome, api)
            statement = self.db.run(self.journal.record_statement, receipt_id, statement)
        self.redact_entry(receipt_id, entry)
        receipt = self._sign(statement)
        self._mark_issued(receipt)
        deferral = receipt.predicate.get("deferral_of")
        if deferral is not None:  # the erasure that carried it out died before closing it
            self._close_deferral(str(deferral), receipt, None)
        return receipt

    def _resume_draft(self, handle: Any, receipt_id: str, entry: str) -> str:
        """Recovery of an operation that journaled the statement it checked in its
        transaction (a redaction: no post-state to re-measure as empty): the residue
        steps now, the check that says so, and the statement journaled."""
        import json

        draft = json.loads(entry)["draft"]
        request = request_from_journal(entry, receipt_id, self.commitment_keys)
        residue = self.backend(handle, request, self.residue_scan).reduce_residue()
        _log_residue(residue)
        predicate = draft["predicate"]
        predicate["residue"] = residue
        predicate["checks"].append(
            {"name": "issued_from_journal", "result": "pass",
             "detail": "receipt issued after an interruption, from the statement checked in "
                       "the committed transaction"}
        )  # fmt: skip
        text = json.dumps(draft, sort_keys=True, ensure_ascii=False)
        return str(self.journal.record_statement(handle, receipt_id, text))

    def redact_entry(self, receipt_id: str, entry: str, committed: str | None = None) -> None:
        """Privacy mode, best effort: once the statement is journaled (recovery then
        only signs it), the entry keeps no raw id and no sealed request."""
        redacted = redact_entry(entry)
        if redacted is None:
            return
        journal_id, text = redacted
        try:
            self.db.run(
                self.journal.redact_journal, receipt_id, committed or journal_id, lambda _: text
            )
        except Exception as exc:
            log.warning("journal entry %s keeps raw ids: %s", receipt_id, exc)

    def pending(self) -> list[PendingErasure]:
        """Open journal entries with their age (``pending_erasures``)."""
        now = self.now()
        out = []
        for row in self.db.run(self.journal.pending_journal):
            t, _ = _parse_pending(*row)
            age = math.inf if t is None else (now - t).total_seconds()
            out.append(PendingErasure(_display_id(row[0]), _display_id(row[1]), age))
        return out

    def journal_receipts(self, thread_id: str | None) -> list[Receipt]:
        """The receipts the journal keeps (of one thread)."""
        out = []
        for blob in self.db.run(self.journal.journal_receipts, thread_id):
            try:  # one damaged row must not hide the other receipts
                out.append(Receipt.from_json(blob))
            except (Error, ValueError) as exc:
                log.warning("a receipt kept in the journal is unparsable: %s", exc)
        return out

    def export(
        self, request: ErasureRequest, select: Callable[[str, tuple[Any, ...]], bool] | None
    ) -> list[LeafRecord]:
        """Legal hold: the scope's rows with their inclusion proofs (read-only)."""

        def run(handle: Any) -> tuple[list[bytes], list[tuple[int, bytes]]]:
            scoped = request
            if request.mapped_store:  # as the erasure: with rows of the thread only
                alone = replace(request, store_namespaces=(), mapped_store=False)
                if not self.measure(handle, alone).leaves:
                    scoped = alone
            return export_leaves(self.backend(handle, scoped, False), head_filter(select))

        hashes, chosen = self.db.run(run)
        return leaf_records(request.thread_id, hashes, chosen)

    def cutoff(self, older_than: timedelta | datetime) -> datetime:
        """``older_than=`` (an age, or a cutoff time) as a cutoff time."""
        if isinstance(older_than, timedelta):
            if older_than < timedelta(0):
                raise ConfigurationError("older_than= must not be negative")
            return self.now() - older_than
        if isinstance(older_than, datetime):
            return older_than if older_than.tzinfo else older_than.replace(tzinfo=UTC)
        raise ArgumentTypeError("older_than= is a timedelta (age) or a datetime (cutoff)")
