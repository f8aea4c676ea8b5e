"""redact / aredact on the PostgreSQL savers, against a real server and real graphs.

Raw rows are read through separate connections (tests/pg_helpers.py) and the rewritten
rows' digests recomputed independently of the library.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    ConfigurationError,
    NeedlesFoundError,
    NothingToEraseError,
    NothingToRedactError,
    Signer,
    verify_receipt,
)
from erasure_receipts.digest import MerkleTree, encode_row, leaf_hash
from pg_helpers import connect, raw_rows, table_shape
from test_history_graphs import CARD, CHAT_TURNS, cfg, chat_graph, human

T = "alice-chat"
OTHER = "bob-chat"
BOB_SECRET = "bob-only-secret-77"
TABLES = ("checkpoint_blobs", "checkpoint_writes", "checkpoints")


def rows_holding(dsn: str, needle: str, thread: str | None = T) -> int:
    cond = "thread_id = %(t)s" if thread else "true"
    with connect(dsn) as conn:
        row = conn.execute(
            f"SELECT (SELECT count(*) FROM checkpoints WHERE {cond} "
            "        AND strpos(checkpoint::text || metadata::text, %(n)s) > 0)"
            f" + (SELECT count(*) FROM checkpoint_blobs WHERE {cond} "
            "        AND position(convert_to(%(n)s, 'UTF8') in coalesce(blob, '')) > 0)"
            f" + (SELECT count(*) FROM checkpoint_writes WHERE {cond} "
            "        AND position(convert_to(%(n)s, 'UTF8') in blob) > 0)",
            {"t": thread, "n": needle},
        ).fetchone()
    assert row is not None
    return int(row[0])


def leaf_map(dsn: str, thread: str = T) -> dict[tuple[Any, ...], bytes]:
    out: dict[tuple[Any, ...], bytes] = {}
    with connect(dsn) as conn:
        shapes = {t: table_shape(conn, t) for t in TABLES}
    for table in sorted(TABLES):
        cols, pk = shapes[table]
        names = [c for c, _ in cols]
        for row in raw_rows(dsn, table, "thread_id = %s", (thread,)):
            pkv = [row[names.index(c)] for c in pk]
            out[(table, *pkv)] = leaf_hash(
                encode_row(table, pkv, list(zip(names, row, strict=True)))
            )
    return out


def everything(dsn: str, thread: str) -> dict[str, list[tuple[Any, ...]]]:
    return {t: raw_rows(dsn, t, "thread_id = %s", (thread,)) for t in TABLES}


def tree_of(leaves: dict[tuple[Any, ...], bytes], keys: list[tuple[Any, ...]]) -> str:
    t = MerkleTree()
    for k in keys:
        t.append_hash(leaves[k])
    return t.root().hex()


def checkpoint_ids(dsn: str, thread: str = T) -> list[tuple[str, str]]:
    with connect(dsn) as conn:
        return [
            (str(a), str(b))
            for a, b in conn.execute(
                "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s "
                'ORDER BY checkpoint_ns COLLATE "C", checkpoint_id COLLATE "C"',
                (thread,),
            )
        ]


def chat(dsn: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(dsn, signer=signer) as saver:
        saver.setup()
        g = chat_graph(saver)
        for turn in CHAT_TURNS:
            g.invoke(human(turn), cfg(T))
        g.invoke(human(f"note {BOB_SECRET}"), cfg(OTHER))


def test_redact_keeps_every_checkpoint_and_removes_every_copy(pg_db: str, signer: Signer) -> None:
    chat(pg_db, signer)
    ids = checkpoint_ids(pg_db)
    assert rows_holding(pg_db, CARD) > 3
    other = everything(pg_db, OTHER)
    before = leaf_map(pg_db)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        g = chat_graph(saver)
        history_before = [s.config["configurable"]["checkpoint_id"]
                          for s in g.get_state_history(cfg(T))]  # fmt: skip
        receipt = saver.redact(T, [CARD])
        history = list(g.get_state_history(cfg(T)))
        assert [s.config["configurable"]["checkpoint_id"] for s in history] == history_before
        assert all(CARD not in repr(s.values) for s in history)
        oldest = history[-1].config
        g.update_state(oldest, {"messages": [HumanMessage(content="fork")]})
        forked = g.invoke(None, g.get_state(cfg(T)).config)
        assert CARD not in repr(forked) and forked["messages"]
    assert checkpoint_ids(pg_db)[: len(ids)] == ids or set(ids) <= set(checkpoint_ids(pg_db))
    assert rows_holding(pg_db, CARD, thread=None) == 0
    assert everything(pg_db, OTHER) == other
    verify_receipt(receipt.to_json(), [signer.public_key])
    p = receipt.predicate
    assert p["kind"] == "redaction" and p["status"] == "redacted"
    assert p["backend"]["kind"] == "postgres"
    assert p["redaction"]["checkpoints_before"] == len(ids)
    after = leaf_map(pg_db)
    changed = sorted((k for k in before if k in after and before[k] != after[k]), key=repr)
    by_tree = sorted(changed, key=lambda k: (k[0], *(str(x) for x in k[1:])))
    assert len(changed) == p["pre_state"]["leaves"] == p["post_state"]["leaves"]
    assert {t: c["rows"] for t, c in p["pre_state"]["tables"].items() if c["rows"]} == {
        t: sum(1 for k in changed if k[0] == t) for t in {k[0] for k in changed}
    }
    assert tree_of(before, by_tree) == p["pre_state"]["digest"]["sha256"]
    assert tree_of(after, by_tree) == p["post_state"]["digest"]["sha256"]
    actions = {r["action"]: r["status"] for r in p["residue"]}
    assert "postgres.vacuum" in actions and "postgres.wal" in actions


async def test_aredact(pg_db: str, signer: Signer) -> None:
    chat(pg_db, signer)
    async with AsyncConnectionPool(
        pg_db, kwargs={"autocommit": True, "row_factory": dict_row}, open=False
    ) as pool:
        saver = AsyncAttestingPostgresSaver(pool, signer=signer)
        receipt = await saver.aredact(T, [CARD], replacement="***")
        g = chat_graph(saver)
        states = [s async for s in g.aget_state_history(cfg(T))]
        assert states and all(CARD not in repr(s.values) for s in states)
        await g.ainvoke(human("still there?"), cfg(T))
    assert rows_holding(pg_db, CARD, thread=None) == 0
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_bad_input_changes_nothing(pg_db: str, signer: Signer) -> None:
    chat(pg_db, signer)
    before = {t: everything(pg_db, t) for t in (T, OTHER)}
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        for needles, reason in (([], "no_needles"), (["abc"], "needle_too_short")):
            with pytest.raises(ConfigurationError) as info:
                saver.redact(T, needles)
            assert info.value.reason == reason
        with pytest.raises(NothingToEraseError, match="no stored rows"):
            saver.redact("no-such-thread", [CARD])
        with pytest.raises(NothingToRedactError):
            saver.redact(T, [BOB_SECRET])
        with pytest.raises(NeedlesFoundError, match="cannot rewrite"):
            saver.redact(T, ["alice-chat"])
    assert {t: everything(pg_db, t) for t in (T, OTHER)} == before


def test_store_items_in_the_same_database(pg_db: str, signer: Signer) -> None:
    from langgraph.store.postgres import PostgresStore

    chat(pg_db, signer)
    ns = ("users", "alice")
    with PostgresStore.from_conn_string(pg_db) as store:
        store.setup()
        store.put(ns, "card", {"note": f"card {CARD}", "n": 1})
        store.put(("users", "bob"), "card", {"note": f"card {CARD}"})
        with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver:
            receipt = saver.redact(T, [CARD], store_namespaces=[ns])
        item = store.get(ns, "card")
        assert item is not None and item.value == {"note": "card [redacted]", "n": 1}
        bob = store.get(("users", "bob"), "card")
        assert bob is not None and CARD in bob.value["note"]
    p = receipt.predicate
    assert p["pre_state"]["tables"]["store"]["rows"] == 1
    verify_receipt(receipt.to_json(), [signer.public_key])
