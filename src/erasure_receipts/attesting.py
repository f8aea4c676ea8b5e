"""What every attesting saver shares: its arguments, and each operation's flow, once.

Every operation (erase, recover, digest, export, journal queries) is written here a
single time, synchronously, over a few hooks that a backend's saver provides:

* ``_db(fn, *args)`` runs ``fn(handle, *args)`` on the saver's database handle (a
  ``sqlite3.Connection``, a PostgreSQL session) under the saver's lock;
* ``_new_backend(handle, request, residue_scan)`` builds the engine's backend;
* ``_journal`` is the backend module's journal functions (same names and signatures
  for every backend: ``record_statement``, ``mark_issued``, ``pending_journal``,
  ``journal_receipts``, ``reopen``, ``is_erased``);
* ``_api_counts(request, namespaces)`` reads the erased scope back through LangGraph's
  public API.

Async savers run the very same flows on a worker thread (:class:`AsyncFlows`), their
``_db`` and ``_api_counts`` bridged onto the event loop that owns their connection: one
implementation of the protocol for SQLite and PostgreSQL, sync and async.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple, TypeVar

from langgraph.store.base import BaseStore

from . import __version__, lease
from .backends.store import PAGE_SIZE, acount_items, count_items
from .engine import (
    ErasureBackend,
    ErasureRequest,
    RowsOutcome,
    TableCount,
    erase_rows,
    final_statement,
    format_time,
    measure_rows,
    redact_entry,
    request_from_journal,
    resume_rows,
    sign_and_archive,
)
from .errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasureIncompleteError,
    Error,
    NothingToEraseError,
)
from .log import ReceiptLog
from .privacy import CommitmentKey
from .proof import LeafRecord, head_filter, leaf_records
from .receipt import TOMBSTONE_POLICIES, Receipt
from .signing import Signer

__all__ = [
    "AsyncFlows",
    "Attesting",
    "NamespacesFor",
    "PendingErasure",
    "ResidueScan",
    "ThreadDigest",
    "check_archive",
]

log = logging.getLogger("erasure_receipts")

T = TypeVar("T")
Namespace = tuple[str, ...]
NamespacesFor = Callable[[str], Iterable[Sequence[str]]]
ResidueScan = bool | Literal["vacuum"]
"""``residue_scan=``: off, on (VACUUM only if a copy is found), or "vacuum" (always)."""

MAX_ATTEMPTS = 5
"""Erasure attempts when the backend reports a transient conflict (deadlock, ...)."""


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
# each see their own receipt; keyed by a per-saver serial number (an ``id()`` can be
# reused by a later saver), copied on write.
_SERIAL = itertools.count()
_LAST_RECEIPT: ContextVar[dict[int, Receipt] | None] = ContextVar(
    "erasure_receipts_last_receipt", default=None
)
API_CHECK: ContextVar[bool] = ContextVar("erasure_receipts_api_check", default=False)
"""Set while the saver checks its own erasure through the public API: the erased thread
must then be *read* (and found empty), not refused by ``refuse_erased_reads``."""


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


def _display_id(receipt_id: str) -> str:
    """A journal row's receipt id (or time) as text that can be printed (a damaged
    SQLite row's bytes that are not UTF-8 as ``\\xNN``)."""
    return receipt_id.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _after(a: str, b: str) -> bool:
    """Whether RFC 3339 UTC time ``a`` is after ``b`` (receipts' form, as instants)."""

    def key(t: str) -> str:
        base, _, frac = t[:-1].partition(".")
        return f"{base}.{frac.ljust(6, '0')}"

    return key(a) > key(b)


def _normalise(namespaces: Iterable[Sequence[str]]) -> tuple[Namespace, ...]:
    out = []
    for ns in namespaces:
        if isinstance(ns, str):
            raise ArgumentTypeError(f"a store namespace is a tuple of strings, not {ns!r}")
        t = tuple(ns)
        if not t or not all(isinstance(p, str) and p for p in t):
            raise ConfigurationError(f"invalid store namespace {ns!r}: non-empty strings required")
        out.append(t)
    return tuple(dict.fromkeys(out))


def residue_mode(value: Any) -> ResidueScan:
    """Validate a ``residue_scan=`` value (True, False or "vacuum")."""
    if value is True or value is False or value == "vacuum":
        return value  # type: ignore[no-any-return]
    raise ConfigurationError(f'residue_scan must be True, False or "vacuum", not {value!r}')


def _log_residue(residue: list[dict[str, Any]]) -> None:
    for r in residue:
        if r["status"] in ("partial", "failed"):
            log.warning("residue %s: %s %s", r["action"], r["status"], r["detail"])


def _api_results(
    namespaces: set[str], found: int, listed: int, stored: int | None
) -> list[tuple[str, int, str]]:
    """The public-API checks as ``(name, items_found, detail)``."""
    checks = [
        ("api_get_tuple_none", found,
         f"get_tuple checked for {len(namespaces | {''})} checkpoint namespace(s)"),
        ("api_list_empty", listed, "list() over all namespaces returned nothing"),
    ]  # fmt: skip
    if stored is not None:
        checks.append(
            ("api_store_search_empty", stored,
             f"store.search paginated with limit={PAGE_SIZE} under every namespace")
        )  # fmt: skip
    return checks


ApiCounts = tuple[int, int, int | None]
"""``(get_tuple hits, list items, store items)`` read back after an erasure."""


class Attesting:
    """The attesting savers' shared state, argument checks and operation flows."""

    signer: Signer
    store: BaseStore | None
    archive: Path | ReceiptLog | None
    namespaces_for: NamespacesFor | None
    clock: Callable[[], datetime] | None
    residue_scan: ResidueScan
    refuse_erased_reads: bool
    _journal: ModuleType
    _store_rows: bool | None

    # -- hooks a backend's saver provides -------------------------------------------------

    def _db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(handle, *args)`` on the database handle under the saver's lock."""
        raise NotImplementedError

    def _new_backend(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan
    ) -> ErasureBackend:
        """The engine backend for ``request`` on ``handle``."""
        raise NotImplementedError

    def _api_counts(self, request: ErasureRequest, namespaces: set[str]) -> ApiCounts:
        """Read the scope back through the public API (``API_CHECK`` is set): every
        namespace's ``get_tuple``, ``list`` and the store's paginated ``search``."""
        saver: Any = self  # a LangGraph saver: get_tuple and list come from its class
        found = listed = 0
        for tid in request.all_threads:
            for ns in namespaces | {""}:
                if saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ns}}):
                    found += 1
            listed += sum(1 for _ in saver.list({"configurable": {"thread_id": tid}}))
        stored = None
        if request.store_namespaces:
            assert self.store is not None
            stored = count_items(self.store, request.store_namespaces)
        return found, listed, stored

    def _prepare(self) -> None:
        """Before an erasure: set up (the library's tables) and find where the store is."""
        raise NotImplementedError

    def _ensure_journal(self) -> None:
        """The library's tables exist (installing them if needed)."""
        raise NotImplementedError

    def _resolve_store_rows(self) -> None:
        """Whether the store's tables live in the saver's database (no writes)."""
        raise NotImplementedError

    def _preview(self, handle: Any, request: ErasureRequest) -> ThreadDigest:
        """The read-only measurement of ``request`` (``digest_thread``)."""
        raise NotImplementedError

    def _retryable(self, exc: ErasureIncompleteError) -> bool:
        """Whether a rolled-back erasure failed on a transient conflict (retry it)."""
        return False

    # -- arguments -----------------------------------------------------------------------

    def _init_attesting(
        self,
        signer: Signer,
        store: BaseStore | None,
        archive: str | Path | ReceiptLog | None,
        namespaces_for: NamespacesFor | None,
        clock: Callable[[], datetime] | None,
        residue_scan: ResidueScan = False,
        refuse_erased_reads: bool = False,
        tombstone_policy: str = "new_conversations",
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
        self.signer = signer
        self.store = store
        self.archive = (
            archive if archive is None or isinstance(archive, ReceiptLog) else Path(archive)
        )
        if isinstance(self.archive, Path) and self.archive.exists() and not self.archive.is_dir():
            raise ConfigurationError(f"archive {str(archive)!r} exists and is not a directory")
        self.namespaces_for = namespaces_for
        self.clock = clock
        self.residue_scan = residue_mode(residue_scan)
        self.refuse_erased_reads = bool(refuse_erased_reads)
        self.tombstone_policy = tombstone_policy
        self._store_rows = None  # whether the store's tables live in the saver's database
        self._commitment_keys: dict[str, CommitmentKey] = {}
        """Commitment keys by key id (privacy-mode erasures' and recovery's), in memory
        only: recovery opens a sealed journal entry with its key."""
        self._serial = next(_SERIAL)

    @property
    def last_receipt(self) -> Receipt | None:
        """The receipt of the last erasure made *in this thread or asyncio task*.

        Per context, so concurrent erasures (threads, tasks) never see each other's.
        """
        return (_LAST_RECEIPT.get() or {}).get(self._serial)

    def _set_last(self, receipt: Receipt) -> None:
        _LAST_RECEIPT.set({**(_LAST_RECEIPT.get() or {}), self._serial: receipt})

    def _request(
        self,
        thread_id: Any,
        store_namespaces: Iterable[Sequence[str]] | None,
        tombstone: bool,
        allow_empty: bool = False,
        *,
        request: Any = None,
        authorization: Any = None,
    ) -> ErasureRequest:
        """The request of a thread-scoped operation. Its store scope, one rule for every
        entry point: ``store_namespaces`` if given (``[]``: no store), else (None) the
        saver's ``namespaces_for(thread_id)`` - erased only with rows of the thread."""
        if isinstance(thread_id, int) and not isinstance(thread_id, bool):
            thread_id = str(thread_id)
        if not isinstance(thread_id, str) or not thread_id:
            raise ConfigurationError(f"thread_id must be a non-empty string, not {thread_id!r}")
        mapped = store_namespaces is None
        if store_namespaces is None:
            store_namespaces = self._default_namespaces(thread_id)
        namespaces = _normalise(store_namespaces)
        if namespaces and self.store is None:
            raise ConfigurationError("store_namespaces were given but the saver has no store=")
        er = ErasureRequest(thread_id, namespaces, bool(tombstone), bool(allow_empty),
                            mapped_store=mapped and bool(namespaces))  # fmt: skip
        return self._with_context(er, request, authorization)

    def _with_context(self, er: ErasureRequest, request: Any, authorization: Any) -> ErasureRequest:
        """``er`` with the request context and authorization (RECEIPT_SPEC.md 9.6) as
        the receipt's ``request``/``authorization`` members. Call it once ``er`` has its
        final kind and scope: the authorization is checked here, with the saver's clock,
        before anything is deleted (``AuthorizationError``), and again against
        ``issued_at`` inside the transaction (engine)."""
        from .request import Authorization, RequestContext, erasure_scope

        if request is None and authorization is None:
            return er
        if not isinstance(request, RequestContext):
            raise ConfigurationError(
                "request= must be an erasure_receipts.RequestContext (an authorization= "
                f"names a request id, so it needs one), not {type(request).__name__}"
            )
        now = format_time(self._now())
        if request.received_at is not None and _after(request.received_at, now):
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

    def _scan(self, residue_scan: ResidueScan | None) -> ResidueScan:
        return self.residue_scan if residue_scan is None else residue_mode(residue_scan)

    def _preflight(self) -> None:
        check_archive(self.archive)

    def _default_namespaces(self, thread_id: str) -> Iterable[Sequence[str]]:
        return self.namespaces_for(str(thread_id)) if self.namespaces_for else ()

    def _now(self) -> datetime:
        now = self.clock() if self.clock is not None else datetime.now(UTC)
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    # -- phase one, in the database -------------------------------------------------------

    def _phase_one(
        self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan
    ) -> tuple[RowsOutcome, set[str]]:
        """The engine's phase one, retried (bounded) on transient conflicts."""
        clock = {"clock": self.clock} if self.clock is not None else {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            backend = self._new_backend(handle, request, residue_scan)
            try:
                outcome = erase_rows(backend, request, generator_version=__version__, **clock)
            except ErasureIncompleteError as exc:
                swept = any(p.irreversible_deleted for p in backend.parts())
                if not self._retryable(exc) or swept:
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
            log.info(
                "erased %s: %d rows, receipt %s",
                request.label,
                sum(t.rows for t in outcome.pre_tables.values()),
                outcome.receipt_id,
            )
            _log_residue(outcome.residue)
            return outcome, set(getattr(backend, "checkpoint_namespaces", ()))
        raise AssertionError("unreachable")  # pragma: no cover

    def _resume(self, handle: Any, receipt_id: str, issued_at: str, entry: str) -> RowsOutcome:
        request = request_from_journal(entry, receipt_id, self._commitment_keys)
        backend = self._new_backend(handle, request, self.residue_scan)
        outcome = resume_rows(backend, request, receipt_id, issued_at, entry)
        _log_residue(outcome.residue)
        return outcome

    def _measure(self, handle: Any, request: ErasureRequest) -> ThreadDigest:
        backend = self._new_backend(handle, request, False)
        digest, tables = measure_rows(backend)
        own = {p.table for p in backend.parts() if p.group == "checkpoints"}
        if request.mapped_store and not any(tables[t].rows for t in own if t in tables):
            # As the erasure: namespaces_for's namespaces only with rows of the thread.
            return self._measure(handle, replace(request, store_namespaces=(), mapped_store=False))
        return ThreadDigest(digest, tables)

    # -- phase two ------------------------------------------------------------------------

    def _api_checks(
        self, request: ErasureRequest, namespaces: set[str]
    ) -> list[tuple[str, int, str]]:
        token = API_CHECK.set(True)
        try:
            found, listed, stored = self._api_counts(request, namespaces)
        finally:
            API_CHECK.reset(token)
        return _api_results(namespaces, found, listed, stored)

    def _statement_of(self, outcome: RowsOutcome, api: list[tuple[str, int, str]]) -> str:
        statement = final_statement(outcome, api, generator_version=__version__)
        return json.dumps(statement, sort_keys=True, ensure_ascii=False)

    def _sign(self, statement_json: str) -> Receipt:
        """Sign a journaled statement and archive the receipt (deterministic bytes)."""
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
        self._set_last(receipt)
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
            self._db(self._journal.mark_issued, receipt.receipt_id, receipt.to_json())
        except Exception as exc:
            log.warning(
                "receipt %s issued but not marked in the journal: %s", receipt.receipt_id, exc
            )

    # -- the flows --------------------------------------------------------------------------

    def _erase_flow(self, request: ErasureRequest, residue_scan: ResidueScan) -> Receipt:
        with lease.owner_scope(self._release_lease) as leases:
            return self._erase_leased(request, residue_scan, leases)

    def _erase_leased(
        self, request: ErasureRequest, residue_scan: ResidueScan, leases: list[tuple[str, Any]]
    ) -> Receipt:
        outcome, namespaces = self._db(lease.bind(leases, self._phase_one), request, residue_scan)
        try:
            api = self._api_checks(request, namespaces)
            statement = self._statement_of(outcome, api)
            statement = self._db(self._journal.record_statement, outcome.receipt_id, statement)
        except Exception as exc:
            raise self._after_commit_failed(exc) from exc
        receipt = self._sign(statement)
        self._mark_issued(receipt)
        return receipt

    # -- leases on open journal entries (lease.py) -------------------------------------

    def _take_lease(self, receipt_id: str) -> Any:
        """Lease an open entry for recovery: None if its erasure (or another recovery)
        still holds it, in this process or another."""
        if not lease.claim(receipt_id):
            return None
        try:
            token = self._db(self._journal.take_lease, receipt_id)
        except BaseException:
            lease.drop(receipt_id)
            raise
        if token is None:
            lease.drop(receipt_id)
        return token

    def _release_lease(self, receipt_id: str, token: Any) -> None:
        try:
            self._db(self._journal.release_lease, receipt_id, token)
        except Exception as exc:  # it ends with the connection or process anyway
            log.warning("lease on journal entry %s not released: %s", receipt_id, exc)
        finally:
            lease.drop(receipt_id)

    def _recover_flow(
        self, min_age_seconds: float, key: CommitmentKey | None = None
    ) -> list[Receipt]:
        if key is not None:  # opens the privacy-mode entries sealed with it
            self._commitment_keys[key.key_id] = key
        cutoff = self._now() - timedelta(seconds=min_age_seconds)
        pending, unparsable = [], {}
        # Every open entry is read and checked here, not filtered in SQL: an entry whose
        # time or text cannot be read is named, never silently passed over.
        for row in self._db(self._journal.pending_journal):
            issued, why = _parse_pending(*row)
            if why is not None:
                unparsable[_display_id(row[0])] = why
            elif issued is not None and issued < cutoff:
                pending.append(row)
        if pending:
            self._preflight()
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
        if not self._db(self._journal.still_pending, receipt_id):
            return None
        if statement is None:
            request = request_from_journal(entry, receipt_id, self._commitment_keys)
            if request.store_namespaces and self.store is None:
                raise ErasureIncompleteError(
                    "this journal entry covers store namespaces; recover with the "
                    "same store= as the erasure"
                )
            outcome = self._db(self._resume, receipt_id, issued_at, entry)
            statement = self._statement_of(outcome, self._api_checks(request, set()))
            statement = self._db(self._journal.record_statement, receipt_id, statement)
        self._redact_entry(receipt_id, entry)
        receipt = self._sign(statement)
        self._mark_issued(receipt)
        return receipt

    def _redact_entry(self, receipt_id: str, entry: str) -> None:
        """Privacy mode: once the statement is journaled, the entry's raw ids go."""
        redacted = redact_entry(entry)
        if redacted is None or not hasattr(self._journal, "redact_journal"):
            return
        committed, text = redacted
        try:
            self._db(self._journal.redact_journal, receipt_id, committed, lambda _: text)
        except Exception as exc:
            log.warning("journal entry %s keeps raw ids: %s", receipt_id, exc)

    def _pending_flow(self) -> list[PendingErasure]:
        now = self._now()
        out = []
        for row in self._db(self._journal.pending_journal):
            t, _ = _parse_pending(*row)
            age = math.inf if t is None else (now - t).total_seconds()
            out.append(PendingErasure(_display_id(row[0]), _display_id(row[1]), age))
        return out

    def _journal_receipts_flow(self, thread_id: str | None) -> list[Receipt]:
        out = []
        for blob in self._db(self._journal.journal_receipts, thread_id):
            try:  # one damaged row must not hide the other receipts
                out.append(Receipt.from_json(blob))
            except (Error, ValueError) as exc:
                log.warning("a receipt kept in the journal is unparsable: %s", exc)
        return out

    def _export_flow(
        self, request: ErasureRequest, select: Callable[[str, tuple[Any, ...]], bool] | None
    ) -> list[LeafRecord]:
        from .engine import export_leaves as collect

        def run(handle: Any) -> tuple[list[bytes], list[tuple[int, bytes]]]:
            scoped = request
            if request.mapped_store:  # as the erasure: with rows of the thread only
                alone = replace(request, store_namespaces=(), mapped_store=False)
                if not self._measure(handle, alone).leaves:
                    scoped = alone
            return collect(self._new_backend(handle, scoped, False), head_filter(select))

        hashes, chosen = self._db(run)
        return leaf_records(request.thread_id, hashes, chosen)


def delete_quietly(erase: Callable[[], object], what: str) -> None:
    """LangGraph's ``delete_thread`` contract: deleting nothing is a no-op, not an error."""
    try:
        erase()
    except NothingToEraseError as exc:
        log.info("%s: %s", what, exc.message)


class AsyncFlows(Attesting):
    """Runs the synchronous flows on a worker thread for an async saver.

    The saver provides ``_adb`` (run ``fn(handle, *args)`` on its database, under its
    asyncio lock) and ``_aapi_counts``; the flow calls them from the worker thread,
    each on the event loop, which stays free meanwhile.
    """

    _loop: asyncio.AbstractEventLoop | None = None

    async def _adb(self, fn: Callable[..., T], *args: Any) -> T:
        raise NotImplementedError

    async def _aapi_counts(self, request: ErasureRequest, namespaces: set[str]) -> ApiCounts:
        """Async :meth:`Attesting._api_counts` (``aget_tuple``, ``alist``, ``asearch``)."""
        saver: Any = self
        found = listed = 0
        for tid in request.all_threads:
            for ns in namespaces | {""}:
                if await saver.aget_tuple(
                    {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}
                ):
                    found += 1
            async for _ in saver.alist({"configurable": {"thread_id": tid}}):
                listed += 1
        stored = None
        if request.store_namespaces:
            assert self.store is not None
            stored = await acount_items(self.store, request.store_namespaces)
        return found, listed, stored

    async def _aprepare(self) -> None:
        raise NotImplementedError

    async def _aensure_journal(self) -> None:
        raise NotImplementedError

    async def _resolve_store_rows_async(self) -> None:
        raise NotImplementedError

    def _on_loop(self, coro: Awaitable[T]) -> T:
        assert self._loop is not None, "async flows run through _flow()"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return self._on_loop(self._adb(fn, *args))

    def _api_counts(self, request: ErasureRequest, namespaces: set[str]) -> ApiCounts:
        async def counts() -> ApiCounts:
            API_CHECK.set(True)  # this task's own context
            return await self._aapi_counts(request, namespaces)

        return self._on_loop(counts())

    async def _flow(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a synchronous flow on a worker thread of this event loop."""
        self._loop = asyncio.get_running_loop()
        return await asyncio.to_thread(fn, *args)
