"""PostgreSQL: what a receipt says about residue is what was verified.

A store in another database whose ``search`` hides expired rows (``omit_expired``) is
erased whole; ``VACUUM`` is ``applied`` only when the erased tuples are verifiably gone
from the table files, ``partial`` naming what held them otherwise. Assertions are on
raw rows and on the bytes of the relation files under the data directory.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.sqlite import SqliteStore
from psycopg import sql

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    AttestingSqliteSaver,
    Signer,
    verify_receipt,
)
from pg_helpers import connect, count

T = "alice-chat"
NS = ("users", "alice")
TTL = {"omit_expired": True}


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def put(saver: Any, thread: str, i: int, payload: Any = "x") -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": payload}
    cp["id"] = f"1ef{i:029d}"
    return saver.put(cfg(thread), cp, {"step": i}, {"v": f"{i:032d}"})


@pytest.fixture
def other_db(pg_dsn: str) -> Iterator[str]:
    """A second fresh database on the same server (the store's)."""
    name = f"s_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(pg_dsn, dbname=name)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


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
