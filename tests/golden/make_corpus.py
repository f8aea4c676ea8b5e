"""Generate the golden receipt corpus used by ``tests/unit/test_golden_corpus.py``.

    python tests/golden/make_corpus.py [OUT_DIR]      # default: tests/golden

Writes ``good/`` (receipts that must verify), ``bad/`` (receipts that must be rejected,
with ``bad/EXPECTED.json`` mapping each file name to its exit code and reason code) and
``keys/trusted.pub.pem`` (the only key auditors trust). Output is deterministic: fixed
seeds, ids and times, and Ed25519 signatures are deterministic. A test re-runs this
script into a temporary directory and requires byte-identical output, so the committed
corpus cannot drift silently; after an intentional format change, re-run the script and
commit the result.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from erasure_receipts import digest
from erasure_receipts.canonical import MAX_INPUT_BYTES, canonicalize
from erasure_receipts.digest import MerkleTree
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE, Receipt, build_statement
from erasure_receipts.signing import Signer, pae
from receipt_factory import (
    ATTACKER,
    TRUSTED,
    del_path,
    dump,
    make_receipt,
    make_statement,
    receipt_doc,
    set_path,
    statement_kwargs,
)

HERE = Path(__file__).resolve().parent

BAD_SIG = "bad_signature"
EXIT_INVALID = 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _good_bytes() -> bytes:
    return make_receipt().to_json()


def _tampered(path: str, value: Any) -> bytes:
    return dump(set_path(receipt_doc(), path, value))


def _removed(path: str) -> bytes:
    return dump(del_path(receipt_doc(), path))


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) >= 1, old
    return data.replace(old, new, 1)


def _resigned(mutate: Callable[[dict[str, Any]], None], signer: Signer = TRUSTED) -> bytes:
    """A statement changed *before* signing: the signature is valid, the content is not."""
    st = make_statement()
    mutate(st)
    return Receipt.sign(st, signer).to_json()


def _resigned_raw(mutate: Callable[[dict[str, Any]], None], signer: Signer = TRUSTED) -> bytes:
    """Like ``_resigned`` for statements ``Receipt.sign`` refuses (schema violations): the
    file carries a valid signature over the canonical bytes of the invalid statement."""
    st = make_statement()
    mutate(st)
    return _sign_raw(st, signer)


def _sign_raw(st: dict[str, Any], signer: Signer = TRUSTED) -> bytes:
    """A receipt file with a valid signature over the canonical bytes of ``st``, which
    ``Receipt.sign`` may refuse (schema violations)."""
    payload = canonicalize(st)
    sig = signer.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    doc = {
        "media_type": "application/vnd.langgraph-erasure-receipt.v1+json",
        "statement": st,
        "signatures": [{"keyid": signer.key_id, "sig": _b64(sig)}],
    }
    return dump(doc)


def _impossible_issued_at(st: dict[str, Any]) -> None:
    st["predicate"]["issued_at"] = "2025-02-31T25:61:61Z"


def _leap_day_non_leap_year(st: dict[str, Any]) -> None:
    st["predicate"]["issued_at"] = "2100-02-29T00:00:00Z"


def _dsse_keyid(keyid: Any) -> bytes:
    """A correctly signed DSSE envelope whose signature ``keyid`` is not a string."""
    payload = canonicalize(make_statement())
    sig = _b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    env = {
        "payloadType": DSSE_PAYLOAD_TYPE,
        "payload": _b64(payload),
        "signatures": [{"keyid": keyid, "sig": sig}],
    }
    return (json.dumps(env, indent=2) + "\n").encode("utf-8")


def _noncanonical_bits(text: str) -> str:
    """Same bytes when decoded leniently, but a non-zero unused bit before the padding."""
    pad = len(text) - len(text.rstrip("="))
    assert pad, text
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    i = len(text) - pad - 1
    return text[:i] + alphabet[alphabet.index(text[i]) + 1] + text[i + 1 :]


def _sig_noncanonical_bits() -> bytes:
    doc = receipt_doc()
    doc["signatures"][0]["sig"] = _noncanonical_bits(doc["signatures"][0]["sig"])
    return dump(doc)


def _embedded_key_noncanonical_bits() -> bytes:
    doc = receipt_doc()
    doc["public_key"]["ed25519"] = _noncanonical_bits(doc["public_key"]["ed25519"])
    return dump(doc)


def _dsse_payload_overpadded() -> bytes:
    env = make_receipt().to_dsse()
    env["payload"] += "=="
    return (json.dumps(env, indent=2) + "\n").encode("utf-8")


def _dsse(
    payload: bytes, signer: Signer = TRUSTED, payload_type: str = DSSE_PAYLOAD_TYPE, **extra: Any
) -> bytes:
    env = {
        "payloadType": payload_type,
        "payload": _b64(payload),
        "signatures": [
            {"keyid": signer.key_id, "sig": _b64(signer.sign(pae(payload_type, payload)))}
        ],
        **extra,
    }
    return (json.dumps(env, indent=2) + "\n").encode("utf-8")


def _nonempty_root(n: int) -> str:
    tree = MerkleTree()
    for i in range(n):
        tree.append(b"leftover-%d" % i)
    return tree.root().hex()


# -- individual bad cases -------------------------------------------------------------------


def _sig_bit_flip() -> bytes:
    doc = receipt_doc()
    sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    sig[10] ^= 0x01
    doc["signatures"][0]["sig"] = _b64(bytes(sig))
    return dump(doc)


def _sig_truncated() -> bytes:
    doc = receipt_doc()
    doc["signatures"][0]["sig"] = _b64(base64.b64decode(doc["signatures"][0]["sig"])[:48])
    return dump(doc)


def _keyid_hint_trusted_attacker_sig() -> bytes:
    r = make_receipt()
    doc = receipt_doc(r)
    doc["signatures"][0]["sig"] = _b64(ATTACKER.sign(r.signed_bytes()))
    return dump(doc)


def _key_substitution() -> bytes:
    st = make_statement(tombstone=False)
    return Receipt.sign(st, ATTACKER).to_json()


def _embedded_keyid_mismatch() -> bytes:
    doc = receipt_doc()
    doc["public_key"]["keyid"] = ATTACKER.key_id
    return dump(doc)


def _not_empty(st: dict[str, Any]) -> None:
    post = st["predicate"]["post_state"]
    post["tables"]["writes"] = {"rows": 1, "bytes": 40}
    post["leaves"] = 1
    post["digest"]["sha256"] = _nonempty_root(1)


def _subject_digest_mismatch(st: dict[str, Any]) -> None:
    st["subject"][0]["digest"]["sha256"] = _nonempty_root(5)


def _subject_name_mismatch(st: dict[str, Any]) -> None:
    st["subject"][0]["name"] = "langgraph-thread:thread-2"


def _inconsistent_leaves(st: dict[str, Any]) -> None:
    st["predicate"]["pre_state"]["leaves"] = 6


def _inconsistent_tables(st: dict[str, Any]) -> None:
    del st["predicate"]["post_state"]["tables"]["writes"]


def _post_digest_not_empty(st: dict[str, Any]) -> None:
    st["predicate"]["post_state"]["digest"]["sha256"] = _nonempty_root(2)


def _pre_digest_empty_with_rows(st: dict[str, Any]) -> None:
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    st["predicate"]["pre_state"]["digest"]["sha256"] = empty
    st["subject"][0]["digest"]["sha256"] = empty


def _check_failed(st: dict[str, Any]) -> None:
    st["predicate"]["checks"][1]["result"] = "fail"


def _out_of_scope_missing(st: dict[str, Any]) -> None:
    oos = st["predicate"]["out_of_scope"]
    oos[:] = [o for o in oos if o["id"] != "backups"]


def _dsse_not_canonical() -> bytes:
    # Valid signature over a payload that is JSON but not RFC 8785 (indented).
    return _dsse(json.dumps(make_statement(), indent=2).encode("utf-8"))


def _dsse_not_canonical_key_order() -> bytes:
    st = make_statement()
    reordered = dict(reversed(list(st.items())))
    return _dsse(json.dumps(reordered, separators=(",", ":")).encode("utf-8"))


def _dsse_tampered_payload() -> bytes:
    env = make_receipt().to_dsse()
    st = copy.deepcopy(make_statement())
    st["predicate"]["scope"]["thread_id"] = "thread-2"
    st["subject"][0]["name"] = "langgraph-thread:thread-2"
    env["payload"] = _b64(canonicalize(st))
    return (json.dumps(env, indent=2) + "\n").encode("utf-8")


def _too_large() -> bytes:
    good = _good_bytes()
    # Valid JSON (trailing whitespace), valid signature: only the size is wrong.
    return good + b" " * (MAX_INPUT_BYTES + 1 - len(good))


def _deep_nesting() -> bytes:
    depth = 100_000
    return _replace_once(
        _good_bytes(), b'"tombstone": true', b'"tombstone": ' + b"[" * depth + b"]" * depth
    )


# -- request context and authorization (RECEIPT_SPEC.md 9.6) ------------------------------

APPROVER = Signer.from_seed(b"\x02" * 32)
"""The approver of the authorization cases. The corpus is verified with --key only, so no
key is an approver there: a well-formed authorization is ``authorization_untrusted``;
tests/unit/test_request_context.py verifies the same files with a trust file naming it."""
REQUEST = {
    "id": "DSR-2026-0042",
    "basis": "gdpr-art17-1b",
    "requester": "alice@example.com",
    "received_at": "2026-11-01T09:30:00Z",
    "due": "2026-12-01T09:30:00Z",
}


def authorization_member(
    request_id: str = "DSR-2026-0042",
    thread_id: str = "thread-1",
    not_after: str = "2026-11-30T00:00:00Z",
    signer: Signer = APPROVER,
) -> dict[str, Any]:
    from erasure_receipts.request import authorize

    scope = {"kind": "thread", "thread_id": thread_id, "store_namespaces": [["users", "u1"]]}
    auth = authorize(signer, request_id=request_id, scope=scope, not_after=not_after)
    return auth.to_dict()


def with_request(
    auth: dict[str, Any] | None = None, **request: Any
) -> Callable[[dict[str, Any]], None]:
    def mutate(st: dict[str, Any]) -> None:
        st["predicate"]["request"] = {**REQUEST, **request}
        if auth is not None:
            st["predicate"]["authorization"] = auth

    return mutate


def _auth_without_request(st: dict[str, Any]) -> None:
    st["predicate"]["authorization"] = authorization_member()


def _auth_tampered_signature() -> dict[str, Any]:
    auth = authorization_member()
    sig = bytearray(base64.b64decode(auth["signatures"][0]["sig"]))
    sig[7] ^= 0x01
    auth["signatures"][0]["sig"] = _b64(bytes(sig))
    return auth


def _auth_wrong_type() -> dict[str, Any]:
    auth = authorization_member()
    auth["statement"]["_type"] = "https://in-toto.io/Statement/v1"
    return auth


def _tamper_request_id() -> bytes:
    doc = receipt_doc(Receipt.sign(_with(with_request()), TRUSTED))
    doc["statement"]["predicate"]["request"]["id"] = "DSR-2026-0043"
    return dump(doc)


def _with(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    st = make_statement()
    mutate(st)
    return st


# -- receipt kinds (RECEIPT_SPEC.md section 9) --------------------------------------------
#
# Real digests over real row encodings (section 4.4), so an auditor can recompute every
# root from the rows listed here; fixed ids, times, salts and commitment key.

HISTORY_ID = "7c0e5a1b-2d3f-4e5a-9b6c-7d8e9f0a1b2c"
SUBJECT_ID = "5d2f7b3c-4e5a-4b6c-8d7e-9f0a1b2c3d4e"
PRIVATE_SUBJECT_ID = "6e3a8c4d-5f6b-4c7d-9e8f-0a1b2c3d4e5f"
REQUEST_SUBJECT_ID = "8f4b9d5e-6a7c-4d8e-af90-1b2c3d4e5f60"
AUTH_SUBJECT_ID = "9a5c0e6f-7b8d-4e9f-b0a1-2c3d4e5f6071"

HISTORY_THREAD = "thread-7"
SUBJECT = "alice"
SUBJECT_THREADS = ("alice-chat-1", "alice-chat-2")
SUBJECT_STORE_NS = ("users", "alice")
METADATA_KEY = "user_id"
NEEDLES = ("alice@example.com", "+44 20 7946 0958")
NEEDLE_SALT = bytes(range(16, 32))
NEEDLE_FORMS = (
    "raw", "json", "json-escaped", "json-escaped-upper", "json-nested",
    "json-escaped-nested", "json-solidus", "unicode-nfc", "unicode-nfd",
)  # fmt: skip
"""engine.NEEDLE_FORMS as of this corpus (fixed here: the corpus must not drift)."""
COMMITMENT_KEY = bytes(range(32, 64))
"""The operator's commitment key of the privacy-mode receipts (section 9.5)."""
DATABASE = "/var/lib/app/state.db"

Row = tuple[str, bytes]  # (table, leaf data)


def _cp_row(thread: str, ns: str, cp_id: str, n: int) -> Row:
    blob = b"\x83\xa1v\x04\xa2id" + cp_id.encode() + b"\xa2ts\x01" * n
    cols = (("thread_id", thread), ("checkpoint_ns", ns), ("checkpoint_id", cp_id),
            ("parent_checkpoint_id", None), ("type", "msgpack"), ("checkpoint", blob),
            ("metadata", b'{"source": "loop", "step": %d}' % n))  # fmt: skip
    return "checkpoints", digest.encode_row("checkpoints", (thread, ns, cp_id), cols)


def _write_row(thread: str, cp_id: str, task: str, idx: int, value: bytes) -> Row:
    cols = (("thread_id", thread), ("checkpoint_ns", ""), ("checkpoint_id", cp_id),
            ("task_id", task), ("idx", idx), ("channel", "messages"), ("type", "msgpack"),
            ("value", value))  # fmt: skip
    return "writes", digest.encode_row("writes", (thread, "", cp_id, task, idx), cols)


def _store_row(prefix: str, key: str, value: bytes) -> Row:
    cols = (("prefix", prefix), ("key", key), ("value", value),
            ("created_at", "2026-10-01 08:00:00"), ("updated_at", "2026-10-02 08:00:00"),
            ("expires_at", None), ("ttl_minutes", None))  # fmt: skip
    return "store", digest.encode_row("store", (prefix, key), cols)


def _measure(rows: list[Row], tables: tuple[str, ...]) -> dict[str, Any]:
    """``{digest, leaves, tables}`` of ``rows`` (in order), bytes = leaf data bytes."""
    tree = MerkleTree()
    counts = {t: {"rows": 0, "bytes": 0} for t in tables}
    for table, data in rows:
        tree.append(data)
        counts[table]["rows"] += 1
        counts[table]["bytes"] += len(data)
    return {"digest": {"sha256": tree.root().hex()}, "leaves": len(rows), "tables": counts}


def _needles(key: bytes, searched: str, *, salted: bool) -> dict[str, Any]:
    from erasure_receipts.privacy import needle_commitment

    return {
        "commitment": "hmac-sha256",
        "salt": _b64(key) if salted else None,
        "values": sorted({needle_commitment(key, n) for n in NEEDLES}),
        "forms": list(NEEDLE_FORMS),
        "searched": searched,
        "occurrences_after": 0,
    }


def _check(name: str, detail: str | None = None) -> dict[str, str]:
    return {"name": name, "result": "pass", **({"detail": detail} if detail else {})}


def _kind_backend(database: str = DATABASE, store: str | None = None) -> dict[str, Any]:
    return {**statement_kwargs()["backend"], "store": store, "database": database}


def history_statement(receipt_id: str = HISTORY_ID) -> dict[str, Any]:
    """``prune(keep_latest)`` of a thread with three root checkpoints: the two older ones
    and their writes are removed, the latest with its pending write is kept."""
    t = HISTORY_THREAD
    removed = [
        _cp_row(t, "", "1f0a8c3e-0001", 1),
        _cp_row(t, "", "1f0a8c3e-0002", 2),
        _write_row(t, "1f0a8c3e-0001", "task-a", 0, b"\xa5hello from alice@example.com"),
    ]
    kept = [
        _cp_row(t, "", "1f0a8c3e-0003", 3),
        _write_row(t, "1f0a8c3e-0003", "task-c", 0, b"\xa9interrupt"),
    ]
    tables = ("checkpoints", "writes")
    pre, kept_state = _measure(removed, tables), _measure(kept, tables)
    kept_state["checkpoints"] = [{"checkpoint_ns": "", "checkpoint_id": "1f0a8c3e-0003"}]
    empty = _measure([], tables)
    fields = {
        **statement_kwargs(),
        "receipt_id": receipt_id,
        "thread_id": t,
        "store_namespaces": [],
        "tombstone": False,
        "backend": _kind_backend(),
        "pre_digest": pre["digest"]["sha256"],
        "pre_tables": pre["tables"],
        "post_digest": empty["digest"]["sha256"],
        "post_tables": empty["tables"],
        "methods": {"checkpoints": "atomic-transaction"},
        "checks": [
            _check("raw_rows_zero_in_transaction"),
            _check("raw_rows_zero_after_commit"),
            _check("api_list_no_removed", "list() returned no removed checkpoint"),
            _check("api_get_tuple_kept", "get_tuple() loads a kept checkpoint"),
        ],
        "kind": "history",
        "scope": {
            "thread_id": t,
            "checkpoint_namespaces": "all",
            "store_namespaces": [],
            "tombstone": False,
            "keep": "latest",
        },
        "subject_name": f"langgraph-thread-history:{t}",
        "extra": {
            "kept_state": kept_state,
            "needles": _needles(NEEDLE_SALT, "thread", salted=True),
        },
    }
    return build_statement(**fields)


def subject_statement(
    receipt_id: str = SUBJECT_ID,
    *,
    privacy: bool = False,
    commit_threads: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One data subject's two threads (one found through ``user_id`` metadata) and
    store items, bound under one root (section 9.3). With ``privacy`` every id is a
    commitment under ``COMMITMENT_KEY`` and the needles are keyed (9.5); with
    ``commit_threads=False`` the thread ids are left in clear (a broken issuer)."""
    from erasure_receipts.privacy import commit

    def c(label: str, value: str) -> str:
        if not privacy or (label == "thread" and not commit_threads):
            return value
        return commit(COMMITMENT_KEY, label, value)

    a, b = SUBJECT_THREADS
    prefix = ".".join(SUBJECT_STORE_NS)
    per_unit: dict[str, tuple[list[Row], tuple[str, ...]]] = {
        f"thread:{c('thread', a)}": ([
            _cp_row(a, "", "1f0a8c3e-0101", 1),
            _cp_row(a, "", "1f0a8c3e-0102", 2),
            _write_row(a, "1f0a8c3e-0101", "task-a", 0, b"\xb1alice@example.com"),
        ], ("checkpoints", "writes")),
        f"thread:{c('thread', b)}": ([
            _cp_row(b, "", "1f0a8c3e-0201", 1),
        ], ("checkpoints", "writes")),
        "store": ([
            _store_row(prefix, "profile", b'{"email": "alice@example.com"}'),
            _store_row(prefix, "prefs", b'{"lang": "en"}'),
        ], ("store",)),
    }  # fmt: skip
    units = []
    for name in sorted(per_unit):
        rows, tables = per_unit[name]
        units.append({"name": name, **_measure(rows, tables)})
    root = digest.units_root(
        (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in units
    )
    pre_tables: dict[str, dict[str, int]] = {}
    for u in units:
        for k, t in u["tables"].items():
            acc = pre_tables.setdefault(k, {"rows": 0, "bytes": 0})
            acc["rows"] += t["rows"]
            acc["bytes"] += t["bytes"]
    subject = c("subject", SUBJECT)
    scope: dict[str, Any] = {
        "subject": subject,
        "threads": sorted(c("thread", t) for t in SUBJECT_THREADS),
        "discovery": {"metadata_key": METADATA_KEY},
        "checkpoint_namespaces": "all",
        "store_namespaces": (
            [[c("store_namespace", prefix)]] if privacy else [list(SUBJECT_STORE_NS)]
        ),
        "tombstone": True,
    }
    if privacy:
        key_id = hashlib.sha256(COMMITMENT_KEY).hexdigest()
        scope["privacy"] = {"mode": "hmac-sha256", "key_id": key_id}
    needles = (
        _needles(COMMITMENT_KEY, "database", salted=False)
        if privacy
        else _needles(NEEDLE_SALT, "database", salted=True)
    )
    fields = {
        **statement_kwargs(),
        "receipt_id": receipt_id,
        "thread_id": None,
        "store_namespaces": scope["store_namespaces"],
        "tombstone": True,
        "backend": _kind_backend(c("database", DATABASE), "AttestingSqliteStore"),
        "pre_digest": root.hex(),
        "pre_tables": pre_tables,
        "post_digest": digest.EMPTY_ROOT.hex(),
        "post_tables": {k: {"rows": 0, "bytes": 0} for k in pre_tables},
        "methods": {"checkpoints": "atomic-transaction", "store": "atomic-transaction"},
        "checks": [
            _check("raw_rows_zero_in_transaction"),
            _check("raw_rows_zero_after_commit"),
            _check("api_get_tuple_none"),
            _check("api_list_empty"),
            _check("api_store_search_empty"),
            _check("tombstone_written"),
        ],
        "kind": "subject",
        "scope": scope,
        "subject_name": f"langgraph-subject:{subject}",
        "extra": {"units": units, "needles": needles, **(extra or {})},
    }
    return build_statement(**fields)


def subject_authorization(signer: Signer = APPROVER) -> dict[str, Any]:
    """The approver's consent to erase ``SUBJECT``'s first thread, the threads found
    through ``user_id`` metadata and the store namespace (section 9.6)."""
    from erasure_receipts.request import authorize, erasure_scope

    scope = erasure_scope("subject", SUBJECT, [SUBJECT_STORE_NS],
                          threads=SUBJECT_THREADS[:1], discovery=METADATA_KEY)  # fmt: skip
    auth = authorize(signer, request_id=REQUEST["id"], scope=scope,
                     not_after="2026-11-30T00:00:00Z")  # fmt: skip
    return auth.to_dict()


def _signed(st: dict[str, Any]) -> bytes:
    return Receipt.sign(st, TRUSTED).to_json()


def _kind_resigned(
    build_st: Callable[[], dict[str, Any]], mutate: Callable[[dict[str, Any]], Any]
) -> Callable[[], bytes]:
    """A kind statement whose predicate ``mutate`` breaks, signed by the trusted key."""

    def make() -> bytes:
        st = build_st()
        mutate(st["predicate"])
        return _signed(st)

    return make


def _history_without_kept_state() -> bytes:
    st = history_statement()
    del st["predicate"]["kept_state"]
    return _sign_raw(st)


def _drop_unit(p: dict[str, Any]) -> None:
    p["units"] = [u for u in p["units"] if u["name"] != f"thread:{SUBJECT_THREADS[1]}"]


def _thread_with_history_name(st: dict[str, Any]) -> None:
    st["subject"][0]["name"] = "langgraph-thread-history:thread-1"


def _kind_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    H, S = history_statement, subject_statement
    P = _private_subject
    return {
        "kind_subject_unit_not_in_root": (_kind_resigned(S, lambda p: p["units"][1]["digest"]
            .update(sha256=_nonempty_root(3))), 1, "units_mismatch",
            "subject receipt: a thread unit's digest does not hash into the pre-state root"),
        "kind_subject_unit_missing": (_kind_resigned(S, _drop_unit), 1, "units_mismatch",
            "subject receipt: the unit of one of scope.threads is missing"),
        "kind_subject_units_do_not_add_up": (_kind_resigned(S, lambda p: p["units"][0]
            ["tables"]["store"].update(bytes=1)), 1, "units_mismatch",
            "subject receipt: the store unit's bytes do not add up to the pre-state"),
        "kind_subject_extra_thread": (_kind_resigned(S, lambda p: p["scope"]["threads"]
            .append("bob-chat")), 1, "units_mismatch",
            "subject receipt: scope.threads names a thread no unit measures"),
        "kind_subject_needles_remain": (_kind_resigned(S, lambda p: p["needles"]
            .update(occurrences_after=2)), 1, "needles_remain",
            "subject receipt: status erased but needles still occur in the database"),
        "kind_history_needles_remain": (_kind_resigned(H, lambda p: p["needles"]
            .update(occurrences_after=1)), 1, "needles_remain",
            "history receipt: status erased but a needle still occurs in the thread"),
        "kind_history_kept_leaves_inconsistent": (_kind_resigned(H, lambda p: p["kept_state"]
            .update(leaves=3)), 1, "inconsistent",
            "history receipt: kept_state leaves != sum of its table rows"),
        "kind_history_kept_checkpoints_inconsistent": (_kind_resigned(H, lambda p:
            p["kept_state"]["checkpoints"].insert(0, {"checkpoint_ns": "",
            "checkpoint_id": "1f0a8c3e-0002"})), 1, "inconsistent",
            "history receipt: two kept checkpoints listed, one kept checkpoint row measured"),
        "kind_history_kept_digest_empty": (_kind_resigned(H, lambda p: p["kept_state"]
            ["digest"].update(sha256=digest.EMPTY_ROOT.hex())), 1, "inconsistent",
            "history receipt: kept_state has rows but the empty-tree digest"),
        "kind_history_without_kept_state": (_history_without_kept_state, 1, "schema",
            "history receipt without kept_state, validly signed"),
        "kind_history_subject_name_thread": (lambda: _signed(_renamed(H(),
            f"langgraph-thread:{HISTORY_THREAD}")), 1, "subject_name_mismatch",
            "history receipt named like a thread receipt"),
        "kind_thread_subject_name_history": (lambda: _resigned(_thread_with_history_name), 1,
            "subject_name_mismatch",
            "thread receipt (no kind) whose subject name is a history receipt's"),
        "kind_privacy_raw_thread_id": (lambda: _signed(subject_statement(PRIVATE_SUBJECT_ID,
            privacy=True, commit_threads=False)), 1, "inconsistent",
            "privacy-mode subject receipt naming its threads (and units) in clear"),
        "kind_privacy_raw_subject": (_private_raw_subject, 1, "inconsistent",
            "privacy-mode subject receipt naming its subject in clear"),
        "kind_privacy_salted_needles": (_kind_resigned(P, lambda p: p.update(
            needles=_needles(NEEDLE_SALT, "database", salted=True))), 1, "inconsistent",
            "privacy-mode receipt with salted (not keyed) needles"),
        "auth_subject_no_approver_trusted": (lambda: _signed(subject_statement(
            AUTH_SUBJECT_ID, extra={"request": dict(REQUEST),
            "authorization": subject_authorization()})), 1, "authorization_untrusted",
            "subject receipt with a valid authorization, but --key trusts no approver "
            "(verifies with a trust file that marks the approver's key role approver)"),
    }  # fmt: skip


# -- the statement rules of RECEIPT_SPEC.md 6.1 ------------------------------------------

THREAD_KIND_ID = "3a9d6e2f-8b1c-4d0e-9f2a-5b6c7d8e9f01"
SQLITE_RESIDUE = [
    {"action": "sqlite.secure_delete", "status": "applied",
     "detail": {"value": 1, "scope": "this connection"}},
    {"action": "sqlite.wal_checkpoint", "status": "applied",
     "detail": {"mode": "TRUNCATE", "busy": 0, "log_frames": 12, "checkpointed_frames": 12,
                "wal_bytes_after": 0, "reader_wait_ms": 0}},
    {"action": "sqlite.live_page_free_space", "status": "skipped",
     "detail": {"reason": "not scanned: enable residue_scan to check and remove copies"}},
]  # fmt: skip
"""The residue the SQLite savers record for a thread without the residue scan."""


def thread_kind_statement(**over: Any) -> dict[str, Any]:
    """A ``kind: "thread"`` receipt as the SQLite saver issues it today: its own tables
    and methods, store rows erased in the same transaction, the full residue."""
    fields: dict[str, Any] = {
        **statement_kwargs(),
        "receipt_id": THREAD_KIND_ID,
        "kind": "thread",
        "pre_tables": {
            "checkpoints": {"rows": 3, "bytes": 300},
            "store": {"rows": 0, "bytes": 0},
            "writes": {"rows": 2, "bytes": 80},
        },
        "post_tables": {t: {"rows": 0, "bytes": 0} for t in ("checkpoints", "store", "writes")},
        "methods": {"checkpoints": "atomic-transaction", "store": "atomic-transaction"},
        "checks": [
            _check("raw_rows_zero_in_transaction"),
            _check("raw_rows_zero_after_commit", "post-state digest re-measured"),
            _check("api_get_tuple_none"),
            _check("api_list_empty"),
            _check("api_store_search_empty"),
        ],
        "residue": copy.deepcopy(SQLITE_RESIDUE),
    }
    fields.update(over)
    return build_statement(**fields)


def _store_rows(st: dict[str, Any], namespaces: list[list[str]], method: str | None) -> None:
    """A kindless statement with one store row measured (and erased) under ``method``."""
    p = st["predicate"]
    p["scope"]["store_namespaces"] = namespaces
    p["pre_state"]["tables"]["store"] = {"rows": 1, "bytes": 50}
    p["pre_state"]["leaves"] = 6
    p["post_state"]["tables"]["store"] = {"rows": 0, "bytes": 0}
    if method is not None:
        p["methods"]["store"] = method


def _residue(*actions: str, store_sweep: bool = False) -> Callable[[], bytes]:
    """A kind thread receipt whose residue holds ``actions`` (SQLITE_RESIDUE details)."""
    detail = {r["action"]: r for r in SQLITE_RESIDUE}

    def make() -> bytes:
        rows = [copy.deepcopy(detail.get(a) or {"action": a, "status": "skipped",
                "detail": {"reason": "-"}}) for a in actions]  # fmt: skip
        over: dict[str, Any] = {"residue": rows}
        if store_sweep:
            over["methods"] = {"checkpoints": "atomic-transaction", "store": "sweep"}
            over["backend"] = {**statement_kwargs()["backend"], "store": "SqliteStore"}
        return _signed(thread_kind_statement(**over))

    return make


def _postgres_without_vacuum() -> bytes:
    pg_tables = ("checkpoint_blobs", "checkpoint_writes", "checkpoints")
    pre = {"checkpoint_blobs": {"rows": 1, "bytes": 60}, "checkpoint_writes": {"rows": 1,
           "bytes": 80}, "checkpoints": {"rows": 3, "bytes": 300}}  # fmt: skip
    st = thread_kind_statement(
        store_namespaces=[], pre_tables=pre,
        post_tables={t: {"rows": 0, "bytes": 0} for t in pg_tables},
        methods={"checkpoints": "atomic-transaction"},
        backend={**statement_kwargs()["backend"], "kind": "postgres",
                 "saver": "AttestingPostgresSaver", "store": None, "database": "app"},
        residue=[{"action": "postgres.wal", "status": "skipped", "detail": {"reason": "-"}}],
    )  # fmt: skip
    return _signed(st)


def _kindless(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[], bytes]:
    return lambda: _resigned(lambda st: mutate(st))


def _schema_rule(build_st: Callable[[], dict[str, Any]], mutate: Callable[[dict[str, Any]], Any]):
    """A statement that breaks a schema rule, validly signed (``Receipt.sign`` refuses it)."""

    def make() -> bytes:
        st = build_st()
        mutate(st["predicate"])
        return _sign_raw(st)

    return make


def _rule_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    """One validly signed violation of each statement rule of RECEIPT_SPEC.md 6.1 that
    no older case exercised."""
    H, S, T = history_statement, subject_statement, thread_kind_statement
    pre = lambda st: st["predicate"]["pre_state"]  # noqa: E731
    return {
        "rule_rows_without_bytes": (_kindless(lambda st: pre(st)["tables"]["checkpoints"]
            .update(bytes=0)), 1, "inconsistent",
            "pre-state lists 3 checkpoint rows of 0 bytes"),
        "rule_bytes_fewer_than_rows": (_kindless(lambda st: pre(st)["tables"]["writes"]
            .update(bytes=1)), 1, "inconsistent",
            "pre-state lists 2 write rows in 1 byte"),
        "rule_bytes_without_rows": (_kindless(lambda st: (pre(st)["tables"]["writes"]
            .update(rows=0), pre(st).update(leaves=3))), 1, "inconsistent",
            "pre-state lists 0 write rows of 80 bytes"),
        "rule_kept_rows_without_bytes": (_kind_resigned(H, lambda p: p["kept_state"]
            ["tables"]["writes"].update(bytes=0)), 1, "inconsistent",
            "history receipt: a kept write row of 0 bytes"),
        "rule_store_table_without_namespaces": (_kindless(lambda st: _store_rows(st, [],
            "atomic-transaction")), 1, "scope_mismatch",
            "store rows measured and erased, but no store namespace in the scope"),
        "rule_store_table_without_method": (_kindless(lambda st: _store_rows(st,
            [["users", "u1"]], None)), 1, "scope_mismatch",
            "store rows measured under a store namespace, but no methods.store"),
        "rule_store_method_without_namespaces": (_kindless(lambda st: (st["predicate"]
            ["scope"].update(store_namespaces=[]), st["predicate"]["methods"]
            .update(store="sweep"))), 1, "scope_mismatch",
            "methods.store without any store namespace"),
        "rule_namespaces_without_store": (_kindless(lambda st: st["predicate"]["backend"]
            .update(store=None)), 1, "scope_mismatch",
            "store namespaces erased, but backend.store is null"),
        "rule_unknown_table": (_kindless(lambda st: [s["tables"].update(checkpoint_blobs={
            "rows": 0, "bytes": 0}) for s in (pre(st), st["predicate"]["post_state"])]), 1,
            "scope_mismatch", "a sqlite receipt lists PostgreSQL's checkpoint_blobs table"),
        "rule_kind_store_method_without_table": (lambda: _signed(T(
            pre_tables=statement_kwargs()["pre_tables"],
            post_tables=statement_kwargs()["post_tables"])), 1, "scope_mismatch",
            "kind thread receipt with methods.store but no store table measured"),
        "rule_kind_unknown_method": (lambda: _signed(T(methods={"checkpoints": "delete",
            "store": "atomic-transaction"})), 1, "scope_mismatch",
            "kind thread receipt whose checkpoints method is not atomic-transaction"),
        "rule_kind_swept_store_vectors": (lambda: _signed(T(
            pre_tables={**T()["predicate"]["pre_state"]["tables"],
                        "store_vectors": {"rows": 0, "bytes": 0}},
            post_tables={**T()["predicate"]["post_state"]["tables"],
                         "store_vectors": {"rows": 0, "bytes": 0}},
            methods={"checkpoints": "atomic-transaction", "store": "sweep"})), 1,
            "scope_mismatch", "kind thread receipt: a swept store listed with store_vectors"),
        "rule_history_tombstone": (_kind_resigned(H, lambda p: p["scope"]
            .update(tombstone=True)), 1, "inconsistent",
            "history receipt whose scope claims a tombstone (the thread lives on)"),
        "rule_history_needles_database": (_kind_resigned(H, lambda p: p["needles"]
            .update(searched="database")), 1, "inconsistent",
            "history receipt whose needles claim a database-wide search"),
        "rule_sqlite_residue_empty": (_kindless(lambda st: st["predicate"]
            .update(residue=[])), 1, "residue_missing",
            "SQLite receipt with residue [] (no residue action recorded)"),
        "rule_sqlite_free_space_missing": (_residue("sqlite.secure_delete",
            "sqlite.wal_checkpoint"), 1, "residue_missing",
            "kind thread SQLite receipt without the live-page free-space disclosure"),
        "rule_sqlite_free_space_twice": (_residue("sqlite.secure_delete",
            "sqlite.wal_checkpoint", "sqlite.live_page_free_space", "residue_scan"), 1,
            "residue_missing",
            "kind thread SQLite receipt with both sqlite.live_page_free_space and residue_scan"),
        "rule_sqlite_store_file_free_space_missing": (_residue("sqlite.secure_delete",
            "sqlite.wal_checkpoint", "sqlite.live_page_free_space",
            "sqlite.secure_delete.store", "sqlite.wal_checkpoint.store", store_sweep=True), 1,
            "residue_missing",
            "store in another SQLite file scrubbed, but its free space not disclosed"),
        "rule_swept_store_residue_missing": (_residue("sqlite.secure_delete",
            "sqlite.wal_checkpoint", "sqlite.live_page_free_space", store_sweep=True), 1,
            "residue_missing", "swept store without store.scrub or .store residue"),
        "rule_postgres_vacuum_missing": (_postgres_without_vacuum, 1, "residue_missing",
            "PostgreSQL receipt without postgres.vacuum (dead tuples not disclosed)"),
        "rule_history_keep_all": (_schema_rule(H, lambda p: p["scope"].update(keep="all")),
            1, "schema", 'history receipt with keep "all"'),
        "rule_subject_no_threads": (_schema_rule(S, lambda p: p["scope"].update(
            threads=[])), 1, "schema", "subject receipt whose scope names no thread"),
        "rule_checkpoint_namespaces_one": (_schema_rule(T, lambda p: p["scope"].update(
            checkpoint_namespaces=[""])), 1, "schema",
            'checkpoint_namespaces is not "all"'),
        "rule_merkle_algorithm": (_schema_rule(T, lambda p: p["merkle"].update(
            algorithm="sha1-merkle")), 1, "schema", "unknown Merkle algorithm"),
    }  # fmt: skip


def _private_subject() -> dict[str, Any]:
    return subject_statement(PRIVATE_SUBJECT_ID, privacy=True)


def _private_raw_subject() -> bytes:
    st = _private_subject()
    st["predicate"]["scope"]["subject"] = SUBJECT
    return _signed(_renamed(st, f"langgraph-subject:{SUBJECT}"))


def _renamed(st: dict[str, Any], name: str) -> dict[str, Any]:
    st["subject"][0]["name"] = name
    return st


def bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    """file stem -> (builder, exit code, reason, description)."""
    pred = "statement.predicate"
    t = _tampered
    cases: dict[str, tuple[Callable[[], bytes], int, str, str]] = {
        # Tampered after signing: the signature no longer covers the statement.
        "tamper_receipt_id": (lambda: t(f"{pred}.receipt_id",
            "4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5e"), 1, BAD_SIG, "receipt_id changed"),
        "tamper_issued_at": (lambda: t(f"{pred}.issued_at", "2026-11-29T12:00:01Z"),
            1, BAD_SIG, "issued_at changed"),
        # "erased" is the only status the schema admits, so any change is a schema error.
        "tamper_status": (lambda: t(f"{pred}.status", "partial"), 1, "schema",
            "status changed to a value outside the schema"),
        "tamper_thread_id": (lambda: t(f"{pred}.scope.thread_id", "thread-2"), 1, BAD_SIG,
            "scope.thread_id changed"),
        "tamper_subject_name": (lambda: t("statement.subject.0.name",
            "langgraph-thread:thread-2"), 1, BAD_SIG, "subject name changed"),
        "tamper_store_namespaces": (lambda: t(f"{pred}.scope.store_namespaces",
            [["users", "u2"]]), 1, BAD_SIG, "store namespace changed"),
        "tamper_store_namespaces_emptied": (lambda: t(f"{pred}.scope.store_namespaces", []),
            1, BAD_SIG, "store namespaces removed"),
        "tamper_tombstone": (lambda: t(f"{pred}.scope.tombstone", False), 1, BAD_SIG,
            "tombstone flipped"),
        "tamper_pre_digest": (lambda: t(f"{pred}.pre_state.digest.sha256", _nonempty_root(5)),
            1, BAD_SIG, "pre-state digest changed"),
        "tamper_subject_digest": (lambda: t("statement.subject.0.digest.sha256",
            _nonempty_root(5)), 1, BAD_SIG, "subject digest changed"),
        "tamper_pre_rows": (lambda: t(f"{pred}.pre_state.tables.checkpoints.rows", 2),
            1, BAD_SIG, "pre-state row count changed"),
        "tamper_pre_leaves": (lambda: t(f"{pred}.pre_state.leaves", 4), 1, BAD_SIG,
            "pre-state leaf count changed"),
        "tamper_post_rows": (lambda: t(f"{pred}.post_state.tables.writes.rows", 1),
            1, BAD_SIG, "post-state row count changed"),
        "tamper_check_result": (lambda: t(f"{pred}.checks.0.result", "fail"), 1, BAD_SIG,
            "check result changed"),
        "tamper_check_removed": (lambda: _removed(f"{pred}.checks.2"), 1, BAD_SIG,
            "a check removed"),
        "tamper_residue_status": (lambda: t(f"{pred}.residue.0.status", "skipped"), 1,
            BAD_SIG, "residue status changed"),
        "tamper_out_of_scope_removed": (lambda: _removed(f"{pred}.out_of_scope.0"), 1,
            BAD_SIG, "out_of_scope entry removed"),
        "tamper_generator_version": (lambda: t(f"{pred}.generator.version", "0.1.1"), 1,
            BAD_SIG, "generator version changed"),
        "tamper_backend_kind": (lambda: t(f"{pred}.backend.kind", "postgres"), 1, BAD_SIG,
            "backend kind changed"),
        "tamper_method": (lambda: t(f"{pred}.methods.writes", "truncate"), 1, BAD_SIG,
            "erasure method changed"),
        # Signatures and keys.
        "sig_bit_flip": (_sig_bit_flip, 1, BAD_SIG, "one bit of the signature flipped"),
        "sig_truncated": (_sig_truncated, 1, BAD_SIG, "signature truncated to 48 bytes"),
        "sig_not_base64": (lambda: t("signatures.0.sig", "not*base64"), 1, "schema",
            "signature is not base64"),
        "sig_keyid_uppercase": (lambda: t("signatures.0.keyid", TRUSTED.key_id.upper()), 1,
            "schema", "signature keyid not lowercase hex"),
        "wrong_key": (lambda: make_receipt(signer=ATTACKER).to_json(), 1, "untrusted_key",
            "valid receipt signed by the attacker's key, attacker key embedded"),
        "key_substitution": (_key_substitution, 1, "untrusted_key",
            "tampered statement re-signed by the attacker, attacker key and keyid embedded"),
        "keyid_hint_trusted_attacker_sig": (_keyid_hint_trusted_attacker_sig, 1, BAD_SIG,
            "keyid names the trusted key but the signature is the attacker's"),
        "embedded_keyid_mismatch": (_embedded_keyid_mismatch, 1, "keyid_mismatch",
            "embedded public key does not hash to its keyid"),
        "embedded_key_wrong_length": (lambda: t("public_key.ed25519", _b64(b"\x01" * 31)), 1,
            "schema", "embedded public key is 31 bytes"),
        "sig_noncanonical_bits": (_sig_noncanonical_bits, 1, "schema",
            "signature base64 with a non-zero unused bit (decodes leniently to the same bytes)"),
        "embedded_key_noncanonical_bits": (_embedded_key_noncanonical_bits, 1, "schema",
            "embedded key base64 with a non-zero unused bit"),
        "no_signatures": (lambda: t("signatures", []), 1, "schema", "empty signatures"),
        "missing_signatures": (lambda: _removed("signatures"), 1, "schema",
            "signatures member missing"),
        # Parsing.
        "duplicate_key": (lambda: _replace_once(_good_bytes(), b'"status": "erased",',
            b'"status": "erased",\n      "status": "erased",'), 1, "duplicate_key",
            "predicate.status appears twice"),
        "float_count": (lambda: _replace_once(_good_bytes(), b'"rows": 3,', b'"rows": 3.0,'),
            1, "float", "row count written as 3.0"),
        "nan_count": (lambda: _replace_once(_good_bytes(), b'"rows": 3,', b'"rows": NaN,'),
            1, "not_json", "row count is NaN"),
        "huge_integer_literal": (lambda: _replace_once(_good_bytes(), b'"rows": 3,',
            b'"rows": ' + b"9" * 5000 + b","), 1, "not_json", "5000-digit integer"),
        "integer_range": (lambda: t(f"{pred}.pre_state.tables.checkpoints.rows", 2**60), 1,
            "integer_range", "row count 2**60 is outside the I-JSON safe range"),
        "negative_count": (lambda: t(f"{pred}.pre_state.tables.writes.bytes", -1), 1,
            "integer_range", "negative byte count"),
        "truncated": (lambda: _good_bytes()[: len(_good_bytes()) // 2], 1, "not_json",
            "file cut in half"),
        "trailing_garbage": (lambda: _good_bytes() + b"{}\n", 1, "not_json",
            "a second JSON value after the receipt"),
        "not_json_text": (lambda: b"This is not a receipt.\n", 1, "not_json", "plain text"),
        "empty": (lambda: b"", 1, "not_json", "empty file"),
        "not_utf8": (lambda: _replace_once(_good_bytes(), b'"thread_id": "thread-1"',
            b'"thread_id": "thread-\xff"'), 1, "not_utf8", "invalid UTF-8 byte"),
        "utf8_bom": (lambda: b"\xef\xbb\xbf" + _good_bytes(), 1, "not_utf8",
            "UTF-8 byte-order mark"),
        "lone_surrogate": (lambda: _replace_once(_good_bytes(), b'"thread_id": "thread-1"',
            b'"thread_id": "\\ud800"'), 1, "not_utf8", "thread_id is a lone surrogate"),
        "too_large": (_too_large, 1, "too_large", "valid receipt padded past 1 MiB"),
        "deep_nesting": (_deep_nesting, 1, "not_json", "100000 nested arrays"),
        # Schema and versions.
        "rows_as_string": (lambda: t(f"{pred}.pre_state.tables.checkpoints.rows", "3"), 1,
            "schema", "row count is a string"),
        "tombstone_as_int": (lambda: t(f"{pred}.scope.tombstone", 1), 1, "schema",
            "tombstone is 1, not true"),
        "two_subjects": (lambda: t("statement.subject", [
            make_statement()["subject"][0], make_statement()["subject"][0]]), 1, "schema",
            "two subjects"),
        "unknown_statement_type": (lambda: t("statement._type",
            "https://in-toto.io/Statement/v0.1"), 1, "unknown_type", "in-toto Statement v0.1"),
        "unknown_predicate_type": (lambda: t("statement.predicateType",
            "https://langgraph-erasure-receipts.dev/erasure/v2"), 1, "unknown_predicate",
            "predicate v2"),
        "unknown_media_type": (lambda: t("media_type",
            "application/vnd.langgraph-erasure-receipt.v2+json"), 1, "unknown_version",
            "receipt file format v2"),
        "extra_member": (lambda: t("comment", "trust me"), 1, "schema",
            "unknown top-level member"),
        "extra_predicate_member": (lambda: t(f"{pred}.verified_by", "me"), 1, "schema",
            "unknown predicate member"),
        "not_an_object": (lambda: b"[]\n", 1, "schema", "top-level array"),
        # Signed by the trusted key, but the statement itself is unacceptable.
        "resigned_not_empty": (lambda: _resigned(_not_empty), 1, "not_empty",
            "status erased but one row left in the post-state"),
        "resigned_subject_digest_mismatch": (lambda: _resigned(_subject_digest_mismatch), 1,
            "subject_digest_mismatch", "subject digest differs from the pre-state digest"),
        "resigned_subject_name_mismatch": (lambda: _resigned(_subject_name_mismatch), 1,
            "subject_name_mismatch", "subject names another thread"),
        "resigned_leaves_inconsistent": (lambda: _resigned(_inconsistent_leaves), 1,
            "inconsistent", "pre-state leaves != sum of table rows"),
        "resigned_tables_inconsistent": (lambda: _resigned(_inconsistent_tables), 1,
            "inconsistent", "pre- and post-state list different tables"),
        "resigned_post_digest_not_empty": (lambda: _resigned(_post_digest_not_empty), 1,
            "inconsistent", "post-state has 0 leaves but a non-empty digest"),
        "resigned_pre_digest_empty_with_rows": (lambda: _resigned(_pre_digest_empty_with_rows),
            1, "inconsistent", "pre-state has rows but the empty-tree digest"),
        "resigned_check_failed": (lambda: _resigned(_check_failed), 1, "check_failed",
            "status erased but a check failed"),
        "resigned_out_of_scope_missing": (lambda: _resigned(_out_of_scope_missing), 1,
            "out_of_scope_missing", "out_of_scope lacks backups"),
        "resigned_impossible_issued_at": (lambda: _resigned_raw(_impossible_issued_at), 1,
            "schema", "issued_at 2025-02-31T25:61:61Z, validly signed"),
        "resigned_leap_day_non_leap_year": (lambda: _resigned_raw(_leap_day_non_leap_year), 1,
            "schema", "issued_at 2100-02-29 (2100 is not a leap year), validly signed"),
        # DSSE envelopes.
        "dsse_not_canonical": (_dsse_not_canonical, 1, "not_canonical",
            "correctly signed DSSE payload that is indented JSON"),
        "dsse_not_canonical_key_order": (_dsse_not_canonical_key_order, 1, "not_canonical",
            "correctly signed DSSE payload with members out of order"),
        "dsse_wrong_payload_type": (lambda: _dsse(canonicalize(make_statement()),
            payload_type="application/json"), 1, "unknown_type", "payloadType not in-toto"),
        "dsse_tampered_payload": (_dsse_tampered_payload, 1, BAD_SIG,
            "DSSE payload replaced, signature kept"),
        "dsse_attacker": (lambda: _dsse(canonicalize(make_statement()), ATTACKER), 1,
            "untrusted_key", "DSSE envelope signed by the attacker"),
        "dsse_extra_member": (lambda: _dsse(canonicalize(make_statement()), note="x"), 1,
            "schema", "DSSE envelope with an unknown member"),
        "dsse_keyid_null": (lambda: _dsse_keyid(None), 1, "schema",
            "correctly signed envelope, signature keyid null"),
        "dsse_keyid_zero": (lambda: _dsse_keyid(0), 1, "schema",
            "correctly signed envelope, signature keyid 0"),
        "dsse_keyid_false": (lambda: _dsse_keyid(False), 1, "schema",
            "correctly signed envelope, signature keyid false"),
        "dsse_keyid_object": (lambda: _dsse_keyid({}), 1, "schema",
            "correctly signed envelope, signature keyid {}"),
        "dsse_keyid_array": (lambda: _dsse_keyid([]), 1, "schema",
            "correctly signed envelope, signature keyid []"),
        "dsse_payload_overpadded": (_dsse_payload_overpadded, 1, "schema",
            "DSSE payload base64 with extra padding"),
        "dsse_payload_not_base64": (lambda: _replace_once(
            _dsse(canonicalize(make_statement())), b'"payload": "', b'"payload": "%'), 1,
            "schema", "DSSE payload is not base64"),
        # Request context and authorization (section 9.6).
        "request_tampered_id": (_tamper_request_id, 1, BAD_SIG,
            "request id changed after signing"),
        "request_bad_received_at": (lambda: _resigned_raw(with_request(
            received_at="2026-02-30T00:00:00Z")), 1, "schema",
            "request received_at 2026-02-30, validly signed"),
        "request_missing_due": (lambda: _resigned_raw(lambda st: (with_request()(st),
            st["predicate"]["request"].pop("due"))), 1, "schema", "request without due"),
        "request_received_after_issued": (lambda: _resigned(with_request(
            received_at="2026-11-29T12:00:01Z", due="2026-12-29T00:00:00Z")), 1,
            "inconsistent", "request received after the erasure began"),
        "request_due_before_received": (lambda: _resigned(with_request(
            due="2026-10-01T00:00:00Z")), 1, "inconsistent", "request due before received"),
        "auth_without_request": (lambda: _resigned_raw(_auth_without_request), 1, "schema",
            "authorization without a request member"),
        "auth_wrong_type": (lambda: _resigned_raw(with_request(_auth_wrong_type())), 1,
            "schema", "authorization statement _type is the in-toto Statement type"),
        "auth_other_thread": (lambda: _resigned(with_request(authorization_member(
            thread_id="thread-2"))), 1, "authorization_mismatch",
            "authorization for thread-2 embedded in a receipt for thread-1"),
        "auth_other_request": (lambda: _resigned(with_request(authorization_member(
            request_id="DSR-2026-0041"))), 1, "authorization_mismatch",
            "authorization for another request id"),
        "auth_expired": (lambda: _resigned(with_request(authorization_member(
            not_after="2026-11-29T11:59:59.999999Z"))), 1, "authorization_expired",
            "authorization not_after one microsecond before issued_at"),
        "auth_no_approver_trusted": (lambda: _resigned(with_request(authorization_member())),
            1, "authorization_untrusted",
            "valid authorization, but --key trusts no approver (verifies with a trust file "
            "that marks the approver's key role approver)"),
        "auth_signed_by_receipt_key": (lambda: _resigned(with_request(authorization_member(
            signer=TRUSTED))), 1, "authorization_untrusted",
            "authorization signed by the receipt signer's own key (no four eyes)"),
        "auth_tampered_signature": (lambda: _resigned(with_request(
            _auth_tampered_signature())), 1, "authorization_untrusted",
            "authorization signature bit-flipped (authorization_bad_signature with a trust "
            "file naming the approver)"),
    }  # fmt: skip
    cases.update(_kind_bad_cases())
    cases.update(_rule_bad_cases())
    cases.update(_replay_bad_cases())
    cases.update(_namespace_bad_cases())
    cases.update(_redaction_bad_cases())
    cases.update(_deferral_bad_cases())
    cases.update(_targets_bad_cases())
    cases.update(_shred_bad_cases())
    return cases


# -- replay after a restore (section 9.11) ------------------------------------------------

REPLAY_ID = "5c1e2d3f-4a5b-4c6d-8e7f-901a2b3c4d5e"


def replay_statement(of: str = THREAD_KIND_ID) -> dict[str, Any]:
    """A thread receipt that repeats the erasure ``of`` after a restore."""
    st = thread_kind_statement(receipt_id=REPLAY_ID)
    st["predicate"]["replay_of"] = of
    return st


def _replay_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    return {
        "replay_of_not_uuid": (lambda: _sign_raw(replay_statement("receipt-1")), 1, "schema",
            "replay_of is not a receipt id, validly signed"),
        "replay_of_itself": (lambda: _sign_raw(replay_statement(REPLAY_ID)), 1, "inconsistent",
            "replay_of names the receipt's own id, validly signed"),
    }  # fmt: skip


# -- end of replay -------------------------------------------------------------------------


# -- kind "namespace" (RECEIPT_SPEC.md 8.1, 9.7): one store prefix, no thread ------------

NAMESPACE_ID = "4b8e2c6a-1d3f-4a5b-8c7d-2e3f4a5b6c7d"
STORE_TOMBSTONE_ID = "5c9f3d7b-2e4a-4b6c-9d8e-3f4a5b6c7d8e"
NAMESPACE = ("users", "alice")


def _vector_row(prefix: str, key: str) -> Row:
    cols = (("prefix", prefix), ("key", key), ("field_name", "text"),
            ("embedding", b"\x00\x00\x80\x3f\x00\x00\x80\x3f"),
            ("created_at", "2026-10-01 08:00:00"),
            ("updated_at", "2026-10-01 08:00:00"))  # fmt: skip
    return "store_vectors", digest.encode_row("store_vectors", (prefix, key, "text"), cols)


def namespace_statement(**scope_over: Any) -> dict[str, Any]:
    """``erase_namespace(("users", "alice"))``: two items under the prefix, one below it
    (a TTL-expired one is measured like any other), and one embedding."""
    rows = [
        _store_row("users.alice", "notes", b'{"text": "likes tea"}'),
        _store_row("users.alice", "profile", b'{"name": "alice"}'),
        _store_row("users.alice.prefs", "theme", b'{"mode": "dark"}'),
        _vector_row("users.alice", "notes"),
    ]
    tables = ("store", "store_vectors")
    pre, empty = _measure(rows, tables), _measure([], tables)
    ns = list(NAMESPACE)
    scope = {"namespace": ns, "store_namespaces": [ns], "tombstone": True, **scope_over}
    return build_statement(**{
        **statement_kwargs(),
        "receipt_id": NAMESPACE_ID, "thread_id": ".".join(ns), "store_namespaces": [ns],
        "backend": _kind_backend(store="SqliteStore"),
        "pre_digest": pre["digest"]["sha256"], "pre_tables": pre["tables"],
        "post_digest": empty["digest"]["sha256"], "post_tables": empty["tables"],
        "methods": {"store": "atomic-transaction"},
        "checks": [_check("raw_rows_zero_in_transaction"), _check("raw_rows_zero_after_commit"),
                   _check("api_store_search_empty")],
        "residue": copy.deepcopy(SQLITE_RESIDUE),
        "kind": "namespace", "scope": scope,
        "subject_name": "langgraph-store-namespace:" + ".".join(ns),
    })  # fmt: skip


def _namespace_with_checkpoints(p: dict[str, Any]) -> None:
    for state in (p["pre_state"], p["post_state"]):
        state["tables"]["checkpoints"] = {"rows": 0, "bytes": 0}
    p["methods"]["checkpoints"] = "atomic-transaction"


def _namespace_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    N = namespace_statement
    return {
        "kind_namespace_store_namespaces_differ": (lambda: _signed(N(
            store_namespaces=[["users", "bob"]])), 1, "scope_mismatch",
            "namespace receipt whose store_namespaces is not [scope.namespace]"),
        "kind_namespace_label_with_dot": (lambda: _sign_raw(N(namespace=["users.alice"],
            store_namespaces=[["users.alice"]])), 1, "schema",
            "namespace receipt with a label containing '.' (LangGraph forbids it)"),
        "kind_namespace_with_thread_id": (lambda: _sign_raw(N(thread_id="t")), 1, "schema",
            "namespace receipt whose scope also names a thread"),
        "kind_namespace_subject_name_mismatch": (lambda: _signed(_renamed(N(),
            "langgraph-store-namespace:users.alicia")), 1, "subject_name_mismatch",
            "namespace receipt whose subject names another prefix"),
        "kind_namespace_checkpoint_tables": (_kind_resigned(N, _namespace_with_checkpoints), 1,
            "scope_mismatch", "namespace receipt listing a checkpoint table and method"),
        "kind_thread_store_tombstone_not_bool": (lambda: _sign_raw(thread_kind_statement(
            scope={"thread_id": "thread-1", "checkpoint_namespaces": "all",
                   "store_namespaces": [["users", "alice"]], "tombstone": True,
                   "store_tombstone": "yes"})), 1, "schema",
            "thread receipt whose scope.store_tombstone is not a boolean"),
    }  # fmt: skip


def _namespace_good_cases() -> dict[str, Callable[[], bytes]]:
    return {
        "namespace.json": lambda: _signed(namespace_statement()),
        "thread-store-tombstone.json": lambda: _signed(thread_kind_statement(
            receipt_id=STORE_TOMBSTONE_ID,
            scope={"thread_id": "thread-1", "checkpoint_namespaces": "all",
                   "store_namespaces": [["users", "alice"]], "tombstone": True,
                   "tombstone_policy": "new_conversations", "store_tombstone": True})),
    }  # fmt: skip


# -- end of kind "namespace" --------------------------------------------------------------


# -- kind "redaction" (RECEIPT_SPEC.md 9.12): values rewritten, every checkpoint kept ---

REDACTION_ID = "6d0a4e8c-3f5b-4c7d-8e9f-4a5b6c7d8e9f"
REDACTION_THREAD = "alice-chat"


def redaction_statement(**scope_over: Any) -> dict[str, Any]:
    """``redact("alice-chat", NEEDLES)``: two checkpoints and one pending write held a
    needle; the same rows after the rewrite, every checkpoint of the thread kept."""
    t = REDACTION_THREAD

    def rows(value: bytes) -> list[Row]:
        return [
            _cp_row(t, "", "1f0a8c3e-0001", 1),
            _cp_row(t, "", "1f0a8c3e-0002", 2),
            _write_row(t, "1f0a8c3e-0001", "task-a", 0, b"\xa5hello from " + value),
        ]

    tables = ("checkpoints", "writes")
    pre = _measure(rows(b"alice@example.com"), tables)
    post = _measure(rows(b"[redacted]"), tables)
    scope = {"thread_id": t, "checkpoint_namespaces": "all", "store_namespaces": [],
             "tombstone": False, **scope_over}  # fmt: skip
    return build_statement(**{
        **statement_kwargs(),
        "receipt_id": REDACTION_ID, "thread_id": t, "store_namespaces": [], "tombstone": False,
        "backend": _kind_backend(),
        "pre_digest": pre["digest"]["sha256"], "pre_tables": pre["tables"],
        "post_digest": post["digest"]["sha256"], "post_tables": post["tables"],
        "methods": {"checkpoints": "atomic-transaction"},
        "checks": [_check("decoded_needles_zero_in_transaction"), _check("checkpoints_kept"),
                   _check("raw_needles_zero_after_commit"), _check("api_checkpoints_kept"),
                   _check("api_needles_zero")],
        "residue": copy.deepcopy(SQLITE_RESIDUE),
        "kind": "redaction", "scope": scope,
        "subject_name": f"langgraph-thread-redaction:{t}",
        "extra": {
            "needles": _needles(NEEDLE_SALT, "thread", salted=True),
            "redaction": {
                "checkpoints_before": 3, "checkpoints_after": 3,
                "replacement": {"sha256": hashlib.sha256(b"[redacted]").hexdigest()},
            },
        },
    })  # fmt: skip


def _redaction_rows_dropped(p: dict[str, Any]) -> None:
    p["post_state"]["tables"]["writes"] = {"rows": 0, "bytes": 0}
    p["post_state"]["leaves"] -= 1


def _redaction_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    R = redaction_statement
    return {
        "kind_redaction_status_erased": (_schema_rule(R, lambda p: p.update(status="erased")),
            1, "schema", "redaction receipt whose status is erased"),
        "kind_redaction_without_needles": (_schema_rule(R, lambda p: p.pop("needles")), 1,
            "schema", "redaction receipt without its needles"),
        "kind_redaction_tombstone": (lambda: _sign_raw(R(tombstone=True)), 1, "schema",
            "redaction receipt that claims a tombstone"),
        "kind_redaction_rows_dropped": (_kind_resigned(R, _redaction_rows_dropped), 1,
            "inconsistent", "redaction receipt whose post-state lost a rewritten row"),
        "kind_redaction_checkpoints_dropped": (_kind_resigned(R, lambda p: p["redaction"]
            .update(checkpoints_after=2)), 1, "inconsistent",
            "redaction receipt with fewer checkpoints after than before"),
        "kind_redaction_needle_remains": (_kind_resigned(R, lambda p: p["needles"]
            .update(occurrences_after=1)), 1, "needles_remain",
            "redaction receipt that still finds a needle"),
        "kind_redaction_subject_name_mismatch": (lambda: _signed(_renamed(R(),
            "langgraph-thread-redaction:bob-chat")), 1, "subject_name_mismatch",
            "redaction receipt whose subject names another thread"),
        "kind_history_with_redaction_member": (_schema_rule(history_statement, lambda p: p
            .update(redaction=R()["predicate"]["redaction"])), 1, "schema",
            "history receipt carrying a redaction member"),
    }  # fmt: skip


def _redaction_good_cases() -> dict[str, Callable[[], bytes]]:
    return {"redaction.json": lambda: _signed(redaction_statement())}


# -- end of kind "redaction" --------------------------------------------------------------
# -- kind "deferral" (RECEIPT_SPEC.md 9.14): a signed decision to retain ------------------

DEFERRAL_ID = "8f2c6a0e-5b7d-4e9f-a0b1-6c7d8e9fa0b2"
DEFERRED_ERASURE_ID = "7e1b5f9d-4a6c-4d8e-9fa0-5b6c7d8e9fa1"
DEFERRAL = {"of_kind": "thread", "basis": "GDPR Art. 17(3)(b): kept for a legal obligation",
            "code": "gdpr-17-3-b", "until": "2027-06-01T00:00:00Z"}  # fmt: skip


def deferral_statement(**deferral_over: Any) -> dict[str, Any]:
    """``defer("thread-1", ...)``: the thread measured in one read snapshot, retained
    until 2027-06-01 (nothing deleted: the post-state is the pre-state)."""
    t = "thread-1"
    rows = [
        _cp_row(t, "", "1f0a8c3e-0101", 1),
        _cp_row(t, "", "1f0a8c3e-0102", 2),
        _write_row(t, "1f0a8c3e-0101", "task-a", 0, b"\xa5hello from alice@example.com"),
    ]
    pre = _measure(rows, ("checkpoints", "writes"))
    st = build_statement(**{
        **statement_kwargs(),
        "receipt_id": DEFERRAL_ID, "thread_id": t, "store_namespaces": [], "tombstone": False,
        "backend": _kind_backend(),
        "pre_digest": pre["digest"]["sha256"], "pre_tables": pre["tables"],
        "post_digest": pre["digest"]["sha256"], "post_tables": pre["tables"],
        "methods": {"checkpoints": "read-snapshot"},
        "checks": [_check("scope_measured", "3 rows measured in one read snapshot; nothing "
                          "deleted"), _check("until_after_issued_at")],
        "residue": [], "kind": "deferral",
        "scope": {"thread_id": t, "checkpoint_namespaces": "all", "store_namespaces": [],
                  "tombstone": False},
        "extra": {"deferral": {**DEFERRAL, **deferral_over}},
    })  # fmt: skip
    st["predicate"]["status"] = "retained"
    return st


def deferred_erasure_statement(of: str = DEFERRAL_ID) -> dict[str, Any]:
    """The thread erasure a retention sweep made once the deferral ended."""
    st = thread_kind_statement(receipt_id=DEFERRED_ERASURE_ID)
    st["predicate"]["deferral_of"] = of
    return st


def _deferral_mutated(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[], bytes]:
    def make() -> bytes:
        st = deferral_statement()
        mutate(st["predicate"])
        return _sign_raw(st)

    return make


def _erased_post(p: dict[str, Any]) -> None:
    p["post_state"] = {
        "digest": {"sha256": digest.EMPTY_ROOT.hex()},
        "leaves": 0,
        "tables": {k: {"rows": 0, "bytes": 0} for k in p["pre_state"]["tables"]},
    }


def _deferral_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    D = _deferral_mutated
    return {
        "kind_deferral_status_erased": (D(lambda p: p.update(status="erased")), 1, "schema",
            "deferral receipt whose status is erased, validly signed"),
        "kind_thread_status_retained": (lambda: _sign_raw(_status(thread_kind_statement(),
            "retained")), 1, "schema", "thread receipt whose status is retained"),
        "kind_deferral_without_member": (D(lambda p: p.pop("deferral")), 1, "schema",
            "deferral receipt without its deferral member"),
        "kind_deferral_blank_basis": (D(lambda p: p["deferral"].update(basis="   ")), 1,
            "schema", "deferral whose legal basis is blank"),
        "kind_deferral_bad_code": (D(lambda p: p["deferral"].update(code="GDPR 17(3)")), 1,
            "schema", "deferral whose code is not a short identifier"),
        "kind_deferral_until_not_time": (D(lambda p: p["deferral"].update(until="2027-06-01")),
            1, "schema", "deferral whose until is a date, not an RFC 3339 time"),
        "kind_deferral_of_namespace": (D(lambda p: p["deferral"].update(of_kind="namespace")),
            1, "schema", "deferral of a kind a deferral cannot retain"),
        "kind_deferral_post_state_empty": (D(_erased_post), 1, "inconsistent",
            "deferral whose post-state is empty (it claims to retain what it deleted)"),
        "kind_deferral_until_before_issued": (D(lambda p: p["deferral"].update(
            until="2026-11-29T11:59:59Z")), 1, "inconsistent",
            "deferral whose until is before its issued_at"),
        "kind_deferral_tombstoned": (D(lambda p: p["scope"].update(tombstone=True)), 1,
            "inconsistent", "deferral whose scope claims a tombstone"),
        "kind_deferral_delete_method": (D(lambda p: p.update(methods={
            "checkpoints": "atomic-transaction"})), 1, "scope_mismatch",
            "deferral whose methods say rows were deleted"),
        "kind_deferral_with_deferral_of": (D(lambda p: p.update(deferral_of=DEFERRAL_ID)), 1,
            "schema", "deferral receipt that names a deferral_of"),
        "deferral_of_not_uuid": (lambda: _sign_raw(deferred_erasure_statement("deferral-1")),
            1, "schema", "deferral_of is not a receipt id, validly signed"),
        "deferral_of_itself": (lambda: _sign_raw(deferred_erasure_statement(
            DEFERRED_ERASURE_ID)), 1, "inconsistent",
            "deferral_of names the erasure's own receipt id, validly signed"),
    }  # fmt: skip


def _status(st: dict[str, Any], status: str) -> dict[str, Any]:
    st["predicate"]["status"] = status
    return st


def _deferral_good_cases() -> dict[str, Callable[[], bytes]]:
    return {
        "deferral.json": lambda: _signed(deferral_statement()),
        "thread-deferral-of.json": lambda: _signed(deferred_erasure_statement()),
    }


# -- end of kind "deferral" ---------------------------------------------------------------
# -- erasure targets (section 9.13) -------------------------------------------------------

TARGETS_ID = "ab4e8c2a-7d9f-4b1c-9d3e-8e9fa0b1c2d4"
TARGETS_THREAD = "refund-chat-1"
TARGETS_MEMBER = [
    {"name": "ledger-copy", "type": "sql", "key": "thread", "method": "sweep",
     "table": "refund_grants", "key_column": "thread_id", "database": "/var/lib/app/ledger.db"},
    {"name": "refund_grants", "type": "sql", "key": "thread", "method": "atomic-transaction",
     "table": "refund_grants", "key_column": "thread_id", "after": "threads_verified_gone",
     "tombstone": True},
]  # fmt: skip


def _grant_row(label: str, grant_id: str, amount: int) -> Row:
    cols = (("grant_id", grant_id), ("thread_id", TARGETS_THREAD), ("amount_cents", amount),
            ("reason", "refund please"), ("payload", b'{"by": "refund-chat-1"}'),
            ("consumed", 1))  # fmt: skip
    return label, digest.encode_row("refund_grants", (grant_id,), cols)


def targets_statement() -> dict[str, Any]:
    """``erase_thread`` with two targets: the grant ledger in the saver's database (a
    dependent target, erased in the transaction) and its copy in another database
    (swept after the commit). Tables in name order; target leaves name the stored
    table."""
    t = TARGETS_THREAD
    cp = digest.encode_row("checkpoints", (t, "", "1f0a"), (
        ("thread_id", t), ("checkpoint_ns", ""), ("checkpoint_id", "1f0a"),
        ("parent_checkpoint_id", None), ("type", "msgpack"), ("checkpoint", b"\x81"),
        ("metadata", b"{}")))  # fmt: skip
    rows = [
        ("checkpoints", cp),
        _grant_row("target:ledger-copy", "g-0001", 1251),
        _grant_row("target:refund_grants", "g-0000", 1250),
        _grant_row("target:refund_grants", "g-0001", 1251),
    ]
    tables = ("checkpoints", "target:ledger-copy", "target:refund_grants", "writes")
    pre, empty = _measure(rows, tables), _measure([], tables)
    st = thread_kind_statement(
        receipt_id=TARGETS_ID, thread_id=t,
        scope={"thread_id": t, "checkpoint_namespaces": "all", "store_namespaces": [],
               "tombstone": True, "tombstone_policy": "new_conversations"},
        subject_name=f"langgraph-thread:{t}",
        pre_digest=pre["digest"]["sha256"], pre_tables=pre["tables"],
        post_digest=empty["digest"]["sha256"], post_tables=empty["tables"],
        methods={"checkpoints": "atomic-transaction", "target:ledger-copy": "sweep",
                 "target:refund_grants": "atomic-transaction"},
        checks=[_check("raw_rows_zero_in_transaction"), _check("raw_rows_zero_after_commit"),
                _check("target_swept_after_commit",
                       "target:ledger-copy: 1 row(s) deleted after the commit"),
                _check("api_get_tuple_none"), _check("api_list_empty")],
    )  # fmt: skip
    st["predicate"]["targets"] = copy.deepcopy(TARGETS_MEMBER)
    return st


def _without_targets_member(p: dict[str, Any]) -> None:
    del p["targets"]


def _target_method_differs(p: dict[str, Any]) -> None:
    p["methods"]["target:refund_grants"] = "sweep"


def _target_without_table(p: dict[str, Any]) -> None:
    for state in (p["pre_state"], p["post_state"]):
        state["tables"].pop("target:ledger-copy")
    p["pre_state"]["leaves"] -= 1
    del p["methods"]["target:ledger-copy"]


def _history_with_target(p: dict[str, Any]) -> None:
    p["targets"] = [copy.deepcopy(TARGETS_MEMBER[1])]
    for state in (p["pre_state"], p["post_state"]):
        state["tables"]["target:refund_grants"] = {"rows": 0, "bytes": 0}
    p["methods"]["target:refund_grants"] = "atomic-transaction"


def _targets_unsorted(p: dict[str, Any]) -> None:
    p["targets"].reverse()


def _targets_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    T = targets_statement
    return {
        "targets_member_missing": (_kind_resigned(T, _without_targets_member), 1,
            "scope_mismatch", "target tables and methods, but no targets member naming them"),
        "targets_method_mismatch": (_kind_resigned(T, _target_method_differs), 1,
            "scope_mismatch", "methods says sweep for a target the targets member says is "
            "atomic-transaction"),
        "targets_table_missing": (_kind_resigned(T, _target_without_table), 1,
            "scope_mismatch", "a target of the targets member with no table in the states"),
        "targets_in_history": (_kind_resigned(history_statement, _history_with_target), 1,
            "scope_mismatch", "a history receipt erasing a target (the thread lives on)"),
        "targets_unsorted": (_kind_resigned(T, _targets_unsorted), 1, "scope_mismatch",
            "targets member not sorted by name"),
    }  # fmt: skip


def _targets_good_cases() -> dict[str, Callable[[], bytes]]:
    return {"thread-targets.json": lambda: _signed(targets_statement())}


# -- end of erasure targets ----------------------------------------------------------------
# -- kind "shred" (RECEIPT_SPEC.md 9.16): a data key destroyed in the key store ----------

SHRED_ID = "9a3d7b1f-6c8e-4fa0-b1c2-7d8e9fa0b1c3"
SHRED_THREAD_ID = "7e1b5f9d-4a6c-4d8e-9fa0-5b6c7d8e9fa0"
SHRED_STORE_ID = "8f2c6a0e-5b7d-4e9f-8ab1-6c7d8e9fa0b1"
SHRED_KEY_ID = bytes(range(16))
SHRED_RESIDUE = [
    {"action": "key_store.vacuum", "status": "applied",
     "detail": {"key_store": "/var/lib/app/keys.sqlite", "secure_delete": True}},
    {"action": "key_store.residue_scan", "status": "applied",
     "detail": {"files": 1, "occurrences": 0,
                "searched": "the wrapped key, its id, a 16-byte slice of its ciphertext"}},
]  # fmt: skip


def shred_statement(
    key_scope: str = "subject",
    subject: str = "alice",
    threads: tuple[str, ...] = ("alice-1", "alice-2"),
    namespaces: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``shred_subject("alice")``: the key's row and its two thread bindings, destroyed."""
    name = f"{key_scope}:{subject}"
    key_cols = (("name", name), ("key_id", SHRED_KEY_ID), ("wrapped", bytes(60)),
                ("kek_id", "0123456789abcdef"),
                ("created_at", "2026-10-01T08:00:00+00:00"))  # fmt: skip
    rows = [("erasure_data_keys", digest.encode_row("erasure_data_keys", (name,), key_cols))]
    rows += [
        ("erasure_thread_keys",
         digest.encode_row("erasure_thread_keys", (t,), (("thread_id", t), ("name", name))))
        for t in threads
    ]  # fmt: skip
    rows += [
        ("erasure_namespace_keys",
         digest.encode_row("erasure_namespace_keys", (n,), (("namespace", n), ("name", name))))
        for n in namespaces
    ]  # fmt: skip
    tree = MerkleTree()
    for _, data in rows:
        tree.append(data)
    key_bytes = len(name) + 16 + 60 + 16 + 25
    pre = {
        "erasure_data_keys": {"rows": 1, "bytes": key_bytes},
        "erasure_thread_keys": {"rows": len(threads),
                                "bytes": sum(len(t) + len(name) for t in threads)},
    }  # fmt: skip
    if namespaces:
        ns_bytes = sum(len(n) + len(name) for n in namespaces)
        pre["erasure_namespace_keys"] = {"rows": len(namespaces), "bytes": ns_bytes}
    zero = {k: {"rows": 0, "bytes": 0} for k in pre}
    commitment = hashlib.sha256(b"erasure-receipts-data-key-id-v1\x00" + SHRED_KEY_ID).hexdigest()
    scope = {
        "subject": subject, "key_scope": key_scope, "threads": sorted(threads),
        "key_commitment": commitment, "checkpoint_namespaces": "all",
        "store_namespaces": [n.split(".") for n in namespaces],
        "tombstone": False,
        "key_store": {"kind": "sqlite", "scrub": "applied", "backup_retention": "P30D"},
    }  # fmt: skip
    prefix = "langgraph-shred:" if key_scope == "subject" else "langgraph-shred-thread:"
    return build_statement(**{
        **statement_kwargs(),
        "receipt_id": SHRED_STORE_ID if namespaces else (
            SHRED_ID if key_scope == "subject" else SHRED_THREAD_ID),
        "thread_id": None, "store_namespaces": [], "tombstone": False,
        "backend": {"kind": "key-store-sqlite", "saver": "AttestingSqliteSaver",
                    "store": "EncryptedStore" if namespaces else None,
                    "database": "/var/lib/app/keys.sqlite",
                    "versions": {"langgraph-erasure-receipts": "0.1.0"}},
        "pre_digest": tree.root().hex(), "pre_tables": pre,
        "post_digest": digest.EMPTY_ROOT.hex(), "post_tables": zero,
        "methods": {"key_store": "atomic-transaction"},
        "checks": [_check("key_store_rows_zero_after_commit"), _check("api_reads_refused")],
        "residue": copy.deepcopy(SHRED_RESIDUE),
        "kind": "shred", "scope": scope, "subject_name": prefix + subject,
    })  # fmt: skip


def _shred_two_keys(p: dict[str, Any]) -> None:
    t = p["pre_state"]["tables"]["erasure_data_keys"]
    t["rows"], t["bytes"] = 2, t["bytes"] * 2
    p["pre_state"]["leaves"] += 1


def _shred_fewer_namespaces() -> dict[str, Any]:
    st = shred_statement(namespaces=("users.alice", "users.alice.prefs"))
    st["predicate"]["scope"]["store_namespaces"] = [["users", "alice"]]
    return st


def _shred_bad_cases() -> dict[str, tuple[Callable[[], bytes], int, str, str]]:
    S = shred_statement

    def scoped(**over: Any) -> Callable[[], bytes]:
        def make() -> bytes:
            st = S()
            st["predicate"]["scope"].update(over)
            return _sign_raw(st)

        return make

    def no_scan(p: dict[str, Any]) -> None:
        p["residue"] = p["residue"][:1]

    def with_checkpoints(p: dict[str, Any]) -> None:
        for state in (p["pre_state"], p["post_state"]):
            state["tables"]["checkpoints"] = {"rows": 0, "bytes": 0}

    return {
        "kind_shred_two_keys": (_kind_resigned(S, _shred_two_keys), 1, "scope_mismatch",
            "shred receipt destroying two keys' rows (exactly one key per receipt)"),
        "kind_shred_threads_differ": (scoped(threads=["alice-1"]), 1, "scope_mismatch",
            "shred receipt naming fewer threads than the thread bindings it destroyed"),
        "kind_shred_subject_name_mismatch": (lambda: _signed(_renamed(S(),
            "langgraph-shred:bob")), 1, "subject_name_mismatch",
            "shred receipt whose subject names another data subject"),
        "kind_shred_tombstone": (scoped(tombstone=True), 1, "schema",
            "shred receipt claiming a tombstone"),
        "kind_shred_key_store_scan_missing": (_kind_resigned(S, no_scan), 1, "residue_missing",
            "shred receipt without the key store's residue scan"),
        "kind_shred_checkpoint_table": (_kind_resigned(S, with_checkpoints), 1,
            "scope_mismatch", "shred receipt listing a table of the data database"),
        "kind_shred_namespaces_differ": (lambda: _signed(_shred_fewer_namespaces()), 1,
            "scope_mismatch", "shred receipt naming fewer store namespaces than the "
            "namespace bindings it destroyed"),
    }  # fmt: skip


def _shred_good_cases() -> dict[str, Callable[[], bytes]]:
    return {
        "shred.json": lambda: _signed(shred_statement()),
        "shred-thread.json": lambda: _signed(shred_statement("thread", "anon-1", ("anon-1",))),
        "shred-store.json": lambda: _signed(
            shred_statement(namespaces=("users.alice", "users.alice.prefs"))
        ),
    }


# -- end of kind "shred" ------------------------------------------------------------------


def good_cases() -> dict[str, Callable[[], bytes]]:
    return {
        "receipt.json": _good_bytes,
        "receipt-no-embedded-key.json": lambda: make_receipt(embed_key=False).to_json(),
        "receipt-with-request.json": lambda: Receipt.sign(_with(with_request()), TRUSTED).to_json(),
        "receipt.dsse.json": lambda: (json.dumps(make_receipt().to_dsse(), indent=2) + "\n").encode(
            "utf-8"
        ),
        # Receipt kinds (section 9): each makes its own claim.
        "history.json": lambda: _signed(history_statement()),
        "thread.json": lambda: _signed(thread_kind_statement()),
        "subject.json": lambda: _signed(subject_statement()),
        "subject-privacy.json": lambda: _signed(_private_subject()),
        "subject-with-request.json": lambda: _signed(
            subject_statement(REQUEST_SUBJECT_ID, extra={"request": dict(REQUEST)})
        ),
        "thread-replay.json": lambda: _signed(replay_statement()),
        **_namespace_good_cases(),
        **_redaction_good_cases(),
        **_deferral_good_cases(),
        **_targets_good_cases(),
        **_shred_good_cases(),
    }


def generate(out: Path) -> list[Path]:
    """(Re)write the corpus under ``out``; returns the files written."""
    written: list[Path] = []
    for sub in ("bad", "good", "keys"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)

    def write(path: Path, data: bytes) -> None:
        path.write_bytes(data)
        written.append(path)

    expected: dict[str, dict[str, Any]] = {}
    for stem, (build, code, reason, description) in bad_cases().items():
        name = f"{stem}.json"
        write(out / "bad" / name, build())
        expected[name] = {"exit_code": code, "reason": reason, "description": description}
    write(
        out / "bad" / "EXPECTED.json",
        (json.dumps(expected, indent=2, sort_keys=True) + "\n").encode("utf-8"),
    )
    for name, build_good in good_cases().items():
        write(out / "good" / name, build_good())
    write(out / "keys" / "trusted.pub.pem", TRUSTED.public_pem())
    return written


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else HERE
    files = generate(out)
    print(f"wrote {len(files)} files under {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
