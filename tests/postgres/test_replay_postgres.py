"""Replay after a restore on PostgreSQL (sync and async), against a real server: a
``pg_dump`` taken before the erasures is restored into a database with ``pg_restore``,
and ``replay_erasures`` erases again what came back. Raw rows are read through separate
connections."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg import sql
from typer.testing import CliRunner

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ErasedDataRestoredError,
    Signer,
    verify_receipt,
)
from erasure_receipts.app import app
from pg_helpers import connect, count, fingerprint
from scenario import build_graph

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
ALICE, BOB, DAVE = "alice-chat", "bob-chat", "dave-chat"
CAROL = ["carol-1", "carol-2"]


def rows(dsn: str, *threads: str) -> int:
    return sum(count(dsn, t, "thread_id = ANY(%s)", (list(threads),)) for t in TABLES)


def kept(dsn: str, thread: str) -> list[str]:
    with connect(dsn) as conn:
        q = "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s ORDER BY 1"
        return [r[0] for r in conn.execute(q, (thread,)).fetchall()]


def tombstoned(dsn: str, thread: str) -> bool:
    return count(dsn, "erasure_tombstones", "thread_id = %s", (thread,)) == 1


def talk(graph: Any, thread: str, *texts: str) -> None:
    for text in texts:
        config = {"configurable": {"thread_id": thread}}
        graph.invoke({"messages": [HumanMessage(content=text)]}, config)


@pytest.fixture
def restored(pg_db: str, pg_dsn: str, signer: Signer, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Erasures after a pg_dump; the dump restored into a new database."""
    archive, dump = tmp_path / "receipts", tmp_path / "backup.dump"
    with (
        PostgresStore.from_conn_string(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, store=store, archive=archive
        ) as saver,
    ):
        store.setup()
        saver.setup()
        graph = build_graph(saver, store)  # type: ignore[arg-type]
        talk(graph, ALICE, "my SSN is 078-05-1120", "thanks")
        talk(graph, BOB, "hello from bob")
        for t in CAROL:
            talk(graph, t, f"carol here on {t}")
        store.put(("users", "carol"), "profile", {"email": "carol@example.com"})
        talk(graph, DAVE, "one", "two", "three")
        subprocess.run(["pg_dump", "-Fc", "-f", str(dump), "-d", pg_db], check=True)
        originals = {
            "thread": saver.erase_thread(ALICE, store_namespaces=[("users", "alice")]),
            "subject": saver.erase_subject(
                "carol", threads=CAROL, store_namespaces=[("users", "carol")]
            ),
            "history": saver.erase_history(DAVE),
        }
    name = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    target = psycopg.conninfo.make_conninfo(pg_dsn, dbname=name)
    subprocess.run(["pg_restore", "--no-owner", "-d", target, str(dump)], check=True)
    try:
        yield {"dsn": target, "archive": archive, "originals": originals,
               "kept": kept(pg_db, DAVE), "bob": fingerprint(pg_db, "checkpoints",
               "thread_id = %s", (BOB,))}  # fmt: skip
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))  # fmt: skip


def test_pg_restore_then_replay(restored: dict[str, Any], signer: Signer) -> None:
    dsn, archive = restored["dsn"], restored["archive"]
    assert rows(dsn, ALICE) > 0 and rows(dsn, *CAROL) > 0  # the restore brought them back
    assert not tombstoned(dsn, ALICE)
    with (
        PostgresStore.from_conn_string(dsn) as store,
        AttestingPostgresSaver.from_conn_string(
            dsn, signer=signer, store=store, archive=archive, check_erasures=archive
        ) as saver,
    ):
        with pytest.raises(ErasedDataRestoredError, match=ALICE):
            saver.setup()
        dry = saver.replay_erasures(archive, dry_run=True)
        assert dry.reappeared == 3 and dry.receipts == [] and rows(dsn, ALICE) > 0
        result = saver.replay_erasures(archive)
        assert result.ok and result.re_erased == 3, result.to_json()
        saver.setup()  # replayed: serves again
        again = saver.replay_erasures(archive)
    assert again.ok and again.re_erased == 0 and again.count("postdated") == 3
    assert rows(dsn, ALICE, *CAROL) == 0
    assert count(dsn, "store", "prefix IN ('users.alice', 'users.carol')", ()) == 0
    assert tombstoned(dsn, ALICE) and all(tombstoned(dsn, t) for t in CAROL)
    assert kept(dsn, DAVE) == restored["kept"]
    assert fingerprint(dsn, "checkpoints", "thread_id = %s", (BOB,)) == restored["bob"]
    replayed = {r.predicate["replay_of"]: r for r in result.receipts}
    for kind, original in restored["originals"].items():
        v = verify_receipt(replayed[original.receipt_id].to_json(), [signer.public_key])
        assert v.statement["predicate"]["kind"] == kind
        assert v.statement["predicate"]["backend"]["kind"] == "postgres"


def test_pg_async_replay(restored: dict[str, Any], signer: Signer) -> None:
    dsn, archive = restored["dsn"], restored["archive"]

    async def main() -> Any:
        async with (
            AsyncPostgresStore.from_conn_string(dsn) as store,
            AsyncAttestingPostgresSaver.from_conn_string(
                dsn, signer=signer, store=store, archive=archive, check_erasures=archive
            ) as saver,
        ):
            with pytest.raises(ErasedDataRestoredError):
                await saver.setup()
            result = await saver.areplay_erasures(archive)
            await saver.setup()
            return result

    result = asyncio.run(main())
    assert result.ok and result.re_erased == 3
    assert rows(dsn, ALICE, *CAROL) == 0 and kept(dsn, DAVE) == restored["kept"]


def test_cli_replay_with_a_dsn(restored: dict[str, Any], signer: Signer, tmp_path: Path) -> None:
    """``receipt replay DSN --archive DIR --key K --verify-key PUB``: the same replay from
    the command line, against the pg_restore'd database."""
    dsn, archive = restored["dsn"], restored["archive"]
    key, pub = tmp_path / "k.pem", tmp_path / "pub.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    pub.write_bytes(signer.public_pem())
    common = [dsn, "--archive", str(archive), "--key", str(key), "--verify-key", str(pub)]
    files = sorted(p.name for p in archive.iterdir())

    dry = CliRunner().invoke(app, ["replay", *common, "--dry-run", "--json"])
    assert dry.exit_code == 0, (dry.stdout, dry.stderr)
    assert json.loads(dry.stdout)["reappeared"] == 3 and rows(dsn, ALICE) > 0
    assert sorted(p.name for p in archive.iterdir()) == files

    res = CliRunner().invoke(app, ["replay", *common])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert "3 re-erased" in res.stdout and "0 failed" in res.stdout
    assert rows(dsn, ALICE, *CAROL) == 0 and kept(dsn, DAVE) == restored["kept"]
    assert tombstoned(dsn, ALICE) and all(tombstoned(dsn, t) for t in CAROL)
    assert fingerprint(dsn, "checkpoints", "thread_id = %s", (BOB,)) == restored["bob"]
    new = [p for p in archive.iterdir() if p.name not in files]
    assert len(new) == 3
    replay_of = set()
    for p in new:
        v = verify_receipt(p.read_bytes(), [signer.public_key])
        assert v.statement["predicate"]["backend"]["kind"] == "postgres"
        replay_of.add(v.statement["predicate"]["replay_of"])
    assert replay_of == {r.receipt_id for r in restored["originals"].values()}

    again = CliRunner().invoke(app, ["replay", *common, "--json"])
    assert again.exit_code == 0, (again.stdout, again.stderr)
    doc = json.loads(again.stdout)
    assert (doc["re_erased"], doc["postdated"]) == (0, 3)
