"""Single-byte mutations of valid receipts: the verifier either rejects with a
``VerificationError`` or returns exactly the original statement. Nothing else escapes."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure_receipts.errors import VerificationError
from erasure_receipts.verify import TrustStore, verify_receipt
from receipt_factory import TRUSTED, make_receipt, make_statement

RECEIPT = make_receipt()
ORIGINALS = {
    "receipt": RECEIPT.to_json(),
    "receipt-no-key": make_receipt(embed_key=False).to_json(),
    "dsse": (json.dumps(RECEIPT.to_dsse(), indent=2) + "\n").encode("utf-8"),
}
STATEMENT = make_statement()
TRUST = TrustStore([TRUSTED.public_key])


def _check(data: bytes) -> bool:
    """True if verified (then the statement is unchanged), False if rejected properly."""
    try:
        verified = verify_receipt(data, TRUST)
    except VerificationError as exc:
        assert exc.reason and exc.reason not in ("invalid", "error"), exc
        return False
    assert verified.statement == STATEMENT
    assert verified.key_id == TRUSTED.key_id
    return True


def test_originals_verify() -> None:
    for data in ORIGINALS.values():
        assert _check(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(ORIGINALS)), st.data())
def test_single_byte_mutation(kind: str, data: st.DataObject) -> None:
    original = ORIGINALS[kind]
    pos = data.draw(st.integers(0, len(original) - 1), label="position")
    value = data.draw(st.integers(0, 255).filter(lambda b: b != original[pos]), label="byte")
    mutated = original[:pos] + bytes([value]) + original[pos + 1 :]
    _check(mutated)


# Bytes that are interesting to JSON and base64: structure, digits, quotes, escapes,
# base64 alphabet edges, whitespace, controls, and invalid UTF-8.
INTERESTING = b'{}[]:,"\\/ \t\n\r0123456789-+.eEtfnaAzZ=\x00\x1f\x7f\x80\xc3\xff'


@pytest.mark.parametrize("kind", sorted(ORIGINALS))
def test_every_position_mutated(kind: str) -> None:
    """Deterministic sweep: every byte position, replaced by a few interesting bytes."""
    original = ORIGINALS[kind]
    accepted = 0
    for pos in range(len(original)):
        for value in (original[pos] ^ 0x01, INTERESTING[pos % len(INTERESTING)]):
            if value == original[pos]:
                continue
            accepted += _check(original[:pos] + bytes([value]) + original[pos + 1 :])
    # Only mutations that do not change meaning (whitespace, base64 padding bits, -0)
    # may verify; they must be rare.
    assert accepted < len(original) // 20


@pytest.mark.parametrize("kind", sorted(ORIGINALS))
def test_deletions_and_insertions(kind: str) -> None:
    original = ORIGINALS[kind]
    step = max(1, len(original) // 400)
    for pos in range(0, len(original), step):
        _check(original[:pos] + original[pos + 1 :])
        _check(original[:pos] + b"0" + original[pos:])
        _check(original[:pos] + b'"' + original[pos:])
