"""Erasure targets on PostgreSQL, against a real server: the refund ledger in the
saver's own database, erased in the erasure transaction, and bad targets refused
before anything is deleted. Raw rows are read through separate connections."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from erasure_receipts import (
    AttestingPostgresSaver,
    ConfigurationError,
    Receipt,
    Signer,
    SqlTarget,
    verify_receipt,
)
from erasure_receipts.digest import encode_row, leaf_hash
from pg_helpers import connect, count, fingerprint, raw_rows, table_shape
from pg_server import fresh_database
from scenario import naive_root
from test_targets import BYSTANDERS, THREAD, State

TABLES = ("checkpoint_blobs", "checkpoint_writes", "checkpoints")
LEDGER = """CREATE TABLE refund_grants (
    grant_id text PRIMARY KEY, thread_id text NOT NULL, amount_cents integer,
    reason text, payload bytea, consumed integer NOT NULL DEFAULT 0)"""


def pg_graph(dsn: str, saver: Any) -> Any:
    """The SQLite scenario's graph, its tool writing into PostgreSQL."""

    def assistant(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content="Let me issue that refund.")]}

    def refund_tool(state: State, config: RunnableConfig) -> dict[str, Any]:
        tid = config["configurable"]["thread_id"]
        with connect(dsn) as app:
            row = app.execute("SELECT count(*) FROM refund_grants").fetchone()
            n = int(row[0]) if row else 0
            app.execute(
                "INSERT INTO refund_grants VALUES (%s, %s, %s, %s, %s, 1)",
                (f"g-{n:04d}", tid, 1250 + n, str(state["messages"][0].content),
                 json.dumps({"by": tid}).encode()),
            )  # fmt: skip
        return {"messages": [AIMessage(content=f"Refund granted for {tid}.")]}

    g = StateGraph(State)
    g.add_node("assistant", assistant)
    g.add_node("refund_tool", refund_tool)
    g.add_edge(START, "assistant")
    g.add_edge("assistant", "refund_tool")
    g.add_edge("refund_tool", END)
    return g.compile(checkpointer=saver)


def run(dsn: str, saver: Any, threads: list[str]) -> None:
    graph = pg_graph(dsn, saver)
    for tid in threads:
        for turn in ("refund please", "and once more"):
            graph.invoke({"messages": [HumanMessage(content=turn)]},
                         {"configurable": {"thread_id": tid}})  # fmt: skip


def digest(dsn: str, thread: str) -> str:
    parts = [(t, t) for t in TABLES] + [("target:refund_grants", "refund_grants")]
    hashes = []
    for _, table in sorted(parts):
        with connect(dsn) as conn:
            cols, pk = table_shape(conn, table)
        names = [c for c, _ in cols]
        for row in raw_rows(dsn, table, "thread_id = %s", (thread,)):
            pkv = [row[names.index(c)] for c in pk]
            hashes.append(leaf_hash(encode_row(table, pkv, list(zip(names, row, strict=True)))))
    return naive_root(hashes).hex()


def test_refund_ledger_erased_with_the_thread_postgres(pg_db: str, signer: Signer) -> None:
    with connect(pg_db) as c:
        c.execute(LEDGER)
    target = SqlTarget("refund_grants", "thread_id")
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, targets=[target]) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD, *BYSTANDERS])
        assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 2
        before = fingerprint(pg_db, "refund_grants", "thread_id <> %s", (THREAD,))
        expected = digest(pg_db, THREAD)
        receipt = saver.erase_thread(THREAD)
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert count(pg_db, "checkpoints", "thread_id = %s", (THREAD,)) == 0
    assert fingerprint(pg_db, "refund_grants", "thread_id <> %s", (THREAD,)) == before
    p = receipt.statement["predicate"]
    assert p["methods"]["target:refund_grants"] == "atomic-transaction"
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    assert p["pre_state"]["digest"]["sha256"] == expected
    verify_receipt(receipt.to_json(), [signer.public_key])


@pytest.mark.parametrize(
    ("ddl", "target", "message"),
    [
        ("", SqlTarget("no_such_table", "thread_id"), "does not exist"),
        ("", SqlTarget("refund_grants", "nope"), "has no column 'nope'"),
        ("CREATE TABLE numbers (id text PRIMARY KEY, thread_id integer)",
         SqlTarget("numbers", "thread_id"), "is int4, not text"),
        ("CREATE TABLE no_pk (thread_id text)", SqlTarget("no_pk", "thread_id"),
         "has no primary key"),
    ],
)  # fmt: skip
def test_bad_targets_refused_postgres(
    pg_db: str, signer: Signer, ddl: str, target: SqlTarget, message: str
) -> None:
    with connect(pg_db) as c:
        c.execute(LEDGER)
        if ddl:
            c.execute(ddl)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD])
        n = count(pg_db, "checkpoints", "thread_id = %s", (THREAD,))
        with pytest.raises(ConfigurationError, match=message):
            saver.erase_thread(THREAD, targets=[target])
    assert count(pg_db, "checkpoints", "thread_id = %s", (THREAD,)) == n
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 2


@pytest.fixture
def other_pg_db(pg_dsn: str) -> Iterator[str]:
    """A second database on the server: where the target table lives."""
    with fresh_database(pg_dsn, "t") as dsn:
        yield dsn


KILL_BEFORE_SWEEP = """
import os, sys
from erasure_receipts import AttestingPostgresSaver, Signer, SqlTarget
from erasure_receipts._backends import targets as parts

def die(self):
    os.kill(os.getpid(), 9)

parts.OtherDatabasePart.sweep = die
dsn, other, archive, thread = sys.argv[1:5]
target = SqlTarget("refund_grants", "thread_id", database=other)
with AttestingPostgresSaver.from_conn_string(
    dsn, signer=Signer.from_seed(bytes(range(32))), archive=archive, targets=[target]
) as saver:
    saver.erase_thread(thread)
print("not killed")
"""


def test_kill_9_between_commit_and_sweep_postgres(
    pg_db: str, other_pg_db: str, tmp_path: Path, signer: Signer
) -> None:
    """A PostgreSQL saver whose target is a table of another PostgreSQL database: the
    process dies after the checkpoints' commit, before the sweep; recovery issues the
    one receipt and the target's rows are 0."""
    with connect(other_pg_db) as c:
        c.execute(LEDGER)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        run(other_pg_db, saver, [THREAD, BYSTANDERS[0]])
    other = fingerprint(other_pg_db, "refund_grants", "thread_id <> %s", (THREAD,))
    archive = tmp_path / "archive"
    killed = subprocess.run(
        [sys.executable, "-c", KILL_BEFORE_SWEEP, pg_db, other_pg_db, str(archive), THREAD],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert count(pg_db, "checkpoints", "thread_id = %s", (THREAD,)) == 0
    assert count(other_pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 2
    target = SqlTarget("refund_grants", "thread_id", database=other_pg_db)
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, archive=archive, targets=[target]
    ) as saver:
        assert len(saver.recover_receipts(min_age_seconds=0)) == 1
        assert saver.recover_receipts(min_age_seconds=0) == []
    assert count(other_pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert fingerprint(other_pg_db, "refund_grants", "thread_id <> %s", (THREAD,)) == other
    [path] = archive.glob("*.json")
    receipt = Receipt.from_json(path.read_bytes())
    p = receipt.statement["predicate"]
    assert p["methods"]["target:refund_grants"] == "sweep"
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    assert "issued_from_journal" in [c["name"] for c in p["checks"]]
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_late_grant_for_the_erased_thread_is_refused_postgres(pg_db: str, signer: Signer) -> None:
    import psycopg

    with connect(pg_db) as c:
        c.execute(LEDGER)
    target = SqlTarget("refund_grants", "thread_id")
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, targets=[target]) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD, BYSTANDERS[0]])
        receipt = saver.erase_thread(THREAD)
        assert receipt.statement["predicate"]["targets"][0]["tombstone"] is True
        with connect(pg_db) as app, pytest.raises(psycopg.errors.RaiseException, match="erased"):
            app.execute("INSERT INTO refund_grants (grant_id, thread_id, consumed) "
                        "VALUES ('late', %s, 1)", (THREAD,))  # fmt: skip
        with connect(pg_db) as app:
            app.execute("INSERT INTO refund_grants (grant_id, thread_id, consumed) "
                        "VALUES ('ok', %s, 1)", (BYSTANDERS[1],))  # fmt: skip
        # a second erasure finds the trigger in place
        saver.erase_thread(BYSTANDERS[0])
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert count(pg_db, "refund_grants", "thread_id = %s", (BYSTANDERS[1],)) == 1


def test_a_needle_in_another_threads_grant_refuses_postgres(pg_db: str, signer: Signer) -> None:
    """The needle is in a bytea column of a bystander's grant (raw bytes, not hex text):
    the subject erasure is refused before anything is deleted."""
    from erasure_receipts import NeedlesFoundError

    needle = "carol.refund@example.com"
    with connect(pg_db) as c:
        c.execute(LEDGER)
        c.execute("INSERT INTO refund_grants VALUES ('x', %s, 1, 'r', %s, 1)",
                  (BYSTANDERS[0], json.dumps({"email": needle}).encode()))  # fmt: skip
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD])
        n = count(pg_db, "checkpoints", "thread_id = %s", (THREAD,))
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_subject("carol", threads=[THREAD], needles=[needle],
                                targets=[SqlTarget("refund_grants", "thread_id")])  # fmt: skip
        assert "target:refund_grants" in str(err.value) and "column=payload" in str(err.value)
        assert count(pg_db, "checkpoints", "thread_id = %s", (THREAD,)) == n
        assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 2
        with connect(pg_db) as c:  # the bystander's copy handled: now the erasure passes
            c.execute("DELETE FROM refund_grants WHERE grant_id = 'x'")
        receipt = saver.erase_subject(  # (the target table locked with the others)
            "carol",
            threads=[THREAD],
            needles=[needle],
            targets=[SqlTarget("refund_grants", "thread_id")],
        )
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert receipt.statement["predicate"]["needles"]["searched"] == "database"
    verify_receipt(receipt.to_json(), [signer.public_key])


async def test_async_postgres_saver_erases_targets(pg_db: str, signer: Signer) -> None:
    from erasure_receipts import AsyncAttestingPostgresSaver

    with connect(pg_db) as c:
        c.execute(LEDGER)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD, BYSTANDERS[0]])
    before = fingerprint(pg_db, "refund_grants", "thread_id <> %s", (THREAD,))
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, targets=[SqlTarget("refund_grants", "thread_id")]
    ) as asaver:
        receipt = await asaver.aerase_thread(THREAD)
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert fingerprint(pg_db, "refund_grants", "thread_id <> %s", (THREAD,)) == before
    p = receipt.statement["predicate"]
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    assert p["targets"][0]["tombstone"] is True
    verify_receipt(receipt.to_json(), [signer.public_key])


# -- the needle check covers a target in another PostgreSQL database -----------------

TICKETS = """CREATE TABLE tickets (
    ticket_id text PRIMARY KEY, user_id text NOT NULL, body text, attachment bytea)"""
EMAIL = "carol.refund@example.com"


def everything(dsn: str, other: str) -> dict[str, str]:
    """A fingerprint of every row of the saver's tables, its ledger and the tickets."""
    out = {t: fingerprint(dsn, t, "true", ()) for t in (*TABLES, "refund_grants")}
    out["tickets"] = fingerprint(other, "tickets", "true", ())
    return out


def test_a_needle_in_another_databases_target_refuses_postgres(
    pg_db: str, other_pg_db: str, signer: Signer
) -> None:
    """carol's tickets live in another PostgreSQL database; bob's ticket quotes her
    e-mail (bytea): the subject erasure with needles= is refused and nothing is deleted
    anywhere; once bob's copy is handled it passes and the receipt's needles hold."""
    from erasure_receipts import NeedlesFoundError

    with connect(pg_db) as c:
        c.execute(LEDGER)
    with connect(other_pg_db) as c:
        c.execute(TICKETS)
        for row in (
            ("t-1", "carol", f"refund for {EMAIL}", None),
            ("t-2", "carol", "any news?", b"\x00\x01"),
            ("t-3", "bob", "escalated", json.dumps({"cc": EMAIL}).encode()),
        ):
            c.execute("INSERT INTO tickets VALUES (%s, %s, %s, %s)", row)  # fmt: skip
    tickets = SqlTarget("tickets", "user_id", key="subject", database=other_pg_db)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD])
        before = everything(pg_db, other_pg_db)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL], targets=[tickets])
        assert "target:tickets" in str(err.value) and "column=attachment" in str(err.value)
        assert EMAIL not in str(err.value)
        assert everything(pg_db, other_pg_db) == before  # nothing deleted anywhere
        assert not saver.is_erased(THREAD)
        with connect(other_pg_db) as c:
            c.execute("UPDATE tickets SET attachment = NULL WHERE ticket_id = 't-3'")
        receipt = saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL], targets=[tickets])
    assert count(other_pg_db, "tickets", "user_id = %s", ("carol",)) == 0
    assert count(other_pg_db, "tickets", "user_id = %s", ("bob",)) == 1
    assert count(pg_db, "checkpoints", "thread_id = %s", (THREAD,)) == 0
    p = receipt.statement["predicate"]
    assert p["needles"]["searched"] == "database" and p["needles"]["occurrences_after"] == 0
    assert p["methods"]["target:tickets"] == "sweep"
    verify_receipt(receipt.to_json(), [signer.public_key])


# -- after="threads_verified_gone", a failing target, vectors, sweep and replay --------


def dependent() -> SqlTarget:
    return SqlTarget("refund_grants", "thread_id", after="threads_verified_gone")


def test_dependent_target_postgres(pg_db: str, signer: Signer) -> None:
    """Refused (the needle is still in the latest state): the grants are untouched and
    the error says so; a history erasure keeps them; the thread's erasure takes them."""
    from erasure_receipts import NeedlesFoundError

    with connect(pg_db) as c:
        c.execute(LEDGER)
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, targets=[dependent()]
    ) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD, BYSTANDERS[0]])
        grants = fingerprint(pg_db, "refund_grants", "true", ())
        cps = fingerprint(pg_db, "checkpoints", "true", ())
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history(THREAD, needles=["refund please"])
        assert "dependent target(s) target:refund_grants are untouched" in str(err.value)
        assert fingerprint(pg_db, "refund_grants", "true", ()) == grants
        assert fingerprint(pg_db, "checkpoints", "true", ()) == cps
        with pytest.raises(NeedlesFoundError, match="untouched"):  # a subject's, too
            saver.erase_subject("carol", threads=[THREAD], needles=["refund please"])
        assert fingerprint(pg_db, "refund_grants", "true", ()) == grants
        history = saver.erase_history(THREAD)
        assert fingerprint(pg_db, "refund_grants", "true", ()) == grants
        other = fingerprint(pg_db, "refund_grants", "thread_id <> %s", (THREAD,))
        receipt = saver.erase_thread(THREAD)
    assert "targets" not in history.statement["predicate"]
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert fingerprint(pg_db, "refund_grants", "thread_id <> %s", (THREAD,)) == other
    p = receipt.statement["predicate"]
    assert p["targets"][0]["after"] == "threads_verified_gone"
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_target_that_raises_deletes_nothing_postgres(pg_db: str, signer: Signer) -> None:
    from erasure_receipts import ErasureIncompleteError, FunctionTarget

    deleted: list[Any] = []

    def broken(key: str) -> dict[str, bytes]:
        raise OSError("cache server unreachable")

    cache = FunctionTarget("cache", items=broken, delete=lambda k, ks: deleted.append(ks))
    with connect(pg_db) as c:
        c.execute(LEDGER)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD])
        before = {t: fingerprint(pg_db, t, "true", ()) for t in (*TABLES, "refund_grants")}
        with pytest.raises(ErasureIncompleteError, match="cache server unreachable") as err:
            saver.erase_thread(THREAD, targets=[dependent(), cache])
        assert "nothing was deleted" in str(err.value)
        assert not saver.is_erased(THREAD)
    assert {t: fingerprint(pg_db, t, "true", ()) for t in before} == before
    assert deleted == []


def test_vector_store_target_with_a_postgres_saver(pg_db: str, signer: Signer) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from erasure_receipts import VectorStoreTarget

    vs = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    carol = [Document(f"carol: {EMAIL} #{i}", metadata={"user_id": "carol"}) for i in range(3)]
    vs.add_documents([*carol, Document("dave's note", metadata={"user_id": "dave"})])
    dave = {k: v for k, v in vs.store.items() if v["metadata"]["user_id"] == "dave"}
    with connect(pg_db) as c:
        c.execute(LEDGER)
    target = VectorStoreTarget(vs, metadata_key="user_id")
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, targets=[target]) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD])
        receipt = saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL])
    assert vs.store == dave
    p = receipt.statement["predicate"]
    assert p["methods"]["target:vectors"] == "sweep"
    assert {u["name"]: u["leaves"] for u in p["units"]}["target:vectors"] == 3
    assert p["needles"]["occurrences_after"] == 0
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_retention_sweep_erases_each_thread_with_its_targets_postgres(
    pg_db: str, tmp_path: Path, signer: Signer
) -> None:
    from datetime import timedelta

    with connect(pg_db) as c:
        c.execute(LEDGER)
    archive = tmp_path / "receipts"
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, archive=archive, targets=[dependent()]
    ) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD, *BYSTANDERS])
        result = saver.erase_idle_threads(older_than=timedelta(0))
    assert result.ok and result.threads == 3
    assert count(pg_db, "refund_grants", "true", ()) == 0
    assert count(pg_db, "checkpoints", "true", ()) == 0
    receipts = [Receipt.from_json(p.read_bytes()) for p in sorted(archive.glob("*.json"))]
    assert receipts
    grants = 0
    for r in receipts:
        p = r.statement["predicate"]
        grants += p["pre_state"]["tables"]["target:refund_grants"]["rows"]
        assert p["methods"]["target:refund_grants"] == "atomic-transaction"
        verify_receipt(r.to_json(), [signer.public_key])
    assert grants == 6


@pytest.fixture
def restored_db(pg_dsn: str) -> Iterator[str]:
    """An empty database to restore a dump into."""
    with fresh_database(pg_dsn, "r") as dsn:
        yield dsn


def test_replay_after_a_restore_erases_the_targets_again_postgres(
    pg_db: str, restored_db: str, tmp_path: Path, signer: Signer
) -> None:
    with connect(pg_db) as c:
        c.execute(LEDGER)
    archive, dump = tmp_path / "receipts", tmp_path / "backup.dump"
    targets = [SqlTarget("refund_grants", "thread_id")]
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, archive=archive, targets=targets
    ) as saver:
        saver.setup()
        run(pg_db, saver, [THREAD, BYSTANDERS[0]])
        subprocess.run(["pg_dump", "-Fc", "-f", str(dump), "-d", pg_db], check=True)
        first = saver.erase_thread(THREAD)
    subprocess.run(["pg_restore", "--no-owner", "-d", restored_db, str(dump)], check=True)
    assert count(restored_db, "refund_grants", "thread_id = %s", (THREAD,)) == 2
    other = fingerprint(restored_db, "refund_grants", "thread_id <> %s", (THREAD,))
    with AttestingPostgresSaver.from_conn_string(
        restored_db, signer=signer, archive=archive, targets=targets
    ) as saver:
        result = saver.replay_erasures(archive)
    assert result.ok and result.re_erased == 1, result.to_json()
    assert count(restored_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert count(restored_db, "checkpoints", "thread_id = %s", (THREAD,)) == 0
    assert fingerprint(restored_db, "refund_grants", "thread_id <> %s", (THREAD,)) == other
    [again] = result.receipts
    p = again.statement["predicate"]
    assert p["replay_of"] == first.receipt_id
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    assert p["targets"][0]["tombstone"] is True
    verify_receipt(again.to_json(), [signer.public_key])
