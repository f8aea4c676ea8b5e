"""What per-subject encryption costs normal operation: ``put`` + ``get_tuple`` of a 20 KB
checkpoint through the attesting saver with ``encryption=`` vs without.

    python bench/shred_bench.py [--quick] [--rounds N] [--pg DSN]

Each operation is one ``put`` of a new checkpoint (20 KB of channel values: 100 messages
of ~200 bytes, the application serializer's output sealed with AES-256-GCM) followed by
``get_tuple`` of it (decrypted and checked against its row). Two files (or, with
``--pg``, two databases on the same server), the same saver class, one with
``Encryption(KeyStore(...))``: the key store is a separate SQLite file, its key cached
after the first write (as in a running application). Interleaved per round; reported as
throughput with encryption / without, target >= 0.8.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_s, print_verdicts, summary, verdict, write_result
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from erasure_receipts import AttestingSqliteSaver, Encryption, KeyStore, LocalKeyWrapper, Signer

SIGNER = Signer.from_seed(bytes(range(32)))
STATE = {"messages": [f"message {j}: " + "x" * 190 for j in range(100)], "note": "n" * 64}


def _ops(saver: Any, thread: str, n: int) -> float:
    """Seconds per put + get_tuple, over ``n`` new checkpoints of ``thread``."""
    cfg: dict[str, Any] = {
        "configurable": {"thread_id": thread, "checkpoint_ns": "", "user_id": "alice"}
    }
    version = None
    t = time.perf_counter()
    for i in range(n):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        version = saver.get_next_version(version, None)
        cp["channel_values"] = dict(STATE)
        cp["channel_versions"] = {"messages": version, "note": version}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": i}, {"messages": version,
                                                                 "note": version})  # fmt: skip
        cfg["configurable"]["user_id"] = "alice"
        got = saver.get_tuple(cfg)
        assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 100
    return (time.perf_counter() - t) / n


def _sqlite_savers(tmp: Path) -> tuple[Any, Any, list[Any]]:
    import sqlite3

    keys = KeyStore(tmp / "keys.sqlite", LocalKeyWrapper.generate(tmp / "master.key"))
    a = sqlite3.connect(tmp / "plain.sqlite", check_same_thread=False)
    b = sqlite3.connect(tmp / "encrypted.sqlite", check_same_thread=False)
    plain = AttestingSqliteSaver(a, signer=SIGNER)
    enc = AttestingSqliteSaver(b, signer=SIGNER, encryption=Encryption(keys))
    plain.setup()
    enc.setup()
    return plain, enc, [a, b, keys]


def _pg_savers(tmp: Path, dsn: str) -> tuple[Any, Any, list[Any]]:
    import psycopg
    from psycopg.rows import dict_row

    from erasure_receipts import AttestingPostgresSaver

    names = [f"bench_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with psycopg.connect(dsn, autocommit=True) as c:
        for n in names:
            c.execute(f'CREATE DATABASE "{n}"')
    conns = [
        psycopg.connect(psycopg.conninfo.make_conninfo(dsn, dbname=n), autocommit=True,
                        prepare_threshold=0, row_factory=dict_row)
        for n in names
    ]  # fmt: skip
    keys = KeyStore(tmp / "keys.sqlite", LocalKeyWrapper.generate(tmp / "master.key"))
    plain = AttestingPostgresSaver(conns[0], signer=SIGNER)
    enc = AttestingPostgresSaver(conns[1], signer=SIGNER, encryption=Encryption(keys))
    plain.setup()
    enc.setup()
    return plain, enc, [*conns, keys]


def bench(tmp: Path, rounds: int, n: int, dsn: str | None) -> dict[str, Any]:
    plain, enc, close = _pg_savers(tmp, dsn) if dsn else _sqlite_savers(tmp)
    _ops(plain, "warm", 5)
    _ops(enc, "warm", 5)
    samples: dict[str, list[float]] = {"plain": [], "encrypted": []}
    for r in range(rounds):
        order = ["plain", "encrypted"] if r % 2 == 0 else ["encrypted", "plain"]
        for name in order:
            saver = plain if name == "plain" else enc
            samples[name].append(_ops(saver, f"t{r}", n))
    for c in close:
        c.close()
    ratio = statistics.median(samples["plain"]) / statistics.median(samples["encrypted"])
    return {"backend": "postgres" if dsn else "sqlite", "ops_per_round": n,
            "state_bytes": sum(len(m) for m in STATE["messages"]) + len(STATE["note"]),
            "seconds_per_op": {k: summary(v) for k, v in samples.items()},
            "throughput_encrypted_over_plain": ratio}  # fmt: skip


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument(
        "--pg", default=None, help="PostgreSQL DSN (server where two databases are made)"
    )
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    n = 50 if args.quick else 200
    results = {}
    with tempfile.TemporaryDirectory() as d:
        results["sqlite"] = (
            bench(Path(d) / "s", rounds, n, None) if (Path(d) / "s").mkdir() is None else {}
        )
        if args.pg:
            (Path(d) / "p").mkdir()
            results["postgres"] = bench(Path(d) / "p", rounds, n, args.pg)
    verdicts = {
        f"{k}: put+get_tuple throughput, encrypted / plain": verdict(
            v["throughput_encrypted_over_plain"], 0.8, ">="
        )
        for k, v in results.items()
    }
    for k, v in results.items():
        s, ratio = v["seconds_per_op"], v["throughput_encrypted_over_plain"]
        print(f"  {k:<9} plain {fmt_s(s['plain']['median']):>10}  encrypted "
              f"{fmt_s(s['encrypted']['median']):>10}  ratio {ratio:.3f}")  # fmt: skip
    print_verdicts(verdicts)
    path = write_result("shred_bench", {"rounds": rounds, **results, "verdicts": verdicts})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
