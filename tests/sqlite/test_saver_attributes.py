"""A saver's configuration can be read and set as before the savers held an eraser:
every attribute a saver had is still there, and setting one takes effect (checked as
the constructor checks it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore

from erasure_receipts import AttestingSqliteSaver, ConfigurationError, Signer

T0 = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)


def _put(saver: AttestingSqliteSaver, thread: str) -> None:
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
              empty_checkpoint(), {}, {})  # fmt: skip


def test_setting_the_clock_store_and_namespaces_takes_effect(
    tmp_path: Path, signer: Signer
) -> None:
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as s:
        _put(s, "t1")
        s.clock = lambda: T0
        assert s.clock is not None and s.clock() == T0
        store = InMemoryStore()
        store.put(("users", "t1"), "k", {"v": 1})
        s.store = store
        s.namespaces_for = lambda tid: [("users", tid)]
        r = s.erase_thread("t1")
        assert r.predicate["issued_at"] == "2031-05-06T07:08:09Z"
        assert r.predicate["scope"]["store_namespaces"] == [["users", "t1"]]
        assert store.search(("users", "t1")) == []


def test_bad_settings_are_refused_as_the_constructor_refuses_them(
    tmp_path: Path, signer: Signer
) -> None:
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as s:
        with pytest.raises(ConfigurationError, match="no store"):
            s.namespaces_for = lambda tid: [("users", tid)]
        with pytest.raises(TypeError):
            s.namespaces_for = "users"  # type: ignore[assignment]
        with pytest.raises(ConfigurationError):
            s.residue_scan = "sometimes"  # type: ignore[assignment]
        with pytest.raises(ConfigurationError):
            s.tombstone_policy = "never"
        assert s.namespaces_for is None and s.residue_scan is False
