"""``receipt report``: the auditor's HTML report (and its JSON summary) over an archive."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from .._batch import default_jobs
from ..verify import _display
from ._app import (
    JobsOption,
    KeyOption,
    TrustOption,
    Verbose,
    _check_out,
    _log_errors,
    _trusted,
    app,
)
from ._app import _write_out as _write_out
from ._base import _die
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE, _load_tsa, _Progress

__all__ = ["report_cmd"]


@app.command("report")
def report_cmd(
    paths: Annotated[list[str], typer.Argument(help="receipt files, directories or logs")],
    key: KeyOption = None,
    trust: TrustOption = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write the HTML report here (new file)")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="print the summary (schemas/report.schema.json) on stdout"),
    ] = False,
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=1, max=100_000, help="rows listed per table")
    ] = 200,
    jobs: JobsOption = None,
    tsa_cert: Annotated[
        Path | None,
        typer.Option(
            "--tsa-cert",
            help="trusted RFC 3161 TSA certificate (PEM, then any intermediates): check the "
            "time-stamps of the receipt logs given as SOURCE and show, for each of their "
            "receipts, the time it was issued no later than; only for receipts read from a "
            "log SOURCE (exit 2 if none is a log)",
        ),
    ] = None,
    tsa_root: Annotated[
        Path | None,
        typer.Option(
            "--tsa-root",
            help="root certificate the TSA chains to (PEM; default: the last, self-signed "
            "certificate of --tsa-cert)",
        ),
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Auditor's report: one self-contained HTML file (no network; inline style, script and
    SVG charts) built only from receipts that verified; those that did not are listed
    first with their reason. With --tsa-cert, receipts read from a log show their trusted
    time. Exit 1 if any receipt or time-stamp failed, 3 if any could not be read (the
    report is written either way)."""
    from ..errors import Error, InputError
    from ..log import is_log
    from ..report import build_report, render_html, report_items

    if out is None and not as_json:
        _die("give --out REPORT.html, --json, or both", EXIT_USAGE)
    if tsa_root is not None and tsa_cert is None:
        _die("--tsa-root needs --tsa-cert", EXIT_USAGE)
    if tsa_cert is not None and not any(os.path.isdir(p) and is_log(p) for p in paths):
        _die(
            "--tsa-cert needs a receipt log among the SOURCEs (time-stamps are over a "
            "log's checkpoints: receipt files and directories carry none)",
            EXIT_USAGE,
        )
    trusted = _trusted(key, trust)
    tsa = None
    if tsa_cert is not None:
        try:
            tsa = _load_tsa(str(tsa_cert), str(tsa_root) if tsa_root is not None else None)
        except InputError as exc:
            _die(f"--tsa-cert: {exc.message}", EXIT_IO, reason="unreadable")
        except Error as exc:
            _die(f"--tsa-cert: {exc.message}", EXIT_USAGE)
    skip = [str(p) for p in [*(key or []), *([trust] if trust else [])]]
    skip += [str(p) for p in (tsa_cert, tsa_root) if p is not None]
    if out is not None:
        _check_out(out)
    with _log_errors():
        items = report_items(paths, skip)
    if not items:
        _die("no receipts found", EXIT_USAGE)
    progress = _Progress(len(items))
    rep = build_report(
        items,
        trusted,
        jobs=jobs if jobs is not None else default_jobs(),
        max_rows=max_rows,
        progress=progress.update,
        tsa=tsa,
    )
    if out is not None:
        try:
            _write_out(out, render_html(rep).encode("utf-8"))
        except OSError as exc:
            _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
                 reason="unwritable")  # fmt: skip
    if as_json:
        sys.stdout.write(json.dumps(rep.summary(), ensure_ascii=False) + "\n")
        sys.stdout.flush()
    req = rep.request_counts()
    timed = ""
    if tsa is not None:
        tc = rep.time_counts()
        timed = (f"; trusted time: {tc['receipts_with_trusted_time']} receipts, "
                 f"{tc['issued_after_timestamp']} dated after their time-stamp, "
                 f"{tc['timestamps']['failed']} time-stamps failed")  # fmt: skip
    typer.echo(
        f"{rep.verified} verified, {rep.failed_count} failed; requests: {req['received']} "
        f"received, {req['met']} met, {req['late']} late, {req['open']} open"
        + timed
        + (f"; report written to {_display(str(out))}" if out is not None else ""),
        err=True,
    )
    unreadable = rep.failed_by_reason.get("unreadable", 0)
    bad = rep.failed_count or rep.timestamps_failed
    raise typer.Exit(EXIT_IO if unreadable else EXIT_INVALID if bad else 0)
