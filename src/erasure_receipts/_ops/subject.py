"""Erasure per person: one receipt for a data subject, finding every copy, and receipts
that are not personal data themselves (RECEIPT_SPEC.md 9.3-9.5): requests and scope.

How a subject's threads are found, and why the set holds at commit:

* the explicit ``threads=`` plus, with ``metadata_key=``, every thread with a checkpoint
  whose metadata has ``metadata_key == subject_id`` (LangGraph copies ``configurable``
  keys such as ``user_id`` into checkpoint metadata; ``copy_thread`` forks keep it);
* the search runs once before the erasure (to build the scope) and again *inside* the
  erasure transaction, under its write lock (the eraser's subject backend): SQLite's
  ``BEGIN IMMEDIATE`` (no other writer at all), PostgreSQL's ``LOCK TABLE ... IN SHARE
  ROW EXCLUSIVE MODE`` on the checkpoint tables (every writer waits for the commit;
  readers do not). If the second search finds a thread the first did not (created
  meanwhile), the transaction is rolled back - nothing deleted - and the erasure
  restarts with it (bounded);
* so a thread of the subject that committed before the erasure took its lock is erased
  and listed; a write to one of the erased threads after it is refused by the thread's
  tombstone; a thread *created* after the commit under a new id is new data, not
  covered (stop the subject's sessions first).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from .._clock import format_time
from .._engine.codec import redact_entry
from .._engine.eraser import Eraser, ThreadDigest
from .._engine.measure import measure_parts
from .._engine.needles import _redact_locations, named_needle_forms, needle_forms, store_locations
from .._engine.protocol import _ScopeChanged
from .._engine.seams import ResidueScan
from .._engine.types import ErasureRequest
from .._parts import TableCount
from ..digest import EMPTY_ROOT, units_root
from ..errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasureIncompleteError,
    Error,
    NeedlesFoundError,
    NothingToEraseError,
)
from ..privacy import CommitmentKey
from ..receipt import MAX_THREAD_ID, Receipt
from ..request import Authorization, RequestContext, erasure_scope

__all__ = [
    "MAX_THREADS",
    "Location",
    "SubjectDigest",
    "digest_subject",
    "erase_subject",
    "locate",
    "named_forms",
    "purge",
    "subject_spec",
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
    of the searched value and ``form`` how it was stored (``_engine.needles.NEEDLE_FORMS``);
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
    replay_of: str | None = None
    """A replay after a restore: the receipt id it repeats (RECEIPT_SPEC.md 9.11)."""
    targets: tuple[Any, ...] = ()
    """Erasure targets: the saver's and the call's (RECEIPT_SPEC.md 9.13)."""
    deferral_of: str | None = None
    """The deferral this erasure carries out (RECEIPT_SPEC.md 9.14)."""
    override_deferral: bool = False
    """Erase even while an open deferral retains one of the threads."""


def named_forms(needle: str) -> list[tuple[str, bytes]]:
    """``(form name, bytes)`` searched for one needle (``_engine.needles.NEEDLE_FORMS``)."""
    return named_needle_forms(needle)


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


# -- arguments -------------------------------------------------------------------------


def subject_spec(
    er: Eraser,
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
    """A validated ``erase_subject`` call, before its threads are found."""
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
    base = er.request(subject_id, given, tombstone, allow_empty)
    return _Spec(
        subject=subject_id, threads=explicit, metadata_key=metadata_key,
        store_namespaces=base.store_namespaces, needles=_strings(needles, "needles"),
        privacy=_commitment_key(privacy, commitment_key), tombstone=base.tombstone,
        allow_empty=base.allow_empty, targets=base.targets,
    )  # fmt: skip


# -- scope --------------------------------------------------------------------------


def subject_request(er: Eraser, handle: Any, spec: _Spec) -> ErasureRequest:
    """The request for the threads the subject has now (runs ``_db``-side)."""
    found: list[str] = []
    if spec.metadata_key is not None:
        found = er.journal.threads_by_metadata(handle, spec.metadata_key, spec.subject)
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
        privacy=spec.privacy, replay_of=spec.replay_of, targets=spec.targets,
        deferral_of=spec.deferral_of, override_deferral=spec.override_deferral,
    )  # fmt: skip


# -- flows --------------------------------------------------------------------------


def erase_subject(er: Eraser, spec: _Spec, residue_scan: ResidueScan) -> Receipt:
    """One subject erasure (privacy mode: errors name only commitments)."""
    if spec.privacy is None:
        return _erase_attempts(er, spec, residue_scan, set())
    # The saver holds the key from now on: recover_receipts() opens the sealed
    # journal entry of this erasure with it if the erasure is interrupted.
    er.commitment_keys[spec.privacy.key_id] = spec.privacy
    threads = set(spec.threads)
    try:
        return _erase_attempts(er, spec, residue_scan, threads)
    except Error as exc:
        concealed = _concealed(exc, spec, threads)
    raise concealed


def _erase_attempts(
    er: Eraser, spec: _Spec, residue_scan: ResidueScan, threads: set[str]
) -> Receipt:
    """The erasure, restarted while threads of the subject appear; ``threads`` collects
    every thread id seen (privacy mode conceals them in errors)."""
    _check_authorization(er, spec)
    for _ in range(MAX_RESCANS):
        request = er.db.run(partial(subject_request, er), spec)
        threads.update(request.threads)
        request = er.with_context(request, spec.context, spec.authorization)
        if request.needles and er.external_store() is not None:
            # Swept store items cannot be restored: refuse on a needle found outside
            # the scope before the sweep (the check in the transaction still rules).
            needles_outside(er, request)
        try:
            receipt = er.erase(request, residue_scan)
        except NothingToEraseError:
            raise _nothing(
                _shown(spec),
                f"its {len(request.threads)} thread(s) and {len(spec.store_namespaces)} "
                "store namespace(s) hold no rows (already erased?); allow_empty=True "
                "attests an empty scope",
            ) from None
        except _ScopeChanged as exc:  # found under the lock: rolled back, rescan
            log.info("subject erasure restarted: %d new thread(s) appeared", len(exc.threads))
            continue
        if request.privacy is not None:
            _redact_journal(er, receipt, request)
        return receipt
    raise ErasureIncompleteError(
        f"threads of subject {_shown(spec)!r} kept appearing while the erasure started "
        f"({MAX_RESCANS} attempts); nothing was deleted: stop the subject's sessions "
        "and retry"
    )


def _check_authorization(er: Eraser, spec: _Spec) -> None:
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
    auth.check("subject", scope, spec.context.id, format_time(er.now()), exact=True)


def needles_outside(er: Eraser, request: ErasureRequest) -> None:
    """Refuse, before a store outside the database is swept, a needle found outside the
    scope (the check inside the transaction still rules)."""
    threads = set(request.threads)
    prefixes = [".".join(ns) for ns in request.store_namespaces]

    def inside(loc: Location) -> bool:
        if loc.table == "store":
            p = loc.prefix or ""
            return any(p == x or p.startswith(x + ".") for x in prefixes)
        return loc.thread_id in threads

    # The targets are searched in the transaction, outside the erased scope (their
    # rows of the scope are not told apart here).
    outside = [loc for loc in locate(er, request.needles, targets=False) if not inside(loc)]
    if outside:
        forms = [(i, f) for i, n in enumerate(request.needles) for f in needle_forms(n)]
        raise NeedlesFoundError(
            _redact_locations([loc.to_json() for loc in outside], request, forms)
        )


def _redact_journal(er: Eraser, receipt: Receipt, request: ErasureRequest) -> None:
    """Best effort: once the statement is journaled (recovery then just signs it),
    the entry's sealed request is not needed any more; drop it."""

    def rewrite(entry: str) -> str:
        redacted = redact_entry(entry)
        return entry if redacted is None else redacted[1]

    try:
        er.db.run(er.journal.redact_journal, receipt.receipt_id, request.journal_id, rewrite)
    except Exception as exc:
        log.warning("journal entry %s keeps its sealed request: %s", receipt.receipt_id, exc)


def digest_subject(er: Eraser, spec: _Spec) -> SubjectDigest:
    """What ``erase_subject`` would measure now (read-only)."""

    def run(handle: Any) -> tuple[ErasureRequest, Any]:
        request = subject_request(er, handle, spec)
        backend = er.backend(handle, request, False)
        with backend.read_snapshot():
            return request, measure_parts(backend.parts(), erase=False)

    request, m = er.db.run(run)
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


def locate(er: Eraser, needles: Sequence[str], *, targets: bool = True) -> list[Location]:
    """Every stored location of each needle (rows by SQL, an external store by its API,
    and with ``targets`` the saver's erasure targets)."""
    forms = [(i, name, data) for i, n in enumerate(needles) for name, data in named_forms(n)]
    found: list[dict[str, Any]] = er.db.run(er.journal.locate, forms)
    store = er.external_store()
    if store is not None:
        for i, name, data in forms:
            found += [{**d, "needle": i, "form": name} for d in store_locations(store, [data])]
    if targets:
        found += _target_locations(er, forms)
    return sorted((Location.from_found(d) for d in found), key=Location.sort_key)


def _target_locations(er: Eraser, forms: list[tuple[int, str, bytes]]) -> list[dict[str, Any]]:
    """The saver's targets searched too (RECEIPT_SPEC.md 9.13): tables of its database
    by SQL, tables of other databases through a connection of their own, item targets
    that can be searched (``locate``) through their API; a target that cannot be searched
    is left out, with a warning naming it."""
    from .._backends.targets import OtherDatabasePart, find_sql_needles, handle_kind, label
    from ..targets import SqlTarget, unsearchable

    out: list[dict[str, Any]] = []
    for t in er.targets:
        if isinstance(t, SqlTarget) and t.database is None:

            def run(handle: Any, t: SqlTarget = t) -> list[dict[str, Any]]:
                kind = handle_kind(handle)
                return [{**d, "needle": i, "form": name} for i, name, data in forms
                        for d in find_sql_needles(kind, handle, t, [data], [])]  # fmt: skip

            out += er.db.run(run)
        elif isinstance(t, SqlTarget):
            part = OtherDatabasePart(t, "", label(t), label(t))
            try:
                out += [{**d, "needle": i, "form": name} for i, name, data in forms
                        for d in part.find_needles([data], [])]  # fmt: skip
            finally:
                part.close()
        elif (why := unsearchable(t)) is None:
            out += [{"table": label(t), "key": k, "column": "document", "via": "target",
                     "needle": i, "form": name}
                    for i, name, data in forms for k in t.locate([data])]  # fmt: skip
        else:
            log.warning("locate: target %r not searched: %s", t.name, why)
    return out


def purge(er: Eraser, older_than: timedelta | datetime) -> int:
    """Delete closed journal entries older than ``older_than``; how many."""
    cutoff = er.cutoff(older_than)
    return int(er.db.run(er.journal.purge_journal, format_time(cutoff)))


def _needles(needles: Any) -> tuple[str, ...]:
    out = _strings(needles, "needles")
    if not out:
        raise ConfigurationError("locate needs at least one value to search for")
    return out
