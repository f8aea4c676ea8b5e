"""The needle check (``needles=``) covers the targets: a needle left in a target - a table
of another database, an item target that can be searched - refuses the erasure before
anything irreversible happens, and a target that cannot be searched refuses
``needles=`` instead of being counted as searched. Raw rows read through fresh
connections, before and after.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import (
    AttestingSqliteSaver,
    ConfigurationError,
    FunctionTarget,
    NeedlesFoundError,
    Signer,
    SqlTarget,
    VectorStoreTarget,
    verify_receipt,
)
from scenario import raw_rows
from test_targets import EMAIL, LEDGER, THREAD, grants, run_chats

TICKETS = """CREATE TABLE tickets (
    ticket_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, body TEXT, attachment BLOB)"""
SAVER_TABLES = ("checkpoints", "writes")


@pytest.fixture
def app_and_crm(tmp_path: Path) -> tuple[Path, Path]:
    """``app.db`` (the saver's, with the graph's grant ledger) and ``crm.db`` (tickets
    keyed by the subject: carol's two, and bob's, which quotes carol's e-mail)."""
    db, crm = tmp_path / "app.db", tmp_path / "crm.db"
    with sqlite3.connect(db) as c:
        c.execute(LEDGER)
    with sqlite3.connect(crm) as c:
        c.execute(TICKETS)
        c.executemany(
            "INSERT INTO tickets VALUES (?, ?, ?, ?)",
            [("t-1", "carol", f"refund for {EMAIL}", None),
             ("t-2", "carol", "any news?", b"\x00\x01"),
             ("t-3", "bob", "escalated", f'{{"cc": "{EMAIL}"}}'.encode())],
        )  # fmt: skip
    return db, crm


def snapshot(db: Path, crm: Path) -> dict[str, Any]:
    """Every raw row of the saver's tables, the ledger and the tickets."""
    out: dict[str, Any] = {t: raw_rows(db, t, "1 = 1", ()) for t in SAVER_TABLES}
    out["refund_grants"] = raw_rows(db, "refund_grants", "1 = 1", ())
    out["tickets"] = raw_rows(crm, "tickets", "1 = 1", ())
    return out


def test_a_needle_in_another_databases_target_refuses_the_erasure(
    app_and_crm: tuple[Path, Path], signer: Signer
) -> None:
    db, crm = app_and_crm
    tickets = SqlTarget("tickets", "user_id", key="subject", database=str(crm))
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD])
        before = snapshot(db, crm)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL], targets=[tickets])
        assert "target:tickets" in str(err.value) and "column=attachment" in str(err.value)
        assert EMAIL not in str(err.value)
        assert not saver.is_erased(THREAD)
        assert snapshot(db, crm) == before  # nothing deleted anywhere
        # bob's ticket no longer quotes her: now the erasure passes
        with sqlite3.connect(crm) as c:
            c.execute("UPDATE tickets SET attachment = NULL WHERE ticket_id = 't-3'")
        receipt = saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL], targets=[tickets])
    assert raw_rows(crm, "tickets", "user_id = ?", ("carol",)) == []
    assert [r[0] for r in raw_rows(crm, "tickets", "1 = 1", ())] == ["t-3"]
    p = receipt.statement["predicate"]
    assert p["needles"]["searched"] == "database" and p["needles"]["occurrences_after"] == 0
    assert p["methods"]["target:tickets"] == "sweep"
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_needle_in_a_bystanders_grant_of_another_file_refuses(
    tmp_path: Path, signer: Signer
) -> None:
    """A thread-keyed target in another SQLite file: a bystander thread's grant quoting
    the needle refuses the subject erasure; the erased thread's own grants do not."""
    db, ledger = tmp_path / "app.db", tmp_path / "ledger.db"
    for f in (db, ledger):
        with sqlite3.connect(f) as c:
            c.execute(LEDGER)
    with sqlite3.connect(ledger) as c:
        c.executemany(
            "INSERT INTO refund_grants VALUES (?, ?, 1, ?, NULL, 1)",
            [("g-1", THREAD, f"for {EMAIL}"), ("g-2", "bystander", f"cc {EMAIL}")],
        )
    target = SqlTarget("refund_grants", "thread_id", database=str(ledger))
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, targets=[target]) as s:
        run_chats(db, s, [THREAD])
        before = raw_rows(ledger, "refund_grants", "1 = 1", ())
        cps = raw_rows(db, "checkpoints", "1 = 1", ())
        with pytest.raises(NeedlesFoundError, match="target:refund_grants"):
            s.erase_subject("carol", threads=[THREAD], needles=[EMAIL])
        assert raw_rows(ledger, "refund_grants", "1 = 1", ()) == before
        assert raw_rows(db, "checkpoints", "1 = 1", ()) == cps
        with sqlite3.connect(ledger) as c:
            c.execute("DELETE FROM refund_grants WHERE grant_id = 'g-2'")
        receipt = s.erase_subject("carol", threads=[THREAD], needles=[EMAIL])
    assert grants(ledger, THREAD) == []
    assert receipt.statement["predicate"]["needles"]["occurrences_after"] == 0


def test_a_target_that_cannot_be_searched_refuses_needles(
    app_and_crm: tuple[Path, Path], signer: Signer
) -> None:
    """A function target without ``locate=`` and a vector store whose documents cannot
    be listed are not searched: ``needles=`` is refused, naming the target, before
    anything is deleted - never counted as searched."""
    db, _ = app_and_crm
    deleted: list[Any] = []
    cached = {"a": b"x"}

    def delete(key: str, keys: Any) -> None:
        deleted.append(keys)
        cached.clear()

    cache = FunctionTarget("answer-cache", items=lambda k: dict(cached), delete=delete)

    class Opaque:  # a VectorStore that can fetch and delete by id, never list
        def get_by_ids(self, ids: Any) -> list[Any]:
            return []

        def delete(self, ids: Any = None) -> None:
            deleted.append(ids)

    vectors = VectorStoreTarget(Opaque(), ids_for=lambda k: [], name="remote-vectors")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD])
        before = {t: raw_rows(db, t, "1 = 1", ()) for t in (*SAVER_TABLES, "refund_grants")}
        for target, name in ((cache, "answer-cache"), (vectors, "remote-vectors")):
            with pytest.raises(ConfigurationError, match=f"'{name}'.*cannot be searched"):
                saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL],
                                    targets=[target])  # fmt: skip
        assert {t: raw_rows(db, t, "1 = 1", ()) for t in before} == before
        assert deleted == []
        # without needles= the same targets are erased as before
        receipt = saver.erase_subject("carol", threads=[THREAD], targets=[cache])
    assert deleted == [["a"]]
    assert "needles" not in receipt.statement["predicate"]


def test_a_function_target_with_locate_is_searched(
    app_and_crm: tuple[Path, Path], signer: Signer
) -> None:
    db, _ = app_and_crm
    files = {"carol": {"a": EMAIL.encode()}, "bob": {"b": f"cc {EMAIL}".encode()}}

    def locate(forms: Any) -> list[str]:
        return [k for f in files.values() for k, v in f.items() if any(x in v for x in forms)]

    cache = FunctionTarget(
        "mailbox", key="subject", items=lambda s: dict(files.get(s, {})),
        delete=lambda s, ks: [files[s].pop(k) for k in ks], locate=locate,
    )  # fmt: skip
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD])
        with pytest.raises(NeedlesFoundError, match="target:mailbox"):
            saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL], targets=[cache])
        assert files["carol"] == {"a": EMAIL.encode()}
        del files["bob"]
        receipt = saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL],
                                      targets=[cache])  # fmt: skip
    assert files == {"carol": {}}
    assert receipt.statement["predicate"]["needles"]["occurrences_after"] == 0


def test_locate_searches_a_target_of_another_database(
    app_and_crm: tuple[Path, Path], signer: Signer
) -> None:
    db, crm = app_and_crm
    tickets = SqlTarget("tickets", "user_id", key="subject", database=str(crm))
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, targets=[tickets]) as s:
        found = [loc for loc in s.locate([EMAIL]) if loc.table == "target:tickets"]
    assert sorted(loc.column for loc in found) == ["attachment", "body"]
