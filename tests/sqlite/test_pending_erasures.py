"""Erasures that commit but fail afterwards: pending erasures listed and logged without content,
a naive clock read as UTC, an async API failure and a store item written after the commit,
each recoverable."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ErasureIncompleteError,
    Signer,
    verify_receipt,
)
from scenario import MARKER, raw_rows
from test_residue_scan import NS, cfg, put


async def test_async_api_failure_after_commit_is_recoverable(
    tmp_path: Path, signer: Signer, monkeypatch
) -> None:
    class FlakyStore(InMemoryStore):
        broken = True

        async def asearch(self, *a: Any, **k: Any) -> Any:
            if self.broken:
                raise NotImplementedError("store has no async API")
            return await super().asearch(*a, **k)

    store = FlakyStore()
    store.put(NS, "k", {"v": 1})
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as saver:
        await saver.aput(cfg("t"), empty_checkpoint(), {}, {})
        with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
            await saver.aerase_thread("t", store_namespaces=[NS])
        store.broken = False
        [r] = await saver.arecover_receipts(min_age_seconds=0)
        assert r.thread_id == "t"


# -- pending erasures and logging -------------------------------------------------------


def test_pending_erasures_and_logs_without_content(
    tmp_path: Path, signer: Signer, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="erasure_receipts")
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as s:
        put(s, "t", 1, f"secret {MARKER}")

        def crash(*a: Any, **k: Any) -> Any:
            raise OSError("disk full")

        monkeypatch.setattr("erasure_receipts._engine.eraser.sign_and_archive", crash)
        with pytest.raises(ErasureIncompleteError):
            s.erase_thread("t")
        [pending] = s.pending_erasures()
        assert pending.age_seconds >= 0 and len(pending.receipt_id) == 36
        assert s.recover_receipts(min_age_seconds=3600) == []  # too young: skipped
        monkeypatch.undo()
        [r] = s.recover_receipts(min_age_seconds=0)
        assert r.receipt_id == pending.receipt_id and s.pending_erasures() == []
    text = "\n".join(rec.getMessage() for rec in caplog.records)
    assert "erased thread 't'" in text and "recovering 1" in text
    assert MARKER not in text and "PRIVATE" not in text


def test_naive_clock_is_utc_not_local_time(tmp_path: Path, signer: Signer, monkeypatch) -> None:
    from datetime import datetime

    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: a local reading would show
    import time

    time.tzset()
    try:
        fixed = datetime(2026, 1, 2, 3, 4, 5)  # naive
        with AttestingSqliteSaver.from_conn_string(
            str(tmp_path / "a.db"), signer=signer, clock=lambda: fixed
        ) as s:
            put(s, "t", 0, "x")

            def crash(*a: Any, **k: Any) -> Any:
                raise OSError("disk full")

            monkeypatch.setattr("erasure_receipts._engine.eraser.sign_and_archive", crash)
            with pytest.raises(ErasureIncompleteError):
                s.erase_thread("t")
            [pending] = s.pending_erasures()  # no naive/aware TypeError
            assert pending.issued_at == "2026-01-02T03:04:05Z" and pending.age_seconds == 0
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_store_item_written_after_the_commit_is_named_and_recoverable(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph still running writes memory into the erased namespace right after the
    commit: no receipt may claim the namespace empty, the error says what happened, and
    once the new item is gone the receipt is recovered."""
    from erasure_receipts._backends import sqlite as sqlite_backend

    store = InMemoryStore()
    store.put(NS, "k", {"v": 1})
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as s:
        put(s, "t", 0, "x")
        real = sqlite_backend.SqliteBackend.reduce_residue

        def memory_written_after_commit(self: Any) -> Any:
            store.put(NS, "late", {"v": 2})
            return real(self)

        monkeypatch.setattr(sqlite_backend.SqliteBackend, "reduce_residue",
                            memory_written_after_commit)  # fmt: skip
        with pytest.raises(ErasureIncompleteError, match="written after the commit"):
            s.erase_thread("t", store_namespaces=[NS])
        monkeypatch.undo()
        assert raw_rows(tmp_path / "a.db", "checkpoints", "thread_id = ?", ("t",)) == []
        store.delete(NS, "late")
        [r] = s.recover_receipts(min_age_seconds=0)
    assert r.predicate["pre_state"]["tables"]["store"]["rows"] == 1
    assert verify_receipt(r.to_json(), [signer.public_key])
