"""``receipt report``: the auditor's HTML report (and its JSON summary) over an archive."""

from __future__ import annotations

import json
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
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE, _Progress

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
    verbose: Verbose = False,
) -> None:
    """Auditor's report: one self-contained HTML file (no network; inline style, script and
    SVG charts) built only from receipts that verified; those that did not are listed
    first with their reason. Exit 1 if any receipt failed, 3 if any could not be read
    (the report is written either way)."""
    from ..report import build_report, render_html, report_items

    if out is None and not as_json:
        _die("give --out REPORT.html, --json, or both", EXIT_USAGE)
    trusted = _trusted(key, trust)
    skip = [str(p) for p in [*(key or []), *([trust] if trust else [])]]
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
    typer.echo(
        f"{rep.verified} verified, {rep.failed_count} failed; requests: {req['received']} "
        f"received, {req['met']} met, {req['late']} late, {req['open']} open"
        + (f"; report written to {_display(str(out))}" if out is not None else ""),
        err=True,
    )
    unreadable = rep.failed_by_reason.get("unreadable", 0)
    raise typer.Exit(EXIT_IO if unreadable else EXIT_INVALID if rep.failed_count else 0)
