"""Migrating a plaintext PostgreSQL LangGraph database to per-subject encryption
(``encrypt_postgres_database``): threads written by a plain ``PostgresSaver`` through a
real graph end up as the encrypting saver writes them, read back (sync and async) as
they were, shred per subject, and a second run seals nothing. Raw rows are read
through separate connections."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg.rows import dict_row

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ConfigurationError,
    Encryption,
    KeyShreddedError,
    KeyStore,
    LocalKeyWrapper,
    PlaintextRowError,
    Signer,
)
from erasure_receipts.errors import NotALangGraphDatabaseError
from erasure_receipts.shredding import SEALED_TYPE, encrypt_postgres_database
from pg_helpers import all_raw_text, connect
from pg_server import fresh_database
from test_encryption_sqlite import MARKER, build, cfg

THREADS = (("alice-1", "alice"), ("alice-2", "alice"), ("bob-1", "bob"), ("anon-1", None))


@pytest.fixture
def other_db(pg_dsn: str) -> Iterator[str]:
    """A second fresh database (the key store's, or a reference written encrypted)."""
    with fresh_database(pg_dsn, "k") as dsn:
        yield dsn


@pytest.fixture
def keys(pg_dsn: str, tmp_path: Path) -> Iterator[KeyStore]:
    with fresh_database(pg_dsn, "ks") as dsn:
        ks = KeyStore.postgres(dsn, LocalKeyWrapper.generate(tmp_path / "master.key"))
        try:
            yield ks
        finally:
            ks.close()


def write_plain(dsn: str) -> None:
    """Two turns per thread (the marker in the second) through a plain PostgresSaver."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        graph = build(saver)
        for thread, user in THREADS:
            for turn in ("hello", f"my secret is {MARKER}"):
                graph.invoke({"messages": [HumanMessage(content=turn)]}, cfg(thread, user))


def shape(dsn: str) -> dict[str, Any]:
    """What the rows are, without the random parts (ids, versions, ciphertext): per
    thread, the checkpoints' inline values, and (channel, type) of blobs and writes."""
    with connect(dsn) as c:
        cps = c.execute(
            "SELECT thread_id, checkpoint -> 'channel_values', type FROM checkpoints"
        ).fetchall()
        blobs = c.execute("SELECT thread_id, channel, type FROM checkpoint_blobs").fetchall()
        writes = c.execute("SELECT thread_id, channel, type FROM checkpoint_writes").fetchall()
    return {
        "checkpoints": Counter((t, str(v), ty) for t, v, ty in cps),
        "blobs": Counter(blobs),
        "writes": Counter(writes),
    }


def history(graph: Any, thread: str, user: str | None) -> list[Any]:
    return [(s.values, s.next, s.metadata) for s in graph.get_state_history(cfg(thread, user))]


def tuples(saver: Any, thread: str) -> list[Any]:
    return [(t.checkpoint, t.metadata, t.pending_writes) for t in saver.list(cfg(thread, None))]


def test_pg_migration_seals_every_row_as_the_encrypting_saver_writes_it(
    pg_db: str, other_db: str, keys: KeyStore, signer: Signer
) -> None:
    write_plain(pg_db)
    assert MARKER in all_raw_text(pg_db)
    with PostgresSaver.from_conn_string(pg_db) as plain:
        before = {t: history(build(plain), t, u) for t, u in THREADS}
        raw_before = {t: tuples(plain, t) for t, _ in THREADS}
    calls: list[tuple[int, int]] = []

    out = encrypt_postgres_database(
        pg_db, Encryption(keys), progress=lambda d, n: calls.append((d, n))
    )

    assert out.checkpoints > 0 and out.blobs > 0 and out.writes > 0
    assert (out.threads, out.already_sealed, out.store_plaintext) == (4, 0, 0) and out.vacuumed
    assert len(calls) >= out.checkpoints + out.writes
    assert [d for d, _ in calls] == sorted({d for d, _ in calls}) and calls[-1][0] <= calls[-1][1]
    text = all_raw_text(pg_db)
    assert MARKER not in text and "my secret" not in text
    with connect(pg_db) as c:
        union = "SELECT type FROM checkpoint_blobs UNION SELECT type FROM checkpoint_writes"
        types = {r[0] for r in c.execute(union)}
        assert types <= {SEALED_TYPE, "empty"} and SEALED_TYPE in types
        assert c.execute(
            "SELECT count(*) FROM checkpoints WHERE checkpoint->'channel_values' <> '{}'::jsonb"
        ).fetchone() == (0,)
    assert keys.threads_of("subject:alice") == ["alice-1", "alice-2"]  # metadata's user_id
    assert keys.threads_of("subject:bob") == ["bob-1"]
    assert keys.threads_of("thread:anon-1") == ["anon-1"]

    # The same turns written by the encrypting saver into another database: same rows.
    with AttestingPostgresSaver.from_conn_string(
        other_db, signer=signer, encryption=Encryption(keys)
    ) as ref:
        ref.setup()
        graph = build(ref)
        for thread, user in THREADS:
            for turn in ("hello", f"my secret is {MARKER}"):
                graph.invoke({"messages": [HumanMessage(content=turn)]}, cfg(thread, user))
    assert shape(pg_db) == shape(other_db)

    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, encryption=Encryption(keys)
    ) as saver:
        saver.setup()
        graph = build(saver)
        for thread, user in THREADS:
            assert history(graph, thread, user) == before[thread], thread
            assert tuples(saver, thread) == raw_before[thread], thread
        state = graph.get_state(cfg("alice-1", "alice"))
        assert MARKER in state.values["messages"][-2].content
        assert state.values["note"] == f"n my secret is {MARKER}"  # was inline in the JSON
        # A graph continues a migrated thread (and forks from its history).
        done = graph.invoke({"messages": [HumanMessage(content="more")]}, cfg("bob-1", "bob"))
        assert done["messages"][-1].content == "noted: more" and len(done["messages"]) == 6
        forked = graph.invoke(
            {"messages": [HumanMessage(content="again")]}, before_config(graph, "alice-2")
        )
        assert forked["messages"][-1].content == "noted: again"
        assert MARKER not in all_raw_text(pg_db)

        again = encrypt_postgres_database(pg_db, Encryption(keys))  # idempotent
        assert (again.checkpoints, again.blobs, again.writes, again.threads) == (0, 0, 0, 0)
        assert again.already_sealed > 0 and not again.vacuumed

        # A plaintext row inserted afterwards is refused, never served.
        type_, blob = JsonPlusSerializer().dumps_typed(f"late {MARKER}")
        with connect(pg_db) as c:
            c.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, blob) SELECT thread_id, "
                "checkpoint_ns, checkpoint_id, 'late-task', '', 0, 'note', %s, %s "
                "FROM checkpoints WHERE thread_id = 'bob-1' "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                (type_, blob),
            )
        with pytest.raises(PlaintextRowError, match="bob-1"):
            saver.get_tuple(cfg("bob-1", "bob"))
        late = encrypt_postgres_database(pg_db, Encryption(keys))  # a later run seals it
        assert (late.checkpoints, late.blobs, late.writes, late.threads) == (0, 0, 1, 1)
        tup = saver.get_tuple(cfg("bob-1", "bob"))
        assert tup is not None and ("late-task", "note", f"late {MARKER}") in tup.pending_writes

        # Shredding one subject: its rows no longer decrypt, the other's do.
        saver.shred_subject("alice")
        for thread in ("alice-1", "alice-2"):
            with pytest.raises(KeyShreddedError):
                saver.get_tuple(cfg(thread, "alice"))
            with pytest.raises(KeyShreddedError):
                graph.get_state(cfg(thread, "alice"))
        assert graph.get_state(cfg("bob-1", "bob")).values["note"] == "n more"
        assert history(graph, "anon-1", None) == before["anon-1"]
    # A run after the shred touches nothing (a shredded thread has nothing to seal).
    after = encrypt_postgres_database(pg_db, Encryption(keys))
    assert (after.checkpoints, after.blobs, after.writes) == (0, 0, 0)


def before_config(graph: Any, thread: str) -> Any:
    """An earlier checkpoint of ``thread`` (the state after its first turn)."""
    states = list(graph.get_state_history(cfg(thread, "alice")))
    return next(s.config for s in states if len(s.values.get("messages", [])) == 2)


def test_pg_migration_read_by_the_async_saver(pg_db: str, keys: KeyStore, signer: Signer) -> None:
    """Given a psycopg connection; the async encrypting saver reads every migrated row
    as the plain saver read it, and continues the thread."""
    write_plain(pg_db)
    with PostgresSaver.from_conn_string(pg_db) as plain:
        before = {t: history(build(plain), t, u) for t, u in THREADS}
    with psycopg.connect(pg_db, autocommit=True, row_factory=dict_row) as conn:
        out = encrypt_postgres_database(conn, Encryption(keys))
    assert out.threads == 4 and out.writes > 0 and out.vacuumed
    assert MARKER not in all_raw_text(pg_db)

    async def main() -> None:
        async with AsyncAttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=Encryption(keys)
        ) as saver:
            await saver.setup()
            graph = build(saver)
            for thread, user in THREADS:
                got = [
                    (s.values, s.next, s.metadata)
                    async for s in graph.aget_state_history(cfg(thread, user))
                ]
                assert got == before[thread], thread
            done = await graph.ainvoke(
                {"messages": [HumanMessage(content="more")]}, cfg("anon-1", None)
            )
            assert done["note"] == "n more" and len(done["messages"]) == 6

    asyncio.run(main())
    assert MARKER not in all_raw_text(pg_db)


def test_pg_migration_refuses_a_key_store_in_the_data_database(
    pg_db: str, other_db: str, tmp_path: Path
) -> None:
    write_plain(pg_db)
    with PostgresSaver.from_conn_string(pg_db) as plain:
        raw_before = {t: tuples(plain, t) for t, _ in THREADS}
    with KeyStore.postgres(pg_db, LocalKeyWrapper.generate(tmp_path / "master.key")) as same:
        with pytest.raises(ConfigurationError, match="must not be the data database"):
            encrypt_postgres_database(pg_db, Encryption(same))
        assert not same.threads_of("subject:alice")
        with pytest.raises(NotALangGraphDatabaseError, match="not a LangGraph database"):
            encrypt_postgres_database(other_db, Encryption(same))
    assert MARKER in all_raw_text(pg_db)
    with PostgresSaver.from_conn_string(pg_db) as plain:
        assert {t: tuples(plain, t) for t, _ in THREADS} == raw_before


def test_pg_migration_holds_off_writers_not_readers(pg_db: str, keys: KeyStore) -> None:
    """While the migration runs, another connection reads the tables but cannot write
    them (it waits for the lock: here it gives up after 200 ms)."""
    write_plain(pg_db)
    seen: list[str] = []

    def progress(done: int, total: int) -> None:
        if seen:
            return
        with connect(pg_db) as other:
            other.execute("SET lock_timeout = '200ms'")
            (n,) = other.execute("SELECT count(*) FROM checkpoint_writes").fetchone() or (0,)
            seen.append(f"read {n}")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("DELETE FROM checkpoint_writes WHERE thread_id = 'bob-1'")
            seen.append("write refused")

    out = encrypt_postgres_database(pg_db, Encryption(keys), progress=progress)
    assert seen[1] == "write refused" and seen[0] != "read 0" and out.writes > 0
    with connect(pg_db) as c:  # nothing was deleted: every write of bob-1 is there, sealed
        assert c.execute(
            "SELECT count(*) FILTER (WHERE type <> %s), count(*) FROM checkpoint_writes "
            "WHERE thread_id = 'bob-1'",
            (SEALED_TYPE,),
        ).fetchone()[:1] == (0,)
