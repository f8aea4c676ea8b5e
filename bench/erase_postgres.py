"""PostgreSQL erasure, write-path cost, races and crashes of the Postgres savers.

    python bench/erase_postgres.py [--quick] [--only erase,scale,put,race,crash] [--dsn DSN]

Without ``--dsn`` (or ``$ERASURE_RECEIPTS_PG_DSN``) a throw-away server is started with
``tests/pg_server.py``. Every part uses fresh databases and reports ratios against a
baseline measured in the same run, interleaved:

``erase``  A template thread of 2,000 checkpoints (each with a ~2 KB blob and 2 pending
           writes) is written through the saver; each round copies it (SQL) to two
           fresh thread ids and times (a) ``AttestingPostgresSaver.erase_thread`` and
           (b) SELECT of the thread's rows from the three tables (all bytes fetched)
           + plain ``PostgresSaver.delete_thread``. Target: the median of the rounds'
           paired (a)/(b) <= 1.5 (aim 1.2); the ratio of medians is reported too.
``scale``  The same erasure in a database holding >= 100,000 checkpoints over >= 1,000
           other threads vs a near-empty database. Target <= 1.2 (index use).
``put``    ``put`` + ``put_writes`` throughput with the tombstone triggers installed vs
           plain ``PostgresSaver`` in a database without them, 11 rounds. Target: the
           median of the rounds' paired ratios >= 0.95 (the ratio of medians is
           reported too). Two
           more arms attribute the cost: the attesting saver in a database whose
           triggers are disabled (the saver's own Python), and plain ``PostgresSaver``
           in the database with the triggers (the triggers alone).
``race``   8 processes writing other threads + 1 writing the target (plain
           ``PostgresSaver`` on odd repetitions) while the target is erased, >= 20
           repetitions: lost rows elsewhere, surviving target rows and receipt count
           mismatches must all be 0.
``crash``  kill -9 of the erasing process at a random point, >= 50 trials, then
           ``recover_receipts``: each thread is intact with no receipt, or erased with
           exactly one receipt (journal and archive agree, pre-digest as measured).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.adapt import Loader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS_DIR, code_state, print_verdicts, summary, verdict, write_result
from langgraph.checkpoint.postgres import PostgresSaver

import pg_server
from erasure_receipts import AttestingPostgresSaver, Signer
from pg_race import crash_once, race_once, write_one

SIGNER = Signer.from_seed(bytes(range(32)))
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@contextmanager
def server(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    root = pg_server.new_root()
    try:
        yield pg_server.start(root)
    finally:
        pg_server.stop(root)


@contextmanager
def database(dsn: str, name: str) -> Iterator[str]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


PAD = 25_000
"""Bytes of text per checkpoint's channel value (a long message history), as in the
SQLite benchmark (~2,000 checkpoints, ~50 MB)."""


def write_thread(dsn: str, thread: str, steps: int, pad: int = PAD) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        for i in range(steps):
            write_one(saver, thread, i, pad)


def copy_thread(conn: psycopg.Connection[Any], src: str, dst: str, times: int = 1) -> None:
    """Copy a thread's rows to ``dst`` (or ``dst-1..times``) with plain SQL."""
    for table in TABLES:
        cols = [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "ORDER BY ordinal_position",
                (table,),
            )
        ]
        rest = sql.SQL(", ").join(sql.Identifier(c) for c in cols if c != "thread_id")
        names = sql.SQL(", ").join(sql.Identifier(c) for c in cols if c != "thread_id")
        if times == 1:
            q = sql.SQL(
                "INSERT INTO {t} (thread_id, {n}) SELECT %s, {r} FROM {t} WHERE thread_id = %s"
            )
            conn.execute(q.format(t=sql.Identifier(table), n=names, r=rest), (dst, src))
        else:
            q = sql.SQL(
                "INSERT INTO {t} (thread_id, {n}) SELECT %s || '-' || g, {r} "
                "FROM {t}, generate_series(1, %s) g WHERE thread_id = %s"
            )
            conn.execute(q.format(t=sql.Identifier(table), n=names, r=rest), (dst, times, src))


def count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
    return int(row[0]) if row else 0


def timed_erase(dsn: str, thread: str) -> float:
    with AttestingPostgresSaver.from_conn_string(dsn, signer=SIGNER) as saver:
        saver.setup()
        t0 = time.perf_counter()
        saver.erase_thread(thread)
        return time.perf_counter() - t0


class _RawJsonb(Loader):
    """jsonb as its raw bytes: the baseline fetches every byte but parses nothing."""

    format = pq.Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


def timed_select_delete(dsn: str, thread: str) -> float:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        PostgresSaver.from_conn_string(dsn) as saver,
    ):
        conn.adapters.register_loader("jsonb", _RawJsonb)
        t0 = time.perf_counter()
        with conn.cursor(binary=True) as cur:
            for table in TABLES:
                q = sql.SQL("SELECT * FROM {} WHERE thread_id = %s").format(sql.Identifier(table))
                cur.execute(q, (thread,))
                cur.fetchall()
        saver.delete_thread(thread)
        return time.perf_counter() - t0


def part_erase(dsn: str, steps: int, rounds: int) -> dict[str, Any]:
    with database(dsn, "bench_erase") as db:
        write_thread(db, "template", steps)
        with AttestingPostgresSaver.from_conn_string(db, signer=SIGNER) as s:
            s.setup()
        with psycopg.connect(db, autocommit=True) as c:
            c.execute("VACUUM ANALYZE")
            size = c.execute("SELECT pg_total_relation_size('checkpoint_blobs')").fetchone()
        erase, base = [], []
        for r in range(rounds):
            with psycopg.connect(db, autocommit=True) as c:
                copy_thread(c, "template", f"a{r}")
                copy_thread(c, "template", f"b{r}")
            pair = [("erase", f"a{r}"), ("base", f"b{r}")]
            for kind, thread in pair if r % 2 == 0 else reversed(pair):
                if kind == "erase":
                    erase.append(timed_erase(db, thread))
                else:
                    base.append(timed_select_delete(db, thread))
    # Each round's erasure over its own baseline (same copy, run back to back): the
    # server's background work (WAL, checkpoints) moves both, so the paired ratio is
    # steadier than a ratio of medians, which is reported too.
    paired = sorted(e / b for e, b in zip(erase, base, strict=True))
    ratio = statistics.median(paired)
    return {
        "checkpoints": steps,
        "checkpoint_blobs_total_bytes": int(size[0]) if size and size[0] else 0,
        "erase_s": summary(erase),
        "select_delete_s": summary(base),
        "paired_ratios": [round(x, 3) for x in paired],
        "ratio_of_medians": round(statistics.median(erase) / statistics.median(base), 4),
        "verdict": verdict(ratio, 1.5, "<="),
    }


def part_scale(
    dsn: str, steps: int, filler_threads: int, per_filler: int, rounds: int
) -> dict[str, Any]:
    times: dict[str, list[float]] = {"big": [], "small": []}
    with database(dsn, "bench_big") as big, database(dsn, "bench_small") as small:
        for db in (big, small):
            write_thread(db, "template", steps)
        write_thread(big, "filler-template", per_filler, pad=200)
        with psycopg.connect(big, autocommit=True) as c:
            copy_thread(c, "filler-template", "filler", times=filler_threads)
            n_big = count(c, "checkpoints")
        for db in (big, small):
            with AttestingPostgresSaver.from_conn_string(db, signer=SIGNER) as s:
                s.setup()
            with psycopg.connect(db, autocommit=True) as c:
                for r in range(rounds):
                    copy_thread(c, "template", f"t{r}")
                c.execute("VACUUM ANALYZE")
        for r in range(rounds):
            order = [("big", big), ("small", small)]
            for name, db in order if r % 2 == 0 else reversed(order):
                times[name].append(timed_erase(db, f"t{r}"))
    ratio = statistics.median(times["big"]) / statistics.median(times["small"])
    return {
        "target_checkpoints": steps,
        "big_db_checkpoints": n_big,
        "big_db_threads": filler_threads + rounds + 2,
        "big_s": summary(times["big"]),
        "small_s": summary(times["small"]),
        "verdict": verdict(ratio, 1.2, "<="),
    }


def part_put(dsn: str, n: int, rounds: int) -> dict[str, Any]:
    arms = ("attesting", "plain", "attesting, triggers disabled", "plain, triggers installed")
    rates: dict[str, list[float]] = {a: [] for a in arms}
    with (
        database(dsn, "bench_put_a") as da,
        database(dsn, "bench_put_p") as dp,
        database(dsn, "bench_put_n") as dn,
    ):
        for db in (da, dn):
            with AttestingPostgresSaver.from_conn_string(db, signer=SIGNER) as s:
                s.setup()
        with psycopg.connect(dn, autocommit=True) as c:
            for table in TABLES:
                c.execute(
                    sql.SQL("ALTER TABLE {} DISABLE TRIGGER erasure_tombstone").format(
                        sql.Identifier(table)
                    )
                )
        with PostgresSaver.from_conn_string(dp) as s:
            s.setup()
        where = dict(zip(arms, (da, dp, dn, da), strict=True))
        for r in range(rounds):
            order = list(arms[r % len(arms) :] + arms[: r % len(arms)])
            for name in order:
                db = where[name]
                cm: Any = (
                    AttestingPostgresSaver.from_conn_string(db, signer=SIGNER)
                    if name.startswith("attesting")
                    else PostgresSaver.from_conn_string(db)
                )
                with cm as saver:
                    t0 = time.perf_counter()
                    for i in range(n):
                        write_one(saver, f"{name}-{r}", i, 2_000)
                    rates[name].append(n / (time.perf_counter() - t0))
        server_side = trigger_server_side(dn, 2_000 if n < 1000 else 20_000, 3)
    med = {k: statistics.median(v) for k, v in rates.items()}
    # Each round's arms run back to back: the server's background work (WAL, checkpoints,
    # autovacuum) moves a round's arms together, so the paired ratios are steadier.
    paired = sorted(a / p for a, p in zip(rates["attesting"], rates["plain"], strict=True))
    ratio = statistics.median(paired)
    return {
        "puts_per_round": n,
        "attesting_per_s": summary(rates["attesting"]),
        "plain_per_s": summary(rates["plain"]),
        "rates_per_s": {k: summary(v) for k, v in rates.items()},
        "paired_ratios": [round(x, 3) for x in paired],
        "ratio_of_medians": round(med["attesting"] / med["plain"], 4),
        "attribution": {
            "saver's Python (attesting, triggers disabled / plain)": round(
                med["attesting, triggers disabled"] / med["plain"], 4
            ),
            "triggers (plain with them / plain)": round(
                med["plain, triggers installed"] / med["plain"], 4
            ),
            "extra microseconds per superstep (4 rows), triggers": round(
                1e6 / med["plain, triggers installed"] - 1e6 / med["plain"], 1
            ),
        },
        "trigger_server_side_us_per_row": server_side,
        "verdict": verdict(ratio, 0.95, ">="),
    }


def trigger_server_side(db: str, n: int, reps: int) -> dict[str, float]:
    """Microseconds a one-row transaction spends in the server (a procedure inserting a
    row and committing, ``n`` times, no round trips) with the library's trigger function,
    with an empty PL/pgSQL trigger, and with none: the medians of ``reps``, the last two
    as differences from none."""
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("CREATE TABLE bench_trigger (thread_id text, checkpoint_ns text, "
                  "checkpoint_id text, v text)")  # fmt: skip
        c.execute("CREATE FUNCTION bench_empty() RETURNS trigger LANGUAGE plpgsql AS "
                  "$$ BEGIN RETURN NEW; END $$")  # fmt: skip
        c.execute(
            "CREATE PROCEDURE bench_insert(n int) LANGUAGE plpgsql AS $$ BEGIN "
            "FOR i IN 1..n LOOP INSERT INTO bench_trigger VALUES ('t' || (i % 50), '', "
            "i::text, 'x'); COMMIT; END LOOP; END $$"
        )
        functions = {"none": None, "empty PL/pgSQL trigger": "bench_empty()",
                     "the library's trigger": "erasure_receipts_refuse_erased()"}  # fmt: skip
        times: dict[str, list[float]] = {k: [] for k in functions}
        for _ in range(reps):
            for name, function in functions.items():
                c.execute("DROP TRIGGER IF EXISTS bench ON bench_trigger")
                if function is not None:
                    c.execute(
                        "CREATE TRIGGER bench BEFORE INSERT ON bench_trigger FOR EACH ROW "
                        f"EXECUTE FUNCTION {function}"  # type: ignore[arg-type]
                    )
                c.execute("TRUNCATE bench_trigger")
                t0 = time.perf_counter()
                c.execute("CALL bench_insert(%s)", (n,))
                times[name].append((time.perf_counter() - t0) / n * 1e6)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "one-row transaction, no trigger": round(med["none"], 2),
        "+ empty PL/pgSQL trigger": round(med["empty PL/pgSQL trigger"] - med["none"], 2),
        "+ the library's trigger": round(med["the library's trigger"] - med["none"], 2),
    }


def part_race(dsn: str, reps: int) -> dict[str, Any]:
    totals = Counter()
    with database(dsn, "bench_race") as db:
        with AttestingPostgresSaver.from_conn_string(db, signer=SIGNER) as s:
            s.setup()
        for rep in range(reps):
            res = race_once(db, rep)
            totals["lost_elsewhere"] += res.lost_elsewhere
            totals["surviving_target"] += res.surviving_target
            totals["counted_mismatch"] += res.counted_mismatch
            totals["target_refused"] += bool(res.target[3])
            totals["target_rows_measured"] += res.receipt.predicate["pre_state"]["leaves"]
            totals["other_supersteps"] += sum(o[1] for o in res.others)
    bad = totals["lost_elsewhere"] + totals["surviving_target"] + totals["counted_mismatch"]
    return {
        "repetitions": reps,
        **dict(totals),
        "verdict": {"value": bad, "target": "== 0", "pass": bad == 0,
                    "status": "met" if bad == 0 else "MISSED"},
    }  # fmt: skip


def part_crash(dsn: str, trials: int, steps: int) -> dict[str, Any]:
    outcomes = Counter()
    failures = []
    with database(dsn, "bench_crash") as db, tempfile.TemporaryDirectory() as tmp:
        write_thread(db, "calibrate", steps, pad=200)
        duration = timed_erase(db, "calibrate")
        rng = random.Random(2026)
        for trial in range(trials):
            res = crash_once(db, trial, Path(tmp), steps=steps,
                             max_delay=duration * 1.5 + 0.05, rng=rng)  # fmt: skip
            outcomes[res.outcome] += 1
            if not res.ok:
                failures.append(repr(res))
    return {
        "trials": trials,
        "erase_duration_s": duration,
        "outcomes": dict(outcomes),
        "failures": failures,
        "verdict": {"value": len(failures), "target": "== 0", "pass": not failures,
                    "status": "met" if not failures else "MISSED"},
    }  # fmt: skip


def keep_parts(name: str, doc: dict[str, Any]) -> None:
    """With ``--only``: the parts not re-run are kept from the previous results file, and
    ``parts_from`` says which commit produced each part."""
    import json

    head = doc["code"].get("git_head") if isinstance(doc.get("code"), dict) else None
    origin = {k: head for k in doc["parts"]}
    previous = RESULTS_DIR / f"{name}.json"
    if previous.exists():
        old = json.loads(previous.read_text(encoding="utf-8"))
        before = old.get("parts_from") or {}
        for k, v in old.get("parts", {}).items():
            if k not in doc["parts"]:
                doc["parts"][k] = v
                origin[k] = before.get(k) or old.get("machine", {}).get("git_head")
    doc["parts_from"] = origin


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="erase,scale,put,race,crash")
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    import os

    only = set(args.only.split(","))
    q = args.quick
    doc: dict[str, Any] = {"mode": "quick" if q else "full", "code": code_state(), "parts": {}}
    with server(args.dsn or os.environ.get(pg_server.ENV_DSN)) as dsn:
        with psycopg.connect(dsn) as c:
            doc["postgresql"] = c.info.parameter_status("server_version")
        parts = doc["parts"]
        if "erase" in only:
            parts["erase"] = part_erase(dsn, 300 if q else 2000, 3 if q else 11)
        if "scale" in only:
            parts["scale"] = part_scale(dsn, 300 if q else 2000, 100 if q else 1000,
                                        100, 3 if q else 5)  # fmt: skip
        if "put" in only:
            parts["put"] = part_put(dsn, 200 if q else 1000, 3 if q else 11)
        if "race" in only:
            parts["race"] = part_race(dsn, 3 if q else 20)
        if "crash" in only:
            parts["crash"] = part_crash(dsn, 8 if q else 50, 150)
    result = "erase_postgres" + ("_quick" if q else "")
    keep_parts(result, doc)
    path = write_result(result, doc)
    verdicts = {name: p["verdict"] for name, p in parts.items() if name in only}
    print_verdicts(verdicts)
    print(f"results: {path}")
    return 0 if all(v["pass"] for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
