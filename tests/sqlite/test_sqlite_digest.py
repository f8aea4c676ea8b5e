"""Digests of SQLite databases are read-only previews, also on a read-only connection, and a
database that is not LangGraph's is refused without being changed."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from erasure_receipts import AttestingSqliteSaver, NotALangGraphDatabaseError, Signer
from test_residue_scan import put


def file_bytes(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


# -- read-only previews; databases that are not LangGraph's ------------------------------


def test_digest_is_read_only_and_works_on_a_read_only_connection(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t", 1, "hello")
        expected = s.digest_thread("t")
    before = file_bytes(db)
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    d = AttestingSqliteSaver(ro, signer=signer).digest_thread("t")
    ro.close()
    assert d == expected and d.leaves == 1
    assert file_bytes(db) == before
    # a WAL reader may create an empty -wal (and the -shm index); never content
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0


@pytest.mark.parametrize("content", [b"", b"not a database at all", None])
def test_digest_of_a_database_without_langgraph_tables(
    tmp_path: Path, signer: Signer, content: bytes | None
) -> None:
    db = tmp_path / "x.db"
    if content is None:
        with sqlite3.connect(db) as c:
            c.execute("CREATE TABLE customers (id INTEGER)")
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    with pytest.raises((NotALangGraphDatabaseError, sqlite3.DatabaseError)):
        AttestingSqliteSaver(conn, signer=signer).digest_thread("t")
    conn.close()
    assert db.read_bytes() == before
