"""Rejection reasons: the codes agree between the code, the schemas and RECEIPT_SPEC.md, every
reason the verify path raises is listed, and every `verify --json` output matches the
shipped schema."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import test_verify_inputs
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE
from erasure_receipts.signing import pae
from erasure_receipts.verify import REASONS
from receipt_factory import ATTACKER, TRUSTED, make_receipt, make_statement
from test_verify_inputs import (
    ROOT,
    SCHEMAS,
    _trust_doc,
    b64,
    envelope,
    run_cli,
    signed_file,
    validator,
)

pub = test_verify_inputs.pub  # the fixture, shared

GOLDEN = ROOT / "tests" / "golden"


# -- reason codes: code == schema == spec --------------------------------------------------


def _spec_reason_table() -> dict[str, tuple[str, int]]:
    text = (ROOT / "RECEIPT_SPEC.md").read_text("utf-8")
    section = text.split("### Reason codes", 1)[1]
    rows: dict[str, tuple[str, int]] = {}
    for line in section.splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        m = re.match(r"^\| `([a-z0-9_]+)` \| (.+?) \| (\d) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), int(m.group(3)))
    return rows


def test_reason_codes_agree_between_code_schema_and_spec() -> None:
    codes = [code for code, _exit, _meaning in REASONS]
    assert len(codes) == len(set(codes))
    schema = json.loads((SCHEMAS / "verify-result.schema.json").read_text("utf-8"))
    enum = schema["properties"]["results"]["items"]["properties"]["reason"]["enum"]
    assert enum == codes
    table = _spec_reason_table()
    assert list(table) == codes
    assert {c: e for c, (_m, e) in table.items()} == {c: e for c, e, _m in REASONS}


def test_every_reason_literal_in_the_verify_path_is_listed() -> None:
    listed = {code for code, _exit, _meaning in REASONS}
    src = ROOT / "src" / "erasure_receipts"
    found: set[str] = set()
    for name in ("canonical", "receipt", "signing", "verify", "cli"):
        text = (src / f"{name}.py").read_text("utf-8")
        found |= set(re.findall(r'reason="([a-z0-9_]+)"', text))
    from erasure_receipts import errors

    for cls in (
        errors.InputError,
        errors.MalformedReceiptError,
        errors.SignatureError,
        errors.UntrustedKeyError,
        errors.ReceiptSemanticsError,
    ):
        found.add(cls.reason)
    found.discard("malformed")  # the base class's default; every raise names a precise code
    assert found <= listed, found - listed


def _crafted(tmp_path: Path) -> list[Path]:
    out = []
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    cases: dict[str, bytes] = {
        "bom.json": b"\xef\xbb\xbf" + make_receipt().to_json(),
        "latin1.json": b'{"a": "\xe9"}',
        "surrogate.json": b'{"a": "\\ud800"}',
        "keyid_null.json": envelope(payload, [{"keyid": None, "sig": sig}]),
        "keyid_obj.json": envelope(payload, [{"keyid": {}, "sig": sig}]),
        "overpadded.json": envelope(payload, [{"keyid": TRUSTED.key_id, "sig": sig + "=="}]),
        "bad_time.json": signed_file(make_statement(issued_at="2025-02-31T25:61:61Z")),
        "untrusted.json": make_receipt(signer=ATTACKER).to_json(),
        "partial.json": make_receipt(
            make_statement(
                residue=[{"action": "sqlite.wal_checkpoint", "status": "partial", "detail": {}}]
            )
        ).to_json(),
        "array.json": b"[]",
        "deep.json": b"[" * 100000,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        out.append(tmp_path / name)
    os.mkfifo(tmp_path / "fifo.json")
    out += [tmp_path / "fifo.json", tmp_path / "missing.json"]
    return out


def test_every_verify_json_output_matches_the_shipped_schema(tmp_path: Path, pub: Path) -> None:
    v = validator("verify-result")
    bad = sorted(p for p in (GOLDEN / "bad").iterdir() if p.name != "EXPECTED.json")
    good = sorted((GOLDEN / "good").iterdir())
    crafted = _crafted(tmp_path)
    seen: set[str] = set()
    runs: list[list[str | Path]] = [
        [*bad, *good, *crafted, "--key", pub],
        [*bad, "--key", GOLDEN / "keys" / "trusted.pub.pem"],
    ]
    runs += [[p, "--key", pub] for p in [*bad, *crafted]]
    expired = tmp_path / "expired-trust.json"
    expired.write_bytes(_trust_doc(not_after="2026-01-01T00:00:00Z"))
    runs.append([good[0], "--trust", expired])
    runs.append([good[0]])  # usage error: still one schema-valid document
    for args in runs:
        proc = run_cli("verify", "--json", *args)
        assert "Traceback" not in proc.stderr
        doc = json.loads(proc.stdout)
        v.validate(doc)
        assert proc.returncode == doc["exit_code"]
        seen |= {r["reason"] for r in doc["results"]}
    assert {"not_utf8", "key_not_valid_at_time", "unreadable", "ok", "schema"} <= seen
    assert "internal_error" not in seen
