"""Signed decisions to retain (RECEIPT_SPEC.md 9.14): a deferral receipt, its record in
the database, and carrying it out when it ends.

The law sometimes requires keeping data an erasure request names (GDPR Art. 17(3), a
duty to keep logs for a period). ``defer`` measures the scope an erasure of it would
measure - a thread, its history, or a data subject's threads - read-only, in one read
snapshot, and signs a receipt of kind ``deferral`` (status ``retained``): the scope and
its digest now, the legal basis (free text and an optional code such as
``gdpr-17-3-b``) and the end date ``until``. The deferral is recorded in the saver's
database (``erasure_deferrals``, and the threads it retains in
``erasure_deferral_threads``), so every process finds it:

* an erasure of a retained thread (``erase_thread``, ``erase_history``,
  ``erase_subject``, ``delete_thread``, ``prune``, a sweep) raises ``DeferredError``
  inside its transaction, before anything is deleted, unless it passes
  ``override_deferral=True`` - its receipt then names the deferral (``deferral_of``);
* a retention sweep skips retained threads (``deferred``) until ``until`` passes by the
  saver's clock, then erases the deferral's scope with the flow of its kind, one receipt
  whose ``deferral_of`` names the deferral, and closes it (``executed``);
* ``release_deferral`` ends a deferral early without erasing (``released``, recorded
  with its reason and time; no receipt).

The flows are the engine's: the deferral only builds requests, measures through the
backend's parts and signs a statement the verifier's own rules accept.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from .. import __version__
from .._clock import format_time
from .._engine.eraser import Eraser, check_archive
from .._engine.measure import measure_parts
from .._engine.statement import _backend_info, _members, sign_and_archive
from .._engine.types import ErasureRequest
from ..errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasureIncompleteError,
    MalformedReceiptError,
    NothingToEraseError,
    ReceiptSemanticsError,
)
from ..receipt import (
    DEFERRAL_KINDS,
    MAX_BASIS,
    MAX_THREAD_ID,
    Receipt,
    build_statement,
    is_name,
    is_time,
    time_key,
    validate_statement,
)
from . import subject as _subject

if TYPE_CHECKING:
    from ..request import RequestContext

__all__ = [
    "DEFERRAL_STATES",
    "Deferral",
    "DeferralScope",
    "carry_out",
    "defer",
    "deferrals",
    "due_deferrals",
    "erasure_request",
    "release_deferral",
    "scope_of",
]

log = logging.getLogger("erasure_receipts")

DEFERRAL_STATES = ("open", "executed", "released", "lapsed")
"""A recorded deferral is ``open`` until it is carried out (``executed``: its erasure's
receipt names it), ended early (``released``), or found with nothing left to erase when
it ended (``lapsed``: erased meanwhile, e.g. with ``override_deferral``)."""

METHOD = "read-snapshot"


@dataclass(frozen=True)
class DeferralScope:
    """What a deferral retains: build it with :meth:`thread`, :meth:`history` or
    :meth:`subject` (a plain ``str`` passed to ``defer`` is a thread id)."""

    kind: str
    """``thread``, ``history`` or ``subject``."""
    target: str
    """The thread id, or the data subject's id."""
    threads: tuple[str, ...] = ()
    """``subject``: its explicit threads."""
    metadata_key: str | None = None
    """``subject``: the checkpoint-metadata key that finds its other threads."""
    store_namespaces: tuple[tuple[str, ...], ...] | None = None
    """Store namespaces in scope (``thread``: None means the saver's ``namespaces_for``)."""

    @classmethod
    def thread(
        cls, thread_id: str, *, store_namespaces: Iterable[Sequence[str]] | None = None
    ) -> DeferralScope:
        """Every row of the thread (and its store items), as ``erase_thread`` names it."""
        ns = None if store_namespaces is None else tuple(tuple(n) for n in store_namespaces)
        return cls("thread", thread_id, store_namespaces=ns)

    @classmethod
    def history(cls, thread_id: str) -> DeferralScope:
        """What ``erase_history`` would remove (every checkpoint but the latest of each
        namespace); a retained history also refuses an erasure of the whole thread."""
        return cls("history", thread_id, store_namespaces=())

    @classmethod
    def subject(
        cls,
        subject_id: str,
        *,
        threads: Iterable[str] = (),
        metadata_key: str | None = None,
        store_namespaces: Iterable[Sequence[str]] = (),
    ) -> DeferralScope:
        """A data subject's threads (explicit, and found by ``metadata_key``) and store
        namespaces, as ``erase_subject`` names them."""
        if isinstance(threads, str):
            raise ArgumentTypeError("threads= is a list of thread ids, not one string")
        return cls(
            "subject", subject_id, tuple(threads), metadata_key,
            tuple(tuple(n) for n in store_namespaces),
        )  # fmt: skip


@dataclass(frozen=True)
class Deferral:
    """One recorded deferral (``saver.deferrals()``)."""

    receipt_id: str
    kind: str
    """What it retains: ``thread``, ``history`` or ``subject``."""
    scope_id: str
    """The thread id, or the subject's id."""
    until: str
    issued_at: str
    basis: str
    code: str | None
    threads: tuple[str, ...]
    """The threads it retains (a subject's, as found when it was signed)."""
    state: str
    """One of :data:`DEFERRAL_STATES`."""
    closed_at: str | None = None
    closed_by: str | None = None
    """``executed``: the receipt id of the erasure that carried it out."""
    note: str | None = None
    """``released``: the reason given; ``executed``: ``overridden`` if the erasure
    overrode it before its end."""
    receipt_json: bytes = field(default=b"", repr=False)
    entry: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def receipt(self) -> Receipt:
        """The signed deferral receipt (parsed; verify it with ``verify_receipt``)."""
        return Receipt.from_json(self.receipt_json)

    def ended(self, now: datetime) -> bool:
        """Whether ``until`` has passed at ``now``."""
        return time_key(self.until) <= time_key(format_time(now))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (without the receipt)."""
        return {
            "receipt_id": self.receipt_id, "kind": self.kind, "scope": self.scope_id,
            "threads": list(self.threads), "basis": self.basis, "code": self.code,
            "issued_at": self.issued_at, "until": self.until, "state": self.state,
            "closed_at": self.closed_at, "closed_by": self.closed_by, "note": self.note,
        }  # fmt: skip

    @classmethod
    def _from_row(cls, row: Sequence[Any]) -> Deferral:
        rid, kind, scope_id, until, issued_at, entry_json, receipt, state, at, by, note = row
        entry = json.loads(entry_json)
        return cls(
            str(rid), str(kind), str(scope_id), str(until), str(issued_at),
            str(entry.get("basis", "")), entry.get("code"),
            tuple(str(t) for t in entry.get("threads", ())), str(state), at, by, note,
            str(receipt).encode("utf-8"), entry,
        )  # fmt: skip


# -- input ---------------------------------------------------------------------------------


def scope_of(scope: Any) -> DeferralScope:
    """``defer``'s ``scope=``: a :class:`DeferralScope`, or a thread id."""
    if isinstance(scope, str):
        scope = DeferralScope.thread(scope)
    if not isinstance(scope, DeferralScope):
        raise ArgumentTypeError(
            "scope must be a thread id or a DeferralScope (DeferralScope.thread(...), "
            f".history(...), .subject(...)), not {type(scope).__name__}"
        )
    if scope.kind not in DEFERRAL_KINDS:
        raise ConfigurationError(f"a deferral retains one of {DEFERRAL_KINDS}, not {scope.kind!r}")
    if not isinstance(scope.target, str) or not scope.target:
        raise ConfigurationError(f"the deferred {scope.kind} needs a non-empty id")
    if len(scope.target) > MAX_THREAD_ID:
        raise ConfigurationError(
            f"the deferred {scope.kind}'s id is over {MAX_THREAD_ID} characters"
        )
    return scope


def _until(er: Eraser, until: Any) -> str:
    """``until=`` as receipt time text: a ``datetime`` (naive: UTC), a ``date``
    (midnight UTC at its start) or RFC 3339 text; it must be after now."""
    if isinstance(until, str):
        text = until.strip()
        try:
            until = (
                date.fromisoformat(text)
                if len(text) == 10
                else datetime.fromisoformat(text.replace("Z", "+00:00"))
            )
        except ValueError:
            raise ConfigurationError(
                f"until {text!r} is neither a date (YYYY-MM-DD) nor an RFC 3339 time"
            ) from None
    if isinstance(until, date) and not isinstance(until, datetime):
        until = datetime.combine(until, time(0), tzinfo=UTC)
    if not isinstance(until, datetime):
        raise ArgumentTypeError(
            f"until= is a datetime, a date or RFC 3339 text, not {type(until).__name__}"
        )
    text = format_time(until)
    if not is_time(text):
        raise ConfigurationError(f"until {text!r} is not a time a receipt can hold")
    now = format_time(er.now())
    if time_key(text) <= time_key(now):
        raise ConfigurationError(
            f"until {text} is not in the future (now {now}): a deferral retains data until "
            "a date still to come"
        )
    return text


def _basis(basis: Any) -> str:
    if not isinstance(basis, str):
        raise ArgumentTypeError(f"basis= is text (the legal basis), not {type(basis).__name__}")
    if not basis.strip():
        raise ConfigurationError("basis= must name the legal basis of the deferral; it is empty")
    if len(basis) > MAX_BASIS:
        raise ConfigurationError(f"basis= is over {MAX_BASIS} characters")
    try:
        basis.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError("basis= is not valid text (a lone surrogate)") from None
    return basis


def _code(code: Any) -> str | None:
    if code is None:
        return None
    if not isinstance(code, str) or not is_name(code):
        raise ConfigurationError(
            f"code= is a short identifier such as 'gdpr-17-3-b' (letters, digits, _.:-, at "
            f"most 64), not {code!r}"
        )
    return code


# -- the requests ----------------------------------------------------------------------


def _subject_spec(er: Eraser, scope: DeferralScope, tombstone: bool) -> Any:
    return _subject.subject_spec(
        er, scope.target, scope.threads, scope.metadata_key, scope.store_namespaces or (),
        (), None, None, tombstone, False,
    )  # fmt: skip


def _request(er: Eraser, handle: Any, scope: DeferralScope, tombstone: bool) -> ErasureRequest:
    """The request an erasure of ``scope`` makes (``tombstone`` as a deferral: False)."""
    if scope.kind == "subject":
        return _subject.subject_request(er, handle, _subject_spec(er, scope, tombstone))
    base = er.request(scope.target, scope.store_namespaces, tombstone and scope.kind != "history")
    if scope.kind == "history":  # as _ops.history.history_request (no needles, no tombstone)
        return replace(base, kind="history", keep="latest", needle_scope="thread")
    return base


def erasure_request(er: Eraser, d: Deferral, context: RequestContext | None) -> ErasureRequest:
    """The erasure that carries out ``d`` (its scope as recorded; a subject's threads
    as found when it was signed, and any found by its metadata key since)."""
    scope = _recorded_scope(d)
    if scope.kind == "subject":
        spec = replace(_subject_spec(er, scope, True), deferral_of=d.receipt_id)
        request = er.db.run(_subject.subject_request, er, spec)
    else:
        request = replace(_request(er, None, scope, True), deferral_of=d.receipt_id)
    return er.with_context(request, context, None)


def _recorded_scope(d: Deferral) -> DeferralScope:
    ns = d.entry.get("store_namespaces")
    namespaces = None if ns is None else tuple(tuple(n) for n in ns)
    if d.kind == "subject":
        return DeferralScope("subject", d.scope_id, d.threads, d.entry.get("discovery"),
                             namespaces or ())  # fmt: skip
    return DeferralScope(d.kind, d.scope_id, store_namespaces=namespaces)


# -- defer -------------------------------------------------------------------------------


def defer(
    er: Eraser,
    scope: Any,
    *,
    basis: Any,
    until: Any,
    code: Any = None,
    context: Any = None,
    authorization: Any = None,
) -> Receipt:
    """Measure ``scope`` read-only, sign its deferral receipt, record it, archive it."""
    sc = scope_of(scope)
    basis_text, code_text, until_text = _basis(basis), _code(code), _until(er, until)
    if sc.kind == "subject" and authorization is not None:
        _subject._check_authorization(
            er, replace(_subject_spec(er, sc, False), context=context, authorization=authorization)
        )
    check_archive(er.archive)

    def measure(handle: Any) -> tuple[ErasureRequest, dict[str, Any], Any, dict[str, Any]]:
        request = er.with_context(_request(er, handle, sc, False), context, authorization)
        backend = er.backend(handle, request, False)
        with backend.read_snapshot():
            m = measure_parts(backend.parts(), erase=False)
            kept = tuple(sorted(backend.kept_checkpoints())) if sc.kind == "history" else ()
        members = _members(backend, request, m, kept, None)
        info = _backend_info(backend)
        return request, members, m, info

    request, members, m, info = er.db.run(measure)
    if not any(c.rows for c in m.tables.values()):
        what = {"history": "history of thread", "subject": "subject"}.get(sc.kind, "thread")
        raise _nothing(sc.target, f"{what} {sc.target!r}")
    tables = {k: v.to_json() for k, v in m.tables.items()}
    methods = {"checkpoints": METHOD}
    if request.store_namespaces:
        methods["store"] = METHOD
    issued_at = format_time(er.now())
    if time_key(until_text) <= time_key(issued_at):  # the clock moved on meanwhile
        raise ConfigurationError(f"until {until_text} is not after the deferral ({issued_at})")
    leaves = sum(t["rows"] for t in tables.values())
    extra: dict[str, Any] = {
        "deferral": {"of_kind": sc.kind, "basis": basis_text, "code": code_text,
                     "until": until_text},
    }  # fmt: skip
    for k in ("request", "authorization"):
        if k in members:
            extra[k] = members[k]
    st = build_statement(
        receipt_id=str(uuid.uuid4()), issued_at=issued_at, thread_id=request.thread_id,
        store_namespaces=request.store_namespaces, tombstone=False, backend=info,
        pre_digest=m.root.hex(), pre_tables=tables, post_digest=m.root.hex(),
        post_tables=tables, methods=methods,
        checks=[
            {"name": "scope_measured", "result": "pass",
             "detail": f"{leaves} rows measured in one read snapshot; nothing deleted"},
            {"name": "until_after_issued_at", "result": "pass"},
        ],
        residue=[], generator_version=__version__, kind="deferral",
        scope=members["scope"], subject_name=members["subject_name"], extra=extra,
    )  # fmt: skip
    st["predicate"]["status"] = "retained"
    _self_check(st)
    receipt = Receipt.sign(st, er.signer)
    threads = list(request.all_threads)
    row = (
        receipt.receipt_id, sc.kind, sc.target, until_text, issued_at,
        json.dumps({
            "basis": basis_text, "code": code_text, "threads": threads,
            "store_namespaces": (None if request.mapped_store
                                 else [list(n) for n in request.store_namespaces]),
            "discovery": request.discovery,
        }, sort_keys=True, ensure_ascii=False),
        receipt.to_json().decode("utf-8"), "open", None, None, None,
    )  # fmt: skip
    # Recorded in a transaction that excludes erasures of these threads; a thread that
    # lost its rows since the measurement (an erasure committed in between, before it
    # could see the deferral) voids it: it would claim to retain what is gone.
    present = _present(request, m)
    gone = er.db.run(er.journal.record_deferral, row, threads, present)
    if gone:
        raise ErasureIncompleteError(
            f"thread(s) {', '.join(map(repr, gone[:5]))} were erased while the deferral was "
            "recorded; no deferral was recorded or issued (defer again if the scope still "
            "exists)"
        )
    try:
        sign_and_archive(st, er.signer, er.archive)  # the same bytes (Ed25519 is deterministic)
    except Exception as exc:
        raise ErasureIncompleteError(
            f"deferral {receipt.receipt_id} is recorded, but its receipt could not be archived "
            f"({type(exc).__name__}: {exc}); deferrals() holds the signed receipt"
        ) from exc
    log.info("deferred %s %r until %s: receipt %s", sc.kind, sc.target, until_text,
             receipt.receipt_id)  # fmt: skip
    return receipt


def _present(request: ErasureRequest, m: Any) -> list[str]:
    """The threads that had checkpoint rows when the deferral was measured."""
    if request.kind != "subject":
        return [request.thread_id]
    return [u[len("thread:") :] for u, _, t in m.units
            if u.startswith("thread:") and any(c.rows for c in t.values())]  # fmt: skip


def _nothing(target: str, what: str) -> NothingToEraseError:
    exc = NothingToEraseError(target)
    exc.args = (f"{what} has no stored rows (unknown id, or already erased?); nothing to defer",)
    return exc


def _self_check(st: dict[str, Any]) -> None:
    """The statement must pass the verifier's own rules before it is signed."""
    from ..verify import check_residue, check_semantics

    try:
        validate_statement(json.loads(json.dumps(st)))
        check_semantics(st)
        check_residue(st["predicate"])
    except (MalformedReceiptError, ReceiptSemanticsError) as exc:
        raise ConfigurationError(
            f"the deferral receipt would not verify ({exc.reason}: {exc.message})"
        ) from None


# -- the record ----------------------------------------------------------------------------


def deferrals(er: Eraser, state: str | None = None) -> list[Deferral]:
    """Recorded deferrals (of one state), oldest first."""
    if state is not None and state not in DEFERRAL_STATES:
        raise ConfigurationError(f"state= must be one of {DEFERRAL_STATES} or None, not {state!r}")
    return [Deferral._from_row(r) for r in er.db.run(er.journal.deferrals, state)]


def release_deferral(er: Eraser, receipt_id: Any, reason: Any) -> Deferral:
    """End an open deferral without erasing; recorded with ``reason`` and the time."""
    if not isinstance(receipt_id, str) or not receipt_id:
        raise ConfigurationError(f"receipt_id must be a deferral receipt's id, not {receipt_id!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError("reason= must say why the deferral ends early; it is empty")
    now = format_time(er.now())
    if not er.db.run(er.journal.close_deferral, receipt_id, "released", now, None, reason):
        known = {d.receipt_id: d.state for d in deferrals(er)}
        why = f"it is {known[receipt_id]}" if receipt_id in known else "no deferral has this id"
        raise ConfigurationError(f"deferral {receipt_id} cannot be released: {why}")
    return next(d for d in deferrals(er) if d.receipt_id == receipt_id)


def due_deferrals(er: Eraser, kinds: Sequence[str]) -> list[Deferral]:
    """Open deferrals of ``kinds`` whose ``until`` has passed by the saver's clock."""
    now = er.now()
    return [d for d in deferrals(er, "open") if d.kind in kinds and d.ended(now)]


def carry_out(er: Eraser, d: Deferral, context: RequestContext | None) -> Receipt | None:
    """Erase an ended deferral's scope with the flow of its kind, the receipt naming it
    (``deferral_of``); None - and the deferral closed as ``lapsed`` - when nothing is
    left to erase."""
    try:
        if d.kind == "subject":
            spec = _subject_spec(er, _recorded_scope(d), True)
            spec = replace(spec, deferral_of=d.receipt_id, context=context)
            return _subject.erase_subject(er, spec, er.residue_scan)
        return er.erase(erasure_request(er, d, context), er.residue_scan)
    except NothingToEraseError:
        er.db.run(er.journal.close_deferral, d.receipt_id, "lapsed", format_time(er.now()),
                  None, "nothing left to erase when it ended")  # fmt: skip
        return None
