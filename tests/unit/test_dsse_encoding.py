"""DSSE envelopes: keyid types and form, strict and canonical base64 in signatures, keys and
payloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import test_verify_inputs
from erasure_receipts.errors import KeyFormatError, MalformedReceiptError
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE
from erasure_receipts.signing import PublicKey, b64decode, pae
from erasure_receipts.verify import TrustStore, verify_receipt
from receipt_factory import TRUSTED, dump, make_receipt, receipt_doc
from test_verify_inputs import TRUST, b64, envelope, run_cli

pub = test_verify_inputs.pub  # the fixture, shared

# -- DSSE keyid types, canonical base64 ---------------------------------------------------


@pytest.mark.parametrize("keyid", [None, 0, 1, False, True, {}, [], [TRUSTED.key_id], 1.5])
def test_dsse_keyid_of_the_wrong_type_is_malformed(keyid: Any) -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    data = envelope(payload, [{"keyid": keyid, "sig": sig}])
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(data, TRUST)
    assert exc.value.reason in ("schema", "float")


@pytest.mark.parametrize("keyid", [TRUSTED.key_id.upper(), "abc", TRUSTED.key_id + "0"])
def test_dsse_keyid_string_must_be_hex64(keyid: str) -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    with pytest.raises(MalformedReceiptError):
        verify_receipt(envelope(payload, [{"keyid": keyid, "sig": sig}]), TRUST)


def test_dsse_keyid_absent_or_empty_means_no_hint() -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    for s in ({"sig": sig}, {"keyid": "", "sig": sig}):
        assert verify_receipt(envelope(payload, [s]), TRUST).key_id == TRUSTED.key_id


def test_cli_dsse_keyid_null_is_not_an_internal_error(tmp_path: Path, pub: Path) -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    f = tmp_path / "env.json"
    f.write_bytes(envelope(payload, [{"keyid": None, "sig": sig}]))
    proc = run_cli("verify", "--json", f, "--key", pub)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["results"][0]["reason"] == "schema"


@pytest.mark.parametrize(
    "text",
    ["QUJD====", "QUJD=", "QQ===", "QQ====", "QUI==", "QR==", "QUJ=", "QQ", "Q Q==", "QQ==\n", "é"],
)
def test_base64_is_strict_and_canonical(text: str) -> None:
    with pytest.raises(ValueError):
        b64decode(text)
    with pytest.raises(ValueError):
        b64decode(text.encode("utf-8"))


def test_base64_round_trips() -> None:
    for n in range(0, 70):
        data = bytes(range(n))
        assert b64decode(b64(data)) == data


def _overpad(s: str) -> str:
    return s + "=="


@pytest.mark.parametrize("where", ["sig", "public_key", "payload"])
def test_over_padded_base64_is_rejected(where: str) -> None:
    r = make_receipt()
    if where == "payload":
        env = r.to_dsse()
        env["payload"] = _overpad(env["payload"])
        data = json.dumps(env).encode()
    else:
        doc = receipt_doc(r)
        if where == "sig":
            doc["signatures"][0]["sig"] = _overpad(doc["signatures"][0]["sig"])
        else:
            doc["public_key"]["ed25519"] = _overpad(doc["public_key"]["ed25519"])
        data = dump(doc)
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(data, TRUST)
    assert exc.value.reason == "schema"


def test_over_padded_keys_are_refused() -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_base64(TRUSTED.public_key.b64() + "==")
    doc = {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64() + "=="}]}
    with pytest.raises(KeyFormatError):
        TrustStore.from_json(json.dumps(doc).encode())
