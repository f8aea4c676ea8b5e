"""A Receipt object reports only what its signature binds: it cannot be built around a foreign
statement, its attributes cannot be reassigned, and a mutated or bypassed one is verified
from its signed payload."""

from __future__ import annotations

import json
from typing import Any

import pytest

from erasure_receipts.errors import MalformedReceiptError
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE, Receipt
from erasure_receipts.signing import pae
from erasure_receipts.verify import VerifiedReceipt, verify_receipt
from receipt_factory import TRUSTED, make_receipt, make_statement
from test_verify_inputs import TRUST

# -- only what the signature binds --------------------------------------------------------


def _evil_statement() -> dict[str, Any]:
    st = make_statement(thread_id="mallory")
    return st


def test_receipt_object_with_a_foreign_statement_cannot_be_built() -> None:
    genuine = make_receipt()
    with pytest.raises(MalformedReceiptError):
        Receipt(_evil_statement(), genuine.signatures, None, genuine.payload)


def test_receipt_attributes_cannot_be_reassigned() -> None:
    r = Receipt.from_json(make_receipt().to_json())
    for name, value in (("statement", _evil_statement()), ("payload", b"{}"), ("signatures", ())):
        with pytest.raises(AttributeError):
            setattr(r, name, value)


def test_mutated_statement_of_a_parsed_receipt_is_never_reported() -> None:
    genuine = make_receipt()
    signed = json.loads(genuine.payload)
    r = Receipt.from_json(genuine.to_json())
    r.statement["predicate"]["scope"]["thread_id"] = "mallory"
    r.statement["subject"][0]["name"] = "langgraph-thread:mallory"
    v = verify_receipt(r, TRUST)
    assert v.thread_id == "thread-1"
    assert v.statement == signed
    assert v.statement is not r.statement
    # ... and the tampered object cannot be written out as if it were signed.
    with pytest.raises(MalformedReceiptError):
        r.to_json()


def test_receipt_object_bypassing_the_constructor_is_verified_from_its_payload() -> None:
    genuine = make_receipt()
    r = Receipt.from_json(genuine.to_json())
    object.__setattr__(r, "statement", _evil_statement())
    v = verify_receipt(r, TRUST)
    assert (v.thread_id, v.statement) == ("thread-1", json.loads(genuine.payload))


def test_receipt_object_with_a_non_canonical_signed_payload_is_rejected() -> None:
    st = make_statement()
    payload = json.dumps(st, indent=1).encode("utf-8")
    sig = TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    r = Receipt.from_json(make_receipt().to_json())
    object.__setattr__(r, "payload", payload)
    object.__setattr__(r, "signatures", (type(r.signatures[0])(TRUSTED.key_id, sig),))
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(r, TRUST)
    assert exc.value.reason == "not_canonical"


@pytest.mark.parametrize(
    ("attr", "value"),
    [("payload", "text"), ("signatures", ("x",)), ("signatures", None), ("public_key", 1)],
)
def test_receipt_object_with_wrong_types_is_malformed(attr: str, value: Any) -> None:
    r = Receipt.from_json(make_receipt().to_json())
    object.__setattr__(r, attr, value)
    with pytest.raises(MalformedReceiptError):
        verify_receipt(r, TRUST)


def test_verified_receipt_is_read_only_and_private() -> None:
    data = make_receipt().to_json()
    a, b = verify_receipt(data, TRUST), verify_receipt(data, TRUST)
    with pytest.raises(AttributeError):
        a.thread_id = "mallory"  # type: ignore[misc]
    a.statement["predicate"]["scope"]["thread_id"] = "mallory"
    assert b.statement["predicate"]["scope"]["thread_id"] == "thread-1"
    assert isinstance(a, VerifiedReceipt)


def test_receipt_constructor_copies_the_statement() -> None:
    st = make_statement()
    r = Receipt(st, make_receipt().signatures)
    st["predicate"]["scope"]["thread_id"] = "mallory"
    assert r.thread_id == "thread-1"
    assert verify_receipt(r.to_json(), TRUST).thread_id == "thread-1"
