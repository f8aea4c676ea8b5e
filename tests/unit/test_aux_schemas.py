"""The trust-file and `verify --json` schemas describe what the code accepts and prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from erasure_receipts.verify import TrustStore
from receipt_factory import ATTACKER, TRUSTED, make_receipt

SCHEMAS = Path(__file__).parents[2] / "schemas"
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def schema(name: str) -> jsonschema.Draft202012Validator:
    doc = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return jsonschema.Draft202012Validator(doc)


def test_trust_files_accepted_by_code_match_the_schema(tmp_path: Path) -> None:
    good = {
        "trust_version": 1,
        "keys": [
            {"name": "old", "ed25519": TRUSTED.public_key.b64(),
             "not_after": "2026-07-01T00:00:00Z"},
            {"pem": ATTACKER.public_pem().decode(), "not_before": "2026-07-01T00:00:00.5Z"},
        ],
    }  # fmt: skip
    schema("trust").validate(good)
    assert len(TrustStore.from_json(json.dumps(good).encode())) == 2
    bad = {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64(), "pem": "x"}]}
    assert not schema("trust").is_valid(bad)


def test_verify_json_output_matches_the_schema(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_bytes(make_receipt().to_json())
    bad.write_bytes(b"{")
    pub = tmp_path / "pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    v = schema("verify-result")
    for args, code in (
        ([str(good), "--key", str(pub)], 0),
        ([str(good), str(bad), str(tmp_path / "missing.json"), "--key", str(pub)], 3),
        ([str(good)], 2),  # no key: usage error, still one document
    ):
        res = subprocess.run([*CLI, "verify", *args, "--json"], capture_output=True, text=True)
        assert res.returncode == code
        v.validate(json.loads(res.stdout))


def test_the_schema_guard_is_active() -> None:
    from erasure_receipts import Receipt

    assert Receipt.sign.__func__.__name__ == "checked"  # type: ignore[attr-defined]
