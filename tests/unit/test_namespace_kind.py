"""The ``namespace`` receipt kind (RECEIPT_SPEC.md 9.7) and ``scope.store_tombstone``
(8.1): structure (fast path and full helpers, and the JSON schema agree), semantics,
privacy mode, and what ``receipt verify``/``index`` report."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from erasure_receipts import MalformedReceiptError, ReceiptSemanticsError, verify_receipt
from erasure_receipts.privacy import commit
from erasure_receipts.receipt import Receipt, _validate, statement_is_valid, validate_statement
from erasure_receipts.verify import check_semantics, scope_id
from receipt_factory import SCHEMA_PATH, TRUSTED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
from make_corpus import namespace_statement, thread_kind_statement

SCHEMA = jsonschema.Draft202012Validator(json.loads(Path(SCHEMA_PATH).read_text()))
KEY = bytes(range(32))


def both_paths(st: dict[str, Any]) -> None:
    """The fast path and the full helpers give the same verdict."""
    errors = []
    for full in (False, True):
        try:
            _validate(copy.deepcopy(st), full)
        except MalformedReceiptError as exc:
            errors.append(exc.reason)
    assert errors in ([], ["schema", "schema"]), errors
    if errors:
        raise MalformedReceiptError("invalid", reason="schema")


def file_doc(st: dict[str, Any]) -> dict[str, Any]:
    """A receipt file around ``st`` for the schema (unsigned: signing validates first)."""
    doc = json.loads(Receipt.sign(namespace_statement(), TRUSTED).to_json())
    doc["statement"] = st
    return doc


def test_a_namespace_statement_is_valid_everywhere() -> None:
    st = namespace_statement()
    both_paths(st)
    check_semantics(validate_statement(st))
    assert SCHEMA.is_valid(file_doc(st))
    assert scope_id(st["predicate"]) == "users.alice"
    assert not statement_is_valid(st)  # the thread-only batch shortcut defers to the rules
    v = verify_receipt(Receipt.sign(st, TRUSTED).to_json(), [TRUSTED.public_key])
    assert v.thread_id == "users.alice"


@pytest.mark.parametrize(
    "over",
    [
        {"namespace": []},
        {"namespace": [""], "store_namespaces": [[""]]},
        {"namespace": ["users.alice"], "store_namespaces": [["users.alice"]]},
        {"namespace": ["users", 3], "store_namespaces": [["users", 3]]},
        {"store_namespaces": [[]]},
        {"store_namespaces": "users.alice"},
        {"tombstone": "yes"},
        {"thread_id": "t"},
        {"checkpoint_namespaces": "all"},
        {"tombstone_policy": "refuse_all"},
        {"store_tombstone": True},
    ],
)
def test_broken_namespace_scopes_are_schema_errors(over: dict[str, Any]) -> None:
    st = namespace_statement(**over)
    with pytest.raises(MalformedReceiptError) as err:
        both_paths(st)
    assert err.value.reason == "schema"
    assert not SCHEMA.is_valid(file_doc(st))


@pytest.mark.parametrize(
    "namespaces", [[["users", "bob"]], [], [["users", "alice"], ["users", "alice"]]]
)
def test_store_namespaces_must_be_the_namespace(namespaces: list[list[str]]) -> None:
    st = namespace_statement(store_namespaces=namespaces)
    both_paths(st)
    assert SCHEMA.is_valid(file_doc(st))  # the schema cannot compare the two members
    with pytest.raises(ReceiptSemanticsError) as err:
        check_semantics(st)
    assert err.value.reason == "scope_mismatch"


def test_semantic_rules() -> None:
    st = namespace_statement()
    st["subject"][0]["name"] = "langgraph-thread:users.alice"
    with pytest.raises(ReceiptSemanticsError) as err:
        check_semantics(st)
    assert err.value.reason == "subject_name_mismatch"
    st = namespace_statement()
    st["predicate"]["methods"] = {"store": "sweep"}
    with pytest.raises(ReceiptSemanticsError) as err:
        check_semantics(st)
    assert err.value.reason == "scope_mismatch"


def test_privacy_mode_namespace() -> None:
    c = commit(KEY, "store_namespace", "users.alice")
    st = namespace_statement(namespace=[c], store_namespaces=[[c]],
                             privacy={"mode": "hmac-sha256", "key_id": "0" * 64})  # fmt: skip
    st["subject"][0]["name"] = f"langgraph-store-namespace:{c}"
    st["predicate"]["backend"]["database"] = commit(KEY, "database", "/x.db")
    both_paths(st)
    check_semantics(st)
    assert SCHEMA.is_valid(file_doc(st))
    clear = namespace_statement(privacy={"mode": "hmac-sha256", "key_id": "0" * 64})
    clear["predicate"]["backend"]["database"] = commit(KEY, "database", "/x.db")
    with pytest.raises(ReceiptSemanticsError) as err:
        check_semantics(clear)
    assert err.value.reason == "inconsistent"


@pytest.mark.parametrize("value", [True, False])
def test_store_tombstone_on_thread_scopes(value: bool) -> None:
    scope = {"thread_id": "thread-1", "checkpoint_namespaces": "all",
             "store_namespaces": [["users", "alice"]], "tombstone": True,
             "store_tombstone": value}  # fmt: skip
    st = thread_kind_statement(scope=scope)
    both_paths(st)
    check_semantics(st)
    assert SCHEMA.is_valid(file_doc(st))
    st = thread_kind_statement(scope={**scope, "store_tombstone": 1})
    with pytest.raises(MalformedReceiptError):
        both_paths(st)
    assert not SCHEMA.is_valid(file_doc(st))
