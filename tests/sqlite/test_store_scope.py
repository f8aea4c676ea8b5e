"""The store scope of thread-scoped operations, and refusals that delete nothing (SQLite).

* one rule for every entry point: ``store_namespaces=`` if given, else the saver's
  ``namespaces_for(thread_id)`` (erase, delete, digest, history, prune, sweeps);
* namespaces a thread id is only *mapped* to are never erased without rows of the
  thread itself (``delete_thread("alice:typo-id")`` keeps alice's memory);
* a refused erasure deletes nothing anywhere: needles are checked before a store
  outside the database is swept.

Assertions read raw rows of the database files (and the store's own file) through
separate connections.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import RemoveMessage
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from erasure_receipts._engine import NeedlesFoundError
from test_history_graphs import CARD, CHAT_TURNS, NS, cfg, chat_graph, checkpoint_clock, human

ALICE = ("users", "alice")
BOB = ("users", "bob")


def user_of(thread_id: str) -> str:
    return thread_id.split(":")[0]


def by_user(thread_id: str) -> list[tuple[str, ...]]:
    """The README's mapping: a thread ``alice:<n>`` belongs to ``("users", "alice")``."""
    return [("users", user_of(thread_id))]


def raw_count(db: Path, table: str, where: str = "1", params: tuple[Any, ...] = ()) -> int:
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            return 0
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()
    return int(row[0])


def holding(db: Path, table: str, needle: str) -> int:
    """Rows of ``table`` whose raw bytes (any column) contain ``needle``."""
    with sqlite3.connect(db) as conn:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        cond = " OR ".join(f"instr(CAST({c} AS BLOB), ?) > 0" for c in cols)
        row = conn.execute(
            f"SELECT count(*) FROM {table} WHERE {cond}", [needle.encode()] * len(cols)
        ).fetchone()
    return int(row[0])


def thread_rows(db: Path) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3").fetchall()
                for t in ("checkpoints", "writes")]  # fmt: skip


def nothing_recorded(db: Path, archive: Path) -> bool:
    """No journal entry, no tombstone, no archived receipt."""
    return (
        raw_count(db, "erasure_journal") == 0
        and raw_count(db, "erasure_tombstones") == 0
        and not list(archive.glob("*.json"))
    )


@contextmanager
def external_store(kind: str, tmp_path: Path) -> Iterator[tuple[Any, Path | None]]:
    """A store that is not in the saver's database: a SqliteStore in another file, or
    an InMemoryStore; with the file whose raw rows hold its items (if any)."""
    if kind == "memory":
        yield InMemoryStore(), None
        return
    path = tmp_path / "memories.db"
    with SqliteStore.from_conn_string(str(path)) as store:
        store.setup()
        yield store, path


@contextmanager
def any_store(kind: str, db: Path, tmp_path: Path) -> Iterator[Any]:
    """``same-file``: a SqliteStore in the saver's file (erased in its transaction);
    otherwise an external store (swept through its API)."""
    if kind == "same-file":
        with SqliteStore.from_conn_string(str(db)) as store:
            store.setup()
            yield store
        return
    with external_store(kind, tmp_path) as (store, _):
        yield store


STORES = ["same-file", "sqlite-file", "memory"]


# -- a refused erasure deletes nothing anywhere ------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite-file", "memory"])
@pytest.mark.parametrize("explicit", [True, False], ids=["store_namespaces", "namespaces_for"])
def test_refused_history_erasure_keeps_the_external_store(
    tmp_path: Path, signer: Signer, kind: str, explicit: bool
) -> None:
    """The needle is still in the kept state: the erasure is refused before the store
    outside the database is swept, so its items, the checkpoints, the journal and the
    archive are all as before."""
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with (
        external_store(kind, tmp_path) as (store, store_file),
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive,
            namespaces_for=lambda t: [NS],
        ) as saver,
    ):  # fmt: skip
        graph = chat_graph(saver, store)
        for text in [*CHAT_TURNS, f"again, my card is {CARD}"]:
            graph.invoke(human(text), cfg("alice-chat"))
        store.put(NS, "profile", {"name": "alice"})
        before = thread_rows(db)
        items = sorted((i.key, i.value) for i in store.search(NS, limit=100))
        assert len(items) == 2
        if store_file is not None:
            assert raw_count(store_file, "store") == 2
        scope = {"store_namespaces": [NS]} if explicit else {}
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history("alice-chat", needles=[CARD], **scope)
        assert err.value.swept == {}
        assert "nothing was deleted" in err.value.message
        assert {loc["table"] for loc in err.value.locations} <= {"checkpoints", "writes"}
        assert sorted((i.key, i.value) for i in store.search(NS, limit=100)) == items
        if store_file is not None:
            assert raw_count(store_file, "store") == 2
        assert thread_rows(db) == before
        assert saver.last_receipt is None and saver.pending_erasures() == []
        assert nothing_recorded(db, archive)


def test_subject_needle_written_during_the_erasure_sweeps_nothing(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy written into the database after the subject's pre-check is found inside
    the transaction before the store is swept: the store item is still there."""
    from erasure_receipts._ops import subject as SubjectFlows  # internals

    store = InMemoryStore()
    email = "alice@example.com"
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver:
        graph = chat_graph(saver, store)
        graph.invoke(human("hello"), cfg("alice-1"))
        store.put(ALICE, "profile", {"email": email})
        checked = SubjectFlows.needles_outside

        def then_a_writer_copies_it(self: Any, request: Any) -> None:
            checked(self, request)  # the pre-check passes; a racing writer copies it now
            graph.invoke(human(f"ticket from {email}"), cfg("support-9"))

        monkeypatch.setattr(SubjectFlows, "needles_outside", then_a_writer_copies_it)
        with pytest.raises(NeedlesFoundError) as ei:
            saver.erase_subject("alice", threads=["alice-1"], store_namespaces=[ALICE],
                                needles=[email])  # fmt: skip
        assert ei.value.swept == {} and "nothing was deleted" in ei.value.message
        assert store.get(ALICE, "profile") is not None
        assert raw_count(db, "checkpoints", "thread_id = 'alice-1'") > 0
        assert raw_count(db, "erasure_journal") == 0


# -- a thread id with no rows never erases the namespaces it maps to ---------------------


@pytest.mark.parametrize("kind", STORES)
def test_delete_thread_of_an_unknown_id_keeps_the_users_memory(
    tmp_path: Path, signer: Signer, kind: str
) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with (
        any_store(kind, db, tmp_path) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        chat_graph(saver, store).invoke(human("hello"), cfg("alice:1"))
        store.put(ALICE, "memory", {"likes": "tea"})
        before = thread_rows(db)
        # LangGraph's contract: deleting an unknown thread is a silent no-op.
        assert saver.delete_thread("alice:typo-id") is None
        with pytest.raises(NothingToEraseError) as err:
            saver.erase_thread("alice:typo-id")
        assert "namespaces_for" in err.value.message
        with pytest.raises(NothingToEraseError):
            saver.erase_thread("alice:typo-id", allow_empty=True)
        # The preview measures what an erasure would: not the memory either.
        assert saver.digest_thread("alice:typo-id").leaves == 0
        assert saver.export_leaves("alice:typo-id") == []
        assert saver.digest_thread("alice:typo-id", [ALICE]).tables["store"].rows == 1
        assert store.get(ALICE, "memory") is not None
        if kind == "same-file":
            assert raw_count(db, "store", "prefix = 'users.alice'") == 1
        assert thread_rows(db) == before
        assert not saver.is_erased("alice:typo-id") and saver.last_receipt is None
        assert nothing_recorded(db, archive)
        # Named explicitly, the namespaces are erased on their own, as asked.
        r = saver.erase_thread("alice:typo-id", store_namespaces=[ALICE])
        assert r.predicate["pre_state"]["tables"]["store"]["rows"] == 1
        assert store.get(ALICE, "memory") is None
        assert thread_rows(db) == before  # alice:1 untouched


@pytest.mark.parametrize("kind", ["same-file", "memory"])
def test_deleting_an_erased_thread_again_keeps_newer_memory(
    tmp_path: Path, signer: Signer, kind: str
) -> None:
    """A retried delete_thread of an erased thread is a no-op: the memory the user
    has written since (from another thread) stays."""
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with (
        any_store(kind, db, tmp_path) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        graph = chat_graph(saver, store)
        graph.invoke(human("hello"), cfg("alice:1"))
        store.put(ALICE, "old", {"v": 1})
        saver.delete_thread("alice:1")
        assert store.get(ALICE, "old") is None and len(list(archive.glob("*.json"))) == 1
        graph.invoke(human("hello again"), cfg("alice:2"))
        store.put(ALICE, "new", {"v": 2})
        saver.delete_thread("alice:1")
        with pytest.raises(NothingToEraseError) as err:
            saver.erase_thread("alice:1")
        assert err.value.previous_receipt_id is not None
        assert store.get(ALICE, "new") is not None
        assert len(list(archive.glob("*.json"))) == 1


async def test_async_delete_thread_of_an_unknown_id_keeps_the_users_memory(
    tmp_path: Path, signer: Signer
) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    store = InMemoryStore()
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, store=store, archive=archive, namespaces_for=by_user
    ) as saver:
        await chat_graph(saver, store).ainvoke(human("hello"), cfg("alice:1"))
        await store.aput(ALICE, "memory", {"likes": "tea"})
        assert await saver.adelete_thread("alice:typo-id") is None
        with pytest.raises(NothingToEraseError):
            await saver.aerase_thread("alice:typo-id")
        assert await store.aget(ALICE, "memory") is not None
        assert not await saver.ais_erased("alice:typo-id")
        await saver.adelete_thread("alice:1")  # a real thread: erased with its memory
        assert await store.aget(ALICE, "memory") is None
    assert len(list(archive.glob("*.json"))) == 1
    assert raw_count(db, "checkpoints") == 0


# -- one rule for the store scope -------------------------------------------------------


@pytest.mark.parametrize("kind", STORES)
def test_erase_digest_and_export_default_to_namespaces_for(
    tmp_path: Path, signer: Signer, kind: str
) -> None:
    db = tmp_path / "app.db"
    with (
        any_store(kind, db, tmp_path) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        graph = chat_graph(saver, store)
        for t in ("alice:1", "bob:1"):
            graph.invoke(human("hello"), cfg(t))
        store.put(ALICE, "memory", {"likes": "tea"})
        store.put(BOB, "memory", {"likes": "coffee"})
        preview = saver.digest_thread("alice:1")
        assert preview.tables["store"].rows == 1
        leaves = saver.export_leaves("alice:1")
        assert len(leaves) == preview.leaves
        receipt = saver.erase_thread("alice:1")
        assert receipt.pre_digest == preview.digest
        assert receipt.predicate["scope"]["store_namespaces"] == [list(ALICE)]
        assert store.get(ALICE, "memory") is None
        assert store.get(BOB, "memory") is not None
        # An explicit scope overrides the mapping, [] included: bob's memory stays.
        r = saver.erase_thread("bob:1", store_namespaces=[])
        assert r.predicate["scope"]["store_namespaces"] == []
        assert store.get(BOB, "memory") is not None
        assert raw_count(db, "checkpoints") == 0


@pytest.mark.parametrize("kind", ["same-file", "memory"])
def test_sweeps_and_prune_cover_each_threads_namespaces(
    tmp_path: Path, signer: Signer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """erase_idle_threads erases each idle thread's namespaces_for memory (an active
    thread's stays); prune_histories and prune cover the same scope."""
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    users = ("alice", "bob", "carol", "dave")
    with (
        any_store(kind, db, tmp_path) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        graph = chat_graph(saver, store)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=40)):
            for u in ("alice", "bob"):
                graph.invoke(human("an old conversation"), cfg(f"{u}:1"))
                graph.invoke(human("and more"), cfg(f"{u}:1"))
        for u in ("carol", "dave"):
            graph.invoke(human("a recent one"), cfg(f"{u}:1"))
            graph.invoke(human("and more"), cfg(f"{u}:1"))
        for u in users:
            store.put(("users", u), "memory", {"user": u})
        dry = saver.prune_histories(timedelta(days=30), dry_run=True)
        assert dry.threads == 2
        pruned = saver.prune_histories(timedelta(days=30), limit=1)
        assert pruned.threads == 1 and pruned.ok
        assert store.get(("users", "alice"), "memory") is None
        assert store.get(("users", "bob"), "memory") is not None
        result = saver.erase_idle_threads(timedelta(days=30))
        assert result.threads == 2 and result.ok
        assert store.get(("users", "bob"), "memory") is None
        assert store.get(("users", "carol"), "memory") is not None
        (receipt,) = saver.prune(["carol:1"])
        assert receipt.predicate["scope"]["store_namespaces"] == [["users", "carol"]]
        assert store.get(("users", "carol"), "memory") is None
        assert store.get(("users", "dave"), "memory") is not None
        assert saver.prune(["dave:1"], strategy="delete")[0].predicate["kind"] == "thread"
        assert store.get(("users", "dave"), "memory") is None
    scopes = sorted(
        (v.statement["predicate"]["kind"], v.statement["predicate"]["scope"]["thread_id"],
         v.statement["predicate"]["scope"]["store_namespaces"])
        for v in (verify_receipt(p.read_bytes(), [signer.public_key])
                  for p in archive.glob("*.json"))
    )  # fmt: skip
    assert scopes == [
        ("history", "alice:1", [["users", "alice"]]),
        ("history", "carol:1", [["users", "carol"]]),
        ("thread", "alice:1", [["users", "alice"]]),  # its memory was already gone: 0 rows
        ("thread", "bob:1", [["users", "bob"]]),
        ("thread", "dave:1", [["users", "dave"]]),
    ]


def test_history_recipe_leaves_no_copy_in_the_store(tmp_path: Path, signer: Signer) -> None:
    """The README's recipe, on the README's saver (namespaces_for, the store in the same
    file): the card the chat node saved to the user's memory is gone too."""
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, namespaces_for=lambda t: [NS]
        ) as saver,
    ):  # fmt: skip
        store.setup()
        graph = chat_graph(saver, store)
        for text in ["hi", f"my card is {CARD}", "thanks"]:
            graph.invoke(human(text), cfg("alice-chat"))
        assert holding(db, "store", CARD) == 1
        state = graph.get_state(cfg("alice-chat")).values["messages"]
        graph.update_state(
            cfg("alice-chat"),
            {"messages": [RemoveMessage(id=m.id) for m in state if CARD in str(m.content)]},
        )
        receipt = saver.erase_history("alice-chat", needles=[CARD])
        assert receipt.predicate["scope"]["store_namespaces"] == [list(NS)]
        for table in ("checkpoints", "writes", "store"):
            assert holding(db, table, CARD) == 0, table
        out = graph.invoke(human("bye"), cfg("alice-chat"))
        assert [m.content for m in out["messages"]][-2:] == ["bye", "noted: bye"]


def test_an_authorization_binds_the_mapped_store_scope(tmp_path: Path, signer: Signer) -> None:
    """Without store_namespaces= the authorized scope must name what namespaces_for
    gives: an approval of the thread alone is refused before anything is deleted."""
    from erasure_receipts import AuthorizationError, RequestContext, authorize

    approver = Signer.from_seed(bytes(range(1, 33)))
    db = tmp_path / "app.db"
    store = InMemoryStore()
    ctx = RequestContext("DSR-1", "gdpr-art17-1b")

    def approval(namespaces: list[list[str]]) -> Any:
        scope = {"kind": "thread", "thread_id": "alice:1", "store_namespaces": namespaces}
        return authorize(approver, request_id="DSR-1", scope=scope,
                         not_after=datetime.now(UTC) + timedelta(days=1))  # fmt: skip

    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, store=store, namespaces_for=by_user
    ) as saver:
        chat_graph(saver, store).invoke(human("hello"), cfg("alice:1"))
        store.put(ALICE, "memory", {"likes": "tea"})
        before = thread_rows(db)
        with pytest.raises(AuthorizationError):
            saver.erase_thread("alice:1", request=ctx, authorization=approval([]))
        assert thread_rows(db) == before and store.get(ALICE, "memory") is not None
        receipt = saver.erase_thread("alice:1", request=ctx, authorization=approval([list(ALICE)]))
        assert receipt.predicate["authorization"] is not None
        assert store.get(ALICE, "memory") is None


@pytest.mark.parametrize("kind", ["same-file", "memory"])
def test_no_history_to_remove_keeps_the_mapped_memory(
    tmp_path: Path, signer: Signer, kind: str
) -> None:
    """A history erasure (or prune) of a thread with nothing but its latest checkpoint
    removes nothing of the thread, so it erases nothing of the store it maps to."""
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with (
        any_store(kind, db, tmp_path) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive, namespaces_for=by_user
        ) as saver,
    ):  # fmt: skip
        chat_graph(saver, store).invoke(human("hello"), cfg("alice:1"))
        saver.erase_history("alice:1")  # now only its latest checkpoint is left
        store.put(ALICE, "memory", {"likes": "tea"})
        before = thread_rows(db)
        with pytest.raises(NothingToEraseError) as err:
            saver.erase_history("alice:1")
        assert "no history to remove" in err.value.message
        assert saver.prune(["alice:1"]) == []
        assert store.get(ALICE, "memory") is not None
        assert thread_rows(db) == before
        assert len(list(archive.glob("*.json"))) == 1
