"""tests/faults.py: faults injected into one real saver through its journal seam."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from erasure_receipts import AttestingSqliteSaver, ErasureIncompleteError, Signer
from faults import FaultyProxy, faulty, inject


def put(saver: AttestingSqliteSaver, thread_id: str) -> None:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {}, {})


def test_faulty_fails_one_saver_within_the_block(tmp_path: Path, signer: Signer) -> None:
    with (
        AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as a,
        AttestingSqliteSaver.from_conn_string(str(tmp_path / "b.db"), signer=signer) as b,
    ):
        for s in (a, b):
            put(s, "t1")
            put(s, "t2")
        journal = a._eraser.journal
        with faulty(a, record_statement=sqlite3.OperationalError("injected")):
            assert isinstance(a._eraser.journal, FaultyProxy)
            with pytest.raises(ErasureIncompleteError, match=r"no receipt .*injected"):
                a.erase_thread("t1")
            assert b.erase_thread("t1").thread_id == "t1"  # another saver: unaffected
            assert a.is_erased("t1")  # the other journal methods are the real ones
        assert a._eraser.journal is journal
        assert a.erase_thread("t2").thread_id == "t2"
        assert len(a.recover_receipts(min_age_seconds=0)) == 1


def test_inject_until_undo_and_a_callable_replaces_the_method(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as s:
        put(s, "t1")
        real = s._eraser.journal.is_erased
        inject(monkeypatch, s, is_erased=lambda conn, tid: calls.append(tid) or real(conn, tid))
        assert s.is_erased("t1") is False and calls == ["t1"]
        monkeypatch.undo()
        assert s.is_erased("t1") is False and calls == ["t1"]
        with pytest.raises(AttributeError, match="no method 'no_such_method'"):
            inject(monkeypatch, s, no_such_method=RuntimeError)
