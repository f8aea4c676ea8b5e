"""The PostgreSQL savers share every flow with the SQLite ones: the options added for
SQLite (refuse_erased_reads, per-context last_receipt, the archive preflight, naive
clocks) hold here too, and the async saver stays deadlock-free under more concurrent
erasures than its worker-thread pool has threads."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ConfigurationError,
    Signer,
    ThreadErasedError,
    verify_receipt,
)
from pg_helpers import count
from scenario import MARKER, build_graph, human

NS = ("users", "alice")
KW = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


@pytest.mark.parametrize("refuse", [False, True])
def test_graph_on_an_erased_thread(pg_db: str, signer: Signer, refuse: bool) -> None:
    store = InMemoryStore()
    with AttestingPostgresSaver.from_conn_string(
        pg_db,
        signer=signer,
        store=store,
        refuse_erased_reads=refuse,
        tombstone_policy="refuse_all",
    ) as saver:
        saver.setup()
        graph = build_graph(saver, store)  # type: ignore[arg-type]
        run = {"configurable": {"thread_id": "alice-chat"}}
        graph.invoke(human(f"my SSN is {MARKER}"), run)
        saver.erase_thread("alice-chat", store_namespaces=[NS])
        with pytest.raises(ThreadErasedError):
            graph.invoke(human(f"my SSN is {MARKER}"), run)
        assert (store.search(NS) == []) is refuse  # refused before any node ran
        assert count(pg_db, "checkpoints", "thread_id = %s", ("alice-chat",)) == 0
        assert saver.get_tuple(cfg("never-written")) is None


async def test_async_refuse_erased_reads_and_last_receipt(pg_db: str, signer: Signer) -> None:
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, refuse_erased_reads=True
    ) as saver:
        await saver.setup()
        threads = [f"t{i}" for i in range(6)]
        for t in threads:
            await saver.aput(cfg(t), empty_checkpoint(), {}, {})

        async def one(t: str) -> tuple[str, str | None]:
            await saver.adelete_thread(t)
            await asyncio.sleep(0)
            last = saver.last_receipt
            return t, None if last is None else last.thread_id

        results = await asyncio.gather(*(one(t) for t in threads))
        assert all(t == got for t, got in results), results
        with pytest.raises(ThreadErasedError):
            await saver.aget_tuple(cfg("t0"))


async def test_more_concurrent_erasures_than_pool_threads(pg_db: str, signer: Signer) -> None:
    """Each async erasure occupies one worker thread for its flow; none may need a
    second one, or 3x the pool's size in concurrent erasures would deadlock."""
    n = 3 * min(32, (os.cpu_count() or 1) + 4)
    async with AsyncConnectionPool(pg_db, kwargs=KW, max_size=4, open=False) as pool:
        saver = AsyncAttestingPostgresSaver(pool, signer=signer)
        await saver.setup()
        for i in range(n):
            await saver.aput(cfg(f"c{i}"), empty_checkpoint(), {}, {})
        receipts = await asyncio.wait_for(
            asyncio.gather(*(saver.aerase_thread(f"c{i}") for i in range(n))), timeout=120
        )
    assert sorted(r.thread_id for r in receipts) == sorted(f"c{i}" for i in range(n))
    assert all(verify_receipt(r.to_json(), [signer.public_key]) for r in receipts[:3])
    assert count(pg_db, "checkpoints", "thread_id LIKE %s", ("c%",)) == 0


def test_archive_preflight_and_naive_clock(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    from datetime import datetime

    blocked = tmp_path / "archive"
    blocked.write_text("a file")
    fixed = datetime(2026, 1, 2, 3, 4, 5)  # naive: UTC
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, clock=lambda: fixed) as s:
        s.setup()
        s.put(cfg("t"), empty_checkpoint(), {}, {})
        s.archive = blocked
        with pytest.raises(ConfigurationError, match="not a directory"):
            s.erase_thread("t")
        assert count(pg_db, "checkpoints", "thread_id = %s", ("t",)) == 1
        s.archive = tmp_path / "receipts"
        r = s.erase_thread("t")
    assert r.predicate["issued_at"] == "2026-01-02T03:04:05Z"
    assert (tmp_path / "receipts" / f"{r.receipt_id}.json").exists()
