"""Dashboard feed: one flat, schema-described record per *verified* receipt.

``receipt index DIR|LOG... --key PUB.pem --format ndjson|csv`` turns an archive (receipt
files, directories of them, receipt logs) into rows a compliance dashboard ingests
directly: every field is a string, integer, boolean or null, the same columns in the
same order for every row (``FIELDS``), described by
``schemas/index-record.schema.json``. A record is built only from the statement that
:func:`~erasure_receipts.verify.verify_receipt` parsed afresh from the signed payload,
so a receipt that was tampered with (or is untrusted, or malformed) never becomes a row:
it is listed separately, as a rejection with its reason code. Every kind (RECEIPT_SPEC.md
9) has the same columns; kind-specific ones (``threads``, ``kept_leaves``, needles,
request context) are null where a kind or receipt has no such fact.

Tables map to the two groups of a receipt's ``methods``: ``store`` and
``store_vectors`` are the ``store`` group, every other table (``checkpoints``,
``writes``, ``checkpoint_blobs``, ``checkpoint_writes``) the ``checkpoints`` group.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ._batch import _read_entry
from .errors import Error
from .verify import TrustStore, VerifiedReceipt, verify_receipt

__all__ = [
    "FIELDS",
    "RECORD_TYPE",
    "STORE_TABLES",
    "IndexItem",
    "build",
    "csv_cell",
    "csv_header",
    "csv_row",
    "index_items",
    "index_one",
    "index_record",
]

RECORD_TYPE = "erasure-receipts-index-v1"
STORE_TABLES = frozenset(("store", "store_vectors"))
FIELDS: tuple[str, ...] = (
    "record_type",
    "receipt_id",
    "issued_at",
    "kind",
    "status",
    "thread_id",
    "subject",
    "scope_id",
    "privacy",
    "subject_name",
    "pre_digest",
    "rows",
    "bytes",
    "rows_checkpoints",
    "bytes_checkpoints",
    "rows_store",
    "bytes_store",
    "method_checkpoints",
    "method_store",
    "store_namespaces",
    "tombstone",
    "threads",
    "kept_leaves",
    "needles_checked",
    "needles_searched",
    "residue",
    "residue_worst",
    "backend",
    "request_id",
    "request_basis",
    "approver",
    "sla_seconds",
    "replay_of",
    "key_id",
    "key_name",
    "log_index",
    "source",
)
"""The columns, in order (the CSV header; the keys of every NDJSON record)."""

# worst first: a dashboard shows the worst residue outcome of a receipt in one column
_RESIDUE_ORDER = ("failed", "partial", "skipped", "not_applicable", "applied")


def index_record(
    v: VerifiedReceipt, *, source: str, log_index: int | None = None
) -> dict[str, Any]:
    """The flat record of one verified receipt (keys in ``FIELDS`` order).

    ``thread_id`` is the scope's thread (null for a receipt whose scope is a subject);
    ``subject`` the scope's subject when it has one; ``scope_id`` whichever of the two
    the kind erases (a commitment when ``privacy``); ``subject_name`` the in-toto
    subject. ``rows``/``bytes`` are the pre-deletion totals (for ``history``: of the
    removed rows); the per-group figures add up to them. ``threads`` is the number of
    erased threads of a ``subject`` receipt, ``kept_leaves`` the rows a ``history``
    receipt kept (both null for the other kinds); ``needles_checked`` says whether the
    receipt attests a needle search, ``needles_searched`` where (``thread`` or
    ``database``; null without one). ``residue`` is ``action=status`` pairs joined by
    ``;`` in receipt order, ``residue_worst`` the worst status (failed, partial,
    skipped, not_applicable, applied; null without residue actions). With a ``request``
    (RECEIPT_SPEC.md 9.6): ``request_id``, ``request_basis``, ``approver`` (the trust
    file's name of the approver key that verified the embedded authorization, its key
    id if unnamed; null without an authorization) and ``sla_seconds`` (``issued_at`` -
    ``received_at``, whole seconds; null without ``received_at``); all null without a
    request. The requester is never a column. ``replay_of``: the receipt a replay after
    a restore repeats (RECEIPT_SPEC.md 9.11), null otherwise."""
    st = v.statement
    p = st["predicate"]
    pre = p["pre_state"]
    groups = {"checkpoints": [0, 0], "store": [0, 0]}
    for table, t in pre["tables"].items():
        g = groups["store" if table in STORE_TABLES else "checkpoints"]
        g[0] += t["rows"]
        g[1] += t["bytes"]
    scope = p["scope"]
    residue = [(r["action"], r["status"]) for r in p["residue"]]
    statuses = {s for _, s in residue}
    worst = next((s for s in _RESIDUE_ORDER if s in statuses), None)
    methods = p["methods"]
    kind = p.get("kind", "thread")
    needles = p.get("needles")
    request = v.request
    record = {
        "record_type": RECORD_TYPE,
        "receipt_id": p["receipt_id"],
        "issued_at": p["issued_at"],
        "kind": kind,
        "status": p["status"],
        "thread_id": scope.get("thread_id"),
        "subject": scope.get("subject"),
        "scope_id": v.thread_id,
        "privacy": "privacy" in scope,
        "subject_name": st["subject"][0]["name"],
        "pre_digest": pre["digest"]["sha256"],
        "rows": pre["leaves"],
        "bytes": groups["checkpoints"][1] + groups["store"][1],
        "rows_checkpoints": groups["checkpoints"][0],
        "bytes_checkpoints": groups["checkpoints"][1],
        "rows_store": groups["store"][0],
        "bytes_store": groups["store"][1],
        "method_checkpoints": methods.get("checkpoints"),
        "method_store": methods.get("store"),
        "store_namespaces": len(scope.get("store_namespaces", ())),
        "tombstone": scope.get("tombstone"),
        "threads": len(scope["threads"]) if kind in ("subject", "shred") else None,
        "kept_leaves": p["kept_state"]["leaves"] if kind == "history" else None,
        "needles_checked": needles is not None,
        "needles_searched": None if needles is None else needles["searched"],
        "residue": ";".join(f"{a}={s}" for a, s in residue),
        "residue_worst": worst,
        "backend": p["backend"]["kind"],
        "request_id": None if request is None else request["id"],
        "request_basis": None if request is None else request["basis"],
        "approver": v.approver,
        "sla_seconds": v.sla_seconds,
        "replay_of": p.get("replay_of"),
        "key_id": v.key_id,
        "key_name": v.key_name,
        "log_index": log_index,
        "source": source,
    }
    return record


def csv_header() -> str:
    """The CSV header line (``FIELDS``), with its newline."""
    return ",".join(FIELDS) + "\n"


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""Characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection)."""


def csv_cell(value: Any) -> Any:
    """One CSV field: null empty, booleans ``true``/``false``, and a text that a
    spreadsheet would run as a formula (it starts with ``= + - @``, tab or CR: a thread
    id or request id is anyone's text) prefixed with a single quote, so it shows as
    text. Integers are written as they are (never negative)."""
    if value is None:
        return ""
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is str and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(record: dict[str, Any]) -> str:
    """One record as a CSV line (RFC 4180 quoting; null is an empty field, booleans
    ``true``/``false``, formula-like text neutralised by :func:`csv_cell`), with its
    newline."""
    buf = io.StringIO()
    values = [csv_cell(record[f]) for f in FIELDS]
    # "\r\n" as the writer's terminator makes it quote a field holding a lone CR too
    # (with "\n" it would not, and a CR in a thread id would split the row); the line
    # still ends with "\n" alone.
    csv.writer(buf, lineterminator="\r\n").writerow(values)
    return buf.getvalue()[:-2] + "\n"


IndexItem = tuple[str, str, int, int, int]
"""What to index: ``("file", path, 0, 0, -1)`` or ``("log", log directory, offset,
length, entry index)``."""


def index_items(paths: Sequence[str], skip: Sequence[str] = ()) -> list[IndexItem]:
    """The receipts under ``paths`` in order: each receipt log's committed entries,
    every ``*.json`` file of a directory (as ``receipt verify`` finds them, leaving out
    the files in ``skip``), and files as given. ``InputError`` for a missing log."""
    from ._batch import _expand
    from .log import entry_spans, is_log

    items: list[IndexItem] = []
    for p in paths:
        if os.path.isdir(p) and is_log(p):
            items += [("log", p, off, n, i) for i, off, n in entry_spans(p)]
        else:
            items += [("file", f, 0, 0, -1) for f in _expand([p], skip)]
    return items


def index_one(item: IndexItem, trust: TrustStore) -> dict[str, Any]:
    """``{"record": {...}}`` for a receipt that verifies, else ``{"rejected": {"source",
    "reason", "message"}}`` (plain data: it crosses process boundaries)."""
    from ._batch import _read_arg
    from .verify import _display

    kind, path, offset, length, i = item
    source = f"{_display(path)}#{i}" if kind == "log" else _display(path)
    try:
        data = _read_entry(path, offset, length) if kind == "log" else _read_arg(path)
        v = verify_receipt(data, trust)
    except Error as exc:
        return {"rejected": {"source": source, "reason": exc.reason, "message": exc.message}}
    except OSError as exc:
        return {"rejected": {"source": source, "reason": "unreadable", "message": str(exc)}}
    except Exception as exc:  # a bug must not hide the other receipts
        return {"rejected": {"source": source, "reason": "internal_error", "message": repr(exc)}}
    return {"record": index_record(v, source=source, log_index=i if kind == "log" else None)}


def build(items: Sequence[IndexItem], trust: TrustStore, jobs: int = 1) -> Iterator[dict[str, Any]]:
    """``index_one`` over ``items`` in order, in ``jobs`` processes for large batches."""
    from ._batch import BATCH, PARALLEL_MIN, fork_map

    if len(items) >= BATCH:
        from .canonical import use_orjson

        use_orjson()
    if jobs > 1 and len(items) >= PARALLEL_MIN:
        yield from fork_map(lambda it: index_one(it, trust), items, jobs)
    else:
        for it in items:
            yield index_one(it, trust)
