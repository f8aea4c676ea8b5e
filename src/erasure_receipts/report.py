"""The auditor's report: one self-contained HTML page, and its summary as JSON.

``receipt report SOURCE... --key PUB.pem -o report.html [--json]`` verifies every receipt
(files, directories, receipt logs) on the batch path the dashboard index uses
(:func:`erasure_receipts.index.verify_item`, forked workers for large archives) and
writes one HTML file that needs nothing else: no network, no external script, style
sheet or font (a Content-Security-Policy meta element allows only the page's own inline
style and script, by their SHA-256), charts as inline SVG. Receipts that did not verify
are listed first, with their reason; everything else on the page comes only from
receipts that verified.

Memory stays bounded for large archives: the summary is aggregated as results stream
in (per kind, per status, per week, per request), and each table keeps its first
``max_rows`` rows (the page says how many more there are; ``receipt index`` is the
full feed). Privacy-mode receipts show the commitments their scope carries, never an
id in clear; the requester is never shown.

A kind the report does not know (a receipt kind added after it) is shown generically:
its kind name, status, scope id and times, with its machine values.

Trusted time (``--tsa-cert``, RECEIPT_SPEC.md 10.7 and 10.9): for each receipt log
given, every stored RFC 3161 time-stamp is verified once, over the checkpoint text
rebuilt from the very entries the report reads (:func:`log_timestamps`); a receipt of
that log is then bounded by the earliest verified time-stamp that covers it
(``issued_no_later_than``, ``timestamp_size``), fails as ``issued_after_timestamp`` if
its ``issued_at`` is later, and a time-stamp that does not verify is reported once, as
a failure of the time evidence, while the receipts it covers stay verified.

Standard library only (``json``, ``hashlib``, ``base64``, ``html``); on the verify side.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from .errors import Error
from .explain import (
    CHECK_WORDS,
    KIND_WORDS,
    OUT_OF_SCOPE_WORDS,
    RESIDUE_WORDS,
    duration_words,
)
from .index import FIELDS, IndexItem, index_items, index_record, verify_item
from .receipt import OUT_OF_SCOPE, time_key
from .request import describe_basis, seconds_between
from .trust import TrustStore
from .verify import REASONS, VerifiedReceipt

if TYPE_CHECKING:
    from .timestamp import TsaTrust, VerifiedTimestamp

__all__ = [
    "DEFAULT_MAX_ROWS",
    "KNOWN_KINDS",
    "REPORT_TYPE",
    "LogTimes",
    "Report",
    "build_report",
    "content_security_policy",
    "duration_words",
    "log_timestamps",
    "render_html",
    "report_items",
    "report_row",
]

REPORT_TYPE = "erasure-receipts-report-v1"
DEFAULT_MAX_ROWS = 200
"""Rows each table of the page lists (the summary always counts every receipt)."""
KNOWN_KINDS = ("thread", "history", "subject", "namespace", "redaction", "deferral", "shred")
"""Kinds the report has words for; any other kind is shown generically."""

_KIND_WORDS = KIND_WORDS
_CHECK_WORDS = CHECK_WORDS
_RESIDUE_WORDS = RESIDUE_WORDS
_OUT_OF_SCOPE_WORDS = OUT_OF_SCOPE_WORDS
_REASON_WORDS = {code: meaning for code, _, meaning in REASONS}
_COLORS = {"thread": "#2b6cb0", "history": "#6b46c1", "subject": "#c05621",
           "namespace": "#2f855a", "redaction": "#b83280", "deferral": "#718096",
           "shred": "#285e61"}  # fmt: skip
_OTHER_COLORS = ("#2c7a7b", "#975a16", "#4a5568", "#9c4221")
_SLACK_BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("more than 30 days late", float("-inf"), -30 * 86400),
    ("8-30 days late", -30 * 86400, -7 * 86400),
    ("1-7 days late", -7 * 86400, -86400),
    ("up to 1 day late", -86400, 0),
    ("up to 1 day to spare", 0, 86400),
    ("1-7 days to spare", 86400, 7 * 86400),
    ("8-30 days to spare", 7 * 86400, 30 * 86400),
    ("more than 30 days to spare", 30 * 86400, float("inf")),
)
MAX_FAILED_SHOWN = 1000
MAX_WEEKS_SHOWN = 156


# -- one receipt --------------------------------------------------------------------------


def _generic_record(v: VerifiedReceipt, source: str, log_index: int | None) -> dict[str, Any]:
    """The index columns a receipt of a kind ``index_record`` cannot read still has."""
    p = v.statement.get("predicate", {})
    rec: dict[str, Any] = dict.fromkeys(FIELDS)
    request = v.request or {}
    scope = p.get("scope") if isinstance(p.get("scope"), dict) else {}
    rec.update(
        receipt_id=v.receipt_id, issued_at=v.issued_at, kind=str(p.get("kind", "thread")),
        status=v.status, scope_id=v.thread_id, privacy="privacy" in scope,
        pre_digest=v.pre_digest, key_id=v.key_id, key_name=v.key_name, source=source,
        log_index=log_index, request_id=request.get("id"), request_basis=request.get("basis"),
        request_received_at=request.get("received_at"), request_due_at=request.get("due"),
        approver=v.approver, sla_seconds=v.sla_seconds, replay_of=p.get("replay_of"),
    )  # fmt: skip
    return rec


def report_row(v: VerifiedReceipt, source: str, log_index: int | None = None) -> dict[str, Any]:
    """What the report keeps of one verified receipt: its index record (``FIELDS``) plus
    ``checks`` (``[name, result]``), ``out_of_scope`` (ids), ``residue_items``
    (``[action, status]``), ``needles_after``, ``deferral`` (a deferral's ``until``,
    ``basis``, ``code`` and retained kind), ``deferral_of`` and ``shred`` (a shred's
    ``key_scope``, ``threads`` and ``store_namespaces`` counts and its key store's
    ``backup_retention``). Plain data (it crosses process boundaries). A kind the index
    does not know still gives a row."""
    p = v.statement.get("predicate", {})
    try:
        row = index_record(v, source=source, log_index=log_index)
    except (KeyError, TypeError, AttributeError, IndexError):  # a kind added later
        row = _generic_record(v, source, log_index)
    row["checks"] = [
        [str(c.get("name")), str(c.get("result"))] for c in p.get("checks") or () if type(c) is dict
    ]
    row["out_of_scope"] = [str(o.get("id")) for o in p.get("out_of_scope") or () if type(o) is dict]
    row["residue_items"] = [[a, s] for a, s in v.residue]
    needles = p.get("needles")
    row["needles_after"] = needles.get("occurrences_after") if type(needles) is dict else None
    d = p.get("deferral")
    row["deferral"] = (
        {k: d[k] for k in ("until", "basis", "code", "of_kind") if type(d.get(k)) is str}
        if type(d) is dict
        else None
    )
    row["deferral_of"] = p.get("deferral_of") if type(p.get("deferral_of")) is str else None
    row["shred"] = None
    scope = p.get("scope")
    if p.get("kind") == "shred" and type(scope) is dict:  # RECEIPT_SPEC.md 9.16
        ks: dict[str, Any] = scope["key_store"] if type(scope.get("key_store")) is dict else {}
        retention = ks.get("backup_retention")
        row["shred"] = {
            "key_scope": str(scope.get("key_scope")),
            "threads": len(scope.get("threads") or ()),
            "store_namespaces": len(scope.get("store_namespaces") or ()),
            "backup_retention": retention if type(retention) is str else None,
        }
    return row


def _report_one(
    item: IndexItem, trust: TrustStore, times: dict[str, LogTimes] | None = None
) -> dict[str, Any]:
    got = verify_item(item, trust)
    if isinstance(got, dict):
        return {"failed": got}
    v, source, log_index = got
    try:
        row = report_row(v, source, log_index)
        if times is not None and log_index is not None:
            return _with_time(row, v.issued_at, times.get(item[1]), log_index)
        return {"row": row}
    except Exception as exc:  # a bug must not hide the other receipts
        return {"failed": {"source": source, "reason": "internal_error", "message": repr(exc)}}


# -- trusted time: RFC 3161 time-stamps of a log's checkpoints ----------------------------


class LogTimes:
    """The stored time-stamps of one receipt log, each verified once: ``verified``
    (``(size, VerifiedTimestamp)``, ascending size) and ``failed`` (``{"source", "size",
    "reason", "message"}``, one per time-stamp that does not verify)."""

    __slots__ = ("_sizes", "failed", "verified")

    def __init__(self, verified: list[tuple[int, VerifiedTimestamp]],
                 failed: list[dict[str, Any]]) -> None:  # fmt: skip
        self.verified, self.failed = verified, failed
        self._sizes = [s for s, _ in verified]

    def bound(self, index: int) -> tuple[int, VerifiedTimestamp] | None:
        """The earliest verified time-stamp of a checkpoint that covers entry ``index``
        (its size is above ``index``), or None."""
        from bisect import bisect_right

        k = bisect_right(self._sizes, index)
        return self.verified[k] if k < len(self.verified) else None


def log_timestamps(path: str, tsa: TsaTrust) -> LogTimes:
    """Verify every stored time-stamp of the receipt log at ``path`` once. The
    checkpoint text a token must be over is rebuilt from the log's committed entries -
    the bytes the report verifies as receipts - as ``origin\\n<size>\\n<base64 RFC 9162
    root of the first size entries>\\n`` (the signed checkpoint's own text when its size
    and root are those): a token that verifies over it proves that exactly these
    entries existed at its time. ``TimestampError`` reasons as
    :meth:`~erasure_receipts.timestamp.TsaTrust.verify`; a time-stamp of a size the log
    has no entries for is ``timestamp_mismatch``."""
    from .digest import EMPTY_ROOT, MerkleTree
    from .errors import TimestampError
    from .log import Checkpoint, ReceiptLog, read_entries
    from .signing import b64encode
    from .verify import _display

    log = ReceiptLog(path)
    sizes = log.timestamp_sizes()
    if not sizes:
        return LogTimes([], [])
    want = set(sizes)
    roots = {0: EMPTY_ROOT}
    tree = MerkleTree()
    for _, data in read_entries(path, limit=sizes[-1]):
        tree.append(data)
        if tree.size in want:
            roots[tree.size] = tree.root()
    cp = Checkpoint.parse(log.checkpoint()) if tree.size else None
    verified: list[tuple[int, VerifiedTimestamp]] = []
    failed: list[dict[str, Any]] = []
    for size in sizes:
        try:
            token = log.timestamp_token(size)
            if token is None:  # removed meanwhile
                continue
            root = roots.get(size)
            if root is None:
                raise TimestampError(
                    f"a time-stamp of checkpoint size {size}, but the log has "
                    f"{tree.size} committed entries",
                    reason="timestamp_mismatch",
                )
            if cp is not None and cp.size == size and cp.root == root:
                text = cp.text
            else:
                text = f"{log.origin}\n{size}\n{b64encode(root)}\n".encode()
            verified.append((size, tsa.verify(token, text)))
        except Error as exc:
            failed.append({"source": _display(path), "size": size, "reason": exc.reason,
                           "message": exc.message})  # fmt: skip
    return LogTimes(verified, failed)


def _with_time(
    row: dict[str, Any], issued_at: str, times: LogTimes | None, index: int
) -> dict[str, Any]:
    """A log receipt's row with its trusted time, or its failure if its ``issued_at`` is
    after the time-stamp that bounds it (``issued_after_timestamp``)."""
    from .errors import TimestampError
    from .timestamp import check_issued_at

    found = times.bound(index) if times is not None else None
    row["issued_no_later_than"] = found[1].issued_no_later_than if found else None
    row["timestamp_size"] = found[0] if found else None
    if found is not None:
        try:
            check_issued_at(issued_at, found[1], found[0])
        except TimestampError as exc:
            return {"failed": {"source": row["source"], "reason": exc.reason,
                               "message": exc.message, "issued_at": issued_at,
                               "issued_no_later_than": row["issued_no_later_than"],
                               "timestamp_size": found[0]}}  # fmt: skip
    return {"row": row}


def report_items(paths: Sequence[str], skip: Sequence[str] = ()) -> list[IndexItem]:
    """The receipts under ``paths``, found as ``receipt index`` finds them."""
    return index_items(paths, skip)


# -- the summary, aggregated as results stream in ----------------------------------------


def _week(t: str) -> str:
    from datetime import date

    y, w, _ = date(int(t[:4]), int(t[5:7]), int(t[8:10])).isocalendar()
    return f"{y:04d}-W{w:02d}"


def _is_erasure(row: dict[str, Any]) -> bool:
    return bool(row["kind"] != "deferral")


class Report:
    """The report's state: counts over every receipt (a verified receipt seen again, by
    its receipt id - the same receipt in an archive directory and a log - is counted
    once, under ``duplicates``), and the first ``max_rows`` rows of each table. Feed it
    :meth:`add` (the batch results, in order), then :meth:`summary` (the JSON document)
    or :func:`render_html`."""

    def __init__(
        self, *, max_rows: int = DEFAULT_MAX_ROWS, now: str | None = None,
        tsa: str | None = None,
    ) -> None:  # fmt: skip
        if now is None:
            from datetime import UTC, datetime

            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.now = now
        self.max_rows = max_rows
        self.total = self.verified = self.duplicates = 0
        self._seen: set[str] = set()
        self.failed: list[dict[str, Any]] = []
        self.failed_count = 0
        self.failed_by_reason: dict[str, int] = {}
        self.by_kind: dict[str, dict[str, int]] = {}
        self.kind_rows: dict[str, list[dict[str, Any]]] = {}
        self.rows_erased = self.bytes_erased = 0
        self.privacy = self.replays = 0
        self.weeks: dict[str, dict[str, int]] = {}
        self.slack = [0] * len(_SLACK_BUCKETS)
        self._tte_n = 0
        self._tte_sum = 0
        self._tte_max = 0
        self.requests: dict[str, list[Any]] = {}
        """request id -> [received_at, due, done_at, receipts, basis, first issued_at]"""
        self.deferrals: dict[str, str | None] = {}
        self.deferral_rows: list[dict[str, Any]] = []
        self.executed: set[str] = set()
        self.executed_by: dict[str, str] = {}
        """deferral receipt id -> the first erasure receipt naming it (deferral_of)"""
        self.tsa = tsa
        """With --tsa-cert: the trusted TSA's name (trusted time is checked and shown)."""
        self.timestamps_verified = 0
        self.timestamps_failed: list[dict[str, Any]] = []
        self.timed = 0
        """verified receipts bounded by a verified time-stamp (issued_no_later_than)"""

    def add_timestamps(self, times: LogTimes) -> None:
        """One log's time-stamps, verified (:func:`log_timestamps`)."""
        self.timestamps_verified += len(times.verified)
        self.timestamps_failed += times.failed

    def add(self, result: dict[str, Any]) -> None:
        """One result: ``{"row": report_row(...)}`` or ``{"failed": {source, reason,
        message}}``."""
        self.total += 1
        if "failed" in result:
            f = result["failed"]
            self.failed_count += 1
            self.failed_by_reason[f["reason"]] = self.failed_by_reason.get(f["reason"], 0) + 1
            if len(self.failed) < MAX_FAILED_SHOWN:
                self.failed.append(f)
            return
        row = result["row"]
        if row["receipt_id"] in self._seen:  # the same receipt in a directory and a log
            self.duplicates += 1
            return
        self._seen.add(row["receipt_id"])
        self.verified += 1
        if row.get("issued_no_later_than") is not None:
            self.timed += 1
        kind, status = str(row["kind"]), str(row["status"])
        per = self.by_kind.setdefault(kind, {})
        per[status] = per.get(status, 0) + 1
        rows = self.kind_rows.setdefault(kind, [])
        if len(rows) < self.max_rows:
            rows.append(row)
        if row["privacy"]:
            self.privacy += 1
        if row["replay_of"]:
            self.replays += 1
        if row["status"] == "erased":  # not rows rewritten (redacted) or retained
            self.rows_erased += row["rows"] or 0
            self.bytes_erased += row["bytes"] or 0
        week = self.weeks.setdefault(_week(row["issued_at"]), {})
        week[kind] = week.get(kind, 0) + 1
        if row["deferral"] is not None:
            self.deferrals[row["receipt_id"]] = row["deferral"].get("until")
        if row["deferral_of"]:
            self.executed.add(row["deferral_of"])
            self.executed_by.setdefault(row["deferral_of"], row["receipt_id"])
        self._add_request(row)

    def _add_request(self, row: dict[str, Any]) -> None:
        rid = row["request_id"]
        received, due, issued = row["request_received_at"], row["request_due_at"], row["issued_at"]
        if _is_erasure(row) and received is not None:
            s = seconds_between(received, issued)
            self._tte_n += 1
            self._tte_sum += s
            self._tte_max = max(self._tte_max, s)
        if _is_erasure(row) and due is not None:
            spare = seconds_between(issued, due)
            for i, (_, lo, hi) in enumerate(_SLACK_BUCKETS):
                if lo <= spare < hi:
                    self.slack[i] += 1
                    break
        if rid is None:
            return
        r = self.requests.get(rid)
        if r is None:
            r = self.requests[rid] = [received, due, None, 0, row["request_basis"], issued]
        r[3] += 1
        if r[0] is None:
            r[0] = received
        if r[1] is None:
            r[1] = due
        # a replay repeats an erasure, and a deferral retains: neither completes a request
        done = _is_erasure(row) and not row["replay_of"]
        if done and (r[2] is None or time_key(issued) > time_key(r[2])):
            r[2] = issued

    def request_state(self, r: list[Any]) -> str:
        """``met`` (erased by its due date), ``late``, ``open`` (nothing erased yet: e.g.
        only a decision to retain) or ``no_due_date`` (erased; the request had no due)."""
        done, due = r[2], r[1]
        if done is None:
            return "open"
        if due is None:
            return "no_due_date"
        return "met" if time_key(done) <= time_key(due) else "late"

    def request_counts(self) -> dict[str, int]:
        """How many requests are in each state, and how many were received."""
        counts = {"received": len(self.requests), "met": 0, "late": 0, "open": 0,
                  "no_due_date": 0, "open_overdue": 0}  # fmt: skip
        now = time_key(self.now)
        for r in self.requests.values():
            state = self.request_state(r)
            counts[state] += 1
            if state == "open" and r[1] is not None and time_key(r[1]) < now:
                counts["open_overdue"] += 1
        return counts

    def deferral_counts(self) -> dict[str, int]:
        """Decisions to retain: ``open`` (no erasure names them yet), ``executed``, and
        ``open_past_until`` (still open although their end date has passed)."""
        now = time_key(self.now)
        executed = sum(1 for d in self.deferrals if d in self.executed)
        past = sum(
            1
            for d, until in self.deferrals.items()
            if d not in self.executed and until is not None and time_key(until) < now
        )
        return {"total": len(self.deferrals), "open": len(self.deferrals) - executed,
                "executed": executed, "open_past_until": past}  # fmt: skip

    def time_counts(self) -> dict[str, Any]:
        """With --tsa-cert: the trusted TSA, its time-stamps verified and failed (each
        failure listed), and the verified receipts with and without trusted time and
        those failed as ``issued_after_timestamp``."""
        return {
            "tsa": self.tsa,
            "timestamps": {"verified": self.timestamps_verified,
                           "failed": len(self.timestamps_failed)},
            "failed_timestamps": [dict(f) for f in self.timestamps_failed],
            "receipts_with_trusted_time": self.timed,
            "receipts_without_trusted_time": self.verified - self.timed,
            "issued_after_timestamp": self.failed_by_reason.get("issued_after_timestamp", 0),
        }  # fmt: skip

    def summary(self) -> dict[str, Any]:
        """The summary as one JSON document (schemas/report.schema.json); ``trusted_time``
        only with --tsa-cert."""
        weeks = sorted(self.weeks.items())
        doc = {
            "report_type": REPORT_TYPE,
            "generated_at": self.now,
            "receipts": {
                "total": self.total,
                "verified": self.verified,
                "failed": self.failed_count,
                "duplicates": self.duplicates,
            },
            "failed_by_reason": dict(sorted(self.failed_by_reason.items())),
            "failed": [dict(f) for f in self.failed],
            "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(self.by_kind.items())},
            "rows_erased": self.rows_erased,
            "bytes_erased": self.bytes_erased,
            "privacy_mode": self.privacy,
            "replays": self.replays,
            "requests": self.request_counts(),
            "deferrals": self.deferral_counts(),
            "time_to_erasure": {
                "receipts": self._tte_n,
                "mean_seconds": self._tte_sum // self._tte_n if self._tte_n else None,
                "max_seconds": self._tte_max if self._tte_n else None,
            },
            "days_to_spare": [
                {"bucket": name, "receipts": n}
                for (name, _, _), n in zip(_SLACK_BUCKETS, self.slack, strict=True)
            ],
            "weeks": [{"week": w, "by_kind": dict(sorted(k.items()))} for w, k in weeks],
            "rows_shown_per_table": self.max_rows,
        }
        if self.tsa is not None:
            doc["trusted_time"] = self.time_counts()
        return doc


def build_report(
    items: Sequence[IndexItem],
    trust: TrustStore,
    *,
    jobs: int = 1,
    max_rows: int = DEFAULT_MAX_ROWS,
    now: str | None = None,
    progress: Callable[[int], None] | None = None,
    tsa: TsaTrust | None = None,
) -> Report:
    """Verify ``items`` (in ``jobs`` forked processes from ``PARALLEL_MIN`` items on, as
    ``receipt verify`` and ``receipt index`` do) and aggregate the report. ``progress``
    is called with the number of receipts done. With ``tsa``, each receipt log's
    time-stamps are verified once, before the receipts (:func:`log_timestamps`), and
    each receipt of a log carries its trusted time."""
    import gc

    from ._batch import BATCH, PARALLEL_MIN, fork_map

    rep = Report(max_rows=max_rows, now=now, tsa=tsa.name if tsa is not None else None)
    times: dict[str, LogTimes] | None = None
    if tsa is not None:
        times = {}
        for it in items:
            if it[0] == "log" and it[1] not in times:
                try:
                    times[it[1]] = log_timestamps(it[1], tsa)
                except Error as exc:  # its time-stamps cannot be read: no trusted time
                    from .verify import _display

                    times[it[1]] = LogTimes([], [{"source": _display(it[1]), "size": None,
                                                  "reason": exc.reason,
                                                  "message": exc.message}])  # fmt: skip
                rep.add_timestamps(times[it[1]])
    collect = len(items) >= BATCH and gc.isenabled()
    if len(items) >= BATCH:
        from .canonical import use_orjson

        use_orjson()
        gc.disable()  # as receipt verify: the results are acyclic, freed by reference counts
    try:
        results: Iterable[dict[str, Any]]
        if jobs > 1 and len(items) >= PARALLEL_MIN:
            results = fork_map(lambda it: _report_one(it, trust, times), items, jobs)
        else:
            results = (_report_one(it, trust, times) for it in items)
        for n, res in enumerate(results, 1):
            rep.add(res)
            if progress is not None:
                progress(n)
    finally:
        if collect:
            gc.enable()
    return rep


# -- words --------------------------------------------------------------------------------


def _n(x: int) -> str:
    return f"{x:,}"


def _bytes_words(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} byte{'s' * (n != 1)}"


def _is_commitment(v: Any) -> bool:
    return type(v) is str and v.startswith("hmac-sha256:")


def _id_html(v: Any) -> str:
    """An id as HTML: a commitment shortened (its full value in the title and the
    machine values), anything else escaped."""
    if v is None:
        return '<span class="muted">-</span>'
    if _is_commitment(v):
        return (
            f'<span class="commit" title="{escape(v)}">commitment {escape(v[12:24])}&hellip;</span>'
        )
    text = str(v)
    cls = ' class="nw"' if len(text) <= 40 else ""  # a short id on one line
    return f"<code{cls}>{escape(text)}</code>"


def kind_words(kind: str) -> str:
    """A kind in plain words (a kind the report does not know is named as such)."""
    return _KIND_WORDS.get(kind, f"{kind} (a receipt kind this report does not describe)")


def _basis_words(basis: str | None) -> str:
    if basis is None:
        return ""
    d = describe_basis(basis)
    return escape(d) if d else f"free text: {escape(basis)}"


def _when(t: str | None) -> str:
    """A receipt time for people (``2026-11-29 12:00 UTC``); the exact value in the title."""
    if t is None:
        return '<span class="muted">-</span>'
    e = escape(t)
    return f'<time datetime="{e}" title="{e}">{e[:10]} {e[11:16]} UTC</time>'


def _fold(head: str, items: Sequence[str]) -> str:
    """A one-line head; the items one click away."""
    if not items:
        return head
    lis = "".join(f"<li>{i}</li>" for i in items)
    return f"<details><summary>{head}</summary><ul>{lis}</ul></details>"


def _checks_words(row: dict[str, Any]) -> str:
    checks = row.get("checks") or []
    passed = sum(1 for _, r in checks if r == "pass")
    head = f"{passed} of {len(checks)} checks passed" if checks else "no checks recorded"
    if checks and passed < len(checks):
        head = f'<span class="bad">{head}</span>'
    items = [f"{escape(_CHECK_WORDS.get(n, n))}: {escape(r)}" for n, r in checks]
    if row.get("needles_checked"):
        found = row.get("needles_after")
        text = "none found" if found == 0 else f"{found} found"
        head += f"; erased values searched for: {text}"
        items.append(f"searched the {escape(str(row.get('needles_searched')))} for the "
                     f"erased values: {text}")  # fmt: skip
    return _fold(head, items)


def _residue_words(row: dict[str, Any]) -> str:
    items = row.get("residue_items") or []
    if not items:
        return '<span class="muted">none recorded</span>'
    done = sum(1 for _, st in items if st in ("applied", "not_applicable"))
    worst = str(row.get("residue_worst"))
    cls = {"failed": "bad", "partial": "warn"}.get(worst, "")
    head = f'<span class="{cls}">{done} of {len(items)} clean-up steps done</span>'
    return _fold(head, [f"{escape(a)}: {escape(_RESIDUE_WORDS.get(st, st))}" for a, st in items])


def _out_of_scope_words(row: dict[str, Any]) -> str:
    ids = row.get("out_of_scope") or []
    if not ids:
        return '<span class="muted">-</span>'
    return _fold(
        f"{len(ids)} exclusions",
        [escape(_OUT_OF_SCOPE_WORDS.get(i, i)) for i in ids],
    )


# -- HTML ---------------------------------------------------------------------------------

_CSS = """
:root{--bad:#c53030;--warn:#b7791f;--ok:#2f855a;--muted:#718096;--line:#e2e8f0}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1a202c;
margin:0;background:#f7fafc}
header{background:#1a365d;color:#fff;padding:20px 32px}
header h1{margin:0 0 4px;font-size:24px}
header p{margin:0;opacity:.85}
main{padding:16px 32px 48px;max-width:1400px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;
margin:16px 0}
h2{font-size:19px;margin:0 0 10px}
.alert{border:2px solid var(--bad);background:#fff5f5}
.alert h2{color:var(--bad)}
.reasons{columns:3 260px;margin:0 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0 16px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:26px}
.card.bad b{color:var(--bad)}.card.ok b{color:var(--ok)}.card.warn b{color:var(--warn)}
table{border-collapse:collapse;width:100%;font-size:13.5px}
th,td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left;vertical-align:top}
th{background:#edf2f7;position:sticky;top:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
ul{margin:2px 0 0;padding-left:18px}
td ul{font-size:12.5px;color:#4a5568}
code{font:12.5px ui-monospace,Menlo,Consolas,monospace;overflow-wrap:break-word}
code.rid,td.path code{word-break:break-all}
time,td.when,code.nw{white-space:nowrap}
td details summary{color:inherit}
td details ul{margin-top:4px}
.commit{font:12.5px ui-monospace,Menlo,Consolas,monospace;color:#553c9a}
.muted{color:var(--muted)}
.bad{color:var(--bad);font-weight:600}.warn{color:var(--warn);font-weight:600}
.ok{color:var(--ok);font-weight:600}
details pre{white-space:pre-wrap;word-break:break-all;font-size:12px;background:#f7fafc;
padding:8px;border:1px solid var(--line);max-width:520px}
summary{cursor:pointer;color:#2b6cb0}
.charts{display:flex;flex-wrap:wrap;gap:24px}
.chart{flex:1 1 520px}
.chart h3{font-size:15px;margin:0 0 6px}
svg text{font:11px system-ui,sans-serif;fill:#4a5568}
.legend{font-size:12.5px;margin:4px 0}
.legend span{display:inline-block;margin-right:14px}
.legend svg{vertical-align:middle}
.more{color:var(--muted);font-style:italic;margin:8px 0 0}
#filter{padding:6px 10px;width:320px;max-width:100%;border:1px solid #a0aec0;border-radius:6px}
footer{color:var(--muted);font-size:13px;padding:0 32px 32px;max-width:1400px}
@media print{th{position:static}details{display:none}#filterbox{display:none}}
"""

_SCRIPT = """
(function(){document.documentElement.setAttribute('data-script','ran');
var q=document.getElementById('filter');if(!q)return;
q.addEventListener('input',function(){var t=q.value.toLowerCase();
var rows=document.querySelectorAll('tbody.rows tr');
for(var i=0;i<rows.length;i++){var r=rows[i];
r.hidden=t!==''&&r.textContent.toLowerCase().indexOf(t)<0;}});})();
"""


def _sha256_b64(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def content_security_policy() -> str:
    """The page's policy: nothing from anywhere, except its own inline style sheet and
    script (by their SHA-256)."""
    return (
        "default-src 'none'; "
        f"style-src 'sha256-{_sha256_b64(_CSS)}'; "
        f"script-src 'sha256-{_sha256_b64(_SCRIPT)}'; "
        "base-uri 'none'; form-action 'none'"
    )


def _kind_color(kind: str, others: dict[str, str]) -> str:
    if kind in _COLORS:
        return _COLORS[kind]
    if kind not in others:
        others[kind] = _OTHER_COLORS[len(others) % len(_OTHER_COLORS)]
    return others[kind]


def _legend(kinds: Sequence[str], colors: dict[str, str]) -> str:
    spans = "".join(
        f'<span><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" '
        f'fill="{colors[k]}"/></svg> {escape(k)}</span>'
        for k in kinds
    )
    return f'<div class="legend">{spans}</div>'


def _weekly_chart(rep: Report) -> str:
    """Stacked bars: receipts per ISO week (of issued_at), by kind."""
    weeks = sorted(rep.weeks.items())
    if not weeks:
        return '<p class="muted">No verified receipts.</p>'
    note = ""
    if len(weeks) > MAX_WEEKS_SHOWN:
        note = f'<p class="more">The last {MAX_WEEKS_SHOWN} of {len(weeks)} weeks are drawn.</p>'
        weeks = weeks[-MAX_WEEKS_SHOWN:]
    others: dict[str, str] = {}
    kinds = sorted({k for _, per in weeks for k in per})
    colors = {k: _kind_color(k, others) for k in kinds}
    top = max(sum(per.values()) for _, per in weeks)
    w, h, left, bottom = 640, 220, 44, 34
    bw = min((w - left - 8) / len(weeks), 60.0)
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" '
        'aria-label="Receipts per week by kind">',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - 4}" y2="{h - bottom}" stroke="#a0aec0"/>',
        f'<text x="{left - 6}" y="14" text-anchor="end">{_n(top)}</text>',
        f'<text x="{left - 6}" y="{h - bottom}" text-anchor="end">0</text>',
    ]
    scale = (h - bottom - 10) / top
    label_every = max(1, len(weeks) // 8)
    for i, (week, per) in enumerate(weeks):
        x = left + i * bw
        y = float(h - bottom)
        for k in kinds:
            c = per.get(k, 0)
            if not c:
                continue
            bh = c * scale
            y -= bh
            parts.append(
                f'<rect x="{x + bw * 0.1:.1f}" y="{y:.1f}" width="{max(bw * 0.8, 1):.1f}" '
                f'height="{bh:.1f}" fill="{colors[k]}"><title>{escape(week)}: {_n(c)} '
                f"{escape(k)}</title></rect>"
            )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{h - bottom + 14}" text-anchor="middle">'
                f"{escape(week)}</text>"
            )
    parts.append("</svg>")
    return _legend(kinds, colors) + "".join(parts) + note


def _slack_chart(rep: Report) -> str:
    """Receipts with a due date, by days to spare at erasure (negative: late)."""
    total = sum(rep.slack)
    if not total:
        return '<p class="muted">No verified erasure names a request with a due date.</p>'
    w, h, left, bottom = 640, 220, 44, 48
    n = len(_SLACK_BUCKETS)
    bw = (w - left - 8) / n
    top = max(rep.slack)
    scale = (h - bottom - 40) / top
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" '
        'aria-label="Time to erasure against the due date">',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - 4}" y2="{h - bottom}" stroke="#a0aec0"/>',
    ]
    for i, ((name, lo, _), c) in enumerate(zip(_SLACK_BUCKETS, rep.slack, strict=True)):
        x = left + i * bw
        bh = c * scale
        color = "#c53030" if lo < 0 else "#2f855a"
        parts.append(
            f'<rect x="{x + bw * 0.12:.1f}" y="{h - bottom - bh:.1f}" width="{bw * 0.76:.1f}" '
            f'height="{bh:.1f}" fill="{color}"><title>{escape(name)}: {_n(c)}</title></rect>'
            f'<text x="{x + bw / 2:.1f}" y="{h - bottom - bh - 4:.1f}" text-anchor="middle">'
            f"{_n(c)}</text>"
        )
        words = name.replace(" to spare", "").replace(" late", "").replace(" days", " d")
        words = words.replace("more than ", "> ").replace("up to ", "< ").replace(" day", " d")
        parts.append(
            f'<text x="{x + bw / 2:.1f}" y="{h - bottom + 14}" text-anchor="middle">'
            f"{escape(words)}</text>"
        )
    mid = left + (n // 2) * bw
    parts.append(
        f'<line x1="{mid:.1f}" y1="16" x2="{mid:.1f}" y2="{h - bottom + 4}" stroke="#1a202c" '
        'stroke-dasharray="4 3"/>'
        f'<text x="{mid:.1f}" y="11" text-anchor="middle">due date</text>'
        f'<text x="{left + (mid - left) / 2:.1f}" y="{h - bottom + 32}" text-anchor="middle" '
        'fill="#c53030">&#8592; erased late (days after the due date)</text>'
        f'<text x="{mid + (w - mid) / 2:.1f}" y="{h - bottom + 32}" text-anchor="middle" '
        'fill="#2f855a">on time (days to spare) &#8594;</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


FAILED_OPEN = 10
"""Failed receipts listed open; the rest of the list is one click away."""


def _failed_table(failed: Sequence[dict[str, Any]]) -> str:
    rows = "".join(
        f'<tr><td class="path"><code>{escape(f["source"])}</code></td>'
        f"<td><code>{escape(f['reason'])}</code>"
        f"</td><td>{escape(_REASON_WORDS.get(f['reason'], f['reason']))}</td>"
        f"<td>{escape(f['message'])}</td></tr>"
        for f in failed
    )
    return (
        "<table><thead><tr><th>File</th><th>Reason</th><th>What it means</th>"
        f'<th>Detail</th></tr></thead><tbody class="rows">{rows}</tbody></table>'
    )


def _failed_section(rep: Report) -> str:
    if not rep.failed_count:
        return ""
    table = _failed_table(rep.failed[:FAILED_OPEN])
    if len(rep.failed) > FAILED_OPEN:
        table += (
            f"<details><summary>show the other {_n(len(rep.failed) - FAILED_OPEN)} listed "
            f"failures</summary>{_failed_table(rep.failed[FAILED_OPEN:])}</details>"
        )
    more = ""
    if rep.failed_count > len(rep.failed):
        more = (
            f'<p class="more">{_n(rep.failed_count - len(rep.failed))} more failed receipts '
            "are counted but not listed (see the counts by reason).</p>"
        )
    by_reason = "".join(
        f"<li><code>{escape(k)}</code> ({escape(_REASON_WORDS.get(k, k))}): {_n(v)}</li>"
        for k, v in sorted(rep.failed_by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return (
        '<section id="failed" class="alert">'
        f"<h2>{_n(rep.failed_count)} receipt{'s' * (rep.failed_count != 1)} did NOT verify</h2>"
        "<p>Nothing else on this page is taken from these files: they were tampered with, "
        "signed by a key you do not trust, malformed, or unreadable.</p>"
        f'<ul class="reasons">{by_reason}</ul>{table}{more}</section>'
    )


def _timestamps_section(rep: Report) -> str:
    """Time-stamps that did not verify: once each, as a failure of the time evidence."""
    failed = rep.timestamps_failed
    if not failed:
        return ""
    rows = "".join(
        f'<tr><td class="path"><code>{escape(f["source"])}</code></td>'
        f'<td class="num">{_n(f["size"]) if f["size"] is not None else "-"}</td>'
        f"<td><code>{escape(f['reason'])}</code></td>"
        f"<td>{escape(_REASON_WORDS.get(f['reason'], f['reason']))}</td>"
        f"<td>{escape(f['message'])}</td></tr>"
        for f in failed
    )
    n = len(failed)
    return (
        '<section id="failed-timestamps" class="alert">'
        f"<h2>{_n(n)} RFC 3161 time-stamp{'s' * (n != 1)} did NOT verify</h2>"
        f"<p>Checked against the trusted TSA {escape(str(rep.tsa))}. The receipts of these "
        "checkpoints still verified and are listed below, but these time-stamps give them no "
        "trusted time: such a receipt shows only its issuer's clock, or the bound of a later "
        "time-stamp of the same log that did verify.</p>"
        '<table><thead><tr><th>Log</th><th class="num">Checkpoint size</th><th>Reason</th>'
        "<th>What it means</th><th>Detail</th></tr></thead>"
        f'<tbody class="rows">{rows}</tbody></table></section>'
    )


def _card(value: int | str, label: str, cls: str = "") -> str:
    v = _n(value) if isinstance(value, int) else escape(value)
    return f'<div class="card {cls}"><b>{v}</b>{escape(label)}</div>'


def _summary_section(rep: Report) -> str:
    req = rep.request_counts()
    dfr = rep.deferral_counts()
    cards = [
        _card(rep.verified, "receipts verified", "ok"),
        _card(rep.failed_count, "receipts failed verification", "bad" if rep.failed_count else ""),
        _card(req["received"], "requests received"),
        _card(req["met"], "requests met by their due date", "ok"),
        _card(req["late"], "requests erased late", "bad" if req["late"] else ""),
        _card(req["open"], "requests open (nothing erased yet)", "warn" if req["open"] else ""),
    ]
    if req["no_due_date"]:
        cards.append(_card(req["no_due_date"], "requests erased, no due date"))
    if dfr["total"]:
        cards.append(_card(dfr["open"], "decisions to retain still open", "warn"))
        cards.append(_card(dfr["executed"], "decisions to retain carried out"))
    cards.append(_card(_bytes_words(rep.bytes_erased), f"erased in {_n(rep.rows_erased)} rows"))
    if rep.tsa is not None:
        tc = rep.time_counts()
        cards.append(_card(tc["receipts_with_trusted_time"],
                           "receipts with trusted time (RFC 3161)", "ok"))  # fmt: skip
        late = tc["issued_after_timestamp"]
        cards.append(_card(late, "receipts dated after their time-stamp", "bad" if late else ""))
    statuses = sorted({s for per in rep.by_kind.values() for s in per})
    head = "".join(f'<th class="num">{escape(s)}</th>' for s in statuses)
    body = "".join(
        f"<tr><td>{escape(kind_words(k))} <code>{escape(k)}</code></td>"
        + "".join(f'<td class="num">{_n(per.get(s, 0))}</td>' for s in statuses)
        + f'<td class="num">{_n(sum(per.values()))}</td></tr>'
        for k, per in sorted(rep.by_kind.items())
    )
    notes = []
    if rep.privacy:
        notes.append(
            f"{_n(rep.privacy)} receipt(s) are in privacy mode: they name threads and "
            "subjects only by keyed commitments, and so does this report."
        )
    if rep.replays:
        notes.append(
            f"{_n(rep.replays)} receipt(s) repeat an earlier erasure after a restore (replays)."
        )
    if req["open_overdue"]:
        notes.append(f"{_n(req['open_overdue'])} open request(s) are past their due date.")
    if dfr["open_past_until"]:
        notes.append(
            f"{_n(dfr['open_past_until'])} decision(s) to retain are past their end date "
            "and no erasure carrying them out was found."
        )
    if rep.tsa is not None:
        tc = rep.time_counts()
        notes.append(
            f"Trusted time: the receipt logs' RFC 3161 time-stamps were checked against the "
            f"TSA {rep.tsa}: {_n(tc['timestamps']['verified'])} verified, "
            f"{_n(tc['timestamps']['failed'])} did not. "
            f"{_n(tc['receipts_with_trusted_time'])} verified receipt(s) were issued no later "
            "than a verified time-stamp; "
            f"{_n(tc['receipts_without_trusted_time'])} have only their issuer's clock."
        )
    note_html = "".join(f"<p>{escape(t)}</p>" for t in notes)
    return (
        '<section id="summary"><h2>Summary</h2>'
        f'<div class="cards">{"".join(cards)}</div>'
        "<table><thead><tr><th>Kind</th>"
        f'{head}<th class="num">total</th></tr></thead><tbody>{body}</tbody></table>'
        f"{note_html}</section>"
    )


def _charts_section(rep: Report) -> str:
    return (
        '<section id="charts"><h2>Charts</h2><div class="charts">'
        '<div class="chart"><h3>Receipts per week, by kind</h3>'
        f"{_weekly_chart(rep)}</div>"
        '<div class="chart"><h3>Time to erasure against the due date (receipts with a due '
        f"date)</h3>{_slack_chart(rep)}</div></div></section>"
    )


def _state_html(state: str) -> str:
    words = {"met": ("ok", "met by due date"), "late": ("bad", "LATE"),
             "open": ("warn", "open"), "no_due_date": ("", "erased (no due date)")}  # fmt: skip
    cls, text = words.get(state, ("", state))
    return f'<span class="{cls}">{escape(text)}</span>'


def _requests_section(rep: Report) -> str:
    if not rep.requests:
        return (
            '<section id="requests"><h2>Requests</h2><p class="muted">No verified receipt '
            "names a request.</p></section>"
        )
    order = {"late": 0, "open": 1, "met": 2, "no_due_date": 3}
    shown: list[tuple[int, str, list[Any]]] = []
    # Worst first, bounded: the max_rows worst requests (late, open, then the rest).
    for rid, r in rep.requests.items():
        shown.append((order[rep.request_state(r)], rid, r))
        if len(shown) > 4 * rep.max_rows:
            shown.sort(key=lambda t: (t[0], time_key(t[2][5])))
            del shown[rep.max_rows :]
    shown.sort(key=lambda t: (t[0], time_key(t[2][5])))
    more = len(rep.requests) - min(len(shown), rep.max_rows)
    rows = []
    for _, rid, r in shown[: rep.max_rows]:
        received, due, done, n, basis, _ = r
        tte = duration_words(seconds_between(received, done)) if received and done else "-"
        rows.append(
            f"<tr><td>{_id_html(rid)}</td><td>{_basis_words(basis)}</td>"
            f"<td>{_when(received)}</td><td>{_when(due)}</td>"
            f"<td>{_when(done)}</td><td>{escape(tte)}</td>"
            f'<td>{_state_html(rep.request_state(r))}</td><td class="num">{n}</td></tr>'
        )
    tail = (
        f'<p class="more">{_n(more)} more requests are counted in the summary but not listed.</p>'
        if more > 0
        else ""
    )
    return (
        '<section id="requests"><h2>Requests</h2>'
        "<table><thead><tr><th>Request</th><th>Legal basis</th><th>Received</th><th>Due</th>"
        "<th>Erased at</th><th>Time to erasure</th><th>Outcome</th>"
        '<th class="num">Receipts</th></tr></thead>'
        f'<tbody class="rows">{"".join(rows)}</tbody></table>{tail}</section>'
    )


def _scope_html(row: dict[str, Any]) -> str:
    kind = row["kind"]
    sid = _id_html(row.get("scope_id"))
    if kind == "subject":
        threads = row.get("threads")
        extra = f" ({threads} thread{'s' * (threads != 1)})" if threads is not None else ""
        return f"subject {sid}{extra}"
    if kind in ("thread", "history", "redaction"):
        return f"thread {sid}"
    if kind == "namespace":
        return f"namespace {sid}"
    if kind == "deferral":
        of = (row.get("deferral") or {}).get("of_kind")
        if of == "subject":
            threads = row.get("threads")
            extra = f" ({threads} thread{'s' * (threads != 1)})" if threads is not None else ""
            return f"retains subject {sid}{extra}"
        if of == "history":
            return f"retains the history of thread {sid}"
        return f"retains thread {sid}"
    if kind == "shred":
        whose = "subject" if (row.get("shred") or {}).get("key_scope") == "subject" else "thread"
        return f"data key of {whose} {sid}"
    return sid


def _machine(row: dict[str, Any]) -> str:
    text = json.dumps(row, indent=1, ensure_ascii=False, sort_keys=False)
    return f"<details><summary>machine values</summary><pre>{escape(text)}</pre></details>"


def _when_erased(row: dict[str, Any]) -> list[str]:
    """An erasure's times: received, due, erased, how long it took, on time or late."""
    received, due, issued = row["request_received_at"], row["request_due_at"], row["issued_at"]
    verb = {"shred": "key destroyed", "redaction": "redacted"}.get(row["kind"], "erased")
    when = [f"{verb} {_when(issued)}"]
    if received is not None:
        when.insert(0, f"received {_when(received)}")
        when.append(f"took {escape(duration_words(seconds_between(received, issued)))}")
    if due is not None:
        when.insert(1 if received is not None else 0, f"due {_when(due)}")
        if time_key(issued) <= time_key(due):
            when.append('<span class="ok">on time</span>')
        else:
            late = duration_words(seconds_between(due, issued))
            when.append(f'<span class="bad">late by {escape(late)}</span>')
    return when


def _deferral_state(row: dict[str, Any], rep: Report | None) -> str:
    """A decision to retain's state, as far as the report's receipts show it."""
    if rep is None:
        return ""
    by = rep.executed_by.get(row["receipt_id"])
    if by is not None:
        return (
            '<span class="ok">carried out</span>: erasure receipt '
            f'<code class="rid">{escape(by)}</code> names it'
        )
    until = (row.get("deferral") or {}).get("until")
    if until is not None and time_key(until) < time_key(rep.now):
        return (
            '<span class="warn">open, past its end date</span>: no erasure among these '
            "receipts names it"
        )
    return '<span class="warn">open</span>: no erasure among these receipts names it'


def _when_retained(row: dict[str, Any], rep: Report | None) -> list[str]:
    """A decision to retain's times: received, due, retained since, until, its state."""
    received, due = row["request_received_at"], row["request_due_at"]
    d = row.get("deferral") or {}
    when = [f"retained since {_when(row['issued_at'])}", f"until {_when(d.get('until'))}"]
    if due is not None:
        when.insert(0, f"due {_when(due)} (nothing erased)")
    if received is not None:
        when.insert(0, f"received {_when(received)}")
    state = _deferral_state(row, rep)
    if state:
        when.append(state)
    return when


def _shred_words(row: dict[str, Any]) -> str:
    """What a shred covers and its condition (RECEIPT_SPEC.md 9.16)."""
    sh = row.get("shred") or {}
    n = row.get("rows")
    text = "data key destroyed"
    if n is not None:
        text += f" ({_n(n)} key-store row{'s' * (n != 1)} deleted)"
    if sh:
        t, ns = sh.get("threads", 0), sh.get("store_namespaces", 0)
        text += f"; covers {_n(t)} thread{'s' * (t != 1)}"
        if ns:
            text += f" and {_n(ns)} store namespace{'s' * (ns != 1)}"
    retention = sh.get("backup_retention")
    kept = (
        f"the key store's backups (kept {escape(retention)}) must have expired"
        if retention is not None
        else "the key store's backup retention is not stated"
    )
    return (
        f"{text}: their rows stay, as ciphertext (in the database and its backups), "
        f"unreadable only provided no copy of the key survives - {kept}"
    )


def _trusted_time(row: dict[str, Any]) -> str:
    """A log receipt's trusted time (with --tsa-cert), beside its self-asserted one."""
    bound = row["issued_no_later_than"]
    if bound is None:
        return '<span class="muted">no verified time-stamp of the log covers it yet</span>'
    return (
        f"issued no later than {_when(bound)}<br>(RFC 3161 time-stamp of log checkpoint "
        f"{_n(row['timestamp_size'])})"
    )


def _receipt_row(row: dict[str, Any], rep: Report | None = None) -> str:
    d = row.get("deferral")
    when = _when_retained(row, rep) if d is not None else _when_erased(row)
    if "issued_no_later_than" in row:
        # the line of its own time (issued_at) follows the received and due lines, if any
        own = (row["request_received_at"] is not None) + (row["request_due_at"] is not None)
        when[own] += " (issuer's clock)"
        when.append(_trusted_time(row))
    req = '<span class="muted">none</span>'
    if row["request_id"] is not None:
        req = f"{_id_html(row['request_id'])}<br>{_basis_words(row['request_basis'])}"
        if row.get("approver"):
            req += f"<br>approved by {escape(str(row['approver']))}"
    size = '<span class="muted">-</span>'
    if row.get("rows") is not None:
        n = row["rows"]
        size = f"{_n(n)} row{'s' * (n != 1)}, {_bytes_words(row['bytes'] or 0)}"
        if row.get("kept_leaves") is not None:
            kept = row["kept_leaves"]
            size += f"; {_n(kept)} row{'s' * (kept != 1)} kept"
    if row["status"] == "redacted" and row.get("rows") is not None:
        n = row["rows"]
        size = f"{_n(n)} row{'s' * (n != 1)} rewritten, none deleted"
        if row.get("checkpoints_kept") is not None:
            size += f"; {_n(row['checkpoints_kept'])} checkpoints kept"
    if row.get("targets"):
        names = ", ".join(f"<code>{escape(t)}</code>" for t in str(row["targets"]).split(";"))
        size += f"<br>with targets {names}"
        if row.get("rows_targets") is not None:
            n = row["rows_targets"]
            size += f" ({_n(n)} row{'s' * (n != 1)})"
    if d is not None:
        n = row.get("rows")
        rows = f"{_n(n)} row{'s' * (n != 1)}, " if n is not None else ""
        size = f"{rows}retained (nothing deleted) until {_when(d.get('until'))}"
        if d.get("basis"):
            size += f"<br>basis: {escape(d['basis'])}"
        if d.get("code"):
            size += f" (code <code>{escape(d['code'])}</code>)"
    if row["kind"] == "shred":
        size = _shred_words(row)
    what = f"{_scope_html(row)}<br>{escape(str(row['status']))}"
    if row.get("replay_of"):
        what += f"<br>replay of {_id_html(row['replay_of'])}"
    if row.get("deferral_of"):
        what += f"<br>carries out deferral {_id_html(row['deferral_of'])}"
    rid = escape(row["receipt_id"])
    what += f'<br><span class="muted">receipt</span> <code class="rid">{rid}</code>'
    return (
        f"<tr><td>{what}</td><td>{req}</td>"
        f'<td class="when">{"<br>".join(when)}</td><td>{size}</td>'
        f"<td>{_checks_words(row)}</td><td>{_residue_words(row)}</td>"
        f"<td>{_out_of_scope_words(row)}</td><td>{_machine(row)}</td></tr>"
    )


def _kind_section(rep: Report, kind: str) -> str:
    rows = rep.kind_rows.get(kind, [])
    total = sum(rep.by_kind.get(kind, {}).values())
    more = total - len(rows)
    tail = (
        f'<p class="more">The first {_n(len(rows))} of {_n(total)} receipts are listed; all '
        "are counted in the summary (<code>receipt index</code> lists every one).</p>"
        if more > 0
        else ""
    )
    anchor = "".join(c if c.isalnum() else "-" for c in kind)
    return (
        f'<section id="kind-{escape(anchor)}"><h2>{escape(kind_words(kind))}: {_n(total)}'
        "</h2><table><thead><tr><th>What</th><th>Request</th><th>When</th>"
        "<th>Rows and bytes</th><th>What was checked</th><th>Residue clean-up</th>"
        "<th>Not covered</th><th>Exact values</th></tr></thead>"
        f'<tbody class="rows">{"".join(_receipt_row(r, rep) for r in rows)}</tbody></table>'
        f"{tail}</section>"
    )


def _footer() -> str:
    notes = "".join(
        f"<li><b>{escape(_OUT_OF_SCOPE_WORDS.get(i, i))}</b>: {escape(n)}</li>"
        for i, n in OUT_OF_SCOPE
    )
    return (
        "<footer><p>Every figure on this page comes from receipts whose signature verified "
        "with the keys given. A receipt attests what was deleted from the named database; "
        f"it does not cover:</p><ul>{notes}</ul></footer>"
    )


def render_html(rep: Report, *, title: str = "Erasure receipts report") -> str:
    """The report as one self-contained HTML page."""
    kinds = [k for k in KNOWN_KINDS if k in rep.by_kind]
    kinds += sorted(k for k in rep.by_kind if k not in KNOWN_KINDS)
    body = (
        f"<header><h1>{escape(title)}</h1><p>Generated {escape(rep.now)} from "
        f"{_n(rep.total)} receipt file(s): {_n(rep.verified)} verified, "
        f"{_n(rep.failed_count)} failed"
        + (f", {_n(rep.duplicates)} duplicate(s) counted once" if rep.duplicates else "")
        + (
            f"; {_n(len(rep.timestamps_failed))} time-stamp(s) did NOT verify"
            if rep.timestamps_failed
            else ""
        )
        + ".</p></header><main>"
        + _failed_section(rep)
        + _timestamps_section(rep)
        + _summary_section(rep)
        + _charts_section(rep)
        + '<section id="filterbox"><label>Find a request, thread or receipt id: '
        '<input id="filter" type="search" autocomplete="off"></label></section>'
        + _requests_section(rep)
        + "".join(_kind_section(rep, k) for k in kinds)
        + "</main>"
        + _footer()
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>{body}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
