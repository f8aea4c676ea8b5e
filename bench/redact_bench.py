"""Redaction vs history erasure on SQLite: forgetting one value in a 2,000-checkpoint
thread.

    python bench/redact_bench.py [--quick] [--rounds N]

A real ``StateGraph`` (one node answering each turn, a sliding window of the last four
messages: older ones are removed with ``RemoveMessage``) runs 667 turns on one thread
(three checkpoints each: 2,001); turn one carries a card number, which the window drops two turns
later. From a fresh copy of that file each time:

``redact``         ``saver.redact(thread, [card])``: every row read and decoded through
                   the serde, the few that hold the value rewritten, measured, checked,
                   signed (kind ``redaction``); every checkpoint stays.
``erase_history``  ``saver.erase_history(thread)``: every checkpoint but the latest
                   measured, deleted, checked, signed (kind ``history``).

Interleaved per round; the ratio redact / erase_history is reported (no target: the
two keep different things).

``turn``           the latency of one turn of the same graph with ``erase_compacted=``
                   off, ``"erase_history"`` and ``"redact"``: every turn of this graph
                   removes messages, so every turn compacts (the worst case); median over
                   the turns of a 60-turn thread, as a ratio to off.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_s, summary, write_result
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from erasure_receipts import AttestingSqliteSaver, Signer

SIGNER = Signer.from_seed(bytes(range(32)))
CARD = "4111-1111-1111-1111"
THREAD = "long-chat"
WINDOW = 4


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _reply(state: Chat) -> dict[str, Any]:
    msgs = state["messages"]
    old = [RemoveMessage(id=m.id) for m in msgs[: -WINDOW + 1] if m.id]
    return {"messages": [*old, AIMessage(content=f"noted: {msgs[-1].content}")]}


def seeded(path: Path, turns: int) -> int:
    """The thread: ``turns`` invokes; returns its checkpoint count."""
    conn = sqlite3.connect(path, check_same_thread=False)
    g = StateGraph(Chat)
    g.add_node("reply", _reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    graph = g.compile(checkpointer=SqliteSaver(conn))
    cfg = {"configurable": {"thread_id": THREAD}}
    for i in range(turns):
        text = f"my card is {CARD}" if i == 0 else f"question {i}: what about the weather?"
        graph.invoke({"messages": [HumanMessage(content=text)]}, cfg)
    n = int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])
    conn.close()
    return n


def run_once(path: Path, op: str) -> tuple[float, dict[str, Any]]:
    with AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER) as saver:
        saver.setup()
        t = time.perf_counter()
        receipt = saver.redact(THREAD, [CARD]) if op == "redact" else saver.erase_history(THREAD)
        elapsed = time.perf_counter() - t
    p = receipt.predicate
    with sqlite3.connect(path) as conn:
        left = int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])
    return elapsed, {"rows_in_receipt": p["pre_state"]["leaves"], "checkpoints_after": left}


def graph_on(saver: Any) -> Any:
    g = StateGraph(Chat)
    g.add_node("reply", _reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def turn_latency(tmp: Path, policy: Any, turns: int) -> list[float]:
    path = tmp / f"turns-{policy}.db"
    out = []
    with AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER,
                                               erase_compacted=policy) as saver:  # fmt: skip
        graph = graph_on(saver)
        cfg = {"configurable": {"thread_id": THREAD}}
        for i in range(turns):
            text = f"my card is {CARD} (turn {i})" if i % 10 == 0 else f"question {i}"
            t = time.perf_counter()
            graph.invoke({"messages": [HumanMessage(content=text)]}, cfg)
            out.append(time.perf_counter() - t)
    return out[5:]  # warm


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    turns = 200 if args.quick else 667
    samples: dict[str, list[float]] = {"redact": [], "erase_history": []}
    facts: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        source = tmp / "source.db"
        checkpoints = seeded(source, turns)
        for r in range(rounds):
            for op in list(samples) if r % 2 == 0 else list(samples)[::-1]:
                copy = tmp / f"{r}-{op}.db"
                shutil.copy(source, copy)
                elapsed, facts[op] = run_once(copy, op)
                samples[op].append(elapsed)
                copy.unlink()
        per_turn = {str(p): turn_latency(tmp, p, 30 if args.quick else 60)
                    for p in (False, "erase_history", "redact")}  # fmt: skip
    ratio = statistics.median(samples["redact"]) / statistics.median(samples["erase_history"])
    off = statistics.median(per_turn["False"])
    turn_ratio = {k: round(statistics.median(v) / off, 3) for k, v in per_turn.items()}
    for k, v in per_turn.items():
        print(
            f"  turn, erase_compacted={k:<14} {fmt_s(statistics.median(v)):>10}  "
            f"x{turn_ratio[k]:.2f}"
        )
    for op, s in samples.items():
        print(f"  {op:<14} {fmt_s(statistics.median(s)):>10}  {facts[op]}")
    print(f"  redact / erase_history  x{ratio:.2f}  ({checkpoints} checkpoints)")
    path = write_result("redact_bench", {
        "mode": "quick" if args.quick else "full", "rounds": rounds, "turns": turns,
        "checkpoints": checkpoints, "seconds": {k: summary(v) for k, v in samples.items()},
        "facts": facts, "ratio_redact_to_erase_history": round(ratio, 4),
        "turn_seconds": {k: summary(v) for k, v in per_turn.items()},
        "turn_ratio_to_off": turn_ratio,
    })  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
