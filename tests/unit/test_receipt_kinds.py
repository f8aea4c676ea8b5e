"""Receipt kinds (RECEIPT_SPEC.md section 9): history and subject receipts are validated
and verified by kind; old thread receipts (no ``kind``) verify unchanged; every rule the
verifier adds can fail."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import jsonschema
import pytest

from erasure_receipts import MalformedReceiptError, ReceiptSemanticsError, verify_receipt
from erasure_receipts._engine import needle_forms
from erasure_receipts.digest import EMPTY_ROOT, units_root
from erasure_receipts.privacy import CommitmentKey, commit, needle_commitment
from erasure_receipts.receipt import Receipt, build_statement
from receipt_factory import SCHEMA_PATH, TRUSTED

SCHEMA = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
EMPTY = EMPTY_ROOT.hex()
BACKEND = {
    "kind": "sqlite",
    "saver": "AttestingSqliteSaver",
    "store": None,
    "database": "/srv/app.db",
    "versions": {"langgraph-erasure-receipts": "0.1.0"},
}
CHECKS = [{"name": "raw_rows_zero_in_transaction", "result": "pass"}]
RESIDUE = [
    {"action": "sqlite.secure_delete", "status": "applied", "detail": {"value": 1}},
    {"action": "sqlite.live_page_free_space", "status": "skipped", "detail": {"reason": "-"}},
]
"""A SQLite receipt's residue must not be empty and must disclose the free space of
live pages (RECEIPT_SPEC.md 6.1)."""


def h(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def tables(rows: int) -> dict[str, dict[str, int]]:
    return {"checkpoints": {"rows": rows, "bytes": 10 * rows}}


def statement(kind: str, **over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict(
        receipt_id="4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d",
        issued_at="2026-11-29T12:00:00Z",
        thread_id="t1",
        store_namespaces=[],
        tombstone=kind != "history",
        backend=BACKEND,
        pre_digest=h("pre"),
        pre_tables=tables(3),
        post_digest=EMPTY,
        post_tables=tables(0),
        methods={"checkpoints": "atomic-transaction"},
        checks=CHECKS,
        residue=RESIDUE,
        generator_version="0.1.0",
        kind=kind,
    )
    if kind == "history":
        fields["scope"] = {
            "thread_id": "t1",
            "checkpoint_namespaces": "all",
            "store_namespaces": [],
            "tombstone": False,
            "keep": "latest",
        }
        fields["subject_name"] = "langgraph-thread-history:t1"
        fields["extra"] = {
            "kept_state": {
                "digest": {"sha256": h("kept")},
                "leaves": 1,
                "tables": tables(1),
                "checkpoints": [{"checkpoint_ns": "", "checkpoint_id": "cp-9"}],
            },
            "needles": {
                "commitment": "hmac-sha256",
                "salt": "AAAAAAAAAAAAAAAAAAAAAA==",
                "values": [h("n")],
                "forms": ["raw"],
                "searched": "thread",
                "occurrences_after": 0,
            },
        }
    if kind == "subject":
        units = [
            {"name": "thread:a", "digest": {"sha256": h("a")}, "leaves": 2, "tables": tables(2)},
            {"name": "thread:b", "digest": {"sha256": h("b")}, "leaves": 1, "tables": tables(1)},
        ]
        root = units_root(
            (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in units
        )
        fields.update(
            thread_id=None,
            pre_digest=root.hex(),
            subject_name="langgraph-subject:alice",
            scope={
                "subject": "alice",
                "threads": ["a", "b"],
                "discovery": {"metadata_key": "user_id"},
                "checkpoint_namespaces": "all",
                "store_namespaces": [],
                "tombstone": True,
            },
            extra={"units": units},
        )
    fields.update(over)
    return build_statement(**fields)


def sign(st: dict[str, Any]) -> bytes:
    return Receipt.sign(st, TRUSTED).to_json()


def resign(st: dict[str, Any], mutate: Any) -> bytes:
    """Mutate a valid statement and sign it with the trusted key: only the verifier's
    semantic rules stand between it and acceptance."""
    st = copy.deepcopy(st)
    mutate(st["predicate"])
    raw = Receipt(st, ()).payload  # validates the structure
    assert raw
    return Receipt.sign(st, TRUSTED).to_json()


@pytest.mark.parametrize("kind", ["thread", "history", "subject"])
def test_each_kind_verifies_and_matches_the_schema(kind: str) -> None:
    data = sign(statement(kind))
    SCHEMA.validate(json.loads(data))
    v = verify_receipt(data, [TRUSTED.public_key])
    assert v.statement["predicate"]["kind"] == kind
    assert v.thread_id == ("alice" if kind == "subject" else "t1")


def test_a_receipt_without_kind_is_a_thread_receipt() -> None:
    st = statement("thread")
    del st["predicate"]["kind"]
    data = sign(st)
    SCHEMA.validate(json.loads(data))
    assert verify_receipt(data, [TRUSTED.public_key]).thread_id == "t1"


@pytest.mark.parametrize(
    ("kind", "mutate", "reason"),
    [
        ("subject", lambda p: p["units"][0]["digest"].update(sha256=h("x")), "units_mismatch"),
        ("subject", lambda p: p["units"][1].update(leaves=5), "units_mismatch"),
        ("subject", lambda p: p["scope"].update(threads=["a", "c"]), "units_mismatch"),
        ("subject", lambda p: p["units"].pop(), "units_mismatch"),
        ("history", lambda p: p["needles"].update(occurrences_after=1), "needles_remain"),
        ("history", lambda p: p["kept_state"].update(leaves=2), "inconsistent"),
        (
            "history",
            lambda p: p["kept_state"]["checkpoints"].append(
                {"checkpoint_ns": "", "checkpoint_id": "cp-8"}
            ),
            "inconsistent",
        ),
        ("history", lambda p: p["scope"].update(thread_id="t2"), "subject_name_mismatch"),
    ],
)
def test_resigned_violations_are_rejected(kind: str, mutate: Any, reason: str) -> None:
    data = resign(statement(kind), mutate)
    with pytest.raises(ReceiptSemanticsError) as ei:
        verify_receipt(data, [TRUSTED.public_key])
    assert ei.value.reason == reason


@pytest.mark.parametrize(
    ("kind", "mutate"),
    [
        ("thread", lambda p: p.update(kept_state=None)),
        ("thread", lambda p: p.update(kind="history")),  # history without kept_state
        ("history", lambda p: p.pop("kept_state")),
        ("history", lambda p: p["scope"].update(keep="all")),
        ("subject", lambda p: p.pop("units")),
        ("subject", lambda p: p["scope"].update(threads=["a", "a"])),  # unique
        ("subject", lambda p: p["scope"].pop("discovery")),
        ("history", lambda p: p["needles"].update(values=["not hex"])),
        ("history", lambda p: p["needles"].update(salt="c2hvcnQ=")),  # 5 bytes, not 16
        ("thread", lambda p: p.update(kind="everything")),
    ],
)
def test_malformed_kind_members_are_rejected(kind: str, mutate: Any) -> None:
    st = copy.deepcopy(statement(kind))
    mutate(st["predicate"])
    with pytest.raises(MalformedReceiptError):
        Receipt.sign(st, TRUSTED)
    doc = {
        "media_type": "application/vnd.langgraph-erasure-receipt.v1+json",
        "statement": st,
        "signatures": [{"keyid": "0" * 64, "sig": "AAAA"}],
    }
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA.validate(doc)


def test_an_empty_subject_has_the_empty_root() -> None:
    units = [{"name": "thread:a", "digest": {"sha256": EMPTY}, "leaves": 0, "tables": tables(0)}]
    st = statement(
        "subject",
        pre_digest=EMPTY,
        pre_tables=tables(0),
        extra={"units": units},
        scope={
            "subject": "alice",
            "threads": ["a"],
            "discovery": None,
            "checkpoint_namespaces": "all",
            "store_namespaces": [],
            "tombstone": True,
        },
    )
    assert verify_receipt(sign(st), [TRUSTED.public_key]).thread_id == "alice"


def test_commitments_are_keyed_and_domain_separated() -> None:
    key = CommitmentKey.generate()
    c = key.commit("thread", "alice-chat")
    assert c.startswith("hmac-sha256:") and "alice" not in c
    assert c != key.commit("subject", "alice-chat")  # label separates domains
    assert c != CommitmentKey.generate().commit("thread", "alice-chat")  # keyed
    assert c == commit(bytes.fromhex(repr(key) and key._key.hex()), "thread", "alice-chat")
    assert key.needle("x") == needle_commitment(key._key, "x")
    with pytest.raises(ValueError):
        key.commit("anything", "x")


def test_commitment_key_files(tmp_path: Any) -> None:
    key = CommitmentKey.generate()
    path = tmp_path / "commitment.key"
    key.to_file(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert CommitmentKey.from_file(path).key_id == key.key_id
    with pytest.raises(FileExistsError):
        key.to_file(path)
    path.chmod(0o644)
    from erasure_receipts import KeyFormatError

    with pytest.raises(KeyFormatError, match="chmod 600"):
        CommitmentKey.from_file(path)
    assert CommitmentKey.from_file(path, allow_insecure=True).key_id == key.key_id


def test_needle_forms_cover_raw_and_json_escapes() -> None:
    forms = needle_forms('José "J" <jose@example.com>')
    assert "José".encode() in forms[0]
    assert any(b'Jos\\u00e9 \\"J\\"' in f for f in forms)
    assert any(b"Jos\\u00E9" in f for f in forms)
    assert needle_forms("plain") == [b"plain"]


def _private_subject() -> dict[str, Any]:
    c = "hmac-sha256:" + "a" * 64
    units = [{"name": f"thread:{c}", "digest": {"sha256": h("a")}, "leaves": 3,
              "tables": tables(3)}]  # fmt: skip
    root = units_root((u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in units)
    return statement(
        "subject",
        pre_digest=root.hex(),
        backend={**BACKEND, "database": c},
        subject_name=f"langgraph-subject:{c}",
        scope={
            "subject": c,
            "threads": [c],
            "discovery": None,
            "checkpoint_namespaces": "all",
            "store_namespaces": [],
            "tombstone": True,
            "privacy": {"mode": "hmac-sha256", "key_id": "b" * 64},
        },
        extra={"units": units},
    )


def test_privacy_mode_forbids_salted_needles_and_clear_residue_paths() -> None:
    st = _private_subject()
    assert verify_receipt(sign(st), [TRUSTED.public_key])
    needles = {"commitment": "hmac-sha256", "salt": "AAAAAAAAAAAAAAAAAAAAAA==",
               "values": [h("n")], "forms": ["raw"], "searched": "database",
               "occurrences_after": 0}  # fmt: skip
    for mutate in (
        lambda p: p.update(needles=needles),
        lambda p: p["residue"].append(
            {
                "action": "sqlite.secure_delete.store",
                "status": "applied",
                "detail": {"database": "/srv/memories-of-alice.db"},
            }
        ),
    ):
        with pytest.raises(ReceiptSemanticsError, match="in clear"):
            verify_receipt(resign(st, mutate), [TRUSTED.public_key])


def test_the_fast_batch_check_takes_thread_receipts_with_a_kind() -> None:
    """Batch verification's one-pass check covers the receipts the library issues for
    threads (kind "thread"); any other kind falls back to the full validator."""
    from erasure_receipts.receipt import statement_is_valid, validate_statement

    st = json.loads(json.dumps(statement("thread")))
    assert statement_is_valid(st) and validate_statement(st)
    for kind in ("history", "subject", "nonsense"):
        assert not statement_is_valid({**st, "predicate": {**st["predicate"], "kind": kind}})
    assert statement_is_valid(statement("history")) is False
