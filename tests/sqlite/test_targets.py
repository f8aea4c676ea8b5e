"""Erasure targets on SQLite: the application's own tables erased with a thread or a
subject, in the erasure transaction, in the same receipt.

The refund-ledger scenario: a real LangGraph graph whose tool node writes a grant row
keyed by thread id into an application table of the saver's database file (through a
connection of its own, as an application does). Assertions are on raw rows read
through fresh connections.
"""

from __future__ import annotations

import gc
import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from erasure_receipts import (
    AttestingSqliteSaver,
    ConfigurationError,
    ErasureIncompleteError,
    NeedlesFoundError,
    Signer,
    SqlTarget,
    verify_receipt,
)
from erasure_receipts.digest import encode_row, leaf_hash
from scenario import columns, naive_root, pk_columns, raw_rows

THREAD = "refund-chat-1"
BYSTANDERS = ["refund-chat-2", "refund-chat-3"]
EMAIL = "carol.refund@example.com"

LEDGER = """CREATE TABLE refund_grants (
    grant_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, amount_cents INTEGER,
    reason TEXT, payload BLOB, consumed INTEGER NOT NULL DEFAULT 0)"""


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def make_graph(db: Path, saver: Any) -> Any:
    """``assistant`` decides, ``refund_tool`` writes the grant row (the application's own
    connection to the same file) and answers."""

    def assistant(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content="Let me issue that refund.")]}

    def refund_tool(state: State, config: RunnableConfig) -> dict[str, Any]:
        tid = config["configurable"]["thread_id"]
        asked = str(state["messages"][0].content)
        with closing(sqlite3.connect(db)) as app, app:  # closed: no handle outlives the call
            n = app.execute("SELECT count(*) FROM refund_grants").fetchone()[0]
            app.execute(
                "INSERT INTO refund_grants VALUES (?, ?, ?, ?, ?, 1)",
                (
                    f"g-{uuid.uuid4().hex[:12]}",
                    tid,
                    1250 + n,
                    asked,
                    json.dumps({"by": tid}).encode(),
                ),
            )
        return {"messages": [AIMessage(content=f"Refund granted for {tid}.")]}

    g = StateGraph(State)
    g.add_node("assistant", assistant)
    g.add_node("refund_tool", refund_tool)
    g.add_edge(START, "assistant")
    g.add_edge("assistant", "refund_tool")
    g.add_edge("refund_tool", END)
    return g.compile(checkpointer=saver)


def run_chats(db: Path, saver: Any, threads: list[str]) -> None:
    graph = make_graph(db, saver)
    for tid in threads:
        for turn in (f"refund please, I am {EMAIL}", "and once more"):
            graph.invoke(
                {"messages": [HumanMessage(content=turn)]},
                {"configurable": {"thread_id": tid, "user_id": "carol"}},
            )


@pytest.fixture
def ledger_db(tmp_path: Path) -> Path:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as c:
        c.execute(LEDGER)
    return db


def grants(db: Path, thread_id: str) -> list[tuple[Any, ...]]:
    return raw_rows(db, "refund_grants", "thread_id = ?", (thread_id,))


def digest_of(db: Path, parts: list[tuple[str, str, str, tuple[Any, ...]]]) -> str:
    """The pre-state root from raw rows of a copy: ``(receipt table, stored table, where,
    params)`` in receipt-table order, leaves named by the stored table (9.13)."""
    hashes = []
    for _, table, where, params in sorted(parts):
        cols, pk = columns(db, table), pk_columns(db, table)
        for row in raw_rows(db, table, where, params):
            named = list(zip(cols, row, strict=True))
            hashes.append(leaf_hash(encode_row(table, [row[cols.index(c)] for c in pk], named)))
    return naive_root(hashes).hex()


def test_refund_ledger_erased_with_the_thread(
    ledger_db: Path, tmp_path: Path, signer: Signer, pub_pem: Path
) -> None:
    db = ledger_db
    target = SqlTarget("refund_grants", "thread_id")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, targets=[target]) as saver:
        run_chats(db, saver, [THREAD, *BYSTANDERS])
        assert len(grants(db, THREAD)) == 2
        before = {t: grants(db, t) for t in BYSTANDERS}
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        copy = tmp_path / "pre-erasure-copy.db"
        shutil.copy(db, copy)
        receipt = saver.erase_thread(THREAD)

    assert grants(db, THREAD) == []
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,)) == []
    assert {t: grants(db, t) for t in BYSTANDERS} == before  # byte-identical bystanders
    p = receipt.statement["predicate"]
    assert p["methods"] == {"checkpoints": "atomic-transaction",
                            "target:refund_grants": "atomic-transaction"}  # fmt: skip
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    assert p["post_state"]["tables"]["target:refund_grants"] == {"rows": 0, "bytes": 0}
    assert p["targets"] == [
        {"name": "refund_grants", "type": "sql", "key": "thread", "method": "atomic-transaction",
         "table": "refund_grants", "key_column": "thread_id", "tombstone": True}
    ]  # fmt: skip
    expected = digest_of(copy, [
        ("checkpoints", "checkpoints", "thread_id = ?", (THREAD,)),
        ("target:refund_grants", "refund_grants", "thread_id = ?", (THREAD,)),
        ("writes", "writes", "thread_id = ?", (THREAD,)),
    ])  # fmt: skip
    assert p["pre_state"]["digest"]["sha256"] == expected
    verify_receipt(receipt.to_json(), [signer.public_key])
    # the CLI's verifier (its fast path) agrees
    path = tmp_path / "r.json"
    path.write_bytes(receipt.to_json())
    out = subprocess.run(
        [sys.executable, "-m", "erasure_receipts", "verify", str(path), "--key", str(pub_pem)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_per_call_targets_and_subject_units(
    ledger_db: Path, tmp_path: Path, signer: Signer, pub_pem: Path
) -> None:
    db = ledger_db
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE tickets (id INTEGER PRIMARY KEY, user_id TEXT, body TEXT)")
        c.executemany(
            "INSERT INTO tickets (user_id, body) VALUES (?, ?)",
            [("carol", f"ticket from {EMAIL}"), ("carol", "second"), ("dave", "other")],
        )
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD, BYSTANDERS[0]])
        dave = raw_rows(db, "tickets", "user_id = ?", ("dave",))
        receipt = saver.erase_subject(
            "carol",
            threads=[THREAD, BYSTANDERS[0]],
            needles=[EMAIL],
            targets=[
                SqlTarget("refund_grants", "thread_id"),
                SqlTarget("tickets", "user_id", key="subject"),
            ],
        )
    assert grants(db, THREAD) == [] and grants(db, BYSTANDERS[0]) == []
    assert raw_rows(db, "tickets", "user_id = ?", ("carol",)) == []
    assert raw_rows(db, "tickets", "user_id = ?", ("dave",)) == dave
    p = receipt.statement["predicate"]
    units = {u["name"]: u for u in p["units"]}
    assert set(units) == {f"thread:{THREAD}", f"thread:{BYSTANDERS[0]}", "target:tickets"}
    assert units["target:tickets"]["leaves"] == 2
    assert set(units["target:tickets"]["tables"]) == {"target:tickets"}
    assert units[f"thread:{THREAD}"]["tables"]["target:refund_grants"]["rows"] == 2
    assert [t["name"] for t in p["targets"]] == ["refund_grants", "tickets"]
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_needle_left_in_a_target_refuses_the_erasure(ledger_db: Path, signer: Signer) -> None:
    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD, "someone-else"])
        # another thread's grant quotes the email: a needle outside the erased scope
        before = grants(db, "someone-else") + grants(db, THREAD)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_subject(
                "carol", threads=[THREAD], needles=[EMAIL],
                targets=[SqlTarget("refund_grants", "thread_id")],
            )  # fmt: skip
    assert "target:refund_grants" in str(err.value)
    assert EMAIL not in str(err.value)
    assert grants(db, "someone-else") + grants(db, THREAD) == before
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (SqlTarget("no_such_table", "thread_id"), "does not exist"),
        (SqlTarget("refund_grants", "no_such_column"), "has no column 'no_such_column'"),
        (SqlTarget("numbers", "thread_id"), "is INTEGER, not text"),
        (SqlTarget("no_pk", "thread_id"), "has no primary key"),
    ],
)
def test_bad_targets_are_refused_before_anything_is_deleted(
    ledger_db: Path, signer: Signer, target: SqlTarget, message: str
) -> None:
    db = ledger_db
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE numbers (id TEXT PRIMARY KEY, thread_id INTEGER)")
        c.execute("CREATE TABLE no_pk (thread_id TEXT, note TEXT)")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD])
        cps = raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))
        with pytest.raises(ConfigurationError, match=message):
            saver.erase_thread(THREAD, targets=[target])
        assert not saver.is_erased(THREAD)
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,)) == cps
    assert len(grants(db, THREAD)) == 2


def test_a_target_that_raises_stops_the_erasure_before_anything_is_deleted(
    ledger_db: Path, signer: Signer
) -> None:
    from erasure_receipts import FunctionTarget

    db = ledger_db
    deleted: list[Any] = []

    def broken(key: str) -> dict[str, bytes]:
        raise OSError("cache server unreachable")

    cache = FunctionTarget("cache", items=broken, delete=lambda k, ks: deleted.append(ks))
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD])
        cps = raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))
        with pytest.raises(ErasureIncompleteError, match="cache server unreachable") as err:
            saver.erase_thread(THREAD, targets=[SqlTarget("refund_grants", "thread_id"), cache])
        assert "nothing was deleted" in str(err.value)
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,)) == cps
    assert len(grants(db, THREAD)) == 2
    assert deleted == []


def test_target_arguments_are_checked(signer: Signer) -> None:
    with pytest.raises(ConfigurationError, match="plain SQL identifier"):
        SqlTarget("grants; DROP TABLE x", "thread_id")
    with pytest.raises(ConfigurationError, match='key= must be "thread" or "subject"'):
        SqlTarget("refund_grants", "thread_id", key="user")
    with pytest.raises(ConfigurationError, match="after="):
        SqlTarget("refund_grants", "thread_id", after="later")
    with pytest.raises(ConfigurationError, match="unique"):
        AttestingSqliteSaver(
            sqlite3.connect(":memory:"), signer=signer,
            targets=[SqlTarget("a", "k"), SqlTarget("a", "other")],
        )  # fmt: skip


# -- after="threads_verified_gone": the grant ledger next to a resumable checkpoint -------


def dependent() -> SqlTarget:
    return SqlTarget("refund_grants", "thread_id", after="threads_verified_gone")


def test_dependent_target_erased_with_the_whole_thread(ledger_db: Path, signer: Signer) -> None:
    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, targets=[dependent()]
    ) as saver:
        run_chats(db, saver, [THREAD, BYSTANDERS[0]])
        other = grants(db, BYSTANDERS[0])
        receipt = saver.erase_thread(THREAD)
    assert grants(db, THREAD) == []
    assert grants(db, BYSTANDERS[0]) == other
    p = receipt.statement["predicate"]
    assert p["targets"][0]["after"] == "threads_verified_gone"
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_dependent_target_untouched_when_the_thread_erasure_is_refused(
    ledger_db: Path, signer: Signer
) -> None:
    """The needle is still in the thread's latest state: the history erasure is refused,
    and the thread's grant rows (a consumed grant next to a resumable checkpoint) are
    untouched - and the error says so."""
    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, targets=[dependent()]
    ) as saver:
        run_chats(db, saver, [THREAD])
        before = grants(db, THREAD)
        cps = raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history(THREAD, needles=[EMAIL])
        assert "dependent target(s) target:refund_grants are untouched" in str(err.value)
        assert grants(db, THREAD) == before
        assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,)) == cps
        # A history erasure that succeeds keeps the thread, and so its grant rows.
        receipt = saver.erase_history(THREAD)
    assert grants(db, THREAD) == before
    p = receipt.statement["predicate"]
    assert "targets" not in p and not any(t.startswith("target:") for t in p["methods"])
    kept = [c for c in p["checks"] if c["name"] == "targets_kept"]
    assert kept and "target:refund_grants" in kept[0]["detail"]


def test_dependent_target_untouched_when_a_subject_erasure_is_refused(
    ledger_db: Path, signer: Signer
) -> None:
    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD, "unlisted-chat"])
        before = grants(db, THREAD)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_subject("carol", threads=[THREAD], needles=[EMAIL],
                                targets=[dependent()])  # fmt: skip
    assert "untouched" in str(err.value)
    assert grants(db, THREAD) == before


def test_a_retention_sweep_erases_each_thread_with_its_targets(
    ledger_db: Path, tmp_path: Path, signer: Signer
) -> None:
    from datetime import timedelta

    from erasure_receipts import Receipt

    db = ledger_db
    archive = tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, targets=[dependent()]
    ) as saver:
        run_chats(db, saver, [THREAD, *BYSTANDERS])
        result = saver.erase_idle_threads(older_than=timedelta(0))
    assert result.threads == 3
    for t in (THREAD, *BYSTANDERS):
        assert grants(db, t) == []
    receipts = [Receipt.from_json(p.read_bytes()) for p in sorted(archive.glob("*.json"))]
    assert len(receipts) == 3
    for r in receipts:
        tables = r.statement["predicate"]["pre_state"]["tables"]
        assert tables["target:refund_grants"]["rows"] == 2
        verify_receipt(r.to_json(), [signer.public_key])


def test_privacy_mode_refuses_targets_before_anything_is_deleted(
    ledger_db: Path, signer: Signer
) -> None:
    from erasure_receipts import CommitmentKey

    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD])
        with pytest.raises(ConfigurationError, match="privacy mode"):
            saver.erase_subject(
                "carol", threads=[THREAD], privacy="commitments",
                commitment_key=CommitmentKey.generate(),
                targets=[SqlTarget("refund_grants", "thread_id")],
            )  # fmt: skip
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))
    assert len(grants(db, THREAD)) == 2


def test_locate_searches_the_savers_targets(ledger_db: Path, signer: Signer) -> None:
    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, targets=[SqlTarget("refund_grants", "thread_id")]
    ) as saver:
        run_chats(db, saver, [THREAD])
        found = [loc for loc in saver.locate([EMAIL]) if loc.table == "target:refund_grants"]
    assert {loc.column for loc in found} == {"reason"} and len(found) == 2
    assert all(loc.via == "target" for loc in found)


async def test_async_saver_erases_targets(ledger_db: Path, signer: Signer) -> None:
    from erasure_receipts import AsyncAttestingSqliteSaver

    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD, BYSTANDERS[0]])
    other = grants(db, BYSTANDERS[0])
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, targets=[dependent()]
    ) as asaver:
        receipt = await asaver.aerase_thread(THREAD)
        subject = await asaver.aerase_subject("carol", threads=[BYSTANDERS[0]])
        with pytest.raises(ConfigurationError, match="a table is one target"):
            await asaver.aerase_thread(
                "x", targets=[SqlTarget("refund_grants", "thread_id", name="again")]
            )
    assert grants(db, THREAD) == [] and grants(db, BYSTANDERS[0]) == []
    assert receipt.statement["predicate"]["pre_state"]["tables"]["target:refund_grants"][
        "rows"] == 2  # fmt: skip
    units = {u["name"]: u for u in subject.statement["predicate"]["units"]}
    ledger = units[f"thread:{BYSTANDERS[0]}"]["tables"]["target:refund_grants"]
    assert ledger["rows"] == len(other) == 2
    verify_receipt(receipt.to_json(), [signer.public_key])
    verify_receipt(subject.to_json(), [signer.public_key])


def test_a_late_grant_for_the_erased_thread_is_refused(ledger_db: Path, signer: Signer) -> None:
    """The tombstone guards the target table too: a graph still running on the erased
    thread cannot write a grant for it; a bystander can; a new conversation under the
    id (policy new_conversations) can, once it has started."""
    db = ledger_db
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, targets=[SqlTarget("refund_grants", "thread_id")]
    ) as saver:
        run_chats(db, saver, [THREAD, BYSTANDERS[0]])
        saver.erase_thread(THREAD)
        with sqlite3.connect(db) as app, pytest.raises(sqlite3.IntegrityError, match="erased"):
            app.execute("INSERT INTO refund_grants (grant_id, thread_id) VALUES ('late', ?)",
                        (THREAD,))  # fmt: skip
        with sqlite3.connect(db) as app, pytest.raises(sqlite3.IntegrityError, match="erased"):
            app.execute("UPDATE refund_grants SET thread_id = ? WHERE thread_id = ?",
                        (THREAD, BYSTANDERS[0]))  # fmt: skip
        with sqlite3.connect(db) as app:
            app.execute("INSERT INTO refund_grants (grant_id, thread_id) VALUES ('ok', ?)",
                        (BYSTANDERS[1],))  # fmt: skip
        assert grants(db, THREAD) == []
        run_chats(db, saver, [THREAD])  # a new conversation: its tool's grants are written
    assert len(grants(db, THREAD)) == 2


def test_replay_after_a_restore_erases_the_targets_again(
    ledger_db: Path, tmp_path: Path, signer: Signer
) -> None:
    db = ledger_db
    archive = tmp_path / "receipts"
    backup = tmp_path / "backup.db"
    targets = [SqlTarget("refund_grants", "thread_id")]
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, targets=targets
    ) as saver:
        run_chats(db, saver, [THREAD, BYSTANDERS[0]])
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copy(db, backup)
        first = saver.erase_thread(THREAD)
    gc.collect()  # every reader's connection closed before the file is replaced
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup, db)  # the restore brings the grant rows back too
    assert len(grants(db, THREAD)) == 2
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, targets=targets
    ) as saver:
        result = saver.replay_erasures(archive)
    assert result.ok and result.re_erased == 1
    assert grants(db, THREAD) == [] and len(grants(db, BYSTANDERS[0])) == 2
    [again] = result.receipts
    p = again.statement["predicate"]
    assert p["replay_of"] == first.receipt_id
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    verify_receipt(again.to_json(), [signer.public_key])
