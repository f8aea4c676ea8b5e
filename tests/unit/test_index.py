"""`receipt index` (issue 10): the dashboard feed. Every record validates against
schemas/index-record.schema.json, records come only from verified receipts (a tampered,
forged or malformed receipt is listed as rejected, never as a record), files,
directories and logs mix, CSV and NDJSON carry the same records, and --jobs changes
nothing but the speed. Every receipt kind (thread, history, subject, privacy mode,
request context) becomes a record with its kind's facts; tampered or re-signed broken
receipts of every kind never do."""

from __future__ import annotations

import csv
import io
import json
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner, Result

from erasure_receipts.app import app
from erasure_receipts.index import FIELDS, index_record
from erasure_receipts.log import ReceiptLog
from erasure_receipts.signing import Signer
from erasure_receipts.verify import verify_receipt
from receipt_factory import (
    ATTACKER,
    TRUSTED,
    dump,
    make_receipt,
    make_statement,
    receipt_doc,
    set_path,
)

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "schemas" / "index-record.schema.json").read_text("utf-8")
)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def rid(i: int) -> str:
    return str(uuid.UUID(int=i, version=4))


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """Good receipts (one with a store and a partial WAL checkpoint), a tampered copy
    of a good one, one signed by an untrusted key, one that is not JSON."""
    d = tmp_path / "archive"
    d.mkdir()
    good = make_receipt(make_statement(receipt_id=rid(1)))
    (d / "a-good.json").write_bytes(good.to_json())
    residue = [
        {"action": "sqlite.secure_delete", "status": "applied", "detail": {"value": 1}},
        {"action": "sqlite.wal_checkpoint", "status": "partial", "detail": {"busy": 1}},
    ]
    store = make_statement(
        receipt_id=rid(2),
        pre_tables={"checkpoints": {"rows": 3, "bytes": 300}, "store": {"rows": 2, "bytes": 70},
                    "writes": {"rows": 0, "bytes": 0}},
        post_tables={"checkpoints": {"rows": 0, "bytes": 0}, "store": {"rows": 0, "bytes": 0},
                     "writes": {"rows": 0, "bytes": 0}},
        methods={"checkpoints": "atomic-transaction", "store": "sweep"},
        residue=residue,
    )  # fmt: skip
    (d / "b-store.json").write_bytes(make_receipt(store).to_json())
    doc = receipt_doc(good)
    doc["statement"]["predicate"]["pre_state"]["tables"]["checkpoints"]["rows"] = 2
    doc["statement"]["predicate"]["pre_state"]["leaves"] = 4
    (d / "c-tampered.json").write_bytes(dump(doc))
    (d / "d-forged.json").write_bytes(
        make_receipt(make_statement(receipt_id=rid(4)), ATTACKER).to_json()
    )
    (d / "e-garbage.json").write_bytes(b"not json")
    return d


def test_records_validate_and_tampered_receipts_never_appear(
    archive: Path, pub_pem: Path, tmp_path: Path
) -> None:
    rejected = tmp_path / "rejected.ndjson"
    res = cli("index", archive, "--key", pub_pem, "--rejected", rejected, "--jobs", "1")
    assert res.exit_code == 1, res.stderr
    records = ndjson(res.stdout)
    for r in records:
        VALIDATOR.validate(r)
        assert list(r) == list(FIELDS)
    assert [r["receipt_id"] for r in records] == [rid(1), rid(2)]
    assert all(r["source"].endswith(("a-good.json", "b-store.json")) for r in records)
    good, store = records
    assert (good["kind"], good["thread_id"], good["rows"], good["bytes"]) == ("thread", "thread-1",
                                                                              5, 380)  # fmt: skip
    assert (store["rows_store"], store["bytes_store"], store["method_store"]) == (2, 70, "sweep")
    assert store["rows_checkpoints"] + store["rows_store"] == store["rows"] == 5
    assert store["residue"] == "sqlite.secure_delete=applied;sqlite.wal_checkpoint=partial"
    assert store["residue_worst"] == "partial" and good["log_index"] is None
    rejects = ndjson(rejected.read_text())
    assert [(Path(r["source"]).name, r["reason"]) for r in rejects] == [
        ("c-tampered.json", "bad_signature"),
        ("d-forged.json", "untrusted_key"),
        ("e-garbage.json", "not_json"),
    ]
    assert res.stderr.count("REJECTED") == 3 and "2 indexed, 3 rejected" in res.stderr
    # the tampered receipt's (unverified) content is nowhere in the feed
    assert '"rows": 2' not in res.stdout and rid(1) in res.stdout


def test_csv_carries_the_same_records(archive: Path, pub_pem: Path) -> None:
    nd = ndjson(cli("index", archive, "--key", pub_pem).stdout)
    res = cli("index", archive, "--key", pub_pem, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.stdout.splitlines()[0] == ",".join(FIELDS)
    assert len(rows) == len(nd) == 2
    for row, rec in zip(rows, nd, strict=True):
        for k, v in rec.items():
            want = "" if v is None else ("true" if v else "false") if type(v) is bool else str(v)
            assert row[k] == want, k


def test_logs_and_jobs(tmp_path: Path, pub_pem: Path) -> None:
    rs = [make_receipt(make_statement(receipt_id=rid(100 + i))) for i in range(300)]
    log = ReceiptLog(tmp_path / "log", signer=TRUSTED)
    log.append_many(rs[:280])
    d = tmp_path / "files"
    d.mkdir()
    for r in rs[280:]:
        (d / f"{r.receipt_id}.json").write_bytes(r.to_json())
    one = cli("index", tmp_path / "log", d, "--key", pub_pem, "--jobs", "1")
    two = cli("index", tmp_path / "log", d, "--key", pub_pem, "--jobs", "2")
    assert one.exit_code == two.exit_code == 0
    assert one.stdout == two.stdout and one.stderr == two.stderr
    records = ndjson(one.stdout)
    assert len(records) == 300
    assert [r["log_index"] for r in records[:280]] == list(range(280))
    assert records[5]["source"].endswith("log#5") and records[290]["log_index"] is None
    for r in records[::37]:
        VALIDATOR.validate(r)


def test_usage_and_io_errors(tmp_path: Path, pub_pem: Path) -> None:
    assert cli("index", tmp_path, "--key", pub_pem).exit_code == 2  # nothing to index
    assert cli("index", tmp_path / "missing.json", "--key", pub_pem).exit_code == 3
    assert cli("index", tmp_path).exit_code == 2  # no key


def test_index_record_uses_only_the_verified_statement() -> None:
    r = make_receipt(make_statement(receipt_id=rid(7)))
    v = verify_receipt(r.to_json(), [TRUSTED.public_key])
    rec = index_record(v, source="x", log_index=3)
    VALIDATOR.validate(rec)
    assert rec["key_id"] == TRUSTED.key_id and rec["log_index"] == 3
    assert rec["pre_digest"] == v.pre_digest and rec["subject_name"] == "langgraph-thread:thread-1"


# -- receipt kinds (RECEIPT_SPEC.md 9): the golden corpus's good receipts of every kind ----

GOLDEN = Path(__file__).parents[1] / "golden"
KIND_FILES = ("history.json", "subject.json", "subject-privacy.json",
              "subject-with-request.json")  # fmt: skip


def _by_file(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {Path(r["source"]).name: r for r in records}


def test_records_of_every_kind_validate_and_carry_their_facts() -> None:
    res = cli("index", GOLDEN / "good", "--key", GOLDEN / "keys" / "trusted.pub.pem")
    assert res.exit_code == 0, res.stderr
    recs = _by_file(ndjson(res.stdout))
    assert set(KIND_FILES) <= set(recs)
    for r in recs.values():
        VALIDATOR.validate(r)
        assert list(r) == list(FIELDS)
    thread = recs["receipt.json"]
    assert (thread["kind"], thread["scope_id"], thread["threads"], thread["kept_leaves"]) == (
        "thread", "thread-1", None, None)  # fmt: skip
    assert (thread["needles_checked"], thread["needles_searched"]) == (False, None)
    assert thread["privacy"] is False and thread["request_id"] is None
    history = recs["history.json"]
    assert (history["kind"], history["scope_id"], history["thread_id"]) == (
        "history", "thread-7", "thread-7")  # fmt: skip
    assert (history["kept_leaves"], history["rows"], history["threads"]) == (2, 3, None)
    assert (history["needles_checked"], history["needles_searched"]) == (True, "thread")
    assert history["tombstone"] is False
    subject = recs["subject.json"]
    assert (subject["kind"], subject["scope_id"], subject["subject"], subject["thread_id"]) == (
        "subject", "alice", "alice", None)  # fmt: skip
    assert (subject["threads"], subject["kept_leaves"], subject["rows"]) == (2, None, 6)
    assert (subject["rows_store"], subject["needles_searched"]) == (2, "database")
    private = recs["subject-privacy.json"]
    assert private["privacy"] is True and private["threads"] == 2
    assert private["scope_id"] == private["subject"]
    assert private["scope_id"].startswith("hmac-sha256:")
    assert private["subject_name"] == f"langgraph-subject:{private['scope_id']}"
    assert "alice" not in json.dumps(private)  # no id in clear in the feed either
    req = recs["subject-with-request.json"]
    assert (req["request_id"], req["request_basis"], req["sla_seconds"]) == (
        "DSR-2026-0042", "gdpr-art17-1b", 2428200)  # fmt: skip
    assert req["approver"] is None  # no authorization
    assert "alice@example.com" not in res.stdout  # the requester is never a column
    # CSV: the same columns, the new ones included
    csv_res = cli("index", GOLDEN / "good", "--key", GOLDEN / "keys" / "trusted.pub.pem",
                  "--format", "csv")  # fmt: skip
    rows = {Path(r["source"]).name: r for r in csv.DictReader(io.StringIO(csv_res.stdout))}
    assert rows["history.json"]["kept_leaves"] == "2"
    assert rows["subject.json"]["threads"] == "2" and rows["receipt.json"]["threads"] == ""
    assert rows["subject-with-request.json"]["sla_seconds"] == "2428200"
    assert rows["receipt.json"]["needles_checked"] == "false"


def test_approver_is_the_trust_files_name(tmp_path: Path) -> None:
    approver = Signer.from_seed(b"\x02" * 32)  # make_corpus.APPROVER
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps({"trust_version": 1, "keys": [
        {"name": "ops", "ed25519": TRUSTED.public_key.b64()},
        {"name": "dpo", "ed25519": approver.public_key.b64(), "role": "approver"},
    ]}))  # fmt: skip
    authorized = GOLDEN / "bad" / "auth_subject_no_approver_trusted.json"
    res = cli("index", authorized, GOLDEN / "good" / "history.json", "--trust", trust)
    assert res.exit_code == 0, res.stderr
    auth, history = ndjson(res.stdout)
    for r in (auth, history):
        VALIDATOR.validate(r)
    assert (auth["kind"], auth["scope_id"], auth["threads"]) == ("subject", "alice", 2)
    assert (auth["request_id"], auth["approver"], auth["sla_seconds"], auth["key_name"]) == (
        "DSR-2026-0042", "dpo", 2428200, "ops")  # fmt: skip
    assert history["approver"] is None and history["key_name"] == "ops"
    # With --key no approver is trusted: the receipt is rejected, never a record.
    res = cli("index", authorized, "--key", GOLDEN / "keys" / "trusted.pub.pem")
    assert res.exit_code == 1 and res.stdout == ""
    assert "[authorization_untrusted]" in res.stderr


def _tampered_kind_receipts(d: Path) -> dict[str, str]:
    """Each good receipt of each kind changed after signing: file name -> reason."""
    changes = {
        "history.json": ("statement.predicate.kept_state.leaves", 1),
        "subject.json": ("statement.predicate.scope.threads", ["alice-chat-1"]),
        "subject-privacy.json": ("statement.predicate.units.1.leaves", 9),
        "subject-with-request.json": ("statement.predicate.request.basis", "user-deletion"),
        "receipt.json": ("statement.predicate.scope.thread_id", "thread-2"),
    }
    out = {}
    for name, (path, value) in changes.items():
        doc = json.loads((GOLDEN / "good" / name).read_bytes())
        (d / f"tampered-{name}").write_bytes(dump(set_path(doc, path, value)))
        out[f"tampered-{name}"] = "bad_signature"
    return out


def test_tampered_and_resigned_receipts_of_every_kind_never_appear(tmp_path: Path) -> None:
    d = tmp_path / "kinds"
    d.mkdir()
    want = _tampered_kind_receipts(d)
    expected = json.loads((GOLDEN / "bad" / "EXPECTED.json").read_text("utf-8"))
    for name, exp in expected.items():
        if name.startswith(("kind_", "auth_subject")):  # resigned: valid signature
            (d / name).write_bytes((GOLDEN / "bad" / name).read_bytes())
            want[name] = exp["reason"]
    assert {"units_mismatch", "needles_remain", "inconsistent", "schema",
            "subject_name_mismatch", "bad_signature"} <= set(want.values())  # fmt: skip
    rejected = tmp_path / "rejected.ndjson"
    res = cli("index", d, "--key", GOLDEN / "keys" / "trusted.pub.pem", "--rejected", rejected)
    assert res.exit_code == 1
    assert res.stdout == ""  # not one record
    got = {Path(r["source"]).name: r["reason"] for r in ndjson(rejected.read_text())}
    assert got == want
    assert f"0 indexed, {len(want)} rejected" in res.stderr


def test_request_times_columns() -> None:
    """``request_received_at`` and ``request_due_at`` come from the verified request
    (null without a request, or where the request has no such time)."""
    i = FIELDS.index("request_received_at")
    assert FIELDS[i : i + 2] == ("request_received_at", "request_due_at")
    res = cli("index", GOLDEN / "good", "--key", GOLDEN / "keys" / "trusted.pub.pem")
    recs = _by_file(ndjson(res.stdout))
    req = recs["subject-with-request.json"]
    p = json.loads((GOLDEN / "good" / "subject-with-request.json").read_bytes())["statement"][
        "predicate"
    ]
    assert (req["request_received_at"], req["request_due_at"]) == (
        p["request"]["received_at"], p["request"]["due"])  # fmt: skip
    assert (req["request_received_at"], req["request_due_at"]) == (
        "2026-11-01T09:30:00Z", "2026-12-01T09:30:00Z")  # fmt: skip
    plain = recs["receipt.json"]
    assert (plain["request_received_at"], plain["request_due_at"]) == (None, None)
    no_times = make_statement(receipt_id=rid(9))
    no_times["predicate"]["request"] = {
        "id": "T-1", "basis": "user-deletion", "requester": None, "received_at": None,
        "due": None}  # fmt: skip
    rec = index_record(verify_receipt(make_receipt(no_times).to_json(), [TRUSTED.public_key]),
                       source="x")  # fmt: skip
    VALIDATOR.validate(rec)
    assert (rec["request_id"], rec["request_received_at"], rec["request_due_at"]) == (
        "T-1", None, None)  # fmt: skip
    csv_rows = list(csv.DictReader(io.StringIO(cli("index", GOLDEN / "good", "--key",
                    GOLDEN / "keys" / "trusted.pub.pem", "--format", "csv").stdout)))  # fmt: skip
    assert {r["request_due_at"] for r in csv_rows} == {"", "2026-12-01T09:30:00Z"}
