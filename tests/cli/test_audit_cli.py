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

ROOT = Path(__file__).parents[2]
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
    elif kind == "namespace":  # RECEIPT_SPEC.md 9.7: a store prefix, no thread
        assert f"namespace    {'/'.join(p['scope']['namespace'])!r}" in res.stdout
    elif kind == "shred":  # RECEIPT_SPEC.md 9.16: a destroyed data key
        assert f"{p['scope']['subject']!r} (its data key destroyed" in res.stdout
        assert f"commitment {p['scope']['key_commitment']}" in res.stdout
        assert p["scope"]["key_store"]["backup_retention"] in res.stdout
    else:
        assert f"thread       {p['scope']['thread_id']!r}" in res.stdout
    if kind == "history":
        assert "history: every checkpoint except the latest" in res.stdout
        assert f"({p['kept_state']['leaves']} rows kept)" in res.stdout
        assert "kept cps     ''/1f0a8c3e-0003" in res.stdout
    else:
        no_thread = ("subject", "namespace", "shred")
        assert "(all checkpoint namespaces)" in res.stdout or kind in no_thread
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


# -- four eyes: --require-authorization, log-signing roles ---------------------------------

APPROVER = Signer.from_seed(b"\x02" * 32)


@pytest.fixture
def four_eyes(tmp_path: Path, signer: Signer) -> dict[str, Path]:
    """Real SQLite erasures with and without an approver's authorization, a trust file
    naming the receipt signer and the approver, and receipt logs signed by each."""
    from erasure_receipts import RequestContext, authorize
    from erasure_receipts.log import ReceiptLog

    db = tmp_path / "app.db"
    ctx = RequestContext("DSR-7", "gdpr-art17-1a")
    auth = authorize(APPROVER, request_id="DSR-7", not_after="2999-01-01T00:00:00Z",
                     scope={"kind": "thread", "thread_id": "t-approved",
                            "store_namespaces": []})  # fmt: skip
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        for t in ("t-approved", "t-request-only", "t-plain"):
            put(saver, t, 1)
        approved = saver.erase_thread("t-approved", request=ctx, authorization=auth)
        request_only = saver.erase_thread("t-request-only", request=ctx)
        plain = saver.erase_thread("t-plain")
    out = {}
    for name, r in (("approved", approved), ("request_only", request_only), ("plain", plain)):
        out[name] = tmp_path / f"{name}.json"
        out[name].write_bytes(r.to_json())
    out["trust"] = tmp_path / "trust.json"
    out["trust"].write_text(json.dumps({"trust_version": 1, "keys": [
        {"name": "receipts", "ed25519": signer.public_key.b64()},
        {"name": "dpo", "ed25519": APPROVER.public_key.b64(), "role": "approver"},
    ]}))  # fmt: skip
    for name, log_signer in (("signer_log", signer), ("approver_log", APPROVER)):
        out[name] = tmp_path / name
        ReceiptLog(out[name], signer=log_signer, origin=f"example.com/{name}").append_many(
            [approved, plain]
        )
    out["pub"] = tmp_path / "pub.pem"
    out["pub"].write_bytes(signer.public_pem())
    return out


def test_require_authorization_fails_receipts_without_four_eyes(
    four_eyes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    f = four_eyes
    files = [f["approved"], f["request_only"], f["plain"]]
    # without the option every one verifies (as before)
    code, doc = verify_json(capsys, *files, "--trust", f["trust"])
    assert code == 0 and [r["verified"] for r in doc["results"]] == [True] * 3
    code, doc = verify_json(capsys, *files, "--trust", f["trust"], "--require-authorization")
    assert code == 1
    approved, request_only, plain = doc["results"]
    assert approved["verified"] and approved["approver"] == "dpo"
    for res in (request_only, plain):
        assert (res["verified"], res["reason"]) == (False, "authorization_missing")
        assert "no authorization" in res["message"]
    assert "a request but no authorization" in request_only["message"]
    # text: one FAIL line each, with the reason
    assert verify_main([*map(str, files), "--trust", str(f["trust"]),
                        "--require-authorization"]) == 1  # fmt: skip
    text = capsys.readouterr().out
    assert text.count("[authorization_missing]") == 2 and text.startswith("OK ")
    # --key holds no approver: a usage error, not a silent pass or a blanket failure
    assert verify_main([str(f["approved"]), "--key", str(f["pub"]),
                        "--require-authorization"]) == 2  # fmt: skip
    assert "--require-authorization needs --trust" in capsys.readouterr().err


def test_require_authorization_library() -> None:
    from erasure_receipts import ReceiptSemanticsError, verify_receipt

    data = (GOLDEN / "good" / "receipt.json").read_bytes()
    from erasure_receipts.signing import PublicKey

    key = [PublicKey.from_pem(TRUSTED_PEM.read_bytes())]
    assert verify_receipt(data, key).approver is None
    with pytest.raises(ReceiptSemanticsError) as exc:
        verify_receipt(data, key, require_authorization=True)
    assert exc.value.reason == "authorization_missing"


def test_an_approver_key_never_signs_a_log(
    four_eyes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    f = four_eyes
    ok = verify_main([str(f["approved"]), "--trust", str(f["trust"]), "--log",
                      str(f["signer_log"])])  # fmt: skip
    assert ok == 0 and "log index 0" in capsys.readouterr().out
    code = verify_main([str(f["approved"]), "--trust", str(f["trust"]), "--log",
                        str(f["approver_log"])])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "'dpo', an approver key" in err and "never receipt logs" in err
    good = cli("log", "verify", f["signer_log"], "--trust", f["trust"], "--json")
    assert good.exit_code == 0, good.stdout
    bad = cli("log", "verify", f["approver_log"], "--trust", f["trust"], "--json")
    doc = json.loads(bad.stdout)
    assert bad.exit_code == 1 and doc["problems"][0]["reason"] == "bad_checkpoint"
    assert "an approver key" in doc["problems"][0]["message"]


# -- receipt open verifies before it opens ------------------------------------------------


def test_open_verifies_unless_no_verify(tmp_path: Path) -> None:
    good, forged = GOLDEN / "good" / "subject.json", GOLDEN / "bad" / "tamper_thread_id.json"
    unchecked = cli("open", good, "--thread", "alice-chat-1")
    assert unchecked.exit_code == 2 and "--no-verify" in unchecked.stderr
    verified = cli("open", good, "--thread", "alice-chat-1", "--key", TRUSTED_PEM, "--json")
    assert verified.exit_code == 0, verified.stderr
    assert json.loads(verified.stdout)["signature"] == "verified"
    assert cli("open", good, "--thread", "bob", "--key", TRUSTED_PEM).exit_code == 1
    # a receipt changed after signing: refused when verified, opened only on request
    refused = cli("open", forged, "--thread", "thread-2", "--key", TRUSTED_PEM)
    assert refused.exit_code == 1 and "does not verify: [bad_signature]" in refused.stderr
    opened = cli("open", forged, "--thread", "thread-2", "--no-verify")
    assert opened.exit_code == 0 and "NOT verified" in opened.stdout
    both = cli("open", good, "--thread", "alice-chat-1", "--no-verify", "--key", TRUSTED_PEM)
    assert both.exit_code == 2
