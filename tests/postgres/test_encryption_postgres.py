"""Per-subject encryption on PostgreSQL (sync and async), through real LangGraph graphs.

Channel values (primitives included: the parent would keep them in the checkpoint's JSON)
go to ``checkpoint_blobs`` sealed to (thread, namespace, channel, version); pending
writes are sealed to their row. Raw rows are read through a separate connection.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg import sql

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    CiphertextRejectedError,
    ConfigurationError,
    Encryption,
    KeyStore,
    LocalKeyWrapper,
    PlaintextRowError,
    Signer,
)
from erasure_receipts.shredding import SEALED_TYPE
from pg_helpers import all_raw_text, connect
from pg_server import fresh_database
from test_encryption_sqlite import MARKER, build, cfg


@pytest.fixture
def keys_db(pg_dsn: str) -> Iterator[str]:
    """A second fresh database: the key store's."""
    with fresh_database(pg_dsn, "k") as dsn:
        yield dsn


@pytest.fixture
def keys(keys_db: str, tmp_path: Path) -> Iterator[KeyStore]:
    ks = KeyStore.postgres(keys_db, LocalKeyWrapper.generate(tmp_path / "master.key"))
    yield ks
    ks.close()


THREADS = (("alice-1", "alice"), ("alice-2", "alice"), ("bob-1", "bob"))


def test_pg_graph_rows_are_encrypted(pg_db: str, keys: KeyStore, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, encryption=Encryption(keys)
    ) as saver:
        saver.setup()
        graph = build(saver)
        for thread, user in THREADS:
            for turn in ("hello", f"my secret is {MARKER}"):
                graph.invoke({"messages": [HumanMessage(content=turn)]}, cfg(thread, user))
        state = graph.get_state(cfg("alice-1", "alice"))
        assert MARKER in state.values["messages"][-2].content
        assert state.values["note"].startswith("n my secret")  # a str channel: was inline
        history = list(graph.get_state_history(cfg("bob-1", "bob")))
        assert len(history) >= 4
        forked = graph.invoke({"messages": [HumanMessage(content="again")]}, history[2].config)
        assert forked["messages"][-1].content == "noted: again"

        text = all_raw_text(pg_db)
        assert MARKER not in text and "my secret" not in text
        with connect(pg_db) as c:
            types = {r[0] for r in c.execute("SELECT type FROM checkpoint_blobs").fetchall()}
            types |= {r[0] for r in c.execute("SELECT type FROM checkpoint_writes").fetchall()}
            assert types <= {SEALED_TYPE, "empty"} and SEALED_TYPE in types
            inline = c.execute(
                "SELECT count(*) FROM checkpoints WHERE checkpoint->'channel_values' <> '{}'::jsonb"
            ).fetchone()
            assert inline == (0,)
        assert keys.threads_of("subject:alice") == ["alice-1", "alice-2"]

        # A blob copied to another thread's row (same key) fails; a plaintext blob refused.
        with connect(pg_db) as c:
            c.execute(
                "UPDATE checkpoint_blobs d SET blob = s.blob FROM checkpoint_blobs s "
                "WHERE d.thread_id = 'alice-2' AND s.thread_id = 'alice-1' "
                "AND d.channel = 'messages' AND s.channel = 'messages' AND d.type = s.type"
            )
        with pytest.raises(CiphertextRejectedError, match="alice-2"):
            saver.get_tuple(cfg("alice-2", "alice"))
        with connect(pg_db) as c:  # a plaintext blob
            c.execute(
                "UPDATE checkpoint_blobs SET type = 'json', blob = '\"plain\"'::bytea "
                "WHERE thread_id = 'bob-1' AND channel = 'note'"
            )
        with pytest.raises(PlaintextRowError, match="bob-1"):
            saver.get_tuple(cfg("bob-1", "bob"))
        with connect(pg_db) as c:  # a plaintext value inline in the checkpoint's JSON
            c.execute("DELETE FROM checkpoint_blobs WHERE thread_id = 'bob-1' AND channel = 'note'")
            c.execute(
                "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values}', "
                """'{"note": "plain"}'::jsonb) WHERE thread_id = 'bob-1'"""
            )
        with pytest.raises(PlaintextRowError, match=r"bob-1.*plaintext"):
            saver.get_tuple(cfg("bob-1", "bob"))
        with connect(pg_db) as c:
            c.execute("UPDATE checkpoint_writes SET task_id = 'moved' WHERE thread_id = 'alice-1'")
        with pytest.raises(CiphertextRejectedError, match="alice-1"):
            list(saver.list(cfg("alice-1", "alice")))


def test_pg_key_store_must_not_be_the_data_database(
    pg_db: str, signer: Signer, tmp_path: Path
) -> None:
    same = KeyStore.postgres(pg_db, LocalKeyWrapper.generate(tmp_path / "master.key"))
    try:
        with AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=Encryption(same)
        ) as saver:
            with pytest.raises(ConfigurationError, match="must not be the data database"):
                saver.setup()
            with pytest.raises(ConfigurationError, match="must not be the data database"):
                build(saver).invoke({"messages": [HumanMessage(content="hi")]}, cfg("t", "u"))

        async def main() -> None:
            async with AsyncAttestingPostgresSaver.from_conn_string(
                pg_db, signer=signer, encryption=Encryption(same)
            ) as saver:
                with pytest.raises(ConfigurationError, match="must not be the data database"):
                    await saver.setup()

        asyncio.run(main())
    finally:
        same.close()


def test_pg_async_graph_rows_are_encrypted(pg_db: str, keys: KeyStore, signer: Signer) -> None:
    async def main() -> Any:
        async with AsyncAttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=Encryption(keys)
        ) as saver:
            await saver.setup()
            graph = build(saver)
            for thread, user in THREADS:
                for turn in ("hello", f"my secret is {MARKER}"):
                    await graph.ainvoke(
                        {"messages": [HumanMessage(content=turn)]}, cfg(thread, user)
                    )
            state = await graph.aget_state(cfg("alice-2", "alice"))
            assert MARKER in state.values["messages"][-2].content
            history = [s async for s in graph.aget_state_history(cfg("bob-1", "bob"))]
            assert len(history) >= 4
            tup = await asyncio.to_thread(saver.get_tuple, cfg("bob-1", "bob"))
            assert tup is not None and tup.checkpoint["channel_values"]["note"].startswith("n ")

    asyncio.run(main())
    text = all_raw_text(pg_db)
    assert MARKER not in text and "my secret" not in text


async def test_pg_conformance_suite_with_encryption(pg_db: str, keys: KeyStore) -> None:
    """LangGraph's conformance suite against the async PostgreSQL saver, encryption on."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    @checkpointer_test(name="AsyncAttestingPostgresSaver+Encryption")
    async def factory() -> Any:
        async with AsyncAttestingPostgresSaver.from_conn_string(
            pg_db, signer=Signer.generate(), encryption=Encryption(keys)
        ) as saver:
            await saver.setup()
            yield saver

    report = await validate(factory)
    failed = {c: r.tests_failed for c, r in report.results.items() if r.detected and not r.passed}
    assert failed == {}
    assert sum(r.tests_passed for r in report.results.values()) >= 60


# -- crypto-shredding on PostgreSQL: a pg_dump taken before the shred ---------------------


def _restore(pg_dsn: str, dump: Path) -> str:
    import subprocess

    name = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    target = psycopg.conninfo.make_conninfo(pg_dsn, dbname=name)
    subprocess.run(["pg_restore", "--no-owner", "-d", target, str(dump)], check=True, timeout=120)
    return target


def _drop(pg_dsn: str, dsn: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def test_pg_shred_subject_reaches_a_pg_dump(
    pg_db: str, pg_dsn: str, keys: KeyStore, signer: Signer, tmp_path: Path
) -> None:
    import subprocess

    from erasure_receipts import KeyShreddedError, ReceiptLog, verify_receipt

    log = ReceiptLog(tmp_path / "log", signer=signer)
    dump = tmp_path / "backup.dump"
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, encryption=Encryption(keys), archive=log
    ) as saver:
        saver.setup()
        graph = build(saver)
        for thread, user in THREADS:
            for turn in ("hello", f"my secret is {MARKER}"):
                graph.invoke({"messages": [HumanMessage(content=turn)]}, cfg(thread, user))
        subprocess.run(["pg_dump", "-Fc", "-f", str(dump), "-d", pg_db], check=True, timeout=120)
        receipt = saver.shred_subject("alice")
        with pytest.raises(KeyShreddedError):
            graph.get_state(cfg("alice-1", "alice"))
        assert graph.get_state(cfg("bob-1", "bob")).values["note"].startswith("n ")
    verify_receipt(receipt, [signer.public_key])
    sc = receipt.predicate["scope"]
    assert sc["threads"] == ["alice-1", "alice-2"] and sc["key_store"]["kind"] == "postgres"
    assert receipt.predicate["backend"]["kind"] == "key-store-postgres"
    scan = [r for r in receipt.predicate["residue"] if r["action"] == "key_store.residue_scan"]
    assert scan[0]["status"] == "skipped"  # the server's files are not readable from here
    assert ReceiptLog(tmp_path / "log").size == 1
    with connect(keys.dsn or "") as c:
        assert c.execute(
            "SELECT count(*) FROM erasure_data_keys WHERE name = 'subject:alice'"
        ).fetchone() == (0,)
        assert c.execute(
            "SELECT count(*) FROM erasure_thread_keys WHERE name = 'subject:alice'"
        ).fetchone() == (0,)

    target = _restore(pg_dsn, dump)
    try:
        assert MARKER not in all_raw_text(target)
        with AttestingPostgresSaver.from_conn_string(
            target, signer=signer, encryption=Encryption(keys)
        ) as restored:
            restored.setup()
            for t in ("alice-1", "alice-2"):
                with pytest.raises(KeyShreddedError):
                    restored.get_tuple(cfg(t, None))
            tup = restored.get_tuple(cfg("bob-1", None))
            assert tup is not None and MARKER in str(tup.checkpoint["channel_values"]["messages"])
    finally:
        _drop(pg_dsn, target)


def test_pg_async_shred_subject(pg_db: str, keys: KeyStore, signer: Signer) -> None:
    from erasure_receipts import KeyShreddedError, verify_receipt

    async def main() -> Any:
        async with AsyncAttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=Encryption(keys)
        ) as saver:
            await saver.setup()
            graph = build(saver)
            for thread, user in THREADS:
                await graph.ainvoke({"messages": [HumanMessage(content="hi")]}, cfg(thread, user))
            receipt = await saver.ashred_subject("alice")
            with pytest.raises(KeyShreddedError):
                await graph.aget_state(cfg("alice-2", "alice"))
            assert (await graph.aget_state(cfg("bob-1", "bob"))).values["messages"]
            return receipt

    receipt = asyncio.run(main())
    verify_receipt(receipt, [signer.public_key])
    assert receipt.predicate["scope"]["threads"] == ["alice-1", "alice-2"]


def test_pg_store_items_sync_and_async(pg_db: str, keys: KeyStore, signer: Signer) -> None:
    """Encryption.wrap_store over PostgresStore and AsyncPostgresStore: values sealed in
    the raw rows, read back through the wrapper, shredded with the subject."""
    from langgraph.store.postgres import PostgresStore
    from langgraph.store.postgres.aio import AsyncPostgresStore

    from erasure_receipts import KeyShreddedError, verify_receipt

    enc = Encryption(keys)
    with PostgresStore.from_conn_string(pg_db) as raw:
        raw.setup()
        store = enc.wrap_store(raw, lambda ns: ns[1])
        store.put(("users", "alice"), "profile", {"email": f"alice@{MARKER}"})
        store.put(("users", "bob"), "profile", {"email": "bob@example.com"})
        assert store.get(("users", "alice"), "profile").value["email"].endswith(MARKER)
        assert [i.key for i in store.search(("users", "alice"))] == ["profile"]

    async def amain() -> None:
        async with AsyncPostgresStore.from_conn_string(pg_db) as araw:
            astore = enc.wrap_store(araw, lambda ns: ns[1])
            await astore.aput(("users", "alice"), "prefs", {"tone": MARKER})
            got = await astore.aget(("users", "alice"), "prefs")
            assert got is not None and got.value == {"tone": MARKER}

    asyncio.run(amain())
    with connect(pg_db) as c:
        values = [str(r[0]) for r in c.execute("SELECT value::text FROM store").fetchall()]
    assert len(values) == 3 and not any(MARKER in v for v in values)

    with (
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, encryption=enc) as saver,
        PostgresStore.from_conn_string(pg_db) as raw,
    ):
        saver.setup()
        build(saver).invoke({"messages": [HumanMessage(content="hi")]}, cfg("alice-1", "alice"))
        receipt = saver.shred_subject("alice")
        verify_receipt(receipt, [signer.public_key])
        assert receipt.predicate["scope"]["store_namespaces"] == [["users", "alice"]]
        store = enc.wrap_store(raw, lambda ns: ns[1])
        with pytest.raises(KeyShreddedError):
            store.get(("users", "alice"), "profile")
        assert store.get(("users", "bob"), "profile") is not None


def test_pg_shred_refuses_plaintext_rows_of_its_scope(
    pg_db: str, keys: KeyStore, signer: Signer
) -> None:
    """A pending write stored in plaintext in the subject's thread, and a plaintext store
    item in the subject's namespace, would stay readable: the shred refuses naming them
    and destroys nothing; once they are gone it goes through."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.store.postgres import PostgresStore

    from erasure_receipts import verify_receipt

    enc = Encryption(keys)
    with (
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, encryption=enc) as saver,
        PostgresStore.from_conn_string(pg_db) as raw,
    ):
        saver.setup()
        raw.setup()
        build(saver).invoke({"messages": [HumanMessage(content="hi")]}, cfg("alice-1", "alice"))
        enc.wrap_store(raw, lambda ns: ns[1]).put(("users", "alice"), "prefs", {"t": 1})
        raw.put(("users", "alice"), "plain", {"email": f"alice@{MARKER}"})
        type_, blob = JsonPlusSerializer().dumps_typed({"v": MARKER})
        with connect(pg_db) as c:
            c.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, blob) SELECT thread_id, "
                "checkpoint_ns, checkpoint_id, 'plain-task', '', 0, 'x', %s, %s "
                "FROM checkpoints WHERE thread_id = 'alice-1' LIMIT 1",
                (type_, blob),
            )
            c.commit()
            before = c.execute("SELECT t::text FROM checkpoint_writes t ORDER BY 1").fetchall()
        with pytest.raises(PlaintextRowError, match="nothing was destroyed") as exc:
            saver.shred_subject("alice")
        msg = str(exc.value)
        assert "checkpoint_writes thread 'alice-1'" in msg
        assert "store item 'users.alice'/'plain'" in msg and "2 row(s)" in msg
        assert keys.has_key("subject:alice")
        with connect(pg_db) as c:
            assert c.execute("SELECT t::text FROM checkpoint_writes t ORDER BY 1").fetchall() == (
                before
            )
            c.execute("DELETE FROM checkpoint_writes WHERE task_id = 'plain-task'")
            c.commit()
        raw.delete(("users", "alice"), "plain")
        verify_receipt(saver.shred_subject("alice"), [signer.public_key])
