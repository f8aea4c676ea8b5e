"""AttestingPostgresSaver / AsyncAttestingPostgresSaver against a real PostgreSQL server.

Assertions are on raw rows read through separate connections (``pg_helpers``), not on
what the savers report about themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ErasureIncompleteError,
    NothingToEraseError,
    Signer,
    ThreadErasedError,
    verify_receipt,
)
from erasure_receipts._engine import eraser as attesting  # internals: where the flow signs
from erasure_receipts.digest import EMPTY_ROOT
from pg_helpers import connect, count, fingerprint, independent_digest, marker_rows
from scenario import MARKER, TURNS, build_graph, human

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
T = "alice-chat"
NS = ("users", "alice")
STORE_WHERE = "prefix = %s OR prefix LIKE %s"
STORE_PARAMS = ("users.alice", "users.alice.%")
SCOPE = {
    "checkpoints": ("thread_id = %s", (T,)),
    "checkpoint_blobs": ("thread_id = %s", (T,)),
    "checkpoint_writes": ("thread_id = %s", (T,)),
    "store": (STORE_WHERE, STORE_PARAMS),
}
OTHERS = {
    "checkpoints": ("thread_id <> %s", (T,)),
    "checkpoint_blobs": ("thread_id <> %s", (T,)),
    "checkpoint_writes": ("thread_id <> %s", (T,)),
    "store": ("NOT (" + STORE_WHERE + ")", STORE_PARAMS),
}


def cfg(thread: str, ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


def checkpoint(i: int, payload: Any = "x") -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": payload}
    cp["id"] = f"1ef{i:029d}"
    return cp


def put(saver: Any, thread: str, i: int, payload: Any = "x", ns: str = "") -> Any:
    versions = {"v": f"{i:032d}"} if not isinstance(payload, str) else {}
    return saver.put(cfg(thread, ns), checkpoint(i, payload), {"step": i}, versions)


def fill_store(store: Any) -> None:
    """Items beyond the default page of 10, nested namespaces, look-alikes, one expired."""
    for i in range(24):
        store.put(NS, f"k{i:02d}", {"i": i, "note": f"{MARKER}" if i == 3 else "x"})
    for i in range(4):
        store.put((*NS, "notes"), f"n{i}", {"i": i})
    store.put(("users", "alice2"), "identity", {"name": "not alice"})
    store.put(("users", "bob"), "identity", {"name": "bob"})


def expire_one(dsn: str) -> None:
    """Make one alice item TTL-expired (still stored; search hides it under omit_expired)."""
    with connect(dsn) as conn:
        conn.execute(
            "UPDATE store SET expires_at = now() - interval '1 hour', ttl_minutes = 1 "
            "WHERE prefix = 'users.alice.notes' AND key = 'n0'"
        )


def run_scenario(saver: Any, store: Any) -> Any:
    graph = build_graph(saver, store)
    for text in TURNS:
        graph.invoke(human(text), {"configurable": {"thread_id": T}})
    graph.invoke(human("hello from bob"), {"configurable": {"thread_id": "bob-chat"}})
    put(saver, T, 900, {"sub": MARKER}, ns="child:1")  # a subgraph namespace with a blob
    return graph


def snapshot_others(dsn: str) -> dict[str, str]:
    return {t: fingerprint(dsn, t, w, p) for t, (w, p) in OTHERS.items()}


def test_pg_scenario_erases_every_trace(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    pub = tmp_path / "pub.pem"
    pub.write_bytes(signer.public_pem())
    with (
        PostgresStore.from_conn_string(pg_db) as store,  # its own connection
        AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, store=store, archive=tmp_path / "receipts",
            namespaces_for=lambda tid: [NS] if tid == T else [],
            tombstone_policy="refuse_all",  # every write refused until reopen_thread()
        ) as saver,
    ):  # fmt: skip
        store.setup()
        saver.setup()
        graph = run_scenario(saver, store)
        fill_store(store)
        expire_one(pg_db)
        current = graph.get_state({"configurable": {"thread_id": T}}).values["messages"]
        assert not any(MARKER in str(m.content) for m in current)
        marks = marker_rows(pg_db, MARKER)
        assert marks["checkpoints"] + marks["checkpoint_blobs"] >= 3
        assert marks["checkpoint_writes"] >= 1 and marks["store"] >= 2
        pre = {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()}
        assert pre["store"] == 24 + 4 + 1  # identity + 24 + 4 notes (one expired)
        assert all(pre.values())
        before = snapshot_others(pg_db)
        expected = independent_digest(pg_db, SCOPE)

        preview = saver.digest_thread(T, [NS])
        receipt = saver.erase_thread(T, store_namespaces=[NS])

        assert receipt.pre_digest == preview.digest == expected
        tables = receipt.predicate["pre_state"]["tables"]
        assert {t: tables[t]["rows"] for t in SCOPE} == pre
        assert receipt.predicate["methods"] == {"checkpoints": "atomic-transaction",
                                                "store": "atomic-transaction"}  # fmt: skip
        assert receipt.predicate["backend"]["kind"] == "postgres"
        assert receipt.predicate["post_state"]["digest"]["sha256"] == EMPTY_ROOT.hex()
        assert {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()} == dict.fromkeys(SCOPE, 0)
        assert marker_rows(pg_db, MARKER) == dict.fromkeys(marks, 0)
        assert snapshot_others(pg_db) == before
        assert store.get(("users", "alice2"), "identity") is not None
        residue = {r["action"]: r for r in receipt.predicate["residue"]}
        assert residue["postgres.vacuum"]["status"] == "skipped"
        assert "dead tuples" in residue["postgres.vacuum"]["detail"]["reason"]
        assert residue["postgres.wal"]["status"] == "skipped"
        # Tombstone: a late write through our saver, and through a plain PostgresSaver.
        with pytest.raises(ThreadErasedError):
            graph.invoke(human("late write"), {"configurable": {"thread_id": T}})
        with PostgresSaver.from_conn_string(pg_db) as plain:
            with pytest.raises(psycopg.errors.RaiseException, match="thread erased"):
                put(plain, T, 1000)
            put(plain, "bob-chat", 1000)  # others unaffected
        assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0
        assert saver.is_erased(T)
        assert [r.receipt_id for r in saver.journal_receipts(T)] == [receipt.receipt_id]
        assert saver.reopen_thread(T) and not saver.is_erased(T)
        put(saver, T, 1)
    archived = tmp_path / "receipts" / f"{receipt.receipt_id}.json"
    assert archived.read_bytes() == receipt.to_json()
    assert verify_receipt(archived.read_bytes(), [signer.public_key]).thread_id == T
    res = subprocess.run([*CLI, "verify", str(archived), "--key", str(pub), "--json"],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr


async def test_pg_async_pool_scenario(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with (
        AsyncConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=4, open=False) as pool,
        AsyncConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=2, open=False) as store_pool,
    ):
        store = AsyncPostgresStore(store_pool)
        await store.setup()
        saver = AsyncAttestingPostgresSaver(pool, signer=signer, store=store,
                                            archive=tmp_path / "r",
                                            tombstone_policy="refuse_all")  # fmt: skip
        await saver.setup()
        graph = build_graph(saver, store)
        for text in TURNS:
            await graph.ainvoke(human(text), {"configurable": {"thread_id": T}})
        await graph.ainvoke(human("bob"), {"configurable": {"thread_id": "bob-chat"}})
        for i in range(30):
            await store.aput(NS, f"k{i}", {"i": i})
        await store.aput((*NS, "deep", "er"), "x", {"x": 1})
        expire_one_async = "UPDATE store SET expires_at = now() - interval '1 day' WHERE key = 'k7'"
        with connect(pg_db) as c:
            c.execute(expire_one_async)
        before = snapshot_others(pg_db)
        expected = independent_digest(pg_db, SCOPE)
        pre = {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()}
        preview = await saver.adigest_thread(T, [NS])
        receipt = await saver.aerase_thread(T, store_namespaces=[NS])
        assert receipt.pre_digest == preview.digest == expected
        assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == pre["store"] == 32
        assert receipt.predicate["methods"]["store"] == "atomic-transaction"
        assert {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()} == dict.fromkeys(SCOPE, 0)
        assert snapshot_others(pg_db) == before
        with pytest.raises(ThreadErasedError):
            await graph.ainvoke(human("late"), {"configurable": {"thread_id": T}})
        await graph.ainvoke(human("bob again"), {"configurable": {"thread_id": "bob-chat"}})
        assert await saver.ais_erased(T)
        assert [r.receipt_id for r in await saver.ajournal_receipts(T)] == [receipt.receipt_id]
        assert await saver.areopen_thread(T)
    assert verify_receipt(receipt.to_json(), [signer.public_key]).thread_id == T


def test_pg_sync_pool_and_memory_store_sweep(pg_db: str, signer: Signer) -> None:
    store = InMemoryStore()
    for i in range(15):
        store.put(NS, f"k{i}", {"i": i})
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=3) as pool:
        saver = AttestingPostgresSaver(pool, signer=signer, store=store,
                                       namespaces_for=lambda tid: [NS])  # fmt: skip
        saver.setup()
        for i in range(3):
            put(saver, T, i, {"blob": i})
        preview = saver.digest_thread(T, [NS])
        saver.delete_thread(T)  # attested, with namespaces_for
        receipt = saver.last_receipt
    assert receipt is not None and receipt.pre_digest == preview.digest
    assert receipt.predicate["methods"] == {"checkpoints": "atomic-transaction", "store": "sweep"}
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 15
    assert receipt.predicate["pre_state"]["tables"]["checkpoint_blobs"]["rows"] == 3
    assert store.search(NS, limit=100) == []
    assert count(pg_db, "checkpoint_blobs", "thread_id = %s", (T,)) == 0


def test_pg_pipeline_saver_and_vacuum(pg_db: str, signer: Signer) -> None:
    # The parent's migrations (CREATE INDEX CONCURRENTLY) cannot run in a pipeline.
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, pipeline=True, vacuum=True
    ) as saver:
        saver.setup()
        for i in range(5):
            put(saver, T, i, {"p": i})
        put(saver, "other", 1)
        receipt = saver.erase_thread(T)
        residue = {r["action"]: r for r in receipt.predicate["residue"]}
        with pytest.raises(ThreadErasedError):
            put(saver, T, 99)
        put(saver, "other", 2)
    # A pipeline connection runs statements in an implicit transaction block: VACUUM
    # cannot run there, and the receipt says so rather than claiming it.
    assert residue["postgres.vacuum"]["status"] == "skipped"
    assert "pipeline" in residue["postgres.vacuum"]["detail"]["reason"]
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, vacuum=True) as saver:
        saver.reopen_thread(T)
        put(saver, T, 1, {"p": 1})
        receipt = saver.erase_thread(T)
    vac = {r["action"]: r for r in receipt.predicate["residue"]}["postgres.vacuum"]
    assert vac["status"] in ("applied", "partial"), vac
    assert vac["detail"]["mode"] == "VACUUM"
    assert "checkpoint_blobs" in vac["detail"]["tables"]


def fail_to_sign(*args: Any) -> Any:
    raise OSError("disk full")


def test_pg_failure_rolls_back_and_journal_recovers(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, archive=tmp_path / "r"
    ) as saver:
        saver.setup()
        for i in range(4):
            put(saver, T, i, {"p": i})
        before = fingerprint(pg_db, "checkpoints", "thread_id = %s", (T,))
        # A failure inside the transaction: nothing deleted, no receipt, no journal entry.
        from erasure_receipts._backends import postgres as pgb

        def boom(self: Any, receipt_id: str, issued_at: str, entry: str, **kw: Any) -> None:
            raise RuntimeError("injected")

        with monkeypatch.context() as m:
            m.setattr(pgb.PostgresBackend, "write_journal", boom)
            with pytest.raises(ErasureIncompleteError, match="injected"):
                saver.erase_thread(T)
        assert fingerprint(pg_db, "checkpoints", "thread_id = %s", (T,)) == before
        assert not saver.is_erased(T)
        # A failure after commit (signing): the journal keeps the measurement.
        digest = saver.digest_thread(T).digest
        with monkeypatch.context() as m:
            m.setattr(attesting, "sign_and_archive", fail_to_sign)
            with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
                saver.erase_thread(T)
        assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0
        assert saver.journal_receipts() == []
        assert saver.recover_receipts() == []  # younger than min_age: left alone
        (recovered,) = saver.recover_receipts(min_age_seconds=0)
        assert recovered.pre_digest == digest
        assert saver.recover_receipts(min_age_seconds=0) == []
        assert [r.to_json() for r in saver.journal_receipts(T)] == [recovered.to_json()]
    assert (tmp_path / "r" / f"{recovered.receipt_id}.json").read_bytes() == recovered.to_json()
    assert verify_receipt(recovered.to_json(), [signer.public_key]).thread_id == T


def test_pg_lock_timeout_retries_then_gives_up(pg_db: str, signer: Signer) -> None:
    """A writer transaction holding the thread's lock: bounded retries, then a clear
    error, nothing deleted."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, lock_timeout_ms=50) as saver:
        saver.setup()
        put(saver, T, 1)
        with psycopg.connect(pg_db) as writer:  # not autocommit: stays in a transaction
            writer.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, idx, channel, type, blob) VALUES (%s, '', 'c', 't', 0, 'ch', 'x', '')",
                (T,),
            )
            with pytest.raises(ErasureIncompleteError, match="gave up after 5 attempts"):
                saver.erase_thread(T)
            writer.commit()
        assert count(pg_db, "checkpoint_writes", "thread_id = %s", (T,)) == 1
        receipt = saver.erase_thread(T)  # the writer committed: its row is measured
        assert receipt.predicate["pre_state"]["tables"]["checkpoint_writes"]["rows"] == 1
    assert count(pg_db, "checkpoint_writes", "thread_id = %s", (T,)) == 0


def test_pg_leaf_encoding_is_client_independent(pg_db: str, signer: Signer) -> None:
    """Session TimeZone/DateStyle and jsonb input formatting do not change the digest."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        put(saver, T, 1, {"b": [1, 2.50], "a": "é"})
        first = saver.digest_thread(T).digest
        with connect(pg_db) as c:
            c.execute("SET TimeZone = 'America/New_York'")
        saver.conn.execute("SET TimeZone = 'Asia/Kolkata'")
        saver.conn.execute("SET DateStyle = 'SQL, DMY'")
        assert saver.digest_thread(T).digest == first
    assert first == independent_digest(pg_db, {k: v for k, v in SCOPE.items() if k != "store"})


def test_pg_receipt_residue_scan_not_applicable(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        put(saver, T, 1)
        receipt = saver.erase_thread(T, residue_scan=True)
    scan = {r["action"]: r for r in receipt.predicate["residue"]}["residue_scan"]
    assert scan["status"] == "not_applicable" and "SQLite" in scan["detail"]["reason"]


def test_pg_receipt_json_has_no_credentials(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        put(saver, T, 1)
        receipt = saver.erase_thread(T)
    db = receipt.predicate["backend"]["database"]
    assert db.startswith("postgresql://") and "password" not in db
    versions = json.loads(receipt.to_json())["statement"]["predicate"]["backend"]["versions"]
    assert versions["postgresql"].split(".")[0].isdigit()
    assert "langgraph-checkpoint-postgres" in versions and "psycopg" in versions


def test_pg_empty_scope_and_previous_erasure(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        with pytest.raises(NothingToEraseError) as typo:
            saver.erase_thread("no-such-thread")
        assert typo.value.previous_receipt_id is None
        assert not saver.is_erased("no-such-thread")  # rolled back: no tombstone for a typo
        put(saver, T, 1)
        first = saver.erase_thread(T)
        with pytest.raises(NothingToEraseError) as again:
            saver.erase_thread(T)
        assert again.value.previous_receipt_id == first.receipt_id
        saver.delete_thread(T)  # like the parent's: nothing stored is a no-op
        empty = saver.erase_thread("no-such-thread", allow_empty=True)
    assert empty.predicate["pre_state"]["leaves"] == 0
    assert empty.pre_digest == EMPTY_ROOT.hex()
    verify_receipt(empty.to_json(), [signer.public_key])


def test_pg_export_leaves_prove_inclusion(pg_db: str, signer: Signer) -> None:
    from erasure_receipts.digest import verify_inclusion

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        for i in range(5):
            put(saver, T, i, {"p": i}, ns="" if i % 2 else "child:1")
        records = saver.export_leaves(T)
        held = saver.export_leaves(T, select=lambda table, pk: table == "checkpoint_blobs")
        receipt = saver.erase_thread(T)
    assert len(records) == receipt.predicate["pre_state"]["leaves"] == 10
    assert {r.root for r in records} == {receipt.pre_digest}
    assert len(held) == 5 and {r.table for r in held} == {"checkpoint_blobs"}
    for r in held:
        root = bytes.fromhex(r.root)
        assert verify_inclusion(r.index, r.tree_size, r.leaf_hash, list(r.audit_path), root)


async def test_pg_async_connection_with_memory_store(pg_db: str, signer: Signer) -> None:
    store = InMemoryStore()
    for i in range(12):
        await store.aput(NS, f"k{i}", {"i": i})
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db,
        signer=signer,
        store=store,
        namespaces_for=lambda tid: [NS],
        tombstone_policy="refuse_all",
    ) as saver:
        await saver.setup()
        graph = build_graph(saver, store)
        for text in TURNS[:2]:
            await graph.ainvoke(human(text), {"configurable": {"thread_id": T}})
        preview = await saver.adigest_thread(T, [NS])
        await saver.adelete_thread(T)
        receipt = saver.last_receipt
        assert receipt is not None and receipt.pre_digest == preview.digest
        assert receipt.predicate["methods"]["store"] == "sweep"
        assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 13
        assert await saver.apending_erasures() == []
        with pytest.raises(ThreadErasedError):
            await graph.ainvoke(human("late"), {"configurable": {"thread_id": T}})
    assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0


def test_pg_least_privileged_worker(pg_db: str, signer: Signer) -> None:
    """After an owner ran setup(), a worker role without CREATE (which cannot run the
    parent's setup()) writes, is refused on an erased thread (it needs SELECT on
    erasure_tombstones) and can use the erasure API without installing anything."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as owner:
        owner.setup()
        put(owner, T, 1)
        owner.erase_thread(T)
    role = f"w_{abs(hash(pg_db)) % 10**8}"
    with connect(pg_db) as c:
        c.execute(f"DROP ROLE IF EXISTS {role}")
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        c.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, "
            f"checkpoint_writes, checkpoint_migrations TO {role}"
        )
        c.execute(f"GRANT SELECT ON erasure_tombstones TO {role}")
    worker_dsn = psycopg.conninfo.make_conninfo(pg_db, user=role)
    try:
        with AttestingPostgresSaver.from_conn_string(worker_dsn, signer=signer) as worker:
            assert worker.is_erased(T)
            put(worker, "bob-chat", 1)
            with pytest.raises(ThreadErasedError):
                put(worker, T, 2)
        with (
            PostgresSaver.from_conn_string(worker_dsn) as plain,
            pytest.raises(psycopg.errors.RaiseException),
        ):
            put(plain, T, 3)
    finally:
        with connect(pg_db) as c:
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


def test_pg_erasing_role_without_select_on_deferrals_is_refused_and_rolled_back(
    pg_db: str, signer: Signer
) -> None:
    """Every erasure reads the decisions to retain: a role the README's grants list was
    not applied to is refused before anything is deleted, and the error names the table."""
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as owner:
        owner.setup()
        put(owner, T, 1)
    before = count(pg_db, "checkpoints", "thread_id = %s", (T,))
    role = f"d_{abs(hash(pg_db)) % 10**8}"
    with connect(pg_db) as c:
        c.execute(f"DROP ROLE IF EXISTS {role}")
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, "
            f"checkpoint_writes, checkpoint_migrations, erasure_journal TO {role}"
        )
        c.execute(f"GRANT SELECT, INSERT, UPDATE ON erasure_tombstones TO {role}")
    worker_dsn = psycopg.conninfo.make_conninfo(pg_db, user=role)
    try:
        with AttestingPostgresSaver.from_conn_string(worker_dsn, signer=signer) as worker:
            with pytest.raises(ErasureIncompleteError, match="erasure_deferrals") as err:
                worker.erase_thread(T)
            assert "nothing was deleted" in str(err.value)
        assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == before > 0
        assert count(pg_db, "erasure_journal", "thread_id = %s", (T,)) == 0
        with connect(pg_db) as c:
            c.execute(f"GRANT SELECT ON erasure_deferrals, erasure_deferral_threads TO {role}")
        with AttestingPostgresSaver.from_conn_string(worker_dsn, signer=signer) as worker:
            assert worker.erase_thread(T).predicate["status"] == "erased"
        assert count(pg_db, "checkpoints", "thread_id = %s", (T,)) == 0
    finally:
        with connect(pg_db) as c:
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")
