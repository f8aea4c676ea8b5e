"""AsyncAttestingSqliteSaver: real graph, sweep, tombstones, and LangGraph's conformance suite."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    ErasureIncompleteError,
    Signer,
    ThreadErasedError,
    verify_receipt,
)
from scenario import MARKER, TURNS, build_graph, human, marker_in_files, raw_rows

T = "alice-chat"
NS = ("users", "alice")


async def test_async_scenario_with_memory_store(tmp_path: Path, signer: Signer) -> None:
    db, store = tmp_path / "a.db", InMemoryStore()
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(db),
        signer=signer,
        store=store,
        archive=tmp_path / "receipts",
        tombstone_policy="refuse_all",
    ) as saver:
        graph = build_graph(saver, store)
        for text in TURNS:
            await graph.ainvoke(human(text), {"configurable": {"thread_id": T}})
        await graph.ainvoke(human("bob here"), {"configurable": {"thread_id": "bob"}})
        for i in range(24):
            await store.aput(NS, f"k{i}", {"i": i})
        before_bob = raw_rows(db, "checkpoints", "thread_id = ?", ("bob",))
        preview = await saver.adigest_thread(T, [NS])
        receipt = await saver.aerase_thread(T, store_namespaces=[NS])
        assert receipt.pre_digest == preview.digest
        assert receipt.predicate["methods"] == {"checkpoints": "atomic-transaction",
                                                "store": "sweep"}  # fmt: skip
        assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 25
        assert await store.asearch(NS, limit=1000) == []
        assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
        assert raw_rows(db, "writes", "thread_id = ?", (T,)) == []
        assert raw_rows(db, "checkpoints", "thread_id = ?", ("bob",)) == before_bob
        with pytest.raises(ThreadErasedError):
            await graph.ainvoke(human("late write"), {"configurable": {"thread_id": T}})
        # The failed late write must not leave the connection holding the write lock.
        assert not saver.conn.in_transaction
        await graph.ainvoke(human("bob again"), {"configurable": {"thread_id": "bob"}})
        assert await saver.ais_erased(T)
    assert marker_in_files(db) == {"a.db": 0, "a.db-wal": 0, "a.db-shm": 0}
    v = verify_receipt((tmp_path / "receipts" / f"{receipt.receipt_id}.json").read_bytes(),
                       [signer.public_key])  # fmt: skip
    assert v.thread_id == T


async def test_async_store_in_same_file_is_atomic(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    async with (
        AsyncSqliteStore.from_conn_string(str(db)) as store,
        AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        await store.setup()
        graph = build_graph(saver, store)
        for text in TURNS:
            await graph.ainvoke(human(text), {"configurable": {"thread_id": T}})
        receipt = await saver.aerase_thread(T, store_namespaces=[NS])
        assert receipt.predicate["methods"]["store"] == "atomic-transaction"
        assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 1
        assert await store.aget(NS, "identity") is None
    assert marker_in_files(db)["a.db"] == 0


async def test_async_delete_thread_attested_and_reopen(tmp_path: Path, signer: Signer) -> None:
    store = InMemoryStore()
    await store.aput(NS, "k", {"v": MARKER})
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store, archive=tmp_path / "r",
        namespaces_for=lambda tid: [NS],
    ) as saver:  # fmt: skip
        graph = build_graph(saver, store)
        await graph.ainvoke(human("hi"), {"configurable": {"thread_id": T}})
        assert await saver.adelete_thread(T) is None
        assert len(list((tmp_path / "r").glob("*.json"))) == 1
        assert await store.aget(NS, "k") is None
        assert await saver.areopen_thread(T)
        await graph.ainvoke(human("again"), {"configurable": {"thread_id": T}})


async def test_async_injected_failure(tmp_path: Path, signer: Signer, monkeypatch) -> None:
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, archive=tmp_path / "r"
    ) as saver:
        graph = build_graph(saver, InMemoryStore())
        await graph.ainvoke(human("hi"), {"configurable": {"thread_id": T}})
        from erasure_receipts._backends import sqlite as backend

        def boom(self, *a):  # type: ignore[no-untyped-def]
            raise sqlite3.OperationalError("injected")

        monkeypatch.setattr(backend.SqliteBackend, "write_tombstone", boom)
        with pytest.raises(ErasureIncompleteError, match="rolled back"):
            await saver.aerase_thread(T)
        assert raw_rows(tmp_path / "a.db", "checkpoints", "thread_id = ?", (T,))
        assert not list((tmp_path / "r").iterdir())  # no receipt
        # The connection is usable afterwards.
        await graph.ainvoke(human("still works"), {"configurable": {"thread_id": T}})


async def test_concurrent_async_writers(tmp_path: Path, signer: Signer) -> None:
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer
    ) as saver:
        graph = build_graph(saver, InMemoryStore())
        results: dict[str, int] = {"ok": 0, "rejected": 0, "other": 0}

        async def target() -> None:
            for i in range(40):
                try:
                    await graph.ainvoke(human(f"t{i}"), {"configurable": {"thread_id": T}})
                    results["ok"] += 1
                except ThreadErasedError:
                    results["rejected"] += 1
                    return

        async def other() -> None:
            for i in range(20):
                await graph.ainvoke(human(f"o{i}"), {"configurable": {"thread_id": "o"}})
                results["other"] += 1

        async def eraser() -> None:
            while results["ok"] < 3:
                await asyncio.sleep(0.001)
            await saver.aerase_thread(T)

        await asyncio.gather(target(), other(), eraser())
    assert results["rejected"] == 1 and results["other"] == 20
    assert raw_rows(tmp_path / "a.db", "checkpoints", "thread_id = ?", (T,)) == []


@checkpointer_test(name="AsyncAttestingSqliteSaver")
async def attesting_saver() -> AsyncIterator[AsyncAttestingSqliteSaver]:
    async with AsyncAttestingSqliteSaver.from_conn_string(
        ":memory:", signer=Signer.generate()
    ) as saver:
        yield saver


async def test_langgraph_conformance_suite() -> None:
    report = await validate(attesting_saver)
    failed = {
        cap: r.tests_failed for cap, r in report.results.items() if r.detected and not r.passed
    }
    assert failed == {}
    assert sum(r.tests_passed for r in report.results.values()) >= 50  # the suite really ran
    # Every capability the parent class supports is detected (and so tested) on ours.
    async with AsyncSqliteSaver.from_conn_string(":memory:") as parent:
        parent_caps = DetectedCapabilities.from_instance(parent).detected
    async with AsyncAttestingSqliteSaver.from_conn_string(
        ":memory:", signer=Signer.generate()
    ) as ours:
        assert parent_caps <= DetectedCapabilities.from_instance(ours).detected
    passed = [cap for cap, r in report.results.items() if r.passed]
    assert {"put", "put_writes", "get_tuple", "list", "delete_thread"} <= set(passed)
