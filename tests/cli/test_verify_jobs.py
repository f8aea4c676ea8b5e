"""`receipt verify` at archive scale (issue 10): --jobs N gives the same output and exit
code as one job, and the batch fast paths (orjson parse of the library's own file
layout, the one-pass statement check) accept exactly what the strict path accepts and
leave every rejection to it, with the same reason."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure_receipts.canonical import parse_own_layout, use_orjson
from erasure_receipts.errors import MalformedReceiptError
from erasure_receipts.receipt import Receipt, statement_is_valid, validate_statement
from receipt_factory import ATTACKER, dump, make_receipt, make_statement, receipt_doc, set_path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def run(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "verify", *map(str, args)], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 receipts: good ones, the golden corpus's bad ones, forgeries, in sub-dirs."""
    d = tmp_path_factory.mktemp("corpus")
    bad = sorted((GOLDEN / "bad").glob("*.json"))
    for i in range(300):
        sub = d / f"{i % 7:02d}"
        sub.mkdir(exist_ok=True)
        if i % 11 == 3:
            shutil.copy(bad[i % len(bad)], sub / f"{i:04d}-bad.json")
            continue
        rid = f"00000000-0000-4000-8000-{i:012d}"
        signer = ATTACKER if i % 13 == 5 else None
        r = make_receipt(make_statement(receipt_id=rid), *([signer] if signer else []))
        (sub / f"{i:04d}.json").write_bytes(r.to_json())
    shutil.copy(GOLDEN / "keys" / "trusted.pub.pem", d.parent / "trusted.pub.pem")
    return d


@pytest.mark.parametrize("mode", [[], ["--json"], ["--quiet"]])
def test_jobs_give_the_same_output_and_exit_code(corpus: Path, mode: list[str]) -> None:
    key = corpus.parent / "trusted.pub.pem"
    missing = corpus / "missing.json"
    one = run(corpus, missing, "--key", key, "--jobs", "1", *mode)
    two = run(corpus, missing, "--key", key, "--jobs", "2", *mode)
    default = run(corpus, missing, "--key", key, *mode)
    assert one.returncode == two.returncode == default.returncode == 3
    assert one.stdout == two.stdout == default.stdout
    assert one.stderr == two.stderr == default.stderr
    if mode == ["--json"]:
        doc = json.loads(one.stdout)
        assert doc["counts"]["verified"] > 200 and doc["counts"]["invalid"] > 20
    assert "Traceback" not in two.stderr


def test_jobs_usage_errors(corpus: Path) -> None:
    key = corpus.parent / "trusted.pub.pem"
    for bad in ("0", "x", "-1", "99999"):
        assert run(corpus, "--key", key, "--jobs", bad).returncode == 2
    assert run(corpus, "--key", key, "-j", "2", "--quiet").returncode == 1


def test_batch_mode_reports_the_golden_corpus_reasons(tmp_path: Path) -> None:
    """>= 64 files switch the verifier to its fast paths: every bad receipt of the
    golden corpus must still get its documented reason, every good one verify."""
    expected = json.loads((GOLDEN / "bad" / "EXPECTED.json").read_text("utf-8"))
    d = tmp_path / "batch"
    d.mkdir()
    for copy_no in range(3):
        for name in expected:
            shutil.copy(GOLDEN / "bad" / name, d / f"{copy_no}-{name}")
        for p in (GOLDEN / "good").iterdir():
            shutil.copy(p, d / f"{copy_no}-good-{p.name}")
    assert len(os.listdir(d)) >= 64
    res = run(d, "--key", GOLDEN / "keys" / "trusted.pub.pem", "--json", "--jobs", "1")
    doc = json.loads(res.stdout)
    for r in doc["results"]:
        name = Path(r["file"]).name.split("-", 1)[1]
        if name.startswith("good-"):
            assert r["reason"] == "ok", r
        else:
            assert r["reason"] == expected[name]["reason"], (name, r)


def test_own_layout_fast_parse_defers_to_the_strict_parse() -> None:
    use_orjson()
    r = make_receipt()
    data = r.to_json()
    assert parse_own_layout(data) == json.loads(data)
    assert parse_own_layout(data[:-1]) is None  # no final newline: not the layout
    assert parse_own_layout(data.replace(b"\n  ", b"\n   ", 1)) is None
    dup = data.replace(b'{\n  "media_type"', b'{\n  "media_type": "x",\n  "media_type"', 1)
    assert parse_own_layout(dup) is None
    with pytest.raises(MalformedReceiptError) as info:
        Receipt.from_json(dup)
    assert info.value.reason == "duplicate_key"
    doc = receipt_doc(r)
    set_path(doc, "statement.predicate.pre_state.leaves", 5.0)
    floaty = dump(doc)
    assert parse_own_layout(floaty) is not None  # parses, but the schema check refuses it
    with pytest.raises(MalformedReceiptError) as info:
        Receipt.from_json(floaty)
    assert info.value.reason == "float"


# -- the one-pass statement check never accepts what validate_statement refuses -----------


def _agreement_cases() -> list[tuple[str, Any]]:
    sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
    from test_receipt_roundtrip import AGREEMENT_CASES

    return list(AGREEMENT_CASES)


def _strict_accepts(statement: Any) -> bool:
    try:
        validate_statement(statement)
    except MalformedReceiptError:
        return False
    return True


@pytest.mark.parametrize(("path", "value"), _agreement_cases())
def test_fast_check_agrees_on_the_schema_cases(path: str, value: Any) -> None:
    doc = receipt_doc()
    set_path(doc, path, value)
    s = doc["statement"]
    if statement_is_valid(s):
        assert _strict_accepts(s), (path, value)


PATHS = [
    "predicate.receipt_id", "predicate.issued_at", "predicate.status",
    "predicate.scope.thread_id", "predicate.scope.tombstone",
    "predicate.scope.store_namespaces", "predicate.scope.checkpoint_namespaces",
    "predicate.backend.kind", "predicate.backend.store", "predicate.backend.versions",
    "predicate.backend.database", "predicate.merkle.algorithm",
    "predicate.pre_state.leaves", "predicate.pre_state.digest.sha256",
    "predicate.pre_state.tables", "predicate.post_state.tables.checkpoints.rows",
    "predicate.methods", "predicate.checks", "predicate.checks.0.result",
    "predicate.checks.0.detail", "predicate.residue", "predicate.residue.0.detail",
    "predicate.residue.0.status", "predicate.out_of_scope", "predicate.out_of_scope.0.id",
    "predicate.generator.version", "subject", "subject.0.name", "subject.0.digest",
    "_type", "predicateType",
]  # fmt: skip
NEAR_VALID = st.sampled_from([
    "", "x", "x" * 64, "x" * 65, "x" * 1024, "x" * 1025, "x" * 4096, "x" * 4097, "a.b:c-d_e",
    "a/b", "e" * 64, "E" * 64, "0" * 63, 0, 1, -1, 2**53 - 1, 2**53, True, False, None, [],
    [[]], [["a"]], [["a", ""]], [["a"], ["b", "c"]], {}, {"a": "b"}, {"a": 1}, {"a": None},
    {"a": True}, {"a": 2**53}, {"bad key": "x"}, {"x" * 65: "y"}, {"a": ""}, "pass", "fail",
    "erased", "applied", "partial", "all", "2024-02-29T23:59:59.999999Z",
    "2026-02-29T00:00:00Z", "2026-11-29T12:00:00Z", "2026-13-01T00:00:00Z",
    "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-00000000000A",
    {"rows": 0, "bytes": 0}, {"rows": 1}, [{"name": "c", "result": "pass"}],
    [{"name": "c", "result": "pass", "detail": ""}], [{"id": "backups", "note": "n"}],
    [{"action": "a", "status": "applied", "detail": {}}], {"sha256": "e" * 64},
])  # fmt: skip
VALUES = NEAR_VALID | st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**54) | st.floats(allow_nan=False)
    | st.sampled_from(["", "x", "a b", "pass", "erased", "all", "e" * 64, "E" * 64,
                       "2026-02-29T00:00:00Z", "x" * 65, "x" * 1025]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["sha256", "rows", "bytes", "name", "result", "a", "bad key"]),
        inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3))
def test_fast_check_never_accepts_what_the_validator_refuses(edits: list[Any]) -> None:
    s = copy.deepcopy(make_statement())
    for path, value in edits:
        try:
            set_path(s, path, value)
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    if statement_is_valid(s):
        assert _strict_accepts(s), edits


def test_fast_check_agrees_on_every_single_edit_of_the_grid() -> None:
    """Every path x every near-valid value: wherever the fast check says yes, the
    validator agrees (and the grid does reach both verdicts)."""
    verdicts = set()
    for path in PATHS:
        for value in NEAR_VALID.elements:  # type: ignore[attr-defined]
            s = copy.deepcopy(make_statement())
            try:
                set_path(s, path, copy.deepcopy(value))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            fast = statement_is_valid(s)
            verdicts.add(fast)
            if fast:
                assert _strict_accepts(s), (path, value)
    assert verdicts == {True, False}


def test_fast_check_remembers_only_private_copies() -> None:
    """Sub-objects seen before are compared, not walked: changing a statement after it
    passed must not change what counts as seen (the cache holds its own copies)."""
    s = make_statement()
    assert statement_is_valid(s)
    s["predicate"]["out_of_scope"].append(1)
    s["predicate"]["checks"][0]["result"] = True
    assert not statement_is_valid(copy.deepcopy(s))
    s2 = make_statement()
    s2["predicate"]["checks"][0]["result"] = 1  # equal to True, and to a cached 1: refused
    assert not statement_is_valid(s2)
    assert statement_is_valid(make_statement())


def test_fast_check_accepts_the_usual_receipts() -> None:
    assert statement_is_valid(make_statement())
    assert statement_is_valid(make_receipt().statement)


def test_verify_with_log_keeps_the_import_hygiene(tmp_path: Path) -> None:
    from erasure_receipts.log import ReceiptLog
    from receipt_factory import TRUSTED

    r = make_receipt()
    ReceiptLog(tmp_path / "log", signer=TRUSTED).append(r)
    (tmp_path / "r.json").write_bytes(r.to_json())
    (tmp_path / "k.pem").write_bytes(TRUSTED.public_pem())
    code = (
        "import sys, json\n"
        "from erasure_receipts.cli import verify_main\n"
        f"rc = verify_main([{str(tmp_path / 'r.json')!r}, '--key', {str(tmp_path / 'k.pem')!r},"
        f" '--log', {str(tmp_path / 'log')!r}, '--quiet'])\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    rc, modules = json.loads(proc.stdout.splitlines()[-1])
    assert rc == 0, proc.stderr
    banned = ("langgraph", "aiosqlite", "sqlite3", "_sqlite3", "psycopg", "typer", "jsonschema")
    assert [m for m in modules if m.split(".")[0].startswith(banned)] == []
