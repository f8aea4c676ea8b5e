"""A batched PostgreSQL sweep reads each batch back through LangGraph's API on a second
connection, beside the next batch's transaction (real server, sync and async): the
read-back runs there and finds what a late writer put back (the batch's receipt is then
refused); a second connection that would see other tables, or cannot be opened, is not
used; and every receipt stays true either way (checked from the receipts and the rows)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    Signer,
    verify_receipt,
)
from erasure_receipts._engine import eraser as eraser_module
from pg_helpers import connect
from test_batched_sweep_postgres import IDLE, assert_exactly_once, build, listed
from test_history_graphs import cfg, chat_graph, human


def _sweep(dsn: str, signer: Signer, archive: Path, batch: int = 12, **kw: Any) -> Any:
    with AttestingPostgresSaver.from_conn_string(dsn, signer=signer, archive=archive) as saver:
        return saver.erase_idle_threads(timedelta(days=30), batch=batch, **kw)


def _late_writer_at_the_first_read_back(pg_db: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """As the first batch's read-back starts, a plain ``PostgresSaver`` writes its first
    thread again (possible without tombstones); returns ``[that thread]`` once it has."""
    real = eraser_module.api_checks
    back: list[str] = []

    def late_writer_first(reader: Any, request: Any, namespaces: Any) -> Any:
        if not back:
            back.append(request.threads[0])
            with PostgresSaver.from_conn_string(pg_db) as plain:
                chat_graph(plain).invoke(human("back again"), cfg(back[0]))
        return real(reader, request, namespaces)

    monkeypatch.setattr(eraser_module, "api_checks", late_writer_first)
    return back


def test_read_back_runs_on_a_second_connection(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(pg_db, monkeypatch)
    seen: list[tuple[str, int]] = []  # (thread, the reading connection's server pid)
    real = AttestingPostgresSaver.get_tuple

    def spy(self: AttestingPostgresSaver, config: Any) -> Any:
        seen.append((threading.current_thread().name, self.conn.info.backend_pid))
        return real(self, config)

    monkeypatch.setattr(AttestingPostgresSaver, "get_tuple", spy)
    archive = tmp_path / "receipts"
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        own = saver.conn.info.backend_pid
        result = saver.erase_idle_threads(timedelta(days=30), batch=12)
    assert result.ok and result.threads == len(IDLE)
    assert len(seen) == len(IDLE)  # one get_tuple per erased thread, all in the read-back
    assert {name.split("_")[0] for name, _ in seen} == {"erasure-readback"}
    assert own not in {pid for _, pid in seen}
    assert_exactly_once(pg_db, archive, signer)
    for p in archive.glob("*.json"):
        checks = {c["name"] for c in verify_receipt(p.read_bytes(), [signer.public_key])
                  .statement["predicate"]["checks"]}  # fmt: skip
        assert {"api_get_tuple_none", "api_list_empty"} <= checks


async def test_async_read_back_runs_on_a_second_connection(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async saver: the loop interleaves the read-back on its second connection
    with the next batch; the same receipts, each thread in exactly one."""
    build(pg_db, monkeypatch)
    pids: list[int] = []
    real = AsyncAttestingPostgresSaver.aget_tuple

    async def spy(self: AsyncAttestingPostgresSaver, config: Any) -> Any:
        pids.append(self.conn.info.backend_pid)
        return await real(self, config)

    monkeypatch.setattr(AsyncAttestingPostgresSaver, "aget_tuple", spy)
    archive = tmp_path / "receipts"
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, archive=archive
    ) as saver:
        own = saver.conn.info.backend_pid
        result = await saver.aerase_idle_threads(timedelta(days=30), batch=12)
        assert saver.conn.info.backend_pid == own
    assert result.ok and result.threads == len(IDLE)
    assert len(pids) == len(IDLE) and own not in pids and len(set(pids)) == 1
    assert_exactly_once(pg_db, archive, signer)


def test_batches_double_as_their_transactions_allow(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the read-back beside the next batch, a batch is sized from the one before's
    transaction at once (not when its receipt is issued, a batch later): 16, 32, 64..."""
    from erasure_receipts._ops import sweep_batch

    build(pg_db, monkeypatch)
    monkeypatch.setattr(sweep_batch, "BUDGET_SECONDS", 1000.0)
    archive = tmp_path / "receipts"
    result = _sweep(pg_db, signer, archive, batch=100)
    sizes = sorted(len(json.loads(p.read_bytes())["statement"]["predicate"]["scope"]["threads"])
                   for p in archive.glob("*.json"))  # fmt: skip
    assert result.ok and sizes == [16, 32, 64, len(IDLE) - 112]


def test_a_late_write_found_by_the_read_back_refuses_the_batch_receipt(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without tombstones a late writer can put an erased thread back between a batch's
    commit and its read-back: the read-back (on the second connection, while the next
    batch runs) finds it, no receipt lists that batch, its entry stays open for
    recover_receipts, and every other idle thread is in exactly one verifying receipt."""
    build(pg_db, monkeypatch)
    back = _late_writer_at_the_first_read_back(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        result = saver.erase_idle_threads(timedelta(days=30), batch=12, tombstone=False)
        pending = saver.pending_erasures()
    assert len(back) == 1 and len(pending) == 1  # the refused batch, left to recovery
    names = listed(archive)
    assert back[0] not in names and len(names) == len(set(names))
    for p in archive.glob("*.json"):
        verify_receipt(p.read_bytes(), [signer.public_key])
    with connect(pg_db) as c:
        alive = {r[0] for r in c.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert back[0] in alive  # the late write is there, and no receipt says otherwise
    assert set(names) == IDLE - alive - _first_batch(back[0])
    assert result.threads == len(names)


def test_a_read_back_connection_lost_mid_sweep_reads_back_in_turn(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second connection is terminated by the server during the second batch's
    read-back: that batch is read back on the saver's connection instead, so are the
    next (no failure is taken for evidence); every idle thread is in exactly one
    verifying receipt."""
    build(pg_db, monkeypatch)
    real = eraser_module.api_checks
    calls: list[str] = []

    def terminated_second(reader: Any, request: Any, namespaces: Any) -> Any:
        calls.append(threading.current_thread().name)
        if len(calls) == 2:
            with connect(pg_db) as c:
                c.execute("SELECT pg_terminate_backend(%s)", (reader.saver.conn.info.backend_pid,))
        return real(reader, request, namespaces)

    monkeypatch.setattr(eraser_module, "api_checks", terminated_second)
    archive = tmp_path / "receipts"
    result = _sweep(pg_db, signer, archive)
    assert result.ok and result.threads == len(IDLE) and result.failed == 0
    # 15 batches; the second and the third (started before the second's failure was
    # known) read back twice, the rest in turn only.
    second = [n.startswith("erasure-readback") for n in calls]
    assert len(calls) == 17 and second[:2] == [True, True] and sum(second) == 3
    assert_exactly_once(pg_db, archive, signer)


def test_a_batch_whose_receipt_failed_counts_against_the_limit(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``limit=30``: the first batch commits but its read-back finds a late write, so it
    has no receipt (its entry stays open); its threads are gone all the same, so the
    sweep erases only 18 more."""
    build(pg_db, monkeypatch)
    _late_writer_at_the_first_read_back(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    result = _sweep(pg_db, signer, archive, tombstone=False, limit=30)
    assert result.limited and result.threads == 18 and len(listed(archive)) == 18
    with connect(pg_db) as c:
        alive = {r[0] for r in c.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert len(IDLE - alive) == 30 - 1  # 11 of the refused batch (one came back) + 18


def test_interrupted_while_waiting_for_a_read_back_releases_the_leases(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT reaches the sweep while it waits for the second batch's read-back: the
    KeyboardInterrupt propagates (its traceback kept alive, so nothing is released by
    garbage collection), every lease of this process is released at once, and
    recover_receipts in the same process issues what committed."""
    from erasure_receipts import _lease
    from erasure_receipts._backends.postgres import LEASE_CLASS

    build(pg_db, monkeypatch)
    real = eraser_module.api_checks
    main = threading.main_thread().ident
    calls = [0]

    def interrupt_the_wait(reader: Any, request: Any, namespaces: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:  # the main thread will wait for this one
            time.sleep(0.3)
            assert main is not None
            signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.3)
        return real(reader, request, namespaces)

    monkeypatch.setattr(eraser_module, "api_checks", interrupt_the_wait)
    archive = tmp_path / "receipts"
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        with pytest.raises(KeyboardInterrupt) as caught:
            saver.erase_idle_threads(timedelta(days=30), batch=12)
        assert caught.value.__traceback__ is not None  # frames alive: no GC release
        assert not _lease._HELD
        held = saver.conn.execute(
            "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND pid = pg_backend_pid()", (LEASE_CLASS,),
        ).fetchone()  # fmt: skip
        assert held is not None and held["n"] == 0
        open_entries = len(saver.pending_erasures())
        assert open_entries >= 1
        assert len(saver.recover_receipts(min_age_seconds=0)) == open_entries
        saver.erase_idle_threads(timedelta(days=30), batch=12)
    assert_exactly_once(pg_db, archive, signer)


def _first_batch(first: str) -> set[str]:
    """The 12 idle threads of the first batch (sorted, from ``first``)."""
    ordered = sorted(IDLE)
    i = ordered.index(first)
    return set(ordered[i : i + 12])


def test_a_second_connection_that_sees_other_tables_is_not_used(pg_db: str, signer: Signer) -> None:
    """A temporary table named ``checkpoints`` on the saver's connection hides the real
    one there but not on a new connection: that one would read back other rows."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        with saver._readback_saver() as twin:
            assert twin is not None and twin.conn is not saver.conn
            assert twin.conn.info.backend_pid != saver.conn.info.backend_pid
            assert twin.get_tuple(cfg("nobody")) is None
        assert twin.conn.closed
        saver.conn.execute("CREATE TEMP TABLE checkpoints (thread_id text)")
        with saver._readback_saver() as twin:
            assert twin is None


def test_the_second_connection_reads_as_the_first(pg_db: str, signer: Signer) -> None:
    """Of a list of hosts, the second connection goes to the one the saver's reached (a
    standby or another server would read another state); another role (``SET ROLE``)
    or a connection outside autocommit gets none."""
    params = psycopg.conninfo.conninfo_to_dict(pg_db)
    hosts = psycopg.conninfo.make_conninfo(pg_db, host=f"/nonexistent,{params['host']}",
                                           port=f"{params.get('port', 5432)},"
                                                f"{params.get('port', 5432)}")  # fmt: skip
    with AttestingPostgresSaver.from_conn_string(hosts, signer=signer) as saver:
        saver.setup()
        assert saver.conn.info.host == params["host"]
        with saver._readback_saver() as twin:
            assert twin is not None and twin.conn.info.host == params["host"]
        role = f"r_{saver.conn.info.backend_pid}"
        saver.conn.execute(f"CREATE ROLE {role}")
        try:
            saver.conn.execute(f"SET ROLE {role}")
            with saver._readback_saver() as twin:
                assert twin is None
            saver.conn.execute("RESET ROLE")
        finally:
            saver.conn.execute(f"DROP ROLE {role}")
    with psycopg.Connection.connect(pg_db, row_factory=dict_row) as manual:  # not autocommit
        saver = AttestingPostgresSaver(manual, signer=signer)
        with saver._readback_saver() as twin:
            assert twin is None
        assert manual.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_row_level_security_or_session_settings_keep_the_read_back_in_turn(
    pg_db: str, signer: Signer
) -> None:
    """Row-level security on a checkpoint table (a policy may read a setting no catalog
    lists, ``SET app.tenant``), or a setting the saver's session changed: a second
    connection might not see what the saver sees, so none is used."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        saver.conn.execute("SET statement_timeout = '5min'")
        with saver._readback_saver() as twin:
            assert twin is None
        saver.conn.execute("RESET statement_timeout")
        with saver._readback_saver() as twin:
            assert twin is not None
        saver.conn.execute("ALTER TABLE checkpoint_writes ENABLE ROW LEVEL SECURITY")
        with saver._readback_saver() as twin:
            assert twin is None


def test_a_pipeline_or_a_store_keeps_the_read_back_in_turn(pg_db: str, signer: Signer) -> None:
    """State tied to the saver's connection (its pipeline, a store that may share it):
    no second connection is opened."""
    from langgraph.store.postgres import PostgresStore

    with (
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, pipeline=True) as s,
        s._readback_saver() as twin,
    ):
        assert twin is None
    with (
        PostgresStore.from_conn_string(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as s,
    ):
        with s._readback_saver() as twin:
            assert twin is None
        s.store = None  # the same saver without it does get one
        with s._readback_saver() as twin:
            assert twin is not None


def test_no_second_connection_reads_back_in_turn(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New connections refused (the database closed to them after the saver connected):
    the sweep reads each batch back on its own connection, in turn, and finishes."""
    build(pg_db, monkeypatch)
    name = psycopg.conninfo.conninfo_to_dict(pg_db)["dbname"]
    archive = tmp_path / "receipts"
    names: list[str] = []
    real = AttestingPostgresSaver.get_tuple

    def spy(self: AttestingPostgresSaver, config: Any) -> Any:
        names.append(threading.current_thread().name)
        return real(self, config)

    monkeypatch.setattr(AttestingPostgresSaver, "get_tuple", spy)
    admin = psycopg.conninfo.make_conninfo(pg_db, dbname="postgres")
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        with connect(admin) as c:
            c.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        try:
            with pytest.raises(psycopg.OperationalError):
                connect(pg_db).close()  # really refused
            result = saver.erase_idle_threads(timedelta(days=30), batch=12)
        finally:
            with connect(admin) as c:
                c.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    assert result.ok and result.threads == len(IDLE)
    assert names and set(names) == {threading.current_thread().name}
    assert_exactly_once(pg_db, archive, signer)


def test_sweep_interrupted_with_a_batch_pending_leaves_it_to_recovery(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception out of the sweep (here from the progress callback) while a batch
    waits for its receipt: its lease is released, its entry stays open, and the next
    sweep issues it; every idle thread ends in exactly one verifying receipt."""
    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    calls = [0]

    def progress(event: Any) -> None:
        calls[0] += 1
        if calls[0] == 30:  # during the third batch's events
            raise KeyboardInterrupt

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        with pytest.raises(KeyboardInterrupt):
            saver.erase_idle_threads(timedelta(days=30), batch=12, progress=progress)
        assert len(saver.pending_erasures()) == 1
        saver.erase_idle_threads(timedelta(days=30), batch=12)
        assert saver.pending_erasures() == []
    assert_exactly_once(pg_db, archive, signer)


KILLED_WITH_TWO_OPEN = """
import os, signal, sys
from datetime import timedelta
from erasure_receipts import AttestingPostgresSaver, Signer
from erasure_receipts._engine.eraser import Eraser
real, calls = Eraser.finish, [0]
def finish(self, done):
    calls[0] += 1
    if calls[0] == 3:  # batch 3 waits for its receipt, batch 4 has committed
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, done)
Eraser.finish = finish
with AttestingPostgresSaver.from_conn_string(sys.argv[1], signer=Signer.from_seed(bytes(range(32))),
                                             archive=sys.argv[2]) as saver:
    saver.erase_idle_threads(timedelta(days=30), batch=12)
"""


def test_killed_with_two_batches_open_then_rerun(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL while one batch waits for its receipt and the next has committed: both
    journal entries are open (their leases end with the connection); the re-run issues
    both and sweeps the rest, every idle thread in exactly one verifying receipt."""
    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    run = subprocess.run([sys.executable, "-c", KILLED_WITH_TWO_OPEN, pg_db, str(archive)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert len(list(archive.glob("*.json"))) == 2
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        assert len(saver.pending_erasures()) == 2
        result = saver.erase_idle_threads(timedelta(days=30), batch=12)
        assert result.recovered == 2 and saver.pending_erasures() == []
    assert_exactly_once(pg_db, archive, signer)
