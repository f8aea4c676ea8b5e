"""Verify erasure receipts: returns only verified facts, or raises.

Imports nothing from LangGraph or any database driver, so auditors can run it anywhere.
Order of checks: strict parse and schema -> a signature by a *trusted* key (an embedded
key is never trusted by itself) -> the key was valid when the receipt was issued -> the
statement's own semantics (an "erased" receipt must describe a verified empty state).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ._input import _display as _display  # re-exported: the CLI modules use it
from ._input import check_size as check_size
from ._input import read_input
from .errors import (
    MalformedReceiptError,
    ReceiptSemanticsError,
    SignatureError,
    UntrustedKeyError,
)
from .receipt import (
    EMPTY_ROOT_HEX,
    REQUIRED_OUT_OF_SCOPE,
    Receipt,
    Signature,
    is_hex64,
    statement_from_payload,
)
from .signing import PublicKey
from .trust import ROLES as ROLES  # re-exported: trust.py is their home
from .trust import TrustedKey, TrustStore

__all__ = [
    "REASONS",
    "TrustStore",
    "TrustedKey",
    "VerifiedReceipt",
    "check_residue",
    "check_semantics",
    "read_input",
    "verify_receipt",
]

REASONS: tuple[tuple[str, int, str], ...] = (
    ("ok", 0, "verified"),
    ("unreadable", 3, "the input could not be read"),
    ("too_large", 1, "input over 1 MiB"),
    ("not_utf8", 1, "not UTF-8, a byte-order mark, or a lone surrogate"),
    ("not_json", 1, "not JSON, trailing data, NaN/Infinity, too deep"),
    ("duplicate_key", 1, "an object repeats a member name"),
    ("float", 1, "a non-integer number"),
    ("unknown_version", 1, "unknown media_type"),
    ("unknown_type", 1, "unknown statement _type or DSSE payloadType"),
    ("unknown_predicate", 1, "unknown predicateType"),
    ("schema", 1, "structure, type or format does not match the schema"),
    ("integer_range", 1, "an integer outside 0..2^53-1"),
    ("keyid_mismatch", 1, "embedded public key does not match its keyid"),
    ("not_canonical", 1, "signed payload is not the RFC 8785 form of its statement"),
    ("no_trusted_keys", 1, "no trusted keys were given"),
    ("bad_signature", 1, "a signature naming a trusted key does not verify"),
    ("untrusted_key", 1, "no signature by a trusted key"),
    ("key_not_valid_at_time", 1, "trusted key not valid at issued_at"),
    ("inconsistent", 1, "leaves, digests or table sets disagree"),
    ("subject_digest_mismatch", 1, "subject digest differs from the pre-state digest"),
    ("subject_name_mismatch", 1, "subject name does not name the scope's thread"),
    ("not_empty", 1, "status erased but the post-state is not empty"),
    ("check_failed", 1, "status erased but a check did not pass"),
    ("out_of_scope_missing", 1, "a required out_of_scope id is missing"),
    ("units_mismatch", 1, "a subject receipt's units do not add up to its pre-state"),
    ("needles_remain", 1, "status erased but a needle still occurs"),
    ("scope_mismatch", 1, "tables, methods and backend do not match the scope"),
    ("residue_missing", 1, "a residue disclosure the backend must make is missing"),
    ("authorization_mismatch", 1, "the authorization names another request or scope"),
    ("authorization_expired", 1, "the erasure began after the authorization's not_after"),
    ("authorization_untrusted", 1, "the authorization is not signed by a trusted approver"),
    ("authorization_bad_signature", 1, "an approver's signature does not verify"),
    ("authorization_missing", 1, "an authorization was required but the receipt has none"),
    ("not_in_log", 1, "verified, but not in the --log receipt log"),
    (
        "not_witnessed",
        1,
        "in the log, but after the last cosigned checkpoint",
    ),
    ("malformed_proof", 1, "the --proof file is not a tlog-proof bundle"),
    ("proof_mismatch", 1, "the receipt is not at the proof's index under its checkpoint"),
    ("bad_checkpoint", 1, "the checkpoint is malformed"),
    ("bad_origin", 1, "the checkpoint's origin line is malformed"),
    ("unknown_log", 1, "the checkpoint is not signed by a log the policy lists"),
    ("bad_log_signature", 1, "the log's signature on the checkpoint does not verify"),
    ("bad_cosignature", 1, "a witness's cosignature does not verify"),
    ("quorum_not_met", 1, "the witnesses that cosigned do not meet the policy's quorum"),
    ("malformed_timestamp", 1, "the RFC 3161 time-stamp is not readable"),
    ("timestamp_mismatch", 1, "the time-stamp is over another checkpoint"),
    ("untrusted_tsa", 1, "the time-stamp is not signed by the TSA certificate given"),
    ("tsa_cert_not_valid", 1, "the time-stamp's time is outside the TSA certificate's validity"),
    (
        "issued_after_timestamp",
        1,
        "issued_at is after a time-stamped checkpoint holding it",
    ),
    ("internal_error", 1, "a bug in the verifier"),
)
"""Every per-file ``reason`` code ``receipt verify`` reports: (code, exit code, meaning).
The single source of truth: schemas/verify-result.schema.json lists the same codes in
its enum and RECEIPT_SPEC.md section 6 in its table (the tests check all three agree)."""


class VerifiedReceipt:
    """Facts established by verification, and nothing else.

    Every field comes from the statement parsed afresh from the signed payload (or from
    the trusted key that verified it); ``statement`` is that parse, a dict no one else
    holds. Attributes are read-only.
    """

    __slots__ = (
        "approver", "approver_key_id", "issued_at", "key_id", "key_name", "methods",
        "pre_digest", "receipt_id", "request", "residue", "sla_seconds", "statement",
        "status", "thread_id",
    )  # fmt: skip

    receipt_id: str
    thread_id: str
    status: str
    issued_at: str
    pre_digest: str
    key_id: str
    key_name: str
    methods: dict[str, str]
    residue: tuple[tuple[str, str], ...]
    statement: dict[str, Any]
    request: dict[str, Any] | None
    """The verified ``request`` member (RECEIPT_SPEC.md 9.6), or None."""
    approver: str | None
    """The trusted approver key's name (its key id if unnamed), or None."""
    approver_key_id: str | None
    sla_seconds: int | None
    """Whole seconds from ``request.received_at`` to ``issued_at``, or None."""

    def __init__(
        self,
        *,
        receipt_id: str,
        thread_id: str,
        status: str,
        issued_at: str,
        pre_digest: str,
        key_id: str,
        key_name: str,
        statement: dict[str, Any],
        methods: dict[str, str] | None = None,
        residue: tuple[tuple[str, str], ...] = (),
        request: dict[str, Any] | None = None,
        approver: str | None = None,
        approver_key_id: str | None = None,
        sla_seconds: int | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "receipt_id", receipt_id)
        set_(self, "thread_id", thread_id)
        set_(self, "status", status)
        set_(self, "issued_at", issued_at)
        set_(self, "pre_digest", pre_digest)
        set_(self, "key_id", key_id)
        set_(self, "key_name", key_name)
        set_(self, "statement", statement)
        set_(self, "methods", dict(methods or {}))
        set_(self, "residue", tuple(residue))
        set_(self, "request", request)
        set_(self, "approver", approver)
        set_(self, "approver_key_id", approver_key_id)
        set_(self, "sla_seconds", sla_seconds)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"VerifiedReceipt is read-only; cannot set {name!r}")

    def __repr__(self) -> str:
        return (
            f"VerifiedReceipt(receipt_id={self.receipt_id!r}, thread_id={self.thread_id!r}, "
            f"key_id={self.key_id[:16]}...)"
        )


def check_semantics(statement: dict[str, Any]) -> None:
    """Cross-field rules the schema cannot express; raises ``ReceiptSemanticsError``."""
    p = statement["predicate"]
    pre, post = p["pre_state"], p["post_state"]

    def bad(msg: str, reason: str = "inconsistent") -> ReceiptSemanticsError:
        return ReceiptSemanticsError(msg, reason=reason)

    if statement["subject"][0]["digest"]["sha256"] != pre["digest"]["sha256"]:
        raise bad("subject digest differs from the pre-state digest", "subject_digest_mismatch")
    kind = p.get("kind", "thread")
    scope = p["scope"]
    named = kind
    if kind == "deferral":  # 9.14: it names the retained scope as an erasure of it would
        _check_deferral(p, bad)
        named = p["deferral"]["of_kind"]
    if named == "thread":
        name = f"langgraph-thread:{scope['thread_id']}"
    elif named == "history":
        name = f"langgraph-thread-history:{scope['thread_id']}"
    elif named == "namespace":  # 9.7
        name = "langgraph-store-namespace:" + ".".join(scope["namespace"])
    elif kind == "redaction":  # 9.12
        name = f"langgraph-thread-redaction:{scope['thread_id']}"
    elif kind == "shred":  # 9.16
        prefix = (
            "langgraph-shred:" if scope["key_scope"] == "subject" else "langgraph-shred-thread:"
        )
        name = prefix + scope["subject"]
    else:
        name = f"langgraph-subject:{scope['subject']}"
    if statement["subject"][0]["name"] != name:
        raise bad("subject name does not name the scope", "subject_name_mismatch")
    if kind == "history":
        _check_kept(p["kept_state"], bad)
    elif kind == "subject":
        _check_units(p, bad)
    if "privacy" in scope:
        _check_privacy(p, bad)
    if p.get("replay_of") == p["receipt_id"]:  # section 9.11
        raise bad("replay_of names the receipt itself, not the erasure it repeats")
    if p.get("deferral_of") == p["receipt_id"]:  # section 9.14
        raise bad("deferral_of names the receipt itself, not the deferral it carries out")
    needles = p.get("needles")
    if needles is not None and p["status"] == "erased" and needles["occurrences_after"]:
        raise bad("status is erased but a needle still occurs", "needles_remain")
    for label, s in (("pre", pre), ("post", post)):
        rows = sum(t["rows"] for t in s["tables"].values())
        if rows != s["leaves"]:
            raise bad(f"{label}-state leaves ({s['leaves']}) != sum of table rows ({rows})")
        if (s["leaves"] == 0) != (s["digest"]["sha256"] == EMPTY_ROOT_HEX):
            raise bad(f"{label}-state digest does not match its leaf count")
    if set(pre["tables"]) != set(post["tables"]):
        raise bad("pre- and post-state list different tables")
    if p["status"] == "erased":
        left = {k: t["rows"] for k, t in post["tables"].items() if t["rows"] or t["bytes"]}
        if left or post["leaves"] or post["digest"]["sha256"] != EMPTY_ROOT_HEX:
            raise bad(f"status is erased but the post-state is not empty: {left}", "not_empty")
        failed = [c["name"] for c in p["checks"] if c["result"] != "pass"]
        if failed:
            raise bad(f"status is erased but checks failed: {', '.join(failed)}", "check_failed")
    missing = REQUIRED_OUT_OF_SCOPE - {o["id"] for o in p["out_of_scope"]}
    if missing:
        raise bad(f"out_of_scope lacks {', '.join(sorted(missing))}", "out_of_scope_missing")
    # Rules added after the ones above (RECEIPT_SPEC.md 6.1): checked last, so a receipt
    # that broke an earlier rule keeps its reason.
    _check_counts(p, bad)
    _check_tables_and_methods(p, bad)
    if kind == "history":
        if scope["tombstone"]:
            raise bad("a history receipt's thread lives on: scope.tombstone must be false")
        if needles is not None and needles["searched"] != "thread":
            raise bad('a history receipt\'s needles are searched in the thread ("thread")')
    if kind == "redaction":
        _check_redaction(p, bad)


def _check_redaction(p: dict[str, Any], bad: Any) -> None:
    """Kind ``redaction`` (RECEIPT_SPEC.md 9.12): the same rows before and after (each
    table's row count unchanged), at least one, no needle left, every check passed and
    every checkpoint kept."""
    pre, post, r = p["pre_state"], p["post_state"], p["redaction"]
    if p["needles"]["occurrences_after"]:
        raise bad("status is redacted but a needle still occurs", "needles_remain")
    if p["needles"]["searched"] != "thread":
        raise bad('a redaction receipt\'s needles are searched in the thread ("thread")')
    if not pre["leaves"]:
        raise bad("a redaction receipt names no rewritten row")
    changed = {k: (t["rows"], post["tables"][k]["rows"]) for k, t in pre["tables"].items()
               if post["tables"][k]["rows"] != t["rows"]}  # fmt: skip
    if changed:
        raise bad(f"a redaction rewrites rows in place; row counts differ: {changed}")
    failed = [c["name"] for c in p["checks"] if c["result"] != "pass"]
    if failed:
        raise bad(f"status is redacted but checks failed: {', '.join(failed)}", "check_failed")
    if r["checkpoints_before"] != r["checkpoints_after"]:
        raise bad(
            f"a redaction keeps every checkpoint: {r['checkpoints_before']} before, "
            f"{r['checkpoints_after']} after"
        )


TABLES = {
    "sqlite": frozenset(("checkpoints", "writes", "store", "store_vectors")),
    "postgres": frozenset(
        ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "store", "store_vectors")
    ),
}
"""The tables a receipt of each backend kind may list (RECEIPT_SPEC.md 4.2, 4.8)."""
STORE_TABLES = frozenset(("store", "store_vectors"))
"""Tables of the ``store`` method group; every other table is the ``checkpoints`` group."""
METHODS = frozenset(("atomic-transaction", "sweep"))
DEFERRAL_METHOD = "read-snapshot"
"""A deferral's ``methods`` value: its scope was measured in one read snapshot (9.14)."""


def _check_deferral(p: dict[str, Any], bad: Any) -> None:
    """A deferral (RECEIPT_SPEC.md 9.14) retains its scope: nothing deleted, so the
    post-state is the pre-state; nothing tombstoned; every check passed; and the
    retention ends after the decision was made."""
    from .receipt import time_key

    if p["post_state"] != p["pre_state"]:
        raise bad("a deferral retains its scope: post_state must equal pre_state")
    if p["scope"]["tombstone"]:
        raise bad("a deferral deletes nothing: scope.tombstone must be false")
    if "tombstone_policy" in p["scope"] or p["scope"].get("store_tombstone"):
        raise bad("a deferral tombstones nothing (tombstone_policy, store_tombstone)")
    if not p["pre_state"]["leaves"]:
        raise bad("a deferral retains rows: its pre_state is empty")
    failed = [c["name"] for c in p["checks"] if c["result"] != "pass"]
    if failed:
        raise bad(f"a deferral's checks failed: {', '.join(failed)}", "check_failed")
    until, issued = p["deferral"]["until"], p["issued_at"]
    if time_key(until) <= time_key(issued):
        raise bad(f"deferral until {until} is not after issued_at {issued}")


def _check_counts(p: dict[str, Any], bad: Any) -> None:
    """Every measured row holds at least its thread id or store prefix (1-byte minimum,
    RECEIPT_SPEC.md 4.5), so a table's bytes are 0 exactly when its rows are, and never
    fewer than its rows."""
    states = [("pre_state", p["pre_state"]), ("post_state", p["post_state"])]
    if "kept_state" in p:
        states.append(("kept_state", p["kept_state"]))
    states += [(f"unit {u['name']!r}", u) for u in p.get("units") or ()]
    for label, s in states:
        for name, t in s["tables"].items():
            if t["bytes"] < t["rows"] or (t["rows"] == 0) != (t["bytes"] == 0):
                raise bad(
                    f"{label} table {name!r}: {t['rows']} row(s) but {t['bytes']} byte(s) "
                    "(every row stores at least one byte, and no row stores none)"
                )


def _check_tables_and_methods(p: dict[str, Any], bad: Any) -> None:
    """The listed tables, the method groups, the store and the store namespaces name
    the same scope (RECEIPT_SPEC.md 3, 4.2, 5): store rows only with store namespaces,
    a store and a store method, and no table the backend does not have."""

    def mismatch(msg: str) -> ReceiptSemanticsError:
        return ReceiptSemanticsError(msg, reason="scope_mismatch")

    tables = set(p["pre_state"]["tables"])
    for extra in [p.get("kept_state"), *(p.get("units") or ())]:
        if extra is not None:
            tables |= set(extra["tables"])
    methods, namespaces = p["methods"], p["scope"]["store_namespaces"]
    if "targets" in p or any(t.startswith("target:") for t in tables | set(methods)):
        # 9.13: each target is a table and a method group of its own, named in targets
        tables, methods = _check_targets(p, tables, methods, mismatch)
    known = TABLES.get(p["backend"]["kind"])
    if known is not None and not tables <= known:
        unknown = ", ".join(sorted(tables - known))
        raise mismatch(f"a {p['backend']['kind']} receipt lists unknown table(s) {unknown}")
    store_tables = tables & STORE_TABLES
    if store_tables and not namespaces:
        raise mismatch(f"store table(s) {', '.join(sorted(store_tables))} without store namespaces")
    if store_tables and "store" not in methods:
        raise mismatch("store table(s) listed without methods.store")
    if "store" in methods and not namespaces:
        raise mismatch("methods.store without store namespaces")
    if namespaces and p["backend"]["store"] is None:
        raise mismatch("store namespaces erased, but backend.store is null")
    if "kind" not in p:
        return  # issued before kinds: its methods and tables followed an earlier layout
    if p["kind"] == "deferral":  # 9.14: measured in a read snapshot, nothing deleted
        want = {"checkpoints": DEFERRAL_METHOD}
        if namespaces:
            want["store"] = DEFERRAL_METHOD
        if methods != want:
            raise mismatch(
                f"a deferral receipt's methods are {want} (read, not deleted); got "
                f"{dict(sorted(methods.items()))}"
            )
        return
    if p["kind"] == "shred":  # 9.16: the key store's rows, nothing of the data database
        _check_shred(p, mismatch)
        return
    if p["kind"] == "namespace":  # 9.7: store rows of the saver's database only
        if namespaces != [p["scope"]["namespace"]]:
            raise mismatch("a namespace receipt's store_namespaces must be [scope.namespace]")
        if tables - STORE_TABLES or methods != {"store": "atomic-transaction"}:
            raise mismatch(
                'a namespace receipt lists store tables only, with methods {"store": '
                f'"atomic-transaction"}}; got {sorted(tables)}, {dict(sorted(methods.items()))}'
            )
        return
    if (
        set(methods) - {"checkpoints", "store"}
        or methods.get("checkpoints") != "atomic-transaction"
    ):
        raise mismatch(
            'methods must be {"checkpoints": "atomic-transaction"} plus, with store '
            f"namespaces, methods.store; got {dict(sorted(methods.items()))}"
        )
    # A store table the database does not have is left out (4.2), and with it the
    # method; a measured store table needs its method, "atomic-transaction" or "sweep".
    if "store" in methods and (not store_tables or methods["store"] not in METHODS):
        raise mismatch(
            'methods.store ("atomic-transaction" or "sweep") goes with the store tables it '
            f"deleted from; got {methods['store']!r} with tables {sorted(store_tables)}"
        )
    if methods.get("store") == "sweep" and "store_vectors" in tables:
        raise mismatch("a swept store is measured as one table, store; not store_vectors")


def _check_targets(
    p: dict[str, Any], tables: set[str], methods: dict[str, Any], mismatch: Any
) -> tuple[set[str], dict[str, Any]]:
    """The targets (RECEIPT_SPEC.md 9.13) are exactly the ``target:`` tables and method
    groups, each with its target's method; returns the tables and methods without them,
    for the rules of the scope's own tables."""
    names = [t["name"] for t in p.get("targets") or ()]
    if names != sorted(set(names)):
        raise mismatch("targets must be sorted by name, each name once")
    targets = {f"target:{t['name']}": t for t in p.get("targets") or ()}
    if targets and p.get("kind") not in ("thread", "subject"):
        raise mismatch("only thread and subject receipts erase targets")
    listed = {t for t in tables if t.startswith("target:")}
    grouped = {m for m in methods if m.startswith("target:")}
    if listed != set(targets) or grouped != set(targets):
        raise mismatch(
            f"targets {sorted(targets)} must be exactly the target tables {sorted(listed)} "
            f"and method groups {sorted(grouped)}"
        )
    for name, t in targets.items():
        if methods[name] != t["method"]:
            raise mismatch(
                f"methods[{name!r}] is {methods[name]!r}, its target says {t['method']!r}"
            )
        if t["key"] == "subject" and p.get("kind") != "subject":
            raise mismatch(f"{name} is keyed by subject, in a {p.get('kind')} receipt")
        if t.get("tombstone") and not p["scope"]["tombstone"]:
            raise mismatch(f"{name} claims a tombstone the scope does not have")
    return tables - listed, {k: v for k, v in methods.items() if k not in grouped}


SHRED_TABLES = frozenset(("erasure_data_keys", "erasure_thread_keys"))
"""The key store's tables a shred receipt lists (RECEIPT_SPEC.md 9.16), and the one it
may list: ``erasure_namespace_keys`` (store namespaces bound to the key)."""
SHRED_NAMESPACE_TABLE = "erasure_namespace_keys"


def _check_shred(p: dict[str, Any], mismatch: Any) -> None:
    """A shred destroys one key and its thread bindings in the key store named by the
    backend, and nothing else (RECEIPT_SPEC.md 9.16)."""
    sc, pre = p["scope"], p["pre_state"]["tables"]
    if set(pre) - {SHRED_NAMESPACE_TABLE} != SHRED_TABLES:
        raise mismatch(
            f"a shred receipt lists {sorted(SHRED_TABLES)} (and {SHRED_NAMESPACE_TABLE}); "
            f"got {sorted(pre)}"
        )
    bound = pre.get(SHRED_NAMESPACE_TABLE, {"rows": 0})["rows"]
    if bound != len(sc["store_namespaces"]):
        raise mismatch("erasure_namespace_keys rows differ from the number of store_namespaces")
    if pre["erasure_data_keys"]["rows"] != 1:
        raise mismatch("a shred receipt destroys exactly one key (erasure_data_keys: 1 row)")
    if pre["erasure_thread_keys"]["rows"] != len(sc["threads"]):
        raise mismatch("erasure_thread_keys rows differ from the number of scope.threads")
    if p["methods"] != {"key_store": "atomic-transaction"}:
        raise mismatch('a shred receipt\'s methods are exactly {"key_store": "atomic-transaction"}')
    if p["backend"]["kind"] != f"key-store-{sc['key_store']['kind']}":
        raise mismatch("backend.kind must be key-store-<scope.key_store.kind>")
    if (p["backend"]["store"] is None) != (not sc["store_namespaces"]):
        raise mismatch("backend.store names the encrypted store exactly when store namespaces are")
    if sc["key_scope"] == "thread" and sc["threads"] != [sc["subject"]]:
        raise mismatch("a thread's own key covers exactly that thread")


def check_residue(predicate: dict[str, Any]) -> None:
    """The residue disclosures a backend must make (RECEIPT_SPEC.md 3, 4.8, 6.1);
    raises ``ReceiptSemanticsError`` "residue_missing".

    Not part of :func:`check_semantics`: the engine checks a statement before the
    residue steps have run."""
    p = predicate
    actions = [r["action"] for r in p["residue"]]
    backend = p["backend"]["kind"]

    def missing(msg: str) -> ReceiptSemanticsError:
        return ReceiptSemanticsError(msg, reason="residue_missing")

    if p.get("kind") == "deferral":
        return  # nothing deleted: no residue to reduce or disclose (9.14)
    if backend in TABLES and not actions:
        raise missing(f"a {backend} receipt must record its residue actions; it has none")
    if "kind" not in p:
        return  # receipts issued before kinds predate some of these disclosures

    def one_of(*names: str) -> bool:
        return sum(actions.count(n) for n in names) == 1

    if backend == "sqlite" and any(a.startswith("sqlite.") for a in actions):
        if not one_of("sqlite.live_page_free_space", "residue_scan"):
            raise missing(
                "a SQLite receipt must carry exactly one of sqlite.live_page_free_space and "
                "residue_scan (what is claimed about the free space of live pages)"
            )
        if any(a.startswith("sqlite.") and a.endswith(".store") for a in actions) and not one_of(
            "sqlite.live_page_free_space.store", "residue_scan.store"
        ):
            raise missing(
                "a store in another SQLite file needs exactly one of "
                "sqlite.live_page_free_space.store and residue_scan.store"
            )
    if p["kind"] == "shred" and not (
        one_of("key_store.vacuum") and one_of("key_store.residue_scan")
    ):
        raise missing(
            "a shred receipt must carry key_store.vacuum and key_store.residue_scan once each"
        )
    if backend == "postgres" and not (one_of("postgres.vacuum") and one_of("postgres.wal")):
        raise missing("a PostgreSQL receipt must carry postgres.vacuum and postgres.wal once each")
    if p["methods"].get("store") == "sweep" and not any(
        a == "store.scrub" or a.endswith(".store") for a in actions
    ):
        raise missing("a swept store's residue (store.scrub or the .store actions) is missing")


def scope_id(predicate: dict[str, Any]) -> str:
    """What a receipt erased, in one string: the thread id (thread and history kinds) or
    the data subject (subject kind), as the scope names it (possibly a commitment)."""
    scope = predicate["scope"]
    if "namespace" in scope:  # 9.7: the prefix, labels joined with "."
        return ".".join(scope["namespace"])
    return str(scope["thread_id"] if "thread_id" in scope else scope["subject"])


def _is_commitment(v: Any) -> bool:
    return type(v) is str and v.startswith("hmac-sha256:") and is_hex64(v[12:])


def _check_privacy(p: dict[str, Any], bad: Any) -> None:
    """Privacy mode (RECEIPT_SPEC.md 9.5): the ids that name people are commitments
    ``hmac-sha256:<64 lowercase hex>``, never raw values."""
    scope = p["scope"]
    clear: list[str] = []
    for k in ("subject", "thread_id"):
        if k in scope and not _is_commitment(scope[k]):
            clear.append(f"scope.{k}")
    if any(not _is_commitment(t) for t in scope.get("threads", ())):
        clear.append("scope.threads")
    names = [u["name"] for u in p.get("units") or ()]
    if any(n != "store" and not (n[:7] == "thread:" and _is_commitment(n[7:])) for n in names):
        clear.append("units")
    if any(len(ns) != 1 or not _is_commitment(ns[0]) for ns in scope["store_namespaces"]):
        clear.append("scope.store_namespaces")
    if not _is_commitment(p["backend"]["database"]):
        clear.append("backend.database")
    for r in p["residue"]:
        db = r["detail"].get("database")
        if db is not None and not _is_commitment(db) and db != "withheld (privacy mode)":
            clear.append(f"residue {r['action']} detail.database")
    needles = p.get("needles")
    if needles is not None and needles["salt"] is not None:
        # a published salt lets anyone test guesses; privacy mode commits with the key
        clear.append("needles (salted, not keyed)")
    if clear:
        raise bad(
            f"privacy-mode receipt names {', '.join(clear)} in clear (must be commitments "
            "hmac-sha256:<64 hex>)"
        )


def _check_kept(kept: dict[str, Any], bad: Any) -> None:
    rows = sum(t["rows"] for t in kept["tables"].values())
    if rows != kept["leaves"]:
        raise bad(f"kept-state leaves ({kept['leaves']}) != sum of table rows ({rows})")
    if (kept["leaves"] == 0) != (kept["digest"]["sha256"] == EMPTY_ROOT_HEX):
        raise bad("kept-state digest does not match its leaf count")
    cps = kept["checkpoints"]
    keys = [(c["checkpoint_ns"], c["checkpoint_id"]) for c in cps]
    if keys != sorted(set(keys)):
        raise bad("kept checkpoints must be sorted and unique")
    table = kept["tables"].get("checkpoints")
    if table is not None and table["rows"] != len(cps):
        raise bad("kept checkpoints do not match the kept checkpoints table")


def _check_units(p: dict[str, Any], bad: Any) -> None:
    """The units are exactly the scope's threads (and the store), and add up to and
    hash into the pre-state (RECEIPT_SPEC.md 9.3)."""
    units, scope, pre = p["units"], p["scope"], p["pre_state"]
    names = [u["name"] for u in units]
    want = [f"thread:{t}" for t in scope["threads"]]
    if scope["store_namespaces"]:
        want.append("store")
    want += [f"target:{t['name']}" for t in p.get("targets") or () if t["key"] == "subject"]
    if names != sorted(want):
        raise bad("units do not name exactly the scope's threads and store", "units_mismatch")
    tables: dict[str, list[int]] = {}
    for u in units:
        rows = sum(t["rows"] for t in u["tables"].values())
        if rows != u["leaves"] or (u["leaves"] == 0) != (u["digest"]["sha256"] == EMPTY_ROOT_HEX):
            raise bad(f"unit {u['name']!r} is inconsistent", "units_mismatch")
        for k, t in u["tables"].items():
            acc = tables.setdefault(k, [0, 0])
            acc[0] += t["rows"]
            acc[1] += t["bytes"]
    if {k: [t["rows"], t["bytes"]] for k, t in pre["tables"].items()} != tables:
        raise bad("units do not add up to the pre-state tables", "units_mismatch")
    from .digest import units_root  # only subject receipts pay for this import

    root = units_root((u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in units)
    if not pre["leaves"]:  # an empty scope has the empty root, whatever its units
        root = bytes.fromhex(EMPTY_ROOT_HEX)
    if root.hex() != pre["digest"]["sha256"]:
        raise bad("units do not hash into the pre-state digest", "units_mismatch")


def _signed_parts(r: Receipt) -> Receipt:
    """A private Receipt holding only what ``r``'s signed payload says.

    The statement is a fresh strict parse of ``r.payload`` (which must be its RFC 8785
    form); ``r.statement`` is never read, so neither a statement swapped in nor one
    mutated in place can be reported."""
    payload = r.payload
    if type(payload) is not bytes:
        raise MalformedReceiptError("receipt payload must be bytes", reason="schema")
    statement = statement_from_payload(payload)
    sigs = r.signatures
    if type(sigs) is not tuple or not sigs:
        raise MalformedReceiptError("receipt needs a tuple of signatures", reason="schema")
    for s in sigs:
        if not (
            isinstance(s, Signature)
            and type(s.keyid) is str
            and (s.keyid == "" or is_hex64(s.keyid))
            and type(s.sig) is bytes
        ):
            raise MalformedReceiptError(
                "signatures must be Signature objects with a hex key id (or none) and bytes",
                reason="schema",
            )
    pub = r.public_key
    if pub is not None and not isinstance(pub, PublicKey):
        raise MalformedReceiptError("public_key must be a PublicKey", reason="schema")
    return Receipt._new(statement, sigs, pub, payload)


def _load(data: Any) -> Receipt:
    if isinstance(data, Receipt):
        return _signed_parts(data)
    if isinstance(data, bytes | bytearray | memoryview):
        # from_json parses these bytes afresh and derives the payload from that parse:
        # the Receipt is private to this call.
        return Receipt.from_json(bytes(data))
    if isinstance(data, os.PathLike):
        return Receipt.from_json(read_input(data))
    if isinstance(data, str):
        raise TypeError(
            "verify_receipt() takes the receipt's bytes or a path object, not str (JSON "
            "text or a file name?): pass text.encode() or pathlib.Path(name)"
        )
    raise TypeError(
        f"verify_receipt() takes bytes, a path object or a Receipt, not {type(data).__name__}"
    )


def verify_receipt(
    data: bytes | bytearray | memoryview | os.PathLike[str] | os.PathLike[bytes] | Receipt,
    trusted_keys: TrustStore | PublicKey | TrustedKey | Sequence[PublicKey | TrustedKey],
    *,
    require_authorization: bool = False,
) -> VerifiedReceipt:
    """Verify a receipt file or DSSE envelope against the caller's trusted keys.

    ``data`` is the file's bytes, a path object (``pathlib.Path``; read with the same
    1 MiB limit) or a ``Receipt`` (only its signed ``payload`` counts). A ``str`` is
    refused with ``TypeError``: it could be JSON text or a file name. Returns only facts
    bound by a verified signature, or raises a ``VerificationError`` (``InputError`` for
    an unreadable path). With ``require_authorization``, a receipt without an
    authorization signed by a trusted approver (four eyes, RECEIPT_SPEC.md 9.6) is
    refused too (``ReceiptSemanticsError`` "authorization_missing").
    """
    trust = trusted_keys if isinstance(trusted_keys, TrustStore) else TrustStore(trusted_keys)
    receipt = _load(data)
    if not len(trust):
        raise UntrustedKeyError("no trusted keys were given", reason="no_trusted_keys")
    message = receipt.signed_bytes()
    issued_at = receipt.predicate["issued_at"]
    accepted: TrustedKey | None = None
    expired: TrustedKey | None = None
    bad_trusted = False
    for sig in receipt.signatures:
        # A DSSE signature without a key id hint is tried against every trusted key.
        for tk in trust.get(sig.keyid) if sig.keyid else trust.signers():
            if not tk.key.verify(sig.sig, message):
                # Only a signature that names a trusted key proves tampering; a keyless
                # one that fails may simply be someone else's.
                bad_trusted = bad_trusted or bool(sig.keyid)
            elif tk._contains(issued_at):
                accepted = tk
                break
            else:
                expired = tk
        if accepted:
            break
    if accepted is None:
        if expired is not None:
            raise UntrustedKeyError(
                f"key {expired.key.key_id[:16]} was not valid at {issued_at}",
                reason="key_not_valid_at_time",
            )
        if bad_trusted:
            raise SignatureError("signature does not match the statement (tampered?)")
        ids = ", ".join(s.keyid[:16] or "(no key id)" for s in receipt.signatures)
        if any(trust.approvers(s.keyid) for s in receipt.signatures):
            raise UntrustedKeyError(f"signed by key {ids}, an approver key: not a receipt signer")
        emb = receipt.public_key
        if emb is not None and any(
            s.keyid == emb.key_id and emb.verify(s.sig, message) for s in receipt.signatures
        ):
            raise UntrustedKeyError(f"signed by key {emb.key_id[:16]}, which is not trusted")
        raise UntrustedKeyError(f"no signature by a trusted key (signed by {ids})")
    check_semantics(receipt.statement)
    p = receipt.predicate
    check_residue(p)
    request = approver = None
    if "request" in p:  # section 9.6: only receipts with a request import this
        from .request import seconds_between, verify_request

        approver = verify_request(p, trust)
        request = dict(p["request"])
    if require_authorization and approver is None:
        raise ReceiptSemanticsError(
            "no authorization: an erasure approved by a trusted approver (four eyes) is "
            "required, and this receipt carries "
            + ("a request but no authorization" if request else "no request or authorization"),
            reason="authorization_missing",
        )
    return VerifiedReceipt(
        receipt_id=p["receipt_id"],
        thread_id=scope_id(p),
        status=p["status"],
        issued_at=issued_at,
        pre_digest=p["pre_state"]["digest"]["sha256"],
        key_id=accepted.key.key_id,
        key_name=accepted.name,
        statement=receipt.statement,
        methods=p["methods"],
        residue=tuple((r["action"], r["status"]) for r in p["residue"]),
        request=request,
        approver=None if approver is None else approver.name or approver.key.key_id,
        approver_key_id=None if approver is None else approver.key.key_id,
        sla_seconds=(
            seconds_between(request["received_at"], issued_at)
            if request is not None and request["received_at"] is not None
            else None
        ),
    )
