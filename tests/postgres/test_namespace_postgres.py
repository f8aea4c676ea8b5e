"""Namespace erasure and store tombstones on the PostgreSQL savers (real server;
RECEIPT_SPEC.md 8.1, 9.7): see tests/sqlite/test_namespace_erasure.py.

``store_vectors`` needs pgvector, which this server lacks: the tests create a table of
that name and shape (``bytea`` embedding, the cascade to ``store``) so its rows are
measured, deleted and guarded like pgvector's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from erasure_receipts.errors import ConfigurationError
from pg_helpers import raw_rows

ALICE = ("users", "alice")
PREFS = ("users", "alice", "prefs")
ALICIA = ("users", "alicia")
UNDER = "(prefix = %s OR left(prefix, length(%s) + 1) = %s || '.')"


def under(dsn: str, prefix: str, table: str = "store") -> list[Any]:
    return raw_rows(dsn, table, UNDER, (prefix, prefix, prefix))


def bystanders(dsn: str) -> dict[str, list[Any]]:
    not_alice = f"NOT {UNDER}"
    return {
        t: raw_rows(dsn, t, not_alice, ("users.alice",) * 3) for t in ("store", "store_vectors")
    }


@contextmanager
def seeded(pg_db: str) -> Iterator[PostgresStore]:
    with PostgresStore.from_conn_string(pg_db) as store:
        store.setup()
        store.put(ALICE, "profile", {"name": "alice"})
        store.put(ALICE, "notes", {"text": "likes tea"})
        store.put(PREFS, "theme", {"mode": "dark"}, ttl=60)
        for ns in [ALICIA, ("users", "al"), ("users", "a_ice"), ("users", "a%")]:
            store.put(ns, "k", {"who": ns[-1]})
        with psycopg.connect(pg_db, autocommit=True) as c:
            c.execute(
                "UPDATE store SET expires_at = now() - interval '1 day' "
                "WHERE prefix = 'users.alice.prefs'"
            )
            c.execute(
                "CREATE TABLE store_vectors (prefix text NOT NULL, key text NOT NULL, "
                "field_name text NOT NULL, embedding bytea, created_at timestamptz DEFAULT "
                "now(), updated_at timestamptz DEFAULT now(), PRIMARY KEY (prefix, key, "
                "field_name), FOREIGN KEY (prefix, key) REFERENCES store (prefix, key) "
                "ON DELETE CASCADE)"
            )
            c.execute(
                "INSERT INTO store_vectors (prefix, key, field_name, embedding) VALUES "
                "('users.alice', 'notes', 'text', '\\x01'), ('users.alicia', 'k', 'text', '\\x02')"
            )
        yield store


PLAIN_PUT = """
import sys
import psycopg
from langgraph.store.postgres import PostgresStore
with PostgresStore.from_conn_string(sys.argv[1]) as store:
    try:
        store.put(tuple(sys.argv[2].split(".")), "k", {"v": 1})
    except psycopg.errors.RaiseException as exc:
        print("refused:", str(exc).splitlines()[0])
        sys.exit(7)
print("accepted")
"""


def plain_put(dsn: str, prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PLAIN_PUT, dsn, prefix],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_pg_erase_namespace_alice(pg_db: str, signer: Signer) -> None:
    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        saver.setup()
        kept = bystanders(pg_db)
        assert len(kept["store"]) == 4 and len(kept["store_vectors"]) == 1
        preview = saver.digest_namespace(ALICE)
        receipt = saver.erase_namespace(ALICE)
        assert under(pg_db, "users.alice") == []
        assert under(pg_db, "users.alice", "store_vectors") == []
        assert bystanders(pg_db) == kept  # alicia, al, a_ice, a% untouched
        p = receipt.predicate
        assert p["kind"] == "namespace" and p["backend"]["kind"] == "postgres"
        assert p["pre_state"]["tables"]["store"]["rows"] == 3  # the expired item included
        assert p["pre_state"]["tables"]["store_vectors"]["rows"] == 1
        assert receipt.pre_digest == preview.digest
        assert verify_receipt(receipt.to_json(), [signer.public_key])
        # another process's plain PostgresStore: refused below the prefix, bystanders not
        for prefix in ("users.alice.x", "users.alice"):
            out = plain_put(pg_db, prefix)
            assert out.returncode == 7 and "store namespace erased" in out.stdout, out.stderr
        assert plain_put(pg_db, "users.alicia.x").returncode == 0
        assert plain_put(pg_db, "users.al.x").returncode == 0
        assert under(pg_db, "users.alice") == []
        assert saver.is_namespace_erased(("users", "alice", "x"))
        assert saver.reopen_namespace(ALICE)
        out = plain_put(pg_db, "users.alice.x")
        assert out.returncode == 0 and "accepted" in out.stdout, out.stderr
        assert len(under(pg_db, "users.alice")) == 1


@pytest.mark.parametrize("prefix", [("users", "al"), ("users", "a_ice"), ("users", "a%")])
def test_pg_whole_labels_and_literal_wildcards(
    pg_db: str, signer: Signer, prefix: tuple[str, ...]
) -> None:
    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        r = saver.erase_namespace(prefix)
        assert r.predicate["pre_state"]["tables"]["store"]["rows"] == 1
        assert len(under(pg_db, "users.alice")) == 3
        store.put(ALICE, "new", {"x": 1})  # alice is not below the erased prefix
        with pytest.raises(psycopg.errors.RaiseException, match="store namespace erased"):
            store.put((*prefix, "below"), "new", {"x": 1})


WRITER = """
import json, sys, pathlib
import psycopg
from langgraph.store.postgres import PostgresStore
dsn, started, log = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
ok, refused, i = [], 0, 0
with PostgresStore.from_conn_string(dsn) as store:
    while refused < 3:
        key = f"w{i}"
        try:
            store.put(("users", "alice", "w"), key, {"i": i})
            ok.append(key)
            if len(ok) == 5:
                started.write_text("go")
        except psycopg.errors.RaiseException:
            refused += 1
        i += 1
log.write_text(json.dumps({"ok": ok, "refused": refused}))
"""


@pytest.mark.parametrize("triggers_first", [True, False], ids=["installed", "first-erasure"])
def test_pg_concurrent_writer_process_is_measured_or_refused(
    pg_db: str, signer: Signer, tmp_path: Path, triggers_first: bool
) -> None:
    """Every put the writer committed is counted in the receipt, every later one is
    refused, none survives - whether the store trigger existed before or is created by
    this very erasure (its table lock then holds writers until the commit)."""
    started, log = tmp_path / "started", tmp_path / "log.json"
    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        if triggers_first:
            saver.erase_namespace(("users", "al"), tombstone=False)  # installs the trigger
        proc = subprocess.Popen([sys.executable, "-c", WRITER, pg_db, str(started), str(log)])
        try:
            while not started.exists():
                if proc.poll() is not None:
                    pytest.fail("the writer process ended before it wrote")
                threading.Event().wait(0.01)
            receipt = saver.erase_namespace(ALICE)
        finally:
            assert proc.wait(timeout=300) == 0
        written = json.loads(log.read_text())
        assert written["refused"] == 3
        assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 3 + len(written["ok"])
        assert under(pg_db, "users.alice") == []
        assert verify_receipt(receipt.to_json(), [signer.public_key])


class State(TypedDict):
    text: str


def test_pg_running_graph_write_is_refused(pg_db: str, signer: Signer) -> None:
    entered, resume = threading.Event(), threading.Event()

    def remember(state: State, *, store: BaseStore) -> State:
        entered.set()
        resume.wait(60)
        store.put(ALICE, "memory", {"text": state["text"]})
        return state

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        saver.setup()
        graph = builder.compile(checkpointer=saver, store=store)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                graph.invoke({"text": "alice likes jazz"}, {"configurable": {"thread_id": "chat"}})
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert entered.wait(60)
        receipt = saver.erase_namespace(ALICE)
        resume.set()
        worker.join(60)
        assert len(errors) == 1 and "store namespace erased" in str(errors[0])
        assert under(pg_db, "users.alice") == []
        assert verify_receipt(receipt.to_json(), [signer.public_key])


def test_pg_erase_thread_with_store_namespaces_tombstones_them(pg_db: str, signer: Signer) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        saver.setup()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                  empty_checkpoint(), {}, {})  # fmt: skip
        r = saver.erase_thread("t", store_namespaces=[ALICE])
        assert r.predicate["scope"]["store_tombstone"] is True
        assert verify_receipt(r.to_json(), [signer.public_key])
        assert plain_put(pg_db, "users.alice.prefs").returncode == 7
        assert saver.is_namespace_erased(PREFS)


def test_pg_bad_input_changes_nothing(pg_db: str, signer: Signer) -> None:
    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        saver.setup()
        before = raw_rows(pg_db, "store", "true", ())
        for prefix, error in [((), ConfigurationError), (("users", ""), ConfigurationError),
                              (("users.alice",), ConfigurationError),
                              (("users", "nobody"), NothingToEraseError)]:  # fmt: skip
            with pytest.raises(error):
                saver.erase_namespace(prefix)
        assert raw_rows(pg_db, "store", "true", ()) == before
        assert raw_rows(pg_db, "erasure_journal", "true", ()) == []
        r = saver.erase_namespace(("users", "nobody"), allow_empty=True)
        assert r.predicate["pre_state"]["leaves"] == 0


def test_pg_async_saver(pg_db: str, signer: Signer) -> None:
    with seeded(pg_db):
        pass
    kept = bystanders(pg_db)

    async def main() -> None:
        async with (
            AsyncPostgresStore.from_conn_string(pg_db) as store,
            AsyncAttestingPostgresSaver.from_conn_string(
                pg_db, signer=signer, store=store
            ) as saver,
        ):
            await saver.setup()
            d = await saver.adigest_namespace(ALICE)
            r = await saver.aerase_namespace(ALICE)
            assert r.pre_digest == d.digest and r.predicate["pre_state"]["leaves"] == 4
            assert await saver.ais_namespace_erased(PREFS)
            with pytest.raises(psycopg.errors.RaiseException, match="store namespace erased"):
                await store.aput(PREFS, "again", {"v": 1})
            assert await saver.areopen_namespace(ALICE)
            await store.aput(PREFS, "again", {"v": 1})

    asyncio.run(main())
    assert bystanders(pg_db) == kept
    assert len(under(pg_db, "users.alice")) == 1


def test_pg_an_older_store_trigger_function_is_replaced(pg_db: str, signer: Signer) -> None:
    from erasure_receipts._backends.postgres.schema import STORE_SCHEMA_VERSION

    def version() -> Any:
        with psycopg.connect(pg_db) as c:
            row = c.execute(
                "SELECT obj_description(to_regprocedure("
                "'erasure_receipts_refuse_erased_store()'), 'pg_proc')"
            ).fetchone()
        return None if row is None else row[0]

    with (
        seeded(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        saver.erase_namespace(("users", "al"))
        assert version() == STORE_SCHEMA_VERSION
        with psycopg.connect(pg_db, autocommit=True) as c:
            c.execute("COMMENT ON FUNCTION erasure_receipts_refuse_erased_store() IS 'old'")
        saver.erase_namespace(ALICE)
        assert version() == STORE_SCHEMA_VERSION
        assert plain_put(pg_db, "users.alice.x").returncode == 7
