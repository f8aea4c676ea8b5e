"""With ``scope.privacy`` the verifier rejects (``inconsistent``) any raw id in a receipt
(RECEIPT_SPEC.md 9.5), also in a re-signed one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import test_subject_authorization
from erasure_receipts import Receipt
from erasure_receipts.privacy import CommitmentKey
from test_subject_authorization import NS, _reason, _resigned, _saver

db = test_subject_authorization.db  # the fixture, shared

# -- privacy mode is enforced by the verifier ---------------------------------------------


@pytest.fixture
def private_receipt(db: Path) -> Receipt:
    ck = CommitmentKey.generate()
    with _saver(db) as saver:
        return saver.erase_subject(  # type: ignore[no-any-return]
            "alice", threads=["alice-1"], metadata_key="user_id", store_namespaces=[NS],
            privacy="commitments", commitment_key=ck,
        )  # fmt: skip


def test_privacy_receipt_with_raw_ids_is_inconsistent(private_receipt: Receipt) -> None:
    assert _reason(private_receipt.to_json()) == "ok"
    upper = "hmac-sha256:" + "AB" * 32

    def scope(st: dict[str, Any]) -> dict[str, Any]:
        return st["predicate"]["scope"]  # type: ignore[no-any-return]

    def raw_subject(st: dict[str, Any]) -> None:
        scope(st)["subject"] = "alice"
        st["subject"][0]["name"] = "langgraph-subject:alice"

    def raw_threads(value: str) -> Any:
        def edit(st: dict[str, Any]) -> None:
            p = st["predicate"]
            old = p["scope"]["threads"][0]
            p["scope"]["threads"] = sorted([value, *p["scope"]["threads"][1:]])
            for u in p["units"]:
                if u["name"] == f"thread:{old}":
                    u["name"] = f"thread:{value}"
            p["units"].sort(key=lambda u: u["name"])
            from erasure_receipts.digest import units_root

            root = units_root(
                (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in p["units"]
            )
            p["pre_state"]["digest"]["sha256"] = root.hex()
            st["subject"][0]["digest"]["sha256"] = root.hex()

        return edit

    def raw_namespace(st: dict[str, Any]) -> None:
        scope(st)["store_namespaces"] = [list(NS)]

    def two_part_namespace(st: dict[str, Any]) -> None:
        c = scope(st)["store_namespaces"][0][0]
        scope(st)["store_namespaces"] = [[c, c]]

    def raw_database(st: dict[str, Any]) -> None:
        st["predicate"]["backend"]["database"] = "/srv/app.db"

    def upper_database(st: dict[str, Any]) -> None:
        st["predicate"]["backend"]["database"] = upper

    cases = {
        "subject": raw_subject,
        "thread": raw_threads("alice-1"),
        "thread (upper-case hex)": raw_threads(upper),
        "store namespace": raw_namespace,
        "store namespace of two parts": two_part_namespace,
        "database": raw_database,
        "database (upper-case hex)": upper_database,
    }
    for why, edit in cases.items():
        assert _reason(_resigned(private_receipt, edit)) == "inconsistent", why
    # Unchanged but re-signed: still fine (the cases fail for the raw id alone).
    assert _reason(_resigned(private_receipt, lambda st: None)) == "ok"


def test_privacy_thread_receipt_with_raw_thread_id_is_inconsistent(db: Path) -> None:
    ck = CommitmentKey.generate()
    with _saver(db) as saver:
        # A thread-kind receipt made private by hand (the saver issues privacy mode for
        # subject erasures): committed ids verify, a raw thread id does not.
        receipt = saver.erase_thread("bob-1")
    c = ck.commit("thread", "bob-1")

    def private(thread_id: str) -> Any:
        def edit(st: dict[str, Any]) -> None:
            p = st["predicate"]
            p["scope"]["privacy"] = {"mode": "hmac-sha256", "key_id": ck.key_id}
            p["scope"]["thread_id"] = thread_id
            p["backend"]["database"] = ck.commit("database", p["backend"]["database"])
            st["subject"][0]["name"] = f"langgraph-thread:{thread_id}"

        return edit

    assert _reason(_resigned(receipt, private(c))) == "ok"
    assert _reason(_resigned(receipt, private("bob-1"))) == "inconsistent"
