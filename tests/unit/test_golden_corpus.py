"""The committed golden corpus: every bad receipt is rejected with its documented exit code
and reason, every good one verifies, and the generator reproduces the corpus exactly."""

from __future__ import annotations

import base64
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from erasure_receipts.cli import verify_main
from erasure_receipts.digest import units_root
from erasure_receipts.signing import PublicKey
from erasure_receipts.verify import TrustedKey, TrustStore, verify_receipt
from receipt_factory import load_schema

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
BAD = GOLDEN / "bad"
GOOD = GOLDEN / "good"
TRUSTED_PEM = GOLDEN / "keys" / "trusted.pub.pem"
GENERATOR = GOLDEN / "make_corpus.py"
CLI = "from erasure_receipts.cli import main; main()"
VALIDATOR = Draft202012Validator(load_schema())

EXPECTED: dict[str, dict[str, Any]] = json.loads((BAD / "EXPECTED.json").read_text("utf-8"))
BAD_FILES = sorted(EXPECTED)
GOOD_FILES = sorted(p.name for p in GOOD.iterdir())

# Reasons that mean "the receipt file does not match the schema": for receipt files that
# parse as plain JSON, the JSON schema must reject exactly these (and accept the rest).
SCHEMA_REASONS = {"schema", "integer_range", "unknown_type", "unknown_predicate", "unknown_version"}
PARSE_REASONS = {"not_json", "not_utf8", "too_large", "duplicate_key", "float"}


def one_json_document(text: str) -> dict[str, Any]:
    doc, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", "more than one JSON document on stdout"
    assert isinstance(doc, dict)
    return doc


def test_corpus_is_complete() -> None:
    on_disk = {p.name for p in BAD.iterdir()} - {"EXPECTED.json"}
    assert on_disk == set(EXPECTED), "EXPECTED.json and bad/ disagree; re-run make_corpus.py"
    assert len(EXPECTED) >= 35
    assert 2 <= len(GOOD_FILES) <= 24
    assert any("payloadType" in json.loads((GOOD / n).read_bytes()) for n in GOOD_FILES)
    for name, exp in EXPECTED.items():
        assert exp["exit_code"] == 1, name
        assert exp["reason"] not in ("ok", "internal_error"), name
    # Every rejection class the verifier has is represented.
    reasons = {e["reason"] for e in EXPECTED.values()}
    assert reasons >= {
        "bad_signature",
        "untrusted_key",
        "keyid_mismatch",
        "duplicate_key",
        "float",
        "integer_range",
        "not_json",
        "not_utf8",
        "too_large",
        "schema",
        "unknown_type",
        "unknown_predicate",
        "unknown_version",
        "not_empty",
        "subject_digest_mismatch",
        "subject_name_mismatch",
        "inconsistent",
        "check_failed",
        "out_of_scope_missing",
        "not_canonical",
        "units_mismatch",
        "needles_remain",
        "authorization_untrusted",
    }
    # Every receipt kind (RECEIPT_SPEC.md 9) has good receipts, privacy mode included.
    kinds = {n: _kind_of(json.loads((GOOD / n).read_bytes())) for n in GOOD_FILES}
    from erasure_receipts.receipt import KINDS

    assert set(kinds.values()) == set(KINDS)
    assert "subject-privacy.json" in kinds and "subject-with-request.json" in kinds


def test_bad_corpus_one_process() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CLI,
            "verify",
            "--json",
            "--key",
            str(TRUSTED_PEM),
            *(str(BAD / n) for n in BAD_FILES),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 1
    doc = one_json_document(proc.stdout)
    assert doc["ok"] is False
    assert doc["exit_code"] == 1
    assert doc["counts"] == {"verified": 0, "invalid": len(BAD_FILES), "unreadable": 0}
    got = {Path(r["file"]).name: r for r in doc["results"]}
    assert sorted(got) == BAD_FILES
    mismatches = {
        name: (EXPECTED[name]["reason"], r["reason"], r["message"])
        for name, r in got.items()
        if r["verified"] or r["reason"] != EXPECTED[name]["reason"]
    }
    assert mismatches == {}


@pytest.mark.parametrize("name", BAD_FILES)
def test_bad_receipt(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    exp = EXPECTED[name]
    path = str(BAD / name)
    code = verify_main([path, "--json", "--key", str(TRUSTED_PEM)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == exp["exit_code"]
    doc = one_json_document(out)
    (res,) = doc["results"]
    assert res["verified"] is False
    assert res["reason"] == exp["reason"], res["message"]
    assert res["message"]
    # Human-readable mode: same exit code, one FAIL line naming the reason.
    code = verify_main([path, "--key", str(TRUSTED_PEM)])
    out, err = capsys.readouterr()
    assert code == exp["exit_code"]
    assert out.startswith(f"FAIL  {path}: [{exp['reason']}]")
    assert out.count("\n") == 1
    assert "Traceback" not in out + err


def test_good_corpus() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "verify", "--json", "--key", str(TRUSTED_PEM), str(GOOD)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout
    doc = one_json_document(proc.stdout)
    assert doc["counts"]["verified"] == len(GOOD_FILES)
    assert {Path(r["file"]).name for r in doc["results"]} == set(GOOD_FILES)
    assert all(r["verified"] and r["reason"] == "ok" for r in doc["results"])
    # All good thread receipts make the same claim; the other kinds each their own.
    claims = {(r["receipt_id"], r["pre_digest"], r["key_id"]) for r in doc["results"]}
    thread = [r for r in doc["results"] if Path(r["file"]).name.startswith("receipt")]
    assert len(thread) == 4
    assert len({(r["receipt_id"], r["pre_digest"], r["key_id"]) for r in thread}) == 1
    assert len(claims) == len(GOOD_FILES) - len(thread) + 1


def _kind_of(doc: dict[str, Any]) -> str:
    if "payloadType" in doc:
        doc = {"statement": json.loads(base64.b64decode(doc["payload"]))}
    return str(doc["statement"]["predicate"].get("kind", "thread"))


def test_kind_receipts_say_what_they_erased() -> None:
    """The good receipts of each kind verify with the facts their kind adds: the kept
    state of a history receipt, the units bound under a subject receipt's root, the
    commitments of a privacy-mode receipt, the request context."""
    key = [PublicKey.from_pem(TRUSTED_PEM.read_bytes())]
    v = verify_receipt((GOOD / "history.json").read_bytes(), key)
    p = v.statement["predicate"]
    assert (p["kind"], v.thread_id, p["scope"]["tombstone"]) == ("history", "thread-7", False)
    assert p["kept_state"]["leaves"] == 2 and p["needles"]["searched"] == "thread"
    assert v.pre_digest != p["kept_state"]["digest"]["sha256"]
    v = verify_receipt((GOOD / "subject.json").read_bytes(), key)
    p = v.statement["predicate"]
    assert v.thread_id == "alice" and p["scope"]["discovery"] == {"metadata_key": "user_id"}
    assert [u["name"] for u in p["units"]] == ["store", "thread:alice-chat-1",
                                               "thread:alice-chat-2"]  # fmt: skip
    assert (
        v.pre_digest
        == units_root(
            (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in p["units"]
        ).hex()
    )
    assert p["needles"]["searched"] == "database" and p["needles"]["salt"] is not None
    data = (GOOD / "subject-privacy.json").read_bytes()
    v = verify_receipt(data, key)
    p = v.statement["predicate"]
    assert v.thread_id.startswith("hmac-sha256:") and p["needles"]["salt"] is None
    for clear in (b"alice", b"users", b"/var/lib"):
        assert clear not in data  # no id in clear anywhere in the file
    v = verify_receipt((GOOD / "subject-with-request.json").read_bytes(), key)
    assert v.request is not None and v.request["id"] == "DSR-2026-0042"
    assert v.sla_seconds == 2428200 and v.approver is None


def test_subject_authorization_verifies_with_an_approver_trust_file() -> None:
    """Like the other auth_* cases, the authorized subject receipt is untrusted with
    --key only and verifies with a trust file naming the corpus approver."""
    from erasure_receipts.signing import Signer

    approver = Signer.from_seed(b"\x02" * 32)  # make_corpus.APPROVER
    trust = TrustStore(
        [
            TrustedKey(PublicKey.from_pem(TRUSTED_PEM.read_bytes()), name="receipts"),
            TrustedKey(approver.public_key, name="dpo", role="approver"),
        ]
    )
    v = verify_receipt((BAD / "auth_subject_no_approver_trusted.json").read_bytes(), trust)
    assert (v.thread_id, v.approver, v.sla_seconds) == ("alice", "dpo", 2428200)
    auth_scope = v.statement["predicate"]["authorization"]["statement"]["scope"]
    assert auth_scope["threads"] == ["alice-chat-1"]  # discovery found the other thread
    assert v.statement["predicate"]["scope"]["threads"] == ["alice-chat-1", "alice-chat-2"]


def _plain_json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _schema_cases() -> list[tuple[str, str]]:
    """(file, expected reason) for every corpus file that is a receipt file in plain JSON."""
    cases = [(f"bad/{n}", EXPECTED[n]["reason"]) for n in BAD_FILES]
    cases += [(f"good/{n}", "ok") for n in GOOD_FILES]
    out = []
    for rel, reason in cases:
        if reason in PARSE_REASONS:
            continue  # not strict JSON: the schema does not apply
        doc = _plain_json((GOLDEN / rel).read_bytes())
        if isinstance(doc, dict) and "payloadType" not in doc:  # DSSE has no schema here
            out.append((rel, reason))
    return out


@pytest.mark.parametrize(("rel", "reason"), _schema_cases())
def test_json_schema_agrees_with_verifier(rel: str, reason: str) -> None:
    """For receipt files, the published JSON schema rejects exactly the schema failures."""
    doc = json.loads((GOLDEN / rel).read_bytes())
    assert VALIDATOR.is_valid(doc) == (reason not in SCHEMA_REASONS)


def test_generator_is_reproducible(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(GENERATOR), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for sub in ("bad", "good", "keys"):
        committed = {p.name: p.read_bytes() for p in (GOLDEN / sub).iterdir()}
        regenerated = {p.name: p.read_bytes() for p in (tmp_path / sub).iterdir()}
        assert sorted(regenerated) == sorted(committed), f"{sub}/: file set drifted"
        drifted = [n for n in committed if committed[n] != regenerated[n]]
        assert drifted == [], f"re-run tests/golden/make_corpus.py: {sub}/ drifted"


def _spec_rule_table() -> list[tuple[set[str], list[str]]]:
    """RECEIPT_SPEC.md 6.1: per rule, its reason codes and its golden bad cases."""
    text = (GOLDEN.parent.parent / "RECEIPT_SPEC.md").read_text("utf-8")
    section = text.split("### 6.1 Statement rules", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("rule", "---"):
            continue
        codes = set(re.findall(r"`([a-z_*]+)`", cells[2]))
        cases = re.findall(r"`([a-z0-9_*]+)`", cells[3])
        rows.append((codes, cases))
    return rows


def test_every_statement_rule_has_a_golden_bad_case() -> None:
    """Each MUST of the spec's rule table names a golden bad case that fails with its
    reason, and every rule_* case is listed there."""
    rows = _spec_rule_table()
    assert len(rows) >= 25
    named: set[str] = set()
    for codes, cases in rows:
        assert cases, codes
        for case in cases:
            matches = [n for n in EXPECTED if fnmatch.fnmatch(n, f"{case}.json")]
            assert matches, f"{case} is not a golden bad case"
            for n in matches:
                reason = EXPECTED[n]["reason"]
                assert reason in codes or any(fnmatch.fnmatch(reason, c) for c in codes), n
                named.add(n)
    assert {n for n in EXPECTED if n.startswith("rule_")} <= named
