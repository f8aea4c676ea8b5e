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

import asyncio
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
    from erasure_receipts._backends import sqlite as sb

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


# -- a run begun before the erasure, and new conversations, with real graphs -----------
#
# LangGraph saves checkpoints and writes in the background (durability="async"): a run
# erased mid-way has its next checkpoint refused but keeps running its later nodes, whose
# writes are for that unsaved checkpoint. They must not land. And the writes of a new
# conversation often reach the saver before the checkpoint they belong to: the attesting
# savers hold them until it is saved, so nothing of the new conversation is lost.

SECRET = "alice-ssn-123"
MODES = ("sync", "async", "exit")


def pipeline(saver: Any, erase: Any) -> Any:
    """a -> b -> c, each deriving its message from the state; ``b`` calls ``erase`` once
    when it is armed (``erase.armed``), as a concurrent erasure request would."""
    is_async = asyncio.iscoroutinefunction(erase)

    def a(s: State) -> Any:
        return {"messages": ["a saw " + s["messages"][-1]]}

    def b_sync(s: State) -> Any:
        if getattr(erase, "armed", False):
            erase.armed = False
            erase()
        return {"messages": ["b saw " + s["messages"][0]]}

    async def b_async(s: State) -> Any:
        if getattr(erase, "armed", False):
            erase.armed = False
            await erase()
        return {"messages": ["b saw " + s["messages"][0]]}

    def c(s: State) -> Any:
        return {"messages": ["c saw " + s["messages"][-1]]}

    g = StateGraph(State)
    g.add_node("a", a)
    g.add_node("b", b_async if is_async else b_sync)
    g.add_node("c", c)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=saver)


def sqlite_rows(db: Path, thread: str) -> dict[str, tuple[int, int]]:
    """Per table: (rows of the thread, of them holding SECRET), read from the file."""
    c = sqlite3.connect(db)
    try:
        out = {}
        for table, col in (("checkpoints", "checkpoint"), ("writes", "value")):
            row = c.execute(
                f"SELECT count(*), coalesce(sum(instr(CAST({col} AS BLOB), ?) > 0), 0) "
                f"FROM {table} WHERE thread_id = ?",
                (SECRET.encode(), thread),
            ).fetchone()
            out[table] = (int(row[0]), int(row[1]))
        return out
    finally:
        c.close()


def pg_rows(dsn: str, thread: str) -> dict[str, tuple[int, int]]:
    import psycopg

    out = {}
    with psycopg.connect(dsn) as c:
        for table, col in (
            ("checkpoints", "convert_to(checkpoint::text, 'UTF8')"),
            ("checkpoint_blobs", "blob"),
            ("checkpoint_writes", "blob"),
        ):
            row = c.execute(
                f"SELECT count(*), count(*) FILTER (WHERE position(%s::bytea in {col}) > 0) "
                f"FROM {table} WHERE thread_id = %s",
                (SECRET.encode(), thread),
            ).fetchone()
            assert row is not None
            out[table] = (int(row[0]), int(row[1]))
    return out


def empty(rows: dict[str, tuple[int, int]]) -> bool:
    return all(n == 0 for n, _ in rows.values())


def holds_secret(rows: dict[str, tuple[int, int]]) -> bool:
    return any(s > 0 for _, s in rows.values())


def stale_run(graph: Any, erase: Any) -> None:
    graph.invoke({"messages": [SECRET]}, cfg(), durability="async")
    erase.armed = True
    with pytest.raises(Exception, match="erased"):
        graph.invoke({"messages": ["second turn"]}, cfg(), durability="async")
    assert not getattr(erase, "armed", False)  # the erasure did happen mid-run


def new_conversations(graph: Any, erase_thread: Any, rows: Any) -> None:
    """Per durability mode: a thread erased, then a new conversation under its id; its
    rows match those of the same conversation under an id never erased."""
    for mode in MODES:
        thread, control = f"reset-{mode}", f"control-{mode}"
        graph.invoke({"messages": [SECRET]}, cfg(thread), durability=mode)
        erase_thread(thread)
        assert empty(rows(thread))
        for t in (thread, control):
            out = graph.invoke({"messages": ["new"]}, cfg(t), durability=mode)
            assert out["messages"] == ["new", "a saw new", "b saw new", "c saw b saw new"]
            out = graph.invoke({"messages": ["on"]}, cfg(t), durability=mode)
            assert out["messages"][-1] == "c saw b saw new", mode
        assert rows(thread) == rows(control), mode
        assert not holds_secret(rows(thread)) and not empty(rows(thread)), mode


async def anew_conversations(graph: Any, erase_thread: Any, rows: Any) -> None:
    for mode in MODES:
        thread, control = f"reset-{mode}", f"control-{mode}"
        await graph.ainvoke({"messages": [SECRET]}, cfg(thread), durability=mode)
        await erase_thread(thread)
        assert empty(rows(thread))
        for t in (thread, control):
            out = await graph.ainvoke({"messages": ["new"]}, cfg(t), durability=mode)
            assert out["messages"] == ["new", "a saw new", "b saw new", "c saw b saw new"]
            out = await graph.ainvoke({"messages": ["on"]}, cfg(t), durability=mode)
            assert out["messages"][-1] == "c saw b saw new", mode
        assert rows(thread) == rows(control), mode
        assert not holds_secret(rows(thread)) and not empty(rows(thread)), mode


@pytest.mark.parametrize("runner", ["attesting", "plain"])
def test_sqlite_run_begun_before_the_erasure_leaves_no_writes(
    tmp_path: Path, signer: Signer, runner: str
) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as eraser:
        eraser.setup()
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
            saver.setup()
            conn = sqlite3.connect(db, check_same_thread=False)
            runs = saver if runner == "attesting" else SqliteSaver(conn)

            def erase() -> None:
                eraser.delete_thread(T)

            stale_run(pipeline(runs, erase), erase)
            assert eraser.is_erased(T)
            assert sqlite_rows(db, T) == {"checkpoints": (0, 0), "writes": (0, 0)}
            conn.close()


def test_sqlite_new_conversations_in_every_durability_mode(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        graph = pipeline(saver, lambda: None)
        new_conversations(graph, saver.delete_thread, lambda t: sqlite_rows(db, t))


@pytest.mark.parametrize("runner", ["attesting", "plain"])
def test_postgres_run_begun_before_the_erasure_leaves_no_writes(
    pg_db: str, signer: Signer, runner: str
) -> None:
    with (
        pg(pg_db, signer) as (eraser, plain),
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver,
    ):
        runs = saver if runner == "attesting" else plain

        def erase() -> None:
            eraser.delete_thread(T)

        stale_run(pipeline(runs, erase), erase)
        assert eraser.is_erased(T)
        assert empty(pg_rows(pg_db, T)) and not holds_secret(pg_rows(pg_db, T))


def test_postgres_new_conversations_in_every_durability_mode(pg_db: str, signer: Signer) -> None:
    with pg(pg_db, signer) as (saver, _):
        graph = pipeline(saver, lambda: None)
        new_conversations(graph, saver.delete_thread, lambda t: pg_rows(pg_db, t))


async def test_async_savers_run_begun_before_the_erasure_leaves_no_writes(
    tmp_path: Path, pg_db: str, signer: Signer
) -> None:
    """The async savers, erased mid-run by another async saver; then new conversations
    in every durability mode."""
    from erasure_receipts import AsyncAttestingPostgresSaver, AsyncAttestingSqliteSaver

    db = tmp_path / "a.db"
    for open_saver, rows in (
        (
            lambda: AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer),
            lambda t: sqlite_rows(db, t),
        ),
        (
            lambda: AsyncAttestingPostgresSaver.from_conn_string(pg_db, signer=signer),
            lambda t: pg_rows(pg_db, t),
        ),
    ):
        async with open_saver() as eraser, open_saver() as saver:
            await eraser.setup()
            await saver.setup()

            async def erase() -> None:
                await eraser.adelete_thread(T)

            graph = pipeline(saver, erase)
            await graph.ainvoke({"messages": [SECRET]}, cfg(), durability="async")
            erase.armed = True  # type: ignore[attr-defined]
            with pytest.raises(ThreadErasedError):
                await graph.ainvoke({"messages": ["second turn"]}, cfg(), durability="async")
            assert not erase.armed  # type: ignore[attr-defined]
            assert await eraser.ais_erased(T)
            assert empty(rows(T)) and not holds_secret(rows(T))
            await anew_conversations(pipeline(saver, erase), eraser.adelete_thread, rows)


ORPHAN = "a write for a checkpoint that was never saved"


def orphan_write(plain: Any, thread: str = T) -> None:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": ""}}
    config["configurable"]["checkpoint_id"] = str(uuid6())
    plain.put_writes(config, [("messages", [f"c saw {SECRET}"])], "task-stale")


def test_sqlite_writes_trigger_of_the_previous_version_is_replaced(
    tmp_path: Path, signer: Signer
) -> None:
    """setup() replaces the previous writes trigger (which let a write through for any
    fresh uuid6 checkpoint id) in place; the checkpoints trigger is kept."""
    from erasure_receipts._backends import sqlite as sb

    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        previous = sb.TOMBSTONE_TRIGGERS.split("CREATE TRIGGER IF NOT EXISTS erasure_tombstone_w")[
            1
        ].split("    AND EXISTS (SELECT 1 FROM checkpoints c")[0]
        saver.conn.executescript(
            "DROP TRIGGER erasure_tombstone_writes; CREATE TRIGGER erasure_tombstone_w"
            + previous
            + "    AND length(NEW.checkpoint_id) = 36 AND substr(NEW.checkpoint_id, 15, 1) = '6')"
            + f"\nBEGIN SELECT RAISE(ABORT, '{sb.TOMBSTONE_MESSAGE}'); END;"
        )
        chat(saver).invoke({"messages": ["x"]}, cfg())
        saver.delete_thread(T)
        plain = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
        orphan_write(plain)  # the previous version's hole
        assert sqlite_rows(db, T)["writes"] == (1, 1)
        plain.conn.execute("DELETE FROM writes")
        plain.conn.commit()
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        sql = dict(saver.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        assert "FROM checkpoints c WHERE" in sql["erasure_tombstone_writes"]
        assert "erasure_tombstone_policies" in sql["erasure_tombstone_checkpoints"]
        with pytest.raises(sqlite3.IntegrityError, match="thread erased"):
            orphan_write(plain)
        assert sqlite_rows(db, T)["writes"] == (0, 0)
        new_conversations(
            pipeline(saver, lambda: None), saver.delete_thread, lambda t: sqlite_rows(db, t)
        )
        plain.conn.close()


def test_postgres_schema_3_is_upgraded_in_place(pg_db: str, signer: Signer) -> None:
    """Schema 3 (writes let through for any fresh uuid6 checkpoint id) still enforces
    tombstones, so a receipt made on it states ``refuse_all``; setup() replaces its body
    in place (same function), and the new one refuses writes for unsaved checkpoints."""
    import psycopg

    from erasure_receipts._backends import postgres as pgb

    with pg(pg_db, signer) as (saver, plain):
        fn = pgb.TRIGGER_FUNCTION_SQL
        start = fn.index("            -- Writes only for")
        end = fn.index("checkpoint is saved';\n", start) + len("checkpoint is saved';\n")
        v3 = (
            fn[:start]
            + "            IF TG_TABLE_NAME OPERATOR(pg_catalog.<>) 'checkpoints' THEN\n"
            + "                RETURN NEW;\n"
            + fn[end:]
        ).replace("{schema}", '"public"')
        with psycopg.connect(pg_db, autocommit=True) as c:
            c.execute(v3)
            c.execute("COMMENT ON FUNCTION erasure_receipts_refuse_erased() IS "
                      "'erasure_receipts schema 3'")  # fmt: skip
            oid = c.execute(
                "SELECT 'erasure_receipts_refuse_erased()'::regprocedure::oid"
            ).fetchone()
        chat(plain).invoke({"messages": ["x"]}, cfg("on-v3"))
        saver.delete_thread("on-v3")
        assert saver.last_receipt.predicate["scope"]["tombstone_policy"] == "refuse_all"
        with pytest.raises(Exception, match="thread erased"):
            orphan_write(plain, "on-v3")  # its tombstone refuses every write
    with pg(pg_db, signer) as (saver, plain):  # setup(): the upgrade
        with psycopg.connect(pg_db) as c:
            row = c.execute(
                "SELECT oid, obj_description(oid, 'pg_proc') FROM pg_proc "
                "WHERE proname = 'erasure_receipts_refuse_erased'"
            ).fetchone()
        assert row == (oid[0] if oid else None, pgb.SCHEMA_VERSION)
        chat(saver).invoke({"messages": ["x"]}, cfg())
        saver.delete_thread(T)
        assert saver.last_receipt.predicate["scope"]["tombstone_policy"] == "new_conversations"
        with pytest.raises(Exception, match="thread erased"):
            orphan_write(plain)
        assert empty(pg_rows(pg_db, T))


def test_attesting_saver_holds_early_writes_until_their_checkpoint(
    tmp_path: Path, signer: Signer
) -> None:
    """Writes that come before their checkpoint are stored with it, or dropped (and
    refused from then on) if the checkpoint is refused; never stored on their own."""
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        chat(saver).invoke({"messages": [SECRET]}, cfg())
        head = saver.get_tuple(cfg()).config
        saver.delete_thread(T)

        def writes_for(cid: str, value: str) -> None:
            c = {"configurable": {"thread_id": T, "checkpoint_ns": "", "checkpoint_id": cid}}
            saver.put_writes(c, [("messages", [value])], "task")

        fresh = str(uuid6())
        writes_for(fresh, "early")  # a new conversation's, before its checkpoint
        assert sqlite_rows(db, T) == {"checkpoints": (0, 0), "writes": (0, 0)}
        put(saver, None, cid=fresh)
        assert sqlite_rows(db, T) == {"checkpoints": (1, 0), "writes": (1, 0)}
        stale = str(uuid6())
        writes_for(stale, f"c saw {SECRET}")  # a run begun before the erasure
        with pytest.raises(ThreadErasedError):
            put(saver, head, cid=stale)  # its checkpoint: a child of the erased head
        with pytest.raises(ThreadErasedError):
            writes_for(stale, f"c saw {SECRET}")  # once refused, refused at once
        with pytest.raises(ThreadErasedError):
            writes_for(head["configurable"]["checkpoint_id"], "for the erased head")
        assert sqlite_rows(db, T) == {"checkpoints": (1, 0), "writes": (1, 0)}
