"""Replay after a restore: the receipts are the erasure ledger kept outside the database.

Restoring a backup taken before an erasure brings the erased rows back *and* removes
the evidence that lived beside them (tombstones, the erasure journal). A replay reads
an archive directory or a receipt log, keeps only receipts that verify against the
caller's trusted keys, and for each erased scope (thread, history, subject) re-derives
from the signed receipt what it covered, finds what has data again, and re-erases
exactly that through the ordinary erasure flows, with a new receipt whose
``replay_of`` names the original (RECEIPT_SPEC.md 9.11). Tombstones the restore lost are
put back. A scope that is still empty is counted, not attested again, so a second
replay changes nothing.

What decides "has data again", per scope (the latest verified receipt of it):

* the database's own journal holds that receipt: the database is not older than the
  erasure, so what it holds of the scope now was written after it (a reopened thread):
  ``postdated``, left alone;
* otherwise the scope is measured now (the erasure's own measurement, read-only): rows
  -> ``reappeared`` (re-erased, or only reported in a dry run); none -> ``still_empty``
  (a missing tombstone is re-created by an empty, attested erasure: ``retombstoned``).

A history receipt whose kept checkpoint is missing from the restored database cannot be
reconciled (the restore predates the state it kept): ``failed``, with that reason.
Privacy-mode receipts name commitments: their thread ids and store namespaces are
matched against the database's with the commitment key; a subject's own id must be
given (``subject_ids=``), as a commitment cannot be inverted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from .._engine.eraser import Eraser
from ..errors import ConfigurationError, Error
from ..privacy import CommitmentKey
from ..receipt import Receipt
from ..trust import TrustedKey, TrustStore
from ..verify import verify_receipt
from . import history as _history
from . import namespace as _namespace
from . import subject as _subject

__all__ = [
    "ReplayResult",
    "ReplayedScope",
    "guard_off",
    "load_receipts",
    "replay",
    "stale_scopes",
]

log = logging.getLogger("erasure_receipts")

OUTCOMES = ("reappeared", "re_erased", "retombstoned", "still_empty", "postdated", "failed")
"""What a replay found of one scope (``ReplayedScope.outcome``)."""

Trust = TrustStore | Sequence[Any]

_GUARD_OFF: ContextVar[bool] = ContextVar("erasure_receipts_guard_off", default=False)


@contextmanager
def guard_off() -> Iterator[None]:
    """Inside: the startup guard does not run (a replay, or the guard's own check, sets
    the saver up while erased data is back)."""
    token = _GUARD_OFF.set(True)
    try:
        yield
    finally:
        _GUARD_OFF.reset(token)


def guard_is_off() -> bool:
    """Whether :func:`guard_off` is in effect in this context."""
    return _GUARD_OFF.get()


@dataclass(frozen=True)
class ReplayedScope:
    """One erased scope, as the replay found it.

    ``receipt_id`` is the latest verified receipt of the scope (the one a new receipt's
    ``replay_of`` names), ``receipts`` how many verified receipts name the scope,
    ``rows`` the rows found again (0 unless ``reappeared``/``re_erased``),
    ``new_receipt_id`` the receipt the replay issued, ``reason`` why it failed."""

    kind: str
    scope: str
    receipt_id: str
    outcome: str
    receipts: int = 1
    rows: int = 0
    new_receipt_id: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The scope as one JSON object."""
        return {
            "kind": self.kind, "scope": self.scope, "receipt_id": self.receipt_id,
            "outcome": self.outcome, "receipts": self.receipts, "rows": self.rows,
            "new_receipt_id": self.new_receipt_id, "reason": self.reason,
        }  # fmt: skip


@dataclass
class ReplayResult:
    """What ``replay_erasures`` did: receipts ``checked`` (verified and used),
    ``rejected`` (``(source, reason)`` of receipts that did not verify: never used), and
    one :class:`ReplayedScope` per erased scope. ``ok`` is False when a scope failed or
    a receipt was rejected (an erasure that cannot be replayed is not silently skipped).
    """

    dry_run: bool
    checked: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    scopes: list[ReplayedScope] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    """The receipts this replay issued, in order."""

    def count(self, outcome: str) -> int:
        """Scopes with this outcome (one of ``OUTCOMES``)."""
        return sum(1 for s in self.scopes if s.outcome == outcome)

    @property
    def reappeared(self) -> int:
        """Scopes that had data again (re-erased, or would be in a dry run)."""
        return self.count("reappeared") + self.count("re_erased")

    @property
    def re_erased(self) -> int:
        """Scopes re-erased with a new receipt."""
        return self.count("re_erased")

    @property
    def still_empty(self) -> int:
        """Scopes with nothing of theirs in the database (tombstones re-created or not)."""
        return self.count("still_empty") + self.count("retombstoned")

    @property
    def failed(self) -> int:
        """Scopes that could not be checked or re-erased."""
        return self.count("failed")

    @property
    def ok(self) -> bool:
        """Nothing failed and every receipt verified."""
        return not self.failed and not self.rejected

    def to_json(self) -> dict[str, Any]:
        """The result as one JSON document (``receipt replay --json``)."""
        return {
            "dry_run": self.dry_run,
            "checked": self.checked,
            "rejected": [{"source": s, "reason": r} for s, r in self.rejected],
            "scopes": len(self.scopes),
            "reappeared": self.reappeared,
            "re_erased": self.re_erased,
            "retombstoned": self.count("retombstoned"),
            "still_empty": self.still_empty,
            "postdated": self.count("postdated"),
            "failed": self.failed,
            "items": [s.to_json() for s in self.scopes],
        }


# -- reading the ledger ------------------------------------------------------------------


def _sources(source: Any) -> Iterator[tuple[str, bytes | Error]]:
    """``(where, bytes)`` of every receipt in an archive directory or a receipt log (an
    ``Error`` in place of the bytes of a file that cannot be read)."""
    from ..log import ReceiptLog, is_log

    if isinstance(source, ReceiptLog):
        for i, data in source.entries():
            yield f"{source.directory}#{i}", data
        return
    if not isinstance(source, str | os.PathLike):
        raise ConfigurationError(
            "source= must be a receipt archive directory or a ReceiptLog, "
            f"not {type(source).__name__}"
        )
    path = Path(source)
    if is_log(path):
        yield from _sources(ReceiptLog(path))
        return
    if not path.is_dir():
        raise ConfigurationError(f"{str(path)!r} is not a receipt archive directory or log")
    from .._batch import _expand, _read_arg

    for name in _expand([str(path)]):
        try:
            yield name, _read_arg(name)
        except Error as exc:
            yield name, exc


Facts = dict[str, Any]
"""What a replay keeps of a verified receipt: ``receipt_id``, ``issued_at``, ``kind``,
``scope`` and (history) ``kept``, the kept checkpoints; plain data (it crosses a pipe
from a verifying worker process)."""

PARALLEL_MIN = 256
"""Receipts below which verification stays in this process (forking costs more)."""


def load_receipts(
    source: Any, trust: Trust, jobs: int = 1
) -> tuple[list[Facts], list[tuple[str, str]]]:
    """The facts of the receipts of ``source`` that verify against ``trust`` (only those
    count), and ``(where, reason)`` of those that do not. ``jobs`` > 1 verifies in forked
    worker processes (``receipt replay``; not from a process with other threads)."""
    keys = trust if isinstance(trust, TrustStore) else TrustStore(_keys(trust))
    items = list(_sources(source))
    if len(items) >= 64:
        from ..canonical import use_orjson

        use_orjson()  # the batch path of `receipt verify`: same verdicts, ~2x faster
    check = partial(_check_one, keys)
    if jobs > 1 and len(items) >= PARALLEL_MIN:
        from .._batch import fork_map

        results: Iterable[tuple[str, str, Any]] = fork_map(check, items, jobs)
    else:
        results = map(check, items)
    good: list[Facts] = []
    bad: list[tuple[str, str]] = []
    for verdict, where, value in results:
        if verdict == "ok":
            good.append(value)
        else:
            bad.append((where, value))
    return good, bad


def _check_one(keys: TrustStore, item: tuple[str, bytes | Error]) -> tuple[str, str, Any]:
    where, data = item
    try:
        if isinstance(data, Error):
            raise data
        v = verify_receipt(data, keys)
    except Error as exc:
        return "bad", where, f"{exc.reason}: {exc.message}"
    p = v.statement["predicate"]
    kind = str(p.get("kind", "thread"))
    facts = {"receipt_id": v.receipt_id, "issued_at": v.issued_at, "kind": kind,
             "scope": p["scope"]}  # fmt: skip
    if kind == "history":
        facts["kept"] = p["kept_state"]["checkpoints"]
    return "ok", where, facts


def _keys(trust: Sequence[Any]) -> list[TrustedKey | Any]:
    if isinstance(trust, str | bytes) or not isinstance(trust, Iterable):
        raise ConfigurationError("trust= must be a TrustStore or a list of PublicKeys")
    return list(trust)


# -- scopes ------------------------------------------------------------------------------


@dataclass
class _Scope:
    kind: str
    scope: dict[str, Any]
    latest: Facts
    ids: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return _label(self.kind, self.scope)

    @property
    def receipt_id(self) -> str:
        return str(self.latest["receipt_id"])


def _label(kind: str, sc: dict[str, Any]) -> str:
    if kind == "namespace":
        return ".".join(sc["namespace"])
    return str(sc["subject"] if kind == "subject" else sc["thread_id"])


def _scopes(receipts: Iterable[Facts]) -> list[_Scope]:
    """One entry per erased scope, with its latest receipt; whole-thread scopes (thread,
    subject) before histories, so a history re-checks what they left."""
    by: dict[tuple[str, str], _Scope] = {}
    for v in receipts:
        kind, sc = v["kind"], v["scope"]
        if kind not in ("thread", "history", "subject", "namespace"):
            continue  # other kinds erase no scope a restore could bring back
        key = (kind, _label(kind, sc))
        cur = by.get(key)
        if cur is None:
            cur = by[key] = _Scope(kind, sc, v)
        elif (v["issued_at"], v["receipt_id"]) > (cur.latest["issued_at"], cur.receipt_id):
            cur.scope, cur.latest = sc, v
        cur.ids.add(v["receipt_id"])
    order = {"thread": 0, "subject": 0, "namespace": 0, "history": 1}
    return sorted(by.values(), key=lambda s: (order[s.kind], s.latest["issued_at"], s.label))


# -- the replay --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Db:
    """What the database holds now (one read): journal ids, threads, tombstones."""

    journal: set[str]
    threads: set[str]
    tombstoned: set[str]


def replay(
    er: Eraser,
    source: Any,
    trust: Trust,
    *,
    dry_run: bool,
    privacy_key: CommitmentKey | None,
    subject_ids: Sequence[str] = (),
    progress: Callable[[ReplayedScope], None] | None = None,
    jobs: int = 1,
) -> ReplayResult:
    """The replay (see the module docs)."""
    verified, rejected = load_receipts(source, trust, jobs)
    result = ReplayResult(dry_run, checked=len(verified), rejected=rejected)
    for where, reason in rejected:
        log.warning("replay: %s not used: %s", where, reason)
    db = _Db(*er.db.run(er.journal.replay_state))
    for s in _scopes(verified):
        item = _replay_one(er, db, s, dry_run, privacy_key, subject_ids)
        if item[1] is not None:
            result.receipts.append(item[1])
        result.scopes.append(item[0])
        if progress is not None:
            progress(item[0])
    return result


def stale_scopes(er: Eraser, source: Any, trust: Trust, privacy_key: Any) -> list[str]:
    """The startup guard: labels of erased scopes that have data again (a dry run)."""
    res = replay(er, source, trust, dry_run=True, privacy_key=privacy_key)
    bad = [f"{s.kind} {s.scope!r}" for s in res.scopes if s.outcome in ("reappeared", "failed")]
    bad += [f"receipt {w} ({r})" for w, r in res.rejected]
    return bad


def _replay_one(
    er: Eraser,
    db: _Db,
    s: _Scope,
    dry_run: bool,
    key: CommitmentKey | None,
    subject_ids: Sequence[str],
) -> tuple[ReplayedScope, Receipt | None]:
    base = ReplayedScope(s.kind, s.label, s.receipt_id, "still_empty", len(s.ids))
    if s.ids & db.journal:
        # This database saw the erasure (its journal says so): not restored from before it.
        return replace(base, outcome="postdated"), None
    try:
        raw = _open(s, db, key, subject_ids)
        rows = _measure(er, db, s, raw)
        missing = _missing_tombstones(er, s, raw, db)
        if rows == 0 and not missing:
            return base, None
        if rows == 0:
            outcome = "retombstoned"
            if dry_run:
                return replace(base, outcome=outcome), None
        else:
            outcome = "reappeared" if dry_run else "re_erased"
            if dry_run:
                return replace(base, outcome=outcome, rows=rows), None
        receipt = _erase(er, s, raw, allow_empty=rows == 0)
    except Error as exc:
        log.warning("replay: %s %r failed: %s", s.kind, s.label, exc.message)
        return replace(base, outcome="failed", reason=exc.message), None
    pre = int(receipt.predicate["pre_state"]["leaves"])
    return replace(base, outcome=outcome, rows=pre, new_receipt_id=receipt.receipt_id), receipt


@dataclass(frozen=True)
class _Raw:
    """A scope's raw ids (its commitments opened in privacy mode)."""

    thread_id: str | None
    subject: str | None
    threads: tuple[str, ...]
    store_namespaces: tuple[tuple[str, ...], ...]
    key: CommitmentKey | None


def _open(s: _Scope, db: _Db, key: CommitmentKey | None, subject_ids: Sequence[str]) -> _Raw:
    sc = s.scope
    nss = tuple(tuple(ns) for ns in sc["store_namespaces"])
    if s.kind == "namespace":
        if "privacy" in sc:
            raise ConfigurationError(
                f"privacy-mode namespace receipt {s.receipt_id}: its prefix is a commitment, "
                "which a replay cannot open; erase it with erase_namespace"
            )
        return _Raw(None, None, (), (tuple(sc["namespace"]),), None)
    if "privacy" not in sc:
        threads = tuple(sc["threads"]) if s.kind == "subject" else ()
        subject = sc["subject"] if s.kind == "subject" else None
        return _Raw(sc.get("thread_id"), subject, threads, nss, None)
    want = sc["privacy"]["key_id"]
    if key is None or key.key_id != want:
        raise ConfigurationError(
            f"privacy-mode receipt {s.receipt_id}: open it with commitment key "
            f"{want[:16]}... (privacy_key=, receipt replay --commitment-key)"
        )
    committed = {key.commit("thread", t): t for t in db.threads}
    if s.kind != "subject":
        tid = committed.get(sc["thread_id"])
        if tid is None:  # no checkpoint of it: nothing came back (its id is unknown)
            return _Raw(None, None, (), (), key)
        return _Raw(tid, None, (), (), key)
    subject = next((x for x in subject_ids if key.commit("subject", x) == sc["subject"]), None)
    if subject is None:
        raise ConfigurationError(
            f"privacy-mode subject receipt {s.receipt_id}: its subject id is a "
            "commitment; give it with subject_ids= (receipt replay --subject-ids FILE)"
        )
    threads = tuple(sorted(committed[c] for c in sc["threads"] if c in committed))
    if nss:
        raise ConfigurationError(
            f"privacy-mode subject receipt {s.receipt_id} names store namespaces "
            "as commitments, which a replay cannot open; erase them with erase_subject"
        )
    return _Raw(None, subject, threads, (), key)


def _measure(er: Eraser, db: _Db, s: _Scope, raw: _Raw) -> int:
    """Rows of the scope in the database now (its erasure's own measurement; skipped
    where the database has no row of its threads and the scope names no store)."""
    if s.kind == "namespace":
        probe = _namespace.namespace_request(er, raw.store_namespaces[0], tombstone=False)
        return int(_namespace.digest_namespace(er, probe).leaves)
    if not raw.store_namespaces and not (set(raw.threads) | {raw.thread_id}) & db.threads:
        return 0
    if s.kind == "subject":
        spec = _subject_spec(er, s, raw, allow_empty=True)
        return int(_subject.digest_subject(er, spec).leaves)
    if raw.thread_id is None:
        return 0
    if s.kind == "history":
        _check_kept(er, s, raw.thread_id)
        request = _history.history_request(er, raw.thread_id, "latest", (), raw.store_namespaces)
    else:
        request = er.request(raw.thread_id, raw.store_namespaces, False)
    return sum(c.rows for c in er.db.run(er.measure, request).tables.values())


def _check_kept(er: Eraser, s: _Scope, thread_id: str) -> None:
    """A history receipt's kept checkpoints must exist: a restore older than them holds
    a state the erasure removed, which keep-latest would now keep."""
    kept = s.latest.get("kept", ())
    newest = max((c["checkpoint_id"] for c in kept), default=None)
    if newest is None:
        return
    latest = er.db.run(er.journal.latest_checkpoint, thread_id)
    if latest is not None and latest < newest:
        raise ConfigurationError(
            f"the restored thread's latest checkpoint {latest} is older than the one the "
            f"history erasure kept ({newest}): the restore predates the state it kept; "
            "erase the thread or restore a newer backup"
        )


def _missing_tombstones(er: Eraser, s: _Scope, raw: _Raw, db: _Db) -> bool:
    if not s.scope.get("tombstone") or s.kind == "history":
        return False
    if s.kind == "namespace":
        return _namespace.namespace_erased(er, raw.store_namespaces[0]) is None
    threads = raw.threads if s.kind == "subject" else (raw.thread_id,)
    return any(t is not None and t not in db.tombstoned for t in threads)


def _subject_spec(er: Eraser, s: _Scope, raw: _Raw, *, allow_empty: bool) -> Any:
    assert raw.subject is not None
    return _subject.subject_spec(
        er, raw.subject, raw.threads or (), None, raw.store_namespaces, (),
        None if raw.key is None else "commitments", raw.key,
        bool(s.scope.get("tombstone")), allow_empty,
    )  # fmt: skip


def _erase(er: Eraser, s: _Scope, raw: _Raw, *, allow_empty: bool) -> Receipt:
    """Re-erase the scope with the ordinary flow, naming the original receipt."""
    of = s.receipt_id
    tomb = bool(s.scope.get("tombstone"))
    if s.kind == "subject":
        spec = replace(_subject_spec(er, s, raw, allow_empty=allow_empty), replay_of=of)
        return _subject.erase_subject(er, spec, er.residue_scan)
    if s.kind == "namespace":
        request = _namespace.namespace_request(
            er, raw.store_namespaces[0], tombstone=tomb, allow_empty=allow_empty
        )
        return _namespace.erase_namespace(er, replace(request, replay_of=of), er.residue_scan)
    assert raw.thread_id is not None
    if s.kind == "history":
        request = _history.history_request(er, raw.thread_id, "latest", (), raw.store_namespaces)
    else:
        request = er.request(raw.thread_id, raw.store_namespaces, tomb, allow_empty)
    return er.erase(replace(request, replay_of=of), er.residue_scan)
