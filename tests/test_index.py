"""`receipt index` (issue 10): the dashboard feed. Every record validates against
schemas/index-record.schema.json, records come only from verified receipts (a tampered,
forged or malformed receipt is listed as rejected, never as a record), files,
directories and logs mix, CSV and NDJSON carry the same records, and --jobs changes
nothing but the speed."""

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
from erasure_receipts.verify import verify_receipt
from receipt_factory import ATTACKER, TRUSTED, dump, make_receipt, make_statement, receipt_doc

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "schemas" / "index-record.schema.json").read_text("utf-8")
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
