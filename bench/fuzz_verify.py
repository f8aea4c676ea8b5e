"""Structure-aware fuzzing of ``verify_receipt`` (and, for a sample, ``receipt verify``).

    python bench/fuzz_verify.py [--mutations 100000] [--seed 7] [--no-write]
                                [--seeds F | --save-seeds F] [--skip-violation NAME ...]

Starts from genuine receipts of every kind, each as a receipt file with and without the
embedded key, with two signatures and as a DSSE envelope: a kindless thread receipt with
every optional shape, the golden corpus's good receipts (tests/golden/good), and
receipts the library issues afresh by real erasures of a real LangGraph graph's SQLite
file (``fuzz_seeds.py``): ``kind: "thread"`` with the store in
the database, in another file (swept) and none with the residue scan, ``history`` with
kept state and needles, ``subject`` with units and needles, ``subject`` in privacy mode
(commitments), request context and a four-eyes authorization (the approver's key is in
the trust set), empty scopes (``allow_empty``). It mutates them in ways that know the
format:

* ``tree``: type confusion at every JSON path (null, booleans, numbers at and past the
  I-JSON limit, floats, strings, arrays, objects, lone surrogates), deleted and added
  members, duplicated members (same or different value), numbers spelled differently
  (``1e2``, ``-0``, ``01``, ``3.0``), unicode (NFC/NFD, escapes, astral characters, RTL
  override, NUL), base64 (over-padding, missing padding, URL alphabet, whitespace,
  non-zero unused bits, truncation, re-encoded bit flips), key-order changes, signature
  list edits (drop, duplicate, swap key ids, add foreign signatures);
* ``bytes``: truncation, byte flips/insertions/deletions, BOM, invalid UTF-8, trailing
  data, whitespace;
* ``dsse_payload``: the statement inside a DSSE payload changed or re-serialised without
  re-signing;
* ``resigned_semantic``: statements that violate the semantics *signed by the trusted
  key*, chosen for the seed's kind (``VIOLATIONS``): a non-empty post-state with status
  ``erased``, rows without bytes, a store table without a store namespace or method, no
  residue (or no free-space disclosure) on SQLite; a history receipt whose kept digest,
  leaves or checkpoints disagree; a subject receipt whose units do not add up, miss a
  thread or do not hash into the root; a privacy receipt with a raw id or salted
  needles; needles remaining; a request received after the erasure; an authorization
  for another request or scope, expired, by an untrusted key or with a broken
  signature. Must be rejected, with a semantic reason (any documented code but the
  parse, signature and key ones);
* ``resigned_schema``: type confusion etc. inside the statement, signed by the trusted key;
* ``keys``: signed by an untrusted key, by a trusted key outside its window, by the
  approver's key (trusted only to authorize), keyid hints that lie;
* ``object``: ``Receipt`` objects whose ``statement``/``payload``/``signatures`` were
  swapped or mutated in place after parsing.

Oracle, for every case: no exception other than ``erasure_receipts.Error``; every
rejection reason is a documented code (``verify.REASONS``); and an accept returns exactly
the statement of the payload the trusted signature covers (the genuine one for every
unsigned mutation, the re-signed one for ``resigned_schema``, which must then also pass
the JSON Schema), with its reported fields taken from that statement (scope id, status,
request, approver). ``resigned_semantic`` and ``keys`` cases must never be accepted.
Reason codes are read from ``verify.REASONS``, so new ones need no change here. Every
50th case also runs through ``receipt verify --json --trust`` in-process, and its output
is validated against the verify-result schema. The summary counts cases, accepts,
rejects and failures per seed (``by_seed``) and per receipt kind (``by_kind``).

Deterministic for a seed and a set of seed receipts (the wall time is the only varying
figure). The library's receipts carry fresh checkpoint ids and times, so each process
issues its own: ``--save-seeds F`` writes them, ``--seeds F`` replays a run exactly.
Prints a JSON summary and writes ``bench/results/fuzz_verify.json``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import io
import json
import os
import random
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from erasure_receipts import digest
from erasure_receipts.canonical import canonicalize
from erasure_receipts.errors import Error
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE, Receipt, Signature, build_statement
from erasure_receipts.request import authorize, authorized_scope
from erasure_receipts.signing import Signer, pae
from erasure_receipts.verify import (
    REASONS,
    TrustedKey,
    TrustStore,
    VerifiedReceipt,
    scope_id,
    verify_receipt,
)

REPO = Path(__file__).resolve().parents[1]
TRUSTED = Signer.from_seed(bytes(range(32)))
ATTACKER = Signer.from_seed(b"\x01" * 32)
RETIRED = Signer.from_seed(b"\x02" * 32)  # trusted, but only for receipts before 2020
APPROVER = Signer.from_seed(b"\x03" * 32)  # trusted to authorize erasures, not to sign receipts
TRUST = TrustStore(
    [TRUSTED.public_key, TrustedKey(RETIRED.public_key, "retired", None, "2020-01-01T00:00:00Z"),
     TrustedKey(APPROVER.public_key, "dpo", role="approver")]
)  # fmt: skip
REASON_CODES = frozenset(code for code, _exit, _meaning in REASONS)
NOT_SEMANTIC = frozenset(
    ("ok", "unreadable", "too_large", "not_utf8", "not_json", "duplicate_key", "float",
     "unknown_version", "unknown_type", "unknown_predicate", "schema", "integer_range",
     "keyid_mismatch", "not_canonical", "no_trusted_keys", "bad_signature", "untrusted_key",
     "key_not_valid_at_time", "not_in_log", "internal_error")
)  # fmt: skip
SEMANTIC_REASONS = REASON_CODES - NOT_SEMANTIC
"""Every documented code but those of parsing, signatures, keys and I/O: a re-signed
statement that breaks a rule must be refused by a rule. Read from ``verify.REASONS``, so
a rule with a new code counts."""
MEDIA_TYPE = "application/vnd.langgraph-erasure-receipt.v1+json"


# -- genuine material --------------------------------------------------------------------------


def genuine_statement() -> dict[str, Any]:
    tree = digest.MerkleTree()
    for i in range(7):
        tree.append(b"row-%d" % i)
    empty = digest.EMPTY_ROOT.hex()
    return build_statement(
        receipt_id="4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d",
        issued_at="2026-11-29T12:00:00.250Z",
        thread_id="thread-\u00fc-\U0001f600",
        store_namespaces=[["users", "alice"], ["memories", "alice", "x"]],
        tombstone=True,
        backend={
            "kind": "sqlite", "saver": "AttestingSqliteSaver", "store": "SqliteStore",
            "database": "/var/lib/app/state.db",
            "versions": {"sqlite": "3.45.1", "langgraph-checkpoint": "4.0.0"},
        },
        pre_digest=tree.root().hex(),
        pre_tables={"checkpoints": {"rows": 3, "bytes": 300}, "store": {"rows": 2, "bytes": 90},
                    "writes": {"rows": 2, "bytes": 80}},
        post_digest=empty,
        post_tables={"checkpoints": {"rows": 0, "bytes": 0}, "store": {"rows": 0, "bytes": 0},
                     "writes": {"rows": 0, "bytes": 0}},
        methods={"checkpoints": "atomic-transaction", "store": "sweep"},
        checks=[{"name": "raw_rows_zero_in_transaction", "result": "pass"},
                {"name": "api_list_empty", "result": "pass", "detail": "0 checkpoints"}],
        residue=[
            {"action": "sqlite.secure_delete", "status": "applied", "detail": {"value": 1}},
            {"action": "sqlite.wal_checkpoint", "status": "partial",
             "detail": {"busy": 1, "log_frames": 12, "checkpointed_frames": 3,
                        "wal_bytes_after": 4096, "reader_wait_ms": 1000}},
            {"action": "store.scrub", "status": "skipped",
             "detail": {"reason": "not possible through the BaseStore API", "ok": False,
                        "none": None}},
        ],
        generator_version="0.1.0",
    )  # fmt: skip


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sign_payload(payload: bytes, signer: Signer = TRUSTED) -> dict[str, Any]:
    return {"keyid": signer.key_id, "sig": b64(signer.sign(pae(DSSE_PAYLOAD_TYPE, payload)))}


class Genuine:
    def __init__(self, label: str = "thread_kindless", statement: dict[str, Any] | None = None):
        self.label = label
        self.receipt = Receipt.sign(genuine_statement() if statement is None else statement,
                                    TRUSTED)  # fmt: skip
        self.payload = self.receipt.payload
        self.statement = json.loads(self.payload)
        file_doc = self.receipt.to_dict()
        no_key = dict(file_doc)
        del no_key["public_key"]
        two_sigs = copy.deepcopy(file_doc)
        two_sigs["signatures"].insert(0, sign_payload(self.payload, ATTACKER))
        dsse = self.receipt.to_dsse()
        dsse_nokeyid = copy.deepcopy(dsse)
        del dsse_nokeyid["signatures"][0]["keyid"]
        self.bases: list[tuple[str, dict[str, Any]]] = [
            ("file", file_doc), ("file_nokey", no_key), ("file_2sig", two_sigs),
            ("dsse", dsse), ("dsse_nokeyid", dsse_nokeyid),
        ]  # fmt: skip
        self.kind = kind_of(self.statement)


def kind_of(st: dict[str, Any]) -> str:
    kind = st["predicate"].get("kind")
    return "thread (no kind)" if kind is None else str(kind)


def golden_statements() -> dict[str, dict[str, Any]]:
    """The statements of the golden good receipt files (tests/golden/good), one per
    distinct statement; those with an authorization are left out (their approver is
    not this trust set's)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((REPO / "tests" / "golden" / "good").glob("*.json")):
        doc = json.loads(path.read_bytes())
        if "statement" not in doc:  # a DSSE envelope: the same statement as a file's
            continue
        st = doc["statement"]
        if "authorization" not in st["predicate"] and st not in out.values():
            out[f"golden:{path.stem}"] = st
    return out


def genuines(seed_file: Path | None = None) -> list[Genuine]:
    """The kindless receipt first, then the library's receipts of every kind and the
    golden corpus's."""
    import fuzz_seeds

    issued = fuzz_seeds.load(seed_file) if seed_file else fuzz_seeds.seeds(TRUSTED, APPROVER)
    rest = {**issued, **golden_statements()}
    return [Genuine(), *(Genuine(label, st) for label, st in sorted(rest.items()))]


# -- a JSON writer that can also write what json.dumps refuses ---------------------------------


class Raw:
    """A literal spliced into the output as-is (number spellings, NaN, broken text)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class Pairs:
    """An object written member by member: duplicates and any order allowed."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


def emit(v: Any, ascii_only: bool, indent: int | None, depth: int = 0) -> str:
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=ascii_only)
    if v is None or isinstance(v, bool | int | float):
        return json.dumps(v)
    nl = "" if indent is None else "\n" + " " * (indent * (depth + 1))
    end = "" if indent is None else "\n" + " " * (indent * depth)
    sep = ":" if indent is None else ": "
    if isinstance(v, list):
        if not v:
            return "[]"
        inner = ("," + nl).join(emit(x, ascii_only, indent, depth + 1) for x in v)
        return "[" + nl + inner + end + "]"
    pairs = v.pairs if isinstance(v, Pairs) else list(v.items())
    if not pairs:
        return "{}"
    inner = ("," + nl).join(
        json.dumps(k, ensure_ascii=ascii_only) + sep + emit(x, ascii_only, indent, depth + 1)
        for k, x in pairs
    )
    return "{" + nl + inner + end + "}"


def to_bytes(text: str) -> bytes:
    # Lone surrogates written with ensure_ascii=False become CESU-style bytes: not UTF-8.
    return text.encode("utf-8", "surrogatepass")


# -- tree helpers -----------------------------------------------------------------------------


def paths(v: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += paths(x, (*prefix, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += paths(x, (*prefix, i))
    return out


def get(v: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        v = v[p]
    return v


def put(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    get(root, path[:-1])[path[-1]] = value
    return root


def remove(root: Any, path: tuple[Any, ...]) -> Any:
    if path:
        del get(root, path[:-1])[path[-1]]
    return root


def containers(root: Any, kind: type) -> list[tuple[Any, ...]]:
    return [p for p in paths(root) if isinstance(get(root, p), kind)]


TYPE_POOL: list[Callable[[random.Random, Any], Any]] = [
    lambda r, v: None,
    lambda r, v: True,
    lambda r, v: False,
    lambda r, v: 0,
    lambda r, v: -1,
    lambda r, v: 1,
    lambda r, v: 2**53 - 1,
    lambda r, v: 2**53,
    lambda r, v: 2**64,
    lambda r, v: -(2**63),
    lambda r, v: 1.5,
    lambda r, v: 0.0,
    lambda r, v: "",
    lambda r, v: "x",
    lambda r, v: "A" * r.choice((64, 65, 1025, 4097, 70000)),
    lambda r, v: "\ud800",
    lambda r, v: "\u0000",
    lambda r, v: "\u202e",
    lambda r, v: [],
    lambda r, v: {},
    lambda r, v: [v],
    lambda r, v: {"v": v},
    lambda r, v: str(v),
    lambda r, v: Raw("NaN"),
    lambda r, v: Raw("-Infinity"),
    lambda r, v: Raw("1e2"),
    lambda r, v: Raw("-0"),
    lambda r, v: Raw("1" * 5000),
    lambda r, v: Raw("[" * 3000 + "]" * 3000),
]

UNICODE_EDITS: list[Callable[[random.Random, str], str]] = [
    lambda r, s: s + "\u00e9",
    lambda r, s: s + "e\u0301",
    lambda r, s: unicodedata.normalize("NFD", s),
    lambda r, s: unicodedata.normalize("NFKC", s),
    lambda r, s: s + "\u200b",
    lambda r, s: "\u202e" + s,
    lambda r, s: s + "\U0001f600",
    lambda r, s: s + "\ud83d",
    lambda r, s: s + "\udc00",
    lambda r, s: s + "\u0000",
    lambda r, s: s + "\n",
    lambda r, s: s.upper(),
    lambda r, s: s[:-1],
    lambda r, s: s + "\ufeff",
    lambda r, s: "\uff41" + s[1:],  # fullwidth a
]

B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _bits(r: random.Random, s: str) -> str:
    pad = len(s) - len(s.rstrip("="))
    if not pad or not s.rstrip("="):
        return s + "="
    i = len(s) - pad - 1
    return s[:i] + B64_ALPHABET[(B64_ALPHABET.index(s[i]) + r.randint(1, 3)) % 64] + s[i + 1 :]


def _flip_decoded(r: random.Random, s: str) -> str:
    try:
        raw = bytearray(base64.b64decode(s))
    except ValueError:
        return s + "A"
    if not raw:
        return "AA=="
    raw[r.randrange(len(raw))] ^= 1 << r.randrange(8)
    return b64(bytes(raw))


BASE64_EDITS: list[Callable[[random.Random, str], str]] = [
    lambda r, s: s + "==",
    lambda r, s: s + "====",
    lambda r, s: s + "=",
    lambda r, s: s.rstrip("="),
    lambda r, s: s.replace("+", "-").replace("/", "_"),
    lambda r, s: s[: len(s) // 2] + "\n" + s[len(s) // 2 :],
    lambda r, s: " " + s,
    lambda r, s: s + "\n",
    _bits,
    lambda r, s: s[: r.randrange(len(s) + 1)],
    _flip_decoded,
    lambda r, s: s + "AAAA",
    lambda r, s: "AAAA" + s,
    lambda r, s: s.lower(),
    lambda r, s: s[:-4] + "====" if len(s) >= 4 else s,
]

NUMBER_EDITS: list[Callable[[random.Random, int], Any]] = [
    lambda r, n: n + 1,
    lambda r, n: n - 1,
    lambda r, n: -n,
    lambda r, n: n + 2**53,
    lambda r, n: Raw(f"{n}.0"),
    lambda r, n: Raw(f"{n}e0"),
    lambda r, n: Raw(f"0{n}"),
    lambda r, n: Raw(f"-{n}" if n else "-0"),
    lambda r, n: Raw(f"{n}E+0"),
    lambda r, n: Raw(" " + str(n) + " "),
    lambda r, n: str(n),
    lambda r, n: bool(n),
]


# -- mutations ----------------------------------------------------------------------------------


def m_type(r: random.Random, doc: Any) -> Any:
    p = r.choice(paths(doc)[1:])
    return put(doc, p, r.choice(TYPE_POOL)(r, get(doc, p)))


def m_delete(r: random.Random, doc: Any) -> Any:
    return remove(doc, r.choice(paths(doc)[1:]))


def m_add(r: random.Random, doc: Any) -> Any:
    objs = containers(doc, dict)
    lists = containers(doc, list)
    if lists and r.random() < 0.4:
        target = get(doc, r.choice(lists))
        target.append(copy.deepcopy(r.choice(target)) if target else None)
    else:
        target = get(doc, r.choice(objs))
        target[r.choice(("extra", "_type", "comment", "sig", "keyid", "status", "x\u00e9"))] = (
            r.choice(TYPE_POOL)(r, None)
        )
    return doc


def m_duplicate(r: random.Random, doc: Any) -> Any:
    objs = [p for p in containers(doc, dict) if get(doc, p)]
    p = r.choice(objs)
    obj = get(doc, p)
    items = list(obj.items())
    k, v = r.choice(items)
    dup = v if r.random() < 0.5 else r.choice(TYPE_POOL)(r, v)
    items.insert(r.randrange(len(items) + 1), (k, dup))
    return put(doc, p, Pairs(items))


def m_number(r: random.Random, doc: Any) -> Any:
    nums = [p for p in paths(doc) if type(get(doc, p)) is int]
    if not nums:
        return m_type(r, doc)
    p = r.choice(nums)
    return put(doc, p, r.choice(NUMBER_EDITS)(r, get(doc, p)))


def m_unicode(r: random.Random, doc: Any) -> Any:
    strs = [p for p in paths(doc) if type(get(doc, p)) is str]
    if r.random() < 0.3:  # edit a member name instead
        objs = [p for p in containers(doc, dict) if get(doc, p)]
        p = r.choice(objs)
        items = list(get(doc, p).items())
        i = r.randrange(len(items))
        items[i] = (r.choice(UNICODE_EDITS)(r, items[i][0]), items[i][1])
        return put(doc, p, Pairs(items))
    p = r.choice(strs)
    return put(doc, p, r.choice(UNICODE_EDITS)(r, get(doc, p)))


def m_base64(r: random.Random, doc: Any) -> Any:
    keys = ("sig", "payload", "ed25519")
    cands = [p for p in paths(doc) if p and p[-1] in keys and type(get(doc, p)) is str]
    if not cands:
        return m_type(r, doc)
    p = r.choice(cands)
    return put(doc, p, r.choice(BASE64_EDITS)(r, get(doc, p)))


def m_reorder(r: random.Random, doc: Any) -> Any:
    for p in r.sample(containers(doc, dict), k=min(3, len(containers(doc, dict)))):
        obj = get(doc, p)
        if isinstance(obj, dict):
            items = list(obj.items())
            r.shuffle(items)
            put(doc, p, dict(items))
    return doc


def m_signatures(r: random.Random, doc: Any) -> Any:
    sigs = doc.get("signatures") if isinstance(doc, dict) else None
    if not isinstance(sigs, list) or not sigs:
        return m_type(r, doc)
    op = r.randrange(7)
    if op == 0:
        sigs.reverse()
    elif op == 1:
        sigs.append(copy.deepcopy(sigs[0]))
    elif op == 2:
        sigs.pop(r.randrange(len(sigs)))
    elif op == 3:  # a foreign signature over the same bytes
        sigs.insert(r.randrange(len(sigs) + 1), {"keyid": ATTACKER.key_id, "sig": sigs[0]["sig"]})
    elif op == 4:  # keyids swapped / pointed at another key
        for s in sigs:
            if isinstance(s, dict):
                s["keyid"] = r.choice((ATTACKER.key_id, TRUSTED.key_id, RETIRED.key_id, ""))
    elif op == 5:  # the attacker's signature under the trusted key id
        sigs[0] = {"keyid": TRUSTED.key_id, "sig": b64(ATTACKER.sign(b"DSSEv1 whatever"))}
    else:
        sigs[:] = sigs * r.randint(2, 40)
    return doc


TREE_OPS = [m_type, m_delete, m_add, m_duplicate, m_number, m_unicode, m_base64, m_reorder,
            m_signatures]  # fmt: skip


def serialise(r: random.Random, doc: Any) -> bytes:
    return to_bytes(emit(doc, r.random() < 0.3, r.choice((None, 2, 0))) + r.choice(("", "\n")))


def byte_mutation(r: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    op = r.randrange(10)
    if op == 0:
        return bytes(b[: r.randrange(len(b))])
    if op == 1:
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    elif op == 2:
        b.insert(r.randrange(len(b) + 1), r.randrange(256))
    elif op == 3:
        del b[r.randrange(len(b))]
    elif op == 4:
        return b"\xef\xbb\xbf" + data
    elif op == 5:
        b[r.randrange(len(b))] = r.choice((0x80, 0xC0, 0xFF, 0xED, 0xF8))
    elif op == 6:
        return data + r.choice((b"{}", b"x", b"\x00", b"]", b" " * 10, b"\n\n"))
    elif op == 7:
        return r.choice((b" ", b"\t", b"\n", b"\r\n")) + data
    elif op == 8:
        i = r.randrange(len(b))
        b[i:i] = b[i : i + r.randint(1, 64)]
    else:
        i = r.randrange(len(b))
        return bytes(b[:i] + b[i + r.randint(1, 200) :])
    return bytes(b)


# -- semantic violations, re-signed with the trusted key ------------------------------------------


def _root(r: random.Random) -> str:
    return bytes(r.randrange(256) for _ in range(32)).hex()


def _empty_root() -> str:
    return digest.EMPTY_ROOT.hex()


def v_not_empty(r: random.Random, st: dict[str, Any]) -> None:
    post = st["predicate"]["post_state"]
    table = r.choice(list(post["tables"]))
    rows = r.randint(0, 3)
    post["tables"][table] = {"rows": rows, "bytes": r.randint(1 if not rows else 0, 500)}
    post["leaves"] = sum(t["rows"] for t in post["tables"].values())
    post["digest"]["sha256"] = _root(r) if post["leaves"] else _empty_root()


def v_post_digest(r: random.Random, st: dict[str, Any]) -> None:
    st["predicate"]["post_state"]["digest"]["sha256"] = _root(r)


def v_leaves(r: random.Random, st: dict[str, Any]) -> None:
    state = st["predicate"][r.choice(("pre_state", "post_state"))]
    state["leaves"] += r.choice((1, 2, 1000, -1 if state["leaves"] else 1))


def v_subject_digest(r: random.Random, st: dict[str, Any]) -> None:
    st["subject"][0]["digest"]["sha256"] = _root(r)


def v_subject_name(r: random.Random, st: dict[str, Any]) -> None:
    prefix, _, tid = st["subject"][0]["name"].partition(":")
    other = r.choice([k for k in ("langgraph-thread", "langgraph-thread-history",
                                  "langgraph-subject") if k != prefix])  # fmt: skip
    st["subject"][0]["name"] = r.choice(
        (f"{prefix}:{tid}x", f"{prefix}:mallory", tid, f"{prefix}: {tid}", f"{other}:{tid}",
         f"{prefix}:{unicodedata.normalize('NFD', tid)}e\u0301")
    )  # fmt: skip


def v_check(r: random.Random, st: dict[str, Any]) -> None:
    r.choice(st["predicate"]["checks"])["result"] = "fail"


def v_out_of_scope(r: random.Random, st: dict[str, Any]) -> None:
    req = r.choice(("backups", "replicas", "point_in_time_recovery", "storage_media"))
    oos = st["predicate"]["out_of_scope"]
    oos[:] = [o for o in oos if o["id"] != req]


def v_tables(r: random.Random, st: dict[str, Any]) -> None:
    p = st["predicate"]
    if r.random() < 0.5:
        name = r.choice(list(p["post_state"]["tables"]))
        del p["post_state"]["tables"][name]
    else:
        p["pre_state"]["tables"]["ghost"] = {"rows": 0, "bytes": 0}


def v_pre_empty(r: random.Random, st: dict[str, Any]) -> None:
    p = st["predicate"]
    p["pre_state"]["digest"]["sha256"] = _empty_root()
    st["subject"][0]["digest"]["sha256"] = _empty_root()


def v_pre_rows_zero(r: random.Random, st: dict[str, Any]) -> None:
    pre = st["predicate"]["pre_state"]
    for t in pre["tables"].values():
        t["rows"] = 0
    pre["leaves"] = 0  # non-empty digest with zero leaves


# Kind-aware violations: each breaks one rule of RECEIPT_SPEC.md and leaves the rest of
# the statement consistent, so the rule itself must refuse it.

Predicate = dict[str, Any]


def _rows(tables: dict[str, Any]) -> bool:
    return any(t["rows"] for t in tables.values())


def _store_rows(p: Predicate) -> bool:
    return bool(p["pre_state"]["tables"].get("store", {}).get("rows"))


def v_rows_without_bytes(r: random.Random, st: dict[str, Any]) -> None:
    """Rows measured with 0 bytes, or fewer bytes than rows (every row stores at least
    one byte), in the pre-state or the kept state."""
    p = st["predicate"]
    state = p["kept_state"] if "kept_state" in p and _rows(p["kept_state"]["tables"]) and (
        r.random() < 0.3) else p["pre_state"]  # fmt: skip
    name = r.choice([k for k, t in state["tables"].items() if t["rows"]])
    table = state["tables"][name]
    table["bytes"] = r.choice((0, table["rows"] - 1))
    for u in p.get("units") or ():  # the units still add up to the pre-state
        if name in u["tables"] and u["tables"][name]["rows"]:
            u["tables"][name]["bytes"] = table["bytes"]
            table = {"rows": 0, "bytes": 0}  # the first unit holds them all
        elif name in u["tables"]:
            u["tables"][name]["bytes"] = 0


def v_residue_empty(r: random.Random, st: dict[str, Any]) -> None:
    """An SQLite receipt with no residue at all (no free-space disclosure)."""
    st["predicate"]["residue"] = []


def v_free_space_missing(r: random.Random, st: dict[str, Any]) -> None:
    """An SQLite receipt whose free-space disclosure (of a database file) is left out."""
    res = st["predicate"]["residue"]
    drop = r.choice([x["action"] for x in res if _free_space(x["action"])])
    res[:] = [x for x in res if x["action"] != drop]


def _free_space(action: str) -> bool:
    return action.startswith(("sqlite.live_page_free_space", "residue_scan"))


def v_store_without_namespace(r: random.Random, st: dict[str, Any]) -> None:
    """Store rows erased with no store namespace in scope."""
    st["predicate"]["scope"]["store_namespaces"] = []


def v_store_without_method(r: random.Random, st: dict[str, Any]) -> None:
    """Store rows erased with no ``methods.store``."""
    del st["predicate"]["methods"]["store"]


def v_store_method_without_namespace(r: random.Random, st: dict[str, Any]) -> None:
    """A store method with no store namespace in scope (and no store rows)."""
    p = st["predicate"]
    p["methods"]["store"] = r.choice(("atomic-transaction", "sweep"))
    p["scope"]["store_namespaces"] = []


def v_kept_leaves(r: random.Random, st: dict[str, Any]) -> None:
    kept = st["predicate"]["kept_state"]
    kept["leaves"] += r.choice((1, 2, -1 if kept["leaves"] else 3))


def v_kept_digest(r: random.Random, st: dict[str, Any]) -> None:
    """A kept digest that disagrees with its leaf count (empty root with rows, or a
    non-empty root once every kept row is gone)."""
    kept = st["predicate"]["kept_state"]
    if kept["leaves"] and r.random() < 0.6:
        kept["digest"]["sha256"] = _empty_root()
    else:
        for t in kept["tables"].values():
            t["rows"] = t["bytes"] = 0
        kept["leaves"] = 0
        kept["checkpoints"] = []
        if kept["digest"]["sha256"] == _empty_root():
            kept["digest"]["sha256"] = _root(r)


def v_kept_checkpoints(r: random.Random, st: dict[str, Any]) -> None:
    """Kept checkpoints duplicated, out of order, or more than the kept rows."""
    cps = st["predicate"]["kept_state"]["checkpoints"]
    op = r.randrange(3)
    if op == 0 and cps:
        cps.append(copy.deepcopy(cps[0]))
    elif op == 1 and len(cps) > 1:
        cps.reverse()
    else:
        cps.append({"checkpoint_ns": "\uffff", "checkpoint_id": "ffffffff-extra"})


def v_unit_digest(r: random.Random, st: dict[str, Any]) -> None:
    """A unit whose digest is not the one hashed into the root."""
    u = r.choice([u for u in st["predicate"]["units"] if u["leaves"]])
    u["digest"]["sha256"] = _root(r)


def v_unit_missing(r: random.Random, st: dict[str, Any]) -> None:
    units = st["predicate"]["units"]
    units.pop(r.randrange(len(units)))


def v_unit_counts(r: random.Random, st: dict[str, Any]) -> None:
    """A unit's rows or bytes that do not add up to the pre-state."""
    u = r.choice(st["predicate"]["units"])
    t = u["tables"][r.choice(sorted(u["tables"]))]
    if r.random() < 0.5:
        t["bytes"] += r.choice((1, 100))
    else:  # the unit stays self-consistent, the sum does not
        t["rows"] += 1
        t["bytes"] += 40
        u["leaves"] += 1
        if u["digest"]["sha256"] == _empty_root():
            u["digest"]["sha256"] = _root(r)


def v_unit_thread(r: random.Random, st: dict[str, Any]) -> None:
    """A thread in scope that no unit measures, or units out of order."""
    p = st["predicate"]
    if len(p["units"]) > 1 and r.random() < 0.3:
        p["units"].reverse()
    else:
        p["scope"]["threads"] = sorted({*p["scope"]["threads"], _like(p["scope"]["threads"])})


def _like(threads: list[str]) -> str:
    """Another thread id of the same form (a commitment in privacy mode)."""
    if threads and threads[0].startswith("hmac-sha256:"):
        return "hmac-sha256:" + "0" * 64
    return "mallory-chat-1"


def v_needles_remain(r: random.Random, st: dict[str, Any]) -> None:
    st["predicate"]["needles"]["occurrences_after"] = r.randint(1, 5)


def v_privacy_raw(r: random.Random, st: dict[str, Any]) -> None:
    """A privacy-mode receipt naming a subject, thread, namespace, database or requester
    in clear, or with salted needles; all else consistent (the units re-hashed)."""
    p = st["predicate"]
    scope = p["scope"]
    op = r.randrange(6)
    if op == 0:
        scope["subject"] = "bob"
        st["subject"][0]["name"] = "langgraph-subject:bob"
    elif op == 1 and scope["threads"]:
        i = r.randrange(len(scope["threads"]))
        old, raw = scope["threads"][i], f"bob-{i + 1}"
        scope["threads"] = sorted({*scope["threads"][:i], *scope["threads"][i + 1 :], raw})
        for u in p["units"]:
            if u["name"] == f"thread:{old}":
                u["name"] = f"thread:{raw}"
        p["units"].sort(key=lambda u: u["name"])
        _rehash_units(st)
    elif op == 2 and scope["store_namespaces"]:
        scope["store_namespaces"][0] = ["users", "bob"]
    elif op == 3:
        p["backend"]["database"] = "/var/lib/app/state.db"
    elif op == 4 and p.get("request", {}).get("requester") is not None:
        p["request"]["requester"] = "dpo@example.com"
    else:
        p["needles"]["salt"] = b64(bytes(range(16)))


def _rehash_units(st: dict[str, Any]) -> None:
    p = st["predicate"]
    if not p["pre_state"]["leaves"]:
        return
    root = digest.units_root(
        (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in p["units"]
    ).hex()
    p["pre_state"]["digest"]["sha256"] = st["subject"][0]["digest"]["sha256"] = root


def v_empty_with_rows(r: random.Random, st: dict[str, Any]) -> None:
    """An empty scope that claims rows under the empty root."""
    pre = st["predicate"]["pre_state"]
    pre["tables"][r.choice(sorted(pre["tables"]))] = {"rows": 1, "bytes": 40}
    pre["leaves"] = 1


def v_request_times(r: random.Random, st: dict[str, Any]) -> None:
    """A request received after the erasure began, or due before it was received."""
    req = st["predicate"]["request"]
    if r.random() < 0.5:
        req["received_at"] = "2026-11-29T12:00:00.000001Z"  # just after issued_at
    else:
        req["due"] = req["received_at"]


def v_authorization(r: random.Random, st: dict[str, Any]) -> None:
    """An authorization for another request or scope, expired, by a key not trusted to
    approve (the attacker's, the receipt signer's), or with a broken signature."""
    p = st["predicate"]
    op = r.randrange(6)
    if op == 0:
        p["request"]["id"] += "-other"
        return
    if op == 1:
        p["issued_at"] = "2026-12-15T00:00:00.000001Z"  # just after not_after
        return
    if op == 5:
        sig = bytearray(base64.b64decode(p["authorization"]["signatures"][0]["sig"]))
        sig[r.randrange(len(sig))] ^= 1 << r.randrange(8)
        p["authorization"]["signatures"][0]["sig"] = b64(bytes(sig))
        return
    scope = authorized_scope(p["scope"], p.get("kind", "thread"))
    signer = APPROVER
    if op == 2:
        key = "subject" if "subject" in scope else "thread_id"
        scope[key] += "x"
    elif op == 3:
        scope["store_namespaces"] = [*scope["store_namespaces"], ["users", "mallory"]]
    else:
        signer = r.choice((ATTACKER, TRUSTED))
    auth = authorize(signer, request_id=p["request"]["id"], scope=scope,
                     not_after=p["authorization"]["statement"]["not_after"])  # fmt: skip
    p["authorization"] = auth.to_dict()


Violation = Callable[[random.Random, dict[str, Any]], None]
VIOLATIONS: dict[str, tuple[Violation, Callable[[Predicate], bool]]] = {
    f.__name__: (f, applies)
    for f, applies in [
        (v_not_empty, lambda p: True),
        # a redaction's post-state is the rewritten rows: any root can be genuine
        (v_post_digest, lambda p: p.get("kind") != "redaction"),
        (v_leaves, lambda p: True),
        (v_subject_digest, lambda p: True),
        (v_subject_name, lambda p: True),
        (v_check, lambda p: bool(p["checks"])),
        (v_out_of_scope, lambda p: True),
        (v_tables, lambda p: True),
        (v_pre_empty, lambda p: bool(p["pre_state"]["leaves"])),
        (v_pre_rows_zero, lambda p: bool(p["pre_state"]["leaves"])),
        (v_rows_without_bytes, lambda p: _rows(p["pre_state"]["tables"])),
        (v_residue_empty,  # a deferral deletes nothing: no residue (9.14)
         lambda p: p["backend"]["kind"] == "sqlite" and p.get("kind") != "deferral"),
        (v_free_space_missing, lambda p: p["backend"]["kind"] == "sqlite"
            and any(_free_space(x["action"]) for x in p["residue"])),
        (v_store_without_namespace, lambda p: _store_rows(p) and "units" not in p
            and "authorization" not in p),
        (v_store_without_method, lambda p: _store_rows(p) and "store" in p["methods"]),
        (v_store_method_without_namespace, lambda p: not _store_rows(p) and "units" not in p
            and "authorization" not in p),
        (v_kept_leaves, lambda p: "kept_state" in p),
        (v_kept_digest, lambda p: "kept_state" in p),
        (v_kept_checkpoints, lambda p: "kept_state" in p),
        (v_unit_digest, lambda p: any(u["leaves"] for u in p.get("units") or ())),
        (v_unit_missing, lambda p: len(p.get("units") or ()) > 1),  # the schema needs one
        (v_unit_counts, lambda p: bool(p.get("units"))),
        (v_unit_thread, lambda p: "units" in p),
        (v_needles_remain, lambda p: "needles" in p),
        (v_privacy_raw, lambda p: "privacy" in p["scope"]),
        (v_empty_with_rows, lambda p: not p["pre_state"]["leaves"]),
        (v_request_times, lambda p: "request" in p and p["request"]["received_at"] is not None),
        (v_authorization, lambda p: "authorization" in p),
    ]
}  # fmt: skip
"""Every re-signed violation by name, with the statements it applies to."""
GENERIC = frozenset(list(VIOLATIONS)[:10])
"""The violations every receipt can have (the rest need a member or shape)."""


def applicable(st: dict[str, Any], skip: frozenset[str] = frozenset()) -> list[str]:
    p = st["predicate"]
    return [n for n, (_f, applies) in VIOLATIONS.items() if n not in skip and applies(p)]


def resigned(r: random.Random, st: Any, signer: Signer = TRUSTED) -> tuple[bytes, bytes | None]:
    """(document, payload) for ``st`` signed by ``signer`` as a receipt file or envelope.
    The payload is canonical when possible, else json.dumps' compact sorted form."""
    try:
        payload = canonicalize(st)
    except (TypeError, ValueError, UnicodeEncodeError):
        payload = to_bytes(
            json.dumps(st, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        )
    sig = sign_payload(payload, signer)
    if r.random() < 0.5:
        env = {"payloadType": DSSE_PAYLOAD_TYPE, "payload": b64(payload), "signatures": [sig]}
        return serialise(r, env), payload
    doc = {"media_type": MEDIA_TYPE, "statement": st, "signatures": [sig]}
    if r.random() < 0.3:
        doc["public_key"] = {"keyid": signer.key_id, "ed25519": signer.public_key.b64()}
    return serialise(r, doc), payload


# -- the run -------------------------------------------------------------------------------------


class Case:
    __slots__ = ("allowed", "category", "data", "detail", "must_reject", "schema_check", "seed")

    def __init__(
        self,
        category: str,
        data: bytes | Receipt,
        allowed: Any = None,
        *,
        must_reject: bool = False,
        schema_check: bool = False,
        detail: str = "",
    ) -> None:
        self.detail = detail
        self.seed = ""
        self.category = category
        self.data = data
        self.allowed = allowed  # the only statement an accept may return
        self.must_reject = must_reject
        self.schema_check = schema_check


def make_case(r: random.Random, gs: list[Genuine], skip: frozenset[str] = frozenset()) -> Case:
    # A quarter of the cases start from the kindless receipt with every optional shape,
    # 15% from the golden corpus's, the rest from the library's receipts of every kind.
    x = r.random()
    golden = [g for g in gs[1:] if g.label.startswith("golden:")]
    issued = [g for g in gs[1:] if g not in golden]
    g = gs[0] if x < 0.25 else r.choice(golden if x < 0.4 and golden else issued)
    try:
        case = _make_case(r, g, skip)
    except (IndexError, KeyError, TypeError, AttributeError, ValueError):
        # a mutation that does not apply to this shape (e.g. nothing left to edit)
        case = Case("bytes", b"{}", None, must_reject=True)
    case.seed = g.label
    return case


def _make_case(r: random.Random, g: Genuine, skip: frozenset[str]) -> Case:
    x = r.random()
    if x < 0.40:
        _name, base = r.choice(g.bases)
        doc = copy.deepcopy(base)
        for _ in range(r.choice((1, 1, 1, 2, 3))):
            doc = r.choice(TREE_OPS)(r, doc)
            if not isinstance(doc, dict | list | Pairs):
                break
        return Case("tree", serialise(r, doc), g.statement)
    if x < 0.53:
        _name, base = r.choice(g.bases)
        data = serialise(r, copy.deepcopy(base))
        for _ in range(r.choice((1, 1, 2))):
            data = byte_mutation(r, data) if data else b"{"
        return Case("bytes", data, g.statement)
    if x < 0.63:
        st: Any = copy.deepcopy(g.statement)
        if r.random() < 0.3:  # same statement, not canonical bytes
            payload = to_bytes(emit(st if r.random() < 0.5 else dict(reversed(st.items())),
                                    r.random() < 0.5, r.choice((None, 1))))  # fmt: skip
        else:
            for _ in range(r.choice((1, 2))):
                st = r.choice(TREE_OPS[:7])(r, st)
            payload = to_bytes(emit(st, False, None))
        env = copy.deepcopy(dict(g.bases[3][1]))
        env["payload"] = b64(payload)
        return Case("dsse_payload", serialise(r, env), g.statement)
    if x < 0.75:
        st = copy.deepcopy(g.statement)
        names = r.sample(applicable(st, skip), k=r.choice((1, 1, 2)))
        own = [n for n in applicable(st, skip) if n not in GENERIC]
        if own and r.random() < 0.5:  # half the time, a rule of this kind's own members
            names[0:1] = [r.choice(own)] if names[0] not in own else names[0:1]
            names = list(dict.fromkeys(names))
        if {"v_pre_empty", "v_pre_rows_zero"} <= set(names):  # together: an empty scope
            names.remove("v_pre_rows_zero")
        for name in names:
            VIOLATIONS[name][0](r, st)
        data, _payload = resigned(r, st)
        return Case("resigned_semantic", data, must_reject=True, detail="+".join(names))
    if x < 0.88:
        st = copy.deepcopy(g.statement)
        for _ in range(r.choice((1, 1, 2))):
            st = r.choice((m_type, m_delete, m_add, m_number, m_unicode))(r, st)
            if not isinstance(st, dict):
                break
        if _has_raw(st):
            data = serialise(r, {"media_type": MEDIA_TYPE, "statement": st,
                                 "signatures": [sign_payload(b"?")]})  # fmt: skip
            return Case("resigned_schema", data, must_reject=True)
        data, payload = resigned(r, st)
        allowed = _parse_or_none(payload)
        return Case("resigned_schema", data, allowed, schema_check=True)
    if x < 0.93:
        signer = r.choice((ATTACKER, RETIRED, APPROVER))
        st = copy.deepcopy(g.statement)
        if r.random() < 0.5:
            st["predicate"]["issued_at"] = r.choice(
                ("2019-12-31T23:59:59.999999Z", "2020-01-01T00:00:00Z", "2026-11-29T12:00:00Z")
            )
        data, _payload = resigned(r, st, signer)
        retired_ok = signer is RETIRED and st["predicate"]["issued_at"] < "2020"
        if retired_ok:  # a trusted key inside its window: a legitimate receipt
            return Case("keys", data, st)
        return Case("keys", data, must_reject=True)
    return object_case(r, g)


def _has_raw(v: Any) -> bool:
    if isinstance(v, Raw | Pairs):
        return True
    if isinstance(v, dict):
        return any(_has_raw(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_raw(x) for x in v)
    return False


def _parse_or_none(payload: bytes | None) -> Any:
    if payload is None:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return None


def object_case(r: random.Random, g: Genuine) -> Case:
    obj = Receipt.from_json(g.receipt.to_json())
    op = r.randrange(6)
    if op == 0:  # mutate the parsed statement in place
        st = obj.statement
        for _ in range(r.choice((1, 2))):
            m = r.choice((m_type, m_delete, m_add, m_number, m_unicode))
            cand = m(r, st)
            if cand is not st:
                break
    elif op == 1:  # another statement swapped in behind the constructor's back
        evil = copy.deepcopy(g.statement)
        evil["predicate"]["scope"]["thread_id"] = "mallory"
        evil["subject"][0]["name"] = "langgraph-thread:mallory"
        evil["predicate"].pop("kind", None)
        object.__setattr__(obj, "statement", evil)
    elif op == 2:  # the payload swapped for another (unsigned) statement's bytes
        evil = copy.deepcopy(g.statement)
        v_not_empty(r, evil)
        object.__setattr__(obj, "payload", canonicalize(evil))
        object.__setattr__(obj, "statement", evil)
    elif op == 3:  # signatures replaced by odd objects
        junk = r.choice(((), ("x",), (Signature(None, b"x"),),  # type: ignore[arg-type]
                         (Signature("", obj.signatures[0].sig),),
                         (Signature(TRUSTED.key_id, "text"),),  # type: ignore[arg-type]
                         [obj.signatures[0]]))  # fmt: skip
        object.__setattr__(obj, "signatures", junk)
    elif op == 4:  # a non-canonical payload carrying a valid signature
        payload = json.dumps(g.statement, indent=1).encode()
        sig = Signature(TRUSTED.key_id, TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
        object.__setattr__(obj, "payload", payload)
        object.__setattr__(obj, "signatures", (sig,))
        return Case("object", obj, must_reject=True)
    else:  # the public constructor with a foreign statement
        evil = copy.deepcopy(g.statement)
        v_subject_name(r, evil)
        with contextlib.suppress(Error):  # refused by the constructor: keep the parsed one
            obj = Receipt(evil, obj.signatures, None, g.payload)
    return Case("object", obj, g.statement)


class Stats:
    def __init__(self) -> None:
        self.mutations = 0
        self.accepted = 0
        self.rejected: Counter[str] = Counter()
        self.by_category: dict[str, Counter[str]] = {}
        self.by_seed: dict[str, Counter[str]] = {}
        self.by_kind: dict[str, Counter[str]] = {}
        self.by_violation: dict[str, Counter[str]] = {}
        self.uncaught: list[dict[str, Any]] = []
        self.wrong_accepts: list[dict[str, Any]] = []
        self.unknown_reasons: list[dict[str, Any]] = []
        self.cli_checked = 0
        self.cli_failures: list[dict[str, Any]] = []


def _schema_validators() -> tuple[Any, Any]:
    from jsonschema import Draft202012Validator

    receipt = json.loads((REPO / "schemas" / "receipt.schema.json").read_text("utf-8"))
    result = json.loads((REPO / "schemas" / "verify-result.schema.json").read_text("utf-8"))
    return Draft202012Validator(receipt), Draft202012Validator(result)


def judge(case: Case, i: int, stats: Stats, receipt_schema: Any) -> str:
    """Run one case through ``verify_receipt`` against the oracle; returns the outcome
    (``accepted``, ``rejected``, ``uncaught`` or ``wrong_accept``)."""
    cat = stats.by_category.setdefault(case.category, Counter())
    held = case.data.statement if isinstance(case.data, Receipt) else None
    try:
        v = verify_receipt(case.data, TRUST)
    except Error as exc:
        stats.rejected[exc.reason] += 1
        cat[f"rejected:{exc.reason}"] += 1
        if exc.reason not in REASON_CODES:
            stats.unknown_reasons.append({"case": i, "reason": exc.reason})
        if case.category == "resigned_semantic" and exc.reason not in SEMANTIC_REASONS:
            cat["resigned_semantic_other_reason"] += 1
        return "rejected"
    except Exception as exc:  # the bug class this fuzzer hunts
        stats.uncaught.append({"case": i, "category": case.category, "seed": case.seed,
                               "detail": case.detail, "error": repr(exc)[:300]})  # fmt: skip
        cat["uncaught"] += 1
        return "uncaught"
    stats.accepted += 1
    cat["accepted"] += 1
    st = v.statement
    p = st["predicate"] if isinstance(st, dict) else {}
    auth = "authorization" in p
    ok = (
        not case.must_reject
        and case.allowed is not None
        and st == case.allowed
        and st is not held
        and v.thread_id == scope_id(p)
        and v.receipt_id == p["receipt_id"]
        and v.status == p["status"]
        and v.issued_at == p["issued_at"]
        and v.pre_digest == p["pre_state"]["digest"]["sha256"]
        and v.methods == p["methods"]
        and list(v.residue) == [(x["action"], x["status"]) for x in p["residue"]]
        and v.request == p.get("request")
        and v.approver_key_id == (APPROVER.key_id if auth else None)
        and v.key_id in (TRUSTED.key_id, RETIRED.key_id)
        and isinstance(v, VerifiedReceipt)
    )
    if ok and case.schema_check:
        doc = {"media_type": MEDIA_TYPE, "statement": st, "signatures": [sign_payload(b"x")]}
        ok = receipt_schema.is_valid(doc)
    if not ok:
        stats.wrong_accepts.append({"case": i, "category": case.category, "seed": case.seed,
                                    "detail": case.detail, "scope": v.thread_id})  # fmt: skip
        return "wrong_accept"
    return "accepted"


def cli_check(case: Case, i: int, stats: Stats, result_schema: Any, tmp: Path) -> None:
    """The same input through ``receipt verify --json --trust`` (in-process): one
    schema-valid document, never ``internal_error``."""
    from erasure_receipts.cli import verify_main

    if not isinstance(case.data, bytes):
        return
    path = tmp / f"case-{i}.json"
    path.write_bytes(case.data)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = verify_main([str(path), "--json", "--trust", str(tmp / "trust.json")])
    path.unlink()
    stats.cli_checked += 1
    try:
        doc = json.loads(out.getvalue())
        result_schema.validate(doc)
        reason = doc["results"][0]["reason"]
        good = reason != "internal_error" and code == doc["exit_code"]
    except Exception as exc:
        good, reason = False, repr(exc)[:200]
    if not good:
        stats.cli_failures.append({"case": i, "category": case.category, "reason": reason})


def trust_file() -> bytes:
    """``TRUST`` as a trust file (RECEIPT_SPEC.md 7), for the CLI sample."""
    keys = [
        {"name": "ops", "ed25519": TRUSTED.public_key.b64()},
        {"name": "retired", "ed25519": RETIRED.public_key.b64(),
         "not_after": "2020-01-01T00:00:00Z"},
        {"name": "dpo", "ed25519": APPROVER.public_key.b64(), "role": "approver"},
    ]  # fmt: skip
    return json.dumps({"trust_version": 1, "keys": keys}).encode()


def run(
    mutations: int,
    seed: int,
    cli_every: int = 50,
    *,
    skip: frozenset[str] = frozenset(),
    seed_file: Path | None = None,
) -> dict[str, Any]:
    """Fuzz ``mutations`` cases; ``skip`` names violations (``VIOLATIONS``) to leave out,
    ``seed_file`` replays seed receipts saved with ``--save-seeds``."""
    unknown = skip - set(VIOLATIONS)
    if unknown:
        raise ValueError(f"no such violation: {', '.join(sorted(unknown))}")
    r = random.Random(seed)
    gs = genuines(seed_file)
    stats = Stats()
    receipt_schema, result_schema = _schema_validators()
    # Sanity: every genuine base verifies and returns the genuine statement.
    for g in gs:
        for _name, base in g.bases:
            assert verify_receipt(json.dumps(base).encode(), TRUST).statement == g.statement
    kinds = {g.label: g.kind for g in gs}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "trust.json").write_bytes(trust_file())
        for i in range(mutations):
            case = make_case(r, gs, skip)
            stats.mutations += 1
            outcome = judge(case, i, stats, receipt_schema)
            for table in (
                stats.by_seed.setdefault(case.seed, Counter()),
                stats.by_kind.setdefault(kinds[case.seed], Counter()),
            ):
                table["cases"] += 1
                table[outcome] += 1
            if case.category == "resigned_semantic":
                for name in case.detail.split("+"):
                    stats.by_violation.setdefault(name, Counter())[outcome] += 1
            if cli_every and i % cli_every == 0:
                cli_check(case, i, stats, result_schema, tmp)
    seconds = time.perf_counter() - t0

    def table(d: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
        return {k: dict(sorted(v.items())) for k, v in sorted(d.items())}

    return {
        "seed": seed,
        "mutations": stats.mutations,
        "seed_receipts": {g.label: g.kind for g in gs},
        "skipped_violations": sorted(skip),
        "accepted": stats.accepted,
        "rejected": stats.mutations - stats.accepted - len(stats.uncaught),
        "rejected_by_reason": dict(sorted(stats.rejected.items())),
        "by_category": table(stats.by_category),
        "by_kind": table(stats.by_kind),
        "by_seed": table(stats.by_seed),
        "by_violation": table(stats.by_violation),
        "uncaught": len(stats.uncaught),
        "uncaught_examples": stats.uncaught[:10],
        "wrong_accepts": len(stats.wrong_accepts),
        "wrong_accept_examples": stats.wrong_accepts[:10],
        "unknown_reasons": len(stats.unknown_reasons),
        "cli_checked": stats.cli_checked,
        "cli_failures": len(stats.cli_failures),
        "cli_failure_examples": stats.cli_failures[:10],
        "seconds": round(seconds, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutations", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cli-every", type=int, default=50, help="0 disables the CLI sample")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results")
    ap.add_argument("--seeds", type=Path, help="replay the seed receipts saved in this file")
    ap.add_argument("--save-seeds", type=Path, help="write this run's seed receipts here")
    ap.add_argument("--skip-violation", action="append", default=[], metavar="NAME",
                    help=f"leave out a violation (one of: {', '.join(VIOLATIONS)})")  # fmt: skip
    args = ap.parse_args()
    summary = run(args.mutations, args.seed, args.cli_every,
                  skip=frozenset(args.skip_violation), seed_file=args.seeds)  # fmt: skip
    if args.save_seeds:
        import fuzz_seeds

        fuzz_seeds.save(args.save_seeds, fuzz_seeds.seeds(TRUSTED, APPROVER))
    print(json.dumps(summary, indent=2))
    if not args.no_write:
        from _common import write_result

        path = write_result("fuzz_verify", summary)
        print(f"wrote {path}", file=sys.stderr)
    bad = summary["uncaught"] + summary["wrong_accepts"] + summary["unknown_reasons"]
    return 1 if bad or summary["cli_failures"] else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
