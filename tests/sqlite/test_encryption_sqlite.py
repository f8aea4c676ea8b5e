"""Per-subject encryption on SQLite (sync and async), through real LangGraph graphs.

Every checkpoint and pending write is AES-256-GCM under the thread's subject key with
the row's identity as associated data. Assertions are on the raw database bytes and
rows read through separate connections: no marker in any byte of the data database's
files, a ciphertext moved to another row fails, a plaintext row is refused.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    CiphertextRejectedError,
    ConfigurationError,
    Encryption,
    KeyStore,
    LocalKeyWrapper,
    PlaintextRowError,
    Signer,
)
from erasure_receipts.shredding import SEALED_TYPE

MARKER = "zebra-marker-7f3c"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    note: str


def reply(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"noted: {last.content}")], "note": f"n {last.content}"}


def build(saver: Any) -> Any:
    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def cfg(thread: str, user: str | None) -> Any:
    c: dict[str, Any] = {"thread_id": thread}
    if user is not None:
        c["user_id"] = user
    return {"configurable": c}


def raw_bytes(db: Path) -> bytes:
    out = b""
    for suffix in ("", "-wal", "-journal", "-shm"):
        p = Path(str(db) + suffix)
        if p.exists():
            out += p.read_bytes()
    return out


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    kek = LocalKeyWrapper.generate(tmp_path / "master.key")
    return KeyStore(tmp_path / "keys.sqlite", kek)


def run_graph(saver: AttestingSqliteSaver) -> Any:
    graph = build(saver)
    for thread, user in (
        ("alice-1", "alice"),
        ("alice-2", "alice"),
        ("bob-1", "bob"),
        ("anon-1", None),
    ):
        for turn in ("hello", f"my secret is {MARKER} ({thread})"):
            graph.invoke({"messages": [HumanMessage(content=turn)]}, cfg(thread, user))
    return graph


def test_graph_rows_are_encrypted_and_read_back(
    tmp_path: Path, signer: Signer, keys: KeyStore
) -> None:
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
    graph = run_graph(saver)

    # LangGraph works as is: state, history, time travel.
    state = graph.get_state(cfg("alice-1", "alice"))
    assert MARKER in state.values["messages"][-2].content
    history = list(graph.get_state_history(cfg("alice-1", "alice")))
    assert len(history) >= 4
    older = history[2]
    assert graph.get_state(older.config).values["messages"]
    forked = graph.invoke({"messages": [HumanMessage(content="again")]}, older.config)
    assert forked["messages"][-1].content == "noted: again"

    # Raw rows: every value sealed; no marker in any byte of the data database's files.
    raw = sqlite3.connect(db)
    types = {t for (t,) in raw.execute("SELECT type FROM checkpoints")}
    types |= {t for (t,) in raw.execute("SELECT type FROM writes")}
    assert types == {SEALED_TYPE}
    assert raw.execute("SELECT count(*) FROM writes").fetchone()[0] > 0
    raw.close()
    conn.commit()
    assert MARKER.encode() not in raw_bytes(db)
    assert b"my secret" not in raw_bytes(db)

    # One key per subject, one for the thread without a subject; threads bound to them.
    assert keys.threads_of("subject:alice") == ["alice-1", "alice-2"]
    assert keys.threads_of("thread:anon-1") == ["anon-1"]
    # A thread stays under its first key: written as another subject, it is refused.
    with pytest.raises(ConfigurationError, match="alice"):
        graph.invoke({"messages": [HumanMessage(content="x")]}, cfg("alice-1", "mallory"))
    conn.close()


def test_a_ciphertext_moved_to_another_row_fails(
    tmp_path: Path, signer: Signer, keys: KeyStore
) -> None:
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
    run_graph(saver)
    raw = sqlite3.connect(db)
    # alice-1's latest checkpoint copied over alice-2's latest (same key, other row).
    (src,) = raw.execute(
        "SELECT checkpoint FROM checkpoints WHERE thread_id='alice-1' ORDER BY checkpoint_id DESC"
    ).fetchone()
    (dst,) = raw.execute(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id='alice-2' "
        "ORDER BY checkpoint_id DESC"
    ).fetchone()
    raw.execute(
        "UPDATE checkpoints SET checkpoint=? WHERE thread_id='alice-2' AND checkpoint_id=?",
        (src, dst),
    )
    # Within one thread: an older checkpoint's ciphertext over the newest one.
    rows = raw.execute(
        "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id='bob-1' "
        "ORDER BY checkpoint_id DESC"
    ).fetchall()
    raw.execute(
        "UPDATE checkpoints SET checkpoint=? WHERE thread_id='bob-1' AND checkpoint_id=?",
        (rows[1][1], rows[0][0]),
    )
    # A pending write moved to another task id.
    raw.execute("UPDATE writes SET task_id='other-task' WHERE thread_id='anon-1'")
    raw.commit()
    raw.close()
    with pytest.raises(CiphertextRejectedError, match="alice-2"):
        saver.get_tuple(cfg("alice-2", "alice"))
    with pytest.raises(CiphertextRejectedError, match="bob-1"):
        saver.get_tuple(cfg("bob-1", "bob"))
    with pytest.raises(CiphertextRejectedError, match="anon-1"):
        list(saver.list(cfg("anon-1", None)))
    # alice-1 untouched still reads.
    assert saver.get_tuple(cfg("alice-1", "alice")) is not None
    conn.close()


def test_a_plaintext_row_behind_the_savers_back_is_refused(
    tmp_path: Path, signer: Signer, keys: KeyStore
) -> None:
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
    run_graph(saver)
    # A plain SqliteSaver-style row: the checkpoint serialized but not encrypted.
    raw = sqlite3.connect(db)
    row = raw.execute(
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
        "WHERE thread_id='bob-1' ORDER BY checkpoint_id DESC"
    ).fetchone()
    latest = saver.get_tuple(cfg("bob-1", "bob"))
    assert latest is not None
    type_, blob = JsonPlusSerializer().dumps_typed({**latest.checkpoint, "id": row[1][:-1] + "z"})
    raw.execute(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
        "parent_checkpoint_id, type, checkpoint, metadata) "
        "VALUES ('bob-1', ?, ?, ?, ?, ?, ?)",
        (row[0], row[1][:-1] + "z", row[1], type_, blob, row[3]),
    )
    raw.commit()
    raw.close()
    with pytest.raises(PlaintextRowError, match=r"bob-1.*not encrypted"):
        saver.get_tuple(cfg("bob-1", "bob"))
    # A tampered sealed blob (one bit) fails too.
    raw = sqlite3.connect(db)
    (cid, blob) = raw.execute(
        "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id='alice-1' "
        "ORDER BY checkpoint_id DESC"
    ).fetchone()
    flipped = bytes(blob[:-1]) + bytes([blob[-1] ^ 1])
    raw.execute(
        "UPDATE checkpoints SET checkpoint=? WHERE thread_id='alice-1' AND checkpoint_id=?",
        (flipped, cid),
    )
    raw.commit()
    raw.close()
    with pytest.raises(CiphertextRejectedError):
        saver.get_tuple(cfg("alice-1", "alice"))
    conn.close()


def test_the_key_store_must_not_be_the_data_database(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "data.sqlite"
    kek = LocalKeyWrapper.generate(tmp_path / "master.key")
    with KeyStore(db, kek) as same:
        conn = sqlite3.connect(db, check_same_thread=False)
        with pytest.raises(ConfigurationError, match="must not be the data database"):
            AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(same))
        conn.close()
    with pytest.raises(ConfigurationError, match="in-memory"):
        KeyStore(":memory:", kek)


def test_a_wrong_key_encryption_key_does_not_unwrap(
    tmp_path: Path, signer: Signer, keys: KeyStore
) -> None:
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    run_graph(AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys)))
    other = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "other.key"))
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(other))
    with pytest.raises(CiphertextRejectedError, match="key-encryption key"):
        saver.get_tuple(cfg("alice-1", "alice"))
    with pytest.raises(ConfigurationError, match="never overwritten"):
        LocalKeyWrapper.generate(tmp_path / "other.key")
    conn.close()


def test_async_graph_rows_are_encrypted(tmp_path: Path, signer: Signer, keys: KeyStore) -> None:
    db = tmp_path / "data.sqlite"

    async def main() -> None:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, encryption=Encryption(keys)
        ) as saver:
            graph = build(saver)
            for thread, user in (("alice-1", "alice"), ("bob-1", "bob")):
                for turn in ("hello", f"my secret is {MARKER}"):
                    await graph.ainvoke(
                        {"messages": [HumanMessage(content=turn)]}, cfg(thread, user)
                    )
            state = await graph.aget_state(cfg("alice-1", "alice"))
            assert MARKER in state.values["messages"][-2].content
            history = [s async for s in graph.aget_state_history(cfg("bob-1", "bob"))]
            assert len(history) >= 4
            # the sync API of the async saver (from another thread) decrypts too
            tup = await asyncio.to_thread(saver.get_tuple, cfg("bob-1", "bob"))
            assert tup is not None and MARKER in str(tup.checkpoint["channel_values"]["messages"])

    asyncio.run(main())
    raw = sqlite3.connect(db)
    types = {
        t for (t,) in raw.execute("SELECT type FROM checkpoints UNION SELECT type FROM writes")
    }
    raw.close()
    assert types == {SEALED_TYPE}
    assert MARKER.encode() not in raw_bytes(db)
    assert keys.threads_of("subject:alice") == ["alice-1"]


def test_async_key_store_must_not_be_the_data_database(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "data.sqlite"
    same = KeyStore(db, LocalKeyWrapper.generate(tmp_path / "master.key"))

    async def main() -> None:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, encryption=Encryption(same)
        ) as saver:
            with pytest.raises(ConfigurationError, match="must not be the data database"):
                await build(saver).ainvoke(
                    {"messages": [HumanMessage(content="hi")]}, cfg("t", "u")
                )

    asyncio.run(main())
    same.close()


async def test_langgraph_conformance_suite_with_encryption(tmp_path: Path) -> None:
    """LangGraph's conformance suite against the async SQLite saver with encryption on
    (every row it writes sealed, every read opened)."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    keys = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "kek"))
    n = iter(range(10_000))

    @checkpointer_test(name="AsyncAttestingSqliteSaver+Encryption")
    async def factory() -> Any:
        db = tmp_path / f"c{next(n)}.sqlite"
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=Signer.generate(), encryption=Encryption(keys)
        ) as saver:
            yield saver

    report = await validate(factory)
    failed = {c: r.tests_failed for c, r in report.results.items() if r.detected and not r.passed}
    assert failed == {}
    assert sum(r.tests_passed for r in report.results.values()) >= 50
