"""The store scope of thread-scoped operations on the PostgreSQL savers (real server):
``namespaces_for`` the default everywhere, never applied to a thread id without rows,
and a refused erasure that deletes nothing anywhere (see tests/sqlite/test_store_scope.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    NothingToEraseError,
    Signer,
)
from erasure_receipts._engine import NeedlesFoundError
from pg_helpers import count, fingerprint
from pg_server import fresh_database
from test_history_graphs import CARD, CHAT_TURNS, NS, cfg, chat_graph, checkpoint_clock, human
from test_store_scope import ALICE, BOB, by_user

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def thread_rows(dsn: str) -> list[str]:
    return [fingerprint(dsn, t, "true", ()) for t in TABLES]


def nothing_recorded(dsn: str) -> bool:
    return count(dsn, "erasure_journal", "true", ()) == 0 and (
        count(dsn, "erasure_tombstones", "true", ()) == 0
    )


@contextmanager
def other_database(pg_dsn: str) -> Iterator[str]:
    """A second database on the server: a store there is outside the saver's."""
    with fresh_database(pg_dsn, "s") as dsn:
        yield dsn


@contextmanager
def store_of(kind: str, pg_db: str, pg_dsn: str) -> Iterator[tuple[Any, str | None]]:
    """``same-db``: a PostgresStore in the saver's database (erased in its transaction);
    ``other-db``: one in another database, ``memory``: an InMemoryStore (both swept).
    With the DSN whose ``store`` table holds the items, if any."""
    if kind == "memory":
        yield InMemoryStore(), None
        return
    with (
        other_database(pg_dsn) if kind == "other-db" else _same(pg_db) as dsn,
        PostgresStore.from_conn_string(dsn) as store,
    ):
        store.setup()
        yield store, dsn


@contextmanager
def _same(dsn: str) -> Iterator[str]:
    yield dsn


@pytest.mark.parametrize("kind", ["other-db", "memory"])
def test_pg_refused_history_erasure_keeps_the_external_store(
    pg_db: str, pg_dsn: str, signer: Signer, kind: str
) -> None:
    with (
        store_of(kind, pg_db, pg_dsn) as (store, store_dsn),
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        saver.setup()
        graph = chat_graph(saver, store)
        for text in [*CHAT_TURNS, f"again, my card is {CARD}"]:
            graph.invoke(human(text), cfg("alice-chat"))
        store.put(NS, "profile", {"name": "alice"})
        before = thread_rows(pg_db)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history("alice-chat", needles=[CARD], store_namespaces=[NS])
        assert err.value.swept == {} and "nothing was deleted" in err.value.message
        assert len(store.search(NS, limit=100)) == 2
        if store_dsn is not None:
            assert count(store_dsn, "store", "prefix = %s", (".".join(NS),)) == 2
        assert thread_rows(pg_db) == before
        assert nothing_recorded(pg_db) and saver.last_receipt is None


async def test_pg_async_refused_history_erasure_keeps_the_store(pg_db: str, signer: Signer) -> None:
    store = InMemoryStore()
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, store=store, namespaces_for=lambda t: [NS]
    ) as saver:
        await saver.setup()
        graph = chat_graph(saver, store)
        for text in [*CHAT_TURNS, f"again, my card is {CARD}"]:
            await graph.ainvoke(human(text), cfg("alice-chat"))
        before = thread_rows(pg_db)
        with pytest.raises(NeedlesFoundError) as err:
            await saver.aerase_history("alice-chat", needles=[CARD], store_namespaces=[NS])
        assert err.value.swept == {}
        assert await store.aget(NS, "card") is not None
        assert thread_rows(pg_db) == before and nothing_recorded(pg_db)


@pytest.mark.parametrize("kind", ["same-db", "memory"])
def test_pg_delete_thread_of_an_unknown_id_keeps_the_users_memory(
    pg_db: str, pg_dsn: str, signer: Signer, kind: str
) -> None:
    with (
        store_of(kind, pg_db, pg_dsn) as (store, store_dsn),
        AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, store=store, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        saver.setup()
        chat_graph(saver, store).invoke(human("hello"), cfg("alice:1"))
        store.put(ALICE, "memory", {"likes": "tea"})
        before = thread_rows(pg_db)
        assert saver.delete_thread("alice:typo-id") is None
        with pytest.raises(NothingToEraseError) as err:
            saver.erase_thread("alice:typo-id")
        assert "namespaces_for" in err.value.message
        assert store.get(ALICE, "memory") is not None
        if store_dsn is not None:
            assert count(store_dsn, "store", "prefix = 'users.alice'", ()) == 1
        assert thread_rows(pg_db) == before and nothing_recorded(pg_db)
        assert not saver.is_erased("alice:typo-id") and saver.last_receipt is None
        saver.delete_thread("alice:1")
        assert store.get(ALICE, "memory") is None and saver.is_erased("alice:1")


async def test_pg_async_delete_thread_of_an_unknown_id_keeps_the_users_memory(
    pg_db: str, signer: Signer
) -> None:
    store = InMemoryStore()
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, store=store, namespaces_for=by_user
    ) as saver:
        await saver.setup()
        await chat_graph(saver, store).ainvoke(human("hello"), cfg("alice:1"))
        await store.aput(ALICE, "memory", {"likes": "tea"})
        assert await saver.adelete_thread("alice:typo-id") is None
        with pytest.raises(NothingToEraseError):
            await saver.aerase_thread("alice:typo-id")
        assert await store.aget(ALICE, "memory") is not None
        assert nothing_recorded(pg_db)


@pytest.mark.parametrize("kind", ["same-db", "memory"])
def test_pg_every_entry_point_defaults_to_namespaces_for(
    pg_db: str, pg_dsn: str, signer: Signer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        store_of(kind, pg_db, pg_dsn) as (store, _),
        AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, store=store, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        saver.setup()
        graph = chat_graph(saver, store)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=40)):
            graph.invoke(human("an old conversation"), cfg("bob:1"))
        for text in ("hello", "and more"):
            graph.invoke(human(text), cfg("alice:1"))
            graph.invoke(human(text), cfg("carol:1"))
        for u in ("alice", "bob", "carol"):
            store.put(("users", u), "memory", {"user": u})
        preview = saver.digest_thread("alice:1")
        receipt = saver.erase_thread("alice:1")
        assert receipt.pre_digest == preview.digest
        assert receipt.predicate["scope"]["store_namespaces"] == [list(ALICE)]
        assert store.get(ALICE, "memory") is None
        result = saver.erase_idle_threads(timedelta(days=30))
        assert result.ok and result.threads == 1
        assert store.get(BOB, "memory") is None
        history = saver.erase_history("carol:1")
        assert history.predicate["scope"]["store_namespaces"] == [["users", "carol"]]
        assert store.get(("users", "carol"), "memory") is None
        assert count(pg_db, "checkpoints", "thread_id = 'carol:1'", ()) == 1


async def test_pg_async_entry_points_default_to_namespaces_for(
    pg_db: str, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InMemoryStore()
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, store=store, namespaces_for=by_user
    ) as saver:
        await saver.setup()
        graph = chat_graph(saver, store)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=40)):
            for text in ("an old conversation", "and more"):
                await graph.ainvoke(human(text), cfg("bob:1"))
        for text in ("hello", "and more"):
            await graph.ainvoke(human(text), cfg("alice:1"))
        for u in ("alice", "bob"):
            await store.aput(("users", u), "memory", {"user": u})
        preview = await saver.adigest_thread("alice:1")
        history = await saver.aerase_history("alice:1")
        assert history.predicate["scope"]["store_namespaces"] == [list(ALICE)]
        assert preview.tables["store"].rows == 1
        assert await store.aget(ALICE, "memory") is None
        pruned = await saver.aprune_histories(timedelta(days=30))
        assert pruned.ok and pruned.threads == 1
        assert await store.aget(BOB, "memory") is None
        await store.aput(BOB, "memory", {"user": "bob"})
        erased = await saver.aerase_idle_threads(timedelta(days=30))
        assert erased.ok and erased.threads == 1
        assert await store.aget(BOB, "memory") is None
        (r,) = await saver.aprune(["alice:1"], strategy="delete")
        assert r.predicate["scope"]["store_namespaces"] == [list(ALICE)]
