"""The PostgreSQL backend reads a scope's rows in one round trip when they fit a page,
and through a server-side cursor when they do not: both paths give every row, in order,
and an erasure whose tables hold more than a page measures the same digest as an
independent reader."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import tuple_row

from erasure_receipts import AttestingPostgresSaver, Signer, verify_receipt
from erasure_receipts._backends.postgres.session import FETCH_ROWS, SyncSession, stream
from pg_helpers import connect, count, independent_digest

SIZES = [0, 1, FETCH_ROWS - 1, FETCH_ROWS, FETCH_ROWS + 1, 2 * FETCH_ROWS + 7]


@pytest.mark.parametrize("lock", [False, True])
def test_stream_gives_every_row_in_order_at_every_page_boundary(pg_db: str, lock: bool) -> None:
    with connect(pg_db) as c:
        c.execute("CREATE TABLE t (k int NOT NULL, i int NOT NULL, v bytea, PRIMARY KEY (k, i))")
        for k, n in enumerate(SIZES):
            c.execute(
                "INSERT INTO t SELECT %s, g, sha256(g::text::bytea) FROM generate_series(1, %s) g",
                (k, n),
            )
    with psycopg.connect(pg_db, row_factory=tuple_row) as conn:
        session = SyncSession(conn)
        for k, n in enumerate(SIZES):
            sql = "SELECT i, v FROM t WHERE k = %s ORDER BY i" + (" FOR UPDATE" if lock else "")
            with session.transaction():
                got = list(stream(session, sql, [k], "s_t"))
                # the cursor is closed (its name free again) however the rows came
                again = list(stream(session, sql, [k], "s_t"))
                # told to expect more than a page: the cursor from the start, same rows
                cursor_only = list(stream(session, sql, [k], "s_t", expect=FETCH_ROWS + 1))
            expected = conn.execute("SELECT i, v FROM t WHERE k = %s ORDER BY i", (k,)).fetchall()
            conn.rollback()
            assert [r[0] for r in got] == list(range(1, n + 1))
            assert [(r[0], bytes(r[1])) for r in got] == [(i, bytes(v)) for i, v in expected]
            assert got == again == cursor_only


def _checkpoint(cid: str) -> Any:
    return {"v": 4, "id": cid, "ts": "2026-01-01T00:00:00+00:00", "channel_values": {},
            "channel_versions": {}, "versions_seen": {}}  # fmt: skip


def test_erasure_of_a_thread_larger_than_a_page_measures_every_row(pg_db: str) -> None:
    signer = Signer.generate()
    thread = "big-thread"
    n = FETCH_ROWS + 37
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        config: Any = saver.put(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            _checkpoint("1ef00000-0000-6000-8000-000000000001"), {"step": 1}, {},
        )  # fmt: skip
        saver.put_writes(config, [("messages", f"w{i}") for i in range(n)], "task-1")
        saver.put(
            {"configurable": {"thread_id": "bystander", "checkpoint_ns": ""}},
            _checkpoint("1ef00000-0000-6000-8000-000000000002"), {"step": 1}, {},
        )  # fmt: skip
        assert count(pg_db, "checkpoint_writes", "thread_id = %s", (thread,)) == n
        scope = {
            "checkpoints": ("thread_id = %s", (thread,)),
            "checkpoint_blobs": ("thread_id = %s", (thread,)),
            "checkpoint_writes": ("thread_id = %s", (thread,)),
        }
        expected = independent_digest(pg_db, scope)
        receipt = saver.erase_thread(thread)
    assert receipt.pre_digest == expected
    assert receipt.predicate["pre_state"]["tables"]["checkpoint_writes"]["rows"] == n
    assert count(pg_db, "checkpoint_writes", "thread_id = %s", (thread,)) == 0
    assert count(pg_db, "checkpoints", "thread_id = %s", ("bystander",)) == 1
    verify_receipt(receipt.to_json(), signer.public_key)


def test_several_threads_read_together_never_answer_from_an_earlier_read(pg_db: str) -> None:
    """A subject's threads are read by one statement per table; a preview after a write
    sees the write (nothing read before answers after), each thread's unit equals an
    independent digest of that thread alone, and the erasure leaves no row of any."""
    signer = Signer.generate()
    threads = ["s-1", "s-2", "s-3"]
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        for n, t in enumerate(threads):
            for ns in ("", "inner"):
                config: Any = saver.put(
                    {"configurable": {"thread_id": t, "checkpoint_ns": ns}},
                    _checkpoint(f"1ef00000-0000-6000-8000-00000000000{n}"), {"step": 1}, {},
                )  # fmt: skip
                saver.put_writes(config, [("messages", f"{t}{ns}{i}") for i in range(n + 1)], "k")
        first = saver.digest_subject("s", threads=threads)
        again = saver.digest_subject("s", threads=threads)
        assert again.digest == first.digest
        saver.put_writes(config, [("messages", "late")], "k2")  # s-3, namespace "inner"
        changed = saver.digest_subject("s", threads=threads)
        assert changed.digest != first.digest
        expected = {
            t: independent_digest(pg_db, {tb: ("thread_id = %s", (t,)) for tb in
                                          ("checkpoints", "checkpoint_blobs", "checkpoint_writes")})
            for t in threads
        }  # fmt: skip
        receipt = saver.erase_subject("s", threads=threads)
    units = {u["name"]: u["digest"]["sha256"] for u in receipt.predicate["units"]}
    assert units == {f"thread:{t}": d for t, d in expected.items()}
    assert receipt.predicate["pre_state"]["tables"]["checkpoint_writes"]["rows"] == 6 + 6 + 1
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        assert count(pg_db, table, "thread_id = ANY(%s)", (threads,)) == 0
    verify_receipt(receipt.to_json(), signer.public_key)


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the backend's sessions send, in order."""
    sent: list[str] = []
    for name in ("query", "execute"):
        real = getattr(SyncSession, name)

        def spy(self: SyncSession, sql: str, params: Any = (), _real: Any = real) -> Any:
            sent.append(" ".join(sql.split()))
            return _real(self, sql, params)

        monkeypatch.setattr(SyncSession, name, spy)
    return sent


@pytest.mark.parametrize("checkpoints", [3, FETCH_ROWS + 5])
def test_a_thread_of_more_checkpoints_than_a_page_is_read_once(
    pg_db: str, monkeypatch: pytest.MonkeyPatch, checkpoints: int
) -> None:
    """The erasure counts the scope's checkpoints under its lock: more than a page, and
    every table is read through the cursor at once (its first page is not read twice,
    as a LIMIT try would); a small thread keeps its one-round-trip read. Either way
    the digest is an independent reader's."""
    signer = Signer.generate()
    thread = "t-many"
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for i in range(checkpoints):
            cid = f"1ef00000-0000-6000-8000-{i:012d}"
            config = saver.put(config, {**_checkpoint(cid), "channel_values": {"m": "x" * 50},
                                        "channel_versions": {"m": f"{i:032d}"}},
                               {"step": i}, {"m": f"{i:032d}"})  # fmt: skip
        scope = {t: ("thread_id = %s", (thread,))
                 for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")}  # fmt: skip
        expected = independent_digest(pg_db, scope)
        sent = _reads(monkeypatch)
        receipt = saver.erase_thread(thread)
    assert receipt.pre_digest == expected
    assert receipt.predicate["pre_state"]["tables"]["checkpoints"]["rows"] == checkpoints
    before_delete = sent[: next(i for i, q in enumerate(sent) if q.startswith("WITH d AS (DELETE"))]
    tries = [q for q in before_delete if f"LIMIT {FETCH_ROWS + 1}" in q]
    declared = [q for q in before_delete if q.startswith("DECLARE")]
    if checkpoints > FETCH_ROWS:
        assert tries == [] and len(declared) == 3
    else:
        assert len(tries) == 3 and declared == []
