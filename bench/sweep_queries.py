"""Statements a batched PostgreSQL retention sweep sends per swept thread.

    python bench/sweep_queries.py [--threads 3000] [--idle 300] [--dsn DSN]

Builds the ``sweep_bench`` shape (4 checkpoints, a blob each, 6 writes per thread), runs
``erase_idle_threads(30 days, batch=True)`` with every statement psycopg executes
counted, and prints the total per swept thread, the most frequent statements and, for
comparison, what the bare sweep of ``sweep_bench`` sends (one ``delete_thread`` per thread:
three DELETEs). A count, not a time: it does not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import psycopg
import sweep_bench as sb

from erasure_receipts import AttestingPostgresSaver


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=3000)
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--dsn", default=os.environ.get("ERASURE_RECEIPTS_PG_DSN"))
    args = ap.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    execute = psycopg.Cursor.execute

    def counted(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        counts[" ".join(str(query).split())[:90]] += 1
        return execute(self, query, params, **kw)

    work = Path(tempfile.mkdtemp(prefix="sweep-queries-"))
    try:
        with sb.pg_server(args.dsn) as server:
            sb.pg_build(server, "sweepq_template", args.threads, args.idle)
            dsn = sb.pg_copy(server, "sweepq_template", "sweepq_run")
            with AttestingPostgresSaver.from_conn_string(
                dsn, signer=sb.SIGNER, archive=work / "receipts"
            ) as saver:
                saver.setup()
                psycopg.Cursor.execute = counted  # type: ignore[method-assign]
                try:
                    result = saver.erase_idle_threads(timedelta(days=30), batch=True)
                finally:
                    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
            sb.pg_drop(server, "sweepq_run", "sweepq_template")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(counts.values())
    print(f"{result.threads} threads swept in {result.receipts} receipts: {total} statements, "
          f"{total / max(result.threads, 1):.1f} per thread (bare delete_thread: 3)")  # fmt: skip
    for query, n in counts.most_common(12):
        print(f"{n:6d}  {query}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
