"""Redaction of threads written with ``encryption=`` on PostgreSQL: channel values in
``checkpoint_blobs`` and pending writes are opened with the saver's key against their
row, the needle replaced and the value sealed again to the same row; store items sealed
by ``Encryption.wrap_store`` likewise. Without the key the sealed rows are named and
nothing changes."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from erasure_receipts import (
    AttestingPostgresSaver,
    Encryption,
    KeyStore,
    NeedlesFoundError,
    Signer,
    verify_receipt,
)
from erasure_receipts.shredding import SEALED_TYPE
from pg_helpers import all_raw_text, connect
from test_encryption_postgres import keys, keys_db  # noqa: F401 (fixtures)
from test_encryption_sqlite import MARKER, build, cfg

THREADS = (("alice-1", "alice"), ("alice-2", "alice"))


def raw_rows(dsn: str) -> list[Any]:
    with connect(dsn) as c:
        out: list[Any] = []
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "store"):
            out += [r[0] for r in c.execute(f"SELECT t::text FROM {table} t ORDER BY 1")]
    return out


def decrypted(saver: Any, thread: str) -> list[str]:
    return [
        repr((t.checkpoint, t.pending_writes))
        for t in saver.list({"configurable": {"thread_id": thread}})
    ]


def test_pg_redact_an_encrypted_thread(pg_db: str, keys: KeyStore, signer: Signer) -> None:  # noqa: F811
    from langgraph.store.postgres import PostgresStore

    enc = Encryption(keys)
    with (
        PostgresStore.from_conn_string(pg_db) as raw,
        AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=enc, store=raw
        ) as saver,
    ):
        raw.setup()
        saver.setup()
        store = enc.wrap_store(raw, lambda ns: ns[1])
        store.put(("users", "alice"), "profile", {"email": f"alice@{MARKER}.example"})
        graph = build(saver)
        for thread, user in THREADS:
            for text in ("hello", f"my secret is {MARKER}", "bye"):
                graph.invoke({"messages": [HumanMessage(content=text)]}, cfg(thread, user))
        before = decrypted(saver, "alice-1")
        assert sum(MARKER in c for c in before) >= 2
        assert MARKER not in all_raw_text(pg_db)

        # Without the key: the sealed rows are named, nothing changes.
        rows = raw_rows(pg_db)
        with (
            AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as plain,
            pytest.raises(NeedlesFoundError, match="sealed") as exc,
        ):
            plain.redact("alice-1", [MARKER])
        tables = {loc["table"] for loc in exc.value.locations}
        assert tables == {"checkpoint_blobs", "checkpoint_writes"}
        assert raw_rows(pg_db) == rows

        receipt = saver.redact("alice-1", [MARKER], store_namespaces=[("users", "alice")])
        verify_receipt(receipt, [signer.public_key])
        assert receipt.predicate["status"] == "redacted"
        after = decrypted(saver, "alice-1")
        assert len(after) == len(before)
        assert not any(MARKER in c for c in after)
        assert sum("[redacted]" in c for c in after) >= 2
        assert any(MARKER in c for c in decrypted(saver, "alice-2"))
        assert store.get(("users", "alice"), "profile").value == {
            "email": "alice@[redacted].example"
        }
        text = all_raw_text(pg_db)
        assert MARKER not in text and "[redacted]" not in text
        with connect(pg_db) as c:
            q = ("SELECT type FROM checkpoint_blobs WHERE thread_id='alice-1' UNION "
                 "SELECT type FROM checkpoint_writes WHERE thread_id='alice-1'")  # fmt: skip
            types = {r[0] for r in c.execute(q).fetchall()}
            (value,) = c.execute("SELECT value::text FROM store").fetchone()
        assert types <= {SEALED_TYPE, "empty"}
        assert "[redacted]" not in value and "__erasure_receipts_sealed__" in value
        out = graph.invoke({"messages": [HumanMessage(content="more")]}, cfg("alice-1", "alice"))
        assert MARKER not in repr(out)
