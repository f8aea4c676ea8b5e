"""``erase_compacted=`` on the SQLite savers: a real ``create_agent`` with the real
``SummarizationMiddleware`` and a fake chat model. Once the summarizer has dropped the
marker from the state, it is in no stored row and no byte of the database files; one
verifiable receipt per compaction; the agent keeps answering; the latest state is the
one a plain saver holds."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from compaction_agent import COMPACTIONS, MARKER, TURNS, agent, cfg, contents, turn
from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    Signer,
    verify_receipt,
)
from faults import faulty
from test_history_graphs import chat_graph, human

T = "agent-thread"


def rows_with(db: Path, value: str) -> int:
    with sqlite3.connect(db) as conn:
        n = 0
        for table in ("checkpoints", "writes"):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            cond = " OR ".join(f"instr(CAST({c} AS BLOB), ?) > 0" for c in cols)
            n += conn.execute(f"SELECT count(*) FROM {table} WHERE {cond}",
                              [value.encode()] * len(cols)).fetchone()[0]  # fmt: skip
    return int(n)


def file_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))


def receipts(archive: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in sorted(archive.glob("*.json"))]


def plain_run() -> list[list[str]]:
    a = agent(InMemorySaver())
    return [contents(a.invoke(turn(i), cfg(T))) for i in range(TURNS)]


def test_erase_history_policy(tmp_path: Path, signer: Signer) -> None:
    db, archive = tmp_path / "agent.db", tmp_path / "receipts"
    expected = plain_run()
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, residue_scan=True, erase_compacted=True
    ) as saver:
        assert saver.erase_compacted == "erase_history"
        a = agent(saver)
        gone_at = None
        for i in range(TURNS):
            out = a.invoke(turn(i), cfg(T))
            assert contents(out) == expected[i]  # the agent keeps answering, unchanged
            assert contents(a.get_state(cfg(T)).values) == expected[i]
            if gone_at is None and MARKER not in repr(out):
                gone_at = i
            if gone_at is not None:  # the marker has left the state: and every row
                assert rows_with(db, MARKER) == 0, i
                assert MARKER.encode() not in file_bytes(db), i
            else:
                assert rows_with(db, MARKER) > 0
    assert gone_at is not None
    docs = receipts(archive)
    assert len(docs) == COMPACTIONS
    for doc in docs:
        v = verify_receipt(json.dumps(doc).encode(), [signer.public_key])
        assert v.statement["predicate"]["kind"] == "history"
        scan = [r for r in v.statement["predicate"]["residue"] if r["action"] == "residue_scan"]
        assert scan and scan[0]["status"] == "applied"


def test_redact_policy_keeps_every_checkpoint(tmp_path: Path, signer: Signer) -> None:
    db, archive = tmp_path / "agent.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, erase_compacted="redact"
    ) as saver:
        a = agent(saver)
        for i in range(TURNS):
            a.invoke(turn(i), cfg(T))
        history = list(a.get_state_history(cfg(T)))
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        assert len(history) == stored  # nothing erased: every checkpoint kept
        assert all(MARKER not in repr(s.values) for s in history)
    assert rows_with(db, MARKER) == 0
    docs = receipts(archive)
    assert len(docs) == COMPACTIONS
    for doc in docs:
        v = verify_receipt(json.dumps(doc).encode(), [signer.public_key])
        assert v.statement["predicate"]["kind"] == "redaction"


def test_plain_state_graph(tmp_path: Path, signer: Signer) -> None:
    """The saver option needs no LangChain agent: a StateGraph whose node returns
    RemoveMessage (tests/sqlite/test_history_graphs.py) works the same."""
    from test_history_graphs import CARD, CHAT_TURNS

    db = tmp_path / "chat.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer,
                                               erase_compacted=True) as saver:  # fmt: skip
        g = chat_graph(saver)
        for text in CHAT_TURNS:
            g.invoke(human(text), cfg(T))
        state = g.get_state(cfg(T)).values
        assert CARD not in repr(state)
        kinds = [r.predicate["kind"] for r in saver.journal_receipts(T)]
        assert kinds and set(kinds) == {"history"}
    assert rows_with(db, CARD) == 0


def test_a_failure_is_logged_and_retried_not_raised(
    tmp_path: Path, signer: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    db, archive = tmp_path / "agent.db", tmp_path / "receipts"
    expected = plain_run()
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive,
                                               erase_compacted=True) as saver:  # fmt: skip
        a = agent(saver)
        for i in range(4):
            a.invoke(turn(i), cfg(T))
        with (
            faulty(saver, db_prepare=OSError("disk gone")),
            caplog.at_level(logging.WARNING, logger="erasure_receipts"),
        ):  # the first compaction: its erasure fails
            assert contents(a.invoke(turn(4), cfg(T))) == expected[4]
        assert "erase_compacted" in caplog.text and "disk gone" in caplog.text
        assert rows_with(db, MARKER) > 0 and not receipts(archive)
        # retried at the thread's next checkpoint
        assert contents(a.invoke(turn(5), cfg(T))) == expected[5]
    assert rows_with(db, MARKER) == 0
    assert len(receipts(archive)) == 1


async def test_async_saver(tmp_path: Path, signer: Signer) -> None:
    db, archive = tmp_path / "agent.db", tmp_path / "receipts"
    expected = plain_run()
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, erase_compacted="erase_history"
    ) as saver:
        a = agent(saver)
        for i in range(TURNS):
            assert contents(await a.ainvoke(turn(i), cfg(T))) == expected[i]
    assert rows_with(db, MARKER) == 0
    assert len(receipts(archive)) == COMPACTIONS


def test_bad_policy(tmp_path: Path, signer: Signer) -> None:
    with pytest.raises(ConfigurationError, match="erase_compacted"):
        AttestingSqliteSaver(sqlite3.connect(":memory:", check_same_thread=False),
                             signer=signer, erase_compacted="sometimes")  # fmt: skip


def test_writes_saved_after_their_checkpoint_are_handled_at_once(
    tmp_path: Path, signer: Signer
) -> None:
    """Asynchronous durability can save a step's writes after the checkpoint that
    applied them; with no later put in the run, the put_writes itself handles it."""
    from langchain_core.messages import RemoveMessage

    db = tmp_path / "agent.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        a = agent(saver)
        for i in range(3):
            a.invoke(turn(i), cfg(T))
        assert saver.erase_compacted is None
        saver.erase_compacted = "erase_history"
        history = list(a.get_state_history(cfg(T)))
        parent = history[1].config  # the checkpoint before the latest
        saver.put_writes(parent, [("messages", [RemoveMessage(id="x")])], "late-task")
        assert [r.predicate["kind"] for r in saver.journal_receipts(T)] == ["history"]
        assert len(list(a.get_state_history(cfg(T)))) == 1
        # a removal for the latest checkpoint waits for the checkpoint that applies it
        latest = a.get_state(cfg(T)).config
        saver.put_writes(latest, [("messages", [RemoveMessage(id="y")])], "next-task")
        assert len(saver.journal_receipts(T)) == 1


def test_redact_an_agent_thread_saved_without_erase_compacted(
    tmp_path: Path, signer: Signer
) -> None:
    """The same agent thread on a saver without ``erase_compacted=``: every snapshot before
    the summary keeps the marker, until ``redact`` rewrites it out of all of them."""
    from test_redact_sqlite import raw_rows, rows_holding

    db, archive, other = tmp_path / "agent.db", tmp_path / "receipts", "other-agent"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        a = agent(saver)
        for i in range(TURNS):
            a.invoke(turn(i), cfg(T))
        for i in range(3):  # another thread holding the same marker
            a.invoke(turn(i), cfg(other))
        assert MARKER not in repr(a.get_state(cfg(T)).values)  # summarized away ...
        assert rows_holding(db, MARKER, T) > 0  # ... but the earlier snapshots keep it
        other_before = raw_rows(db, other)
        before = [s.config["configurable"]["checkpoint_id"] for s in a.get_state_history(cfg(T))]
        assert list(archive.glob("*.json")) == []  # no policy ran

        receipt = saver.redact(T, [MARKER])

        history = list(a.get_state_history(cfg(T)))
        assert [s.config["configurable"]["checkpoint_id"] for s in history] == before
        assert all(MARKER not in repr(s.values) for s in history)
        assert all(MARKER not in repr(s.tasks) for s in history)
        assert rows_holding(db, MARKER, T) == 0  # raw bytes of checkpoints and writes
        assert rows_holding(db, "[redacted]", T) > 0
        assert raw_rows(db, other) == other_before  # byte-identical, marker and all
        assert rows_holding(db, MARKER, other) > 0
        # A fork from the oldest checkpoint (the input, before turn one ran) runs again
        # from the redacted input.
        oldest = history[-1]
        assert oldest.metadata is not None and oldest.metadata["step"] == -1
        forked = a.invoke(None, oldest.config)
        assert contents(forked)[0] == "my card is [redacted], turn 0"
        assert MARKER not in repr(forked)
        assert len(list(a.get_state_history(cfg(T)))) > len(before)
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_id IN "
            f"({', '.join('?' * len(before))})", [T, *before]
        ).fetchone()[0] == len(before)  # fmt: skip
    conn.close()
    v = verify_receipt(receipt.to_json(), [signer.public_key])
    p = v.statement["predicate"]
    assert p["kind"] == "redaction" and p["scope"]["thread_id"] == T
    assert p["redaction"]["checkpoints_before"] == p["redaction"]["checkpoints_after"]
    assert p["redaction"]["checkpoints_before"] == len(before)
    assert [json.loads(f.read_bytes())["statement"]["predicate"]["receipt_id"]
            for f in archive.glob("*.json")] == [receipt.receipt_id]  # fmt: skip
