"""What the verifier takes and prints: ``verify_receipt``'s input types, ``--key`` /
``--trust``, residue and methods in the output, re-signed semantic violations and odd
documents (only library errors).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from erasure_receipts.canonical import canonicalize
from erasure_receipts.errors import Error, InputError, KeyFormatError, ReceiptSemanticsError
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE, Receipt
from erasure_receipts.signing import PublicKey, Signer, pae
from erasure_receipts.verify import TrustStore, verify_receipt
from receipt_factory import TRUSTED, dump, make_receipt, make_statement

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
TRUST = [TRUSTED.public_key]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def validator(name: str) -> jsonschema.Draft202012Validator:
    doc = json.loads((SCHEMAS / f"{name}.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(doc)
    return jsonschema.Draft202012Validator(doc)


def signed_file(statement: Any, signer: Signer = TRUSTED) -> bytes:
    """A receipt file whose (possibly invalid) statement carries a *valid* signature."""
    payload = canonicalize(statement)
    sig = signer.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    doc = {
        "media_type": "application/vnd.langgraph-erasure-receipt.v1+json",
        "statement": statement,
        "signatures": [{"keyid": signer.key_id, "sig": b64(sig)}],
    }
    return dump(doc)


def envelope(payload: bytes, sigs: list[dict[str, Any]] | None = None) -> bytes:
    if sigs is None:
        sig = TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload))
        sigs = [{"keyid": TRUSTED.key_id, "sig": b64(sig)}]
    env = {"payloadType": DSSE_PAYLOAD_TYPE, "payload": b64(payload), "signatures": sigs}
    return json.dumps(env).encode("utf-8")


def run_cli(
    *args: str | os.PathLike[str], stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *map(str, args)],
        input=None if stdin is None else stdin.decode("latin-1"),
        capture_output=True,
        text=True,
        encoding="latin-1",
        timeout=120,
    )


@pytest.fixture
def pub(tmp_path: Path) -> Path:
    path = tmp_path / "trusted.pub.pem"
    path.write_bytes(TRUSTED.public_pem())
    return path


def _trust_doc(**window: str) -> bytes:
    return json.dumps(
        {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64(), **window}]}
    ).encode()


# -- input types ---------------------------------------------------------------------------


def test_verify_receipt_accepts_paths_and_bytes_like(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    data = make_receipt().to_json()
    path.write_bytes(data)
    assert verify_receipt(path, TRUST).thread_id == "thread-1"
    assert verify_receipt(bytearray(data), TRUST).thread_id == "thread-1"
    assert verify_receipt(memoryview(data), TRUST).thread_id == "thread-1"
    with pytest.raises(InputError):
        verify_receipt(tmp_path / "missing.json", TRUST)
    with pytest.raises(InputError):
        verify_receipt(tmp_path, TRUST)  # a directory


def test_verify_receipt_refuses_str_clearly(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="str"):
        verify_receipt(str(tmp_path / "r.json"), TRUST)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify_receipt(make_receipt().to_json().decode(), TRUST)  # type: ignore[arg-type]
    for bad in (None, 1, {"statement": {}}):
        with pytest.raises(TypeError):
            verify_receipt(bad, TRUST)  # type: ignore[arg-type]


def test_verify_receipt_refuses_bad_trust_arguments() -> None:
    data = make_receipt().to_json()
    for bad in ("key.pem", [b"raw"], [None], 5):
        with pytest.raises(TypeError):
            verify_receipt(data, bad)  # type: ignore[arg-type]


def test_verify_receipt_takes_one_key_as_a_trust_store_of_one() -> None:
    data = make_receipt().to_json()
    assert verify_receipt(data, TRUSTED.public_key).key_id == TRUSTED.public_key.key_id
    with pytest.raises(Error):  # one key, the wrong one: untrusted, not a TypeError
        verify_receipt(data, Signer.generate().public_key)


def test_keys_from_str() -> None:
    pem = TRUSTED.public_pem()
    assert PublicKey.from_pem(pem.decode("ascii")) == PublicKey.from_pem(pem)
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem("not a key")
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem("-----BEGIN PUBLIC KEY-----\né\n-----END PUBLIC KEY-----")
    with pytest.raises(TypeError):
        PublicKey.from_pem(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PublicKey.from_raw("x" * 32)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PublicKey.from_base64(None)  # type: ignore[arg-type]
    signer = Signer.from_pem(TRUSTED.private_pem().decode("ascii"))
    assert signer.key_id == TRUSTED.key_id
    trust = json.dumps({"trust_version": 1, "keys": [{"pem": pem.decode()}]})
    assert len(TrustStore.from_json(trust)) == 1
    assert Receipt.from_json(make_receipt().to_json().decode()).thread_id == "thread-1"


# -- --key / --trust -----------------------------------------------------------------------


def test_key_and_trust_are_mutually_exclusive(tmp_path: Path, pub: Path) -> None:
    receipt = tmp_path / "r.json"
    receipt.write_bytes(make_receipt().to_json())
    trust = tmp_path / "trust.json"
    trust.write_bytes(_trust_doc(not_after="2026-01-01T00:00:00Z"))  # expired for the receipt
    proc = run_cli("verify", receipt, "--trust", trust, "--key", pub)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "--key" in proc.stderr and "--trust" in proc.stderr
    proc = run_cli("verify", "--json", receipt, "--key", pub, "--trust", trust)
    assert proc.returncode == 2
    validator("verify-result").validate(json.loads(proc.stdout))


def test_directory_expansion_skips_the_trust_and_key_files(tmp_path: Path) -> None:
    d = tmp_path / "receipts"
    d.mkdir()
    (d / "r.json").write_bytes(make_receipt().to_json())
    (d / "trust.json").write_bytes(_trust_doc())
    proc = run_cli("verify", "--json", d, "--trust", d / "trust.json")
    assert proc.returncode == 0, proc.stdout
    assert [Path(r["file"]).name for r in json.loads(proc.stdout)["results"]] == ["r.json"]
    # The same file named through another path (a symlink) is recognised too.
    link = tmp_path / "link-to-trust.json"
    link.symlink_to(d / "trust.json")
    proc = run_cli("verify", "--json", d, "--trust", link)
    assert proc.returncode == 0, proc.stdout
    assert [Path(r["file"]).name for r in json.loads(proc.stdout)["results"]] == ["r.json"]
    # A key file named *.json (PEM inside) in the directory.
    (d / "trust.json").unlink()
    (d / "key.json").write_bytes(TRUSTED.public_pem())
    proc = run_cli("verify", "--json", d, "--key", d / "key.json")
    assert proc.returncode == 0, proc.stdout
    assert [Path(r["file"]).name for r in json.loads(proc.stdout)["results"]] == ["r.json"]


# -- residue and methods in the output -----------------------------------------------------


def _partial_receipt() -> Receipt:
    residue = [
        {"action": "sqlite.secure_delete", "status": "applied", "detail": {"value": 1}},
        {"action": "sqlite.wal_checkpoint", "status": "partial", "detail": {"busy": 1}},
    ]
    methods = {"checkpoints": "atomic-transaction", "store": "sweep"}
    return make_receipt(make_statement(residue=residue, methods=methods))


def test_verified_receipt_carries_residue_and_methods() -> None:
    v = verify_receipt(_partial_receipt().to_json(), TRUST)
    assert v.methods == {"checkpoints": "atomic-transaction", "store": "sweep"}
    assert v.residue == (("sqlite.secure_delete", "applied"), ("sqlite.wal_checkpoint", "partial"))


def test_verify_output_shows_residue_and_methods(tmp_path: Path, pub: Path) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(_partial_receipt().to_json())
    proc = run_cli("verify", f, "--key", pub)
    assert proc.returncode == 0
    line = proc.stdout.splitlines()[0]
    assert "methods checkpoints=atomic-transaction, store=sweep" in line
    assert "residue sqlite.secure_delete=applied, sqlite.wal_checkpoint=partial" in line
    proc = run_cli("verify", "--json", f, "--key", pub)
    doc = json.loads(proc.stdout)
    validator("verify-result").validate(doc)
    (res,) = doc["results"]
    assert res["methods"] == {"checkpoints": "atomic-transaction", "store": "sweep"}
    assert res["residue"] == [
        {"action": "sqlite.secure_delete", "status": "applied"},
        {"action": "sqlite.wal_checkpoint", "status": "partial"},
    ]


# -- re-signed violations and odd documents------------------------------------------------


def test_resigned_semantic_violation_is_rejected_with_a_valid_signature() -> None:
    st = copy.deepcopy(make_statement())
    post = st["predicate"]["post_state"]
    post["tables"]["writes"] = {"rows": 0, "bytes": 7}
    with pytest.raises(ReceiptSemanticsError) as exc:
        verify_receipt(signed_file(st), TRUST)
    assert exc.value.reason == "not_empty"


@pytest.mark.parametrize(
    "data",
    [
        b'{"payloadType": 1, "payload": "", "signatures": []}',
        b'{"payloadType": [], "payload": "", "signatures": []}',
        b'{"payloadType": {}, "payload": "", "signatures": []}',
        b'{"media_type": [], "statement": {}, "signatures": []}',
        b'{"media_type": {}, "statement": {}, "signatures": []}',
        b"[" * 5000 + b"]" * 5000,
        b'{"a": ' * 5000 + b"1" + b"}" * 5000,
        b"1" * 5000,
    ],
)
def test_odd_documents_raise_only_library_errors(data: bytes) -> None:
    with pytest.raises(Error):
        verify_receipt(data, TRUST)
