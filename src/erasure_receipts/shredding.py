"""Crypto-shredding: per-subject encryption of everything the attesting savers store, so
that destroying one key erases a data subject from every copy of the database, backups
included.

``KeyStore`` holds one AES-256 data key per data subject (or per thread without one),
wrapped by a ``KeyWrapper`` (``LocalKeyWrapper``: a key-encryption key in a file or an
environment variable; an external KMS implements the same three members).
``Encryption(keys, subject_of=...)`` passed to a saver as ``encryption=`` encrypts every
checkpoint and pending write with AES-256-GCM, the row's identity as associated data;
``saver.shred_subject(subject)`` destroys the key and signs a ``shred`` receipt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from ._backends.keys import DestroyedKey, KeyStore, KeyWrapper, LocalKeyWrapper
from ._backends.sealing import SEALED_TYPE, Encryption, Migrated, default_subject_of
from ._backends.sqlite import database_path, has_checkpoints_table
from ._backends.sqlite.encrypt import encrypt_database
from .errors import NotALangGraphDatabaseError

__all__ = [
    "SEALED_TYPE",
    "DestroyedKey",
    "Encryption",
    "KeyStore",
    "KeyWrapper",
    "LocalKeyWrapper",
    "Migrated",
    "default_subject_of",
    "encrypt_postgres_database",
    "encrypt_sqlite_database",
]


def encrypt_sqlite_database(
    db: str | Path | sqlite3.Connection,
    encryption: Encryption,
    *,
    serde: SerializerProtocol | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Migrated:
    """Migrate a plaintext SQLite LangGraph database to ``encryption`` in place: every
    checkpoint and pending write not yet sealed is read with ``serde`` (default:
    LangGraph's ``JsonPlusSerializer``), sealed to its row under its thread's subject
    key (the subject read from the checkpoint's metadata through ``config``-like
    ``{"configurable": metadata}``, so the default ``subject_of`` finds ``user_id``),
    and written back, in one transaction; then the file is ``VACUUM``-ed so no plaintext
    page remains in it. Backups taken before keep the plaintext. Stop the application's
    writers first. ``progress(done, total)`` is called per sealed row.

    Store items (table ``store``) are not sealed: they stay plaintext and are counted in
    ``Migrated.store_plaintext`` (re-write them through ``Encryption.wrap_store``, or
    erase them); a shred refuses while a subject's store namespace holds one."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    own = not isinstance(db, sqlite3.Connection)
    conn = db if isinstance(db, sqlite3.Connection) else sqlite3.connect(db, isolation_level=None)
    try:
        path = database_path(conn)
        if not has_checkpoints_table(conn):
            raise NotALangGraphDatabaseError(
                f"{path}: no LangGraph checkpoint tables (not a LangGraph database)"
            )
        encryption.keys.check_not_database(sqlite_path=path)
        return encrypt_database(conn, encryption, serde or JsonPlusSerializer(), progress=progress)
    finally:
        if own:
            conn.close()


def encrypt_postgres_database(
    conn_or_dsn: Any,
    encryption: Encryption,
    *,
    serde: SerializerProtocol | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Migrated:
    """Migrate a plaintext PostgreSQL LangGraph database (a DSN, or a ``psycopg``
    connection) to ``encryption`` in place: every checkpoint, channel blob and pending
    write of the ``PostgresSaver`` tables not yet sealed is rewritten exactly as
    ``AttestingPostgresSaver(encryption=...)`` writes it - values read with ``serde``
    (default: LangGraph's ``JsonPlusSerializer``), the primitive channel values the
    parent keeps in the checkpoint's JSON moved into sealed ``checkpoint_blobs`` rows,
    blobs and writes sealed to their rows under the thread's subject key (the subject
    from the checkpoint's metadata, as :func:`encrypt_sqlite_database`) - in one
    transaction that locks the three tables against writers (readers go on). Then, on
    an autocommit connection (a DSN's is), the tables are rewritten (``VACUUM (FULL)``)
    so no live page keeps a plaintext row version; the server's WAL, replicas and
    backups taken before keep the plaintext. A key store in this same database is
    refused (``ConfigurationError``). ``progress(done, total)`` is called per sealed
    row. Running it again seals nothing.

    Store items (table ``store``) are not sealed: they stay plaintext and are counted in
    ``Migrated.store_plaintext`` (re-write them through ``Encryption.wrap_store``, or
    erase them); a shred refuses while a subject's store namespace holds one."""
    import psycopg
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from ._backends.keys import postgres_tokens
    from ._backends.postgres.encrypt import encrypt_database as encrypt_pg
    from ._backends.postgres.encrypt import has_checkpoint_tables

    own = not isinstance(conn_or_dsn, psycopg.Connection)
    conn = (
        psycopg.connect(str(conn_or_dsn), autocommit=True, prepare_threshold=0)
        if own
        else conn_or_dsn
    )
    try:
        if not has_checkpoint_tables(conn):
            raise NotALangGraphDatabaseError(
                "no LangGraph checkpoint tables (checkpoints, checkpoint_blobs, "
                "checkpoint_writes): not a LangGraph database"
            )
        encryption.keys.refuse_tokens(postgres_tokens(conn), "the PostgreSQL data database")
        return encrypt_pg(conn, encryption, serde or JsonPlusSerializer(), progress=progress)
    finally:
        if own:
            conn.close()
