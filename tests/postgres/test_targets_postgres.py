"""Erasure targets on PostgreSQL, against a real server: the refund ledger in the
saver's own database, erased in the erasure transaction, and bad targets refused
before anything is deleted. Raw rows are read through separate connections."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from erasure_receipts import (
    AttestingPostgresSaver,
    ConfigurationError,
    Signer,
    SqlTarget,
    verify_receipt,
)
from erasure_receipts.digest import encode_row, leaf_hash
from pg_helpers import connect, count, fingerprint, raw_rows, table_shape
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
