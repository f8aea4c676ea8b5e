"""PostgreSQL databases for ``receipt digest|erase|recover``: a DSN instead of a file.

The commands import this module only for an argument that is a
connection string (``postgresql://...``, ``postgres://...`` or libpq ``key=value``);
psycopg and the Postgres saver are imported only then, so SQLite-only installs never
need them. The exit codes are the SQLite commands': 2 without the ``postgres`` extra
or for a malformed connection string, 3 when the server cannot be reached or the
database is not a LangGraph database (checked read-only, before anything is created).
No message ever contains the password.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote

from ..signing import Signer
from ._base import _die, _mapped_errors
from .verify_fast import EXIT_IO, EXIT_USAGE

__all__ = ["database_errors", "is_dsn", "label", "open_saver", "probe"]

EXTRA = "pip install 'langgraph-erasure-receipts[postgres]'"
LANGGRAPH_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
"""What ``PostgresSaver.setup()`` creates: without all four it is not a LangGraph database."""
READ_ONLY = "-c default_transaction_read_only=on"
"""Added to the connection's ``options`` for ``digest``: every transaction is read-only."""
CONNECT_TIMEOUT = "10"
"""Seconds, unless the DSN or ``PGCONNECT_TIMEOUT`` says otherwise."""

_URI = re.compile(r"postgres(?:ql)?://", re.IGNORECASE)
_KEYWORD = re.compile(r"\s*[A-Za-z_]+\s*=")
_URI_PASSWORD = re.compile(r"postgres(?:ql)?://[^:/@?#]*:([^@/?#]*)@", re.IGNORECASE)
_USERINFO = re.compile(r"(postgres(?:ql)?://)\S*@", re.IGNORECASE)
"""A URI's user information: everything up to its *last* ``@`` (a password may hold an
un-percent-encoded ``@``, which libpq splits at the first one)."""
_PARAM_PASSWORD = re.compile(r"[?&]password=([^&#]*)", re.IGNORECASE)
_KV_PASSWORD = re.compile(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def is_dsn(db: str | Path) -> bool:
    """A ``postgresql://``/``postgres://`` URI, or a libpq ``key=value`` string that is
    not the name of an existing file. A ``Path`` is always a SQLite file."""
    if isinstance(db, Path):
        return False
    if _URI.match(db):
        return True
    return bool(_KEYWORD.match(db)) and not os.path.lexists(db)


class _Dsn:
    """A connection string, its password-free label and the secrets to redact."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        secrets: set[str] = set()
        for pattern in (_URI_PASSWORD, _PARAM_PASSWORD, _KV_PASSWORD):
            for m in pattern.finditer(dsn):
                raw = m.group(1)
                secrets |= {raw, unquote(raw), raw.strip("'")}
        uri = _URI.match(dsn)
        if uri is not None and "@" in dsn[uri.end() :]:
            userinfo = dsn[uri.end() : dsn.rindex("@")]
            if ":" in userinfo or "@" in userinfo:
                # The user information, what follows the user name, and what follows
                # its first '@' (libpq ends the user information there and takes the
                # rest, with an '@', as part of the host name).
                password = re.split(r"[:@]", userinfo, maxsplit=1)[1]
                tail = userinfo.partition("@")[2]
                for piece in (userinfo, password, tail + "@" if tail else ""):
                    secrets |= {piece, unquote(piece)}
        self.params: dict[str, Any] | None = None
        with suppress(Exception):
            from psycopg.conninfo import conninfo_to_dict

            self.params = conninfo_to_dict(dsn)
            if self.params.get("password"):
                secrets.add(str(self.params["password"]))
        self.secrets = sorted((s for s in secrets if s), key=len, reverse=True)
        self.label = self.redact(self._label())

    def _label(self) -> str:
        if self.params is None:
            return "the PostgreSQL connection string"
        host = str(self.params.get("host") or "").rpartition("@")[2]
        port = str(self.params.get("port") or "")
        dbname = str(self.params.get("dbname") or "")
        if host.startswith("/"):
            return f"postgresql:///{dbname}?host={host}" + (f"&port={port}" if port else "")
        return f"postgresql://{host}{':' + port if port else ''}/{dbname}"

    def redact(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***@" if s.endswith("@") else "***")
        text = _USERINFO.sub(r"\1***@", text)
        return _KV_PASSWORD.sub("password=***", text)

    def message(self, exc: BaseException) -> str:
        """libpq's message on one line, without the password."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        return self.redact(text)[:500]


def _modules() -> tuple[Any, Any, Any]:
    """psycopg, ``AttestingPostgresSaver``, ``PostgresStore``; exit 2 without the extra."""
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore

        from .._savers.postgres import AttestingPostgresSaver
    except ImportError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _die(
            f"a PostgreSQL connection string needs the postgres extra, which is not "
            f"installed ({first}): {EXTRA}",
            EXIT_USAGE,
            reason="missing_dependency",
        )
    return psycopg, AttestingPostgresSaver, PostgresStore


def _connect(d: _Dsn, *, read_only: bool) -> Any:
    """An autocommit ``dict_row`` connection (as the saver's own); exit 2 for a
    malformed string, 3 if the server cannot be reached or refuses us."""
    psycopg = _modules()[0]
    from psycopg.rows import dict_row

    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0,
                              "row_factory": dict_row}  # fmt: skip
    params = d.params or {}
    if "connect_timeout" not in params and not os.environ.get("PGCONNECT_TIMEOUT"):
        kwargs["connect_timeout"] = CONNECT_TIMEOUT
    if read_only:
        given = params.get("options") or os.environ.get("PGOPTIONS") or ""
        kwargs["options"] = f"{given} {READ_ONLY}".strip()
    try:
        return psycopg.Connection.connect(d.dsn, **kwargs)
    except psycopg.ProgrammingError as exc:
        _die(f"malformed PostgreSQL connection string: {d.message(exc)}", EXIT_USAGE,
             reason="bad_connection_string")  # fmt: skip
    except psycopg.Error as exc:
        _die(f"cannot connect to {d.label}: {d.message(exc)}", EXIT_IO,
             reason="connection_failed")  # fmt: skip


@contextmanager
def _database_errors(d: _Dsn) -> Iterator[None]:
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        _die(f"{d.label}: database error: {d.message(exc)}", EXIT_IO, reason="database_error")


def label(dsn: str) -> str:
    """The connection string as messages name it (no password)."""
    return _Dsn(dsn).label


@contextmanager
def database_errors(dsn: str | None) -> Iterator[None]:
    """A database error of ``dsn`` as one line without the password, exit 3 (nothing
    mapped when ``dsn`` is None)."""
    if dsn is None:
        yield
        return
    with _database_errors(_Dsn(dsn)):
        yield


@dataclass(frozen=True)
class Probe:
    """What a read-only look at the catalog found (nothing is created to find it)."""

    has_store: bool
    """A ``store`` table (``PostgresStore``): erased in the erasure's transaction."""
    erasure_schema: bool
    """This library's tables and triggers are installed (an enforcing version)."""
    journal: bool
    """An ``erasure_journal`` table exists (there may be something to recover)."""


def _not_langgraph(d: _Dsn, missing: list[str]) -> NoReturn:
    what = ", ".join(missing)
    _die(f"{d.label}: not a LangGraph database (no {what} table{'s' if len(missing) > 1 else ''}"
         "); nothing was changed", EXIT_IO, reason="not_langgraph_database")  # fmt: skip


def probe(dsn: str) -> Probe:
    """Check, over a read-only connection, that ``dsn`` is a LangGraph database."""
    d = _Dsn(dsn)
    _modules()
    from .._backends.postgres import SyncSession, schema_installed, tables_present

    conn = _connect(d, read_only=True)
    try:
        with _database_errors(d):
            found = tables_present(
                SyncSession(conn), [*LANGGRAPH_TABLES, "store", "erasure_journal"]
            )
            missing = [t for t in LANGGRAPH_TABLES if not found[t]]
            installed = not missing and schema_installed(SyncSession(conn))
    finally:
        conn.close()
    if missing:
        _not_langgraph(d, missing)
    return Probe(found["store"], installed, found["erasure_journal"])


class _Measure:
    """``digest`` and ``retention --dry-run`` of a LangGraph database this library never
    set up: measured as the saver measures (same tables, rows and leaves), without
    installing anything (the saver's own ``digest_thread`` would install its tables and
    triggers first; its dry-run sweeps install nothing, so they are the saver's own, on
    the read-only connection)."""

    def __init__(self, conn: Any, has_store: bool, saver: Callable[[], Any] | None = None) -> None:
        self.conn = conn
        self.has_store = has_store
        self._new_saver = saver
        self._saver: Any = None

    def _sweeper(self, dry_run: bool) -> Any:
        from ..errors import ConfigurationError

        if not dry_run or self._new_saver is None:
            raise ConfigurationError("only a dry run is possible on a read-only connection")
        if self._saver is None:
            self._saver = self._new_saver()
        return self._saver

    def count_idle_threads(self, older_than: Any) -> int:
        return int(self._sweeper(True).count_idle_threads(older_than))

    def erase_idle_threads(self, older_than: Any, *, dry_run: bool = False, **kw: Any) -> Any:
        return self._sweeper(dry_run).erase_idle_threads(older_than, dry_run=True, **kw)

    def prune_histories(self, older_than: Any, *, dry_run: bool = False, **kw: Any) -> Any:
        return self._sweeper(dry_run).prune_histories(older_than, dry_run=True, **kw)

    def digest_thread(self, thread_id: str, store_namespaces: list[tuple[str, ...]]) -> Any:
        from .._savers.postgres import digest_read_only

        return digest_read_only(self.conn, thread_id, store_namespaces, has_store=self.has_store)


class _NoJournal:
    """``recover`` on a LangGraph database without an erasure journal: nothing to
    recover, and nothing (tables, triggers) is installed to find that out."""

    def pending_erasures(self) -> list[Any]:
        return []

    def recover_receipts(
        self, *, min_age_seconds: float = 300.0, commitment_key: Any = None
    ) -> list[Any]:
        return []

    def journal_receipts(self, thread_id: str | None = None) -> list[Any]:
        return []


@contextmanager
def open_saver(
    dsn: str,
    signer: Signer,
    archive: Path | None,
    *,
    read_only: bool = False,
    recovering: bool = False,
    vacuum: bool | str = False,
    encryption: Any = None,
) -> Iterator[Any]:
    """The attesting saver on an existing LangGraph database, with a ``PostgresStore``
    on the same database if it has a ``store`` table; errors mapped to exit codes.

    ``read_only`` (``digest``): every connection is read-only, and a database without
    this library's schema is measured without installing it. ``recovering``: a database
    without an erasure journal yields a saver with nothing to recover. ``vacuum``: the
    saver's ``vacuum=`` (``True`` or ``"full"``), recorded in every receipt's residue.
    """
    found = probe(dsn)
    d = _Dsn(dsn)
    _, saver_cls, store_cls = _modules()
    conns: list[Any] = []
    try:
        with _mapped_errors(d.label), _database_errors(d):
            conns.append(_connect(d, read_only=read_only))
            if read_only and not found.erasure_schema:
                sweeper = lambda: saver_cls(conns[0], signer=signer, archive=None)  # noqa: E731
                yield _Measure(conns[0], found.has_store, sweeper)
                return
            if recovering and not found.journal:
                yield _NoJournal()
                return
            store = None
            if found.has_store:
                conns.append(_connect(d, read_only=read_only))
                store = store_cls(conns[1])
            yield saver_cls(conns[0], signer=signer, store=store, archive=archive,
                            vacuum=vacuum, encryption=encryption)  # fmt: skip
    finally:
        for c in conns:
            with suppress(Exception):
                c.close()
