"""Resetting a conversation: ``delete_thread(t)`` then ``t`` again as a new conversation.

Under the default tombstone policy ``new_conversations`` the database triggers let a new
conversation start under the erased id and still refuse whatever continues the erased
one: a checkpoint whose parent is an erased checkpoint, writes for an erased checkpoint,
a run that began before the erasure (its next checkpoint, or a subgraph call it starts).
``tombstone_policy="refuse_all"`` refuses every write until ``reopen_thread()``. Every
thread receipt says which policy its tombstone enforces. Enforced by the triggers, so a
plain LangGraph saver on another connection obeys them too; SQLite and PostgreSQL.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from erasure_receipts import (
    AttestingPostgresSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    Signer,
    ThreadErasedError,
    verify_receipt,
)

T = "conversation-1"


class State(TypedDict):
    messages: Annotated[list[str], operator.add]


def chat(saver: Any) -> Any:
    g = StateGraph(State)
    g.add_node("echo", lambda s: {"messages": [f"echo {len(s['messages'])}"]})
    g.add_edge(START, "echo")
    g.add_edge("echo", END)
    return g.compile(checkpointer=saver)


def cfg(thread: str = T) -> Any:
    return {"configurable": {"thread_id": thread}}


def put(saver: Any, parent: Any, *, cid: str | None = None, ns: str = "", meta: Any = None) -> Any:
    config: dict[str, Any] = {"configurable": {"thread_id": T, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    c = empty_checkpoint()
    c["id"] = cid or str(uuid6())
    return saver.put(config, c, {"source": "loop", "step": 1, **(meta or {})}, {})


def attempts(saver: Any, plain: Any, erased_head: Any) -> dict[str, Any]:
    """Every way to continue the erased conversation, each through the plain saver (the
    triggers decide, not this library)."""
    root = {"parents": {"": erased_head["configurable"]["checkpoint_id"]}}
    return {
        "child of an erased checkpoint": lambda: put(plain, erased_head),
        "writes for an erased checkpoint": lambda: plain.put_writes(
            erased_head, [("messages", ["resurrected"])], "task-old"
        ),
        "subgraph call of a run begun before": lambda: put(plain, None, ns="node:t", meta=root),
        "an id from before the erasure": lambda: put(
            plain, None, cid=erased_head["configurable"]["checkpoint_id"][:-1] + "0"
        ),
    }


def run_reset(saver: Any, plain: Any, raw_count: Any) -> Any:
    graph = chat(saver)
    graph.invoke({"messages": ["hello"]}, cfg())
    graph.invoke({"messages": ["more"]}, cfg())
    erased_head = saver.get_tuple(cfg()).config
    saver.delete_thread(T)
    r = saver.last_receipt
    assert r.predicate["scope"]["tombstone"] is True
    assert r.predicate["scope"]["tombstone_policy"] == "new_conversations"
    assert verify_receipt(r.to_json(), [saver.signer.public_key])
    for what, attempt in attempts(saver, plain, erased_head).items():
        with pytest.raises(Exception, match="thread erased"):
            attempt()
        assert raw_count() == 0, what
    # the common pattern: the same id again, as a new conversation
    out = graph.invoke({"messages": ["a new start"]}, cfg())
    assert out["messages"] == ["a new start", "echo 1"]
    out = graph.invoke({"messages": ["and on"]}, cfg())
    assert out["messages"] == ["a new start", "echo 1", "and on", "echo 3"]
    assert saver.is_erased(T)  # the tombstone stays: the erased conversation stays closed
    for attempt in attempts(saver, plain, erased_head).values():
        with pytest.raises(Exception, match="thread erased"):
            attempt()
    # erasing the new conversation closes it too
    new_head = saver.get_tuple(cfg()).config
    saver.delete_thread(T)
    with pytest.raises(Exception, match="thread erased"):
        put(plain, new_head)
    assert raw_count() == 0
    graph.invoke({"messages": ["third"]}, cfg())
    return r


def test_sqlite_reset_conversation(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        plain = SqliteSaver(sqlite3.connect(db, check_same_thread=False))

        def raw_count() -> int:
            c = sqlite3.connect(db)
            try:
                n = c.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
                return int(n + c.execute("SELECT count(*) FROM writes").fetchone()[0])
            finally:
                c.close()

        run_reset(saver, plain, raw_count)
        plain.conn.close()


@contextmanager
def pg(pg_db: str, signer: Signer, **kw: Any) -> Iterator[tuple[Any, Any]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, **kw) as saver:
        saver.setup()
        with psycopg.connect(pg_db, autocommit=True, prepare_threshold=0) as conn:
            yield saver, PostgresSaver(conn)


def pg_count(pg_db: str) -> int:
    import psycopg

    with psycopg.connect(pg_db) as c:
        n = 0
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            row = c.execute(f"SELECT count(*) FROM {table}").fetchone()
            n += int(row[0]) if row else 0
        return n


def test_postgres_reset_conversation(pg_db: str, signer: Signer) -> None:
    with pg(pg_db, signer) as (saver, plain):
        run_reset(saver, plain, lambda: pg_count(pg_db))


def test_postgres_refusal_names_the_receipt_not_the_thread(pg_db: str, signer: Signer) -> None:
    """The trigger's error (which the server logs) names the erasure's receipt."""
    import psycopg

    with pg(pg_db, signer) as (saver, plain):
        graph = chat(saver)
        graph.invoke({"messages": ["hello"]}, cfg())
        head = saver.get_tuple(cfg()).config
        r = saver.erase_thread(T)
        with pytest.raises(psycopg.errors.RaiseException) as refused:
            put(plain, head)
    diag = refused.value.diag
    assert diag.message_detail == f"erased by receipt {r.receipt_id}"
    assert T not in f"{diag.message_primary} {diag.message_detail} {diag.message_hint}"


def strict_reset(saver: Any) -> None:
    graph = chat(saver)
    graph.invoke({"messages": ["hello"]}, cfg())
    r = saver.erase_thread(T)
    assert r.predicate["scope"]["tombstone_policy"] == "refuse_all"
    assert verify_receipt(r.to_json(), [saver.signer.public_key])
    with pytest.raises(ThreadErasedError):
        graph.invoke({"messages": ["a new start"]}, cfg())
    assert saver.reopen_thread(T)
    graph.invoke({"messages": ["a new start"]}, cfg())


def test_sqlite_refuse_all_is_an_explicit_option(tmp_path: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, tombstone_policy="refuse_all"
    ) as saver:
        strict_reset(saver)


def test_postgres_refuse_all_is_an_explicit_option(pg_db: str, signer: Signer) -> None:
    with pg(pg_db, signer, tombstone_policy="refuse_all") as (saver, _):
        strict_reset(saver)


def test_unknown_policy_is_refused(signer: Signer) -> None:
    with pytest.raises(ConfigurationError, match="tombstone_policy"):
        AttestingSqliteSaver(sqlite3.connect(":memory:"), signer=signer, tombstone_policy="x")


def test_older_sqlite_triggers_are_replaced_in_place(tmp_path: Path, signer: Signer) -> None:
    """A database set up by an older version (triggers refusing every write, tombstones
    without a policy row) is upgraded by setup(); its old tombstones keep refusing every
    write (they were issued as such), new ones follow the policy."""
    from erasure_receipts.backends import sqlite as sb

    db = tmp_path / "a.db"
    conn = sqlite3.connect(db)
    SqliteSaver(conn).setup()
    old = sb.TOMBSTONE_DDL.split("CREATE TABLE IF NOT EXISTS erasure_tombstone_policies")[0]
    conn.executescript(
        old + "CREATE TRIGGER erasure_tombstone_checkpoints BEFORE INSERT ON checkpoints "
        "WHEN EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.thread_id) "
        f"BEGIN SELECT RAISE(ABORT, '{sb.TOMBSTONE_MESSAGE}'); END;"
    )
    conn.execute("INSERT INTO erasure_tombstones VALUES ('old', 'r-old', 't')")
    conn.commit()
    conn.close()
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        sql = saver.conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'erasure_tombstone_checkpoints'"
        ).fetchone()[0]
        assert "erasure_tombstone_policies" in sql
        with pytest.raises(ThreadErasedError):
            chat(saver).invoke({"messages": ["x"]}, cfg("old"))
        strict = chat(saver)
        strict.invoke({"messages": ["x"]}, cfg())
        saver.delete_thread(T)
        strict.invoke({"messages": ["new"]}, cfg())


def test_the_verifier_takes_the_policy_field_only_as_specified(
    tmp_path: Path, signer: Signer
) -> None:
    """``scope.tombstone_policy`` is optional (older receipts have none), one of the two
    policies, and only beside a tombstone; the one-pass batch check agrees."""
    import copy

    from erasure_receipts import MalformedReceiptError
    from erasure_receipts.receipt import statement_is_valid, validate_statement

    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as saver:
        chat(saver).invoke({"messages": ["x"]}, cfg())
        r = saver.erase_thread(T)
    good = r.statement
    assert good["predicate"]["scope"]["tombstone_policy"] == "new_conversations"
    validate_statement(copy.deepcopy(good))
    assert statement_is_valid(good)
    older = copy.deepcopy(good)
    del older["predicate"]["scope"]["tombstone_policy"]
    validate_statement(older)
    for bad_value, tombstone in (("sometimes", True), (None, True), ("refuse_all", False)):
        bad = copy.deepcopy(good)
        bad["predicate"]["scope"]["tombstone_policy"] = bad_value
        bad["predicate"]["scope"]["tombstone"] = tombstone
        with pytest.raises(MalformedReceiptError, match="tombstone_policy"):
            validate_statement(bad)
        assert not statement_is_valid(bad)


async def test_async_savers_reset_a_conversation(
    tmp_path: Path, pg_db: str, signer: Signer
) -> None:
    """The async savers share the policy: a reset works, continuing the old one fails."""
    from erasure_receipts import AsyncAttestingPostgresSaver, AsyncAttestingSqliteSaver

    for opened in (
        AsyncAttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer),
        AsyncAttestingPostgresSaver.from_conn_string(pg_db, signer=signer),
    ):
        async with opened as saver:
            await saver.setup()
            graph = chat(saver)
            await graph.ainvoke({"messages": ["hello"]}, cfg())
            head = (await saver.aget_tuple(cfg())).config
            await saver.adelete_thread(T)
            r = saver.last_receipt
            assert r.predicate["scope"]["tombstone_policy"] == "new_conversations"
            with pytest.raises(ThreadErasedError):
                await saver.aput_writes(head, [("messages", ["resurrected"])], "task-old")
            out = await graph.ainvoke({"messages": ["a new start"]}, cfg())
            assert out["messages"] == ["a new start", "echo 1"]


def test_utf16_sqlite_database_states_refuse_all(tmp_path: Path, signer: Signer) -> None:
    """The triggers read metadata as UTF-8 text; in a UTF-16 database they refuse every
    write, and the receipt says so instead of claiming new conversations."""
    db = tmp_path / "utf16.db"
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA encoding = 'UTF-16le'")
        c.execute("CREATE TABLE x (a)")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        head = put(saver, None)
        r = saver.erase_thread(T)
        assert r.predicate["scope"]["tombstone_policy"] == "refuse_all"
        with pytest.raises(ThreadErasedError):
            put(saver, None)
        with pytest.raises(ThreadErasedError):
            put(saver, head)
