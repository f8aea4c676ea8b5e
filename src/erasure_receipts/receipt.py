"""The erasure receipt: an in-toto Statement v1 signed over DSSE, kept as readable JSON.

No I/O beyond ``Receipt.save`` and nothing from LangGraph: this module is shared by the
erasure engine (which builds receipts) and the verifier (which reads them).
See ``RECEIPT_SPEC.md`` for the normative description and ``schemas/`` for the schema.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .canonical import (
    MAX_SAFE_INTEGER,
    canonicalize,
    canonicalize_ascii_keys,
    parse_own_layout,
    parse_strict,
)
from .errors import MalformedReceiptError
from .signing import PublicKey, Signer, b64decode, b64encode, key_id, pae

__all__ = [
    "DSSE_PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "RECEIPT_MEDIA_TYPE",
    "REQUIRED_OUT_OF_SCOPE",
    "STATEMENT_TYPE",
    "Receipt",
    "Signature",
    "build_statement",
    "validate_statement",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://langgraph-erasure-receipts.dev/erasure/v1"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
RECEIPT_MEDIA_TYPE = "application/vnd.langgraph-erasure-receipt.v1+json"
EMPTY_ROOT_HEX = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

OUT_OF_SCOPE: tuple[tuple[str, str], ...] = (
    ("backups", "Backups and snapshots taken before the erasure still hold the data."),
    ("replicas", "Replicas and copies of the database file are not touched."),
    (
        "point_in_time_recovery",
        "WAL archives, PITR logs and journals outside this database connection "
        "(e.g. another engine's WAL archive) can restore the data.",
    ),
    (
        "storage_media",
        "Filesystem, OS page cache and SSD wear-levelling may keep old blocks; "
        "this receipt is not a claim of media-level unrecoverability.",
    ),
    (
        "other_copies",
        "Copies held by other processes, caches, logs, exports, or other thread ids "
        "(e.g. made with copy_thread) are outside the named scope.",
    ),
)
REQUIRED_OUT_OF_SCOPE = frozenset(
    ("backups", "replicas", "point_in_time_recovery", "storage_media")
)

# Format checks as str methods, not regexes: compiling the patterns cost more than a
# third of the verifier's import time. schemas/receipt.schema.json states the same
# formats as regexes, and the test suite checks that both agree.
_DEL_HEX = str.maketrans("", "", "0123456789abcdef")
_DEL_NAME = str.maketrans(
    "", "", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"
)


def is_hex64(v: str) -> bool:
    """``^[0-9a-f]{64}$``"""
    return len(v) == 64 and not v.translate(_DEL_HEX)


def is_uuid(v: str) -> bool:
    """``^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$``"""
    return (
        len(v) == 36
        and v[8] == v[13] == v[18] == v[23] == "-"
        and not (v[:8] + v[9:13] + v[14:18] + v[19:23] + v[24:]).translate(_DEL_HEX)
    )


def time_key(t: str) -> str:
    """``is_time`` text as text that sorts by instant: ``...00Z`` equals ``...00.000Z``
    (fraction padded to microseconds). The one comparison of receipt times."""
    base, _, frac = t[:-1].partition(".")
    return f"{base}.{frac.ljust(6, '0')}"


_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_time(v: str) -> bool:
    """An RFC 3339 UTC time in the receipts' form ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` that
    names a real instant: month 01-12, a day that exists in that month (Gregorian leap
    years), hour < 24, minute < 60, second < 60 (no leap second). The schemas spell the
    same set as one regex (``TIME_PATTERN`` in the tests); no ``datetime`` import."""
    if not (20 <= len(v) <= 27 and v.isascii() and v[-1] == "Z"):
        return False
    if not (v[4] == v[7] == "-" and v[10] == "T" and v[13] == v[16] == ":"):
        return False
    digits = v[:4] + v[5:7] + v[8:10] + v[11:13] + v[14:16] + v[17:19]
    frac = v[19:-1]
    if not (digits.isdigit() and (not frac or (frac[0] == "." and frac[1:].isdigit()))):
        return False
    month, day = int(v[5:7]), int(v[8:10])
    if not (1 <= month <= 12 and 1 <= day <= _DAYS_IN_MONTH[month]):
        return False
    if month == 2 and day == 29:
        year = int(v[:4])
        if year % 4 or (year % 100 == 0 and year % 400):
            return False
    return v[11:13] < "24" and v[14:16] < "60" and v[17:19] < "60"


_NAMES_OK: set[str] = set()


def is_name(v: str) -> bool:
    """``^[A-Za-z0-9_.:-]{1,64}$``"""
    if v in _NAMES_OK:  # the same few dozen names recur in every receipt of a batch
        return True
    ok = 0 < len(v) <= 64 and v.isascii() and not v.translate(_DEL_NAME)
    if ok and len(_NAMES_OK) < 4096:
        _NAMES_OK.add(v)
    return ok


_STATUSES = frozenset(("erased", "redacted", "retained"))
_CHECK_RESULTS = frozenset(("pass", "fail"))
_RESIDUE_STATUSES = frozenset(("applied", "partial", "failed", "skipped", "not_applicable"))
MAX_THREAD_ID = 4096
MAX_LIST = 1000


# -- validation -----------------------------------------------------------------------
# A hand-written mirror of schemas/receipt.schema.json: the schema documents the format
# and is tested against every receipt; this code enforces it on the verify path without
# importing a JSON-Schema engine (which would dominate cold-start time).


JPath = str | tuple[Any, ...]
"""A location in the document. Tuples are only joined into text when reporting an error,
so the success path (every receipt of a 10,000-file batch) formats nothing."""


def _flat(path: JPath) -> list[Any]:
    if isinstance(path, str):
        return [path]
    return [x for part in path for x in (_flat(part) if isinstance(part, tuple) else [part])]


def _fmt(path: JPath) -> str:
    out = ""
    for part in _flat(path):
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fail(path: JPath, what: str) -> MalformedReceiptError:
    return MalformedReceiptError(f"{_fmt(path)}: {what}", reason="schema")


def _obj(
    v: Any, path: JPath, required: frozenset[str], optional: frozenset[str] = frozenset()
) -> dict[str, Any]:
    if type(v) is not dict:
        raise _fail(path, "must be an object")
    keys = v.keys()
    if not required <= keys:
        missing = sorted(required - keys)
        raise _fail(path, f"missing {', '.join(missing)}")
    if len(keys) > len(required) and not keys <= required | optional:
        extra = sorted(keys - required - optional)
        raise _fail(path, f"unknown member {extra[0]!r}")
    return v


def _str(
    v: Any, path: JPath, check: Callable[[str], bool] | None = None, max_len: int = 1024
) -> str:
    if type(v) is not str:
        raise _fail(path, "must be a string")
    if not v or len(v) > max_len:
        raise _fail(path, f"length must be 1..{max_len}")
    if check is not None and not check(v):
        raise _fail(path, "has the wrong format")
    return v


def _int(v: Any, path: JPath) -> int:
    if type(v) is not int:
        raise _fail(path, "must be an integer")
    if not 0 <= v <= MAX_SAFE_INTEGER:
        raise MalformedReceiptError(f"{_fmt(path)}: integer out of range", reason="integer_range")
    return v


def _list(v: Any, path: JPath, min_items: int = 0) -> list[Any]:
    if type(v) is not list:
        raise _fail(path, "must be an array")
    if not min_items <= len(v) <= MAX_LIST:
        raise _fail(path, f"must have {min_items}..{MAX_LIST} items")
    return v


_K_DIGEST = frozenset(("sha256",))


def _digest(v: Any, path: JPath) -> str:
    d = _obj(v, path, _K_DIGEST)
    return _str(d["sha256"], (path, "sha256"), is_hex64)


def _name_map(v: Any, path: JPath) -> dict[str, Any]:
    if type(v) is not dict:
        raise _fail(path, "must be an object")
    if len(v) > MAX_LIST:
        raise _fail(path, "has too many members")
    for k in v:
        if not is_name(k):
            raise _fail(path, f"member name {k!r} has the wrong format")
    return v


_K_STATEMENT = frozenset(("_type", "subject", "predicateType", "predicate"))
_K_SUBJECT = frozenset(("name", "digest"))
_K_PREDICATE = frozenset(
    (
        "receipt_id", "issued_at", "status", "scope", "backend", "merkle", "pre_state",
        "post_state", "methods", "checks", "residue", "out_of_scope", "generator",
    )
)  # fmt: skip
_K_PREDICATE_THREAD = _K_PREDICATE | {"kind"}
_K_PREDICATE_OPT = frozenset(
    (
        "kind", "kept_state", "units", "needles", "request", "authorization", "replay_of",
        "targets", "redaction", "deferral", "deferral_of",
    )
)  # fmt: skip
_K_SCOPE = frozenset(("thread_id", "checkpoint_namespaces", "store_namespaces", "tombstone"))
_K_SCOPE_HISTORY = _K_SCOPE | {"keep"}
_K_SCOPE_SUBJECT = frozenset(
    ("subject", "threads", "discovery", "checkpoint_namespaces", "store_namespaces", "tombstone")
)
_K_SCOPE_OPT = frozenset(("privacy", "tombstone_policy", "store_tombstone"))
# -- kind "namespace" (RECEIPT_SPEC.md 9.7): one store namespace prefix, no thread --
_K_SCOPE_NAMESPACE = frozenset(("namespace", "store_namespaces", "tombstone"))
_K_SCOPE_NAMESPACE_OPT = frozenset(("privacy",))
# -- kind "shred" (RECEIPT_SPEC.md 9.16): a data key destroyed in the key store --------
_K_SCOPE_SHRED = frozenset(
    ("subject", "key_scope", "threads", "key_commitment", "checkpoint_namespaces",
     "store_namespaces", "tombstone", "key_store")
)  # fmt: skip
_K_KEY_STORE = frozenset(("kind", "scrub", "backup_retention"))
TOMBSTONE_POLICIES = ("new_conversations", "refuse_all")
"""``scope.tombstone_policy``: what the tombstone refuses (RECEIPT_SPEC.md 9)."""
_K_PRIVACY = frozenset(("mode", "key_id"))
_K_DISCOVERY = frozenset(("metadata_key",))
_K_KEPT = frozenset(("digest", "leaves", "tables", "checkpoints"))
_K_KEPT_CP = frozenset(("checkpoint_ns", "checkpoint_id"))
_K_UNIT = frozenset(("name", "digest", "leaves", "tables"))
_K_NEEDLES = frozenset(("commitment", "salt", "values", "forms", "searched", "occurrences_after"))
# -- kind "redaction" (RECEIPT_SPEC.md 9.12): values rewritten in a thread's rows --
_K_REDACTION = frozenset(("checkpoints_before", "checkpoints_after", "replacement"))
KINDS = ("thread", "history", "subject", "namespace", "redaction", "deferral", "shred")
"""Receipt kinds (RECEIPT_SPEC.md section 9); a predicate without ``kind`` is ``thread``."""
AUTH_KINDS = ("thread", "history", "subject")
"""Kinds an authorization (RECEIPT_SPEC.md 9.6) can name; ``namespace`` not (yet)."""
# -- kind "deferral" (RECEIPT_SPEC.md 9.14): a signed decision to retain a scope --
_K_DEFERRAL = frozenset(("of_kind", "basis", "code", "until"))
DEFERRAL_KINDS = ("thread", "history", "subject")
"""Scopes a deferral can retain: ``deferral.of_kind``; its ``scope`` has that kind's shape."""
MAX_BASIS = 4096
"""Longest ``deferral.basis`` (characters)."""
_K_BACKEND = frozenset(("kind", "saver", "store", "database", "versions"))
_K_MERKLE = frozenset(("algorithm", "leaf_encoding"))
_K_PRE = frozenset(("digest", "leaves", "tables"))
_K_TABLE_PRE = frozenset(("rows", "bytes"))
_K_CHECK = frozenset(("name", "result"))
_K_CHECK_OPT = frozenset(("detail",))
_K_RESIDUE = frozenset(("action", "status", "detail"))
_K_OOS = frozenset(("id", "note"))
_K_GEN = frozenset(("name", "version"))


# One definition of a valid statement, with its fast path built in. Each rule is written
# once, as the helper above that explains a failure (path, message, reason); the hot
# members of the receipts a batch holds are first tested by an inline one-pass check
# (the ``*_ok`` predicates below), and only a value that check does not pass goes to its
# helper. A check may be stricter than its helper (the helper then finds nothing and
# validation goes on) but never laxer: ``full=True`` skips every inline check and runs
# each helper, and tests/unit/test_receipt_rules.py pins that both give the same verdict,
# reason and message over the golden corpus and the fuzzer's mutations.


def _s(v: Any, max_len: int = 1024) -> bool:
    return type(v) is str and 0 < len(v) <= max_len


def _n(v: Any) -> bool:
    return type(v) is str and is_name(v)


def _names_ok(m: Any) -> bool:
    if type(m) is not dict or len(m) > MAX_LIST:
        return False
    return _NAMES_OK.issuperset(m) or all(map(is_name, m))


def _digest_ok(d: Any) -> bool:
    if type(d) is not dict or d.keys() != _K_DIGEST:
        return False
    h = d["sha256"]
    return type(h) is str and is_hex64(h)


def _state_ok(s: Any) -> bool:
    if type(s) is not dict or s.keys() != _K_PRE or not _digest_ok(s["digest"]):
        return False
    leaves, tables = s["leaves"], s["tables"]
    if type(leaves) is not int or not 0 <= leaves <= MAX_SAFE_INTEGER or not _names_ok(tables):
        return False
    for t in tables.values():
        if type(t) is not dict or t.keys() != _K_TABLE_PRE:
            return False
        rows, size = t["rows"], t["bytes"]
        if type(rows) is not int or type(size) is not int:
            return False
        if not (0 <= rows <= MAX_SAFE_INTEGER and 0 <= size <= MAX_SAFE_INTEGER):
            return False
    return True


_SEEN: dict[str, Any] = {}
"""The last ``checks`` and ``out_of_scope`` that passed, as private copies. They recur
unchanged across an archive's receipts and hold only strings, where ``==`` implies the
same types (unlike ``1 == True == 1.0``): an equal value is valid without a new walk."""


def _copy(v: Any) -> Any:
    if type(v) is dict:
        return {k: _copy(x) for k, x in v.items()}
    if type(v) is list:
        return [_copy(x) for x in v]
    return v


def _namespaces_ok(nss: Any) -> bool:
    if type(nss) is not list or len(nss) > MAX_LIST:
        return False
    for ns in nss:
        if type(ns) is not list or not 0 < len(ns) <= MAX_LIST or not all(map(_s, ns)):
            return False
    return True


def _backend_ok(be: Any) -> bool:
    if type(be) is not dict or be.keys() != _K_BACKEND or not _n(be["kind"]):
        return False
    if not _n(be["saver"]) or (be["store"] is not None and not _n(be["store"])):
        return False
    versions = be["versions"]
    if not _s(be["database"], 4096) or not _names_ok(versions):
        return False
    return all(type(x) is str and 0 < len(x) <= 64 for x in versions.values())


_K_CHECK_DETAIL = _K_CHECK | _K_CHECK_OPT


def _checks_ok(checks: Any) -> bool:
    if type(checks) is not list or not 0 < len(checks) <= MAX_LIST:
        return False
    for c in checks:
        if type(c) is not dict:
            return False
        keys = c.keys()
        if keys != _K_CHECK:
            if keys != _K_CHECK_DETAIL:
                return False
            v = c["detail"]
            if type(v) is not str or not 0 < len(v) <= 4096:
                return False
        v, r = c["name"], c["result"]
        if type(v) is not str or not is_name(v) or type(r) is not str or r not in _CHECK_RESULTS:
            return False
    _SEEN["checks"] = _copy(checks)
    return True


def _residue_ok(residue: Any) -> bool:
    if type(residue) is not list or len(residue) > MAX_LIST:
        return False
    for r in residue:
        if type(r) is not dict or r.keys() != _K_RESIDUE:
            return False
        v, status, detail = r["action"], r["status"], r["detail"]
        if type(v) is not str or not is_name(v) or type(status) is not str:
            return False
        if status not in _RESIDUE_STATUSES or not _names_ok(detail):
            return False
        for v in detail.values():
            t = type(v)
            if t is int:
                if not 0 <= v <= MAX_SAFE_INTEGER:
                    return False
            elif t is str:
                if not 0 < len(v) <= 4096:
                    return False
            elif v is not None and t is not bool:
                return False
    return True


def _out_of_scope_ok(oos: Any) -> bool:
    if type(oos) is not list or not 0 < len(oos) <= MAX_LIST:
        return False
    for o in oos:
        if type(o) is not dict or o.keys() != _K_OOS:
            return False
        v, note = o["id"], o["note"]
        if type(v) is not str or not is_name(v) or type(note) is not str:
            return False
        if not 0 < len(note) <= 4096:
            return False
    _SEEN["out_of_scope"] = _copy(oos)
    return True


def _state(v: Any, path: str) -> dict[str, Any]:
    s = _obj(v, path, _K_PRE)
    _digest(s["digest"], (path, "digest"))
    _int(s["leaves"], (path, "leaves"))
    for name, t in _name_map(s["tables"], (path, "tables")).items():
        t = _obj(t, (path, "tables", name), _K_TABLE_PRE)
        _int(t["rows"], (path, "tables", name, "rows"))
        _int(t["bytes"], (path, "tables", name, "bytes"))
    return s


_SCOPE_KEYS = {
    "thread": _K_SCOPE, "history": _K_SCOPE_HISTORY, "subject": _K_SCOPE_SUBJECT,
    "namespace": _K_SCOPE_NAMESPACE, "redaction": _K_SCOPE, "shred": _K_SCOPE_SHRED,
}  # fmt: skip


def _scope(v: Any, kind: str, full: bool) -> None:
    keys = _SCOPE_KEYS[kind]
    if kind == "namespace":
        _namespace_scope(v)
        return
    if kind == "shred":
        _shred_scope(v)
        return
    if full or type(v) is not dict or v.keys() != keys:
        _obj(v, "predicate.scope", keys, _K_SCOPE_OPT)
    sc = v
    if "store_tombstone" in sc and type(sc["store_tombstone"]) is not bool:
        raise _fail("predicate.scope.store_tombstone", "must be a boolean")

    if kind == "subject":
        _str(sc["subject"], "predicate.scope.subject", max_len=MAX_THREAD_ID)
        threads = _list(sc["threads"], "predicate.scope.threads", 1)
        for i, t in enumerate(threads):
            _str(t, ("predicate.scope.threads", i), max_len=MAX_THREAD_ID)
        if threads != sorted(set(threads)):
            raise _fail("predicate.scope.threads", "must be sorted and unique")
        if sc["discovery"] is not None:
            d = _obj(sc["discovery"], "predicate.scope.discovery", _K_DISCOVERY)
            _str(d["metadata_key"], "predicate.scope.discovery.metadata_key", max_len=256)
    elif full or not _s(sc["thread_id"], MAX_THREAD_ID):
        _str(sc["thread_id"], "predicate.scope.thread_id", max_len=MAX_THREAD_ID)
    if kind == "history" and sc["keep"] != "latest":
        raise _fail("predicate.scope.keep", 'must be "latest"')
    if "privacy" in sc:
        pr = _obj(sc["privacy"], "predicate.scope.privacy", _K_PRIVACY)
        if pr["mode"] != "hmac-sha256":
            raise _fail("predicate.scope.privacy.mode", 'must be "hmac-sha256"')
        _str(pr["key_id"], "predicate.scope.privacy.key_id", is_hex64)
    if "tombstone_policy" in sc:
        if type(sc["tombstone_policy"]) is not str or sc["tombstone_policy"] not in (
            TOMBSTONE_POLICIES
        ):
            raise _fail("predicate.scope.tombstone_policy", f"must be one of {TOMBSTONE_POLICIES}")
        if sc.get("tombstone") is not True:
            raise _fail("predicate.scope.tombstone_policy", "is only allowed with a tombstone")


def _namespace_scope(sc: Any) -> None:
    """Kind ``namespace`` (RECEIPT_SPEC.md 9.7): the erased prefix (labels without
    ``.``; a commitment in privacy mode) and one store namespace (the verifier checks
    that it is the prefix: ``scope_mismatch``)."""
    _obj(sc, "predicate.scope", _K_SCOPE_NAMESPACE, _K_SCOPE_NAMESPACE_OPT)
    labels = _list(sc["namespace"], "predicate.scope.namespace", 1)
    for i, label in enumerate(labels):
        _str(label, ("predicate.scope.namespace", i))
        if "." in label and not label.startswith("hmac-sha256:"):
            raise _fail(("predicate.scope.namespace", i), "a label must not contain '.'")
    # store_namespaces: as for every kind (below); that it is [namespace] is semantics.
    if type(sc["tombstone"]) is not bool:
        raise _fail("predicate.scope.tombstone", "must be a boolean")
    if "privacy" in sc:
        pr = _obj(sc["privacy"], "predicate.scope.privacy", _K_PRIVACY)
        if pr["mode"] != "hmac-sha256":
            raise _fail("predicate.scope.privacy.mode", 'must be "hmac-sha256"')
        _str(pr["key_id"], "predicate.scope.privacy.key_id", is_hex64)


def _shred_scope(sc: Any) -> None:
    """Kind ``shred`` (RECEIPT_SPEC.md 9.16): whose key, the threads bound to it, a
    commitment to its id, and the key store's kind, scrub outcome and backup retention."""
    _obj(sc, "predicate.scope", _K_SCOPE_SHRED)
    _str(sc["subject"], "predicate.scope.subject", max_len=MAX_THREAD_ID)
    if sc["key_scope"] not in ("subject", "thread"):
        raise _fail("predicate.scope.key_scope", 'must be "subject" or "thread"')
    threads = _list(sc["threads"], "predicate.scope.threads")
    for i, t in enumerate(threads):
        _str(t, ("predicate.scope.threads", i), max_len=MAX_THREAD_ID)
    if threads != sorted(set(threads)):
        raise _fail("predicate.scope.threads", "must be sorted and unique")
    _str(sc["key_commitment"], "predicate.scope.key_commitment", is_hex64)
    if sc["tombstone"] is not False:
        raise _fail("predicate.scope.tombstone", "must be false (a shred tombstones nothing)")
    ks = _obj(sc["key_store"], "predicate.scope.key_store", _K_KEY_STORE)
    if ks["kind"] not in ("sqlite", "postgres"):
        raise _fail("predicate.scope.key_store.kind", 'must be "sqlite" or "postgres"')
    if type(ks["scrub"]) is not str or ks["scrub"] not in _RESIDUE_STATUSES:
        raise _fail("predicate.scope.key_store.scrub", "unknown residue status")
    if ks["backup_retention"] is not None:
        _str(ks["backup_retention"], "predicate.scope.key_store.backup_retention", max_len=64)


def _kind_members(p: dict[str, Any], kind: str) -> None:
    """``kept_state`` (history), ``units`` (subject) and ``needles`` (both) exactly
    where their kind has them."""
    if ("kept_state" in p) != (kind == "history"):
        raise _fail("predicate.kept_state", f"is required for history receipts only ({kind})")
    if ("units" in p) != (kind == "subject"):
        raise _fail("predicate.units", f"is required for subject receipts only ({kind})")
    if "needles" in p and kind in ("thread", "shred"):
        raise _fail("predicate.needles", f"is not allowed in {kind} receipts")
    if ("redaction" in p) != (kind == "redaction"):
        raise _fail("predicate.redaction", f"is required for redaction receipts only ({kind})")
    if kind == "redaction":
        if "needles" not in p:
            raise _fail("predicate.needles", "is required for redaction receipts")
        r = _obj(p["redaction"], "predicate.redaction", _K_REDACTION)
        _int(r["checkpoints_before"], "predicate.redaction.checkpoints_before")
        _int(r["checkpoints_after"], "predicate.redaction.checkpoints_after")
        _digest(r["replacement"], "predicate.redaction.replacement")
        if p["scope"]["tombstone"] is not False:
            raise _fail("predicate.scope.tombstone", "must be false in redaction receipts")
        if "tombstone_policy" in p["scope"] or "store_tombstone" in p["scope"]:
            raise _fail("predicate.scope", "a redaction tombstones nothing")
    if kind == "history":
        k = _obj(p["kept_state"], "predicate.kept_state", _K_KEPT)
        _state({x: k[x] for x in _K_PRE}, "predicate.kept_state")
        path: JPath = "predicate.kept_state.checkpoints"
        for i, c in enumerate(_list(k["checkpoints"], path)):
            c = _obj(c, (path, i), _K_KEPT_CP)
            if type(c["checkpoint_ns"]) is not str or len(c["checkpoint_ns"]) > 1024:
                raise _fail((path, i, "checkpoint_ns"), "must be a string")
            _str(c["checkpoint_id"], (path, i, "checkpoint_id"), max_len=256)
    if kind == "subject":
        path = "predicate.units"
        for i, u in enumerate(_list(p["units"], path, 1)):
            u = _obj(u, (path, i), _K_UNIT)
            _str(u["name"], (path, i, "name"), max_len=MAX_THREAD_ID + 16)
            _state({x: u[x] for x in _K_PRE}, f"predicate.units[{i}]")
    if "needles" in p:
        n = _obj(p["needles"], "predicate.needles", _K_NEEDLES)
        if n["commitment"] != "hmac-sha256":
            raise _fail("predicate.needles.commitment", 'must be "hmac-sha256"')
        if n["salt"] is not None:
            salt = _str(n["salt"], "predicate.needles.salt", max_len=64)
            try:
                if len(b64decode(salt)) != 16:
                    raise ValueError
            except ValueError:
                raise _fail("predicate.needles.salt", "must be 16 bytes, base64") from None
        for i, v in enumerate(_list(n["values"], "predicate.needles.values", 1)):
            _str(v, ("predicate.needles.values", i), is_hex64)
        for i, f in enumerate(_list(n["forms"], "predicate.needles.forms", 1)):
            _str(f, ("predicate.needles.forms", i), is_name)
        if n["searched"] not in ("thread", "database"):
            raise _fail("predicate.needles.searched", 'must be "thread" or "database"')
        _int(n["occurrences_after"], "predicate.needles.occurrences_after")


def validate_statement(st: Any) -> dict[str, Any]:
    """Check the statement's structure (the schema); raises ``MalformedReceiptError``."""
    _validate(st, False)
    return st  # type: ignore[no-any-return]


def _validate(st: Any, full: bool) -> None:
    """The rules of a valid statement (see above); ``full`` runs every helper."""
    if type(st) is not dict:
        raise _fail("statement", "must be an object")
    if st.get("_type") != STATEMENT_TYPE:
        raise MalformedReceiptError(
            f"unknown statement _type {st.get('_type')!r}", reason="unknown_type"
        )
    if st.get("predicateType") != PREDICATE_TYPE:
        raise MalformedReceiptError(
            f"unknown predicateType {st.get('predicateType')!r}", reason="unknown_predicate"
        )
    if full or st.keys() != _K_STATEMENT:
        _obj(st, "statement", _K_STATEMENT)
    subjects = st["subject"]
    if full or type(subjects) is not list or len(subjects) != 1:
        _list(subjects, "subject", 1)
        if len(subjects) != 1:
            raise _fail("subject", "must name exactly one erased scope")
    sub = subjects[0]
    if full or type(sub) is not dict or sub.keys() != _K_SUBJECT:
        _obj(sub, "subject[0]", _K_SUBJECT)
    if full or not _s(sub["name"], MAX_THREAD_ID + 64):
        _str(sub["name"], "subject[0].name", max_len=MAX_THREAD_ID + 64)
    if full or not _digest_ok(sub["digest"]):
        _digest(sub["digest"], "subject[0].digest")

    p = st["predicate"]
    if (
        full
        or type(p) is not dict
        or (p.keys() != _K_PREDICATE_THREAD and p.keys() != _K_PREDICATE)
    ):
        _obj(p, "predicate", _K_PREDICATE, _K_PREDICATE_OPT)
    kind = p.get("kind", "thread")
    if type(kind) is not str or kind not in KINDS:
        raise _fail("predicate.kind", f"unknown kind {kind!r}")
    v = p["receipt_id"]
    if full or type(v) is not str or not is_uuid(v):
        _str(v, "predicate.receipt_id", is_uuid)
    v = p["issued_at"]
    if full or type(v) is not str or not is_time(v):
        _str(v, "predicate.issued_at", is_time)
    if type(p["status"]) is not str or p["status"] not in _STATUSES:
        raise _fail("predicate.status", f"unknown status {p['status']!r}")
    want = {"redaction": "redacted", "deferral": "retained"}.get(kind, "erased")
    if p["status"] != want:
        raise _fail("predicate.status", f"must be {want!r} in {kind} receipts")
    if ("deferral" in p) != (kind == "deferral"):
        raise _fail("predicate.deferral", f"is required for deferral receipts only ({kind})")
    if kind == "deferral":  # 9.14: the retained scope has the shape of its own kind
        for member in ("kept_state", "units", "needles", "replay_of", "deferral_of"):
            if member in p:
                raise _fail(("predicate", member), "is not allowed in deferral receipts")
        _scope(p["scope"], _deferral(p["deferral"]), full)
    else:
        _scope(p["scope"], kind, full)
        _kind_members(p, kind)
    sc = p["scope"]
    if kind != "namespace" and sc["checkpoint_namespaces"] != "all":
        raise _fail("predicate.scope.checkpoint_namespaces", 'must be "all"')
    path: JPath = "predicate.scope.store_namespaces"
    if full or not _namespaces_ok(sc["store_namespaces"]):
        for i, ns in enumerate(_list(sc["store_namespaces"], path)):
            for j, part in enumerate(_list(ns, (path, i), 1)):
                _str(part, (path, i, j))
    if type(sc["tombstone"]) is not bool:
        raise _fail("predicate.scope.tombstone", "must be a boolean")

    be = p["backend"]
    if full or not _backend_ok(be):
        _obj(be, "predicate.backend", _K_BACKEND)
        _str(be["kind"], "predicate.backend.kind", is_name)
        _str(be["saver"], "predicate.backend.saver", is_name)
        if be["store"] is not None:
            _str(be["store"], "predicate.backend.store", is_name)
        _str(be["database"], "predicate.backend.database", max_len=4096)
        for k, ver in _name_map(be["versions"], "predicate.backend.versions").items():
            _str(ver, ("predicate.backend.versions", k), max_len=64)

    mk = p["merkle"]
    if full or type(mk) is not dict or mk.keys() != _K_MERKLE:
        _obj(mk, "predicate.merkle", _K_MERKLE)
    if mk["algorithm"] != "rfc9162-sha256":
        raise _fail("predicate.merkle.algorithm", "unknown algorithm")
    if mk["leaf_encoding"] != "erasure-receipts-row-v1":
        raise _fail("predicate.merkle.leaf_encoding", "unknown leaf encoding")

    if full or not _state_ok(p["pre_state"]):
        _state(p["pre_state"], "predicate.pre_state")
    if full or not _state_ok(p["post_state"]):
        _state(p["post_state"], "predicate.post_state")
    methods = p["methods"]
    if full or not _names_ok(methods) or not all(map(_n, methods.values())):
        for k, m in _name_map(methods, "predicate.methods").items():
            _str(m, ("predicate.methods", k), is_name)

    path = "predicate.checks"
    checks = p["checks"]
    if full or (checks != _SEEN.get("checks") and not _checks_ok(checks)):
        for i, c in enumerate(_list(checks, path, 1)):
            c = _obj(c, (path, i), _K_CHECK, _K_CHECK_OPT)
            _str(c["name"], (path, i, "name"), is_name)
            if type(c["result"]) is not str or c["result"] not in _CHECK_RESULTS:
                raise _fail((path, i, "result"), "must be pass or fail")
            if "detail" in c:
                _str(c["detail"], (path, i, "detail"), max_len=4096)

    path = "predicate.residue"
    if full or not _residue_ok(p["residue"]):
        for i, r in enumerate(_list(p["residue"], path)):
            r = _obj(r, (path, i), _K_RESIDUE)
            _str(r["action"], (path, i, "action"), is_name)
            if type(r["status"]) is not str or r["status"] not in _RESIDUE_STATUSES:
                raise _fail((path, i, "status"), "unknown residue status")
            for k, val in _name_map(r["detail"], (path, i, "detail")).items():
                if type(val) is int:
                    _int(val, (path, i, "detail", k))
                elif val is not None and type(val) is not bool:
                    _str(val, (path, i, "detail", k), max_len=4096)

    path = "predicate.out_of_scope"
    oos = p["out_of_scope"]
    if full or (oos != _SEEN.get("out_of_scope") and not _out_of_scope_ok(oos)):
        for i, o in enumerate(_list(oos, path, 1)):
            o = _obj(o, (path, i), _K_OOS)
            _str(o["id"], (path, i, "id"), is_name)
            _str(o["note"], (path, i, "note"), max_len=4096)

    g = p["generator"]
    if (
        full
        or type(g) is not dict
        or g.keys() != _K_GEN
        or not (_n(g["name"]) and _s(g["version"], 64))
    ):
        _obj(g, "predicate.generator", _K_GEN)
        _str(g["name"], "predicate.generator.name", is_name)
        _str(g["version"], "predicate.generator.version", max_len=64)
    if "request" in p or "authorization" in p:  # section 9.6
        validate_request_members(p)
    if "replay_of" in p:  # section 9.11: the erasure a replay after a restore repeats
        _str(p["replay_of"], "predicate.replay_of", is_uuid)
    if "targets" in p:  # section 9.13: the application's own data erased with the scope
        _targets(p["targets"])
    if "deferral_of" in p:  # section 9.14: the deferral this erasure carries out
        if kind == "namespace":
            raise _fail("predicate.deferral_of", "is not allowed in namespace receipts")
        _str(p["deferral_of"], "predicate.deferral_of", is_uuid)


_K_TARGET = frozenset(("name", "type", "key", "method"))
_K_TARGET_OPT = frozenset(
    ("table", "key_column", "database", "after", "store", "metadata_key", "tombstone")
)
TARGET_TYPES = ("sql", "vectorstore", "function")
"""``targets[].type`` (RECEIPT_SPEC.md 9.13)."""


def _target_name(v: str) -> bool:
    return len(v) <= 56 and is_name(v) and ":" not in v


def _targets(targets: Any) -> None:
    """The ``targets`` member (9.13): one entry per target (their order and uniqueness
    are semantics: ``verify``)."""
    path = "predicate.targets"
    for i, t in enumerate(_list(targets, path, 1)):
        t = _obj(t, (path, i), _K_TARGET, _K_TARGET_OPT)
        _str(t["name"], (path, i, "name"), _target_name)
        if t["type"] not in TARGET_TYPES:
            raise _fail((path, i, "type"), f"unknown target type {t['type']!r}")
        if t["key"] not in ("thread", "subject"):
            raise _fail((path, i, "key"), 'must be "thread" or "subject"')
        if t["method"] not in ("atomic-transaction", "sweep"):
            raise _fail((path, i, "method"), 'must be "atomic-transaction" or "sweep"')
        if "after" in t and t["after"] != "threads_verified_gone":
            raise _fail((path, i, "after"), 'must be "threads_verified_gone"')
        for k in ("table", "key_column", "store", "metadata_key"):
            if k in t:
                _str(t[k], (path, i, k), max_len=256)
        if "database" in t:
            _str(t["database"], (path, i, "database"), max_len=4096)
        if "tombstone" in t and t["tombstone"] is not True:
            raise _fail((path, i, "tombstone"), "must be true when present")


def _deferral(v: Any) -> str:
    """The ``deferral`` member (9.14); returns the kind of the retained scope."""
    d = _obj(v, "predicate.deferral", _K_DEFERRAL)
    of = d["of_kind"]
    if type(of) is not str or of not in DEFERRAL_KINDS:
        raise _fail("predicate.deferral.of_kind", f"must be one of {', '.join(DEFERRAL_KINDS)}")
    basis = _str(d["basis"], "predicate.deferral.basis", max_len=MAX_BASIS)
    if not basis.strip():
        raise _fail("predicate.deferral.basis", "must not be blank")
    if d["code"] is not None:
        _str(d["code"], "predicate.deferral.code", is_name)
    _str(d["until"], "predicate.deferral.until", is_time, max_len=64)
    return of


def statement_is_valid(st: Any) -> bool:
    """Whether :func:`validate_statement` accepts a thread receipt's statement, without
    raising (the batch check's old name). Other kinds and optional members answer False:
    "ask ``validate_statement``", not necessarily invalid."""
    p = st.get("predicate") if type(st) is dict else None
    if type(p) is not dict or not p.keys() <= _K_PREDICATE_THREAD:
        return False
    sc = p.get("scope")
    if p.get("kind", "thread") != "thread" or type(sc) is not dict:
        return False
    if not sc.keys() <= _K_SCOPE | {"tombstone_policy", "store_tombstone"}:
        return False
    try:
        _validate(st, False)
    except MalformedReceiptError:
        return False
    return True


# -- the receipt ------------------------------------------------------------------------


class Signature:
    """One DSSE signature: the signer's key id (a hint) and the raw signature bytes."""

    __slots__ = ("keyid", "sig")

    keyid: str
    sig: bytes

    def __init__(self, keyid: str, sig: bytes) -> None:
        object.__setattr__(self, "keyid", keyid)
        object.__setattr__(self, "sig", sig)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Signature is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and (self.keyid, self.sig) == (other.keyid, other.sig)

    def __hash__(self) -> int:
        return hash((self.keyid, self.sig))

    def __repr__(self) -> str:
        return f"Signature(keyid={str(self.keyid)[:16]}...)"

    def to_json(self) -> dict[str, str]:
        """The JSON member; ``keyid`` is left out when empty (a DSSE signature without
        a key id hint)."""
        if not self.keyid:
            return {"sig": b64encode(self.sig)}
        return {"keyid": self.keyid, "sig": b64encode(self.sig)}


_K_FILE = frozenset(("media_type", "statement", "signatures"))
_K_FILE_OPT = frozenset(("public_key",))
_K_SIG = frozenset(("keyid", "sig"))
_K_PUB = frozenset(("keyid", "ed25519"))
_K_DSSE = frozenset(("payloadType", "payload", "signatures"))


def _b64(v: Any, path: JPath, max_len: int = 4096) -> bytes:
    s = _str(v, path, None, max_len)
    try:
        return b64decode(s)
    except ValueError:
        raise _fail(path, "is not valid base64") from None


_K_SIG_DSSE = frozenset(("sig",))


def _signatures(v: Any, *, dsse: bool = False) -> tuple[Signature, ...]:
    """Parse signatures. In a DSSE envelope ``keyid`` is optional (DSSE makes it a hint):
    absent or ``""`` (what many DSSE producers write for "no hint") is kept as "" and the
    verifier then tries each trusted key. Anything else must be a lowercase hex key id;
    a null, number, boolean, array or object is malformed, never "no hint"."""
    out = []
    for i, s in enumerate(_list(v, "signatures", 1)):
        s = _obj(s, ("signatures", i), _K_SIG_DSSE if dsse else _K_SIG, _K_SIG)
        kid = s.get("keyid", "")
        if not (dsse and kid == "" and type(kid) is str):
            _str(kid, ("signatures", i, "keyid"), is_hex64)
        out.append(Signature(kid, _b64(s["sig"], ("signatures", i, "sig"), 128)))
    return tuple(out)


# -- request and authorization members (RECEIPT_SPEC.md 9.6) ------------------------
# Their schema is part of a valid receipt, so it lives here; request.py builds and
# checks the objects and re-exports these names.

AUTHORIZATION_TYPE = "https://langgraph-erasure-receipts.dev/authorization/v1"
"""The authorization statement's ``_type``."""
MAX_FIELD = 256
"""Longest request id, basis and requester (characters)."""
MAX_AUTH_SIGNATURES = 16

_K_AUTH = frozenset(("statement", "signatures"))
_K_AUTH_ST = frozenset(("_type", "request_id", "scope", "not_after"))
_K_AUTH_SIG = frozenset(("keyid", "sig"))
_K_AUTH_SCOPE = {
    "thread": frozenset(("kind", "thread_id", "store_namespaces")),
    "history": frozenset(("kind", "thread_id", "store_namespaces", "keep")),
    "subject": frozenset(("kind", "subject", "threads", "discovery", "store_namespaces")),
}
MAX_AUTH_THREADS = 1000
"""Explicit threads one subject authorization names (a subject receipt's limit)."""


def _namespaces(v: Any, path: JPath) -> list[list[str]]:
    out = []
    for i, ns in enumerate(_list(v, path)):
        out.append([_str(part, (path, i, j)) for j, part in enumerate(_list(ns, (path, i), 1))])
    return out


def _validate_scope(v: Any, path: JPath) -> dict[str, Any]:
    kind = v.get("kind") if type(v) is dict else None
    if type(kind) is not str or kind not in AUTH_KINDS:
        raise _fail((path, "kind"), f"must be one of {', '.join(AUTH_KINDS)}")
    sc = _obj(v, path, _K_AUTH_SCOPE[kind])
    if kind == "subject":
        _str(sc["subject"], (path, "subject"), max_len=MAX_THREAD_ID)
        threads = _list(sc["threads"], (path, "threads"))
        if len(threads) > MAX_AUTH_THREADS:
            raise _fail((path, "threads"), f"must have at most {MAX_AUTH_THREADS} items")
        for i, t in enumerate(threads):
            _str(t, (path, "threads", i), max_len=MAX_THREAD_ID)
        if threads != sorted(set(threads)):
            raise _fail((path, "threads"), "must be sorted and unique")
        if sc["discovery"] is not None:
            d = _obj(sc["discovery"], (path, "discovery"), _K_DISCOVERY)
            _str(d["metadata_key"], (path, "discovery", "metadata_key"), max_len=256)
        elif not threads:
            raise _fail((path, "threads"), "must name a thread when discovery is null")
    else:
        _str(sc["thread_id"], (path, "thread_id"), max_len=MAX_THREAD_ID)
    if kind == "history" and sc["keep"] != "latest":
        raise _fail((path, "keep"), 'must be "latest"')
    _namespaces(sc["store_namespaces"], (path, "store_namespaces"))
    return sc


def _validate_authorization(v: Any, path: JPath) -> tuple[dict[str, Any], tuple[Signature, ...]]:
    a = _obj(v, path, _K_AUTH)
    st = _obj(a["statement"], (path, "statement"), _K_AUTH_ST)
    if st["_type"] != AUTHORIZATION_TYPE:
        raise _fail((path, "statement", "_type"), f"must be {AUTHORIZATION_TYPE!r}")
    _str(st["request_id"], (path, "statement", "request_id"), max_len=MAX_FIELD)
    _validate_scope(st["scope"], (path, "statement", "scope"))
    _str(st["not_after"], (path, "statement", "not_after"), is_time, max_len=64)
    sigs = _list(a["signatures"], (path, "signatures"), 1)
    if len(sigs) > MAX_AUTH_SIGNATURES:
        raise _fail((path, "signatures"), f"must have at most {MAX_AUTH_SIGNATURES} items")
    out = []
    for i, s in enumerate(sigs):
        s = _obj(s, (path, "signatures", i), _K_AUTH_SIG)
        kid = _str(s["keyid"], (path, "signatures", i, "keyid"), is_hex64)
        out.append(Signature(kid, _b64(s["sig"], (path, "signatures", i, "sig"), 128)))
    return st, tuple(out)


_K_REQUEST = frozenset(("id", "basis", "requester", "received_at", "due"))


def validate_request_members(p: Mapping[str, Any]) -> None:
    """Schema of the predicate's optional ``request`` and ``authorization`` members
    (:func:`validate_statement` checks them when either is present); raises
    ``MalformedReceiptError`` with reason ``schema``."""
    if "request" in p:
        r = _obj(p["request"], "predicate.request", _K_REQUEST)
        _str(r["id"], "predicate.request.id", max_len=MAX_FIELD)
        _str(r["basis"], "predicate.request.basis", max_len=MAX_FIELD)
        if r["requester"] is not None:
            _str(r["requester"], "predicate.request.requester", max_len=MAX_FIELD)
        for k in ("received_at", "due"):
            if r[k] is not None:
                _str(r[k], ("predicate.request", k), is_time, max_len=64)
    if "authorization" in p:
        if "request" not in p:
            raise _fail("predicate.authorization", "requires predicate.request")
        _validate_authorization(p["authorization"], "predicate.authorization")


def statement_from_payload(payload: bytes) -> dict[str, Any]:
    """The statement a signed payload encodes: a fresh strict parse of exactly these bytes,
    schema-checked, and refused unless the payload is its RFC 8785 form (so the signed
    bytes and the statement have one meaning)."""
    st = validate_statement(parse_strict(payload))
    if canonicalize_ascii_keys(st) != payload:
        raise MalformedReceiptError(
            "DSSE payload is not in RFC 8785 canonical form", reason="not_canonical"
        )
    return st


class Receipt:
    """A signed erasure statement plus its signatures and (optionally) the public key.

    ``payload`` is the RFC 8785 form of ``statement``: the bytes that DSSE wraps and the
    signatures cover (through the DSSE pre-authentication encoding). Nothing here is
    verified: ``verify_receipt`` checks the signatures over ``payload`` and reports the
    statement parsed afresh from those bytes, never ``statement`` itself.

    Attributes cannot be reassigned, and the constructor keeps its own copy of the
    statement and refuses a ``payload`` that is not that statement's RFC 8785 form.
    ``to_json``/``to_dict`` refuse a statement that was changed in place afterwards.
    (A plain class, not a dataclass: ``dataclasses`` alone would add a third of the
    verifier's cold-start time.)
    """

    __slots__ = ("payload", "public_key", "signatures", "statement")

    statement: dict[str, Any]
    signatures: tuple[Signature, ...]
    public_key: PublicKey | None
    payload: bytes

    def __init__(
        self,
        statement: Mapping[str, Any],
        signatures: Sequence[Signature],
        public_key: PublicKey | None = None,
        payload: bytes = b"",
    ) -> None:
        import json

        try:  # a private copy, so the caller's dict cannot change this receipt later
            st = json.loads(json.dumps(statement, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise MalformedReceiptError(f"statement is not JSON: {exc}", reason="schema") from None
        validate_statement(st)
        canonical = canonicalize(st)
        if payload and payload != canonical:
            raise MalformedReceiptError(
                "payload is not the RFC 8785 form of statement", reason="not_canonical"
            )
        sigs = tuple(signatures)
        if not all(isinstance(s, Signature) for s in sigs):
            raise TypeError("signatures must be Signature objects")
        if public_key is not None and not isinstance(public_key, PublicKey):
            raise TypeError("public_key must be a PublicKey or None")
        self._init(st, sigs, public_key, canonical)

    def _init(
        self,
        statement: dict[str, Any],
        signatures: tuple[Signature, ...],
        public_key: PublicKey | None,
        payload: bytes,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "statement", statement)
        set_(self, "signatures", signatures)
        set_(self, "public_key", public_key)
        set_(self, "payload", payload)

    @classmethod
    def _new(
        cls,
        statement: dict[str, Any],
        signatures: tuple[Signature, ...],
        public_key: PublicKey | None,
        payload: bytes,
    ) -> Receipt:
        """Internal: the caller guarantees ``payload`` is the canonical form of a freshly
        parsed, validated ``statement`` that nobody else holds."""
        self = cls.__new__(cls)
        self._init(statement, signatures, public_key, payload)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Receipt is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Receipt is immutable; cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Receipt) and (
            self.payload,
            self.signatures,
            self.public_key,
        ) == (other.payload, other.signatures, other.public_key)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Receipt(receipt_id={self.receipt_id!r}, thread_id={self.thread_id!r})"

    # convenience accessors for the fields people look at first
    @property
    def predicate(self) -> dict[str, Any]:
        """The statement's ``predicate`` (unverified, like every accessor here)."""
        p: dict[str, Any] = self.statement["predicate"]
        return p

    @property
    def receipt_id(self) -> str:
        """The erasure's UUID, ``predicate.receipt_id`` (unverified)."""
        return str(self.predicate["receipt_id"])

    @property
    def thread_id(self) -> str:
        """The erased thread, ``predicate.scope.thread_id`` - or, for a subject receipt,
        the subject (unverified)."""
        scope = self.predicate["scope"]
        return str(scope["thread_id"] if "thread_id" in scope else scope["subject"])

    @property
    def status(self) -> str:
        """``predicate.status``; "erased", or "redacted" for a redaction receipt (unverified)."""
        return str(self.predicate["status"])

    @property
    def pre_digest(self) -> str:
        """Hex RFC 9162 root of the rows before deletion, ``predicate.pre_state.digest``
        (unverified)."""
        return str(self.predicate["pre_state"]["digest"]["sha256"])

    def signed_bytes(self) -> bytes:
        """The DSSE pre-authentication encoding of ``payload``: what signatures cover."""
        return pae(DSSE_PAYLOAD_TYPE, self.payload)

    @classmethod
    def sign(
        cls, statement: Mapping[str, Any], signer: Signer, *, embed_key: bool = True
    ) -> Receipt:
        """Schema-check ``statement``, sign its RFC 8785 form over DSSE, return the receipt.

        ``embed_key`` writes the public key into the file as a convenience; verifiers
        never trust an embedded key by itself.
        """
        import json

        st = validate_statement(json.loads(json.dumps(statement)))
        # The validator admits only ASCII member names and the integer domain: the fast
        # RFC 8785 form applies (it is what verification recomputes), ~10x the reference.
        payload = canonicalize_ascii_keys(st)
        sig = Signature(signer.key_id, signer.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
        return cls._new(st, (sig,), signer.public_key if embed_key else None, payload)

    def to_dict(self) -> dict[str, Any]:
        """The receipt file's JSON object; refuses if ``statement`` was changed in place
        after signing (the file would claim what the signature does not cover)."""
        try:
            same = canonicalize_ascii_keys(self.statement) == self.payload
        except (MalformedReceiptError, TypeError, ValueError):
            same = False
        if not same:
            raise MalformedReceiptError(
                "statement was modified after signing; it no longer matches the payload",
                reason="not_canonical",
            )
        doc: dict[str, Any] = {
            "media_type": RECEIPT_MEDIA_TYPE,
            "statement": self.statement,
            "signatures": [s.to_json() for s in self.signatures],
        }
        if self.public_key is not None:
            doc["public_key"] = {"keyid": self.public_key.key_id, "ed25519": self.public_key.b64()}
        return doc

    def to_json(self) -> bytes:
        """The receipt file: :meth:`to_dict` as indented UTF-8 JSON plus a final newline.

        The layout is ``json.dumps(indent=2, ensure_ascii=False)``'s, written by orjson
        (byte-identical for a valid statement, which ``to_dict`` insists on; ~7x faster),
        and it is the layout batch verification's fast path recognises."""
        import orjson  # the erasure side's; the verify side never writes receipts

        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"

    def to_dsse(self) -> dict[str, Any]:
        """The standard DSSE envelope: same payload bytes, same signatures."""
        return {
            "payloadType": DSSE_PAYLOAD_TYPE,
            "payload": b64encode(self.payload),
            "signatures": [s.to_json() for s in self.signatures],
        }

    @classmethod
    def from_json(cls, data: bytes | str) -> Receipt:
        """Strictly parse a receipt file or a DSSE envelope (signatures not checked).

        ``data`` is the file's bytes, or its text (``str``, encoded as UTF-8 first)."""
        if isinstance(data, str):
            try:
                data = data.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedReceiptError(
                    "text is not valid Unicode (lone surrogate)", reason="not_utf8"
                ) from None
        doc = parse_own_layout(data)
        if doc is not None:  # a batch's fast path; any doubt goes the strict way
            try:
                return cls.from_obj(doc)
            except MalformedReceiptError:
                pass  # parse_strict below gives the precise reason (e.g. "float")
        return cls.from_obj(parse_strict(data))

    @classmethod
    def from_obj(cls, doc: Any) -> Receipt:
        """:meth:`from_json` for an already parsed document (receipt file or DSSE
        envelope); signatures not checked. Raises ``MalformedReceiptError``."""
        if type(doc) is not dict:
            raise _fail("document", "must be an object")
        if "payloadType" in doc:
            return cls._from_dsse(doc)
        if doc.get("media_type") != RECEIPT_MEDIA_TYPE:
            raise MalformedReceiptError(
                f"unknown media_type {doc.get('media_type')!r}", reason="unknown_version"
            )
        _obj(doc, "document", _K_FILE, _K_FILE_OPT)
        st = validate_statement(doc["statement"])
        pub = None
        if "public_key" in doc:
            pk = _obj(doc["public_key"], "public_key", _K_PUB)
            kid = _str(pk["keyid"], "public_key.keyid", is_hex64)
            raw = _b64(pk["ed25519"], "public_key.ed25519", 64)
            if len(raw) != 32:
                raise _fail("public_key.ed25519", "must be 32 bytes")
            if key_id(raw) != kid:
                raise MalformedReceiptError(
                    "embedded public key does not match its keyid", reason="keyid_mismatch"
                )
            pub = PublicKey.from_raw(raw)
        return cls._new(st, _signatures(doc["signatures"]), pub, canonicalize_ascii_keys(st))

    @classmethod
    def _from_dsse(cls, env: dict[str, Any]) -> Receipt:
        _obj(env, "envelope", _K_DSSE)
        if env["payloadType"] != DSSE_PAYLOAD_TYPE:
            raise MalformedReceiptError(
                f"unknown payloadType {env['payloadType']!r}", reason="unknown_type"
            )
        payload = _b64(env["payload"], "payload", 1 << 20)
        st = statement_from_payload(payload)
        return cls._new(st, _signatures(env["signatures"], dsse=True), None, payload)

    def save(self, path: str | os.PathLike[str], *, exist_ok: bool = False) -> str:
        """Write durably: temp file, fsync, atomic rename, fsync of the directory."""
        return write_durably(path, self.to_json(), exist_ok=exist_ok)


def write_durably(
    path: str | os.PathLike[str], data: bytes, *, exist_ok: bool = False, mode: int = 0o644
) -> str:
    """Write ``data`` so that after return it survives a crash: never a partial file."""
    import tempfile  # not on the verify path

    path = os.fspath(path)
    if os.path.exists(path) and not exist_ok:
        raise FileExistsError(f"{path} already exists")
    directory = os.path.dirname(path) or "."
    # A bounded temporary name: the file's own name may be up to NAME_MAX.
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)[:32]}.", dir=directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exist_ok:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if someone created the file meanwhile
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return path


def build_statement(
    *,
    receipt_id: str,
    issued_at: str,
    thread_id: str | None,
    store_namespaces: Sequence[Sequence[str]],
    tombstone: bool,
    backend: Mapping[str, Any],
    pre_digest: str,
    pre_tables: Mapping[str, Mapping[str, int]],
    post_digest: str,
    post_tables: Mapping[str, Mapping[str, int]],
    methods: Mapping[str, str],
    checks: Sequence[Mapping[str, str]],
    residue: Sequence[Mapping[str, Any]],
    generator_version: str,
    kind: str | None = None,
    scope: Mapping[str, Any] | None = None,
    subject_name: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble an erasure statement; the engine calls this only after verification.

    Without ``kind`` it is a thread receipt as receipts were before kinds existed (no
    ``kind`` member). ``scope`` replaces the thread scope built from ``thread_id``,
    ``store_namespaces`` and ``tombstone``; ``subject_name`` the subject's name; ``extra``
    adds kind-specific predicate members (``kept_state``, ``units``, ``needles``, ...).
    """
    if scope is None:
        scope = {
            "thread_id": thread_id,
            "checkpoint_namespaces": "all",
            "store_namespaces": [list(ns) for ns in store_namespaces],
            "tombstone": tombstone,
        }
    if subject_name is None:
        subject_name = f"langgraph-thread:{thread_id}"
    head = {} if kind is None else {"kind": kind}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": {"sha256": pre_digest}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            **head,
            "receipt_id": receipt_id,
            "issued_at": issued_at,
            "status": "redacted" if kind == "redaction" else "erased",
            "scope": dict(scope),
            "backend": dict(backend),
            "merkle": {"algorithm": "rfc9162-sha256", "leaf_encoding": "erasure-receipts-row-v1"},
            "pre_state": {
                "digest": {"sha256": pre_digest},
                "leaves": sum(t["rows"] for t in pre_tables.values()),
                "tables": {k: dict(v) for k, v in pre_tables.items()},
            },
            "post_state": {
                "digest": {"sha256": post_digest},
                "leaves": sum(t["rows"] for t in post_tables.values()),
                "tables": {k: dict(v) for k, v in post_tables.items()},
            },
            "methods": dict(methods),
            "checks": [dict(c) for c in checks],
            "residue": [dict(r) for r in residue],
            "out_of_scope": [{"id": i, "note": n} for i, n in OUT_OF_SCOPE],
            "generator": {"name": "langgraph-erasure-receipts", "version": generator_version},
            **(extra or {}),
        },
    }
