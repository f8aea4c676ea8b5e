"""A throw-away PostgreSQL server for the tests and for ``.ci/run``.

``python tests/pg_server.py start DIR`` initialises a cluster in ``DIR`` (as the
unprivileged ``postgres`` OS user when run as root: the server refuses to run as root),
starts it on a Unix socket inside ``DIR`` (no TCP listener), and prints its DSN.
``python tests/pg_server.py stop DIR`` stops it (immediate shutdown) and removes ``DIR``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV_DSN = "ERASURE_RECEIPTS_PG_DSN"


def binaries_available() -> bool:
    return all(shutil.which(b) for b in ("initdb", "pg_ctl", "postgres"))


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


def _chown(path: Path) -> None:
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout.decode(errors='replace')}")


def new_root() -> Path:
    """A fresh directory the ``postgres`` user can reach (``tempfile`` dirs are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="erasure-receipts-pg-"))
    root.chmod(0o755)
    return root


def start(root: Path) -> str:
    """Start a server with its data directory and socket under ``root``; return its DSN.

    Every directory above ``root`` must be traversable by the ``postgres`` user.
    """
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    _chown(root)
    data, sock = root / "data", root / "sock"
    sock.mkdir(exist_ok=True)
    _chown(sock)
    _run(
        _as_postgres(["initdb", "-D", str(data), "-A", "trust", "-U", "postgres",
                      "-E", "UTF8", "--locale=C", "--no-sync"])
    )  # fmt: skip
    opts = (
        f"-c listen_addresses='' -k {sock} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=200 -c shared_buffers=64MB"
    )
    _run(
        _as_postgres(["pg_ctl", "-D", str(data), "-o", opts, "-l", str(root / "log"),
                      "-w", "-t", "60", "start"])
    )  # fmt: skip
    return f"host={sock} port=5432 user=postgres dbname=postgres"


def stop(root: Path) -> None:
    data = root / "data"
    if data.exists():
        subprocess.run(
            _as_postgres(["pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit("usage: pg_server.py start|stop DIR   (start: DIR is created under /tmp)")
    if sys.argv[1] == "start":
        print(start(Path(sys.argv[2])))
    else:
        stop(Path(sys.argv[2]))


# -- pytest fixtures (registered through tests/conftest.py) ------------------------------


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """The DSN of a PostgreSQL server: ``$ERASURE_RECEIPTS_PG_DSN`` (``.ci/run`` starts
    one), or a throw-away server started here. Skips loudly only when no PostgreSQL
    binaries exist, and never under ``CI=true``."""
    given = os.environ.get(ENV_DSN)
    if given:
        yield given
        return
    if not binaries_available():
        reason = (
            f"POSTGRESQL TESTS SKIPPED: no initdb/pg_ctl/postgres on PATH and ${ENV_DSN} is not set"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(reason)
    root = new_root()
    try:
        yield start(root)
    finally:
        stop(root)


@contextlib.contextmanager
def fresh_database(pg_dsn: str, prefix: str = "t") -> Iterator[str]:
    """A new, empty database on the server (named ``<prefix>_<random>``): its DSN, and
    the database dropped afterwards (``WITH (FORCE)``: sessions left open end too)."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(pg_dsn, dbname=name)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def pg_db(pg_dsn: str) -> Iterator[str]:
    """A fresh, empty database on the server for one test; dropped afterwards."""
    with fresh_database(pg_dsn) as dsn:
        yield dsn
