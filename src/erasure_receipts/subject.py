"""Erasure per person: one receipt for a data subject, finding every copy, and receipts
that are not personal data themselves (RECEIPT_SPEC.md 9.3-9.5).

Written once, like every other operation: :class:`SubjectFlows` holds the synchronous
flows over the :class:`~erasure_receipts.attesting.Attesting` hooks (``_db``,
``_new_backend``, ``_journal``), and two small mixins add the public methods to the
savers - :class:`SubjectMethods` (``erase_subject``, ``digest_subject``, ``locate``,
``purge_journal``) and :class:`AsyncSubjectMethods` (the ``a``-prefixed ones, which run
the same flows with ``AsyncFlows._flow``).

How a subject's threads are found, and why the set holds at commit:

* the explicit ``threads=`` plus, with ``metadata_key=``, every thread with a checkpoint
  whose metadata has ``metadata_key == subject_id`` (LangGraph copies ``configurable``
  keys such as ``user_id`` into checkpoint metadata; ``copy_thread`` forks keep it);
* the search runs once before the erasure (to build the scope) and again *inside* the
  erasure transaction, under its write lock: SQLite's ``BEGIN IMMEDIATE`` (no other
  writer at all), PostgreSQL's ``LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE`` on the
  checkpoint tables (every writer waits for the commit; readers do not). If the second
  search finds a thread the first did not (created meanwhile), the transaction is rolled
  back - nothing deleted - and the erasure restarts with it (bounded);
* so a thread of the subject that committed before the erasure took its lock is erased
  and listed; a write to one of the erased threads after it is refused by the thread's
  tombstone; a thread *created* after the commit under a new id is new data, not
  covered (stop the subject's sessions first).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph.store.base import BaseStore

from .attesting import AsyncFlows, Attesting, ResidueScan, ThreadDigest
from .backends.store import PAGE_SIZE
from .digest import EMPTY_ROOT, units_root
from .engine import (
    ErasureRequest,
    GuardedBackend,
    NeedlesFoundError,
    TableCount,
    format_time,
    iter_pages,
    measure_parts,
    named_needle_forms,
    needle_forms,
    redact_entry,
)
from .engine.needles import _redact_locations
from .errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasureIncompleteError,
    Error,
    NothingToEraseError,
)
from .privacy import PREFIX, CommitmentKey
from .receipt import MAX_THREAD_ID, Receipt
from .request import Authorization, RequestContext, erasure_scope

__all__ = [
    "MAX_THREADS",
    "AsyncSubjectMethods",
    "Location",
    "SubjectDigest",
    "SubjectFlows",
    "SubjectMethods",
    "named_forms",
]

log = logging.getLogger("erasure_receipts")

MAX_THREADS = 1000
"""Threads in one subject receipt (RECEIPT_SPEC.md 9.1); more must be split."""
MAX_RESCANS = 5
"""Erasure attempts when threads of the subject keep appearing while it starts."""

Privacy = CommitmentKey | None


@dataclass(frozen=True)
class Location:
    """One stored place that holds a needle (``locate``, ``NeedlesFoundError``).

    ``table`` and ``column`` name the raw storage; the checkpoint fields, ``channel``
    (writes, blobs) or ``prefix``/``key`` (store) say which row; ``extra`` holds the
    rest of the primary key (``task_id``, ``idx``, ``version``). ``needle`` is the index
    of the searched value and ``form`` how it was stored (``engine.NEEDLE_FORMS``);
    ``via`` is ``sql`` (raw rows) or ``store_api`` (a store outside the database,
    searched through ``BaseStore``). The value itself is never kept.
    """

    table: str
    column: str
    needle: int
    form: str
    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    channel: str | None = None
    prefix: str | None = None
    key: str | None = None
    extra: tuple[tuple[str, str | None], ...] = ()
    via: str = "sql"

    _NAMED = ("thread_id", "checkpoint_ns", "checkpoint_id", "channel", "prefix", "key")

    @classmethod
    def from_found(cls, found: dict[str, Any]) -> Location:
        """From a backend's ``find_needles``/``locate`` dictionary."""
        named = {k: _text(found[k]) for k in cls._NAMED if k in found}
        rest = ("table", "column", "needle", "form", "via", *cls._NAMED)
        extra = tuple(sorted((k, _text(v)) for k, v in found.items() if k not in rest))
        return cls(
            table=str(found["table"]), column=str(found["column"]), needle=int(found["needle"]),
            form=str(found.get("form", "raw")), extra=extra, via=str(found.get("via", "sql")),
            **named,
        )  # fmt: skip

    def sort_key(self) -> tuple[Any, ...]:
        """Needle, table, then the row's key: the order ``locate`` reports in."""
        row = (self.thread_id, self.checkpoint_ns, self.checkpoint_id, self.channel,
               self.prefix, self.key, self.extra)  # fmt: skip
        return (self.needle, self.table, repr(row), self.column, self.form)

    def to_json(self) -> dict[str, Any]:
        """The location as one JSON object (absent fields left out)."""
        out: dict[str, Any] = {"needle": self.needle, "form": self.form, "table": self.table}
        for k in self._NAMED:
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out.update(dict(self.extra))
        out.update(column=self.column, via=self.via)
        return out


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


@dataclass(frozen=True)
class SubjectDigest:
    """What ``erase_subject`` would measure now (``digest_subject``): its threads, each
    unit's digest and counts (``thread:<id>``, ``store``), and the pre-state root over
    them - the receipt's ``pre_state.digest`` if nothing changes meanwhile."""

    subject: str
    threads: tuple[str, ...]
    digest: str
    units: dict[str, ThreadDigest]
    tables: dict[str, TableCount] = field(default_factory=dict)

    @property
    def leaves(self) -> int:
        """Rows measured over all units."""
        return sum(t.rows for t in self.tables.values())


@dataclass(frozen=True)
class _Spec:
    """A validated ``erase_subject`` call, before its threads are found."""

    subject: str
    threads: tuple[str, ...]
    metadata_key: str | None
    store_namespaces: tuple[tuple[str, ...], ...]
    needles: tuple[str, ...]
    privacy: Privacy
    tombstone: bool
    allow_empty: bool
    context: RequestContext | None = None
    """RECEIPT_SPEC.md 9.6: ``request=`` and ``authorization=``, applied (and the
    authorization checked) once the threads are found, before anything is deleted."""
    authorization: Authorization | None = None


class _ScopeChanged(Exception):
    """Inside the erasure transaction, the subject has threads its scope lacks."""

    def __init__(self, threads: list[str]) -> None:
        super().__init__(f"{len(threads)} thread(s) of the subject appeared meanwhile")
        self.threads = threads


def named_forms(needle: str) -> list[tuple[str, bytes]]:
    """``(form name, bytes)`` searched for one needle (``engine.NEEDLE_FORMS``)."""
    return named_needle_forms(needle)


# -- the store outside the database: through the BaseStore API -------------------------


def _all_namespaces(store: BaseStore) -> Iterator[tuple[str, ...]]:
    def fetch(offset: int) -> list[Any]:
        return list(store.list_namespaces(limit=PAGE_SIZE, offset=offset))

    return iter_pages(fetch, PAGE_SIZE)


def _store_locations(store: BaseStore, forms: Sequence[bytes]) -> list[dict[str, Any]]:
    """Store items holding any of ``forms`` in their namespace, key or value (as JSON
    text), searched page by page through the API (items a store hides, such as expired
    ones, are not seen)."""
    out: list[dict[str, Any]] = []
    for first in sorted({ns[0] for ns in _all_namespaces(store) if ns}):

        def fetch(offset: int, first: str = first) -> list[Any]:
            return list(store.search((first,), limit=PAGE_SIZE, offset=offset, refresh_ttl=False))

        for item in iter_pages(fetch, PAGE_SIZE):
            prefix = ".".join(item.namespace)
            value = json.dumps(item.value, ensure_ascii=False, default=str, sort_keys=True)
            columns = (("prefix", prefix), ("key", item.key), ("value", value))
            for column, text in columns:
                data = text.encode("utf-8", "surrogatepass")
                if any(f in data for f in forms):
                    out.append({"table": "store", "prefix": prefix, "key": item.key,
                                "column": column, "via": "store_api"})  # fmt: skip
    return out


# -- privacy: what the receipt must not spell out ---------------------------------------


def _conceal(residue: list[dict[str, Any]], key: CommitmentKey, paths: Iterable[str]) -> Any:
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


def _shown(spec: _Spec) -> str:
    """How messages name the subject: by its commitment in privacy mode."""
    return spec.subject if spec.privacy is None else spec.privacy.commit("subject", spec.subject)


def _concealed(exc: Error, spec: _Spec, threads: Iterable[str]) -> Error:
    """Privacy mode: ``exc`` with every raw id of the erasure (subject, thread ids, store
    namespaces) in its message, locations and counts replaced by its commitment, and
    no chained cause (a database error's text could name them too: the message keeps
    it, concealed)."""
    key = spec.privacy
    assert key is not None
    known = {spec.subject: key.commit("subject", spec.subject)}
    known.update({t: key.commit("thread", t) for t in threads})
    for ns in spec.store_namespaces:
        c = key.commit("store_namespace", ".".join(ns))
        known.update({".".join(ns): c, "/".join(ns): c, repr(ns): c, repr(list(ns)): c})
    pattern = re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(v) for v in sorted(known, key=len, reverse=True))
        + r")(?!\w)"
    )  # fmt: skip

    def hide(v: Any) -> Any:
        if isinstance(v, str):
            return pattern.sub(lambda m: known[m.group(0)], v)
        if isinstance(v, dict):
            return {hide(k): hide(x) for k, x in v.items()}
        if isinstance(v, list):
            return [hide(x) for x in v]
        return v

    exc.args = tuple(hide(a) for a in exc.args)
    for name in ("thread_id", "locations", "remaining"):
        if hasattr(exc, name):
            setattr(exc, name, hide(getattr(exc, name)))
    exc.__cause__ = exc.__context__ = None
    exc.__suppress_context__ = True
    return exc


def _commitment_key(privacy: Any, commitment_key: Any) -> Privacy:
    if privacy not in (None, "commitments"):
        raise ConfigurationError(f'privacy= must be None or "commitments", not {privacy!r}')
    if privacy is None:
        if commitment_key is not None:
            raise ConfigurationError('commitment_key= is only used with privacy="commitments"')
        return None
    if commitment_key is None:
        raise ConfigurationError('privacy="commitments" needs commitment_key= (a key or its file)')
    if isinstance(commitment_key, CommitmentKey):
        return commitment_key
    if isinstance(commitment_key, str | os.PathLike):
        return CommitmentKey.from_file(commitment_key)
    raise ArgumentTypeError("commitment_key= must be a CommitmentKey or the path of its key file")


def _strings(values: Any, what: str) -> tuple[str, ...]:
    if isinstance(values, str | bytes):
        raise ArgumentTypeError(f"{what}= takes a list of strings, not one string")
    out = []
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str) or not v:
            raise ConfigurationError(f"{what}: every value must be a non-empty string, not {v!r}")
        out.append(v)
    return tuple(dict.fromkeys(out))


def _nothing(subject: str, why: str) -> NothingToEraseError:
    exc = NothingToEraseError(subject)
    exc.args = (f"subject {subject!r}: {why}; nothing was erased",)
    return exc


def _grown(exc: BaseException) -> list[str] | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _ScopeChanged):
            return seen.threads
        seen = seen.__cause__ or seen.__context__
    return None


class _SubjectBackend(GuardedBackend):
    """The engine backend of one subject erasure: the saver's own backend, plus what
    only a subject erasure adds - the scope re-checked under the write lock, the store
    outside the database in a database-wide needle search, and (privacy mode) residue
    details without database paths. Everything else is the saver's backend's."""

    def __init__(
        self,
        inner: Any,
        *,
        recheck: Callable[[], None] | None,
        store_search: Callable[[Sequence[bytes]], list[dict[str, Any]]] | None,
        conceal: CommitmentKey | None,
    ) -> None:
        super().__init__(inner, recheck)
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
        out: list[dict[str, Any]] = self.inner.reduce_residue()
        if self._conceal is None:
            return out
        return _conceal(out, self._conceal, [self.inner.database])  # type: ignore[no-any-return]


class SubjectFlows(Attesting):
    """The subject operations, written once over the ``Attesting`` hooks."""

    # -- arguments -------------------------------------------------------------------------

    def _subject_spec(
        self,
        subject_id: Any,
        threads: Iterable[str],
        metadata_key: str | None,
        store_namespaces: Iterable[Sequence[str]],
        needles: Iterable[str],
        privacy: Any,
        commitment_key: Any,
        tombstone: bool,
        allow_empty: bool,
    ) -> _Spec:
        if isinstance(subject_id, int) and not isinstance(subject_id, bool):
            subject_id = str(subject_id)
        if not isinstance(subject_id, str) or not subject_id:
            raise ConfigurationError(f"subject_id must be a non-empty string, not {subject_id!r}")
        if len(subject_id) > MAX_THREAD_ID:
            raise ConfigurationError(f"subject_id is over {MAX_THREAD_ID} characters")
        if metadata_key is not None and (
            not isinstance(metadata_key, str) or not metadata_key or len(metadata_key) > 256
        ):
            raise ConfigurationError("metadata_key= must be a string of 1-256 characters")
        explicit = _strings(threads, "threads")
        if not explicit and metadata_key is None:
            raise ConfigurationError(
                "name the subject's threads: threads=[...] and/or metadata_key= (e.g. "
                '"user_id") to find every thread whose checkpoint metadata names the subject'
            )
        # A subject is no thread: namespaces_for never applies, only what is given.
        given = () if store_namespaces is None else store_namespaces
        base = self._request(subject_id, given, tombstone, allow_empty)
        return _Spec(
            subject=subject_id, threads=explicit, metadata_key=metadata_key,
            store_namespaces=base.store_namespaces, needles=_strings(needles, "needles"),
            privacy=_commitment_key(privacy, commitment_key), tombstone=base.tombstone,
            allow_empty=base.allow_empty,
        )  # fmt: skip

    # -- scope --------------------------------------------------------------------------

    def _subject_request(self, handle: Any, spec: _Spec) -> ErasureRequest:
        """The request for the threads the subject has now (runs ``_db``-side)."""
        found: list[str] = []
        if spec.metadata_key is not None:
            found = self._journal.threads_by_metadata(handle, spec.metadata_key, spec.subject)
        threads = tuple(sorted(set(spec.threads) | set(found)))
        if not threads:
            raise _nothing(
                _shown(spec),
                f"no checkpoint has metadata {spec.metadata_key}={_shown(spec)!r} and no "
                "threads= were given (a subject receipt lists at least one thread)",
            )
        if len(threads) > MAX_THREADS:
            raise ConfigurationError(
                f"subject {_shown(spec)!r} has {len(threads)} threads; one receipt lists at "
                f"most {MAX_THREADS}: erase them in several calls with explicit threads="
            )
        return ErasureRequest(
            spec.subject, spec.store_namespaces, spec.tombstone, spec.allow_empty,
            kind="subject", threads=threads, subject=spec.subject,
            discovery=spec.metadata_key, needles=spec.needles, needle_scope="database",
            privacy=spec.privacy,
        )  # fmt: skip

    def _external_store(self) -> BaseStore | None:
        """The store, when its items are not rows of the saver's database."""
        return self.store if self.store is not None and not self._store_rows else None

    def _new_backend(self, handle: Any, request: ErasureRequest, residue_scan: ResidueScan) -> Any:
        backend: Any = super()._new_backend(handle, request, residue_scan)
        if request.kind != "subject":
            return backend
        database_needles = bool(request.needles) and request.needle_scope == "database"
        if hasattr(backend, "lock_tables") and (request.discovery or database_needles):
            # PostgreSQL: what a search found must still hold at commit.
            tables = [t for t in backend.tables if not t.startswith("store")]
            if database_needles and handle.query("SELECT to_regclass('store') IS NOT NULL")[0][0]:
                tables.append("store")
            backend.lock_tables = tuple(dict.fromkeys(tables))
        recheck = None
        if request.discovery is not None:

            def recheck() -> None:
                assert request.discovery is not None
                now = self._journal.threads_by_metadata(
                    handle, request.discovery, request.thread_id
                )
                new = sorted(set(now) - set(request.threads))
                if new:
                    raise _ScopeChanged(new)

        store = self._external_store()
        search = None
        if store is not None and database_needles:

            def search(forms: Sequence[bytes]) -> list[dict[str, Any]]:
                return _store_locations(store, forms)

        return _SubjectBackend(backend, recheck=recheck, store_search=search,
                               conceal=request.privacy)  # fmt: skip

    # -- flows --------------------------------------------------------------------------

    def _erase_subject_flow(self, spec: _Spec, residue_scan: ResidueScan) -> Receipt:
        if spec.privacy is None:
            return self._erase_subject_attempts(spec, residue_scan, set())
        # The saver holds the key from now on: recover_receipts() opens the sealed
        # journal entry of this erasure with it if the erasure is interrupted.
        self._commitment_keys[spec.privacy.key_id] = spec.privacy
        threads = set(spec.threads)
        try:
            return self._erase_subject_attempts(spec, residue_scan, threads)
        except Error as exc:
            concealed = _concealed(exc, spec, threads)
        raise concealed

    def _erase_subject_attempts(
        self, spec: _Spec, residue_scan: ResidueScan, threads: set[str]
    ) -> Receipt:
        """The erasure, restarted while threads of the subject appear; ``threads`` collects
        every thread id seen (privacy mode conceals them in errors)."""
        self._check_subject_authorization(spec)
        for _ in range(MAX_RESCANS):
            request = self._db(self._subject_request, spec)
            threads.update(request.threads)
            request = self._with_context(request, spec.context, spec.authorization)
            if request.needles and self._external_store() is not None:
                # Swept store items cannot be restored: refuse on a needle found outside
                # the scope before the sweep (the check in the transaction still rules).
                self._needles_outside(request)
            try:
                receipt = self._erase_flow(request, residue_scan)
            except NothingToEraseError:
                raise _nothing(
                    _shown(spec),
                    f"its {len(request.threads)} thread(s) and {len(spec.store_namespaces)} "
                    "store namespace(s) hold no rows (already erased?); allow_empty=True "
                    "attests an empty scope",
                ) from None
            except ErasureIncompleteError as exc:
                grown = _grown(exc)
                if grown is None:
                    raise
                log.info("subject erasure restarted: %d new thread(s) appeared", len(grown))
                continue
            if request.privacy is not None:
                self._redact_journal(receipt, request)
            return receipt
        raise ErasureIncompleteError(
            f"threads of subject {_shown(spec)!r} kept appearing while the erasure started "
            f"({MAX_RESCANS} attempts); nothing was deleted: stop the subject's sessions "
            "and retry"
        )

    def _check_subject_authorization(self, spec: _Spec) -> None:
        """The authorization binds the explicit threads and the discovery key too
        (RECEIPT_SPEC.md 9.6): refuse any other ones before looking for threads.
        (``_with_context`` checks the rest, and refuses arguments of the wrong type.)"""
        auth: Any = spec.authorization
        if isinstance(auth, dict):
            auth = Authorization.from_obj(auth)
        if not isinstance(auth, Authorization) or not isinstance(spec.context, RequestContext):
            return
        commit = spec.privacy.commit if spec.privacy is not None else None
        scope = erasure_scope(
            "subject", spec.subject, spec.store_namespaces, commit=commit,
            threads=spec.threads, discovery=spec.metadata_key,
        )  # fmt: skip
        auth.check("subject", scope, spec.context.id, format_time(self._now()), exact=True)

    def _needles_outside(self, request: ErasureRequest) -> None:
        threads = set(request.threads)
        prefixes = [".".join(ns) for ns in request.store_namespaces]

        def inside(loc: Location) -> bool:
            if loc.table == "store":
                p = loc.prefix or ""
                return any(p == x or p.startswith(x + ".") for x in prefixes)
            return loc.thread_id in threads

        outside = [loc for loc in self._locate_flow(request.needles) if not inside(loc)]
        if outside:
            forms = [(i, f) for i, n in enumerate(request.needles) for f in needle_forms(n)]
            raise NeedlesFoundError(
                _redact_locations([loc.to_json() for loc in outside], request, forms)
            )

    def _redact_journal(self, receipt: Receipt, request: ErasureRequest) -> None:
        """Best effort: once the statement is journaled (recovery then just signs it),
        the entry's sealed request is not needed any more; drop it."""

        def rewrite(entry: str) -> str:
            redacted = redact_entry(entry)
            return entry if redacted is None else redacted[1]

        try:
            self._db(self._journal.redact_journal, receipt.receipt_id, request.journal_id, rewrite)
        except Exception as exc:
            log.warning("journal entry %s keeps its sealed request: %s", receipt.receipt_id, exc)

    def _digest_subject_flow(self, spec: _Spec) -> SubjectDigest:
        def run(handle: Any) -> tuple[ErasureRequest, Any]:
            request = self._subject_request(handle, spec)
            backend = self._new_backend(handle, request, False)
            with backend.read_snapshot():
                return request, measure_parts(backend.parts(), erase=False)

        request, m = self._db(run)
        key = spec.privacy

        def name(unit: str) -> str:
            if key is None or not unit.startswith("thread:"):
                return unit
            return "thread:" + key.commit("thread", unit[len("thread:") :])

        units = {u: ThreadDigest(root.hex(), t) for u, root, t in m.units}
        ordered = sorted((name(u), sum(c.rows for c in t.values()), r) for u, r, t in m.units)
        rows = any(c.rows for c in m.tables.values())
        root = units_root(ordered) if rows else EMPTY_ROOT
        return SubjectDigest(spec.subject, request.threads, root.hex(), units, m.tables)

    def _locate_flow(self, needles: Sequence[str]) -> list[Location]:
        forms = [(i, name, data) for i, n in enumerate(needles) for name, data in named_forms(n)]
        found: list[dict[str, Any]] = self._db(self._journal.locate, forms)
        store = self._external_store()
        if store is not None:
            for i, name, data in forms:
                found += [{**d, "needle": i, "form": name} for d in _store_locations(store, [data])]
        return sorted((Location.from_found(d) for d in found), key=Location.sort_key)

    def _purge_flow(self, older_than: timedelta | datetime) -> int:
        if isinstance(older_than, timedelta):
            if older_than < timedelta(0):
                raise ConfigurationError("older_than= must not be negative")
            cutoff = self._now() - older_than
        elif isinstance(older_than, datetime):
            cutoff = older_than
        else:
            raise ArgumentTypeError("older_than= is a timedelta (age) or a datetime (cutoff)")
        return int(self._db(self._journal.purge_journal, format_time(cutoff)))


def _needles(needles: Any) -> tuple[str, ...]:
    out = _strings(needles, "needles")
    if not out:
        raise ConfigurationError("locate needs at least one value to search for")
    return out


class SubjectMethods(SubjectFlows):
    """The public subject methods of the synchronous savers."""

    if TYPE_CHECKING:

        def _prepare(self) -> None: ...
        def _resolve_store_rows(self) -> None: ...

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
        """
        spec = self._subject_spec(
            subject_id, threads, metadata_key, store_namespaces, needles, privacy,
            commitment_key, tombstone, allow_empty,
        )  # fmt: skip
        spec = replace(spec, context=request, authorization=authorization)
        self._preflight()
        self._prepare()
        return self._erase_subject_flow(spec, self._scan(residue_scan))

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
        spec = self._subject_spec(
            subject_id, threads, metadata_key, store_namespaces, (),
            None if commitment_key is None else "commitments", commitment_key, False, True,
        )  # fmt: skip
        self._resolve_store_rows()
        return self._digest_subject_flow(spec)

    def locate(self, needles: Iterable[str]) -> list[Location]:
        """Every stored location of each value: all checkpoint tables and the store
        (rows of this database by raw byte search, a store elsewhere through its API),
        in its raw UTF-8 form and its JSON ``\\uXXXX``-escaped forms. Read-only."""
        values = _needles(needles)
        self._resolve_store_rows()
        return self._locate_flow(values)

    def purge_journal(self, older_than: timedelta | datetime) -> int:
        """Delete closed erasure-journal entries (receipt issued) of erasures older than
        ``older_than`` (an age, or a cutoff time); returns how many. Open entries and
        tombstones are kept; purged receipts are no longer in ``journal_receipts()``."""
        self._prepare()
        return self._purge_flow(older_than)


class AsyncSubjectMethods(SubjectFlows, AsyncFlows):
    """The public subject methods of the async savers (the same flows, on a worker
    thread)."""

    if TYPE_CHECKING:

        async def _aprepare(self) -> None: ...
        async def _resolve_store_rows_async(self) -> None: ...

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
    ) -> Receipt:
        """Async :meth:`SubjectMethods.erase_subject`."""
        spec = self._subject_spec(
            subject_id, threads, metadata_key, store_namespaces, needles, privacy,
            commitment_key, tombstone, allow_empty,
        )  # fmt: skip
        spec = replace(spec, context=request, authorization=authorization)
        self._preflight()
        await self._aprepare()
        receipt = await self._flow(self._erase_subject_flow, spec, self._scan(residue_scan))
        self._set_last(receipt)  # in this task's context (the flow ran in a copy)
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
        """Async :meth:`SubjectMethods.digest_subject`."""
        spec = self._subject_spec(
            subject_id, threads, metadata_key, store_namespaces, (),
            None if commitment_key is None else "commitments", commitment_key, False, True,
        )  # fmt: skip
        await self._resolve_store_rows_async()
        return await self._flow(self._digest_subject_flow, spec)

    async def alocate(self, needles: Iterable[str]) -> list[Location]:
        """Async :meth:`SubjectMethods.locate`."""
        values = _needles(needles)
        await self._resolve_store_rows_async()
        return await self._flow(self._locate_flow, values)

    async def apurge_journal(self, older_than: timedelta | datetime) -> int:
        """Async :meth:`SubjectMethods.purge_journal`."""
        await self._aprepare()
        return await self._flow(self._purge_flow, older_than)
