"""Redaction of threads written with ``encryption=`` (crypto-shredding) on SQLite.

The saver opens each sealed row with its own key, against the row's identity, replaces
the needle and seals the result again to the same row under the same key: the marker is
gone from every decrypted checkpoint and write, every checkpoint stays, the rows stay
sealed, and the receipt verifies. Without the key (a saver without ``encryption=``, or a
shredded key) the sealed rows are named and nothing changes (raw rows byte-identical).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    Encryption,
    KeyStore,
    LocalKeyWrapper,
    NeedlesFoundError,
    Signer,
    verify_receipt,
)
from erasure_receipts.shredding import SEALED_TYPE
from test_encryption_sqlite import MARKER, build, cfg, raw_bytes

THREADS = (("alice-1", "alice"), ("alice-2", "alice"), ("anon-1", None))


def write(saver: Any) -> None:
    graph = build(saver)
    for thread, user in THREADS:
        for text in ("hello", f"my secret is {MARKER} ({thread})", "bye"):
            graph.invoke({"messages": [HumanMessage(content=text)]}, cfg(thread, user))


def raw_rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as c:
        rows = [("c", *r) for r in c.execute("SELECT * FROM checkpoints ORDER BY 1, 2, 3")]
        rows += [("w", *r) for r in c.execute("SELECT * FROM writes ORDER BY 1, 2, 3, 4, 5")]
    c.close()
    return rows


def decrypted(saver: Any, thread: str) -> list[str]:
    """Every checkpoint of the thread, with its pending writes, opened by the saver."""
    return [
        repr((t.checkpoint, t.pending_writes))
        for t in saver.list({"configurable": {"thread_id": thread}})
    ]


def keystore(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "kek"))


def test_redact_an_encrypted_thread(tmp_path: Path, signer: Signer) -> None:
    keys = keystore(tmp_path)
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
    write(saver)
    before = decrypted(saver, "alice-1")
    assert sum(MARKER in c for c in before) >= 2  # several checkpoints hold it
    assert MARKER.encode() not in raw_bytes(db)

    receipt = saver.redact("alice-1", [MARKER])
    verify_receipt(receipt, [signer.public_key])
    p = receipt.predicate
    assert p["kind"] == "redaction" and p["status"] == "redacted"
    assert p["pre_state"]["leaves"] >= 2
    after = decrypted(saver, "alice-1")
    assert len(after) == len(before)
    assert not any(MARKER in c for c in after)
    assert sum("[redacted]" in c for c in after) >= 2
    # The rows stay sealed (nothing written in plaintext), the other threads untouched.
    with sqlite3.connect(db) as c:
        types = {r[0] for r in c.execute("SELECT type FROM checkpoints WHERE thread_id='alice-1'")}
        types |= {r[0] for r in c.execute("SELECT type FROM writes WHERE thread_id='alice-1'")}
    c.close()
    assert types == {SEALED_TYPE}
    assert any(MARKER in c for c in decrypted(saver, "alice-2"))
    assert b"[redacted]" not in raw_bytes(db)
    # The thread goes on: the graph resumes from the redacted state.
    again = {"messages": [HumanMessage(content="again")]}
    out = build(saver).invoke(again, cfg("alice-1", "alice"))
    assert MARKER not in repr(out) and "[redacted]" in repr(out)


def test_without_the_key_the_sealed_rows_are_named_and_nothing_changes(
    tmp_path: Path, signer: Signer
) -> None:
    keys = keystore(tmp_path)
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    enc = Encryption(keys)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=enc)
    write(saver)
    rows = raw_rows(db)

    plain = AttestingSqliteSaver(sqlite3.connect(db, check_same_thread=False), signer=signer)
    with pytest.raises(NeedlesFoundError, match="sealed") as exc:
        plain.redact("alice-1", [MARKER])
    assert "holds none" not in str(exc.value)
    tables = {loc["table"] for loc in exc.value.locations}
    assert tables == {"checkpoints", "writes"}
    assert all(loc["thread_id"] == "alice-1" for loc in exc.value.locations)
    assert raw_rows(db) == rows

    # A shredded key: the thread's rows cannot be opened, so nothing is claimed.
    saver.shred_thread("anon-1")
    with pytest.raises(NeedlesFoundError, match="sealed"):
        saver.redact("anon-1", [MARKER])
    assert raw_rows(db) == rows


def test_encrypted_store_items_are_redacted(tmp_path: Path, signer: Signer) -> None:
    from langgraph.store.sqlite import SqliteStore

    keys = keystore(tmp_path)
    enc = Encryption(keys)
    db = tmp_path / "data.sqlite"
    sconn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    raw_store = SqliteStore(sconn)
    raw_store.setup()
    store = enc.wrap_store(raw_store, lambda ns: ns[1])
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=enc, store=raw_store)
    write(saver)
    store.put(("users", "alice"), "profile", {"email": f"alice@{MARKER}.example", "n": 1})
    store.put(("users", "alice"), "other", {"email": "alice@example.org"})
    (other,) = sconn.execute("SELECT value FROM store WHERE key='other'").fetchone()

    receipt = saver.redact("alice-1", [MARKER], store_namespaces=[("users", "alice")])
    verify_receipt(receipt, [signer.public_key])
    assert "store" in receipt.predicate["pre_state"]["tables"]
    item = store.get(("users", "alice"), "profile")
    assert item is not None and item.value == {"email": "alice@[redacted].example", "n": 1}
    (value,) = sconn.execute("SELECT value FROM store WHERE key='profile'").fetchone()
    assert set(json.loads(value)) == {"__erasure_receipts_sealed__"}
    assert sconn.execute("SELECT value FROM store WHERE key='other'").fetchone()[0] == other
    assert not any(MARKER in c for c in decrypted(saver, "alice-1"))


def test_async_redact_an_encrypted_thread(tmp_path: Path, signer: Signer) -> None:
    import asyncio

    keys = keystore(tmp_path)
    db = tmp_path / "data.sqlite"

    async def main() -> None:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, encryption=Encryption(keys)
        ) as saver:
            graph = build(saver)
            for text in ("hello", f"my secret is {MARKER}", "bye"):
                await graph.ainvoke({"messages": [HumanMessage(content=text)]}, cfg("t", "u"))
            receipt = await saver.aredact("t", [MARKER])
            verify_receipt(receipt, [signer.public_key])
            tuples = [t async for t in saver.alist({"configurable": {"thread_id": "t"}})]
            assert len(tuples) == 9
            assert not any(MARKER in repr((t.checkpoint, t.pending_writes)) for t in tuples)
            assert any("[redacted]" in repr(t.checkpoint) for t in tuples)

    asyncio.run(main())


def test_erase_compacted_redact_with_encryption(tmp_path: Path, signer: Signer) -> None:
    """``erase_compacted="redact"`` on an encrypting saver: each compaction's removed
    texts are redacted from the sealed rows (one verifiable receipt each), the agent
    keeps answering, and no decrypted checkpoint holds the summarized-away marker."""
    from compaction_agent import COMPACTIONS, TURNS, agent, turn
    from compaction_agent import MARKER as CARD
    from compaction_agent import cfg as agent_cfg

    keys = keystore(tmp_path)
    db, archive = tmp_path / "agent.db", tmp_path / "receipts"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(
        conn, signer=signer, archive=archive, erase_compacted="redact",
        encryption=Encryption(keys),
    )  # fmt: skip
    a = agent(saver)
    for i in range(TURNS):
        a.invoke(turn(i), agent_cfg("t"))
    history = list(a.get_state_history(agent_cfg("t")))
    assert len(history) == conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    assert all(CARD not in repr(s.values) for s in history)
    assert not any(CARD in c for c in decrypted(saver, "t"))
    docs = [json.loads(p.read_bytes()) for p in sorted(archive.glob("*.json"))]
    assert len(docs) == COMPACTIONS
    for doc in docs:
        v = verify_receipt(json.dumps(doc).encode(), [signer.public_key])
        assert v.statement["predicate"]["kind"] == "redaction"
