"""``receipt retention``: retention sweeps (history pruning) with a progress bar."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..signing import Signer
from ._app import (
    DB_HELP,
    AllowInsecureKey,
    JsonFlag,
    PasswordEnv,
    VacuumMode,
    Verbose,
    _check_archive,
    _load_signer,
    _open_saver,
    _probe_database,
    _vacuum_mode,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_USAGE

# -- retention sweeps (history.py) -------------------------------------------------------

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration(option: str, value: str) -> Any:
    """``30d``, ``12h``, ``90m``, ``3600s``, ``2w`` as a ``timedelta``; exit 2 otherwise."""
    from datetime import timedelta

    m = re.fullmatch(r"\s*(\d{1,9})\s*([smhdw])\s*", value)
    if m is None:
        _die(f"{option} {value!r}: use a number and a unit (s, m, h, d, w), e.g. 30d", EXIT_USAGE)
    return timedelta(seconds=int(m.group(1)) * _DURATION_UNITS[m.group(2)])


def _short(thread_id: str) -> str:
    from .._ops.history import _short as short

    return short(thread_id)


class _SweepBar:
    """The progress of one sweep on stderr: a bar with rate and ETA on a terminal,
    otherwise one line every ``interval`` seconds (so a long sweep under cron or CI
    shows it is alive; a short one prints nothing). stdout is never written.

    With ``limit`` the unit is what the limit counts (threads erased or pruned) and the
    total is at most ``limit``; otherwise every thread looked at, of all candidates."""

    interval = 5.0
    """Seconds between progress lines without a terminal."""

    def __init__(self, label: str, candidates: int, limit: int | None) -> None:
        self.label, self.limit, self.done = label, limit, 0
        self.total = candidates if limit is None else min(limit, candidates)
        self.tty = sys.stderr.isatty()
        self.start = self.last = time.monotonic()
        self.shown = -1  # the count last drawn
        if self.tty and self.total > 1:
            sys.stderr.write(f"{label}\n")

    def _rate_eta(self, now: float) -> str:
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = "?"
        if rate > 0:
            left = max(0, round((self.total - self.done) / rate))
            eta = f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
        return f"{rate:.1f}/s ETA {eta}"

    def __call__(self, event: Any) -> None:
        if self.limit is not None and not event.outcome.endswith(("erased", "pruned")):
            return  # skipped or failed: not counted by --limit
        self.done = min(self.done + 1, self.total)
        now = time.monotonic()
        if self.tty:
            if self.total > 1 and (now - self.last >= 0.1 or self.done == self.total):
                self._draw(now)
        elif now - self.last >= self.interval:
            sys.stderr.write(f"{self.label}: {self.done}/{self.total} threads, "
                             f"{self._rate_eta(now)}\n")  # fmt: skip
            sys.stderr.flush()
            self.last = now

    def _draw(self, now: float) -> None:
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {self._rate_eta(now)}\x1b[K")
        sys.stderr.flush()
        self.last, self.shown = now, self.done

    def close(self) -> None:
        if self.tty and self.total > 1:
            if self.shown != self.done:  # the final count, never a bar left mid-way
                self._draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()


@app.command()
def retention(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle",
            help="erase threads whose latest checkpoint is older than "
            "this (30d, 12h, 90m, 3600s, 2w): one receipt each",
        ),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            help="erase the history (keep the latest state) of threads "
            "whose latest checkpoint is older than this",
        ),
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option("--key", help="Ed25519 private key (PEM, mode 0600); not for --dry-run"),
    ] = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="directory the receipts are written to")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=0, help="at most this many threads per sweep")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="measure what would be erased; change nothing")
    ] = False,
    vacuum: VacuumMode = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="--idle: erase the threads in batches, one transaction and one receipt "
            "(kind subject, one unit per thread) per batch, sized to hold the write lock "
            "about 100 ms",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="PostgreSQL, --idle: this many sweeping processes that split the threads "
            "through the database (implies --batch; --limit is per process)",
        ),
    ] = 1,
) -> None:
    """Retention: erase idle threads and/or the history of older threads, one signed
    receipt per thread into --archive.

    Threads are selected by the time of their latest checkpoint (inside its uuid6 id),
    from the checkpoints primary key. Resumable: run it again after an interruption and it
    issues the receipts of committed erasures first, then continues; nothing is erased or
    attested twice. Exit 1 if any thread failed (the others are done).
    """
    _run.json = as_json
    if idle is None and history is None:
        _die("give --idle and/or --history", EXIT_USAGE)
    idle_age = None if idle is None else _duration("--idle", idle)
    history_age = None if history is None else _duration("--history", history)
    vacuum_mode = _vacuum_mode(vacuum, db)
    signer = Signer.generate()
    if not dry_run:
        if key is None or archive is None:
            _die("--key and --archive are required (except with --dry-run)", EXIT_USAGE)
        signer = _load_signer(key, password_env, allow_insecure_key)
    if workers > 1:
        from . import postgres as app_postgres

        if not app_postgres.is_dsn(db):
            _die("--workers needs a PostgreSQL DSN (SQLite has one writer at a time)",
                 EXIT_USAGE)  # fmt: skip
        if history is not None or dry_run:
            _die("--workers sweeps --idle only, not --history or --dry-run", EXIT_USAGE)
        batch = True
    elif batch and idle is None:
        _die("--batch applies to --idle", EXIT_USAGE)
    _probe_database(db)
    if archive is not None and not dry_run:
        _check_archive(archive)
    if workers > 1:
        assert key is not None and archive is not None and idle is not None
        _workers(db, idle, key, archive, limit, vacuum, password_env, allow_insecure_key,
                 workers, as_json)  # fmt: skip
        return
    results: dict[str, Any] = {"idle": None, "history": None}
    with _open_saver(db, signer, None if dry_run else archive, read_only=dry_run,
                     vacuum=False if dry_run else vacuum_mode) as saver:  # fmt: skip
        for mode, age in (("idle", idle_age), ("history", history_age)):
            if age is None:
                continue
            bar = _SweepBar(f"retention --{mode} {idle if mode == 'idle' else history}",
                            saver.count_idle_threads(age), limit)  # fmt: skip
            try:
                if mode == "idle":
                    results[mode] = saver.erase_idle_threads(
                        age, limit=limit, dry_run=dry_run, progress=bar, batch=batch
                    )
                else:
                    results[mode] = saver.prune_histories(
                        age, limit=limit, dry_run=dry_run, progress=bar
                    )
            finally:
                bar.close()
    _report(results, dry_run, archive, as_json)


def _report(results: dict[str, Any], dry_run: bool, archive: Path | None, as_json: bool) -> None:
    """Print the sweeps' results (``SweepResult``, or their JSON); exit 1 on a failure."""

    def get(r: Any, k: str) -> Any:
        return r[k] if isinstance(r, dict) else getattr(r, k)

    done = [r for m, r in results.items() if r is not None and m in ("idle", "history")]
    totals = {k: sum(get(r, k) for r in done) for k in ("threads", "rows", "bytes", "receipts")}
    failed = sum(get(r, "failed") for r in done)
    code = EXIT_INVALID if failed else 0

    def as_doc(r: Any) -> Any:
        return None if r is None else r if isinstance(r, dict) else r.to_json()

    if as_json:
        _emit_json({
            "ok": not failed, "exit_code": code, "dry_run": dry_run,
            "archive": None if archive is None or dry_run else str(archive),
            "idle": as_doc(results["idle"]), "history": as_doc(results["history"]),
            "totals": totals, **({"workers": results["workers"]} if "workers" in results else {}),
        })  # fmt: skip
        raise typer.Exit(code)
    verb = {"idle": "erased", "history": "pruned"}
    for mode, r in results.items():
        if r is None or mode not in verb:
            continue
        doc = as_doc(r)
        what = f"would be {verb[mode]}" if dry_run else verb[mode]
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(doc["skipped"].items())) or "none"
        n_ended = int(doc.get("deferrals") or 0)
        ended = f", {n_ended} ended deferral(s) carried out" if n_ended else ""
        typer.echo(f"{mode:<8} before {doc['cutoff']}: {doc['threads']} threads {what}{ended}, "
                   f"{doc['rows']} rows, {doc['bytes']} bytes, {doc['receipts']} receipts "
                   f"({doc['recovered']} recovered); skipped: {skipped}")  # fmt: skip
        for f in doc["failures"]:
            typer.echo(f"receipt: error: thread {_short(f['thread_id'])}: {f['error']}", err=True)
    where = "" if dry_run or archive is None else f" in {archive}"
    typer.echo(f"total    {totals['threads']} threads, {totals['rows']} rows, "
               f"{totals['bytes']} bytes, {totals['receipts']} receipts{where}")  # fmt: skip
    if failed:
        _die(f"{failed} thread(s) failed; the others are done (run again to retry)",
             EXIT_INVALID, reason="erasure_incomplete")  # fmt: skip


WORKER_TIMEOUT = 24 * 3600.0
"""Seconds a worker process of ``--workers`` may run."""


def _workers(
    db: str,
    idle: str,
    key: Path,
    archive: Path,
    limit: int | None,
    vacuum: Any,
    password_env: str | None,
    allow_insecure_key: bool,
    workers: int,
    as_json: bool,
) -> None:
    """``--workers N``: N processes of this command, each a batched ``--idle`` sweep of
    the same database; the database splits the threads between them (claims,
    RECEIPT_SPEC.md 9.15). Their results are added up."""
    import json
    import subprocess

    cmd = [sys.executable, "-m", "erasure_receipts", "retention", db, "--idle", idle,
           "--key", str(key), "--archive", str(archive), "--batch", "--json"]  # fmt: skip
    if limit is not None:
        cmd += ["--limit", str(limit)]
    if vacuum is not None:
        cmd += ["--vacuum", str(getattr(vacuum, "value", vacuum))]
    if password_env is not None:
        cmd += ["--password-env", password_env]
    if allow_insecure_key:
        cmd.append("--allow-insecure-key")
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(workers)]  # fmt: skip
    docs: list[dict[str, Any]] = []
    errors: list[str] = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=WORKER_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        try:
            doc = json.loads(out)
            docs.append(doc["idle"])
        except (ValueError, KeyError, TypeError):
            lines = err.strip().splitlines()
            errors.append(lines[-1] if lines else f"exit {proc.returncode}")
    if errors and not docs:
        _die(f"every worker failed: {errors[0]}", EXIT_INVALID, reason="erasure_incomplete")
    merged: dict[str, Any] = dict(docs[0]) if docs else {}
    for k in ("threads", "receipts", "recovered", "rows", "bytes", "failed"):
        merged[k] = sum(int(d[k]) for d in docs)
    skipped: dict[str, int] = {}
    for d in docs:
        for k, v in d["skipped"].items():
            skipped[k] = skipped.get(k, 0) + int(v)
    merged["skipped"] = dict(sorted(skipped.items()))
    merged["limited"] = any(d["limited"] for d in docs)
    merged["failures"] = [f for d in docs for f in d["failures"]]
    merged["failed"] += len(errors)
    merged["failures"] += [{"thread_id": "(worker)", "error": e} for e in errors]
    per_worker = [{k: d[k] for k in ("threads", "receipts", "recovered", "failed")} for d in docs]
    _report({"idle": merged, "history": None, "workers": per_worker}, False, archive, as_json)
