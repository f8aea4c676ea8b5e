"""Threads the retention sweeps (history.py, app.py ``retention``) skip or measure read-only:

1. a thread with id ``""`` (LangGraph accepts it) is skipped as ``invalid_id``, the
   sweep goes on with the others (API and CLI);
2. a thread being resumed right now (``Command(resume=...)``: ``__resume__`` written under
   its old latest checkpoint, the new checkpoint only when the node finishes) is skipped
   as ``active``, not erased as idle; an interrupted thread at rest is still erased;
3. ``receipt retention <DSN> --dry-run`` on a PostgreSQL database without this library's
   schema measures read-only (nothing created); a real run installs the schema;
4. a SQLite thread id that is not valid UTF-8 (another writer) is skipped as
   ``invalid_id``; the page it is on, and the pages after it, are still swept.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner, Result

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts._ops import history as history_module  # internals: page size
from erasure_receipts.app import app
from test_history_graphs import cfg, chat_graph, checkpoint_clock, human

OLD = timedelta(days=40)
AGE = timedelta(days=30)


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def _key(tmp_path: Path, signer: Signer) -> Path:
    key = tmp_path / "signer.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    return key


def sqlite_threads(db: Path) -> set[bytes]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT DISTINCT CAST(thread_id AS BLOB) FROM checkpoints")
        return {bytes(r[0]) for r in rows}


def old_sqlite_db(path: Path, monkeypatch: pytest.MonkeyPatch, threads: list[str]) -> Path:
    """Old chat threads written by LangGraph's own SqliteSaver (it accepts ``""``)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        graph = chat_graph(SqliteSaver(conn))
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - OLD):
            for t in threads:
                graph.invoke(human(f"old conversation {t}"), cfg(t))
    finally:
        conn.close()
    return path


# -- 1. thread id "" ----------------------------------------------------------------------


def test_empty_thread_id_is_skipped_and_the_sweep_goes_on(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, ["", "a", "b"])
    archive = tmp_path / "receipts"
    events: list[Any] = []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        dry = saver.erase_idle_threads(AGE, dry_run=True)
        assert dry.threads == 2 and dry.skipped == {"invalid_id": 1}
        pruned = saver.prune_histories(AGE)
        assert pruned.ok and pruned.threads == 2 and pruned.skipped == {"invalid_id": 1}
        result = saver.erase_idle_threads(AGE, progress=events.append)
        assert result.ok and result.threads == result.receipts == 2
        assert result.skipped == {"invalid_id": 1}
        assert result.to_json()["skipped"] == {"invalid_id": 1}
        assert ("", "invalid_id") in {(e.thread_id, e.outcome) for e in events}
        assert saver.is_erased("a") and saver.is_erased("b")
    assert sqlite_threads(db) == {b""}  # the "" thread is left alone, reported
    for p in archive.glob("*.json"):
        verify_receipt(p.read_bytes(), [signer.public_key])


def test_cli_retention_with_an_empty_thread_id(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, ["", "a"])
    dry = cli("retention", db, "--idle", "30d", "--history", "30d", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.stdout, dry.stderr)
    doc = json.loads(dry.stdout)
    assert doc["idle"]["skipped"] == {"invalid_id": 1} and doc["idle"]["threads"] == 1
    assert doc["history"]["skipped"] == {"invalid_id": 1} and doc["history"]["threads"] == 1
    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    run = cli("retention", db, "--idle", "30d", "--key", key, "--archive", archive)
    assert run.exit_code == 0, (run.stdout, run.stderr)
    assert "1 threads erased" in run.stdout and "invalid_id 1" in run.stdout
    assert sqlite_threads(db) == {b""}


# -- 2. a thread being resumed ------------------------------------------------------------


class Approval(TypedDict):
    answer: str


class _Gate:
    """Holds the resumed node until released (a resume that takes a while)."""

    def __init__(self) -> None:
        self.resumed = threading.Event()
        self.release = threading.Event()
        self.hold = False

    def node(self, state: Approval) -> dict[str, Any]:
        answer = interrupt("approve?")
        if self.hold:
            self.resumed.set()
            assert self.release.wait(60)
        return {"answer": f"approved: {answer}"}


def approval_graph(saver: Any, gate: _Gate) -> Any:
    g = StateGraph(Approval)
    g.add_node("ask", gate.node)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def _resume_in_background(
    graph: Any, thread: str, gate: _Gate, wrote_resume: Callable[[], bool]
) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    gate.hold = True
    worker = threading.Thread(target=lambda: out.append(
        graph.invoke(Command(resume="yes"), cfg(thread))))  # fmt: skip
    worker.start()
    assert gate.resumed.wait(30)
    deadline = time.monotonic() + 30
    while not wrote_resume():  # LangGraph saves the resume on a background thread
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return worker, out


def test_thread_being_resumed_is_not_erased(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "app.db"
    conn = sqlite3.connect(db, check_same_thread=False)  # another worker's connection
    gate = _Gate()
    graph = approval_graph(SqliteSaver(conn), gate)
    with checkpoint_clock(monkeypatch, datetime.now(UTC) - OLD):
        for t in ("resuming", "waiting"):  # both interrupted 40 days ago
            graph.invoke({"answer": ""}, cfg(t))

    def wrote_resume() -> bool:
        with sqlite3.connect(db) as c:
            return bool(c.execute("SELECT 1 FROM writes WHERE thread_id = 'resuming' "
                                  "AND channel = '__resume__'").fetchall())  # fmt: skip

    worker, out = _resume_in_background(graph, "resuming", gate, wrote_resume)
    try:
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer,
                                                   archive=tmp_path / "r") as saver:  # fmt: skip
            dry = saver.erase_idle_threads(AGE, dry_run=True)
            assert dry.threads == 1 and dry.skipped == {"active": 1}
            result = saver.erase_idle_threads(AGE)
            assert result.ok and result.threads == 1 and result.skipped == {"active": 1}
            assert saver.is_erased("waiting")  # interrupted, at rest: erased
            assert not saver.is_erased("resuming")
    finally:
        gate.release.set()
        worker.join(60)
    assert out and out[0]["answer"] == "approved: yes"  # the resume finished normally
    conn.close()


# -- 4. a thread id that is not UTF-8 -------------------------------------------------------


def test_non_utf8_thread_id_is_skipped_and_paging_goes_on(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, ["a", "c", "z"])
    with sqlite3.connect(db) as conn:  # another writer: bytes 74 ff 00 as TEXT
        conn.execute(
            "INSERT INTO checkpoints SELECT CAST(X'74ff00' AS TEXT), checkpoint_ns, "
            "checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
            "FROM checkpoints WHERE thread_id = 'c'"
        )
    bad = b"t\xff\x00"
    monkeypatch.setattr(history_module, "PAGE", 1)  # page boundaries at the bad id
    archive = tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        assert saver.count_idle_threads(AGE) == 4
        dry = saver.erase_idle_threads(AGE, dry_run=True)
        assert dry.threads == 3 and dry.skipped == {"invalid_id": 1}
        result = saver.erase_idle_threads(AGE)
        assert result.ok and result.threads == 3 and result.skipped == {"invalid_id": 1}
    assert sqlite_threads(db) == {bad}
    monkeypatch.setattr(history_module, "PAGE", 500)
    run = cli("retention", db, "--history", "30d", "--dry-run", "--json")
    assert run.exit_code == 0, (run.stdout, run.stderr)
    assert json.loads(run.stdout)["history"]["skipped"] == {"invalid_id": 1}


# -- PostgreSQL ------------------------------------------------------------------------------


def _pg_old_threads(dsn: str, monkeypatch: pytest.MonkeyPatch, threads: list[str]) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(dsn) as plain:
        plain.setup()
        graph = chat_graph(plain)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - OLD):
            for t in threads:
                graph.invoke(human(f"old conversation {t}"), cfg(t))


def _erasure_objects(dsn: str) -> list[str]:
    from pg_helpers import connect

    with connect(dsn) as c:
        rows = c.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'erasure%' UNION ALL "
            "SELECT tgname FROM pg_trigger WHERE tgname LIKE 'erasure%' UNION ALL "
            "SELECT proname FROM pg_proc WHERE proname LIKE 'erasure%'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def _pg_threads(dsn: str) -> set[str]:
    from pg_helpers import connect

    with connect(dsn) as c:
        return {r[0] for r in c.execute("SELECT DISTINCT thread_id FROM checkpoints")}


@pytest.fixture
def pg_saver(pg_db: str, signer: Signer, tmp_path: Path) -> Iterator[Any]:
    from erasure_receipts import AttestingPostgresSaver

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer,
                                                 archive=tmp_path / "r") as saver:  # fmt: skip
        saver.setup()
        yield saver


def test_pg_cli_retention_dry_run_on_a_plain_langgraph_database(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pg_old_threads(pg_db, monkeypatch, ["", "a", "b"])
    assert _erasure_objects(pg_db) == []
    dry = cli("retention", pg_db, "--idle", "30d", "--history", "30d", "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.stdout, dry.stderr, dry.exception)
    doc = json.loads(dry.stdout)
    assert doc["idle"]["threads"] == 2 and doc["idle"]["rows"] > 0
    assert doc["idle"]["skipped"] == {"invalid_id": 1}
    assert doc["history"]["threads"] == 2
    assert _erasure_objects(pg_db) == []  # read-only: nothing installed
    assert _pg_threads(pg_db) == {"", "a", "b"}
    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    run = cli("retention", pg_db, "--idle", "30d", "--key", key, "--archive", archive, "--json")
    assert run.exit_code == 0, (run.stdout, run.stderr, run.exception)
    doc = json.loads(run.stdout)
    assert doc["totals"]["receipts"] == 2 and doc["idle"]["rows"] == json.loads(
        dry.stdout)["idle"]["rows"]  # fmt: skip
    assert "erasure_tombstones" in _erasure_objects(pg_db)  # a real run installs it
    assert _pg_threads(pg_db) == {""}


def test_pg_thread_being_resumed_is_not_erased(
    pg_db: str, pg_saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    from pg_helpers import connect

    gate = _Gate()
    with PostgresSaver.from_conn_string(pg_db) as plain:  # another worker
        graph = approval_graph(plain, gate)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - OLD):
            for t in ("resuming", "waiting"):
                graph.invoke({"answer": ""}, cfg(t))

        def wrote_resume() -> bool:
            with connect(pg_db) as c:
                sql = ("SELECT 1 FROM checkpoint_writes WHERE thread_id = 'resuming' "
                       "AND channel = '__resume__'")  # fmt: skip
                return bool(c.execute(sql).fetchall())

        worker, out = _resume_in_background(graph, "resuming", gate, wrote_resume)
        try:
            result = pg_saver.erase_idle_threads(AGE)
            assert result.ok and result.threads == 1 and result.skipped == {"active": 1}
            assert pg_saver.is_erased("waiting") and not pg_saver.is_erased("resuming")
        finally:
            gate.release.set()
            worker.join(60)
    assert out and out[0]["answer"] == "approved: yes"
