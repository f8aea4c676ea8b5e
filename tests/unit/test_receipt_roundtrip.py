"""Sign -> save -> verify through the real ``receipt`` CLI, interoperability with
securesystemslib's DSSE implementation, the JSON schema, trust files, exit codes, and the
verify path's import hygiene."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.exceptions import UnsupportedAlgorithm
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError as SslibVerificationError
from securesystemslib.signer import SSlibKey

from erasure_receipts.cli import verify_main
from erasure_receipts.errors import (
    KeyFormatError,
    MalformedReceiptError,
    ReceiptSemanticsError,
    SignatureError,
    UntrustedKeyError,
)
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE, Receipt, validate_statement
from erasure_receipts.signing import PublicKey, Signer
from erasure_receipts.verify import TrustedKey, TrustStore, verify_receipt
from receipt_factory import (
    ATTACKER,
    ISSUED_AT,
    RECEIPT_ID,
    THREAD_ID,
    TRUSTED,
    UNKNOWN_OID_PUBLIC_PEM,
    dump,
    load_schema,
    make_receipt,
    make_statement,
    receipt_doc,
    set_path,
)

CLI = "from erasure_receipts.cli import main; main()"
VALIDATOR = Draft202012Validator(load_schema())


def run_cli(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> Any:
    proc = subprocess.run(
        [sys.executable, "-c", CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def one_json_document(text: str) -> dict[str, Any]:
    """Parse stdout that must hold exactly one JSON document (and nothing else)."""
    doc, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"trailing output after the JSON document: {text[end:]!r}"
    assert isinstance(doc, dict)
    return doc


def assert_schema_valid(doc: dict[str, Any]) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=str)
    assert not errors, [e.message for e in errors]


def sslib_key(pub: PublicKey) -> SSlibKey:
    return SSlibKey(pub.key_id, "ed25519", "ed25519", {"public": pub.raw.hex()})


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    receipt = tmp_path / "thread-1.receipt.json"
    make_receipt().save(receipt)
    pub = tmp_path / "trusted.pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    attacker = tmp_path / "attacker.pub.pem"
    attacker.write_bytes(ATTACKER.public_pem())
    return {"receipt": receipt, "pub": pub, "attacker": attacker, "dir": tmp_path}


# -- schema -------------------------------------------------------------------------------


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(load_schema())


@pytest.mark.parametrize(
    "receipt",
    [
        make_receipt(),
        make_receipt(embed_key=False),
        make_receipt(signer=ATTACKER),
        make_receipt(make_statement(thread_id='\u00e9\U0001f600 "quoted"\n', store_namespaces=[])),
        make_receipt(
            make_statement(
                pre_tables={},
                pre_digest="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                post_tables={},
                residue=[],
                tombstone=False,
                issued_at="2026-11-29T12:00:00.123456Z",
            )
        ),
    ],
    ids=["default", "no-embedded-key", "attacker", "unicode-thread", "empty-thread"],
)
def test_every_receipt_validates_against_the_schema(receipt: Receipt) -> None:
    doc = json.loads(receipt.to_json())
    assert_schema_valid(doc)
    # The library's own reader agrees and round-trips the statement exactly.
    again = Receipt.from_json(receipt.to_json())
    assert again.statement == receipt.statement
    assert again.payload == receipt.payload == rfc8785.dumps(receipt.statement)
    assert again.signatures == receipt.signatures


# -- library API ----------------------------------------------------------------------------


def test_verify_receipt_api() -> None:
    r = make_receipt()
    for data in (r.to_json(), r, json.dumps(r.to_dsse()).encode()):
        v = verify_receipt(data, [TRUSTED.public_key])
        assert (v.receipt_id, v.thread_id, v.status, v.issued_at) == (
            RECEIPT_ID,
            THREAD_ID,
            "erased",
            ISSUED_AT,
        )
        assert v.key_id == TRUSTED.key_id
        assert v.pre_digest == r.pre_digest
        assert v.statement == make_statement()
    v = verify_receipt(r.to_json(), TrustStore([TrustedKey(TRUSTED.public_key, "prod-2026")]))
    assert v.key_name == "prod-2026"


def test_embedded_key_is_never_trusted_by_itself() -> None:
    forged = make_receipt(signer=ATTACKER)
    with pytest.raises(UntrustedKeyError) as exc:
        verify_receipt(forged.to_json(), [TRUSTED.public_key])
    assert exc.value.reason == "untrusted_key"
    with pytest.raises(UntrustedKeyError) as exc:
        verify_receipt(make_receipt().to_json(), [])
    assert exc.value.reason == "no_trusted_keys"
    # Verifying with the attacker's key does work: trust is the caller's decision alone.
    assert verify_receipt(forged.to_json(), [ATTACKER.public_key]).key_id == ATTACKER.key_id


def test_tampered_statement_fails_signature() -> None:
    doc = receipt_doc()
    set_path(doc, "statement.predicate.scope.thread_id", "thread-2")
    with pytest.raises(SignatureError) as exc:
        verify_receipt(dump(doc), [TRUSTED.public_key])
    assert exc.value.reason == "bad_signature"


def test_semantics_checked_only_after_signature() -> None:
    st = make_statement(
        post_tables={"checkpoints": {"rows": 0, "bytes": 0}, "writes": {"rows": 0, "bytes": 1}}
    )
    bad = Receipt.sign(st, TRUSTED)
    with pytest.raises(ReceiptSemanticsError) as exc:
        verify_receipt(bad.to_json(), [TRUSTED.public_key])
    assert exc.value.reason == "not_empty"
    # Same statement signed by an untrusted key: the trust failure is reported first.
    with pytest.raises(UntrustedKeyError):
        verify_receipt(Receipt.sign(st, ATTACKER).to_json(), [TRUSTED.public_key])


def test_multiple_signatures_one_trusted() -> None:
    r = make_receipt()
    extra = Receipt.sign(make_statement(), ATTACKER).signatures[0]
    for sigs in ((extra, *r.signatures), (*r.signatures, extra)):
        both = Receipt(r.statement, sigs, None)
        assert verify_receipt(both.to_json(), [TRUSTED.public_key]).key_id == TRUSTED.key_id
        assert_schema_valid(json.loads(both.to_json()))


def test_save_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    make_receipt().save(path)
    with pytest.raises(FileExistsError):
        make_receipt().save(path)
    make_receipt(embed_key=False).save(path, exist_ok=True)
    assert "public_key" not in json.loads(path.read_bytes())
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp files left


# -- CLI: verify ------------------------------------------------------------------------------


def test_cli_verify_ok(files: dict[str, Path]) -> None:
    proc = run_cli("verify", files["receipt"], "--key", files["pub"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK")
    assert "'thread-1'" in proc.stdout
    assert RECEIPT_ID in proc.stdout


def test_cli_verify_json(files: dict[str, Path]) -> None:
    proc = run_cli("verify", "--json", files["receipt"], "--key", files["pub"])
    assert proc.returncode == 0, proc.stderr
    doc = one_json_document(proc.stdout)
    assert doc["ok"] is True
    assert doc["exit_code"] == 0
    assert doc["counts"] == {"verified": 1, "invalid": 0, "unreadable": 0}
    (res,) = doc["results"]
    assert res["verified"] is True
    assert res["reason"] == "ok"
    assert res["thread_id"] == THREAD_ID
    assert res["receipt_id"] == RECEIPT_ID
    assert res["key_id"] == TRUSTED.key_id


def test_cli_verify_untrusted(files: dict[str, Path]) -> None:
    proc = run_cli("verify", "--json", files["receipt"], "--key", files["attacker"])
    assert proc.returncode == 1
    doc = one_json_document(proc.stdout)
    assert doc["ok"] is False
    assert doc["results"][0]["reason"] == "untrusted_key"
    proc = run_cli("verify", files["receipt"], "--key", files["attacker"])
    assert proc.returncode == 1
    assert proc.stdout.startswith("FAIL")
    assert "[untrusted_key]" in proc.stdout


def test_cli_verify_directory(tmp_path: Path, files: dict[str, Path]) -> None:
    d = tmp_path / "receipts"
    (d / "nested").mkdir(parents=True)
    ids = []
    for i in range(4):
        rid = f"00000000-0000-4000-8000-{i:012d}"
        ids.append(rid)
        r = make_receipt(make_statement(receipt_id=rid, thread_id=f"thread-{i}"))
        r.save(d / ("nested" if i == 3 else "") / f"r{i}.json")
    (d / "r0.dsse.json").write_text(json.dumps(make_receipt().to_dsse()))
    (d / "notes.txt").write_text("not a receipt; ignored")
    proc = run_cli("verify", "--json", d, "--key", files["pub"])
    assert proc.returncode == 0, proc.stdout
    doc = one_json_document(proc.stdout)
    assert doc["counts"] == {"verified": 5, "invalid": 0, "unreadable": 0}
    assert {r["receipt_id"] for r in doc["results"]} == {*ids, RECEIPT_ID}
    assert all(r["verified"] for r in doc["results"])
    # Human output, several files: one OK line each and a summary on stderr.
    proc = run_cli("verify", d, "--key", files["pub"])
    assert proc.returncode == 0
    assert proc.stdout.count("OK ") == 5
    assert "5 verified, 0 invalid, 0 unreadable" in proc.stderr
    # One bad file among good ones fails the run but keeps the other verdicts.
    doc_bad = receipt_doc()
    set_path(doc_bad, "statement.predicate.pre_state.leaves", 6)
    (d / "zz-bad.json").write_bytes(dump(doc_bad))
    proc = run_cli("verify", "--json", d, "--key", files["pub"])
    assert proc.returncode == 1
    doc = one_json_document(proc.stdout)
    assert doc["counts"] == {"verified": 5, "invalid": 1, "unreadable": 0}
    (bad,) = [r for r in doc["results"] if not r["verified"]]
    assert bad["file"].endswith("zz-bad.json")
    assert bad["reason"] == "bad_signature"
    proc = run_cli("verify", "--quiet", d, "--key", files["pub"])
    assert proc.returncode == 1
    assert proc.stdout.startswith("FAIL") and proc.stdout.count("\n") == 1


# -- CLI: export / DSSE interoperability -------------------------------------------------------


def _export_dsse(files: dict[str, Path]) -> dict[str, Any]:
    proc = run_cli("export", files["receipt"], "--format", "dsse")
    assert proc.returncode == 0, proc.stderr
    return one_json_document(proc.stdout)


def test_exported_dsse_verifies_with_securesystemslib(files: dict[str, Path]) -> None:
    dsse = _export_dsse(files)
    assert dsse["payloadType"] == DSSE_PAYLOAD_TYPE
    assert set(dsse) == {"payloadType", "payload", "signatures"}
    payload = base64.b64decode(dsse["payload"])
    assert payload == rfc8785.dumps(make_statement())
    key = sslib_key(TRUSTED.public_key)
    accepted = Envelope.from_dict(copy.deepcopy(dsse)).verify([key], 1)
    assert list(accepted) == [TRUSTED.key_id]
    # The envelope's statement is an in-toto Statement v1.
    statement = json.loads(payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"][0]["digest"]["sha256"] == make_receipt().pre_digest


def test_tampered_dsse_fails_securesystemslib(files: dict[str, Path]) -> None:
    dsse = _export_dsse(files)
    key = sslib_key(TRUSTED.public_key)
    statement = json.loads(base64.b64decode(dsse["payload"]))
    statement["predicate"]["scope"]["thread_id"] = "thread-2"
    tampered = dict(dsse, payload=base64.b64encode(rfc8785.dumps(statement)).decode())
    with pytest.raises(SslibVerificationError):
        Envelope.from_dict(copy.deepcopy(tampered)).verify([key], 1)
    retyped = dict(dsse, payloadType="application/json")
    with pytest.raises(SslibVerificationError):
        Envelope.from_dict(copy.deepcopy(retyped)).verify([key], 1)
    with pytest.raises(SslibVerificationError):
        Envelope.from_dict(copy.deepcopy(dsse)).verify([sslib_key(ATTACKER.public_key)], 1)
    # ... and our verifier agrees.
    with pytest.raises(SignatureError):
        verify_receipt(json.dumps(tampered).encode(), [TRUSTED.public_key])


def test_securesystemslib_signed_envelope_verifies_with_us() -> None:
    """The other direction: an envelope built by securesystemslib from our payload."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    private_key = load_pem_private_key(TRUSTED.private_pem(), password=None)
    signer = CryptoSigner(private_key, sslib_key(TRUSTED.public_key))
    env = Envelope(rfc8785.dumps(make_statement()), DSSE_PAYLOAD_TYPE, {})
    env.sign(signer)
    data = json.dumps(env.to_dict()).encode()
    assert verify_receipt(data, [TRUSTED.public_key]).statement == make_statement()


def test_exported_dsse_file_verifies_with_cli(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "thread-1.dsse.json"
    proc = run_cli("export", files["receipt"], "--format", "dsse", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert one_json_document(out.read_text()) == make_receipt().to_dsse()
    proc = run_cli("verify", "--json", out, "--key", files["pub"])
    assert proc.returncode == 0, proc.stdout
    assert one_json_document(proc.stdout)["results"][0]["reason"] == "ok"
    # export refuses to overwrite
    proc = run_cli("export", files["receipt"], "--out", out)
    assert proc.returncode == 3  # an output that exists: I/O error
    # exporting a DSSE envelope again is stable
    proc = run_cli("export", out, "--format", "dsse")
    assert proc.returncode == 0
    assert one_json_document(proc.stdout) == make_receipt().to_dsse()


def test_export_statement_is_canonical(files: dict[str, Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "export", str(files["receipt"]), "--format", "statement"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert proc.stdout == rfc8785.dumps(make_statement())


# -- CLI: keygen / show ------------------------------------------------------------------------


def test_cli_keygen(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    proc = run_cli("keygen", "--out", out)
    assert proc.returncode == 0, proc.stderr
    priv, pub = out / "receipt-signing.key", out / "receipt-signing.pub.pem"
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600
    signer = Signer.from_pem(priv.read_bytes())
    assert PublicKey.from_pem(pub.read_bytes()) == signer.public_key
    assert signer.key_id in proc.stdout
    assert b"PRIVATE" not in pub.read_bytes()
    before = (priv.read_bytes(), pub.read_bytes())
    proc = run_cli("keygen", "--out", out)
    assert proc.returncode == 3  # a key file that exists: I/O error
    assert "refusing to overwrite" in proc.stderr
    assert (priv.read_bytes(), pub.read_bytes()) == before
    # The generated key signs receipts that verify with the generated public key.
    receipt = tmp_path / "r.json"
    make_receipt(signer=signer).save(receipt)
    assert run_cli("verify", receipt, "--key", pub).returncode == 0


def test_cli_keygen_with_password(tmp_path: Path) -> None:
    env = dict(os.environ, RECEIPT_KEY_PASSWORD="s3cret")
    proc = run_cli(
        "keygen",
        "--out",
        tmp_path,
        "--name",
        "enc",
        "--password-env",
        "RECEIPT_KEY_PASSWORD",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    data = (tmp_path / "enc.key").read_bytes()
    assert b"ENCRYPTED" in data
    assert Signer.from_pem(data, password=b"s3cret").key_id in proc.stdout
    with pytest.raises(KeyFormatError):
        Signer.from_pem(data, password=b"wrong")
    proc = run_cli("keygen", "--out", tmp_path, "--name", "x", "--password-env", "NOPE_UNSET_VAR")
    assert proc.returncode == 2


def test_cli_show(files: dict[str, Path]) -> None:
    proc = run_cli("show", files["receipt"])
    assert proc.returncode == 0, proc.stderr
    assert "thread-1" in proc.stdout
    assert "NOT verified" in proc.stdout
    assert RECEIPT_ID in proc.stdout
    proc = run_cli("show", files["receipt"], "--json")
    assert proc.returncode == 0
    assert one_json_document(proc.stdout) == make_statement()
    proc = run_cli("show", files["dir"] / "missing.json")
    assert proc.returncode == 3
    bad = files["dir"] / "bad.json"
    bad.write_text("{")
    proc = run_cli("show", bad)
    assert proc.returncode == 1
    assert "not_json" in proc.stderr


# -- CLI: trust files and key rotation ---------------------------------------------------------


def test_cli_trust_file_rotation(tmp_path: Path) -> None:
    key_b = Signer.from_seed(b"\x02" * 32)
    trust = tmp_path / "trust.json"
    trust.write_text(
        json.dumps(
            {
                "trust_version": 1,
                "keys": [
                    {
                        "name": "key-a",
                        "pem": TRUSTED.public_pem().decode(),
                        "not_after": "2026-06-01T00:00:00Z",
                    },
                    {
                        "name": "key-b",
                        "ed25519": key_b.public_key.b64(),
                        "not_before": "2026-06-01T00:00:00Z",
                    },
                ],
            }
        )
    )
    old = tmp_path / "signed-by-a.json"
    make_receipt().save(old)  # issued 2026-11-29, after key A was retired
    new = tmp_path / "signed-by-b.json"
    make_receipt(signer=key_b).save(new)
    early = tmp_path / "signed-by-a-early.json"
    make_receipt(make_statement(issued_at="2026-05-31T23:59:59.999999Z")).save(early)
    too_early_b = tmp_path / "signed-by-b-early.json"
    make_receipt(make_statement(issued_at="2026-05-31T23:59:59Z"), signer=key_b).save(too_early_b)

    proc = run_cli("verify", "--json", old, "--trust", trust)
    assert proc.returncode == 1
    assert one_json_document(proc.stdout)["results"][0]["reason"] == "key_not_valid_at_time"

    proc = run_cli("verify", "--json", new, "--trust", trust)
    assert proc.returncode == 0, proc.stdout
    res = one_json_document(proc.stdout)["results"][0]
    assert (res["reason"], res["key_name"], res["key_id"]) == ("ok", "key-b", key_b.key_id)

    proc = run_cli("verify", "--json", early, "--trust", trust)
    assert proc.returncode == 0, proc.stdout
    assert one_json_document(proc.stdout)["results"][0]["key_name"] == "key-a"

    proc = run_cli("verify", "--json", too_early_b, "--trust", trust)
    assert proc.returncode == 1
    assert one_json_document(proc.stdout)["results"][0]["reason"] == "key_not_valid_at_time"

    # --key and --trust are mutually exclusive (issue 7): an unrestricted --key must not
    # silently override the trust file's windows.
    pub_a = tmp_path / "a.pub.pem"
    pub_a.write_bytes(TRUSTED.public_pem())
    assert run_cli("verify", old, "--trust", trust, "--key", pub_a).returncode == 2


def test_trusted_key_window_orders_fractional_seconds() -> None:
    tk = TrustedKey(
        TRUSTED.public_key, not_before="2026-01-01T00:00:00.5Z", not_after="2026-01-01T00:00:01Z"
    )
    assert not tk.valid_at("2026-01-01T00:00:00Z")
    assert not tk.valid_at("2026-01-01T00:00:00.499999Z")
    assert tk.valid_at("2026-01-01T00:00:00.5Z")
    assert tk.valid_at("2026-01-01T00:00:00.500000Z")
    assert tk.valid_at("2026-01-01T00:00:00.999999Z")
    assert not tk.valid_at("2026-01-01T00:00:01Z")


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"trust_version": 2, "keys": [{"ed25519": TRUSTED.public_key.b64()}]},
        {"trust_version": 1, "keys": []},
        {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64()}], "extra": 1},
        {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64(), "bogus": 1}]},
        {"trust_version": 1, "keys": [{"name": "no key"}]},
        {"trust_version": 1, "keys": [{"ed25519": "AAAA", "pem": "x"}]},
        {"trust_version": 1, "keys": [{"ed25519": "not base64"}]},
        {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64(), "not_after": 5}]},
        {"trust_version": 1, "keys": [{"pem": "-----BEGIN PUBLIC KEY-----\n"}]},
        [1],
    ],
)
def test_malformed_trust_files_are_key_format_errors(doc: Any) -> None:
    with pytest.raises(KeyFormatError):
        TrustStore.from_json(json.dumps(doc).encode())


def test_malformed_trust_file_bytes() -> None:
    for data in (b"", b"{", b'{"trust_version": 1, "trust_version": 1, "keys": []}', b"\xff"):
        with pytest.raises(KeyFormatError):
            TrustStore.from_json(data)


_TRUST_BYTES = json.dumps(
    {
        "trust_version": 1,
        "keys": [
            {
                "name": "a",
                "pem": TRUSTED.public_pem().decode(),
                "not_after": "2027-01-01T00:00:00Z",
            },
            {"ed25519": ATTACKER.public_key.b64(), "not_before": "2026-01-01T00:00:00.5Z"},
        ],
    },
    indent=1,
).encode()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_TRUST_BYTES) - 1), st.integers(0, 255))
def test_trust_file_mutations_raise_only_key_format_errors(pos: int, value: int) -> None:
    data = _TRUST_BYTES[:pos] + bytes([value]) + _TRUST_BYTES[pos + 1 :]
    try:
        store = TrustStore.from_json(data)
    except UnsupportedAlgorithm:
        return  # known src bug: see test_cli_key_with_unknown_algorithm_is_a_usage_error
    except KeyFormatError:
        return
    for tk in store:
        for t in ("2026-06-01T00:00:00Z", "2027-06-01T00:00:00.123Z"):
            assert tk.valid_at(t) in (True, False)


# -- CLI: exit codes --------------------------------------------------------------------------


def test_cli_usage_errors(files: dict[str, Path], tmp_path: Path) -> None:
    proc = run_cli("verify", files["receipt"])  # no key
    assert proc.returncode == 2
    assert "--key" in proc.stderr
    proc = run_cli("verify", "--key", files["pub"])  # no files
    assert proc.returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("verify", empty, "--key", files["pub"])  # a directory without receipts
    assert proc.returncode == 2
    assert "no receipt files" in proc.stderr
    proc = run_cli("verify", files["receipt"], "--key", files["pub"], "--no-such-flag")
    assert proc.returncode == 2
    proc = run_cli("verify", "--help")
    assert proc.returncode == 0
    assert "--trust" in proc.stdout


def test_cli_missing_receipt_file_exits_3(files: dict[str, Path]) -> None:
    proc = run_cli("verify", "--json", files["dir"] / "missing.json", "--key", files["pub"])
    assert proc.returncode == 3
    doc = one_json_document(proc.stdout)
    assert doc["results"][0]["reason"] == "unreadable"
    assert doc["counts"]["unreadable"] == 1
    # unreadable wins over invalid, and valid files are still reported
    bad = files["dir"] / "bad.json"
    bad.write_text("{}")
    proc = run_cli(
        "verify",
        "--json",
        files["receipt"],
        bad,
        files["dir"] / "missing.json",
        "--key",
        files["pub"],
    )
    assert proc.returncode == 3
    assert one_json_document(proc.stdout)["counts"] == {
        "verified": 1,
        "invalid": 1,
        "unreadable": 1,
    }


def test_cli_missing_key_file_exits_3(files: dict[str, Path]) -> None:
    proc = run_cli("verify", files["receipt"], "--key", files["dir"] / "missing.pem")
    assert proc.returncode == 3
    proc = run_cli("verify", files["receipt"], "--trust", files["dir"] / "missing-trust.json")
    assert proc.returncode == 3


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a pem",
        b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        TRUSTED.private_pem(),
        b"\xff" * 10,
    ],
    ids=["empty", "text", "bad-pem", "private-key", "binary"],
)
def test_cli_malformed_key_file_exits_2(files: dict[str, Path], content: bytes) -> None:
    bad = files["dir"] / "bad.pem"
    bad.write_bytes(content)
    proc = run_cli("verify", files["receipt"], "--key", bad)
    assert proc.returncode == 2
    assert "bad key" in proc.stderr


def test_cli_malformed_trust_file_exits_2(files: dict[str, Path]) -> None:
    trust = files["dir"] / "trust.json"
    trust.write_text('{"trust_version": 1, "keys": [{"ed25519": "AAAA"}]}')
    proc = run_cli("verify", files["receipt"], "--trust", trust)
    assert proc.returncode == 2


def test_cli_too_large_key_file_exits_2(files: dict[str, Path]) -> None:
    big = files["dir"] / "big.pem"
    big.write_bytes(b"A" * ((1 << 20) + 1))
    assert run_cli("verify", files["receipt"], "--key", big).returncode == 2


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["{receipt}", "--key={pub}"], 0),
        (["--key", "{pub}", "--json", "--", "{receipt}"], 0),
        (["{receipt}", "--key", "{pub}", "--key", "{attacker}"], 0),
        (["{receipt}", "--trust", "{trust}", "-q"], 0),
        (["{receipt}", "--key"], 2),
        (["{receipt}", "--key", "--json"], 2),
        (["{receipt}", "--trust", "{trust}", "--trust", "{trust}"], 2),
        (["{receipt}", "--key", "{pub}", "--bogus"], 2),
        (["{receipt}", "--key", "{pub}", "--json=yes"], 2),
        (["--key", "{pub}"], 2),
        (["--key", "{pub}", "--", "--json"], 3),  # after --, "--json" is a file name
        (["-h"], 0),
        (["--help", "--key"], 2),
    ],
)
def test_verify_argument_parsing(
    files: dict[str, Path], argv: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    trust = files["dir"] / "trust.json"
    trust.write_text(
        json.dumps({"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64()}]})
    )
    names = {k: str(v) for k, v in files.items()} | {"trust": str(trust)}
    assert verify_main([a.format(**names) for a in argv]) == code
    out, err = capsys.readouterr()
    if code == 2:
        assert err.startswith("receipt verify: error:")
    if argv == ["-h"]:
        assert "--trust" in out and "exit codes" in out
    if "-q" in argv:
        assert out == ""
    if "--json" in argv[:3] and code == 0:
        assert one_json_document(out)["ok"] is True


# A FIFO named *.json inside a directory must not block open() forever.
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_cli_verify_directory_with_fifo_does_not_hang(files: dict[str, Path]) -> None:
    d = files["dir"] / "with-fifo"
    d.mkdir()
    (d / "good.json").write_bytes(make_receipt().to_json())
    os.mkfifo(d / "pipe.json")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CLI, "verify", "--json", str(d), "--key", str(files["pub"])],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("receipt verify hung on a FIFO")
    assert proc.returncode in (0, 3)
    doc = one_json_document(proc.stdout)
    assert doc["counts"]["verified"] == 1


@pytest.mark.parametrize("how", ["--key", "--trust"])
def test_cli_key_with_unknown_algorithm_is_a_usage_error(files: dict[str, Path], how: str) -> None:
    path = files["dir"] / "odd.pem"
    path.write_bytes(UNKNOWN_OID_PUBLIC_PEM)
    if how == "--trust":
        path = files["dir"] / "trust.json"
        doc = {"trust_version": 1, "keys": [{"pem": UNKNOWN_OID_PUBLIC_PEM.decode()}]}
        path.write_text(json.dumps(doc))
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "verify", str(files["receipt"]), how, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2


# -- import hygiene ------------------------------------------------------------------------------


def test_verify_path_imports_no_langgraph_or_database_drivers() -> None:
    code = (
        "import sys, json\n"
        "import erasure_receipts.verify, erasure_receipts.cli\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout)
    banned = ("langgraph", "aiosqlite", "sqlite3", "_sqlite3", "psycopg", "typer", "jsonschema")
    offenders = [m for m in modules if m.split(".")[0].startswith(banned)]
    assert offenders == []


# -- validator vs schema, and past defects -------------------------------------------------------


def _schema_accepts(doc: dict[str, Any]) -> bool:
    return VALIDATOR.is_valid(doc)


def _validator_accepts(doc: dict[str, Any]) -> bool:
    try:
        validate_statement(doc["statement"])
    except MalformedReceiptError:
        return False
    return True


AGREEMENT_CASES: list[tuple[str, Any]] = [
    ("statement.predicate.receipt_id", "4B1E2C3D-5F60-4A7B-8C9D-0E1F2A3B4C5D"),
    ("statement.predicate.receipt_id", ""),
    ("statement.predicate.issued_at", "2026-11-29 12:00:00Z"),
    ("statement.predicate.issued_at", "2026-11-29T12:00:00.1234567Z"),
    ("statement.predicate.issued_at", "2026-11-29T12:00:00+00:00"),
    ("statement.predicate.scope.thread_id", ""),
    ("statement.predicate.scope.thread_id", "x" * 4097),
    ("statement.predicate.scope.thread_id", "x" * 4096),
    ("statement.predicate.scope.tombstone", 1),
    ("statement.predicate.scope.tombstone", None),
    ("statement.predicate.scope.store_namespaces", [[]]),
    ("statement.predicate.scope.store_namespaces", [[""]]),
    ("statement.predicate.scope.store_namespaces", [["x" * 1025]]),
    ("statement.predicate.scope.checkpoint_namespaces", ["all"]),
    ("statement.predicate.backend.store", None),
    ("statement.predicate.backend.store", "has space"),
    ("statement.predicate.backend.kind", "x" * 65),
    ("statement.predicate.backend.versions", {"bad key!": "1"}),
    ("statement.predicate.backend.versions", {"ok": ""}),
    ("statement.predicate.pre_state.leaves", -1),
    ("statement.predicate.pre_state.leaves", 2**53 - 1),
    ("statement.predicate.pre_state.leaves", 2**53),
    ("statement.predicate.pre_state.leaves", True),
    ("statement.predicate.pre_state.tables.checkpoints.rows", "3"),
    ("statement.predicate.pre_state.tables.checkpoints", {"rows": 3}),
    ("statement.predicate.pre_state.tables.checkpoints", {"rows": 3, "bytes": 1, "x": 1}),
    ("statement.predicate.pre_state.digest.sha256", "E" * 64),
    ("statement.predicate.pre_state.digest.sha256", "e" * 63),
    ("statement.predicate.merkle.algorithm", "sha256"),
    ("statement.predicate.methods", {"checkpoints": "del ete"}),
    ("statement.predicate.checks", []),
    ("statement.predicate.checks.0", {"name": "x", "result": "pass", "detail": ""}),
    ("statement.predicate.checks.0", {"name": "x", "result": "maybe"}),
    ("statement.predicate.residue", []),
    ("statement.predicate.residue.0.detail", {"n": -1}),
    ("statement.predicate.residue.0.detail", {"n": None, "b": False, "s": "x"}),
    ("statement.predicate.residue.0.detail", {"s": ""}),
    ("statement.predicate.residue.0.detail", {"l": [1]}),
    ("statement.predicate.out_of_scope", []),
    ("statement.predicate.generator.version", ""),
    ("statement.subject", []),
    ("statement.subject.0.name", ""),
    ("statement.predicate.status", "partial"),
]


@pytest.mark.parametrize(("path", "value"), AGREEMENT_CASES)
def test_validator_agrees_with_json_schema(path: str, value: Any) -> None:
    doc = set_path(receipt_doc(), path, value)
    assert _validator_accepts(doc) == _schema_accepts(doc)


def _schema_pattern(*path: str) -> str:
    node: Any = load_schema()
    for part in path:
        node = node[part]
    pattern = node["pattern"]
    assert pattern.startswith("^") and pattern.endswith("$")
    return str(pattern[1:-1])


# (where the validator checks a format, the schema's regex for it)
FORMAT_FIELDS = {
    "statement.predicate.pre_state.digest.sha256": _schema_pattern("$defs", "hex64"),
    "statement.predicate.backend.kind": _schema_pattern("$defs", "name"),
    "statement.predicate.receipt_id": _schema_pattern(
        "$defs", "predicate", "properties", "receipt_id"
    ),
    "statement.predicate.issued_at": _schema_pattern(
        "$defs", "predicate", "properties", "issued_at"
    ),
}
# Characters that matter to those formats, plus look-alikes that must be refused:
# Unicode digits (Arabic-Indic, fullwidth, superscript), lowercase t/z, whitespace.
FORMAT_ALPHABET = "0123456789abcdefABCDEF-:._TZtz+/ \n\u0663\uff12\u00b2g\u00e9"


@st.composite
def _format_candidates(draw: st.DrawFn) -> tuple[str, str]:
    path = draw(st.sampled_from(sorted(FORMAT_FIELDS)))
    valid = st.from_regex(FORMAT_FIELDS[path], fullmatch=True)
    text = draw(
        st.one_of(
            valid,
            st.text(FORMAT_ALPHABET, max_size=70),
            # near misses: one edit away from a valid value
            st.tuples(
                valid, st.integers(0, 80), st.sampled_from(FORMAT_ALPHABET), st.integers(0, 2)
            ).map(lambda t: _edit(*t)),
        )
    )
    return path, text


def _edit(text: str, pos: int, ch: str, how: int) -> str:
    pos = min(pos, len(text))
    if how == 0:
        return text[:pos] + ch + text[pos + 1 :]  # replace (or append at the end)
    if how == 1:
        return text[:pos] + ch + text[pos:]  # insert
    return text[:pos] + text[pos + 1 :]  # delete


@settings(max_examples=250, deadline=None)
@given(_format_candidates())
def test_format_checks_agree_with_schema_patterns(case: tuple[str, str]) -> None:
    """The validator's hand-written format checks accept exactly the schema's regexes
    (evaluated with ECMAScript semantics: ``$`` is the end of the string, digits are ASCII)."""
    path, text = case
    expected = bool(re.fullmatch(FORMAT_FIELDS[path], text)) and 1 <= len(text) <= 1024
    doc = set_path(receipt_doc(), path, text)
    assert _validator_accepts(doc) == expected, (path, text)


# validate_statement once tested JSON values for membership in frozensets, so an
# array/object status or result raised TypeError instead of a schema error.
@pytest.mark.parametrize(
    "path",
    [
        "statement.predicate.status",
        "statement.predicate.checks.0.result",
        "statement.predicate.residue.0.status",
    ],
)
def test_unhashable_enum_values_are_schema_errors(path: str) -> None:
    doc = set_path(receipt_doc(), path, [])
    assert not _schema_accepts(doc)
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(dump(doc), [TRUSTED.public_key])
    assert exc.value.reason == "schema"


# The issued_at pattern once used \d, which matches any Unicode digit; the schema
# (and trust-window comparison) needs ASCII [0-9].
def test_issued_at_must_use_ascii_digits() -> None:
    fullwidth = "\uff12\uff10\uff12\uff16-11-29T12:00:00Z"
    doc = set_path(receipt_doc(), "statement.predicate.issued_at", fullwidth)
    assert not _schema_accepts(doc)
    with pytest.raises(MalformedReceiptError) as exc:
        validate_statement(doc["statement"])
    assert exc.value.reason == "schema"


# Trust-file not_before/not_after were once not validated and were compared as
# text, so RFC 3339 offsets or lowercase t/z were silently misordered.
@pytest.mark.parametrize("not_after", ["2026-11-29T12:30:00+02:00", "2026-11-29t00:00:00z"])
def test_trust_file_times_are_validated_or_compared_as_instants(not_after: str) -> None:
    doc = {
        "trust_version": 1,
        "keys": [{"ed25519": TRUSTED.public_key.b64(), "not_after": not_after}],
    }
    try:
        store = TrustStore.from_json(json.dumps(doc).encode())
    except KeyFormatError:
        return
    with pytest.raises(UntrustedKeyError):
        verify_receipt(make_receipt().to_json(), store)


# A lone surrogate in a trust file's pem string once raised UnicodeEncodeError
# out of verify_main (traceback, exit 1).
def test_trust_file_pem_with_lone_surrogate_is_a_usage_error(files: dict[str, Path]) -> None:
    trust = files["dir"] / "trust.json"
    trust.write_text('{"trust_version": 1, "keys": [{"pem": "\\ud800"}]}')
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "verify", str(files["receipt"]), "--trust", str(trust)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2


# `receipt show` once indexed post['tables'][t] for every pre-state table and
# crashed with KeyError on a schema-valid receipt listing different tables.
def test_cli_show_handles_unverified_inconsistent_receipt(tmp_path: Path) -> None:
    st = make_statement(post_tables={"other": {"rows": 0, "bytes": 0}})
    path = tmp_path / "r.json"
    Receipt.sign(st, TRUSTED).save(path)
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "show", str(path)], capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0
    assert "NOT verified" in proc.stdout


# File names that are not valid UTF-8 were once written to stdout unescaped
# (UnicodeEncodeError under strict UTF-8 stdout; invalid UTF-8 in the --json document).
@pytest.mark.parametrize("as_json", [False, True])
def test_cli_verify_undecodable_file_name(tmp_path: Path, as_json: bool) -> None:
    d = tmp_path / "d"
    d.mkdir()
    try:
        with open(os.path.join(os.fsencode(d), b"bad\xff.json"), "wb") as fh:
            fh.write(make_receipt().to_json())
    except OSError:
        pytest.skip("file system does not allow non-UTF-8 file names")
    pub = tmp_path / "pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    args = [sys.executable, "-c", CLI, "verify", str(d), "--key", str(pub)]
    proc = subprocess.run(
        [*args, "--json"] if as_json else args, capture_output=True, timeout=60, env=env
    )
    assert b"Traceback" not in proc.stderr
    assert proc.returncode == 0
    proc.stdout.decode("utf-8")  # valid UTF-8 output
