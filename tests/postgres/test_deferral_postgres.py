"""Signed decisions to retain on PostgreSQL (real server, RECEIPT_SPEC.md 9.14): the
deferral recorded by ``setup()``'s tables, a retained thread kept byte for byte by a
sweep and refused to ``erase_thread``, then erased by the sweep once the injected clock
passes ``until`` (the receipt names the deferral); a subject and a history deferral;
the async saver on a connection pool; a second process sees the deferral."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ConfigurationError,
    DeferralScope,
    DeferredError,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from pg_helpers import connect, fingerprint
from test_history_graphs import CHAT_TURNS, cfg, chat_graph, human

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
WORKER = """
import sys
from erasure_receipts import AttestingPostgresSaver, DeferredError, Signer
with AttestingPostgresSaver.from_conn_string(sys.argv[1], signer=Signer.generate()) as s:
    try:
        s.erase_thread("kept")
    except DeferredError as e:
        print(e.reason, len(s.deferrals("open")))
"""


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(days=2)

    def __call__(self) -> datetime:
        return self.now


def _prints(dsn: str, thread: str) -> dict[str, str]:
    return {t: fingerprint(dsn, t, "thread_id = %s", (thread,)) for t in TABLES}


def _gone(dsn: str, thread: str) -> bool:
    with connect(dsn) as conn:
        return all(
            conn.execute(f"SELECT count(*) FROM {t} WHERE thread_id = %s", (thread,)).fetchone()
            == (0,)
            for t in TABLES
        )


def _chat(saver: Any, *threads: str) -> None:
    graph = chat_graph(saver)
    for t in threads:
        for turn in CHAT_TURNS[:3]:
            graph.invoke(human(turn), cfg(t))


def test_pg_defer_sweep_then_erase(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    archive, clock = tmp_path / "receipts", Clock()
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, archive=archive, clock=clock
    ) as saver:
        saver.setup()
        _chat(saver, "kept", "other", "h1", "s1")
        with connect(pg_db) as conn:  # setup() made the tables
            assert conn.execute("SELECT to_regclass('erasure_deferrals') IS NOT NULL").fetchone()[0]
        until = clock.now + timedelta(days=30)
        d = saver.defer("kept", basis="GDPR Art. 17(3)(e): legal claims", until=until,
                        code="gdpr-17-3-e")  # fmt: skip
        assert d.predicate["backend"]["kind"] == "postgres"
        assert d.predicate["pre_state"]["digest"]["sha256"] == saver.digest_thread("kept").digest
        verify_receipt(d.to_json(), [signer.public_key])
        h = saver.defer(DeferralScope.history("h1"), basis="AI Act Art. 19", until=until)
        s = saver.defer(DeferralScope.subject("bob", threads=["s1"]), basis="claim", until=until)
        for r in (h, s):
            verify_receipt(r.to_json(), [signer.public_key])

        before = _prints(pg_db, "kept")
        res = saver.erase_idle_threads(timedelta(days=1))
        assert res.ok and res.skipped == {"deferred": 3} and res.threads == 1, res
        assert _prints(pg_db, "kept") == before
        assert _gone(pg_db, "other")
        with pytest.raises(DeferredError):
            saver.erase_thread("kept")
        with pytest.raises(DeferredError):
            saver.erase_history("h1")
        assert _prints(pg_db, "kept") == before

        # another process (a worker) sees the deferral in the database
        script = WORKER
        out = subprocess.run([sys.executable, "-c", script, pg_db], capture_output=True,
                             text=True, timeout=120, check=True)  # fmt: skip
        assert out.stdout.split() == ["deferred", "3"]

        clock.now = until + timedelta(seconds=1)
        res = saver.erase_idle_threads(timedelta(days=1))
        assert res.ok and res.deferrals == 3, res
        assert _gone(pg_db, "kept") and _gone(pg_db, "s1")
        by_id = {
            json.loads(f.read_bytes())["statement"]["predicate"].get("deferral_of"): f
            for f in archive.glob("*.json")
        }
        for deferral in (d, h, s):
            data = by_id[deferral.receipt_id].read_bytes()
            v = verify_receipt(data, [signer.public_key])
            assert v.status == "erased"
            assert v.statement["predicate"]["kind"] == deferral.predicate["deferral"]["of_kind"]
        assert {x.state for x in saver.deferrals()} == {"executed"}


def test_pg_bad_input(pg_db: str, signer: Signer) -> None:
    clock = Clock()
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, clock=clock) as saver:
        saver.setup()
        _chat(saver, "t1")
        with pytest.raises(ConfigurationError, match="not in the future"):
            saver.defer("t1", basis="b", until=clock.now)
        with pytest.raises(ConfigurationError, match="empty"):
            saver.defer("t1", basis="", until=clock.now + timedelta(days=1))
        with pytest.raises(NothingToEraseError, match="nothing to defer"):
            saver.defer("nope", basis="b", until=clock.now + timedelta(days=1))
        assert saver.deferrals() == []


async def test_pg_async_defer(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    clock = Clock()
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        _chat(saver, "t1")
    before = _prints(pg_db, "t1")
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=4,
                                   open=False) as pool:  # fmt: skip
        saver = AsyncAttestingPostgresSaver(pool, signer=signer, clock=clock,
                                            archive=tmp_path / "r")  # fmt: skip
        await saver.setup()
        d = await saver.adefer("t1", basis="b", until=clock.now + timedelta(hours=1))
        verify_receipt(d.to_json(), [signer.public_key])
        with pytest.raises(DeferredError):
            await saver.aerase_thread("t1")
        res = await saver.aerase_idle_threads(timedelta(days=1))
        assert res.skipped == {"deferred": 1}
        assert _prints(pg_db, "t1") == before
        r = await saver.aerase_thread("t1", override_deferral=True)
        assert r.predicate["deferral_of"] == d.receipt_id
        [rec] = await saver.adeferrals()
        assert (rec.state, rec.closed_by, rec.note) == ("executed", r.receipt_id, "overridden")
    assert _gone(pg_db, "t1")


def test_pg_schema_from_before_deferrals(pg_db: str, signer: Signer) -> None:
    """A database whose library schema predates the deferral tables (setup() not run
    again): erasures work as before and the first defer() creates the tables."""
    clock = Clock()
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        _chat(saver, "t1", "t2")
    with connect(pg_db) as conn:
        conn.execute("DROP TABLE erasure_deferrals, erasure_deferral_threads")
        conn.commit()
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, clock=clock) as saver:
        assert saver.deferrals() == []
        saver.erase_thread("t2")
        d = saver.defer("t1", basis="b", until=clock.now + timedelta(days=1))
        assert [x.receipt_id for x in saver.deferrals("open")] == [d.receipt_id]
        with pytest.raises(DeferredError):
            saver.erase_thread("t1")


def test_pg_defer_waits_for_a_running_erasure(pg_db: str, signer: Signer) -> None:
    """An erasure in flight in another session (it holds the thread's advisory lock and
    has deleted the rows, uncommitted): the deferral measures the committed rows, then
    its record waits for the erasure's commit, finds the thread gone and records
    nothing."""
    import threading
    import time

    from erasure_receipts._backends.postgres.schema import ADVISORY_CLASS

    clock = Clock()
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, clock=clock) as saver:
        saver.setup()
        _chat(saver, "t1")
        eraser = psycopg.connect(pg_db)  # not autocommit: one open transaction
        eraser.execute("SELECT pg_advisory_xact_lock(%s, hashtext('t1'))", (ADVISORY_CLASS,))
        for t in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
            eraser.execute(f"DELETE FROM {t} WHERE thread_id = 't1'")
        outcome: dict[str, Any] = {}

        def run() -> None:
            start = time.monotonic()
            try:
                saver.defer("t1", basis="b", until=clock.now + timedelta(days=1))
            except Exception as exc:
                outcome["error"] = exc
            outcome["waited"] = time.monotonic() - start

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(1.5)
        assert worker.is_alive()  # waiting for the erasure's lock
        eraser.commit()
        eraser.close()
        worker.join(timeout=60)
        assert not worker.is_alive()
        assert outcome["waited"] >= 1.4
        assert "erased while the deferral was recorded" in str(outcome["error"])
        assert saver.deferrals() == []
