"""The tombstone trigger (schema 2) on a real PostgreSQL server: upgrade from schema 1 in
place, the lock-then-look-up order under a waiting writer, and look-ups that a writer's
``search_path`` cannot redirect.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from erasure_receipts import AttestingPostgresSaver, Signer, ThreadErasedError
from erasure_receipts._backends import postgres as pgb
from pg_helpers import connect, count

T = "erased-thread"
V1 = "erasure_receipts schema 1"
V1_FUNCTION = f"""CREATE OR REPLACE FUNCTION erasure_receipts_refuse_erased() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({pgb.ADVISORY_CLASS}, hashtext(NEW.thread_id));
    IF EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.thread_id) THEN
        RAISE EXCEPTION '{pgb.TOMBSTONE_MESSAGE}'
            USING ERRCODE = 'P0001',
                  DETAIL = 'thread_id ' || NEW.thread_id,
                  HINT = 'reopen_thread() allows the thread id to be written again';
    END IF;
    RETURN NEW;
END
$fn$"""
"""Version 1's function, verbatim (commit 5336c03)."""

INSERT = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) "
    "VALUES (%s, '', %s, '{}', '{}')"
)


def put(saver: Any, thread: str, i: int) -> None:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{i:029d}"
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {}, {})


def install_v1(dsn: str) -> None:
    """A database as ``setup()`` of version 1 left it."""
    with PostgresSaver.from_conn_string(dsn) as plain:
        plain.setup()
    with connect(dsn) as c:
        for statement in pgb.SCHEMA_SQL:
            c.execute(statement)
        c.execute(V1_FUNCTION)
        c.execute(f"COMMENT ON FUNCTION erasure_receipts_refuse_erased() IS '{V1}'")
        c.execute(pgb.TRIGGERS_SQL)


def trigger_state(dsn: str) -> dict[str, Any]:
    with connect(dsn) as c:
        fn = c.execute(
            "SELECT p.oid, p.xmin::text, p.prosrc, obj_description(p.oid, 'pg_proc') "
            "FROM pg_proc p WHERE p.proname = 'erasure_receipts_refuse_erased'"
        ).fetchall()
        trig = c.execute(
            "SELECT tgrelid::regclass::text, oid, tgfoid FROM pg_trigger "
            "WHERE tgname = 'erasure_tombstone' ORDER BY 1"
        ).fetchall()
    [(oid, xmin, src, comment)] = fn
    return {"oid": oid, "xmin": xmin, "src": src, "version": comment, "triggers": trig}


def test_pg_schema_1_is_used_as_is_then_upgraded_in_place(pg_db: str, signer: Signer) -> None:
    install_v1(pg_db)
    v1 = trigger_state(pg_db)
    assert v1["version"] == V1 and len(v1["triggers"]) == 3
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        put(saver, T, 1)
        saver.erase_thread(T)  # the erasure API works on schema 1 without upgrading it
        assert trigger_state(pg_db) == v1
        with pytest.raises(ThreadErasedError):
            put(saver, T, 2)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()  # the upgrade: same function (OID), same triggers, new body
        v2 = trigger_state(pg_db)
        assert v2["version"] == pgb.SCHEMA_VERSION
        assert v2["oid"] == v1["oid"] and v2["triggers"] == v1["triggers"]
        assert '"public".erasure_tombstones' in v2["src"] and "PERFORM FROM" in v2["src"]
        with pytest.raises(ThreadErasedError):
            put(saver, T, 3)
        put(saver, "other", 1)
        saver.setup()
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as again:
        again.setup()  # idempotent: nothing is replaced a second time
    assert trigger_state(pg_db) == v2
    with (
        PostgresSaver.from_conn_string(pg_db) as plain,
        pytest.raises(psycopg.errors.RaiseException, match="thread erased") as refused,
    ):
        put(plain, T, 4)
    # names the erasure's receipt, never the thread id (the server logs the message)
    assert refused.value.diag.message_detail.startswith("erased by receipt ")
    assert T not in refused.value.diag.message_detail
    assert refused.value.diag.sqlstate == "P0001"
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0


def test_pg_upgrade_refused_for_lack_of_privilege_keeps_schema_1(
    pg_db: str, signer: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    install_v1(pg_db)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as owner:
        put(owner, T, 1)
        owner.erase_thread(T)
    role = f"w_{abs(hash(pg_db)) % 10**8}"
    with connect(pg_db) as c:
        c.execute(f"DROP ROLE IF EXISTS {role}")
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"GRANT CREATE ON SCHEMA public TO {role}")  # not the owner of anything
        c.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, "
            f"checkpoint_writes, checkpoint_migrations TO {role}"
        )
        c.execute(f"GRANT SELECT ON erasure_tombstones TO {role}")
    before = trigger_state(pg_db)
    worker_dsn = psycopg.conninfo.make_conninfo(pg_db, user=role)
    try:
        with (
            caplog.at_level(logging.WARNING, logger="erasure_receipts"),
            AttestingPostgresSaver.from_conn_string(worker_dsn, signer=signer) as worker,
        ):
            worker.setup()  # must not fail: schema 1 still enforces the tombstones
            assert worker.is_erased(T)
            with pytest.raises(ThreadErasedError):
                put(worker, T, 2)
            put(worker, "other", 1)
        assert trigger_state(pg_db) == before
        assert any(V1 in r.getMessage() and "owner" in r.getMessage() for r in caplog.records)
    finally:
        with connect(pg_db) as c:
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


def test_pg_a_writer_waiting_for_the_erasure_sees_its_tombstone(pg_db: str, signer: Signer) -> None:
    """The erasure's exclusive lock is held while the tombstone is written; a writer that
    queued on the shared lock must look up after the commit (a new snapshot), not before."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
    outcome: list[BaseException | None] = []
    with psycopg.connect(pg_db) as eraser:  # a transaction, like the erasure's
        eraser.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                       (pgb.ADVISORY_CLASS, T))  # fmt: skip
        eraser.execute("INSERT INTO erasure_tombstones VALUES (%s, 'r', 't')", (T,))

        def write() -> None:
            try:
                with psycopg.connect(pg_db, autocommit=True) as w:
                    w.execute(INSERT, (T, "c1"))
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        with connect(pg_db) as watch:
            for _ in range(500):
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND NOT granted AND mode = 'ShareLock'"
                ).fetchone()
                if waiting and waiting[0]:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("the writer never waited for the erasure's lock")
        eraser.commit()
        writer.join(timeout=30)
    [exc] = outcome
    assert isinstance(exc, psycopg.errors.RaiseException) and "thread erased" in str(exc)
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0


def _bypass_attempt(dsn: str) -> BaseException | None:
    """A writer that hides ``erasure_tombstones`` behind an empty temporary table and
    puts its own functions first on ``search_path``."""
    with psycopg.connect(dsn, autocommit=True) as w:
        w.execute("CREATE TEMP TABLE erasure_tombstones (thread_id text PRIMARY KEY)")
        w.execute("CREATE SCHEMA IF NOT EXISTS evil")
        w.execute(
            "CREATE OR REPLACE FUNCTION evil.pg_advisory_xact_lock_shared(int, int) "
            "RETURNS void LANGUAGE sql AS ''"
        )
        w.execute("SET search_path = evil, public, pg_catalog")
        try:
            w.execute(INSERT, (T, "c-bypass"))
        except psycopg.Error as exc:
            return exc
    return None


def test_pg_trigger_names_cannot_be_redirected_by_the_writer(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        put(saver, T, 1)
        saver.erase_thread(T)
    exc = _bypass_attempt(pg_db)
    assert isinstance(exc, psycopg.errors.RaiseException), exc
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0
    # The lock is pg_catalog's, whatever the writer's search_path says.
    with psycopg.connect(pg_db) as w, connect(pg_db) as watch:
        w.execute("SET search_path = evil, public, pg_catalog")
        w.execute(INSERT, ("live-thread", "c1"))
        row = watch.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' "
            "AND classid = %s AND pid = %s",
            (pgb.ADVISORY_CLASS, w.info.backend_pid),
        ).fetchone()
        assert row is not None and row[0] == 1
        w.rollback()
    # Version 1 resolved both names through the writer's search_path: bypassed.
    with connect(pg_db) as c:
        c.execute(V1_FUNCTION)
    assert _bypass_attempt(pg_db) is None
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 1
