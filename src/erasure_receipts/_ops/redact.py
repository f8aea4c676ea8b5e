"""Redaction (RECEIPT_SPEC.md 9.12): values removed from every stored row of one thread
while every checkpoint stays - time travel, review and forks keep working.

Every row of the thread (checkpoints, blobs, pending writes) and of the store
namespaces named that holds a needle is decoded through the saver's serde (JSON columns
as JSON), the needle replaced in every string of the stored objects, and re-encoded, in
one transaction under the saver's lock (the engine's backend: ``BEGIN IMMEDIATE`` on
SQLite, the thread's advisory lock on PostgreSQL). The receipt (kind ``redaction``,
status ``redacted``) binds the rewritten rows before (``pre_state``) and the same rows
after (``post_state``), the needles' commitments and their absence afterwards, in the
raw rows (every stored form) and in the decoded objects. A needle the serde cannot
reach (an encrypted or compressed value, a key column) refuses the redaction with its
location: nothing is changed.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from hashlib import sha256
from typing import Any

from .. import __version__
from .. import _lease as lease
from .._backends.sealing import SEALED_TYPE, SEALED_VALUE_KEY, Sealed
from .._clock import format_time, utc_now
from .._engine.eraser import Eraser, normalise_namespaces
from .._engine.measure import _add
from .._engine.needles import _check_needles, _redact_locations, needle_forms
from .._engine.protocol import PASS_THROUGH
from .._engine.readback import API_CHECK
from .._engine.seams import ResidueScan
from .._engine.statement import _members, _self_check, preflight
from .._engine.types import ErasureBackend, ErasureRequest, Measurement, RowsOutcome
from .._parts import Part, Rewritable, TableCount
from ..digest import EMPTY_ROOT, MerkleTree
from ..errors import (
    ArgumentTypeError,
    ConfigurationError,
    ErasureIncompleteError,
    NeedlesFoundError,
    NothingToEraseError,
    NothingToRedactError,
)
from ..receipt import Receipt

__all__ = [
    "DEFAULT_REPLACEMENT", "MIN_NEEDLE_CHARS", "SealedRows", "redact", "redaction_request",
    "rewrite", "saver_serde",
]  # fmt: skip

log = logging.getLogger("erasure_receipts")

MIN_NEEDLE_CHARS = 4
"""The shortest needle a redaction accepts: a shorter one matches inside unrelated text
(ids, words) far too often to replace it everywhere blindly."""
DEFAULT_REPLACEMENT = "[redacted]"
KEY_CHUNK = 200
"""Rewritten rows measured per query (their primary keys in one condition)."""

# LangGraph's columns that hold values: decoded through the serde with the row's
# ``type`` (SQLite ``checkpoints.checkpoint``, ``writes.value``; PostgreSQL
# ``checkpoint_blobs.blob``, ``checkpoint_writes.blob``), or JSON (checkpoint metadata,
# PostgreSQL's ``checkpoints.checkpoint``, store values). Any other column (thread id,
# namespace, checkpoint and task ids, channel, store prefix and key, ...) is a key: a
# needle there refuses the redaction.
_TYPED = {"checkpoints": "checkpoint", "writes": "value",
          "checkpoint_blobs": "blob", "checkpoint_writes": "blob"}  # fmt: skip
_JSON = {"checkpoints": ("metadata", "checkpoint"), "store": ("value",)}
_SKIP = {"store_vectors"}
"""Tables never rewritten (an embedding is not text): an item with vectors refuses."""


# -- the request -----------------------------------------------------------------------


def _needles(needles: Any) -> tuple[str, ...]:
    if isinstance(needles, str | bytes):
        raise ArgumentTypeError("needles takes a list of strings, not one string")
    try:
        values = list(needles)
    except TypeError:
        raise ArgumentTypeError(f"needles takes a list of strings, not {needles!r}") from None
    out: list[str] = []
    for n in values:
        if not isinstance(n, str):
            raise ArgumentTypeError(f"needles: every value must be a string, not {n!r}")
        n = n.strip("\r\n")
        if not n:
            continue
        if len(n) < MIN_NEEDLE_CHARS:
            raise ConfigurationError(
                f"needle #{len(out) + 1} has {len(n)} character(s); a redaction needs at least "
                f"{MIN_NEEDLE_CHARS} (a shorter value occurs inside unrelated text)",
                reason="needle_too_short",
            )
        out.append(n)
    if not out:
        raise ConfigurationError("no needles: name at least one value to redact",
                                 reason="no_needles")  # fmt: skip
    return tuple(dict.fromkeys(out))


def redaction_request(
    er: Eraser,
    thread_id: Any,
    needles: Any,
    *,
    replacement: Any = DEFAULT_REPLACEMENT,
    store_namespaces: Iterable[Sequence[str]] | None = None,
    request: Any = None,
    authorization: Any = None,
) -> ErasureRequest:
    """The request of one redaction (refused before anything is read: no needles, a
    needle under ``MIN_NEEDLE_CHARS``, a replacement that holds a needle, store
    namespaces without a store in the saver's database, an authorization)."""
    values = _needles(needles)
    if not isinstance(replacement, str):
        raise ArgumentTypeError(f"replacement must be a string, not {replacement!r}")
    if any(n in replacement for n in values):
        raise ConfigurationError("the replacement contains a needle; choose another")
    if authorization is not None:
        raise ConfigurationError(
            "authorization= is not supported for redactions (an authorization names an "
            "erasure scope); pass request= alone"
        )
    namespaces = normalise_namespaces(store_namespaces or ())
    base = er.request(thread_id, namespaces, False)
    base = replace(base, kind="redaction", needles=values, needle_scope="thread")
    return er.with_context(base, request, None)


# -- rewriting the stored objects ------------------------------------------------------


def _pairs(needles: Sequence[str]) -> list[str]:
    """Every spelling replaced: each needle and its Unicode NFC and NFD forms, longest
    first (so a needle inside another is replaced after it)."""
    out = {v for n in needles for v in (n, *(unicodedata.normalize(f, n) for f in ("NFC", "NFD")))}
    return sorted(out, key=lambda v: (-len(v), v))


@dataclass
class _Rewriter:
    """Replaces the needles in every string (and UTF-8 bytes) of a decoded object."""

    needles: list[str]
    replacement: str

    def __post_init__(self) -> None:
        self._raw = [n.encode("utf-8", "surrogatepass") for n in self.needles]
        self._rep = self.replacement.encode("utf-8", "surrogatepass")
        self.forms = sorted({f for n in self.needles for f in needle_forms(n)}, key=len)
        """Every stored form of every spelling (raw, JSON-escaped, ...), searched in a
        value's bytes before it is decoded."""

    def text(self, s: str) -> str:
        for n in self.needles:
            if n in s:
                s = s.replace(n, self.replacement)
        return s

    def value(self, v: Any, depth: int = 0) -> Any:
        """``v`` with every needle replaced; the very object when nothing changed."""
        if depth > 200:
            return v
        if isinstance(v, str):
            return self.text(v) if type(v) is str else v
        if isinstance(v, bytes | bytearray):
            out = bytes(v)
            for n in self._raw:
                out = out.replace(n, self._rep)
            return v if out == v else type(v)(out)
        if v is None or isinstance(v, bool | int | float):
            return v
        d = depth + 1
        if isinstance(v, dict):
            items = [(self.value(k, d), self.value(x, d)) for k, x in v.items()]
            if all(a is k and b is x for (a, b), (k, x) in zip(items, v.items(), strict=True)):
                return v
            out_d = copy.copy(v)
            out_d.clear()
            out_d.update(items)
            return out_d
        if isinstance(v, list | tuple | set | frozenset):
            new = [self.value(x, d) for x in v]
            if all(a is b for a, b in zip(new, v, strict=True)):
                return v
            if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple
                return type(v)(*new)
            return type(v)(new)
        return self._object(v, d)

    def contains(self, v: Any, depth: int = 0) -> bool:
        """Whether a needle occurs in any string (or UTF-8 bytes) of ``v`` (no copies)."""
        if isinstance(v, str):
            return any(n in v for n in self.needles)
        if isinstance(v, bytes | bytearray):
            return any(n in v for n in self._raw)
        if v is None or isinstance(v, bool | int | float) or depth > 200:
            return False
        d = depth + 1
        if isinstance(v, dict):
            return any(self.contains(k, d) or self.contains(x, d) for k, x in v.items())
        if isinstance(v, list | tuple | set | frozenset):
            return any(self.contains(x, d) for x in v)
        if hasattr(v, "__dict__"):
            return any(self.contains(x, d) for x in vars(v).values())
        if dataclasses.is_dataclass(v):
            return any(self.contains(getattr(v, f.name, None), d) for f in dataclasses.fields(v))
        return self.value(v, depth) is not v

    def _object(self, v: Any, depth: int) -> Any:
        fields = getattr(type(v), "model_fields", None)
        if fields is not None and hasattr(v, "model_copy"):  # pydantic
            update = {}
            for name in fields:
                x = getattr(v, name, None)
                y = self.value(x, depth)
                if y is not x:
                    update[name] = y
            return v.model_copy(update=update) if update else v
        names: list[str] = []
        if dataclasses.is_dataclass(v):
            names = [f.name for f in dataclasses.fields(v)]
        elif hasattr(v, "__dict__"):
            names = list(vars(v))
        for cls in type(v).__mro__:
            names += [s for s in getattr(cls, "__slots__", ()) if isinstance(s, str)]
        update = {}
        for name in dict.fromkeys(names):
            if name.startswith("__") or not hasattr(v, name):
                continue
            x = getattr(v, name)
            if callable(x) and not isinstance(x, type):
                continue
            y = self.value(x, depth)
            if y is not x:
                update[name] = y
        if not update:
            return v
        out = copy.copy(v)
        for name, y in update.items():
            object.__setattr__(out, name, y)
        return out


Serde = Any
"""The saver's serializer (``dumps_typed``/``loads_typed``), or :class:`SealedRows`."""


def _text(v: Any) -> str:
    if isinstance(v, memoryview):
        v = bytes(v)
    return v.decode("utf-8", "surrogatepass") if isinstance(v, bytes) else str(v)


def _identity(table: str, record: dict[str, Any]) -> tuple[str, ...] | None:
    """The identity a sealed value of a row is bound to (shredding.Encryption)."""
    names = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "channel", "version")
    r = {k: _text(record[k]) for k in names if record.get(k) is not None}
    ns = r.get("checkpoint_ns", "")
    try:
        if table == "checkpoints":
            return ("checkpoint", r["thread_id"], ns, r["checkpoint_id"])
        if table in ("writes", "checkpoint_writes"):
            return ("write", r["thread_id"], ns, r["checkpoint_id"], r["task_id"], r["channel"])
        if table == "checkpoint_blobs":
            return ("blob", r["thread_id"], ns, r["channel"], r["version"])
    except KeyError:
        return None
    return None


class SealedRows:
    """The serde of a saver with ``encryption=``: rows stored in plaintext go through the
    application serializer; a sealed value is opened with the saver's key against the
    identity of the row it was read from, and the rewritten object sealed again to that
    row under the same key."""

    def __init__(self, inner: Serde, encryption: Any) -> None:
        self.inner = inner
        self.encryption = encryption

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)  # type: ignore[no-any-return]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def open_row(self, table: str, record: dict[str, Any], blob: bytes) -> Any:
        identity = _identity(table, record)
        if identity is None:
            raise ValueError(f"no row identity for a sealed value in {table}")
        return self.encryption.open(self.inner, Sealed(blob), identity)

    def reseal_row(self, table: str, record: dict[str, Any], blob: bytes, obj: Any) -> bytes:
        identity = _identity(table, record)
        assert identity is not None
        return self.encryption.reseal(self.inner, obj, blob, identity)  # type: ignore[no-any-return]

    def open_item(self, record: dict[str, Any], sealed: Any) -> Any:
        ns = tuple(_text(record["prefix"]).split("."))
        return self.encryption.open_store_value(ns, _text(record["key"]), sealed)

    def reseal_item(self, record: dict[str, Any], sealed: Any, value: Any) -> Any:
        ns = tuple(_text(record["prefix"]).split("."))
        return self.encryption.reseal_store_value(ns, _text(record["key"]), value, sealed)


def saver_serde(saver: Any) -> Serde:
    """What a redaction decodes a saver's rows with: its serde, or with ``encryption=``
    the application serializer and the saver's keys (:class:`SealedRows`)."""
    encryption = getattr(saver, "encryption", None)
    if encryption is None:
        return saver.serde
    return SealedRows(saver._plain_serde, encryption)


def _sealed_item(v: Any) -> Any:
    """A store value sealed by ``Encryption.wrap_store`` (its JSON object), or None."""
    if isinstance(v, dict):
        obj = v
    else:
        data = bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode("utf-8", "replace")
        if SEALED_VALUE_KEY.encode() not in data:
            return None
        try:
            obj = json.loads(data)
        except ValueError:
            return None
    return obj if isinstance(obj, dict) and set(obj) == {SEALED_VALUE_KEY} else None


def rewrite(
    table: str, record: dict[str, Any], keys: Sequence[str], rw: _Rewriter, serde: Serde
) -> tuple[dict[str, Any] | None, list[str]]:
    """The new values of one row (None if no needle is in it) and the columns where a
    needle is out of the serde's reach (key columns, undecodable values)."""
    new: dict[str, Any] = {}
    blocked: list[str] = []
    typed = _TYPED.get(table)
    for col, v in record.items():
        if v is None or isinstance(v, bool | int | float):
            continue
        if col == typed and isinstance(v, bytes | memoryview) and record.get("type"):
            kind = str(record["type"])
            if kind == "empty":
                continue
            if kind == SEALED_TYPE:
                # Encrypted to its row (crypto-shredding): opened with the saver's key, or,
                # without it (no encryption=, a shredded key), out of reach.
                blob = bytes(v)
                try:
                    obj = serde.open_row(table, record, blob)
                except Exception:
                    blocked.append(col)
                    continue
                out = rw.value(obj)
                if out is not obj:
                    new["type"], new[col] = SEALED_TYPE, serde.reseal_row(table, record, blob, out)
                continue
            if "+" not in kind and not _holds(rw, v):
                # A plain serde format (msgpack, json, ...) stores every string as its
                # UTF-8 or JSON text: no form in the bytes, no needle in the object. An
                # encrypted or compressed one ("msgpack+aes") is always decoded.
                continue
            try:
                obj = serde.loads_typed((kind, bytes(v)))
            except Exception:
                # Not decodable by this saver's serde (another key, another format): a
                # needle in it can be neither found nor rewritten, so nothing is claimed.
                blocked.append(col)
                continue
            out = rw.value(obj)
            if out is not obj:
                new["type"], new[col] = serde.dumps_typed(out)
            continue
        if table == "store" and col == "value" and (sealed := _sealed_item(v)) is not None:
            try:
                obj = serde.open_item(record, sealed)
            except Exception:
                blocked.append(col)
                continue
            out = rw.value(obj)
            if out is not obj:
                dumped = json.dumps(serde.reseal_item(record, sealed, out), ensure_ascii=False)
                new[col] = dumped.encode("utf-8") if isinstance(v, bytes) else dumped
            continue
        if col in _JSON.get(table, ()):
            if not _holds(rw, v):  # JSON text: every string in one of the JSON forms
                continue
            text = v.decode("utf-8", "surrogatepass") if isinstance(v, bytes) else str(v)
            try:
                obj = json.loads(text)
            except ValueError:
                blocked += [col] if _holds(rw, v) else []
                continue
            out = rw.value(obj)
            if out is not obj:
                dumped = json.dumps(out, ensure_ascii=False)
                as_bytes = isinstance(v, bytes)
                new[col] = dumped.encode("utf-8", "surrogatepass") if as_bytes else dumped
            continue
        if _holds(rw, v):
            blocked.append(col)
    for col in keys:
        if col in new:  # never: keys are not value columns
            blocked.append(col)
    return (new or None), blocked


def _holds(rw: _Rewriter, v: Any) -> bool:
    """Whether a value holds a needle in any stored form."""
    if isinstance(v, str):
        v = v.encode("utf-8", "surrogatepass")
    if not isinstance(v, bytes | bytearray | memoryview):
        return False
    data = bytes(v)
    return any(f in data for f in rw.forms)


def _still_holds(table: str, record: dict[str, Any], rw: _Rewriter, serde: Serde) -> list[str]:
    """After the rewrite: the columns of a row whose decoded objects still hold a needle."""
    new, blocked = rewrite(table, record, (), rw, serde)
    return sorted({*blocked, *(new or {})} - {"type"})


# -- the flow --------------------------------------------------------------------------


@dataclass
class _Plan:
    part: Rewritable
    keys: list[dict[str, Any]]
    values: list[dict[str, Any]]
    checkpoints: int = 0


def _location(table: str, record: dict[str, Any], keys: Sequence[str], col: str) -> dict[str, Any]:
    loc: dict[str, Any] = {"table": table}
    for k in keys:
        v = record.get(k)
        loc[k] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    loc["column"] = col
    return loc


def _plan(
    parts: Sequence[Rewritable], request: ErasureRequest, rw: _Rewriter, serde: Serde
) -> tuple[list[_Plan], set[tuple[str, str]], int]:
    """Read every row in scope once: what to rewrite, the thread's checkpoints
    ``(checkpoint_ns, checkpoint_id)`` and its row count; a needle out of the serde's
    reach refuses with its locations."""
    plans, blocked = [], []
    checkpoints: set[tuple[str, str]] = set()
    rows = 0
    vectors: set[tuple[Any, Any]] = set()
    for part in parts:
        keys = part.key_columns()
        plan = _Plan(part, [], [])
        for rec in part.records():
            rows += part.group == "checkpoints"
            if part.table == "checkpoints":
                checkpoints.add(_checkpoint_key(rec))
            if part.table in _SKIP:
                vectors.add((rec.get("prefix"), rec.get("key")))
                continue
            new, cols = rewrite(part.table, rec, keys, rw, serde)
            blocked += [_location(part.table, rec, keys, c) for c in cols]
            if new is not None:
                plan.keys.append({k: rec[k] for k in keys})
                plan.values.append(new)
        plans.append(plan)
    for plan in plans:
        if plan.part.table == "store":
            for key in plan.keys:
                if (key.get("prefix"), key.get("key")) in vectors:
                    blocked.append({"table": "store_vectors", "prefix": key.get("prefix"),
                                    "key": key.get("key"), "column": "embedding"})  # fmt: skip
    if blocked:
        forms = [(i, f) for i, n in enumerate(request.needles) for f in needle_forms(n)]
        exc = NeedlesFoundError(_redact_locations(blocked, request, forms))
        exc.args = (
            "redaction refused, nothing was changed: a needle is where the saver's serde "
            "cannot rewrite it, or a value the serde cannot decode may hold one (a key "
            "column, a value encrypted or compressed with another serde, a value sealed "
            "under a data key this saver does not have - no encryption=, or shredded - a "
            "store item's embedding): " + exc.args[0],
        )
        raise exc
    return plans, checkpoints, rows


def _checkpoint_key(record: dict[str, Any]) -> tuple[str, str]:
    """A checkpoint row's ``(checkpoint_ns, checkpoint_id)``, as LangGraph's config has it."""
    ns, cid = record["checkpoint_ns"], record["checkpoint_id"]
    return (
        ns.decode() if isinstance(ns, bytes) else str(ns),
        cid.decode() if isinstance(cid, bytes) else str(cid),
    )


def _measure(plans: Sequence[_Plan]) -> tuple[bytes, dict[str, TableCount]]:
    """One tree over the rewritten rows, in table then primary-key order."""
    tree, tables = MerkleTree(), dict[str, TableCount]()
    for plan in sorted(plans, key=lambda p: p.part.table):
        if not plan.keys:
            continue
        for i in range(0, len(plan.keys), KEY_CHUNK):
            part: Part = plan.part.only(plan.keys[i : i + KEY_CHUNK])
            _add(tables, plan.part.table, part.measure(tree.append_hash))
    root = tree.root() if any(c.rows for c in tables.values()) else EMPTY_ROOT
    return root, tables


def _parts(backend: ErasureBackend) -> list[Rewritable]:
    out = []
    for p in backend.parts():
        if p.method != "atomic-transaction" or not hasattr(p, "records"):
            raise ConfigurationError(
                "a redaction rewrites rows in the saver's database only; the store's items "
                "are not rows there (a store in another file or process): name no "
                "store_namespaces"
            )
        out.append(p)
    return out  # type: ignore[return-value]


def _phase_one(
    handle: Any, er: Eraser, request: ErasureRequest, rw: _Rewriter, serde: Serde,
    residue_scan: ResidueScan,
) -> tuple[RowsOutcome, set[tuple[str, str]]]:  # fmt: skip
    clock: Callable[[], Any] = er.clock or utc_now
    backend = er.backend(handle, request, residue_scan)
    parts = _parts(backend)
    methods = {p.group: p.method for p in sorted(parts, key=lambda p: p.table)}
    preflight(backend, request, list(backend.parts()), methods, __version__)
    checks = [
        {"name": "decoded_needles_zero_in_transaction", "result": "pass",
         "detail": "every row in scope decoded through the saver's serde after the "
                   "rewrite; no string holds a needle"},
        {"name": "checkpoints_kept", "result": "pass",
         "detail": "the thread's checkpoint rows counted before and after the rewrite"},
    ]  # fmt: skip
    try:
        with backend.transaction():
            receipt_id = str(uuid.uuid4())
            backend.lease_entry(receipt_id)
            issued_at = format_time(clock())
            plans, kept, rows = _plan(parts, request, rw, serde)
            before = len(kept)
            if not rows:
                exc = NothingToEraseError(request.journal_id, backend.previous_erasure())
                if exc.previous_receipt_id is None:
                    exc.args = (f"{request.label} has no stored rows (unknown thread id?); "
                                "nothing was redacted",)  # fmt: skip
                raise exc
            if not any(p.keys for p in plans):
                raise NothingToRedactError(request.journal_id)
            pre_root, pre_tables = _measure(plans)
            for plan in plans:
                for key, values in zip(plan.keys, plan.values, strict=True):
                    plan.part.rewrite(key, values)
            post_root, post_tables = _measure(plans)
            # What must hold before the commit: no needle in any stored form (raw
            # bytes), none in the decoded objects, every checkpoint still there.
            needles = _check_needles(backend, request)
            left, after = [], 0
            for part in parts:
                keys = part.key_columns()
                for rec in part.records():
                    after += part.table == "checkpoints"
                    if part.table not in _SKIP:
                        left += [_location(part.table, rec, keys, c)
                                 for c in _still_holds(part.table, rec, rw, serde)]  # fmt: skip
            if left:
                forms = [(i, f) for i, n in enumerate(request.needles) for f in needle_forms(n)]
                raise NeedlesFoundError(_redact_locations(left, request, forms))
            if after != before or pre_tables.keys() != post_tables.keys():
                raise ErasureIncompleteError(
                    f"checkpoints before {before}, after {after}: a redaction keeps them all"
                )
            members = _members(backend, request, Measurement(pre_root, pre_tables), (), needles)
            members["redaction"] = {
                "checkpoints_before": before, "checkpoints_after": after,
                "replacement": {"sha256": sha256(rw.replacement.encode("utf-8")).hexdigest()},
            }  # fmt: skip
            draft = _self_check(
                backend, request, members, pre_root, pre_tables, methods, __version__,
                receipt_id=receipt_id, issued_at=issued_at, checks=checks,
                post=(post_root, post_tables),
            )  # fmt: skip
            entry = {
                "thread_id": request.thread_id, "kind": "redaction",
                "store_namespaces": [list(n) for n in request.store_namespaces],
                "tombstone": False, "pre_digest": pre_root.hex(),
                "pre_tables": {k: v.to_json() for k, v in pre_tables.items()},
                "methods": methods, "checks": checks, "members": members,
                # The statement as checked in the transaction: recovery completes it
                # (residue) if this process dies before its statement is journaled.
                "draft": draft,
            }  # fmt: skip
            backend.write_journal(receipt_id, issued_at, json.dumps(entry, sort_keys=True))
    except PASS_THROUGH:
        raise
    except (NeedlesFoundError, NothingToRedactError):
        raise
    except Exception as exc:
        what = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ErasureIncompleteError):
            what = str(exc)
        raise ErasureIncompleteError(
            f"redaction of {request.label} aborted and rolled back: {what}; nothing was changed"
        ) from exc
    # After the commit: residue (secure_delete, WAL, the residue scan) and the raw rows
    # searched again from a fresh snapshot.
    residue = backend.reduce_residue()
    with backend.read_snapshot():
        again = backend.find_needles(
            [f for n in request.needles for f in needle_forms(n)], "thread", request.all_threads
        )
    if again:
        raise ErasureIncompleteError(
            f"the redaction of {request.label} committed, but a needle was written to the thread "
            f"again meanwhile ({len(again)} location(s)): stop the run writing it and redact again"
        )
    checks.append({"name": "raw_needles_zero_after_commit", "result": "pass",
                   "detail": "every stored form of every needle searched in the thread's "
                             "rows from a fresh snapshot after the commit"})  # fmt: skip
    outcome = RowsOutcome(
        request=request, backend=backend, receipt_id=receipt_id, issued_at=issued_at,
        pre_digest=pre_root.hex(), pre_tables=pre_tables, post_digest=post_root.hex(),
        post_tables=post_tables, methods=methods, checks=checks, residue=residue,
        members=members, draft=draft,
    )  # fmt: skip
    log.info("redacted %s: %d row(s) rewritten, receipt %s", request.label,
             sum(t.rows for t in pre_tables.values()), receipt_id)  # fmt: skip
    return outcome, kept


def _read_back(
    er: Eraser, request: ErasureRequest, kept: set[tuple[str, str]], rw: _Rewriter
) -> list[Any]:
    """LangGraph's own API: ``list`` loads every checkpoint of the thread (with its
    metadata and pending writes), each one the redaction kept among them, none holding a
    needle; ``get_tuple`` loads the latest. A checkpoint a writer held off by the
    redaction put after its commit is listed too: loaded and searched, not counted as
    one the redaction failed to keep."""
    token = API_CHECK.set(True)
    try:
        config = {"configurable": {"thread_id": request.thread_id}}
        listed = list(er.reader.list(config))
        found = sum(
            1 for t in listed
            if rw.contains(t.checkpoint) or rw.contains(t.metadata)
            or rw.contains(t.pending_writes)
        )  # fmt: skip
        latest = er.reader.get_tuple(config)
        found += latest is None or rw.contains(latest.checkpoint)
    finally:
        API_CHECK.reset(token)
    ids = {(str(t.config["configurable"].get("checkpoint_ns", "")),
            str(t.config["configurable"]["checkpoint_id"])) for t in listed}  # fmt: skip
    return [
        ("api_checkpoints_kept", len(kept - ids),
         f"list returns each of the thread's {len(kept)} checkpoint(s) of the redaction"),
        ("api_needles_zero", found,
         "list loads every checkpoint, get_tuple the latest; no needle in a checkpoint, "
         "its metadata or pending writes"),
    ]  # fmt: skip


def redact(
    er: Eraser, request: ErasureRequest, serde: Serde, replacement: str, residue_scan: ResidueScan
) -> Receipt:
    """Rewrite, check, commit, read back, sign and archive one redaction (after
    ``Database.prepare``)."""
    rw = _Rewriter(_pairs(request.needles), replacement)
    with lease.owner_scope(er._release_lease) as leases:
        phase_one = lease.bind(leases, _phase_one)
        outcome, kept = er.db.run(phase_one, er, request, rw, serde, residue_scan)
        try:
            api = _read_back(er, request, kept, rw)
            statement = er._statement_of(outcome, api)
            statement = er.db.run(er.journal.record_statement, outcome.receipt_id, statement)
        except Exception as exc:
            raise er._after_commit_failed(exc) from exc
        receipt = er._sign(statement)
        er._mark_issued(receipt)
        return receipt
