"""``erase_compacted=`` on the PostgreSQL savers against a real server: a real
``create_agent`` with the real ``SummarizationMiddleware`` and a fake chat model. Once
the marker has left the state it is in no row; each compaction has one verifiable
receipt, whose ``postgres.vacuum`` entry says what VACUUM reached."""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from compaction_agent import COMPACTIONS, MARKER, TURNS, agent, cfg, contents, turn
from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    Signer,
    verify_receipt,
)
from pg_helpers import connect

T = "agent-thread"


def rows_with(dsn: str, value: str) -> int:
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM checkpoints "
            "        WHERE strpos(checkpoint::text || metadata::text, %(n)s) > 0)"
            " + (SELECT count(*) FROM checkpoint_blobs "
            "        WHERE position(convert_to(%(n)s, 'UTF8') in coalesce(blob, '')) > 0)"
            " + (SELECT count(*) FROM checkpoint_writes "
            "        WHERE position(convert_to(%(n)s, 'UTF8') in blob) > 0)",
            {"n": value},
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_erase_history_policy_with_vacuum(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=signer, erase_compacted=True, vacuum=True
    ) as saver:
        saver.setup()
        a = agent(saver)
        gone = False
        for i in range(TURNS):
            out = a.invoke(turn(i), cfg(T))
            assert contents(a.get_state(cfg(T)).values) == contents(out)
            gone = gone or MARKER not in repr(out)
            assert (rows_with(pg_db, MARKER) == 0) == gone, i
        got = saver.journal_receipts(T)
    assert len(got) == COMPACTIONS
    for r in got:
        v = verify_receipt(r.to_json(), [signer.public_key])
        p: dict[str, Any] = v.statement["predicate"]
        assert p["kind"] == "history"
        vacuum = [x for x in p["residue"] if x["action"] == "postgres.vacuum"]
        assert len(vacuum) == 1 and vacuum[0]["status"] in ("applied", "partial")
        assert "dead_tuples_after" in vacuum[0]["detail"]
        assert vacuum[0]["status"] == "applied" or vacuum[0]["detail"].get("horizon_holders")


async def test_async_redact_policy(pg_db: str, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as setup:
        setup.setup()
    async with AsyncConnectionPool(
        pg_db, kwargs={"autocommit": True, "row_factory": dict_row}, open=False
    ) as pool:
        saver = AsyncAttestingPostgresSaver(pool, signer=signer, erase_compacted="redact")
        a = agent(saver)
        for i in range(TURNS):
            await a.ainvoke(turn(i), cfg(T))
        history = [s async for s in a.aget_state_history(cfg(T))]
        assert len(history) > 3 * TURNS  # every checkpoint kept
        assert all(MARKER not in repr(s.values) for s in history)
        got = await saver.ajournal_receipts(T)
    assert rows_with(pg_db, MARKER) == 0
    assert len(got) == COMPACTIONS
    assert {r.predicate["kind"] for r in got} == {"redaction"}
