"""PostgreSQL: what a receipt says about residue is what was verified.

A store in another database whose ``search`` hides expired rows (``omit_expired``) is
erased whole; ``VACUUM`` is ``applied`` only when the erased tuples are verifiably gone
from the table files, ``partial`` naming what held them otherwise. Assertions are on
raw rows and on the bytes of the relation files under the data directory.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    AttestingSqliteSaver,
    Signer,
    verify_receipt,
)
from pg_helpers import connect, count
from pg_server import fresh_database

T = "alice-chat"
NS = ("users", "alice")
TTL = {"omit_expired": True}


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def put(saver: Any, thread: str, i: int, payload: Any = "x", *, old: bool = False) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": payload}
    # ``old``: a uuid6 id from 40 days ago (retention reads the time inside the id).
    cp["id"] = str(uuid6(clock_seq=i, at=OLD)) if old else f"1ef{i:029d}"
    return saver.put(cfg(thread), cp, {"step": i}, {"v": f"{i:032d}"})


@pytest.fixture
def other_db(pg_dsn: str) -> Iterator[str]:
    """A second fresh database on the same server (the store's)."""
    with fresh_database(pg_dsn, "s") as dsn:
        yield dsn


def fill(store: Any) -> None:
    for i in range(3):
        store.put(NS, f"k{i}", {"i": i})
    store.put((*NS, "notes"), "old", {"note": "expired but not yet purged"})
    store.put(("users", "bob"), "identity", {"name": "bob"})


def expire(dsn: str) -> None:
    """One alice item TTL-expired and still stored (what the TTL sweeper has not reached)."""
    with connect(dsn) as conn:
        conn.execute(
            "UPDATE store SET expires_at = now() - interval '1 hour', ttl_minutes = 1 "
            "WHERE prefix = 'users.alice.notes' AND key = 'old'"
        )


ALICE = ("prefix = %s OR prefix LIKE %s", ("users.alice", "users.alice.%"))


def check_store_erased(receipt: Any, store_dsn: str, signer: Signer) -> None:
    assert count(store_dsn, "store", *ALICE) == 0  # the expired row too, by raw SQL
    assert count(store_dsn, "store", "prefix = %s", ("users.bob",)) == 1
    assert receipt.predicate["methods"]["store"] == "sweep"
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 4
    scrub = {r["action"]: r for r in receipt.predicate["residue"]}["store.scrub"]
    assert scrub["detail"]["expired_rows_hidden_from_search"] == 1
    assert verify_receipt(receipt.to_json(), [signer.public_key]).thread_id == T


def test_pg_store_in_other_database_hidden_expired_rows_erased(
    pg_db: str, other_db: str, signer: Signer
) -> None:
    with (
        PostgresStore.from_conn_string(other_db, ttl=TTL) as store,  # type: ignore[arg-type]
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        put(saver, T, 1)
        fill(store)
        expire(other_db)
        assert len(store.search(NS, limit=100)) == 3  # search hides the expired row
        assert count(other_db, "store", *ALICE) == 4
        preview = saver.digest_thread(T, [NS])
        receipt = saver.erase_thread(T, store_namespaces=[NS])
        assert preview.digest == receipt.pre_digest  # the hidden row measured by both
    check_store_erased(receipt, other_db, signer)


async def test_pg_async_store_in_other_database_hidden_expired_rows_erased(
    pg_db: str, other_db: str, signer: Signer
) -> None:
    async with (
        AsyncPostgresStore.from_conn_string(other_db, ttl=TTL) as store,  # type: ignore[arg-type]
        AsyncAttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        await store.setup()
        await saver.setup()
        await asyncio.to_thread(fill, store)
        expire(other_db)
        await saver.aput(cfg(T), empty_checkpoint(), {"step": 1}, {})
        assert len(await store.asearch(NS, limit=100)) == 3
        receipt = await saver.aerase_thread(T, store_namespaces=[NS])
    check_store_erased(receipt, other_db, signer)


def test_sqlite_saver_with_pg_store_hidden_expired_rows_erased(
    tmp_path: Path, other_db: str, signer: Signer
) -> None:
    with PostgresStore.from_conn_string(other_db, ttl=TTL) as store:  # type: ignore[arg-type]
        store.setup()
        saver = AttestingSqliteSaver(
            sqlite3.connect(tmp_path / "c.db", check_same_thread=False),
            signer=signer,
            store=store,
        )
        saver.setup()
        put(saver, T, 1)
        fill(store)
        expire(other_db)
        receipt = saver.erase_thread(T, store_namespaces=[NS])
    assert count(other_db, "store", *ALICE) == 0
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 4


def test_sqlite_store_shows_expired_rows_to_search(tmp_path: Path, signer: Signer) -> None:
    # SqliteStore has no omit_expired: search returns expired rows, so the API sweep
    # sees the namespace whole (pinned here so a future option is noticed).
    store = SqliteStore(
        sqlite3.connect(tmp_path / "s.db", check_same_thread=False, isolation_level=None)
    )
    store.setup()
    fill(store)
    store.conn.execute(
        "UPDATE store SET expires_at = datetime('now', '-1 hour'), ttl_minutes = 1 "
        "WHERE prefix = 'users.alice.notes'"
    )
    assert len(store.search(NS, limit=100)) == 4
    saver = AttestingSqliteSaver(
        sqlite3.connect(tmp_path / "c.db", check_same_thread=False), signer=signer, store=store
    )
    saver.setup()
    put(saver, T, 1)
    receipt = saver.erase_thread(T, store_namespaces=[NS])
    raw = sqlite3.connect(tmp_path / "s.db")
    left = raw.execute(
        "SELECT count(*) FROM store WHERE prefix = 'users.alice' OR prefix LIKE 'users.alice.%'"
    ).fetchone()[0]
    assert left == 0
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 4


# -- VACUUM: applied only when verified -------------------------------------------------

SECRET = b"erased-payload-7f3a"
KEPT = b"bystander-payload-c41e"
VACUUMED = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def uuid6(clock_seq: int, at: datetime) -> uuid.UUID:
    """A version-6 uuid for time ``at`` (as LangGraph makes checkpoint ids)."""
    ticks = int((at - datetime(1582, 10, 15, tzinfo=UTC)).total_seconds() * 10**7)
    high, low = ticks >> 12, ticks & 0xFFF
    n = (high << 80) | (0x6 << 76) | (low << 64) | (0x2 << 62) | (clock_seq << 48) | 0x1234
    return uuid.UUID(int=n)


OLD = datetime.now(UTC) - timedelta(days=40)


def fill_threads(saver: Any, *, old: bool = False) -> None:
    """The erased thread and a bystander, each with its marker in every table."""
    for thread, mark in ((T, SECRET), ("bob-chat", KEPT)):
        for i in range(1, 6):
            config = put(saver, thread, i, {"note": mark.decode(), "i": i}, old=old)
            if i < 5:  # pending writes on the latest checkpoint: a run in flight
                saver.put_writes(config, [("v", {"w": mark.decode()})], f"task-{i}")


def relation_files(dsn: str, table: str) -> list[Path]:
    """The files of a table, its TOAST table and all their indexes, under the data
    directory (read as the OS user; flushed by a CHECKPOINT first)."""
    with connect(dsn) as conn:
        conn.execute("CHECKPOINT")
        data = Path(conn.execute("SELECT current_setting('data_directory')").fetchone()[0])
        rows = conn.execute(
            "WITH r AS (SELECT c.oid FROM pg_class c WHERE c.oid = %s::regclass "
            "UNION ALL SELECT c.reltoastrelid FROM pg_class c "
            "WHERE c.oid = %s::regclass AND c.reltoastrelid <> 0) "
            "SELECT pg_relation_filepath(r.oid) FROM r UNION ALL "
            "SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i "
            "JOIN r ON i.indrelid = r.oid",
            (table, table),
        ).fetchall()
    files = []
    for (rel,) in rows:
        base = data / rel
        files += [base, *sorted(base.parent.glob(base.name + ".[0-9]*"))]
    return [f for f in files if f.exists()]


def in_files(dsn: str, needle: bytes) -> int:
    """Occurrences of ``needle`` in the raw bytes of the vacuumed tables' files."""
    return sum(f.read_bytes().count(needle) for t in VACUUMED for f in relation_files(dsn, t))


def in_tuples(dsn: str, needle: bytes) -> int:
    """Tuples (live or dead) whose data holds ``needle``, page by page (pageinspect)."""
    n = 0
    with connect(dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        for t in VACUUMED:
            pages = conn.execute("SELECT pg_relation_size(%s) / 8192", (t,)).fetchone()[0]
            for p in range(pages):
                n += conn.execute(
                    "SELECT count(*) FROM heap_page_items(get_raw_page(%s, %s)) "
                    "WHERE position(%s::bytea in t_data) > 0",
                    (t, p, needle),
                ).fetchone()[0]
    return n


@pytest.fixture
def holder(pg_db: str) -> Iterator[psycopg.Connection[Any]]:
    """A pooled-connection pattern: a session that wrote and is idle in its transaction
    (an xid, no snapshot). Its write goes to a table VACUUM does not touch, so the
    VACUUM FULL does not wait for its lock."""
    with connect(pg_db) as setup:
        setup.execute("CREATE TABLE side_effects (x int)")
    conn = psycopg.connect(pg_db)  # not autocommit: the transaction stays open
    conn.execute("INSERT INTO side_effects VALUES (1)")
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


def vacuum_of(receipt: Any) -> dict[str, Any]:
    residue: dict[str, Any] = {r["action"]: r for r in receipt.predicate["residue"]}
    return residue["postgres.vacuum"]  # type: ignore[no-any-return]


def erase_with_vacuum(pg_db: str, signer: Signer, vacuum: bool | str) -> Any:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, vacuum=vacuum) as saver:
        saver.setup()
        fill_threads(saver)
        return saver.erase_thread(T)


@pytest.mark.parametrize("pgstattuple", [False, True])
def test_pg_vacuum_full_idle_in_transaction_holder_is_partial(
    pg_db: str, signer: Signer, holder: psycopg.Connection[Any], pgstattuple: bool
) -> None:
    if pgstattuple:
        with connect(pg_db) as conn:
            conn.execute("CREATE EXTENSION pgstattuple")
    pid = holder.info.backend_pid
    with connect(pg_db) as conn:
        xid, xmin, state = conn.execute(
            "SELECT backend_xid, backend_xmin, state FROM pg_stat_activity WHERE pid = %s",
            (pid,),
        ).fetchone()
    assert xid is not None and xmin is None and state == "idle in transaction"
    receipt = erase_with_vacuum(pg_db, signer, "full")
    vac = vacuum_of(receipt)
    assert vac["status"] == "partial", vac
    assert f"session pid {pid} (idle in transaction" in vac["detail"]["horizon_holders"]
    assert vac["detail"]["snapshots_holding_horizon"] >= 1
    if pgstattuple:
        assert vac["detail"]["verified_by"] == "pgstattuple"
        assert vac["detail"]["dead_tuples_after"] > 0
    # What "partial" discloses is real: VACUUM FULL copied the erased tuples.
    assert in_files(pg_db, SECRET) > 0
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0
    assert verify_receipt(receipt.to_json(), [signer.public_key]).thread_id == T


@pytest.mark.parametrize("pgstattuple", [False, True])
def test_pg_vacuum_full_applied_leaves_no_erased_bytes(
    pg_db: str, signer: Signer, pgstattuple: bool
) -> None:
    if pgstattuple:
        with connect(pg_db) as conn:
            conn.execute("CREATE EXTENSION pgstattuple")
    receipt = erase_with_vacuum(pg_db, signer, "full")
    vac = vacuum_of(receipt)
    assert vac["status"] == "applied", vac
    assert vac["detail"]["snapshots_holding_horizon"] == 0
    assert "horizon_holders" not in vac["detail"]
    assert vac["detail"]["verified_by"] == ("pgstattuple" if pgstattuple else "horizon")
    # The raw bytes of every file of the three tables (heap, TOAST, indexes): the
    # erased payload is gone, the bystander's is there (the reader does find markers).
    assert in_files(pg_db, SECRET) == 0
    assert in_files(pg_db, T.encode()) == 0  # the thread id in the primary-key indexes too
    assert in_files(pg_db, KEPT) > 0


def test_pg_vacuum_idle_in_transaction_holder_is_partial(
    pg_db: str, signer: Signer, holder: psycopg.Connection[Any]
) -> None:
    receipt = erase_with_vacuum(pg_db, signer, True)
    vac = vacuum_of(receipt)
    assert vac["status"] == "partial", vac
    assert f"session pid {holder.info.backend_pid} " in vac["detail"]["horizon_holders"]
    assert vac["detail"]["verified_by"] == "n_dead_tup"
    assert vac["detail"]["dead_tuples_after"] > 0
    assert in_tuples(pg_db, SECRET) > 0  # still tuples on the pages, as disclosed


def test_pg_vacuum_applied_leaves_no_erased_tuples(pg_db: str, signer: Signer) -> None:
    receipt = erase_with_vacuum(pg_db, signer, True)
    vac = vacuum_of(receipt)
    assert vac["status"] == "applied", vac
    assert vac["detail"]["mode"] == "VACUUM"
    assert vac["detail"]["index_cleanup"] is True
    assert (vac["detail"]["verified_by"], vac["detail"]["dead_tuples_after"]) == ("n_dead_tup", 0)
    assert "does not zero" in vac["detail"]["note"]
    # Page by page: no tuple holds the erased payload any more; the bystander's do.
    assert in_tuples(pg_db, SECRET) == 0
    assert in_tuples(pg_db, KEPT) > 0


def test_pg_vacuum_holder_in_recovery_counts_every_transaction(
    pg_db: str, signer: Signer, holder: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issued from the journal, the erasure's xid is unknown: any session with an xid or
    # a snapshot counts (here the holder), so recovery never claims more either.
    from erasure_receipts import ErasureIncompleteError
    from erasure_receipts._backends import postgres as pgb

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, vacuum="full") as saver:
        saver.setup()
        fill_threads(saver)
        with monkeypatch.context() as m:  # the statement is never journaled
            m.setattr(pgb, "record_statement", _fail_sign)
            with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
                saver.erase_thread(T)
        (receipt,) = saver.recover_receipts(min_age_seconds=0)
    vac = vacuum_of(receipt)
    assert vac["status"] == "partial", vac
    assert f"session pid {holder.info.backend_pid} " in vac["detail"]["horizon_holders"]
    assert "horizon_reference" in vac["detail"]


def _fail_sign(*args: Any) -> Any:
    raise OSError("disk full")


@pytest.mark.parametrize("vacuum", [True, "full"])
def test_pg_vacuum_by_a_role_that_may_not_vacuum_is_partial(
    pg_db: str, signer: Signer, vacuum: bool | str
) -> None:
    # PostgreSQL answers VACUUM of a table the role does not own with a WARNING and
    # skips it: the receipt must not call that applied.
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as owner:
        owner.setup()
        fill_threads(owner)
    role = f"v_{uuid.uuid4().hex[:12]}"
    with connect(pg_db) as c:
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, "
            f"checkpoint_writes, checkpoint_migrations, erasure_journal TO {role}"
        )
        c.execute(f"GRANT SELECT, INSERT ON erasure_tombstones TO {role}")
        # Every erasure checks for a decision to retain (README, "What setup() creates").
        c.execute(f"GRANT SELECT ON erasure_deferrals, erasure_deferral_threads TO {role}")
    try:
        worker_dsn = psycopg.conninfo.make_conninfo(pg_db, user=role)
        with AttestingPostgresSaver.from_conn_string(
            worker_dsn, signer=signer, vacuum=vacuum
        ) as worker:
            receipt = worker.erase_thread(T)
    finally:
        with connect(pg_db) as c:
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")
    vac = vacuum_of(receipt)
    assert vac["status"] == "partial", vac
    assert vac["detail"]["not_vacuumed"] == ",".join(VACUUMED)
    assert "skipped VACUUM" in vac["detail"]["unverified"]


# -- the same through the CLI ---------------------------------------------------------


def cli(*args: Any) -> Any:
    from typer.testing import CliRunner

    from erasure_receipts.app import app

    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def key(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "k.pem"
    path.write_bytes(signer.private_pem())
    path.chmod(0o600)
    return path


def populate(pg_db: str, signer: Signer, *, old: bool = False) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        fill_threads(saver, old=old)


def cli_vacuum(doc: dict[str, Any]) -> dict[str, Any]:
    residue = doc["receipt"]["statement"]["predicate"]["residue"]
    return {r["action"]: r for r in residue}["postgres.vacuum"]  # type: ignore[no-any-return]


def test_pg_cli_erase_vacuum_full_applied_then_partial_with_holder(
    pg_db: str, signer: Signer, key: Path
) -> None:
    populate(pg_db, signer)
    res = cli("erase", pg_db, "--thread", T, "--key", key, "--vacuum", "full", "--json")
    assert res.exit_code == 0, res.stderr
    vac = cli_vacuum(json.loads(res.stdout))
    assert (vac["status"], vac["detail"]["mode"]) == ("applied", "VACUUM (FULL)"), vac
    assert in_files(pg_db, SECRET) == 0 and in_files(pg_db, KEPT) > 0

    with connect(pg_db) as c:
        c.execute("CREATE TABLE side_effects (x int)")
    with psycopg.connect(pg_db) as idle:  # a write, then idle in its transaction
        idle.execute("INSERT INTO side_effects VALUES (1)")
        res = cli("erase", pg_db, "--thread", "bob-chat", "--key", key, "--vacuum", "full",
                  "--json")  # fmt: skip
        pid = idle.info.backend_pid
        idle.rollback()
    assert res.exit_code == 0, res.stderr
    vac = cli_vacuum(json.loads(res.stdout))
    assert vac["status"] == "partial", vac
    assert f"session pid {pid} (idle in transaction" in vac["detail"]["horizon_holders"]
    assert in_files(pg_db, KEPT) > 0  # copied by VACUUM FULL, as the receipt says


def test_pg_cli_retention_vacuum(pg_db: str, signer: Signer, key: Path, tmp_path: Path) -> None:
    populate(pg_db, signer, old=True)
    archive = tmp_path / "receipts"
    res = cli("retention", pg_db, "--idle", "1d", "--vacuum", "plain", "--key", key,
              "--archive", archive, "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["totals"]["receipts"] == 2, res.stdout
    for path in archive.iterdir():
        assert verify_receipt(path.read_bytes(), [signer.public_key])
        vac = cli_vacuum({"receipt": json.loads(path.read_bytes())})
        assert (vac["status"], vac["detail"]["mode"]) == ("applied", "VACUUM"), vac
    assert in_tuples(pg_db, SECRET) == 0 and in_tuples(pg_db, KEPT) == 0
    assert count(pg_db, "checkpoints", "TRUE", ()) == 0


def test_cli_vacuum_usage_errors(pg_db: str, key: Path, tmp_path: Path, signer: Signer) -> None:
    populate(pg_db, signer)
    before = count(pg_db, "checkpoints", "TRUE", ())
    res = cli("erase", pg_db, "--thread", T, "--key", key, "--vacuum", "fast")
    assert res.exit_code == 2 and "--vacuum must be plain or full" in res.stderr, res.stderr
    db = tmp_path / "app.db"
    AttestingSqliteSaver(sqlite3.connect(db), signer=signer).setup()
    for args in (
        ("erase", db, "--thread", T, "--key", key, "--vacuum", "full"),
        ("retention", db, "--idle", "1d", "--key", key, "--archive", tmp_path / "a",
         "--vacuum", "plain"),
    ):  # fmt: skip
        res = cli(*args)
        assert res.exit_code == 2, (res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "--vacuum is for PostgreSQL" in lines[0], res.stderr
    assert count(pg_db, "checkpoints", "TRUE", ()) == before


async def test_pg_async_saver_vacuum_verified(
    pg_db: str, signer: Signer, holder: psycopg.Connection[Any]
) -> None:
    # The async saver runs the same VACUUM and checks over its bridged connection.
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, vacuum="full"
    ) as saver:
        await saver.setup()
        for thread in (T, "bob-chat"):
            for i in range(1, 4):
                cp = empty_checkpoint()
                cp["id"] = f"1ef{i:029d}"
                cp["channel_values"] = {"v": {"note": SECRET.decode(), "thread": thread}}
                await saver.aput(cfg(thread), cp, {"step": i}, {"v": f"{i:032d}"})
        held = await saver.aerase_thread(T)
        holder.rollback()  # the holder ends: the next erasure's VACUUM FULL is verified
        clean = await saver.aerase_thread("bob-chat")
    assert vacuum_of(held)["status"] == "partial"
    assert f"session pid {holder.info.backend_pid} " in vacuum_of(held)["detail"]["horizon_holders"]
    assert vacuum_of(clean)["status"] == "applied", vacuum_of(clean)
    assert in_files(pg_db, SECRET) == 0  # the second rewrite dropped the first's copies


@pytest.mark.parametrize("snapshot_only", [False, True])
def test_pg_vacuum_full_holder_in_another_database(
    pg_db: str, other_db: str, signer: Signer, snapshot_only: bool
) -> None:
    # A transaction id still running in another database is in every snapshot taken
    # here, VACUUM FULL's own included: it holds this database's horizon too (the
    # bytes prove it). A snapshot alone over there does not.
    with connect(other_db) as c:
        c.execute("CREATE TABLE side_effects (x int)")
    with psycopg.connect(other_db) as elsewhere:
        if snapshot_only:
            elsewhere.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            elsewhere.execute("SELECT count(*) FROM side_effects")  # a snapshot, no xid
        else:
            elsewhere.execute("INSERT INTO side_effects VALUES (1)")
        receipt = erase_with_vacuum(pg_db, signer, "full")
        pid = elsewhere.info.backend_pid
        elsewhere.rollback()
    vac = vacuum_of(receipt)
    if snapshot_only:
        assert vac["status"] == "applied", vac
        assert in_files(pg_db, SECRET) == 0 and in_files(pg_db, KEPT) > 0
    else:
        assert vac["status"] == "partial", vac
        assert f"session pid {pid} (idle in transaction" in vac["detail"]["horizon_holders"]
        assert in_files(pg_db, SECRET) > 0
