"""DSSE envelopes from other tools may omit the (optional) keyid hint."""

from __future__ import annotations

import base64
import json

import pytest

from erasure_receipts import UntrustedKeyError, verify_receipt
from erasure_receipts.signing import pae
from receipt_factory import ATTACKER, TRUSTED, make_receipt


def _envelope_without_keyid(signer=TRUSTED) -> bytes:  # type: ignore[no-untyped-def]
    r = make_receipt()
    sig = signer.sign(pae("application/vnd.in-toto+json", r.payload))
    env = {
        "payloadType": "application/vnd.in-toto+json",
        "payload": base64.b64encode(r.payload).decode(),
        "signatures": [{"sig": base64.b64encode(sig).decode()}],
    }
    return json.dumps(env).encode()


def test_envelope_without_keyid_verifies_against_trusted_keys() -> None:
    v = verify_receipt(_envelope_without_keyid(), [ATTACKER.public_key, TRUSTED.public_key])
    assert v.key_id == TRUSTED.key_id


def test_envelope_without_keyid_by_untrusted_key_is_rejected() -> None:
    with pytest.raises(UntrustedKeyError):
        verify_receipt(_envelope_without_keyid(ATTACKER), [TRUSTED.public_key])
