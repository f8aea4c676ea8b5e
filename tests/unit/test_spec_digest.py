"""RECEIPT_SPEC.md section 4, reimplemented from the text alone, against real erasures.

Nothing here imports the library's encoding: rows are dumped with a plain sqlite3
connection (``typeof`` gives the tag, ``text_factory=bytes`` the stored text bytes),
encoded with ``struct`` as section 4.4 says, scoped and ordered as 4.2/4.3 say, and
hashed with a recursive MTH (4.1). The swept-store leaf (4.6) uses the independent
``rfc8785`` package. Only the savers (to erase) and the receipt (to compare) are the
library's.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer
from scenario import TURNS, build_graph, human

T = "alice-chat"
NS = ("users", "alice")

# -- section 4.1 / 4.4, from the text ------------------------------------------------------


def mth(leaves: list[bytes]) -> bytes:
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def lp(x: bytes) -> bytes:
    return struct.pack(">Q", len(x)) + x


def val(tag: str, v: Any) -> bytes:
    """VAL(v) for a storage class as ``typeof`` names it; text/blob ``v`` are bytes."""
    if tag == "null":
        return b"n"
    if tag == "integer":
        return b"i" + struct.pack(">q", v)
    if tag == "real":
        return b"r" + struct.pack(">d", v)
    if tag == "text":
        return b"t" + lp(v)
    assert tag == "blob"
    return b"b" + lp(v)


def size(tag: str, v: Any) -> int:
    """Section 4.5: NULL 0, numbers 8, text and blobs their byte length."""
    if tag in ("text", "blob"):
        return len(v)
    return 0 if tag == "null" else 8


def leaf(table: str, pk: list[tuple[str, Any]], cols: list[tuple[str, str, Any]]) -> bytes:
    out = b"ERv1" + lp(table.encode()) + struct.pack(">I", len(pk))
    out += b"".join(val(t, v) for t, v in pk)
    out += struct.pack(">I", len(cols))
    return out + b"".join(lp(name.encode()) + val(t, v) for name, t, v in cols)


# -- section 4.2 / 4.3: a raw dump of the scope -----------------------------------------------


def covered(prefix: bytes, namespaces: Sequence[Sequence[str]]) -> bool:
    for ns in namespaces:
        p = ".".join(ns).encode()
        if prefix == p or prefix.startswith(p + b"."):
            return True
    return False


def dump(db: Path, thread_id: str, namespaces: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``{table: [(pk, columns)]}`` of the scope, read with a plain connection."""
    conn = sqlite3.connect(db)
    conn.text_factory = bytes
    try:
        tables = {r[0].decode() for r in conn.execute("SELECT name FROM sqlite_master")}
        wanted = ["checkpoints", "writes"] + (["store", "store_vectors"] if namespaces else [])
        out: dict[str, Any] = {}
        for table in sorted(t for t in wanted if t in tables):
            info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            names = [r[1].decode() for r in sorted(info)]
            pk = [r[1].decode() for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
            sel = ", ".join(f'typeof("{c}"), "{c}"' for c in names)
            order = ", ".join(f'"{c}"' for c in pk)
            rows = []
            for raw in conn.execute(f'SELECT {sel} FROM "{table}" ORDER BY {order}'):
                cols = [(names[i], raw[2 * i].decode(), raw[2 * i + 1]) for i in range(len(names))]
                by = {n: (t, v) for n, t, v in cols}
                if table in ("checkpoints", "writes"):
                    if by["thread_id"] != ("text", thread_id.encode()):
                        continue
                elif not covered(by["prefix"][1], namespaces):
                    continue
                rows.append(([by[c] for c in pk], cols))
            out[table] = rows
        return out
    finally:
        conn.close()


def expected_state(rows: dict[str, Any]) -> tuple[str, int, dict[str, dict[str, int]]]:
    leaves, tables = [], {}
    for table in sorted(rows):
        tables[table] = {"rows": 0, "bytes": 0}
        for pk, cols in rows[table]:
            leaves.append(leaf(table, pk, cols))
            tables[table]["rows"] += 1
            tables[table]["bytes"] += sum(size(t, v) for _, t, v in cols)
    return mth(leaves).hex(), len(leaves), tables


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path, signer: Signer) -> Iterator[tuple[Path, Any, Any]]:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for text in TURNS:
            graph.invoke(human(text), {"configurable": {"thread_id": T}})
        graph.invoke(human("hello"), {"configurable": {"thread_id": "bob-chat"}})
        store.put((*NS, "notes"), "n1", {"note": "below the prefix", "score": 0.5})
        store.put(("users", "alice2"), "identity", {"name": "look-alike"})
        store.put(("users", "Alice"), "identity", {"name": "other case"})
        yield db, saver, store


# -- tests ----------------------------------------------------------------------------------


def test_leaf_encoding_vector() -> None:
    """A fixed vector for auditors: every tag, big-endian lengths and counts."""
    data = leaf(
        "t",
        [("text", b"a")],
        [("a", "text", b"a"), ("n", "null", None), ("i", "integer", -2),
         ("r", "real", 1.5), ("b", "blob", b"\x00")],
    )  # fmt: skip
    assert data.hex() == (
        "45527631" "0000000000000001" "74" "00000001" "74" "0000000000000001" "61"
        "00000005"
        "0000000000000001" "61" "74" "0000000000000001" "61"
        "0000000000000001" "6e" "6e"
        "0000000000000001" "69" "69" "fffffffffffffffe"
        "0000000000000001" "72" "72" "3ff8000000000000"
        "0000000000000001" "62" "62" "0000000000000001" "00"
    )  # fmt: skip
    from erasure_receipts.digest import encode_row  # the library agrees with the text

    assert encode_row("t", ["a"], [("a", "a"), ("n", None), ("i", -2), ("r", 1.5),
                                   ("b", b"\x00")]) == data  # fmt: skip


def test_pre_state_digest_recomputed_from_the_spec(world: Any) -> None:
    db, saver, _ = world
    namespaces = [NS]
    rows = dump(db, T, namespaces)
    digest, leaves, tables = expected_state(rows)
    assert tables["store"]["rows"] == 2  # the item and the one below it, not the look-alikes
    assert "store_vectors" not in tables  # no vector index: the table does not exist

    preview = saver.digest_thread(T, namespaces)
    receipt = saver.erase_thread(T, store_namespaces=namespaces)

    pre = receipt.predicate["pre_state"]
    assert preview.digest == pre["digest"]["sha256"] == receipt.pre_digest == digest
    assert pre["leaves"] == leaves == preview.leaves
    assert pre["tables"] == tables  # same tables listed, same rows and bytes
    assert set(receipt.predicate["post_state"]["tables"]) == set(tables)
    # The tree size is pre_state.leaves: the digest recomputed with that many leaves.
    assert mth([leaf(t, pk, c) for t in sorted(rows) for pk, c in rows[t]][: pre["leaves"]]).hex() \
        == pre["digest"]["sha256"]  # fmt: skip
    assert expected_state(dump(db, T, namespaces))[1] == 0


def _text_factories() -> list[Any]:
    return [bytes, lambda data: data.decode("utf-8").upper()]


@pytest.mark.parametrize("text_factory", _text_factories(), ids=["bytes", "custom-upper"])
def test_digest_ignores_detect_types_and_text_factory(
    world: Any, signer: Signer, text_factory: Any
) -> None:
    db, saver, _ = world
    plain = saver.digest_thread(T, [NS])
    odd = sqlite3.connect(
        db, detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
        check_same_thread=False,
    )  # fmt: skip
    odd.text_factory = text_factory
    odd.row_factory = sqlite3.Row
    try:
        # The store's created_at/updated_at are declared TIMESTAMP: PARSE_DECLTYPES would
        # hand back datetime objects, and the text factory changes every TEXT value.
        assert isinstance(
            sqlite3.connect(db, detect_types=sqlite3.PARSE_DECLTYPES)
            .execute("SELECT created_at FROM store LIMIT 1")
            .fetchone()[0],
            datetime,
        )
        other = AttestingSqliteSaver(odd, signer=signer, store=SqliteStore(odd))
        got = other.digest_thread(T, [NS])
    finally:
        odd.close()
    assert got.digest == plain.digest == expected_state(dump(db, T, [NS]))[0]
    assert {k: v.to_json() for k, v in got.tables.items()} == {
        k: v.to_json() for k, v in plain.tables.items()
    }


def test_tag_is_the_storage_class_not_the_declared_type(world: Any, signer: Signer) -> None:
    """Odd but legal stored values: numbers in BLOB columns, a BLOB primary key, text
    that is not valid UTF-8; the leaves still follow typeof()."""
    db, saver, _ = world
    with sqlite3.connect(db) as c:
        c.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) VALUES "
            "(?, '', x'00ff', NULL, 42, 7, 2.5), (?, '', CAST(x'ff41' AS TEXT), NULL, NULL, "
            "'text in a blob column', x'')",
            (T, T),
        )
    rows = dump(db, T, [])
    tags = {(pk[2][0], cols[5][1], cols[6][1]) for pk, cols in rows["checkpoints"]}
    assert ("blob", "integer", "real") in tags and ("text", "text", "blob") in tags
    got = saver.digest_thread(T)
    assert got.digest == expected_state(rows)[0]
    assert {k: v.to_json() for k, v in got.tables.items()} == expected_state(rows)[2]


def test_utf16_database_leaves_hold_utf8(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "utf16.db"
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA encoding = 'UTF-16le'")
        c.execute("CREATE TABLE x (a)")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        cp = empty_checkpoint()
        cp["id"] = "1ef00000000000000000000000000001"
        saver.put({"configurable": {"thread_id": "t\u00e9", "checkpoint_ns": ""}}, cp,
                  {"step": 1}, {})  # fmt: skip
        got = saver.digest_thread("t\u00e9")
    rows = dump(db, "t\u00e9", [])  # sqlite3 hands text out as UTF-8 whatever the encoding
    assert rows["checkpoints"][0][0][0] == ("text", "t\u00e9".encode())
    assert got.digest == expected_state(rows)[0]


# -- section 4.6: swept store items ----------------------------------------------------------


def ts(t: datetime) -> bytes:
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()


def item_value(v: Any) -> tuple[str, bytes]:
    try:
        return "text", rfc8785.dumps(v)
    except Exception:
        return "blob", orjson.dumps(v, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def test_swept_store_leaves_follow_the_spec(tmp_path: Path, signer: Signer) -> None:
    store = InMemoryStore()
    values: list[Any] = [
        {"b": 1, "a": [1.0, 0.1, 1e21, -0.0, 5e-324, "\u00e9\u2028"], "\U0001f600": None},
        {"\uff61": 2, "\u00e9": 3.25, "nested": {"z": True, "y": False}},
        {"big": 2**60},  # beyond 2**53: not I-JSON, the orjson BLOB fallback
        {"when": datetime(2024, 5, 1, 12, 0, tzinfo=UTC)},  # not JSON at all: fallback too
    ]
    for i, v in enumerate(values):
        store.put(NS if i % 2 else (*NS, "deep"), f"k{i}", v)
    store.put(("users", "alice2"), "x", {"keep": True})
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer,
                                               store=store) as saver:  # fmt: skip
        cp = empty_checkpoint()
        cp["id"] = "1ef00000000000000000000000000001"
        saver.put({"configurable": {"thread_id": T, "checkpoint_ns": ""}}, cp, {}, {})
        rows = dump(tmp_path / "a.db", T, [])
        items = store.search(NS, limit=1000)
        receipt = saver.erase_thread(T, store_namespaces=[NS])
    assert receipt.predicate["methods"]["store"] == "sweep"
    swept = []
    for it in sorted(items, key=lambda i: (".".join(i.namespace).encode(), i.key.encode())):
        prefix = ".".join(it.namespace).encode()
        tag, value = item_value(it.value)
        cols = [("prefix", "text", prefix), ("key", "text", it.key.encode()), ("value", tag, value),
                ("created_at", "text", ts(it.created_at)),
                ("updated_at", "text", ts(it.updated_at))]  # fmt: skip
        swept.append(([("text", prefix), ("text", it.key.encode())], cols))
    assert [c[2][1] for _, c in swept].count("blob") == 2
    digest, leaves, tables = expected_state({**rows, "store": swept})
    pre = receipt.predicate["pre_state"]
    assert pre["digest"]["sha256"] == digest
    assert pre["leaves"] == leaves == len(rows["checkpoints"]) + len(rows["writes"]) + 4
    assert pre["tables"] == tables


def test_leaf_record_holds_the_spec_encoding(world: Any) -> None:
    """The legal-hold export carries exactly the section 4.4 bytes."""
    db, saver, _ = world
    records = saver.export_leaves(T, [NS])
    rows = dump(db, T, [NS])
    mine = [leaf(t, pk, c) for t in sorted(rows) for pk, c in rows[t]]
    assert [r.leaf for r in records] == mine
    assert [base64.b64decode(r.to_dict()["leaf"]) for r in records] == mine
    assert {r.root for r in records} == {mth(mine).hex()}
