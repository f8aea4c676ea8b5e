"""Saver configuration checked before anything is deleted (``namespaces_for`` without a store,
bad thread ids), ``last_receipt`` per task, and the async saver with a sync SqliteStore."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    Signer,
    verify_receipt,
)
from test_residue_scan import NS, cfg

# -- async saver + sync SqliteStore ------------------------------------------------------


async def test_async_saver_with_sync_sqlite_store(tmp_path: Path, signer: Signer) -> None:
    db, other = tmp_path / "a.db", tmp_path / "store.db"
    for store_db in (db, other):  # same file (atomic) and another file (sweep)
        with SqliteStore.from_conn_string(str(store_db)) as store:
            store.setup()
            for i in range(15):
                store.put(NS, f"k{i}", {"v": i})
            async with AsyncAttestingSqliteSaver.from_conn_string(
                str(db), signer=signer, store=store
            ) as saver:
                await saver.aput(cfg("t"), empty_checkpoint(), {}, {})
                r = await saver.aerase_thread("t", store_namespaces=[NS])
                assert r.predicate["pre_state"]["tables"]["store"]["rows"] == 15
                assert verify_receipt(r.to_json(), [signer.public_key])
                await saver.areopen_thread("t")
            assert store.search(NS, limit=100) == []


# -- configuration mistakes found before anything is deleted ---------------------------


def test_namespaces_for_without_store_is_refused_at_construction(signer: Signer) -> None:
    with pytest.raises(ConfigurationError, match="store"):
        AttestingSqliteSaver(
            sqlite3.connect(":memory:"), signer=signer, namespaces_for=lambda t: [NS]
        )


def test_bad_thread_ids_are_refused(tmp_path: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as s:
        for bad in ("", None, b"t", 1.5):
            with pytest.raises(ConfigurationError):
                s.erase_thread(bad)  # type: ignore[arg-type]


# -- last_receipt is per thread / task --------------------------------------------------


async def test_last_receipt_under_concurrent_async_erasures(tmp_path: Path, signer: Signer) -> None:
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer
    ) as saver:
        threads = [f"t{i}" for i in range(8)]
        for t in threads:
            await saver.aput(cfg(t), empty_checkpoint(), {}, {})

        async def one(t: str) -> tuple[str, str | None]:
            await saver.adelete_thread(t)
            await asyncio.sleep(0)
            last = saver.last_receipt
            return t, None if last is None else last.thread_id

        results = await asyncio.gather(*(one(t) for t in threads))
    assert all(t == got for t, got in results), results
