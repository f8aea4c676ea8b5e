"""``receipt shred``: destroy a data subject's (or a thread's own) data key in the key
store and sign a ``shred`` receipt (crypto-shredding, RECEIPT_SPEC.md 9.16)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import (
    DB_HELP,
    AllowInsecureKey,
    JsonFlag,
    PasswordEnv,
    Verbose,
    _check_archive,
    _load_signer,
    _open_saver,
    _probe_database,
    app,
)
from ._base import _die, _emit_json, _mapped_errors, _run
from .verify_fast import EXIT_USAGE

__all__ = ["encrypt", "shred"]


def _key_store(keystore: str, master_key: Path | None, master_key_env: str | None,
               retention: str | None) -> Any:  # fmt: skip
    from ..shredding import KeyStore, LocalKeyWrapper
    from . import postgres as app_postgres

    if (master_key is None) == (master_key_env is None):
        _die("give exactly one of --master-key FILE and --master-key-env VAR", EXIT_USAGE)
    with _mapped_errors(keystore):
        kek = (
            LocalKeyWrapper.from_file(master_key)
            if master_key is not None
            else LocalKeyWrapper.from_env(str(master_key_env))
        )
        if app_postgres.is_dsn(keystore):
            return KeyStore.postgres(keystore, kek, backup_retention=retention)
        if not Path(keystore).is_file():
            _die(f"{keystore}: no key store there (nothing was ever encrypted?)", 3,
                 reason="unreadable")  # fmt: skip
        return KeyStore(keystore, kek, backup_retention=retention)


@app.command()
def shred(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key that signs the receipt")],
    keystore: Annotated[
        str, typer.Option("--keystore", help="the key store: a SQLite file or a PostgreSQL DSN")
    ],
    archive: Annotated[Path, typer.Option("--archive", help="directory to archive the receipt in")],
    subject: Annotated[
        str | None, typer.Option("--subject", help="the data subject whose key is destroyed")
    ] = None,
    thread: Annotated[
        str | None,
        typer.Option("--thread", help="a thread written without a subject (its own key)"),
    ] = None,
    master_key: Annotated[
        Path | None, typer.Option("--master-key", help="the key-encryption key file")
    ] = None,
    master_key_env: Annotated[
        str | None, typer.Option("--master-key-env", help="env var holding the key-encryption key")
    ] = None,
    backup_retention: Annotated[
        str | None,
        typer.Option(
            "--backup-retention",
            help="how long copies of the key store are kept (e.g. P30D); stated in the receipt",
        ),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Crypto-shred: destroy the data key of --subject (or --thread) in the key store,
    verify it is gone and the rows no longer decrypt, and sign a receipt (kind shred).

    The data database's rows stay, as ciphertext; so do its backups, which can no
    longer be decrypted unless a copy of the key survives (the key store's backups).
    """
    _run.json = as_json
    if (subject is None) == (thread is None):
        _die("give exactly one of --subject and --thread", EXIT_USAGE)
    if backup_retention is not None and not (0 < len(backup_retention) <= 64):
        _die("--backup-retention is 1-64 characters (e.g. P30D)", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    _probe_database(db)
    keys = _key_store(keystore, master_key, master_key_env, backup_retention)
    _check_archive(archive)
    from ..shredding import Encryption

    try:
        with (
            _open_saver(db, signer, archive, encryption=Encryption(keys)) as saver,
            _mapped_errors(db),
        ):
            saver.setup()
            receipt = (
                saver.shred_subject(subject)
                if subject is not None
                else saver.shred_thread(str(thread))
            )
    finally:
        keys.close()
    sc = receipt.predicate["scope"]
    path = str(archive / f"{receipt.receipt_id}.json")
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "receipt_id": receipt.receipt_id, "kind": "shred",
            "subject": sc["subject"], "key_scope": sc["key_scope"], "threads": sc["threads"],
            "key_commitment": sc["key_commitment"], "key_store": sc["key_store"],
            "written_to": [path], "receipt": json.loads(receipt.to_json()),
        })  # fmt: skip
        return
    typer.echo(
        f"shredded the data key of {sc['key_scope']} {sc['subject']!r}: "
        f"{len(sc['threads'])} thread(s) no longer decrypt (here and in every backup, "
        f"unless a copy of the key survives); key store scrub {sc['key_store']['scrub']}; "
        f"receipt {receipt.receipt_id}"
    )
    typer.echo(f"written to {path}")


@app.command()
def encrypt(
    db: Annotated[
        str,
        typer.Argument(help="SQLite LangGraph database file or PostgreSQL DSN (in place)"),
    ],
    keystore: Annotated[
        str, typer.Option("--keystore", help="the key store: a SQLite file or a PostgreSQL DSN")
    ],
    master_key: Annotated[
        Path | None, typer.Option("--master-key", help="the key-encryption key file")
    ] = None,
    master_key_env: Annotated[
        str | None, typer.Option("--master-key-env", help="env var holding the key-encryption key")
    ] = None,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Migrate a plaintext SQLite or PostgreSQL database to per-subject encryption, in place.

    Every checkpoint and pending write not yet encrypted (PostgreSQL: every channel
    blob, and the primitive channel values kept in a checkpoint's JSON) is sealed under
    its thread's subject key (the subject is the checkpoint metadata's user_id), in one
    transaction; then the SQLite file is VACUUMed (PostgreSQL: the three tables are
    rewritten with VACUUM FULL). Store items (table store) are not sealed: they stay
    plaintext and are counted. Stop the application's writers first (PostgreSQL: the
    tables are locked against them). Backups taken before keep the plaintext. The key
    store is created if it does not exist.
    """
    import sys

    from ..shredding import (
        Encryption,
        KeyStore,
        LocalKeyWrapper,
        encrypt_postgres_database,
        encrypt_sqlite_database,
    )
    from . import postgres as app_postgres

    _run.json = as_json
    pg = app_postgres.is_dsn(db)
    if (master_key is None) == (master_key_env is None):
        _die("give exactly one of --master-key FILE and --master-key-env VAR", EXIT_USAGE)
    _probe_database(db if pg else Path(db))
    label = app_postgres.label(db) if pg else db
    with _mapped_errors(label), app_postgres.database_errors(db if pg else None):
        kek = (
            LocalKeyWrapper.from_file(master_key)
            if master_key is not None
            else LocalKeyWrapper.from_env(str(master_key_env))
        )
        keys = (
            KeyStore.postgres(keystore, kek)
            if app_postgres.is_dsn(keystore)
            else KeyStore(keystore, kek)
        )
        shown = [-1]

        def progress(done: int, total: int) -> None:
            pct = done * 100 // max(total, 1)
            if not as_json and pct != shown[0] and sys.stderr.isatty():
                shown[0] = pct
                sys.stderr.write(f"\rencrypting {done}/{total} rows ({pct}%)")
                sys.stderr.flush()

        try:
            if pg:
                out = encrypt_postgres_database(db, Encryption(keys), progress=progress)
            else:
                out = encrypt_sqlite_database(Path(db), Encryption(keys), progress=progress)
        finally:
            keys.close()
    if shown[0] >= 0:
        sys.stderr.write("\n")
    if as_json:
        doc: dict[str, Any] = {"ok": True, "exit_code": 0, "checkpoints": out.checkpoints,
                               "writes": out.writes, "already_sealed": out.already_sealed,
                               "threads": out.threads,
                               "store_items_plaintext": out.store_plaintext}  # fmt: skip
        if pg:
            doc |= {"blobs": out.blobs, "vacuumed": out.vacuumed}
        _emit_json(doc)
        return
    if pg:
        typer.echo(
            f"encrypted {out.checkpoints} checkpoint(s) (inline values moved to sealed blobs), "
            f"{out.blobs} blob(s) and {out.writes} write(s) of {out.threads} thread(s) "
            f"({out.already_sealed} already encrypted)"
            + ("; the tables were rewritten (VACUUM FULL)" if out.vacuumed else "")
            + ". The server's WAL and backups taken before this keep the plaintext."
        )
    else:
        typer.echo(
            f"encrypted {out.checkpoints} checkpoint(s) and {out.writes} write(s) of "
            f"{out.threads} thread(s) ({out.already_sealed} already encrypted); the file was "
            "VACUUMed. Backups taken before this keep the plaintext."
        )
    if out.store_plaintext:
        typer.echo(
            f"{out.store_plaintext} store item(s) (table store) stay plaintext: receipt "
            "encrypt does not seal store items, and a shred refuses while a subject's store "
            "namespace holds one (re-write them through Encryption.wrap_store, or erase them)"
        )
