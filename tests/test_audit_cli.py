"""The auditor's commands on real receipts: what `receipt verify` says an erasure did
(an empty scope in words), `receipt show` for every kind, the CSV index opened in a
spreadsheet, required authorizations, log-signing roles and `receipt open`.

Receipts come from real SQLite erasures (AttestingSqliteSaver on files) and from the
golden corpus; the CLI runs in process (`verify_main`, typer's CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from typer.testing import CliRunner, Result

from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts.app import app
from erasure_receipts.cli import verify_main

ROOT = Path(__file__).parents[1]
GOLDEN = ROOT / "tests" / "golden"
GOOD = sorted((GOLDEN / "good").iterdir())
TRUSTED_PEM = GOLDEN / "keys" / "trusted.pub.pem"
RESULT_SCHEMA = json.loads((ROOT / "schemas" / "verify-result.schema.json").read_text())


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def put(saver: Any, thread: str, i: int) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": f"turn {i}"}
    cp["id"] = f"1ef{i:029d}"
    saver.put(cfg(thread), cp, {"step": i}, {})


def verify_json(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, dict[str, Any]]:
    code = verify_main([*(str(a) for a in args), "--json"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, RESULT_SCHEMA)
    return code, doc


# -- receipt verify: what was erased, and an empty scope in words -------------------------


@pytest.fixture
def erased(tmp_path: Path, signer: Signer) -> dict[str, Path]:
    """A real erasure of a thread with two checkpoints, and an empty-scope receipt
    (``allow_empty``) of a thread id that never existed, both on one SQLite file."""
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        put(saver, "t-real", 1)
        put(saver, "t-real", 2)
        real = saver.erase_thread("t-real")
        empty = saver.erase_thread("never-existed", allow_empty=True)
    out = {"real": tmp_path / "real.json", "empty": tmp_path / "empty.json"}
    out["real"].write_bytes(real.to_json())
    out["empty"].write_bytes(empty.to_json())
    (tmp_path / "pub.pem").write_bytes(signer.public_pem())
    out["pub"] = tmp_path / "pub.pem"
    return out


def test_verify_says_how_many_rows_and_that_an_empty_scope_erased_nothing(
    erased: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_main([str(erased["real"]), "--key", str(erased["pub"])]) == 0
    real = capsys.readouterr().out
    assert "thread 't-real' erased (2 rows) at" in real
    assert "EMPTY SCOPE" not in real
    assert verify_main([str(erased["empty"]), "--key", str(erased["pub"])]) == 0
    empty = capsys.readouterr().out
    assert "thread 'never-existed' attested as an EMPTY SCOPE (no rows existed, nothing " in empty
    assert " erased " not in empty and "erased at" not in empty


def test_verify_json_carries_rows_and_empty_scope(
    erased: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = verify_json(capsys, erased["real"], erased["empty"], "--key", erased["pub"])
    assert code == 0
    real, empty = doc["results"]
    assert (real["rows"], real["empty_scope"]) == (2, False)
    assert (empty["rows"], empty["empty_scope"]) == (0, True)
    code, doc = verify_json(capsys, GOLDEN / "good" / "history.json", "--key", TRUSTED_PEM)
    assert (doc["results"][0]["rows"], doc["results"][0]["kept_rows"]) == (3, 2)


# -- receipt show: every kind ---------------------------------------------------------------


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_show_works_for_every_golden_receipt(path: Path) -> None:
    res = cli("show", path)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    doc = json.loads((path).read_bytes())
    if "payloadType" in doc:
        return  # an envelope: same statement as receipt.json
    p = doc["statement"]["predicate"]
    kind = p.get("kind", "thread")
    assert f"kind         {kind}" in res.stdout
    assert "NOT verified" in res.stdout
    if kind == "subject":
        assert f"subject      {p['scope']['subject']!r}" in res.stdout
        assert f"threads      {len(p['scope']['threads'])}: " in res.stdout
        assert res.stdout.count("unit         ") == len(p["units"])
    else:
        assert f"thread       {p['scope']['thread_id']!r}" in res.stdout
    if kind == "history":
        assert "history: every checkpoint except the latest" in res.stdout
        assert f"({p['kept_state']['leaves']} rows kept)" in res.stdout
        assert "kept cps     ''/1f0a8c3e-0003" in res.stdout
    else:
        assert "(all checkpoint namespaces)" in res.stdout or kind == "subject"
    if "needles" in p:
        assert "needles      2 value(s)" in res.stdout
    as_json = cli("show", path, "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == doc["statement"]


def test_show_says_an_empty_scope_erased_nothing(erased: dict[str, Path]) -> None:
    assert "EMPTY SCOPE" in cli("show", erased["empty"]).stdout
    assert "EMPTY SCOPE" not in cli("show", erased["real"]).stdout


# -- receipt index --format csv: safe in a spreadsheet -------------------------------------

HOSTILE = ['=HYPERLINK("http://evil","x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def test_csv_index_neutralises_formulas(tmp_path: Path, signer: Signer) -> None:
    """Hostile thread ids and request ids from real erasures come out of the CSV as text
    (a leading quote); NDJSON keeps them exactly; harmless values are untouched."""
    from erasure_receipts import RequestContext

    db, archive = tmp_path / "app.db", tmp_path / "archive"
    ids = [*HOSTILE, "plain-thread"]
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        for i, tid in enumerate(ids):
            put(saver, tid, 1)
            ctx = RequestContext(HOSTILE[-1 - i % len(HOSTILE)] + "-req", "user-deletion")
            r = saver.erase_thread(tid, request=ctx)
            archive.mkdir(exist_ok=True)
            (archive / f"{i}.json").write_bytes(r.to_json())
    (tmp_path / "pub.pem").write_bytes(signer.public_pem())
    res = cli("index", archive, "--key", tmp_path / "pub.pem", "--format", "csv")
    assert res.exit_code == 0, res.stderr
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(res.stdout_bytes.decode(), newline="")))
    assert sorted(r["thread_id"] for r in rows) == sorted(
        [*("'" + t for t in HOSTILE), "plain-thread"]
    )
    for r in rows:
        for field, value in r.items():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (field, value)
        assert r["request_id"].startswith("'")
    plain = next(r for r in rows if r["thread_id"] == "plain-thread")
    assert plain["scope_id"] == "plain-thread" and plain["rows"] == "1"
    nd = [json.loads(line) for line in cli("index", archive, "--key",
                                           tmp_path / "pub.pem").stdout.splitlines()]  # fmt: skip
    assert sorted(r["thread_id"] for r in nd) == sorted(ids)  # NDJSON: exactly as erased


def test_csv_cell() -> None:
    from erasure_receipts.index import csv_cell

    assert [csv_cell(v) for v in HOSTILE] == ["'" + v for v in HOSTILE]
    assert [csv_cell(v) for v in ("a=b", "1-2", " =x", 0, 5, True, None)] == [
        "a=b", "1-2", " =x", 0, 5, "true", ""]  # fmt: skip
