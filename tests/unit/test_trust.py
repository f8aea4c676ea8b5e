"""The trust module (``erasure_receipts.trust``): one home for ``TrustedKey``,
``TrustStore`` and trust files, still importable from ``verify`` and the package."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import erasure_receipts
from erasure_receipts import trust, verify
from erasure_receipts.errors import KeyFormatError
from erasure_receipts.signing import Signer
from erasure_receipts.trust import TrustedKey, TrustFile, TrustStore

A = Signer.from_seed(bytes(range(32)))
B = Signer.from_seed(b"\x02" * 32)


def test_old_import_paths_are_the_same_objects() -> None:
    from erasure_receipts import trustfile

    assert trustfile.TrustFile is trust.TrustFile
    assert trustfile.window_text is trust.window_text
    assert verify.TrustStore is trust.TrustStore is erasure_receipts.TrustStore
    assert verify.TrustedKey is trust.TrustedKey is erasure_receipts.TrustedKey
    assert verify.ROLES is trust.ROLES
    assert {"TrustStore", "TrustedKey"} <= set(verify.__all__)


def test_a_store_written_reads_back_the_same() -> None:
    store = TrustStore([
        TrustedKey(A.public_key, "old", not_after="2026-07-01T00:00:00Z"),
        TrustedKey(A.public_key, "new", not_before="2026-07-01T00:00:00.5Z"),
        TrustedKey(B.public_key, "approver", role="approver"),
    ])  # fmt: skip
    data = store.to_json()
    doc = json.loads(data)
    assert doc["trust_version"] == 1 and data.endswith(b"\n")
    assert doc["keys"][0] == {
        "name": "old", "ed25519": A.public_key.b64(), "not_after": "2026-07-01T00:00:00Z"
    }  # fmt: skip
    assert "role" not in doc["keys"][1] and doc["keys"][2]["role"] == "approver"
    again = TrustStore.from_json(data)
    assert [(t.key, t.name, t.not_before, t.not_after, t.role) for t in again] == [
        (t.key, t.name, t.not_before, t.not_after, t.role) for t in store
    ]
    assert again.to_json() == data


def test_a_store_and_a_trust_file_write_the_form_trust_add_writes(tmp_path: object) -> None:
    from pathlib import Path

    d = Path(str(tmp_path))
    (d / "a.pub.pem").write_bytes(A.public_key.pem())
    code = "from erasure_receipts.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "trust", "add", str(d / "a.pub.pem"), "--name", "é",
         "--file", str(d / "trust.json"), "--not-before", "2026-01-01T00:00:00Z"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    written = (d / "trust.json").read_bytes()
    entry = {"name": "é", "ed25519": A.public_key.b64(), "not_before": "2026-01-01T00:00:00Z"}
    assert written == TrustFile([entry]).to_bytes()
    assert written == TrustFile().add(A.public_key, "é", not_before=entry["not_before"]).to_bytes()
    assert TrustStore.from_json(written).to_json() == written


def test_a_trust_file_the_verifier_would_refuse_is_not_written(tmp_path: object) -> None:
    from pathlib import Path

    bad = TrustFile([{"name": "x", "ed25519": "not base64"}])
    with pytest.raises(KeyFormatError):
        bad.write(Path(str(tmp_path)) / "t.json")
    assert not (Path(str(tmp_path)) / "t.json").exists()
