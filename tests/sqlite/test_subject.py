"""erase_subject on SQLite (sync and async): one receipt for a data subject.

A real LangGraph graph writes a subject's threads (``user_id`` in ``configurable``, so in
every checkpoint's metadata), store memories under three namespace schemes, and a
support escalation that quotes the subject's email in a thread without ``user_id``.
Assertions are on raw rows read through separate connections.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    NothingToEraseError,
    Signer,
    ThreadErasedError,
    verify_receipt,
)
from erasure_receipts._engine import NeedlesFoundError
from scenario import independent_digest

SUBJECT = "alice"
EMAIL = "alice.zoe@example.com"
NAME = "Zoë Åberg"
THREADS = [f"alice-chat-{i}" for i in range(1, 6)]
SUPPORT = "support-escalation-7781"
OTHERS = ["bob-chat-1", "bob-chat-2"]
NAMESPACES = [("users", SUBJECT), ("memories", SUBJECT, "prefs"), ("crm", "contacts", SUBJECT)]
BOB_NAMESPACES = [("users", "bob"), ("memories", "bob", "prefs"), ("crm", "contacts", "bob")]


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def reply(state: State, config: RunnableConfig) -> dict[str, Any]:
    """Answers, and keeps memories about the user under three namespace schemes."""
    last = state["messages"][-1]
    uid = config["configurable"].get("user_id")
    if uid is not None:
        store = get_store()
        email = f"{uid}.zoe@example.com" if uid == SUBJECT else f"{uid}@example.com"
        store.put(
            ("users", uid), "profile", {"email": email, "name": NAME if uid == SUBJECT else uid}
        )
        store.put(("memories", uid, "prefs"), "tone", {"likes": f"short answers ({uid})"})
        store.put(("crm", "contacts", uid), "contact", {"email": email})
    return {"messages": [AIMessage(content=f"noted: {last.content}")]}


def build(saver: Any, store: BaseStore) -> Any:
    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver, store=store)


def turns(subject: str) -> list[str]:
    email = EMAIL if subject == SUBJECT else f"{subject}@example.com"
    return [f"hi, I am {subject} <{email}>", "what's the weather?", "book a table for 2"]


def populate(graph: Any) -> None:
    """5 threads of alice, 2 of bob (user_id in configurable), 1 support thread."""
    for t in THREADS:
        for text in turns(SUBJECT):
            graph.invoke({"messages": [HumanMessage(content=text)]}, cfg(t, SUBJECT))
    for t in OTHERS:
        for text in turns("bob"):
            graph.invoke({"messages": [HumanMessage(content=text)]}, cfg(t, "bob"))
    escalation = f"ESCALATION: customer {EMAIL} cannot log in; assigned to tier 2"
    graph.invoke({"messages": [HumanMessage(content=escalation)]}, cfg(SUPPORT, None))


def cfg(thread: str, user: str | None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if user is not None:
        c["user_id"] = user
    return {"configurable": c}


def rows(db: Path, table: str, where: str = "1", params: tuple[Any, ...] = ()) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            f"SELECT * FROM {table} WHERE {where} ORDER BY 1, 2, 3", params
        ).fetchall()


def in_list(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def ns_where(namespaces: list[tuple[str, ...]]) -> str:
    return " OR ".join(f"prefix = '{'.'.join(ns)}'" for ns in namespaces)


def others_snapshot(db: Path) -> dict[str, list[Any]]:
    """Every row of the other subject (threads and store), as stored."""
    return {
        "checkpoints": rows(db, "checkpoints", in_list("thread_id", OTHERS)),
        "writes": rows(db, "writes", in_list("thread_id", OTHERS)),
        "store": rows(db, "store", ns_where(BOB_NAMESPACES)),
    }


def alice_rows(db: Path, threads: list[str]) -> int:
    n = len(rows(db, "checkpoints", in_list("thread_id", threads)))
    n += len(rows(db, "writes", in_list("thread_id", threads)))
    return n + len(rows(db, "store", ns_where(NAMESPACES)))


@pytest.fixture
def app_db(tmp_path: Path, signer: Signer) -> Path:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        populate(build(saver, store))
    return db


@pytest.fixture
def saver(app_db: Path, signer: Signer, tmp_path: Path) -> Iterator[AttestingSqliteSaver]:
    with (
        SqliteStore.from_conn_string(str(app_db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(app_db), signer=signer, store=store, archive=tmp_path / "receipts"
        ) as s,
    ):
        yield s


def test_discovery_finds_the_five_user_threads_not_the_escalation(
    saver: AttestingSqliteSaver,
) -> None:
    preview = saver.digest_subject(SUBJECT, metadata_key="user_id", store_namespaces=NAMESPACES)
    assert list(preview.threads) == THREADS
    assert set(preview.units) == {f"thread:{t}" for t in THREADS} | {"store"}
    assert preview.units["store"].tables["store"].rows == 3  # one item per namespace scheme
    assert saver.digest_subject("bob", metadata_key="user_id").threads == tuple(OTHERS)


def test_needle_refuses_and_names_the_support_thread_then_one_receipt(
    saver: AttestingSqliteSaver, app_db: Path, signer: Signer
) -> None:
    before_others = others_snapshot(app_db)
    before_all = {t: rows(app_db, t) for t in ("checkpoints", "writes", "store")}
    per_thread = {
        t: independent_digest(
            app_db, {"checkpoints": ("thread_id = ?", (t,)), "writes": ("thread_id = ?", (t,))}
        )
        for t in [*THREADS, SUPPORT]
    }

    with pytest.raises(NeedlesFoundError) as refused:
        saver.erase_subject(
            SUBJECT, metadata_key="user_id", store_namespaces=NAMESPACES, needles=[EMAIL]
        )
    assert SUPPORT in refused.value.message
    assert {loc["thread_id"] for loc in refused.value.locations if "thread_id" in loc} == {SUPPORT}
    assert EMAIL not in refused.value.message  # locations, never the value
    # Refused before commit: every row is still there, no tombstone, no journal entry.
    assert {t: rows(app_db, t) for t in before_all} == before_all
    assert rows(app_db, "erasure_tombstones") == [] and rows(app_db, "erasure_journal") == []

    receipt = saver.erase_subject(
        SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES,
        needles=[EMAIL],
    )  # fmt: skip
    v = verify_receipt(receipt.to_json(), [signer.public_key])
    p = receipt.predicate
    assert v.receipt_id == receipt.receipt_id and p["kind"] == "subject"
    assert p["scope"]["subject"] == SUBJECT
    assert p["scope"]["threads"] == sorted([*THREADS, SUPPORT])
    assert p["scope"]["discovery"] == {"metadata_key": "user_id"}
    assert receipt.statement["subject"][0]["name"] == f"langgraph-subject:{SUBJECT}"
    units = {u["name"]: u for u in p["units"]}
    assert set(units) == {f"thread:{t}" for t in [*THREADS, SUPPORT]} | {"store"}
    for t, digest in per_thread.items():  # each thread's own digest, recomputed from rows
        assert units[f"thread:{t}"]["digest"]["sha256"] == digest
        assert units[f"thread:{t}"]["leaves"] > 0
    assert len({u["digest"]["sha256"] for u in p["units"]}) == 7
    assert units["store"]["tables"]["store"]["rows"] == 3
    assert p["needles"]["searched"] == "database" and p["needles"]["occurrences_after"] == 0
    assert EMAIL.encode() not in receipt.to_json()
    # Raw rows 0, the needle nowhere, the other subject byte-identical.
    assert alice_rows(app_db, [*THREADS, SUPPORT]) == 0
    assert saver.locate([EMAIL]) == []
    assert others_snapshot(app_db) == before_others
    assert len(others_snapshot(app_db)["checkpoints"]) > 0
    # Every erased thread is tombstoned; the archive has the receipt; the journal too.
    assert sorted(r[0] for r in rows(app_db, "erasure_tombstones")) == sorted([*THREADS, SUPPORT])
    assert (saver.archive / f"{receipt.receipt_id}.json").read_bytes() == receipt.to_json()  # type: ignore[operator]
    assert [r.receipt_id for r in saver.journal_receipts()] == [receipt.receipt_id]
    assert saver.last_receipt == receipt


def test_late_write_to_an_erased_thread_is_refused(
    saver: AttestingSqliteSaver, app_db: Path
) -> None:
    saver.tombstone_policy = "refuse_all"  # every write refused until reopen_thread()
    saver.erase_subject(SUBJECT, metadata_key="user_id", store_namespaces=NAMESPACES)
    graph = build(saver, saver.store)  # type: ignore[arg-type]
    # Refused by the store's tombstone (the node writes memory first) or the thread's.
    with pytest.raises((ThreadErasedError, sqlite3.IntegrityError), match="erased"):
        graph.invoke({"messages": [HumanMessage(content="back again")]}, cfg(THREADS[0], SUBJECT))
    # A plain SqliteSaver (another process, no library code) is refused by the trigger.
    with sqlite3.connect(app_db) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id) VALUES (?, '', 'x')",
            (THREADS[1],),
        )


def fork(db: Path, source: str, target: str) -> None:
    """``copy_thread`` as LangGraph defines it (every checkpoint and write, metadata
    included), done with SQL: the SQLite saver has no ``copy_thread``."""
    with sqlite3.connect(db) as conn:
        for table in ("checkpoints", "writes"):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            rest = ", ".join(c for c in cols if c != "thread_id")
            conn.execute(
                f"INSERT INTO {table} (thread_id, {rest}) SELECT ?, {rest} FROM {table} "
                "WHERE thread_id = ?",
                (target, source),
            )


def test_a_copy_thread_fork_is_discovered(
    saver: AttestingSqliteSaver, app_db: Path, signer: Signer
) -> None:
    fork(app_db, THREADS[0], "alice-fork-what-if")
    receipt = saver.erase_subject(SUBJECT, metadata_key="user_id")
    assert "alice-fork-what-if" in receipt.predicate["scope"]["threads"]
    units = {u["name"]: u for u in receipt.predicate["units"]}
    # The fork holds the same rows under another thread id: same counts, own digest.
    assert units["thread:alice-fork-what-if"]["leaves"] == units[f"thread:{THREADS[0]}"]["leaves"]
    assert alice_rows(app_db, [*THREADS, "alice-fork-what-if"]) == len(
        rows(app_db, "store", ns_where(NAMESPACES))
    )
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_thread_created_while_the_erasure_starts_is_found_under_the_lock(
    saver: AttestingSqliteSaver, app_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first search misses a thread committed just before the transaction; the
    search under the write lock finds it: rolled back, restarted, erased and listed."""
    from erasure_receipts._ops import subject as subject_ops  # internals

    original = subject_ops.subject_request
    calls: list[int] = []

    def late(self: Any, handle: Any, spec: Any) -> Any:
        request = original(self, handle, spec)
        if not calls:  # after the first discovery, another worker forks a thread
            fork(app_db, THREADS[0], "alice-late")
        calls.append(1)
        return request

    monkeypatch.setattr(subject_ops, "subject_request", late)
    receipt = saver.erase_subject(SUBJECT, metadata_key="user_id")
    assert len(calls) == 2
    assert "alice-late" in receipt.predicate["scope"]["threads"]
    assert rows(app_db, "checkpoints", "thread_id = 'alice-late'") == []
    assert len(rows(app_db, "erasure_journal")) == 1  # the first attempt left nothing


def test_explicit_threads_only_and_empty_scopes(
    saver: AttestingSqliteSaver, signer: Signer
) -> None:
    r = saver.erase_subject(SUBJECT, threads=[THREADS[0], THREADS[1]])
    assert r.predicate["scope"]["discovery"] is None
    assert r.predicate["scope"]["threads"] == THREADS[:2]
    assert [u["name"] for u in r.predicate["units"]] == [f"thread:{t}" for t in THREADS[:2]]
    with pytest.raises(NothingToEraseError, match="hold no rows"):
        saver.erase_subject(SUBJECT, threads=[THREADS[0]])
    empty = saver.erase_subject(SUBJECT, threads=[THREADS[0]], allow_empty=True)
    assert empty.predicate["pre_state"]["leaves"] == 0
    verify_receipt(empty.to_json(), [signer.public_key])
    with pytest.raises(NothingToEraseError, match="no checkpoint has metadata"):
        saver.erase_subject("nobody", metadata_key="user_id")
    with pytest.raises(ConfigurationError, match="name the subject's threads"):
        saver.erase_subject(SUBJECT)
    with pytest.raises(TypeError):
        saver.erase_subject(SUBJECT, threads=THREADS[2])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="commitment_key"):
        saver.erase_subject(SUBJECT, threads=[THREADS[2]], privacy="commitments")


def test_store_outside_the_database_is_searched_through_its_api(
    app_db: Path, signer: Signer
) -> None:
    """A store in another place (here InMemoryStore): swept through the API, and a
    database-wide needle search covers it too, refusing before the irreversible sweep."""
    with sqlite3.connect(app_db) as conn:  # this application keeps its memories elsewhere
        conn.execute("DELETE FROM store")
    store = InMemoryStore()
    store.put(("users", SUBJECT), "profile", {"email": EMAIL})
    store.put(("audit", "2024"), "entry-9", {"note": f"login by {EMAIL}"})
    with AttestingSqliteSaver.from_conn_string(str(app_db), signer=signer, store=store) as s:
        with pytest.raises(NeedlesFoundError) as refused:
            s.erase_subject(
                SUBJECT, metadata_key="user_id", threads=[SUPPORT],
                store_namespaces=[("users", SUBJECT)], needles=[EMAIL],
            )  # fmt: skip
        where = {(loc.get("prefix"), loc.get("via")) for loc in refused.value.locations}
        assert ("audit.2024", "store_api") in where
        assert store.get(("users", SUBJECT), "profile") is not None  # not swept
        store.delete(("audit", "2024"), "entry-9")
        r = s.erase_subject(
            SUBJECT, metadata_key="user_id", threads=[SUPPORT],
            store_namespaces=[("users", SUBJECT)], needles=[EMAIL],
        )  # fmt: skip
    assert r.predicate["methods"]["store"] == "sweep"
    assert store.get(("users", SUBJECT), "profile") is None
    verify_receipt(r.to_json(), [signer.public_key])


def test_async_saver_same_flow(app_db: Path, signer: Signer, tmp_path: Path) -> None:
    before_others = others_snapshot(app_db)

    async def main() -> Any:
        async with (
            AsyncSqliteStore.from_conn_string(str(app_db)) as store,
            AsyncAttestingSqliteSaver.from_conn_string(
                str(app_db), signer=signer, store=store
            ) as s,
        ):
            preview = await s.adigest_subject(
                SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES
            )
            with pytest.raises(NeedlesFoundError):
                await s.aerase_subject(SUBJECT, metadata_key="user_id", needles=[EMAIL],
                                       store_namespaces=NAMESPACES)  # fmt: skip
            found = await s.alocate([EMAIL])
            r = await s.aerase_subject(
                SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES,
                needles=[EMAIL],
            )  # fmt: skip
            assert s.last_receipt == r
            return (
                preview,
                found,
                r,
                await s.alocate([EMAIL]),
                await s.apurge_journal(__import__("datetime").timedelta(0)),
            )

    preview, found, r, after, purged = asyncio.run(main())
    assert {loc.thread_id for loc in found if loc.thread_id} == {*THREADS, SUPPORT}
    assert r.predicate["pre_state"]["digest"]["sha256"] == preview.digest
    assert r.predicate["scope"]["threads"] == sorted([*THREADS, SUPPORT])
    verify_receipt(r.to_json(), [signer.public_key])
    assert after == [] and purged == 1
    assert others_snapshot(app_db) == before_others
    assert alice_rows(app_db, [*THREADS, SUPPORT]) == 0


def test_preview_equals_receipt_digest(saver: AttestingSqliteSaver) -> None:
    preview = saver.digest_subject(
        SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES
    )
    r = saver.erase_subject(
        SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES
    )
    assert r.predicate["pre_state"]["digest"]["sha256"] == preview.digest
    assert {u["name"]: u["digest"]["sha256"] for u in r.predicate["units"]} == {
        name: d.digest for name, d in preview.units.items()
    }
    assert preview.leaves == r.predicate["pre_state"]["leaves"]


def test_journal_entry_and_purge(saver: AttestingSqliteSaver, app_db: Path) -> None:
    from datetime import timedelta

    erased = saver.erase_subject(SUBJECT, metadata_key="user_id")
    [(thread_id, entry, receipt)] = [(r[1], r[3], r[6]) for r in rows(app_db, "erasure_journal")]
    assert thread_id == SUBJECT and json.loads(entry)["threads"] == THREADS
    assert json.loads(receipt)["statement"]["predicate"]["receipt_id"] == erased.receipt_id
    assert saver.purge_journal(timedelta(hours=1)) == 0  # younger than an hour
    assert saver.purge_journal(timedelta(0)) == 1
    assert rows(app_db, "erasure_journal") == [] and saver.journal_receipts() == []
    assert len(rows(app_db, "erasure_tombstones")) == 5  # tombstones stay
    with pytest.raises(ConfigurationError):
        saver.purge_journal(timedelta(seconds=-1))
