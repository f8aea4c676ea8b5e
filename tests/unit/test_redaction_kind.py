"""The ``redaction`` receipt kind (RECEIPT_SPEC.md 9.12): structure (fast path and full
helpers, and the JSON schema agree), semantics, and what ``receipt verify``, ``show``
and the index report."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from erasure_receipts import MalformedReceiptError, ReceiptSemanticsError, verify_receipt
from erasure_receipts.index import FIELDS, index_record
from erasure_receipts.receipt import Receipt, _validate, validate_statement
from erasure_receipts.verify import check_semantics, scope_id
from receipt_factory import SCHEMA_PATH, TRUSTED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
from make_corpus import history_statement, redaction_statement, thread_kind_statement

REDACTION_MEMBER = redaction_statement()["predicate"]["redaction"]
SCHEMA = jsonschema.Draft202012Validator(json.loads(Path(SCHEMA_PATH).read_text()))


def both_paths(st: dict[str, Any]) -> None:
    """The fast path and the full helpers give the same verdict."""
    errors = []
    for full in (False, True):
        try:
            _validate(copy.deepcopy(st), full)
        except MalformedReceiptError as exc:
            errors.append(exc.reason)
    assert errors in ([], ["schema", "schema"], ["integer_range", "integer_range"]), errors
    if errors:
        raise MalformedReceiptError("invalid", reason="schema")


def file_doc(st: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(Receipt.sign(redaction_statement(), TRUSTED).to_json())
    doc["statement"] = st
    return doc


def test_a_redaction_statement_is_valid_everywhere() -> None:
    st = redaction_statement()
    both_paths(st)
    check_semantics(validate_statement(st))
    assert SCHEMA.is_valid(file_doc(st))
    assert scope_id(st["predicate"]) == "alice-chat"
    v = verify_receipt(Receipt.sign(st, TRUSTED).to_json(), [TRUSTED.public_key])
    assert v.status == "redacted"
    rec = index_record(v, source="r.json")
    assert list(rec) == list(FIELDS)
    assert rec["kind"] == "redaction" and rec["status"] == "redacted"
    assert rec["checkpoints_kept"] == 3 and rec["rows"] == 3


def mutated(mutate: Any) -> dict[str, Any]:
    st = redaction_statement()
    mutate(st["predicate"])
    return st


@pytest.mark.parametrize(
    "mutate",
    [
        lambda p: p.update(status="erased"),
        lambda p: p.pop("needles"),
        lambda p: p.pop("redaction"),
        lambda p: p["redaction"].pop("replacement"),
        lambda p: p["redaction"].update(checkpoints_before=-1),
        lambda p: p["redaction"].update(extra=1),
        lambda p: p["scope"].update(tombstone=True),
        lambda p: p["scope"].update(tombstone_policy="refuse_all"),
        lambda p: p["scope"].update(store_tombstone=False),
        lambda p: p["scope"].update(keep="latest"),
    ],
)
def test_broken_redactions_are_schema_errors(mutate: Any) -> None:
    st = mutated(mutate)
    with pytest.raises(MalformedReceiptError) as err:
        both_paths(st)
    assert err.value.reason == "schema"
    assert not SCHEMA.is_valid(file_doc(st))


@pytest.mark.parametrize(
    "build",
    [
        lambda: _with(thread_kind_statement(), status="redacted"),
        lambda: _with(history_statement(), redaction=REDACTION_MEMBER),
    ],
)
def test_other_kinds_cannot_claim_a_redaction(build: Any) -> None:
    st = build()
    with pytest.raises(MalformedReceiptError):
        both_paths(st)
    assert not SCHEMA.is_valid(file_doc(st))


def _with(st: dict[str, Any], **members: Any) -> dict[str, Any]:
    st["predicate"].update(members)
    return st


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda p: p["redaction"].update(checkpoints_after=2), "inconsistent"),
        (lambda p: p["needles"].update(occurrences_after=2), "needles_remain"),
        (lambda p: p["needles"].update(searched="database"), "inconsistent"),
        (lambda p: p["checks"][0].update(result="fail"), "check_failed"),
        (lambda p: p["post_state"]["tables"]["writes"].update(rows=2), "inconsistent"),
    ],
)
def test_semantic_rules(mutate: Any, reason: str) -> None:
    st = mutated(mutate)
    if reason == "inconsistent" and st["predicate"]["post_state"]["tables"]["writes"]["rows"] == 2:
        st["predicate"]["post_state"]["leaves"] += 1
    both_paths(st)
    with pytest.raises(ReceiptSemanticsError) as err:
        check_semantics(st)
    assert err.value.reason == reason


def test_receipt_show_and_verify_name_a_redaction(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(Receipt.sign(redaction_statement(), TRUSTED).to_json())
    key = tmp_path / "k.pem"
    key.write_bytes(TRUSTED.public_pem())
    exe = [sys.executable, "-m", "erasure_receipts"]
    show = subprocess.run([*exe, "show", str(path)], capture_output=True, text=True, timeout=60)
    assert show.returncode == 0, show.stderr
    assert "kind         redaction" in show.stdout and "status       redacted" in show.stdout
    assert "checkpoints  3 before, 3 after" in show.stdout
    out = subprocess.run([*exe, "verify", str(path), "--key", str(key)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "redacted (3 rows, rewritten in place; every checkpoint kept)" in out.stdout
    js = subprocess.run([*exe, "verify", str(path), "--key", str(key), "--json"],
                        capture_output=True, text=True, timeout=60)  # fmt: skip
    res = json.loads(js.stdout)["results"][0]
    assert res["kind"] == "redaction" and res["status"] == "redacted"
