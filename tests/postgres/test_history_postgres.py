"""erase_history / prune on the PostgreSQL savers, against a real server and real graphs.

Raw rows are read through separate connections (tests/pg_helpers.py) and digests are
recomputed independently of the library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore
from langgraph.types import Command
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ErasureIncompleteError,
    Signer,
    verify_receipt,
)
from erasure_receipts._backends import postgres as pg_backend
from erasure_receipts._engine import NeedlesFoundError
from erasure_receipts.digest import encode_row, leaf_hash
from erasure_receipts.history import DeltaChannelError
from faults import inject
from pg_helpers import connect, count, independent_digest, raw_rows, table_shape
from scenario import naive_root
from test_history_graphs import (
    CARD,
    CHAT_TURNS,
    NS,
    cfg,
    chat_graph,
    delta_graph,
    human,
    nested_graph,
)

T = "alice-chat"
TABLES = ("checkpoint_blobs", "checkpoint_writes", "checkpoints")
THREAD = {t: ("thread_id = %s", (T,)) for t in TABLES}


def rows_holding(dsn: str, needle: str, thread: str = T) -> int:
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM checkpoints WHERE thread_id = %(t)s "
            "        AND strpos(checkpoint::text || metadata::text, %(n)s) > 0)"
            " + (SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %(t)s "
            "        AND position(convert_to(%(n)s, 'UTF8') in coalesce(blob, '')) > 0)"
            " + (SELECT count(*) FROM checkpoint_writes WHERE thread_id = %(t)s "
            "        AND position(convert_to(%(n)s, 'UTF8') in blob) > 0)",
            {"t": thread, "n": needle},
        ).fetchone()
    assert row is not None
    return int(row[0])


def pg_leaves(dsn: str, tables: dict[str, tuple[str, tuple[Any, ...]]]) -> dict[Any, bytes]:
    """``(table, *pk) -> leaf hash`` per RECEIPT_SPEC.md 4.8, in tree order."""
    out: dict[Any, bytes] = {}
    with connect(dsn) as conn:
        shapes = {t: table_shape(conn, t) for t in tables}
    for table in sorted(tables):
        cols, pk = shapes[table]
        names = [c for c, _ in cols]
        where, params = tables[table]
        for row in raw_rows(dsn, table, where, params):
            pkv = [row[names.index(c)] for c in pk]
            out[(table, *pkv)] = leaf_hash(
                encode_row(table, pkv, list(zip(names, row, strict=True)))
            )
    return out


def test_pg_compaction_scenario(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    with (
        PostgresStore.from_conn_string(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store,
                                                archive=tmp_path / "r") as saver,
    ):  # fmt: skip
        store.setup()
        saver.setup()
        graph = chat_graph(saver, store)
        for text in CHAT_TURNS:
            graph.invoke(human(text), cfg(T))
        graph.invoke(human("hi, bob here"), cfg("bob-chat"))
        state = graph.get_state(cfg(T)).values["messages"]
        assert not any(CARD in str(m.content) for m in state)
        assert rows_holding(pg_db, CARD) > 10
        bob = pg_leaves(pg_db, {t: ("thread_id = %s", ("bob-chat",)) for t in TABLES})
        scope = {**THREAD, "store": ("prefix = %s", ("users.alice",))}
        before = pg_leaves(pg_db, scope)

        receipt = saver.erase_history(T, needles=[CARD], store_namespaces=[NS])

        assert rows_holding(pg_db, CARD) == 0
        assert count(pg_db, "store", "strpos(value::text, %s) > 0", (CARD,)) == 0
        assert pg_leaves(pg_db, {t: ("thread_id = %s", ("bob-chat",)) for t in TABLES}) == bob
        p = receipt.predicate
        assert p["kind"] == "history" and p["backend"]["kind"] == "postgres"
        verify_receipt(receipt.to_json(), [signer.public_key])
        kept = p["kept_state"]
        assert independent_digest(pg_db, THREAD) == kept["digest"]["sha256"]
        assert kept["tables"]["checkpoints"]["rows"] == len(kept["checkpoints"]) == 1
        assert kept["tables"]["checkpoint_blobs"]["rows"] >= 1
        after = pg_leaves(pg_db, scope)
        removed = [h for k, h in before.items() if k not in after]
        assert naive_root(removed).hex() == receipt.pre_digest
        assert p["pre_state"]["tables"]["checkpoint_blobs"]["rows"] > 0
        # Every blob that remains is referenced by the kept checkpoint, and vice versa.
        with connect(pg_db) as conn:
            refs = conn.execute(
                "SELECT count(*) FROM checkpoints c, jsonb_each_text(c.checkpoint -> "
                "'channel_versions') v WHERE c.thread_id = %s AND EXISTS (SELECT 1 FROM "
                "checkpoint_blobs b WHERE b.thread_id = c.thread_id AND b.channel = v.key "
                "AND b.version = v.value)", (T,)).fetchone()  # fmt: skip
            parent = conn.execute(
                "SELECT parent_checkpoint_id FROM checkpoints WHERE thread_id = %s", (T,)
            ).fetchone()
        assert refs is not None and refs[0] == kept["tables"]["checkpoint_blobs"]["rows"]
        assert parent == (None,)
        out = graph.invoke(human("one more thing"), cfg(T))
        assert "noted: one more thing" in [m.content for m in out["messages"]]


def test_pg_needle_in_latest_blob_is_refused(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        graph = chat_graph(saver)
        for text in [*CHAT_TURNS, "call me at +1-202-555-0143"]:
            graph.invoke(human(text), cfg(T))
        before = pg_leaves(pg_db, THREAD)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history(T, needles=["+1-202-555-0143"])
        assert pg_leaves(pg_db, THREAD) == before
        head = saver.get_tuple(cfg(T))
        assert head is not None
        head_id = head.config["configurable"]["checkpoint_id"]
        blobs = [loc for loc in err.value.locations if loc["table"] == "checkpoint_blobs"]
        assert blobs and all(loc["channel"] == "messages" for loc in blobs)
        assert any(head_id in str(loc["checkpoint_id"]).split(",") for loc in blobs)
        assert f"checkpoint_id={head_id}" in err.value.message
        assert "channel=messages" in err.value.message and "555-0143" not in err.value.message


def test_pg_rows_written_after_commit_and_recovery(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New checkpoints and blob versions written right after the commit are not in the
    removed set; neither are they for a recovery that only knows the kept ids."""
    with (
        PostgresSaver.from_conn_string(pg_db) as plain,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer,
                                                archive=tmp_path / "r") as saver,
    ):  # fmt: skip
        saver.setup()
        graph = chat_graph(saver)
        for text in CHAT_TURNS:
            graph.invoke(human(text), cfg(T))
        runner = chat_graph(plain)
        original = pg_backend.PostgresBackend.reduce_residue

        def write_then_scrub(self: Any) -> list[dict[str, Any]]:
            runner.invoke(human("written right after the commit"), cfg(T))
            return original(self)

        monkeypatch.setattr(pg_backend.PostgresBackend, "reduce_residue", write_then_scrub)
        receipt = saver.erase_history(T)
        monkeypatch.undo()
        assert receipt.predicate["post_state"]["leaves"] == 0
        verify_receipt(receipt.to_json(), [signer.public_key])
        assert len(list(saver.list(cfg(T)))) == 1 + 4

        # Crash after the commit, the thread goes on, then recovery.
        for text in CHAT_TURNS:
            graph.invoke(human(text), cfg(T))

        def crash(*args: Any) -> Any:
            raise OSError("disk gone")

        inject(monkeypatch, saver, record_statement=crash)
        with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
            saver.erase_history(T, needles=[CARD])
        monkeypatch.undo()
        graph.invoke(human("the thread goes on"), cfg(T))
        (recovered,) = saver.recover_receipts(min_age_seconds=0)
        names = {c["name"] for c in recovered.predicate["checks"]}
        assert {"issued_from_journal", "raw_rows_zero_at_recovery", "api_get_tuple_kept"} <= names
        verify_receipt(recovered.to_json(), [signer.public_key])
        assert rows_holding(pg_db, CARD) == 0


def test_pg_sends_parent_of_a_pre_v4_checkpoint_is_kept(pg_db: str, signer: Signer) -> None:
    """A checkpoint from before format v4 reads its pending sends from its parent's
    writes: LangGraph's keep_latest keeps that parent, and so does erase_history."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        ids = []
        parent: dict[str, Any] = cfg("old", checkpoint_ns="")
        for i in range(4):
            cp = empty_checkpoint()
            cp["v"] = 3  # type: ignore[typeddict-item]
            cp["channel_values"] = {"v": {"i": i}}
            stored = saver.put(parent, cp, {"step": i}, {"v": f"{i + 1:032d}.0"})
            ids.append(stored["configurable"]["checkpoint_id"])
            parent = stored
        saver.put_writes({"configurable": {**parent["configurable"], "checkpoint_id": ids[2]}},
                         [("__pregel_tasks", {"send": 1})], "task-1")  # fmt: skip
        receipt = saver.erase_history("old")
        kept = [c["checkpoint_id"] for c in receipt.predicate["kept_state"]["checkpoints"]]
        assert kept == sorted(ids[2:])
        assert count(pg_db, "checkpoint_writes", "thread_id = 'old'", ()) == 1
        assert count(pg_db, "checkpoints", "thread_id = 'old'", ()) == 2
        verify_receipt(receipt.to_json(), [signer.public_key])


def test_pg_delta_channel_is_refused(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        graph = delta_graph(saver)
        for i in range(3):
            graph.invoke({"items": [f"i{i}"]}, cfg("d"))
        before = pg_leaves(pg_db, {t: ("thread_id = %s", ("d",)) for t in TABLES})
        with pytest.raises(DeltaChannelError):
            saver.erase_history("d")
        with pytest.raises(NotImplementedError):
            saver.prune(["d"])
        assert pg_leaves(pg_db, {t: ("thread_id = %s", ("d",)) for t in TABLES}) == before


async def test_pg_async_subgraph_interrupt_resume_and_prune(
    pg_db: str, signer: Signer, tmp_path: Path
) -> None:
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=4,
                                   open=False) as pool:  # fmt: skip
        saver = AsyncAttestingPostgresSaver(pool, signer=signer, archive=tmp_path / "r")
        await saver.setup()
        graph = nested_graph(saver)
        for i in range(3):
            await graph.ainvoke(human(f"turn {i}"), cfg(T))
            await graph.ainvoke(Command(resume=f"yes {i}"), cfg(T))
        await graph.ainvoke(human("last turn"), cfg(T))
        snap = await graph.aget_state(cfg(T), subgraphs=True)
        sub = snap.tasks[0].state
        assert sub is not None and not isinstance(sub, dict)
        current_call = sub.config["configurable"]["checkpoint_ns"]

        receipt = await saver.aerase_history(T)

        kept = receipt.predicate["kept_state"]["checkpoints"]
        assert [c["checkpoint_ns"] for c in kept] == ["", current_call]
        verify_receipt(receipt.to_json(), [signer.public_key])
        assert (
            independent_digest(pg_db, THREAD) == receipt.predicate["kept_state"]["digest"]["sha256"]
        )
        with connect(pg_db) as conn:
            namespaces = {
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = %s", (T,)
                )
            }
        assert namespaces == {"", current_call}
        out = await graph.ainvoke(Command(resume="yes finally"), cfg(T))
        assert out["messages"][-1].content == "approved: yes finally" and out["turns"] == 4

        for t in ("p1", "p2"):
            await graph.ainvoke(human("x"), cfg(t))
            await graph.ainvoke(Command(resume="y"), cfg(t))
        pruned = await saver.aprune(["p1", "p2"])
        assert [r.thread_id for r in pruned] == ["p1", "p2"]
        deleted = await saver.aprune(["p1"], strategy="delete")
        assert deleted[0].predicate["scope"]["tombstone"] is True
        assert await saver.ais_erased("p1")
