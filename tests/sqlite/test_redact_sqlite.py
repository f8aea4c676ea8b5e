"""redact / aredact on the SQLite savers, with real graphs: values removed from every
stored row of a thread while every checkpoint stays.

Assertions read raw rows through separate connections and recompute the rewritten
rows' digests independently of what the saver reports.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from erasure_receipts import (
    MIN_NEEDLE_CHARS,
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    NeedlesFoundError,
    NothingToEraseError,
    NothingToRedactError,
    Signer,
    verify_receipt,
)
from erasure_receipts.digest import MerkleTree, encode_row, leaf_hash
from scenario import columns, pk_columns
from test_history_graphs import CARD, CHAT_TURNS, cfg, chat_graph, human

T = "alice-chat"
OTHER = "bob-chat"
BOB_SECRET = "bob-only-secret-77"


def rows_holding(db: Path, needle: str, thread: str | None = T) -> int:
    """Rows (checkpoints, writes) whose raw bytes contain ``needle`` (of ``thread``)."""
    with sqlite3.connect(db) as conn:
        n = 0
        for table in ("checkpoints", "writes"):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            cond = " OR ".join(f"instr(CAST({c} AS BLOB), ?) > 0" for c in cols)
            where = f"({cond})" + (" AND thread_id = ?" if thread else "")
            params = [*[needle.encode()] * len(cols), *([thread] if thread else [])]
            n += conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
    return int(n)


def checkpoint_ids(db: Path, thread: str = T) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return [
            (ns, cid)
            for ns, cid in conn.execute(
                "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ? "
                "ORDER BY checkpoint_ns, checkpoint_id",
                (thread,),
            )
        ]


def raw_rows(db: Path, thread: str) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(db) as conn:
        return {
            t: conn.execute(f"SELECT * FROM {t} WHERE thread_id = ? ORDER BY 1, 2, 3, 4", (thread,))
            .fetchall()
            for t in ("checkpoints", "writes")
        }  # fmt: skip


def leaf_map(db: Path, thread: str = T) -> dict[tuple[Any, ...], bytes]:
    """``(table, *pk) -> leaf hash`` of every row of the thread, read raw (spec 4)."""
    out: dict[tuple[Any, ...], bytes] = {}
    with sqlite3.connect(db) as conn:
        for table in ("checkpoints", "writes"):
            cols, pk = columns(db, table), pk_columns(db, table)
            for row in conn.execute(
                f"SELECT * FROM {table} WHERE thread_id = ? ORDER BY {', '.join(pk)}", (thread,)
            ):
                pkv = [row[cols.index(c)] for c in pk]
                out[(table, *pkv)] = leaf_hash(
                    encode_row(table, pkv, list(zip(cols, row, strict=True)))
                )
    return out


def tree_of(leaves: dict[tuple[Any, ...], bytes], keys: list[tuple[Any, ...]]) -> str:
    t = MerkleTree()
    for k in keys:
        t.append_hash(leaves[k])
    return t.root().hex()


def chat(db: Path, signer: Signer, tmp_path: Path) -> None:
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=tmp_path / "r"
    ) as saver:
        g = chat_graph(saver)
        for turn in CHAT_TURNS:
            g.invoke(human(turn), cfg(T))
        g.invoke(human(f"note {BOB_SECRET}"), cfg(OTHER))


def test_redact_keeps_every_checkpoint_and_removes_every_copy(
    tmp_path: Path, signer: Signer, pub_pem: Path
) -> None:
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    ids = checkpoint_ids(db)
    assert rows_holding(db, CARD) > 5
    other_before = raw_rows(db, OTHER)
    before = leaf_map(db)
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=tmp_path / "r"
    ) as saver:
        g = chat_graph(saver)
        history_before = [s.config["configurable"]["checkpoint_id"]
                          for s in g.get_state_history(cfg(T))]  # fmt: skip
        receipt = saver.redact(T, [CARD])
        history = list(g.get_state_history(cfg(T)))
        assert [s.config["configurable"]["checkpoint_id"] for s in history] == history_before
        for s in history:
            assert CARD not in repr(s.values)
        # a fork from the oldest checkpoint runs
        oldest = history[-1].config
        g.update_state(oldest, {"messages": [HumanMessage(content="fork")]})
        forked = g.invoke(None, g.get_state(cfg(T)).config)
        assert CARD not in repr(forked)
    assert checkpoint_ids(db)[: len(ids)] == ids
    assert rows_holding(db, CARD, thread=None) == 0
    assert rows_holding(db, "[redacted]") > 0
    assert raw_rows(db, OTHER) == other_before  # other threads byte-identical
    v = verify_receipt(receipt.to_json(), [signer.public_key])
    p = receipt.predicate
    assert p["kind"] == "redaction" and p["status"] == "redacted"
    assert v.receipt_id == receipt.receipt_id
    assert p["redaction"]["checkpoints_before"] == p["redaction"]["checkpoints_after"] == len(ids)
    assert p["needles"]["occurrences_after"] == 0 and CARD not in receipt.to_json().decode()
    # The digests name exactly the rewritten rows, before and after, recomputed here.
    after = leaf_map(db)
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    assert len(changed) == p["pre_state"]["leaves"] == p["post_state"]["leaves"]
    assert tree_of(before, changed) == p["pre_state"]["digest"]["sha256"]
    assert tree_of(after, changed) == p["post_state"]["digest"]["sha256"]
    assert p["redaction"]["replacement"]["sha256"] == hashlib.sha256(b"[redacted]").hexdigest()


async def test_aredact(tmp_path: Path, signer: Signer, pub_pem: Path) -> None:
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    async with AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        receipt = await saver.aredact(T, [CARD], replacement="***")
        assert saver.last_receipt == receipt
        g = chat_graph(saver)
        states = [s async for s in g.aget_state_history(cfg(T))]
        assert states and all(CARD not in repr(s.values) for s in states)
        await g.ainvoke(human("still there?"), cfg(T))
    assert rows_holding(db, CARD, thread=None) == 0
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_residue_scan(tmp_path: Path, signer: Signer, pub_pem: Path) -> None:
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        receipt = saver.redact(T, [CARD], residue_scan=True)
    scan = [r for r in receipt.predicate["residue"] if r["action"] == "residue_scan"]
    assert scan and scan[0]["status"] == "applied"
    verify_receipt(receipt.to_json(), [signer.public_key])
    assert CARD.encode() not in b"".join(
        p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("chat.db")
    )


@pytest.mark.parametrize(
    ("needles", "error", "reason"),
    [
        ([], ConfigurationError, "no_needles"),
        (["", "\n"], ConfigurationError, "no_needles"),
        (["x" * (MIN_NEEDLE_CHARS - 1)], ConfigurationError, "needle_too_short"),
    ],
)
def test_bad_needles_change_nothing(
    tmp_path: Path, signer: Signer, needles: list[str], error: type[Exception], reason: str
) -> None:
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    before = raw_rows(db, T)
    with (
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver,
        pytest.raises(error) as info,
    ):
        saver.redact(T, needles)
    assert getattr(info.value, "reason", None) == reason
    assert raw_rows(db, T) == before


def test_missing_thread_and_needle_of_another_thread(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    before = {t: raw_rows(db, t) for t in (T, OTHER)}
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=tmp_path / "r2"
    ) as saver:
        with pytest.raises(NothingToEraseError, match="no stored rows") as info:
            saver.redact("no-such-thread", [CARD])
        assert not isinstance(info.value, NothingToRedactError)
        with pytest.raises(NothingToRedactError, match="holds none of the needles"):
            saver.redact(T, [BOB_SECRET])
        with pytest.raises(ConfigurationError, match="replacement contains a needle"):
            saver.redact(T, [CARD], replacement=f"<{CARD}>")
        with pytest.raises(TypeError):
            saver.redact(T, CARD)
    assert {t: raw_rows(db, t) for t in (T, OTHER)} == before
    assert not (tmp_path / "r2").exists() or not list((tmp_path / "r2").iterdir())


def test_needle_in_a_key_column_refuses(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    before = raw_rows(db, T)
    with (
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver,
        pytest.raises(NeedlesFoundError, match="cannot rewrite") as info,
    ):
        saver.redact(T, ["alice", CARD])
    assert any(loc.get("column") == "thread_id" for loc in info.value.locations)
    assert raw_rows(db, T) == before


def test_tampered_redaction_receipt_fails(tmp_path: Path, signer: Signer, pub_pem: Path) -> None:
    import json

    from erasure_receipts import VerificationError

    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        receipt = saver.redact(T, [CARD])
    doc = json.loads(receipt.to_json())
    doc["statement"]["predicate"]["redaction"]["checkpoints_after"] -= 1
    with pytest.raises(VerificationError):
        verify_receipt(json.dumps(doc).encode(), [signer.public_key])
    with pytest.raises(VerificationError):
        verify_receipt(receipt.to_json(), [Signer.generate().public_key])


class ZlibSerde:
    """A serde that compresses what LangGraph's serializes: the stored bytes never
    hold a needle, only the decoded objects do."""

    def __init__(self) -> None:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        self.inner = JsonPlusSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        import zlib

        kind, data = self.inner.dumps_typed(obj)
        return f"{kind}+zlib", zlib.compress(data)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        import zlib

        kind, blob = data
        if not kind.endswith("+zlib"):
            return self.inner.loads_typed(data)
        return self.inner.loads_typed((kind.removesuffix("+zlib"), zlib.decompress(blob)))


def test_compressed_values_are_redacted_through_the_serde(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "chat.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.serde = ZlibSerde()
        g = chat_graph(saver)
        for turn in CHAT_TURNS:
            g.invoke(human(turn), cfg(T))
        assert rows_holding(db, CARD) < 3  # compressed: the raw bytes hide it
        receipt = saver.redact(T, [CARD])
        assert receipt.predicate["pre_state"]["leaves"] > 3
        assert all(CARD not in repr(s.values) for s in g.get_state_history(cfg(T)))
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_values_the_serde_cannot_decode_refuse(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "chat.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.serde = ZlibSerde()
        g = chat_graph(saver)
        for turn in CHAT_TURNS:
            g.invoke(human(turn), cfg(T))
    before = raw_rows(db, T)
    with (
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver,
        pytest.raises(NeedlesFoundError, match="cannot decode") as info,
    ):
        saver.redact(T, [CARD])
    assert {loc["column"] for loc in info.value.locations} <= {"checkpoint", "value"}
    assert raw_rows(db, T) == before


def test_store_items_in_the_saver_database(tmp_path: Path, signer: Signer) -> None:
    from langgraph.store.sqlite import SqliteStore

    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    ns = ("users", "alice")
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        store.put(ns, "card", {"note": f"card {CARD}", "n": 1})
        store.put(ns, "other", {"note": "nothing here"})
        store.put(("users", "bob"), "card", {"note": f"card {CARD}"})
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver:
            receipt = saver.redact(T, [CARD], store_namespaces=[ns])
            item = store.get(ns, "card")
            assert item is not None and item.value == {"note": "card [redacted]", "n": 1}
            assert store.get(ns, "other").value == {"note": "nothing here"}  # type: ignore[union-attr]
            assert CARD in store.get(("users", "bob"), "card").value["note"]  # type: ignore[union-attr]
    p = receipt.predicate
    assert p["pre_state"]["tables"]["store"]["rows"] == 1
    assert p["methods"] == {"checkpoints": "atomic-transaction", "store": "atomic-transaction"}
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_a_redaction_interrupted_after_commit_is_recovered(tmp_path: Path, signer: Signer) -> None:
    from erasure_receipts import ErasureIncompleteError
    from faults import faulty

    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    archive = tmp_path / "r3"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        with (
            faulty(saver, record_statement=OSError("disk gone")),
            pytest.raises(ErasureIncompleteError, match="recover_receipts"),
        ):
            saver.redact(T, [CARD])
        assert rows_holding(db, CARD) == 0  # committed
        assert [p.receipt_id for p in saver.pending_erasures()]
        (receipt,) = saver.recover_receipts(min_age_seconds=0)
        assert not saver.pending_erasures()
    p = receipt.predicate
    assert p["kind"] == "redaction" and "issued_from_journal" in [c["name"] for c in p["checks"]]
    verify_receipt(receipt.to_json(), [signer.public_key])
    assert (archive / f"{receipt.receipt_id}.json").exists()


def test_a_concurrent_writer_on_another_thread(tmp_path: Path, signer: Signer) -> None:
    import threading

    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    stop, wrote, errors = threading.Event(), [0], []

    def writer() -> None:
        try:
            conn = sqlite3.connect(db, check_same_thread=False, timeout=30)
            g = chat_graph(SqliteSaver(conn))
            while not stop.is_set() and wrote[0] < 200:
                g.invoke(human(f"busy {wrote[0]}"), cfg(OTHER))
                wrote[0] += 1
            conn.close()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
            receipts = [saver.redact(T, [CARD])]
            while wrote[0] < 5 and t.is_alive():
                stop.wait(0.05)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not t.is_alive() and not errors and wrote[0] >= 5
    verify_receipt(receipts[0].to_json(), [signer.public_key])
    assert rows_holding(db, CARD) == 0
    assert rows_holding(db, "[redacted]", thread=OTHER) == 0  # the other thread untouched
    assert rows_holding(db, BOB_SECRET, thread=OTHER) > 0


# A plain LangGraph writer in another process: reads a checkpoint of the thread (argv[3]
# "latest", or "stale": an old one holding the card, as a run that read the thread before
# the redaction), says so, then puts a new checkpoint to the same thread.
SAME_THREAD_WRITER = r"""
import sqlite3, sys
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

db, thread, which, card = sys.argv[1:5]
saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False, timeout=60))
config = {"configurable": {"thread_id": thread}}
if which == "latest":
    parent = saver.get_tuple(config)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": ["a late write after the redaction"]}
else:
    parent = next(t for t in saver.list(config) if card in repr(t.checkpoint))
    checkpoint = {**parent.checkpoint, "id": empty_checkpoint()["id"]}
print("writing", flush=True)
new = saver.put(parent.config, checkpoint, {"source": "update", "step": 99}, {})
print("written", new["configurable"]["checkpoint_id"], flush=True)
"""


def redact_while_writing(db: Path, signer: Signer, which: str) -> tuple[dict[str, Any], str]:
    """``redact(T, [CARD])`` paused inside its transaction (rows rewritten, not committed)
    while SAME_THREAD_WRITER puts to T; the writer must still be waiting a second later.
    After the commit the redaction's checks wait until the writer has landed. Returns
    ``{"receipt" | "error": ...}`` and the late checkpoint's id."""
    import subprocess
    import sys
    import threading

    from faults import FaultyProxy, faulty

    ids = checkpoint_ids(db)
    entered, resume = threading.Event(), threading.Event()
    out: dict[str, Any] = {}
    procs: list[subprocess.Popen[str]] = []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        real_db = saver._eraser.db

        def pausing_backend(*args: Any) -> Any:
            def write_journal(*a: Any, **kw: Any) -> None:
                entered.set()  # the rows are rewritten, the transaction not committed
                assert resume.wait(60)
                backend.write_journal(*a, **kw)

            def reduce_residue() -> Any:  # committed: the held-off writer lands now
                procs[0].wait(60)
                return backend.reduce_residue()

            backend = real_db.backend(*args)
            return FaultyProxy(
                backend, {"write_journal": write_journal, "reduce_residue": reduce_residue}
            )

        def run() -> None:
            try:
                with faulty(saver, db_backend=pausing_backend):
                    out["receipt"] = saver.redact(T, [CARD])
            except BaseException as exc:
                out["error"] = exc
                entered.set()

        redaction = threading.Thread(target=run)
        redaction.start()
        try:
            assert entered.wait(60) and "error" not in out, out
            writer = subprocess.Popen(
                [sys.executable, "-c", SAME_THREAD_WRITER, str(db), T, which, CARD],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            procs.append(writer)
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "writing"
            with pytest.raises(subprocess.TimeoutExpired):
                writer.wait(timeout=1.0)  # held off while the redaction is open
            assert checkpoint_ids(db) == ids
        finally:
            resume.set()
            redaction.join(60)
    stdout, stderr = writer.communicate(timeout=60)
    assert writer.returncode == 0, stderr
    return out, stdout.split()[-1]


def late_blob(db: Path, checkpoint_id: str) -> bytes:
    with sqlite3.connect(db) as conn:
        (blob,) = conn.execute(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
            (T, checkpoint_id),
        ).fetchone()
    conn.close()
    return bytes(blob)


def test_a_writer_on_the_same_thread_waits_for_the_redaction(
    tmp_path: Path, signer: Signer
) -> None:
    """The redaction holds the thread's writers off (SQLite ``BEGIN IMMEDIATE``): a put to
    the same thread from another process while the redaction's transaction is open waits,
    then lands after the commit - present, not rewritten, and not in the receipt. It lands
    before the redaction's checks after the commit: a checkpoint written after the commit
    is not one the redaction failed to keep."""
    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    ids, before = checkpoint_ids(db), leaf_map(db)
    out, late_id = redact_while_writing(db, signer, "latest")
    assert "error" not in out, out.get("error")
    # The late checkpoint is there (nothing lost), after every redacted one, as written.
    assert checkpoint_ids(db) == sorted([*ids, ("", late_id)])
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        history = [s.config["configurable"]["checkpoint_id"]
                   for s in chat_graph(saver).get_state_history(cfg(T))]  # fmt: skip
    assert history[0] == late_id and len(history) == len(ids) + 1
    blob = late_blob(db, late_id)
    assert b"a late write after the redaction" in blob and b"[redacted]" not in blob
    assert rows_holding(db, CARD) == 0  # nothing half-redacted
    # The receipt covers exactly the rows it rewrote: the late row is in neither digest.
    receipt = out["receipt"]
    verify_receipt(receipt.to_json(), [signer.public_key])
    p = receipt.predicate
    assert p["redaction"]["checkpoints_before"] == p["redaction"]["checkpoints_after"] == len(ids)
    assert {c["name"]: c["result"] for c in p["checks"]}["api_checkpoints_kept"] == "pass"
    after = leaf_map(db)
    changed = sorted(k for k in before if before[k] != after[k])
    assert ("checkpoints", T, "", late_id) in after and len(after) == len(before) + 1
    assert len(changed) == p["pre_state"]["leaves"] == p["post_state"]["leaves"]
    assert tree_of(before, changed) == p["pre_state"]["digest"]["sha256"]
    assert tree_of(after, changed) == p["post_state"]["digest"]["sha256"]


def test_a_held_off_writer_that_writes_the_needle_again_is_reported(
    tmp_path: Path, signer: Signer
) -> None:
    """A run that read the thread before the redaction and puts after it writes the card
    back: the redaction (committed) says so instead of returning a receipt, the late
    checkpoint is kept as written, and a second redaction removes it."""
    from erasure_receipts import ErasureIncompleteError

    db = tmp_path / "chat.db"
    chat(db, signer, tmp_path)
    ids = checkpoint_ids(db)
    out, late_id = redact_while_writing(db, signer, "stale")
    assert "receipt" not in out and isinstance(out["error"], ErasureIncompleteError)
    assert "a needle was written to the thread again meanwhile" in str(out["error"])
    assert checkpoint_ids(db) == sorted([*ids, ("", late_id)])  # nothing lost
    assert rows_holding(db, CARD) == 1 and CARD.encode() in late_blob(db, late_id)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        receipt = saver.redact(T, [CARD])
    verify_receipt(receipt.to_json(), [signer.public_key])
    assert receipt.predicate["pre_state"]["leaves"] == 1  # the late row only
    assert rows_holding(db, CARD) == 0
