"""Deterministic keys, statements and receipts shared by the verify-side tests.

Everything here is fixed (seeds, ids, times) so that receipts are byte-for-byte
reproducible: Ed25519 signatures are deterministic and the receipt file format is
plain ``json.dumps`` output. The golden corpus generator (``tests/golden/make_corpus.py``)
builds on these helpers, and a test checks that it reproduces the committed corpus.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from erasure_receipts import digest
from erasure_receipts.receipt import Receipt, build_statement
from erasure_receipts.signing import Signer

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
SCHEMA_PATH = REPO_ROOT / "schemas" / "receipt.schema.json"

TRUSTED_SEED = bytes(range(32))
ATTACKER_SEED = b"\x01" * 32
TRUSTED = Signer.from_seed(TRUSTED_SEED)
"""The key auditors trust."""
ATTACKER = Signer.from_seed(ATTACKER_SEED)
"""A key nobody trusts (forgeries, key substitution)."""

RECEIPT_ID = "4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d"
ISSUED_AT = "2026-11-29T12:00:00Z"
THREAD_ID = "thread-1"
STORE_NAMESPACE = ("users", "u1")
GENERATOR_VERSION = "0.1.0"

# The five stored rows the "pre" digest commits to: 3 checkpoint rows, 2 write rows.
PRE_ROWS: tuple[tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]], ...] = (
    (
        "checkpoints",
        (THREAD_ID, "", "cp-1"),
        (("thread_id", THREAD_ID), ("checkpoint_ns", ""), ("checkpoint_id", "cp-1"),
         ("checkpoint", b"\x81\xa1v\x01" * 20)),
    ),
    (
        "checkpoints",
        (THREAD_ID, "", "cp-2"),
        (("thread_id", THREAD_ID), ("checkpoint_ns", ""), ("checkpoint_id", "cp-2"),
         ("checkpoint", b"\x81\xa1v\x02" * 20)),
    ),
    (
        "checkpoints",
        (THREAD_ID, "sub", "cp-3"),
        (("thread_id", THREAD_ID), ("checkpoint_ns", "sub"), ("checkpoint_id", "cp-3"),
         ("checkpoint", b"\x81\xa1v\x03" * 20)),
    ),
    (
        "writes",
        (THREAD_ID, "", "cp-1", "task-a", 0),
        (("thread_id", THREAD_ID), ("checkpoint_id", "cp-1"), ("task_id", "task-a"),
         ("idx", 0), ("value", b"secret-1")),
    ),
    (
        "writes",
        (THREAD_ID, "", "cp-2", "task-b", 1),
        (("thread_id", THREAD_ID), ("checkpoint_id", "cp-2"), ("task_id", "task-b"),
         ("idx", 1), ("value", None)),
    ),
)  # fmt: skip


def pre_leaf_data() -> list[bytes]:
    return [digest.encode_row(t, pk, cols) for t, pk, cols in PRE_ROWS]


def pre_digest_hex() -> str:
    tree = digest.MerkleTree()
    for data in pre_leaf_data():
        tree.append(data)
    return tree.root().hex()


PRE_DIGEST = pre_digest_hex()
"""Merkle root over ``PRE_ROWS`` (5 leaves)."""


def statement_kwargs() -> dict[str, Any]:
    """The keyword arguments of ``build_statement`` for the canonical test statement."""
    return {
        "receipt_id": RECEIPT_ID,
        "issued_at": ISSUED_AT,
        "thread_id": THREAD_ID,
        "store_namespaces": [list(STORE_NAMESPACE)],
        "tombstone": True,
        "backend": {
            "kind": "sqlite",
            "saver": "AttestingSqliteSaver",
            "store": "AttestingSqliteStore",
            "database": "/var/lib/app/state.db",
            "versions": {"sqlite": "3.45.1", "langgraph-checkpoint": "4.0.0"},
        },
        "pre_digest": PRE_DIGEST,
        "pre_tables": {
            "checkpoints": {"rows": 3, "bytes": 300},
            "writes": {"rows": 2, "bytes": 80},
        },
        "post_digest": digest.EMPTY_ROOT.hex(),
        "post_tables": {
            "checkpoints": {"rows": 0, "bytes": 0},
            "writes": {"rows": 0, "bytes": 0},
        },
        "methods": {"checkpoints": "delete", "writes": "delete"},
        "checks": [
            {"name": "post_state_empty", "result": "pass"},
            {"name": "integrity_check", "result": "pass", "detail": "ok"},
            {"name": "tombstone_written", "result": "pass"},
        ],
        "residue": [
            {
                "action": "wal_checkpoint_truncate",
                "status": "applied",
                "detail": {"busy": 0, "log_frames": 12, "checkpointed": 12, "mode": "TRUNCATE"},
            }
        ],
        "generator_version": GENERATOR_VERSION,
    }


def make_statement(**overrides: Any) -> dict[str, Any]:
    """A valid erasure statement; ``overrides`` replace ``build_statement`` arguments."""
    kwargs = statement_kwargs()
    unknown = set(overrides) - set(kwargs)
    if unknown:
        raise TypeError(f"unknown build_statement arguments: {sorted(unknown)}")
    kwargs.update(overrides)
    return build_statement(**kwargs)


def make_receipt(
    statement: dict[str, Any] | None = None, signer: Signer = TRUSTED, *, embed_key: bool = True
) -> Receipt:
    """``Receipt.sign`` over ``statement`` (default: ``make_statement()``)."""
    return Receipt.sign(
        statement if statement is not None else make_statement(), signer, embed_key=embed_key
    )


@functools.cache
def _default_receipt_dict() -> dict[str, Any]:
    return make_receipt().to_dict()


def receipt_doc(receipt: Receipt | None = None) -> dict[str, Any]:
    """A deep copy of a receipt file's JSON object, ready to be tampered with."""
    return copy.deepcopy(receipt.to_dict() if receipt is not None else _default_receipt_dict())


def dump(doc: Any) -> bytes:
    """Serialise a (possibly tampered) document exactly like ``Receipt.to_json``."""
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def set_path(doc: Any, path: str, value: Any) -> Any:
    """Set ``doc[a][b][0]...`` from a dotted path such as ``statement.subject.0.name``."""
    *parents, last = path.split(".")
    target = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


def del_path(doc: Any, path: str) -> Any:
    *parents, last = path.split(".")
    target = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    del target[int(last) if isinstance(target, list) else last]
    return doc


def load_schema() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return result


# An Ed25519 SubjectPublicKeyInfo / PKCS#8 key whose algorithm OID is 1.3.101.127 (not a
# known key type): cryptography raises UnsupportedAlgorithm, not ValueError.
UNKNOWN_OID_PUBLIC_PEM = (
    b"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2V/AyEAA6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=\n"
    b"-----END PUBLIC KEY-----\n"
)
UNKNOWN_OID_PRIVATE_PEM = (
    b"-----BEGIN PRIVATE KEY-----\n"
    b"MC4CAQAwBQYDK2V/BCIEIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f\n"
    b"-----END PRIVATE KEY-----\n"
)
