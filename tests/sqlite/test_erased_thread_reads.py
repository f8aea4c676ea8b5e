"""A graph still running on an erased thread: its reads and writes after the erasure, with and
without ``refuse_erased_reads`` (sync and async)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    Signer,
    ThreadErasedError,
)
from scenario import MARKER, build_graph, human, raw_rows
from test_residue_scan import NS, cfg

# -- a still-running graph on an erased thread -------------------------------------------


@pytest.mark.parametrize("refuse", [False, True])
def test_graph_on_an_erased_thread(tmp_path: Path, signer: Signer, refuse: bool) -> None:
    """Default (LangGraph's contract): the nodes run and write user memory again before
    the checkpoint write is refused. refuse_erased_reads=True: refused at the first read,
    nothing written."""
    store = InMemoryStore()
    tid = "alice-chat"
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"),
        signer=signer,
        store=store,
        refuse_erased_reads=refuse,
        tombstone_policy="refuse_all",
    ) as saver:
        graph = build_graph(saver, store)
        run = {"configurable": {"thread_id": tid}}
        graph.invoke(human(f"my SSN is {MARKER}"), run)
        assert saver.get_tuple({"configurable": {"thread_id": tid}}) is not None  # not erased
        saver.erase_thread(tid, store_namespaces=[NS])
        assert store.search(NS) == []
        with pytest.raises(ThreadErasedError):
            graph.invoke(human(f"my SSN is {MARKER}"), run)
        written = store.search(NS)
        assert (written == []) is refuse
        assert raw_rows(tmp_path / "a.db", "checkpoints", "thread_id = ?", (tid,)) == []
        assert saver.get_tuple({"configurable": {"thread_id": "other"}}) is None


async def test_async_refuse_erased_reads(tmp_path: Path, signer: Signer) -> None:
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, refuse_erased_reads=True
    ) as saver:
        await saver.aput(cfg("t"), empty_checkpoint(), {}, {})
        r = await saver.aerase_thread("t")  # its own API checks still read the thread
        assert r.thread_id == "t"
        with pytest.raises(ThreadErasedError):
            await saver.aget_tuple(cfg("t"))
        assert await saver.aget_tuple(cfg("never")) is None
