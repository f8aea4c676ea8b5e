"""The adapter really swaps the class: inside a vendored test's session LangGraph's
names are the attesting savers (or LangGraph's own with ERASURE_RECEIPTS_UPSTREAM)."""

from __future__ import annotations

import langgraph.checkpoint.postgres as lg_postgres
import langgraph.checkpoint.postgres.aio as lg_postgres_aio
import langgraph.checkpoint.sqlite as lg_sqlite
import langgraph.checkpoint.sqlite.aio as lg_sqlite_aio

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AsyncAttestingSqliteSaver,
    AttestingPostgresSaver,
    AttestingSqliteSaver,
)

from .conftest import UPSTREAM


def test_the_classes_are_swapped() -> None:
    pairs = [
        (lg_sqlite.SqliteSaver, AttestingSqliteSaver),
        (lg_sqlite_aio.AsyncSqliteSaver, AsyncAttestingSqliteSaver),
        (lg_postgres.PostgresSaver, AttestingPostgresSaver),
        (lg_postgres_aio.AsyncPostgresSaver, AsyncAttestingPostgresSaver),
    ]
    for named, attesting in pairs:
        assert issubclass(named, attesting) is not UPSTREAM


def test_a_swapped_saver_attests(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from langgraph.checkpoint.base import empty_checkpoint

    if UPSTREAM:
        return
    with lg_sqlite.SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        saver.put(cfg, empty_checkpoint(), {}, {})
        saver.delete_thread("t")
        assert saver.last_receipt is not None


def test_the_vendored_files_are_unchanged() -> None:
    """Byte-identical to the released sdists (README.md): only the adapter is ours."""
    import hashlib
    from pathlib import Path

    here = Path(__file__).parent
    for line in (here / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        assert hashlib.sha256((here / name).read_bytes()).hexdigest() == digest, name
