"""``receipt verify --explain``: the same verification, in plain language. For every kind
(thread, history, subject, subject in privacy mode, namespace, with a request and with a
four-eyes approval) each fact the text states is checked against the receipt file read
directly: ids, times, counts per table, request, due-date outcome (computed here with
``datetime``), checks, residue steps, the out-of-scope notes, the signing key. A receipt
that fails is NOT VERIFIED with its reason, and none of its content is repeated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts.cli import verify_main
from erasure_receipts.signing import PublicKey, Signer
from explain_facts import check_facts, predicate

GOLDEN = Path(__file__).parents[1] / "golden"
PUB = GOLDEN / "keys" / "trusted.pub.pem"
GOOD = sorted(p.name for p in (GOLDEN / "good").glob("*.json"))


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = verify_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", GOOD)
def test_every_kind_states_the_facts_of_its_receipt(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--explain", GOLDEN / "good" / name, "--key", PUB)
    assert code == 0, out
    check_facts(out, predicate(GOLDEN / "good" / name))


def test_the_kinds_are_covered() -> None:
    kinds = {predicate(GOLDEN / "good" / n).get("kind", "thread") for n in GOOD}
    assert kinds == {"thread", "history", "subject", "namespace", "redaction", "deferral", "shred"}
    assert any("privacy" in predicate(GOLDEN / "good" / n)["scope"] for n in GOOD)
    assert any("request" in predicate(GOLDEN / "good" / n) for n in GOOD)


def test_late_request_and_approver(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The corpus's authorized subject receipt, verified with a trust file that names its
    approver: the approval is stated with the approver's name and key."""
    approver = Signer.from_seed(b"\x02" * 32)
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps({"trust_version": 1, "keys": [
        {"name": "receipts", "ed25519": PublicKey.from_pem(PUB.read_bytes()).b64()},
        {"name": "dpo", "ed25519": approver.public_key.b64(), "role": "approver"}]}))  # fmt: skip
    f = GOLDEN / "bad" / "auth_subject_no_approver_trusted.json"
    code, out, _ = run(capsys, "--explain", f, "--trust", trust)
    assert code == 0, out
    check_facts(out, predicate(f))
    assert "Approved (four eyes) by 'dpo'" in out and approver.key_id[:16] in out
    assert "(receipts)" in out  # the trust file's name of the signing key


def test_a_failed_receipt_is_not_verified_and_not_repeated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads((GOLDEN / "good" / "receipt-with-request.json").read_bytes())
    doc["statement"]["predicate"]["request"]["id"] = "DSR-FORGED-1"
    f = tmp_path / "tampered.json"
    f.write_text(json.dumps(doc))
    code, out, err = run(capsys, "--explain", f, GOLDEN / "good" / "thread.json", "--key", PUB)
    assert code == 1
    first, second = out.split("\n\n", 1)[0], out
    assert first.startswith(f"NOT VERIFIED ({f}): a signature naming a trusted key does not")
    assert "[bad_signature]" in first and "Nothing in this file can be relied on" in out
    assert "DSR-FORGED-1" not in out and "alice@example.com" not in out
    assert "VERIFIED (" in second.split("NOT VERIFIED", 1)[1]
    assert "1 verified, 1 invalid, 0 unreadable" in err
    code, out, _ = run(capsys, "--explain", tmp_path / "missing.json", "--key", PUB)
    assert code == 3 and out.startswith("NOT VERIFIED") and "[unreadable]" in out


def test_explain_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--explain", "--json", GOLDEN / "good" / "thread.json",
                         "--key", PUB)  # fmt: skip
    assert code == 2 and "mutually exclusive" in err
    code, out, _ = run(capsys, "--help")
    assert "--explain" in out
    code, out, _ = run(capsys, "--explain", "-q", GOLDEN / "good" / "thread.json", "--key", PUB)
    assert code == 0 and out == ""


def _verified(statement: dict[str, Any]) -> Any:
    from erasure_receipts.verify import VerifiedReceipt

    p = statement["predicate"]
    return VerifiedReceipt(receipt_id=p["receipt_id"], thread_id="t-1", status=p["status"],
                           issued_at=p["issued_at"], pre_digest="ab" * 32, key_id="cd" * 32,
                           key_name="receipts", statement=statement)  # fmt: skip


def test_a_decision_to_retain_says_nothing_was_erased() -> None:
    """A deferral (a kind verified by later versions) is told as what it is."""
    from erasure_receipts.explain import explain

    st = json.loads((GOLDEN / "good" / "thread.json").read_bytes())["statement"]
    p = st["predicate"]
    p.update(kind="deferral", status="retained", post_state=p["pre_state"],
             deferral={"of_kind": "thread", "basis": "AI Act Art. 19 logs", "code": "ai-act-19",
                       "until": "2027-06-01T00:00:00Z"})  # fmt: skip
    text = explain(_verified(st), source="d.json")
    assert "What is retained" in text and "What was erased" not in text
    assert "Nothing was erased" in text and "RETAIN the conversation thread 'thread-1'" in text
    assert "until 2027-06-01 00:00:00 UTC" in text and "'AI Act Art. 19 logs'" in text
    assert "(code ai-act-19)" in text and "The decision was signed at" in text
    assert "the state afterwards is empty" not in text


@pytest.mark.parametrize("kind", ["tokenization", "escrow"])
def test_an_unknown_kind_is_explained_generically(kind: str) -> None:
    from erasure_receipts.explain import explain

    st = {"predicate": {"kind": kind, "receipt_id": "4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d",
                        "issued_at": "2026-11-29T12:00:00Z", "status": "redacted",
                        "scope": {"thread_id": "t-1"}}}  # fmt: skip
    text = explain(_verified(st))
    assert f"Receipt of the kind '{kind}'" in text and "does not describe in detail" in text
    assert "'redacted'" in text and "2026-11-29 12:00:00 UTC" in text
