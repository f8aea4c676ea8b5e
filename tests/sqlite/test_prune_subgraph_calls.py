"""A finished subgraph call (namespace ``node:<task id>``) started from a root checkpoint
that the erasure removes is removed entirely - also when its checkpoints were written
after the kept root checkpoint (a call that finished later, or whose writer's clock is
ahead) - as LangGraph's ``prune(keep_latest)`` removes it. Calls started from the kept
root, calls whose root was never saved, and ``checkpointer=True`` subgraphs keep their
latest checkpoint. (PostgreSQL: LangGraph's own test, tests/upstream.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt

TID = "t"


def put(saver: Any, ns: str, parent: Any, step: int, parents: dict[str, str]) -> Any:
    cfg: dict[str, Any] = {"configurable": {"thread_id": TID, "checkpoint_ns": ns}}
    if parent is not None:
        cfg["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    c = empty_checkpoint()
    c["channel_values"], c["channel_versions"] = {"a": [step]}, {"a": str(step)}
    meta = {"source": "loop", "step": step, "parents": parents}
    return saver.put(cfg, c, meta, {"a": str(step)})


def test_sqlite_finished_call_written_after_the_kept_head_is_removed(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        older = put(saver, "", None, 0, {})
        head = put(saver, "", older, 1, {})
        roots = {
            "finished:1": older["configurable"]["checkpoint_id"],
            "interrupted:2": head["configurable"]["checkpoint_id"],
            "running:3": "1f0" + "0" * 33,  # never saved
            "checkpointer_true": older["configurable"]["checkpoint_id"],
        }
        for ns, root in roots.items():  # all written after the kept head
            parent = None
            for step in range(3):
                parent = put(saver, ns, parent, step, {"": root})
                saver.put_writes(parent, [("a", step)], f"task-{ns}-{step}")
        [r] = saver.prune([TID])
    assert verify_receipt(r.to_json(), [signer.public_key])
    raw = sqlite3.connect(db)
    left = {ns for (ns,) in raw.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}
    assert left == {"", "interrupted:2", "running:3", "checkpointer_true"}
    writes = {ns for (ns,) in raw.execute("SELECT DISTINCT checkpoint_ns FROM writes")}
    assert writes == {"interrupted:2", "running:3", "checkpointer_true"}
    assert raw.execute("SELECT count(*) FROM checkpoints").fetchone() == (4,)
    # the receipt counts the call's three checkpoints and writes as removed
    assert r.predicate["pre_state"]["tables"]["checkpoints"]["rows"] == 1 + 3 + 2 * 3
