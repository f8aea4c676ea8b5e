"""erase_subject on PostgreSQL (sync and async), against a real server: the same subject
scenario as tests/sqlite/test_subject.py, a copy_thread fork, and the table lock that keeps the
discovered scope true until commit. Raw rows are read through separate connections."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    Signer,
    ThreadErasedError,
    verify_receipt,
)
from erasure_receipts._backends.postgres import database_label
from erasure_receipts._engine import NeedlesFoundError
from erasure_receipts.privacy import CommitmentKey
from pg_helpers import connect, count, fingerprint, independent_digest
from test_subject import (
    EMAIL,
    NAMESPACES,
    OTHERS,
    SUBJECT,
    SUPPORT,
    THREADS,
    build,
    cfg,
    populate,
)

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
BOB_STORE = "prefix IN ('users.bob', 'memories.bob.prefs', 'crm.contacts.bob')"
ALICE_STORE = "prefix IN ('users.alice', 'memories.alice.prefs', 'crm.contacts.alice')"


def others(dsn: str) -> dict[str, str]:
    out = {t: fingerprint(dsn, t, "thread_id = ANY(%s)", (OTHERS,)) for t in TABLES}
    out["store"] = fingerprint(dsn, "store", BOB_STORE, ())
    return out


def alice_rows(dsn: str, threads: list[str]) -> int:
    n = sum(count(dsn, t, "thread_id = ANY(%s)", (threads,)) for t in TABLES)
    return n + count(dsn, "store", ALICE_STORE, ())


def fork(dsn: str, source: str, target: str) -> None:
    """``copy_thread`` done with SQL (the installed PostgresSaver has none): every row
    of the three checkpoint tables, metadata included, under the new thread id."""
    with connect(dsn) as conn:
        for table in TABLES:
            cols = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema() ORDER BY ordinal_position",
                    (table,),
                ).fetchall()
            ]
            rest = ", ".join(f'"{c}"' for c in cols if c != "thread_id")
            conn.execute(
                f"INSERT INTO {table} (thread_id, {rest}) SELECT %s, {rest} FROM {table} "
                "WHERE thread_id = %s",
                (target, source),
            )


@pytest.fixture
def pg_app(pg_db: str, signer: Signer) -> str:
    with (
        PostgresStore.from_conn_string(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        populate(build(saver, store))
    return pg_db


def test_pg_subject_refused_then_one_receipt(pg_app: str, signer: Signer, tmp_path: Path) -> None:
    dsn = pg_app
    before = others(dsn)
    per_thread = {
        t: independent_digest(dsn, {tb: ("thread_id = %s", (t,)) for tb in TABLES})
        for t in [*THREADS, SUPPORT]
    }
    with (
        PostgresStore.from_conn_string(dsn) as store,
        AttestingPostgresSaver.from_conn_string(
            dsn,
            signer=signer,
            store=store,
            archive=tmp_path / "r",
            tombstone_policy="refuse_all",  # every write refused until reopen_thread()
        ) as saver,
    ):
        assert list(saver.digest_subject(SUBJECT, metadata_key="user_id").threads) == THREADS
        with pytest.raises(NeedlesFoundError) as refused:
            saver.erase_subject(
                SUBJECT, metadata_key="user_id", store_namespaces=NAMESPACES, needles=[EMAIL]
            )
        assert SUPPORT in refused.value.message
        assert {loc["thread_id"] for loc in refused.value.locations} == {SUPPORT}
        assert alice_rows(dsn, THREADS) > 0  # rolled back

        receipt = saver.erase_subject(
            SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES,
            needles=[EMAIL],
        )  # fmt: skip
        p = receipt.predicate
        assert p["scope"]["threads"] == sorted([*THREADS, SUPPORT])
        units = {u["name"]: u for u in p["units"]}
        for t, digest in per_thread.items():
            assert units[f"thread:{t}"]["digest"]["sha256"] == digest
        assert units["store"]["tables"]["store"]["rows"] == 3
        assert p["methods"] == {"checkpoints": "atomic-transaction", "store": "atomic-transaction"}
        assert alice_rows(dsn, [*THREADS, SUPPORT]) == 0
        assert saver.locate([EMAIL]) == []
        assert others(dsn) == before
        graph = build(saver, store)
        # Refused by the store's tombstone (the node writes memory first) or the thread's.
        with pytest.raises((ThreadErasedError, psycopg.errors.RaiseException), match="erased"):
            graph.invoke({"messages": [("user", "again")]}, cfg(THREADS[2], SUBJECT))
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_pg_fork_is_discovered_and_privacy_mode(pg_app: str, signer: Signer) -> None:
    dsn = pg_app
    fork(dsn, THREADS[0], "alice-fork-what-if")
    key = CommitmentKey.generate()
    with (
        PostgresStore.from_conn_string(dsn) as store,
        AttestingPostgresSaver.from_conn_string(dsn, signer=signer, store=store) as saver,
    ):
        r = saver.erase_subject(
            SUBJECT, metadata_key="user_id", threads=[SUPPORT], needles=[EMAIL],
            store_namespaces=NAMESPACES, privacy="commitments", commitment_key=key,
        )  # fmt: skip
    threads = [*THREADS, SUPPORT, "alice-fork-what-if"]
    assert r.predicate["scope"]["threads"] == sorted(key.commit("thread", t) for t in threads)
    assert alice_rows(dsn, threads) == 0
    raw = r.to_json()
    names = [".".join(ns) for ns in NAMESPACES]
    where = psycopg.conninfo.conninfo_to_dict(dsn)
    for value in [SUBJECT, EMAIL, *threads, *names, str(where["dbname"]), str(where["host"])]:
        assert value.encode() not in raw, value
    with psycopg.connect(dsn) as conn:
        label = database_label(conn.info)
    assert r.predicate["backend"]["database"] == key.commit("database", label)
    verify_receipt(raw, [signer.public_key])
    with connect(dsn) as conn:
        [(tid, entry)] = conn.execute("SELECT thread_id, entry FROM erasure_journal").fetchall()
    assert tid == key.commit("subject", SUBJECT)
    assert SUBJECT not in entry.replace("metadata_key", "") and EMAIL not in entry


def test_pg_writers_wait_for_the_subject_erasure(
    pg_app: str, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the search under the lock and the commit, no thread of the subject can
    be created: a writer of any thread waits (here: gives up after its lock timeout)."""
    from erasure_receipts._backends import postgres as pg_backend
    from faults import inject

    dsn = pg_app
    original = pg_backend.threads_by_metadata
    seen: list[str] = []

    def probe(session: Any, key: str, value: str) -> list[str]:
        found = original(session, key, value)
        if len(seen) == 1:  # the search inside the erasure transaction

            def write() -> None:
                with psycopg.connect(dsn, autocommit=True) as c:
                    c.execute("SET lock_timeout = '300ms'")
                    try:
                        c.execute(
                            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                            "checkpoint, metadata) VALUES ('alice-new', '', 'x', '{}', "
                            '\'{"user_id": "alice"}\')'
                        )
                        seen.append("inserted")
                    except psycopg.errors.LockNotAvailable:
                        seen.append("blocked")

            t = threading.Thread(target=write)
            t.start()
            t.join()
        seen.append("search")
        return found

    with AttestingPostgresSaver.from_conn_string(dsn, signer=signer) as saver:
        inject(monkeypatch, saver, threads_by_metadata=probe)
        saver.erase_subject(SUBJECT, metadata_key="user_id")
    assert seen == ["search", "blocked", "search"]
    assert count(dsn, "checkpoints", "thread_id = ANY(%s)", (THREADS,)) == 0


def test_pg_thread_appearing_before_the_lock_restarts(
    pg_app: str, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts._ops import subject as subject_ops  # internals

    dsn = pg_app
    original = subject_ops.subject_request
    calls: list[int] = []

    def late(self: Any, handle: Any, spec: Any) -> Any:
        request = original(self, handle, spec)
        if not calls:
            fork(dsn, THREADS[1], "alice-late")
        calls.append(1)
        return request

    monkeypatch.setattr(subject_ops, "subject_request", late)
    with AttestingPostgresSaver.from_conn_string(dsn, signer=signer) as saver:
        r = saver.erase_subject(SUBJECT, metadata_key="user_id")
    assert len(calls) == 2 and "alice-late" in r.predicate["scope"]["threads"]
    assert count(dsn, "checkpoints", "thread_id = 'alice-late'", ()) == 0


async def test_pg_async_subject(pg_app: str, signer: Signer) -> None:
    dsn = pg_app
    before = others(dsn)
    async with (
        AsyncPostgresStore.from_conn_string(dsn) as store,
        AsyncAttestingPostgresSaver.from_conn_string(dsn, signer=signer, store=store) as saver,
    ):
        preview = await saver.adigest_subject(
            SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES
        )
        found = await saver.alocate([EMAIL])
        assert {loc.thread_id for loc in found if loc.table != "store"} == {*THREADS, SUPPORT}
        assert any(loc.table == "store" and loc.prefix == "crm.contacts.alice" for loc in found)
        r = await saver.aerase_subject(
            SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES,
            needles=[EMAIL],
        )  # fmt: skip
        assert saver.last_receipt == r
        assert await saver.alocate([EMAIL]) == []
        assert await saver.apurge_journal(__import__("datetime").timedelta(0)) == 1
    assert r.predicate["pre_state"]["digest"]["sha256"] == preview.digest
    assert alice_rows(dsn, [*THREADS, SUPPORT]) == 0
    assert others(dsn) == before
    verify_receipt(r.to_json(), [signer.public_key])


def test_pg_cli_subject(pg_db: str, signer: Signer, tmp_path: Path) -> None:
    """On a database the library never set up: digest/locate read without installing
    anything; erase --subject installs the schema and issues one receipt."""
    import json
    import subprocess
    import sys

    from langgraph.checkpoint.postgres import PostgresSaver

    with (
        PostgresStore.from_conn_string(pg_db) as store,
        PostgresSaver.from_conn_string(pg_db) as plain,
    ):
        store.setup()
        plain.setup()
        populate(build(plain, store))
    cli = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=120)

    ns = [a for n in NAMESPACES for a in ("--store-ns", "/".join(n))]
    d = run("digest", pg_db, "--subject", SUBJECT, "--metadata-key", "user_id", "--json")
    assert d.returncode == 0, d.stderr
    assert json.loads(d.stdout)["threads"] == THREADS
    d = run("digest", pg_db, "--subject", SUBJECT, "--metadata-key", "user_id", "--thread",
            SUPPORT, *ns, "--json")  # fmt: skip
    assert d.returncode == 0, d.stderr
    with connect(pg_db) as conn:
        assert conn.execute("SELECT to_regclass('erasure_journal')").fetchone() == (None,)
    loc = run("locate", pg_db, EMAIL, "--json")
    assert loc.returncode == 0, loc.stderr
    assert {x.get("thread_id") for x in json.loads(loc.stdout)["locations"]} >= {SUPPORT}
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    e = run("erase", pg_db, "--subject", SUBJECT, "--metadata-key", "user_id", "--thread",
            SUPPORT, *ns, "--needle", EMAIL, "--key", str(key), "--json")  # fmt: skip
    assert e.returncode == 0, e.stderr
    doc = json.loads(e.stdout)
    assert doc["subject"] == SUBJECT and doc["threads"] == sorted([*THREADS, SUPPORT])
    pre = doc["receipt"]["statement"]["predicate"]["pre_state"]["digest"]["sha256"]
    assert pre == json.loads(d.stdout)["digest"]  # the read-only preview measured the same
    assert alice_rows(pg_db, [*THREADS, SUPPORT]) == 0
    verify_receipt(json.dumps(doc["receipt"]).encode(), [signer.public_key])
