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


def _golden(name: str) -> dict[str, Any]:
    return dict(json.loads((GOLDEN / "good" / name).read_bytes())["statement"])


def _verified_as_is(st: dict[str, Any]) -> Any:
    from erasure_receipts.verify import VerifiedReceipt

    p = st["predicate"]
    return VerifiedReceipt(receipt_id=p["receipt_id"], thread_id="t-1", status=p["status"],
                           issued_at=p["issued_at"], pre_digest=p["pre_state"]["digest"]["sha256"],
                           key_id=TRUSTED_ID, key_name="", statement=st, methods=p["methods"],
                           residue=[(r["action"], r["status"]) for r in p["residue"]],
                           request=p.get("request"))  # fmt: skip


TRUSTED_ID = Signer.from_seed(bytes(range(32))).key_id


def test_a_subject_with_swept_parts_names_them_not_one_transaction() -> None:
    """A subject erasure whose store is swept through its API and one of whose targets is
    in another database: only the atomic parts were in the transaction; the others are
    named, with the other database as the receipt names it."""
    from erasure_receipts.explain import explain

    st = _golden("subject.json")
    p = st["predicate"]
    p["methods"] = {"checkpoints": "atomic-transaction", "store": "sweep",
                    "target:tickets": "sweep"}  # fmt: skip
    p["targets"] = [{"name": "tickets", "type": "sql", "key": "subject", "method": "sweep",
                     "table": "tickets", "key_column": "user_id",
                     "database": "postgresql://crm:***@db:5432/crm"}]  # fmt: skip
    text = explain(_verified_as_is(st))
    assert "erased together in one transaction" not in text
    assert "Only the conversation rows (checkpoint tables) were erased together in one " in text
    assert "the long-term store items: swept through the store's own interface, outside" in text
    assert ("the target 'tickets' (table 'tickets' in the other database "
            "'postgresql://crm:***@db:5432/crm'): swept after the commit") in text  # fmt: skip
    assert "item by item through the store's own interface" in text  # the store, not a target
    how = text[text.index("How: ") :].split("\n", 1)[0]
    assert "[target:tickets]: measured inside the transaction and swept after the commit" in how
    assert "store's own interface" not in how.split("[target:tickets]")[1]
    check_facts(text, p)


def test_a_needles_search_says_what_it_searched() -> None:
    """``searched: thread``: the erased thread's rows, not the database."""
    from erasure_receipts.explain import explain

    st = _golden("history.json")
    text = explain(_verified_as_is(st))
    assert st["predicate"]["needles"]["searched"] == "thread"
    assert "A search of the" not in text
    assert ("in the stored rows of the erased thread(s), read after deleting and before the "
            "commit [searched: thread]: none found.") in text  # fmt: skip
    assert "not the database file's free space, its logs or backups, nor other databases" in text


def test_a_subject_deferral_with_a_request_is_told_as_a_decision() -> None:
    """A subject deferral with store namespaces and a request: nothing is called erased,
    its checks are told in words, its threads are listed."""
    from erasure_receipts.explain import explain

    st = _golden("deferral.json")
    p = st["predicate"]
    threads = [f"alice-{i}" for i in range(12)]
    p["scope"] = {"subject": "alice", "threads": threads, "discovery": None,
                  "checkpoint_namespaces": "all", "store_namespaces": [["users", "alice"]],
                  "tombstone": False}  # fmt: skip
    p["methods"] = {"checkpoints": "read-snapshot", "store": "read-snapshot"}
    p["deferral"] = {"of_kind": "subject", "basis": "open claim", "code": None,
                     "until": "2027-01-31T00:00:00Z"}  # fmt: skip
    p["request"] = {
        "id": "DSR-9",
        "basis": "gdpr-art17-1a",
        "requester": None,
        "received_at": "2026-11-20T12:00:00Z",
        "due": "2026-12-20T12:00:00Z",
    }
    text = explain(_verified_as_is(st))
    assert "The threads retained (12 threads): " + ", ".join(repr(t) for t in threads) in text
    assert "'users/alice' are retained with it" in text and "erased with it" not in text
    assert "decided 9 days later" in text and "erased 9 days" not in text
    assert "Due 2026-12-20 12:00:00 UTC: nothing was erased" in text and ": met" not in text
    assert "- scope_measured [" not in text and "- until_after_issued_at [" not in text
    assert "the end of the retention (until) is after the moment the decision was signed" in text
    assert "erasure began" not in text and "the erased rows" not in text
    assert "measured in one read snapshot; nothing deleted" in text
    assert "brings the data back; after a restore, repeat the erasure" not in text
    assert "nothing was erased: the retained rows are in the database and its backups" in text
    check_facts(text, p)


def test_a_shred_states_its_condition_with_the_receipts_retention() -> None:
    from erasure_receipts.explain import explain

    st = _golden("shred.json")
    text = explain(_verified_as_is(st))
    assert "can no longer be decrypted" not in text
    assert "unreadable only PROVIDED NO COPY OF THE KEY SURVIVES" in text
    assert "backup retention, as the receipt records it: P30D" in text
    st["predicate"]["scope"]["key_store"]["backup_retention"] = None
    text = explain(_verified_as_is(st))
    assert "the receipt does not state the key store's backup retention" in text
    assert "P30D" not in text
    check_facts(text, st["predicate"])
