"""Run LangGraph's released saver tests (vendored unchanged, see README.md) against the
attesting savers: the only change is the class. Each test gets ``SqliteSaver``,
``AsyncSqliteSaver``, ``PostgresSaver`` and ``AsyncPostgresSaver`` replaced - in
LangGraph's modules and in the vendored test modules' globals - by a subclass of the
attesting saver that brings its own signing key (LangGraph's constructors take none).
``ERASURE_RECEIPTS_UPSTREAM=langgraph`` runs the same tests against LangGraph's own
classes, to record what fails there.

The PostgreSQL tests connect to the throw-away server of ``tests/pg_server.py`` (or
``$ERASURE_RECEIPTS_PG_DSN``) instead of LangGraph's docker-compose one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AsyncAttestingSqliteSaver,
    AttestingPostgresSaver,
    AttestingSqliteSaver,
    Signer,
)

UPSTREAM = os.environ.get("ERASURE_RECEIPTS_UPSTREAM") == "langgraph"
FULL = os.environ.get("ERASURE_RECEIPTS_UPSTREAM_FULL") == "1"

# The default run is the slice CI affords (about 30 s): every SQLite saver test and
# LangGraph's prune tests against the six PostgreSQL saver modes. The full run (about
# 2 min on 2 cores, ERASURE_RECEIPTS_UPSTREAM_FULL=1) adds the PostgreSQL sync, async
# and delta-channel suites: bench/README.md, "LangGraph's saver test suites".
collect_ignore_glob = (
    []
    if FULL
    else [
        "checkpoint_postgres/tests/test_sync.py",
        "checkpoint_postgres/tests/test_async.py",
        "checkpoint_postgres/tests/test_delta_*.py",
        "checkpoint_postgres/tests/test_conformance_delta.py",
    ]
)

_CONFORMANCE = (
    "the installed langgraph-checkpoint-conformance has no 'delta_channel_history' "
    "capability (fails for LangGraph's own saver too)"
)
_HOOKED = (
    "hooks LangGraph's private cursor (saver._cursor) to act right after one of "
    "LangGraph's own prune SQL statements, which no other implementation executes; the "
    "behaviour it checks is pinned by tests/sqlite/test_prune_concurrent.py"
)
EXPECTED_FAILURES = {
    "checkpoint_sqlite/test_conformance_delta.py::test_delta_channel_conformance": _CONFORMANCE,
    "checkpoint_postgres/tests/test_conformance_delta.py::test_delta_channel_conformance": (
        _CONFORMANCE
    ),
}
"""Fail for LangGraph's savers and for the attesting ones alike."""
EXPECTED_ATTESTING_FAILURES = {
    f"checkpoint_postgres/tests/test_prune.py::{name}": _HOOKED
    for name in (
        "test_keep_latest_keeps_a_checkpoint_saved_while_it_runs[heads]",
        "test_keep_latest_keeps_a_checkpoint_saved_while_it_runs[blobs]",
        "test_keep_latest_refuses_a_thread_that_turns_delta_after_the_batch_check",
        "test_keep_latest_keeps_the_history_of_a_delta_checkpoint_saved_after_the_thread_check",
        "test_keep_latest_keeps_a_checkpoint_saved_meanwhile_whatever_its_id",
    )
}
"""Fail only with the class swapped, and why (README.md)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Expected failures are strict ``xfail``s: one that starts passing fails the run."""
    expected = {**EXPECTED_FAILURES, **({} if UPSTREAM else EXPECTED_ATTESTING_FAILURES)}
    for item in items:
        rel = item.nodeid.split("tests/upstream/", 1)[-1]
        if rel in expected:
            item.add_marker(pytest.mark.xfail(reason=expected[rel], strict=True))


_SIGNER = Signer.from_seed(bytes(range(32)))
_VENDORED = tuple(
    str(Path(__file__).parent / d) for d in ("checkpoint_sqlite", "checkpoint_postgres")
)
"""Where the vendored test modules are."""


def _with_key(base: type[Any]) -> type[Any]:
    """``base`` with ``signer=`` defaulted, in the constructor and ``from_conn_string``
    (sync or async context manager), so LangGraph's call sites work unchanged."""
    inner = base.__dict__["from_conn_string"].__func__.__wrapped__

    def __init__(self: Any, *args: Any, signer: Signer = _SIGNER, **kwargs: Any) -> None:
        base.__init__(self, *args, signer=signer, **kwargs)

    if base in (AsyncAttestingSqliteSaver, AsyncAttestingPostgresSaver):

        @asynccontextmanager
        async def afrom(
            cls: Any, *args: Any, signer: Signer = _SIGNER, **kw: Any
        ) -> AsyncIterator[Any]:
            async with asynccontextmanager(inner)(cls, *args, signer=signer, **kw) as saver:
                yield saver

        factory: Any = classmethod(afrom)
    else:

        @contextmanager
        def sfrom(cls: Any, *args: Any, signer: Signer = _SIGNER, **kw: Any) -> Iterator[Any]:
            with contextmanager(inner)(cls, *args, signer=signer, **kw) as saver:
                yield saver

        factory = classmethod(sfrom)
    name = base.__name__.replace("Attesting", "")
    return type(name, (base,), {"__init__": __init__, "from_conn_string": factory})


SWAPS: dict[str, tuple[type[Any], type[Any]]] = {
    "SqliteSaver": (SqliteSaver, _with_key(AttestingSqliteSaver)),
    "AsyncSqliteSaver": (AsyncSqliteSaver, _with_key(AsyncAttestingSqliteSaver)),
    "PostgresSaver": (PostgresSaver, _with_key(AttestingPostgresSaver)),
    "AsyncPostgresSaver": (AsyncPostgresSaver, _with_key(AsyncAttestingPostgresSaver)),
}
_HOMES = {
    "SqliteSaver": ("langgraph.checkpoint.sqlite",),
    "AsyncSqliteSaver": ("langgraph.checkpoint.sqlite.aio",),
    "PostgresSaver": ("langgraph.checkpoint.postgres",),
    "AsyncPostgresSaver": ("langgraph.checkpoint.postgres.aio",),
}


def _uris(dsn: str) -> tuple[str, str]:
    """LangGraph's tests append a database name to a URI: the server's DSN as one."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host = quote(str(info.get("host", "localhost")), safe="")
    base = f"postgresql://{info.get('user', 'postgres')}@{host}:{info.get('port', 5432)}/"
    return base, base + "postgres?sslmode=disable"


@pytest.fixture(autouse=True)
def swapped_class(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swap the classes for this test (undone after it: other tests see LangGraph's)."""
    modules = [
        m
        for m in list(sys.modules.values())
        if str(getattr(m, "__file__", "")).startswith(_VENDORED)
    ]
    if "checkpoint_postgres" in str(request.path):
        base, uri = _uris(request.getfixturevalue("pg_dsn"))
        for mod in modules:
            for name, value in (("DEFAULT_POSTGRES_URI", base), ("DEFAULT_URI", uri)):
                if hasattr(mod, name):
                    monkeypatch.setattr(mod, name, value)
    if UPSTREAM:
        return
    for name, (original, swapped) in SWAPS.items():
        for home in _HOMES[name]:
            monkeypatch.setattr(sys.modules[home], name, swapped)
        for mod in modules:
            if getattr(mod, name, None) is original:
                monkeypatch.setattr(mod, name, swapped)
