"""Multi-process races and crashes against a real PostgreSQL server.

Shared by ``tests/postgres/test_postgres_concurrency.py`` (a few repetitions, seconds) and
``bench/erase_postgres.py`` (the >= 20-repetition / >= 50-trial versions). Workers are
forked processes with their own connections, like separate LangGraph workers.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from erasure_receipts import AttestingPostgresSaver, Receipt, Signer, ThreadErasedError

SEED = bytes(range(32))
_ctx = mp.get_context("fork")


def _checkpoint(i: int, pad: int = 200) -> Any:
    cp = empty_checkpoint()
    text = random.Random(i).randbytes(pad // 2).hex()  # text that TOAST cannot shrink
    cp["channel_values"] = {"v": {"i": i, "pad": text}}
    cp["id"] = f"1ef{i:029d}"
    return cp


def write_one(saver: Any, thread: str, i: int, pad: int = 200) -> None:
    """One superstep: a checkpoint with a blob (2 rows) and two pending writes (2 rows)."""
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saved = saver.put(cfg, _checkpoint(i, pad), {"step": i}, {"v": f"{i:032d}"})
    saver.put_writes(saved, [("a", {"i": i}), ("b", "y" * 50)], f"task-{i}")


def _writer(dsn: str, thread: str, attesting: bool, go: Any, stop: Any, progress: Any,
            out: Any) -> None:  # fmt: skip
    """Write supersteps until ``stop`` (or refused); report accepted puts and writes."""
    accepted_puts = accepted_writes = 0
    refused = ""
    cm: Any = (
        AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(SEED))
        if attesting
        else PostgresSaver.from_conn_string(dsn)
    )
    with cm as saver:
        go.wait()
        i = 0
        while not stop.is_set():
            i += 1
            cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            try:
                saved = saver.put(cfg, _checkpoint(i), {"step": i}, {"v": f"{i:032d}"})
                accepted_puts += 1
                saver.put_writes(saved, [("a", {"i": i}), ("b", "y" * 50)], f"task-{i}")
                accepted_writes += 2
            except ThreadErasedError:
                refused = "ThreadErasedError"
                break
            except psycopg.errors.RaiseException as exc:
                refused = f"RaiseException: {exc}"[:80]
                break
            with progress.get_lock():
                progress.value += 1
    out.put((thread, accepted_puts, accepted_writes, refused))


@dataclass
class RaceResult:
    receipt: Receipt
    target: tuple[str, int, int, str]
    others: list[tuple[str, int, int, str]] = field(default_factory=list)
    lost_elsewhere: int = 0
    surviving_target: int = 0
    counted_mismatch: int = 0


def count_rows(conn: psycopg.Connection[Any], thread: str) -> dict[str, int]:
    out = {}
    for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        row = conn.execute(f"SELECT count(*) FROM {t} WHERE thread_id = %s", (thread,)).fetchone()
        assert row is not None
        out[t] = int(row[0])
    return out


def race_once(dsn: str, rep: int, *, others: int = 8, warmup_steps: int = 3,
              after_erase: float = 0.05) -> RaceResult:  # fmt: skip
    """``others`` processes write to their own threads and one writes to the target (a
    plain ``PostgresSaver`` on odd repetitions) while this process erases the target."""
    target = f"race-{rep}-target"
    go, stop, out = _ctx.Event(), _ctx.Event(), _ctx.Queue()
    progress = _ctx.Value("i", 0)
    target_progress = _ctx.Value("i", 0)
    procs = [
        _ctx.Process(
            target=_writer, args=(dsn, f"race-{rep}-other-{k}", k % 2 == 0, go, stop, progress, out)
        )
        for k in range(others)
    ]
    procs.append(
        _ctx.Process(
            target=_writer, args=(dsn, target, rep % 2 == 0, go, stop, target_progress, out)
        )
    )
    for p in procs:
        p.start()
    with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(SEED)) as saver:
        go.set()
        deadline = time.monotonic() + 30
        while target_progress.value < warmup_steps and time.monotonic() < deadline:
            time.sleep(0.002)
        receipt = saver.erase_thread(target)
        time.sleep(after_erase)  # the writers keep going (the target one is refused)
        stop.set()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        res = RaceResult(receipt, next(r for r in results if r[0] == target))
        res.others = [r for r in results if r[0] != target]
        with psycopg.connect(dsn, autocommit=True) as conn:
            for thread, puts, writes, _ in res.others:
                got = count_rows(conn, thread)
                want = {"checkpoints": puts, "checkpoint_blobs": puts, "checkpoint_writes": writes}
                res.lost_elsewhere += sum(abs(got[t] - want[t]) for t in want)
            res.surviving_target = sum(count_rows(conn, target).values())
        _, puts, writes, _ = res.target
        pre = receipt.predicate["pre_state"]["tables"]
        want = {"checkpoints": puts, "checkpoint_blobs": puts, "checkpoint_writes": writes}
        res.counted_mismatch = sum(abs(pre[t]["rows"] - want[t]) for t in want)
    return res


# -- crash: kill -9 of the erasing process -----------------------------------------------


def _erase_child(dsn: str, thread: str, archive: str, started: Any) -> None:
    with AttestingPostgresSaver.from_conn_string(
        dsn, signer=Signer.from_seed(SEED), archive=archive
    ) as saver:
        started.set()
        saver.erase_thread(thread)


@dataclass
class CrashResult:
    killed_after: float
    outcome: str  # "intact" | "erased"
    receipts: int
    ok: bool
    why: str = ""


def populate(dsn: str, thread: str, steps: int) -> None:
    with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(SEED)) as saver:
        saver.setup()
        for i in range(steps):
            write_one(saver, thread, i)


def _wait_idle(dsn: str, timeout: float = 30.0) -> None:
    """Until no other session of this database is running or holds a transaction."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.01)
    raise TimeoutError("sessions of the killed process did not go away")


def crash_once(dsn: str, trial: int, archive: Path, *, steps: int, max_delay: float,
               rng: random.Random) -> CrashResult:  # fmt: skip
    thread = f"crash-{trial}"
    populate(dsn, thread, steps)
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = count_rows(conn, thread)
    with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(SEED)) as saver:
        digest = saver.digest_thread(thread).digest
    started = _ctx.Event()
    child = _ctx.Process(target=_erase_child, args=(dsn, thread, str(archive), started))
    child.start()
    started.wait(timeout=30)
    delay = rng.uniform(0, max_delay)
    time.sleep(delay)
    if child.pid is not None and child.is_alive():
        os.kill(child.pid, signal.SIGKILL)
    child.join(timeout=30)
    _wait_idle(dsn)
    with AttestingPostgresSaver.from_conn_string(
        dsn, signer=Signer.from_seed(SEED), archive=archive
    ) as saver:
        saver.recover_receipts(min_age_seconds=0)
        journal = saver.journal_receipts(thread)
        pending = [p for p in saver.pending_erasures()]
    with psycopg.connect(dsn, autocommit=True) as conn:
        after = count_rows(conn, thread)
    files = [
        Receipt.from_json(p.read_bytes())
        for p in archive.glob("*.json")
        if Receipt.from_json(p.read_bytes()).thread_id == thread
    ]
    if after == before:
        ok = not journal and not files
        return CrashResult(delay, "intact", len(files), ok, "" if ok else "receipt for intact")
    if sum(after.values()) == 0:
        ok = (
            len(journal) == 1
            and len(files) == 1
            and files[0].to_json() == journal[0].to_json()
            and journal[0].pre_digest == digest
            and not pending
        )
        return CrashResult(delay, "erased", len(files), ok,
                           "" if ok else f"journal={len(journal)} files={len(files)}")  # fmt: skip
    return CrashResult(delay, "partial", len(files), False, f"rows left: {after} of {before}")
