"""``receipt digest``, ``erase``, ``recover``, ``locate`` and ``authorize``: measuring and
erasing threads and data subjects."""

from __future__ import annotations

import errno
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .._batch import _read_arg
from ..errors import (
    ErasureError,
    ErasureIncompleteError,
    Error,
    InputError,
    NothingToEraseError,
)
from ..receipt import Receipt
from ..signing import Signer
from ..verify import _display
from ..verify import read_input as _read_input
from ._app import (
    DB_HELP,
    AllowInsecureKey,
    CommitmentKeyFile,
    JsonFlag,
    PasswordEnv,
    VacuumMode,
    Verbose,
    _check_archive,
    _check_out,
    _check_time,
    _check_unicode,
    _commitment_key_file,
    _instant,
    _load_signer,
    _namespaces,
    _open_saver,
    _probe_database,
    _vacuum_mode,
    _write_out,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE

StoreNs = Annotated[
    list[str] | None,
    typer.Option(
        "--store-ns", help="a store namespace prefix in the scope, e.g. users/alice; repeatable"
    ),
]
NamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        help="erase one store namespace and everything below it, labels joined with '.' "
        "(e.g. users.alice); no thread (RECEIPT_SPEC.md 9.7)",
    ),
]
Threads = Annotated[
    list[str] | None,
    typer.Option(
        "--thread",
        help="thread id (one; with --subject: repeatable, added to the threads found)",
    ),
]
SubjectId = Annotated[
    str | None, typer.Option("--subject", help="data subject: erase all of its threads")
]
MetadataKey = Annotated[
    str | None,
    typer.Option(
        "--metadata-key",
        help="with --subject: also every thread whose checkpoint metadata has KEY == subject "
        "(e.g. user_id)",
    ),
]
Needles = Annotated[
    list[str] | None,
    typer.Option(
        "--needle",
        help="with --subject: a value that must be gone from the whole database afterwards "
        "(e.g. an email; refused, with its locations, if found); repeatable",
    ),
]
NeedlesFile = Annotated[
    str | None,
    typer.Option(
        "--needles-file",
        help="read values to search for from this file ('-': standard input), one per "
        "line, UTF-8 (they stay out of ps and shell history)",
    ),
]
PrivacyMode = Annotated[
    str | None,
    typer.Option("--privacy", help="'commitments': no raw id, namespace or path in the receipt"),
]
TargetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        help="an application table of the same database erased with the scope, "
        "TABLE:KEY_COLUMN[:thread|subject] (keyed by thread id, the default, or by the "
        "subject); repeatable (RECEIPT_SPEC.md 9.13)",
    ),
]


def _targets(values: list[str] | None) -> list[Any]:
    """``--target TABLE:KEY_COLUMN[:thread|subject]`` as ``SqlTarget`` (exit 2 if bad)."""
    from ..errors import ConfigurationError
    from ..targets import SqlTarget

    out = []
    for v in values or ():
        bits = v.split(":")
        if len(bits) not in (2, 3) or not all(bits):
            _die(f"bad --target {v!r}: use TABLE:KEY_COLUMN[:thread|subject]", EXIT_USAGE)
        try:
            out.append(SqlTarget(bits[0], bits[1], key=bits[2] if len(bits) == 3 else "thread"))
        except ConfigurationError as exc:
            _die(f"bad --target {v!r}: {exc.message}", EXIT_USAGE)
    return out


@app.command()
def digest(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    threads: Threads = None,
    store_ns: StoreNs = None,
    subject: SubjectId = None,
    metadata_key: MetadataKey = None,
    commitment_key: CommitmentKeyFile = None,
    namespace: NamespaceOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    verbose: Verbose = False,
) -> None:
    """Preview (read-only): the pre-deletion digest and row counts an erasure would record
    (with --subject: the threads it would erase, each with its digest and counts)."""
    _run.json = as_json
    _check_unicode(thread=threads, subject=subject, metadata_key=metadata_key)
    if namespace is not None:
        prefix = _namespace_only(namespace, thread=threads, subject=subject,
                                 store_ns=store_ns, metadata_key=metadata_key)  # fmt: skip
        with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
            if not hasattr(saver, "digest_namespace"):
                _die("digest --namespace needs this library's schema in the database "
                     "(run an erasure or setup() once)", EXIT_USAGE)  # fmt: skip
            d = saver.digest_namespace(prefix)
        _print_digest(f"namespace {'.'.join(prefix)!r}", {"namespace": list(prefix)}, d, as_json)
        return
    namespaces = _namespaces(store_ns or [])
    if subject is not None:
        _digest_subject(db, subject, threads or [], metadata_key, namespaces, commitment_key)
        return
    thread = _one_thread(threads, metadata_key=metadata_key, commitment_key=commitment_key)
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        d = saver.digest_thread(thread, namespaces)
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if as_json:
        _emit_json({"thread_id": thread, "digest": d.digest, "tables": tables})
        return
    typer.echo(f"thread  {thread!r}\ndigest  {d.digest} ({d.leaves} rows)")
    for t, c in sorted(tables.items()):
        typer.echo(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes")


RequestId = Annotated[
    str | None,
    typer.Option("--request-id", help="the request behind the erasure (e.g. a ticket id)"),
]
Basis = Annotated[
    str | None,
    typer.Option(
        "--basis",
        help="legal basis: gdpr-art17-1a .. gdpr-art17-1f, retention:POLICY, user-deletion, "
        "or free text (with --request-id)",
    ),
]
Requester = Annotated[str | None, typer.Option("--requester", help="who asked")]
ReceivedAt = Annotated[
    str | None, typer.Option("--received-at", help="when the request arrived (UTC)")
]
Due = Annotated[str | None, typer.Option("--due", help="when the erasure is due (UTC)")]
AuthFile = Annotated[
    Path | None,
    typer.Option("--authorization", help="an approver's AUTH.json from `receipt authorize`"),
]


def _request_context(
    request_id: str | None,
    basis: str | None,
    requester: str | None,
    received_at: str | None,
    due: str | None,
    authorization: Path | None,
) -> dict[str, Any]:
    """``request=``/``authorization=`` for the saver from the erase options (exit 2 on a
    bad value, 3 on an unreadable AUTH.json); empty without --request-id."""
    from ..request import Authorization, RequestContext

    given = {"--basis": basis, "--requester": requester, "--received-at": received_at,
             "--due": due, "--authorization": authorization}  # fmt: skip
    if request_id is None:
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            _die(f"{', '.join(extra)} need(s) --request-id", EXIT_USAGE)
        return {}
    if basis is None:
        _die("--request-id needs --basis (e.g. gdpr-art17-1a, retention:POLICY)", EXIT_USAGE)
    try:
        context = RequestContext(
            request_id, basis, requester, _check_time("--received-at", received_at),
            _check_time("--due", due),
        )  # fmt: skip
    except (ValueError, TypeError) as exc:
        _die(f"bad request context: {exc}", EXIT_USAGE)
    out: dict[str, Any] = {"request": context}
    if authorization is not None:
        shown = _display(str(authorization))
        try:
            out["authorization"] = Authorization.from_json(_read_input(str(authorization)))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{shown}: not an authorization: [{exc.reason}] {exc.message}", EXIT_USAGE,
                 reason="bad_authorization")  # fmt: skip
    return out


@app.command()
def erase(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    threads: Threads = None,
    store_ns: StoreNs = None,
    subject: SubjectId = None,
    metadata_key: MetadataKey = None,
    needle: Needles = None,
    needles_file: NeedlesFile = None,
    privacy: PrivacyMode = None,
    commitment_key: CommitmentKeyFile = None,
    namespace: NamespaceOpt = None,
    target: TargetOpt = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="directory to archive the receipt in")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="also write the receipt here")] = None,
    no_tombstone: Annotated[
        bool, typer.Option("--no-tombstone", help="allow the thread id to be reused")
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="attest an empty scope instead of refusing (exit 1) when nothing is stored",
        ),
    ] = False,
    override_deferral: Annotated[
        bool,
        typer.Option(
            "--override-deferral",
            help="erase a thread or subject an open deferral retains (the receipt names it)",
        ),
    ] = False,
    residue_scan: Annotated[
        bool | None,
        typer.Option(
            "--residue-scan/--no-residue-scan",
            help="scan the database files for copies of the erased rows afterwards "
            "(VACUUM if any) and record the result in the receipt",
        ),
    ] = None,
    vacuum: VacuumMode = None,
    request_id: RequestId = None,
    basis: Basis = None,
    requester: Requester = None,
    received_at: ReceivedAt = None,
    due: Due = None,
    authorization: AuthFile = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document (the receipt inside)")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Erase a thread (and store namespaces) from a SQLite or PostgreSQL database and sign
    a receipt.

    Refuses (exit 1) a scope with no stored rows unless --allow-empty, and an
    --authorization for another scope or request, or past its not-after. --out and
    --archive are checked before anything is deleted.
    """
    _run.json = as_json
    signer = _load_signer(key, password_env, allow_insecure_key)
    context = _request_context(request_id, basis, requester, received_at, due, authorization)
    namespaces = _namespaces(store_ns or [])
    prefix = None
    if namespace is not None:  # 9.7: one store namespace, no thread
        prefix = _namespace_only(
            namespace, thread=threads, subject=subject, store_ns=store_ns,
            metadata_key=metadata_key, privacy=privacy, commitment_key=commitment_key,
            authorization=authorization, target=target,
        )  # fmt: skip
    targets = _targets(target)
    if needles_file is not None:
        if subject is None and prefix is None:
            _die("--needles-file needs --subject", EXIT_USAGE)
        needle = [*(needle or []), *_needles_file(needles_file)]
    thread, by_subject = (
        (None, None) if prefix is not None
        else _erase_target(threads, subject, metadata_key, needle, privacy, commitment_key)
    )  # fmt: skip
    vacuum_mode = _vacuum_mode(vacuum, db)
    if out is not None:
        _check_out(out)
    _probe_database(db)
    if archive is not None:
        _check_archive(archive)
    kwargs: dict[str, Any] = {"store_namespaces": namespaces, "tombstone": not no_tombstone}
    if allow_empty:
        kwargs["allow_empty"] = True
    if override_deferral:
        if prefix is not None:
            _die("--override-deferral is for a thread or a subject, not --namespace", EXIT_USAGE)
        kwargs["override_deferral"] = True
    if residue_scan is not None:
        kwargs["residue_scan"] = residue_scan
    if targets:
        kwargs["targets"] = targets
    kwargs.update(context)
    with _open_saver(db, signer, archive, vacuum=vacuum_mode) as saver:
        if prefix is not None:
            del kwargs["store_namespaces"]
            receipt = _erase_namespace(saver, prefix, needle or [], kwargs)
        elif by_subject is None:
            receipt = saver.erase_thread(thread, **kwargs)
        else:
            receipt = _erase_subject(saver, by_subject, kwargs)
    pre = receipt.predicate["pre_state"]
    summary = (
        f"erased {_erased_what(receipt)}: {pre['leaves']} rows, "
        f"pre digest {receipt.pre_digest}, receipt {receipt.receipt_id}"
    )
    written = [str(archive / f"{receipt.receipt_id}.json")] if archive is not None else []
    if out is not None:
        try:
            _write_out(out, receipt.to_json())
        except OSError as exc:
            # The data is gone; the receipt must not be: it goes to stdout instead.
            msg = f"cannot write {_display(str(out))} ({exc.strerror or exc})"
            if as_json:
                _die(f"{msg}; the receipt is in this document", EXIT_IO, reason="unwritable",
                     receipt_id=receipt.receipt_id, written_to=written,
                     receipt=json.loads(receipt.to_json()))  # fmt: skip
            sys.stdout.buffer.write(receipt.to_json())
            sys.stdout.flush()
            _die(f"{msg}; the receipt was printed on stdout", EXIT_IO, reason="unwritable")
        written.insert(0, str(out))
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "receipt_id": receipt.receipt_id, "thread_id": thread,
            **_subject_fields(receipt),
            "status": receipt.predicate["status"], "pre_digest": receipt.pre_digest,
            "rows": pre["leaves"], "tables": pre["tables"], "written_to": written,
            "receipt": json.loads(receipt.to_json()),
        })  # fmt: skip
        return
    if out is None and archive is None:
        typer.echo(summary, err=True)
        try:
            sys.stdout.buffer.write(receipt.to_json())
            sys.stdout.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            _die(
                f"cannot write the receipt to stdout ({exc.strerror or exc}); it is kept in "
                "the database's erasure journal: `receipt recover DB --key KEY --archive DIR`",
                EXIT_IO,
                reason="unwritable",
            )
        return
    typer.echo(summary)
    for path in written:
        typer.echo(f"written to {path}")


@app.command()
def recover(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    archive: Annotated[Path, typer.Option("--archive", help="directory of archived receipts")],
    password_env: PasswordEnv = None,
    min_age: Annotated[
        float,
        typer.Option(
            help="only entries older than this many seconds (younger ones may "
            "still be signing in a running process; they are counted as skipped)"
        ),
    ] = 300.0,
    allow_insecure_key: AllowInsecureKey = False,
    commitment_key: Annotated[
        Path | None,
        typer.Option(
            "--commitment-key",
            help="commitment key of privacy-mode erasures (their journal entries are sealed "
            "with it)",
        ),
    ] = None,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Issue receipts for erasures that committed but never got one (crash, full disk)."""
    _run.json = as_json
    if min_age < 0:
        _die("--min-age must be >= 0", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    sealed = {}
    if commitment_key is not None:  # privacy-mode journal entries open with it
        sealed["commitment_key"] = _commitment_key_file(commitment_key)
    _probe_database(db)
    _check_archive(archive)
    failure: ErasureError | None = None
    with _open_saver(db, signer, archive, recovering=True) as saver:
        skipped = sum(1 for p in saver.pending_erasures() if p.age_seconds <= min_age)
        try:
            receipts = saver.recover_receipts(min_age_seconds=min_age, **sealed)
        except ErasureIncompleteError as exc:
            receipts, failure = list(exc.recovered), exc
        except ErasureError as exc:
            receipts, failure = [], exc
        stored = saver.journal_receipts()
    # Receipts the journal holds but the archive lacks (e.g. one printed to a stdout
    # that failed): write them out, so the archive is complete after every run.
    recovered = [
        {"receipt_id": r.receipt_id, "thread_id": r.thread_id,
         "path": str(archive / f"{r.receipt_id}.json")}
        for r in receipts
    ]  # fmt: skip
    exported: list[str] = []
    skip_doc = {"count": skipped, "min_age_seconds": min_age}
    for r in stored:
        path = archive / f"{r.receipt_id}.json"
        if not path.exists():
            try:
                r.save(path)
            except OSError as exc:
                _die(f"cannot write {_display(str(path))}: {exc.strerror or exc}", EXIT_IO,
                     reason="unwritable", recovered=recovered, exported=exported,
                     skipped=skip_doc)  # fmt: skip
            exported.append(r.receipt_id)
    if not as_json:
        for r in receipts:
            typer.echo(f"{r.receipt_id}  thread {r.thread_id!r}  written to {archive}")
    typer.echo(
        f"{len(receipts)} receipt(s) recovered, {len(exported)} exported from the journal",
        err=True,
    )
    if skipped:
        entries = "entry" if skipped == 1 else "entries"
        typer.echo(
            f"{skipped} journal {entries} skipped: younger than --min-age {min_age:g} s (it may "
            "still be signing in a running process); run again later or with a smaller "
            "--min-age",
            err=True,
        )
    if failure is not None:
        unparsable = failure.unparsable if isinstance(failure, ErasureIncompleteError) else []
        _die(f"[{failure.reason}] {failure.message}", EXIT_INVALID, reason=failure.reason,
             recovered=recovered, exported=exported, skipped=skip_doc,
             unparsable=unparsable)  # fmt: skip
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "recovered": recovered, "exported": exported,
                    "skipped": skip_doc})  # fmt: skip


# -- four-eyes authorization (RECEIPT_SPEC.md 9.6) ---------------------------------------


class AuthKind(StrEnum):
    thread = "thread"
    history = "history"
    subject = "subject"


@app.command()
def authorize(
    request_id: Annotated[
        str, typer.Option("--request-id", help="the request (ticket) the erasure must carry")
    ],
    not_after: Annotated[
        str, typer.Option("--not-after", help="last time (UTC) an erasure may start with it")
    ],
    key: Annotated[
        Path, typer.Option("--key", help="the approver's Ed25519 private key (PEM, mode 0600)")
    ],
    out: Annotated[Path, typer.Option("--out", help="authorization file to write (AUTH.json)")],
    threads: Annotated[
        list[str] | None,
        typer.Option(
            "--thread",
            help="thread id (thread and history erasures; with --subject: an explicit thread "
            "the erasure must name, repeatable)",
        ),
    ] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="data subject id (subject erasures)")
    ] = None,
    metadata_key: Annotated[
        str | None,
        typer.Option(
            "--metadata-key",
            help="with --subject: the metadata key the erasure may discover threads by",
        ),
    ] = None,
    store_ns: StoreNs = None,
    kind: Annotated[
        AuthKind | None,
        typer.Option(help="erasure kind (default: thread with --thread, subject with --subject)"),
    ] = None,
    commitment_key: Annotated[
        Path | None,
        typer.Option(
            "--commitment-key",
            help="privacy mode: authorize the commitments the receipt will carry (the "
            "erasure's commitment key file)",
        ),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Approve one erasure (four eyes): sign the request id, the exact scope and a deadline.

    The operator passes AUTH.json to `receipt erase --authorization`; the saver refuses,
    before deleting anything, another scope or request id, or a time after --not-after.
    Auditors check the approver with `receipt verify --trust` (key with role approver).
    """
    from datetime import UTC, datetime

    from ..request import authorize as sign_authorization
    from ..request import erasure_scope

    _run.json = as_json
    _check_unicode(thread=threads, subject=subject, metadata_key=metadata_key)
    if not threads and subject is None:
        _die("give exactly one of --thread ID or --subject ID", EXIT_USAGE)
    k = kind.value if kind is not None else ("subject" if subject is not None else "thread")
    if (k == "subject") != (subject is not None):
        if k != "subject" and subject is not None and threads:
            _die("give exactly one of --thread ID or --subject ID (--thread with --subject "
                 "names the subject's explicit threads)", EXIT_USAGE)  # fmt: skip
        _die(f"--kind {k} needs {'--subject' if k == 'subject' else '--thread'}", EXIT_USAGE)
    if k == "subject" and not threads and metadata_key is None:
        _die("--subject needs --thread ID (repeatable) and/or --metadata-key KEY: the "
             "authorization names the threads the erasure may erase", EXIT_USAGE)  # fmt: skip
    if k != "subject" and (len(threads or ()) != 1 or metadata_key is not None):
        _die("a thread or history authorization names one --thread (--metadata-key only "
             "with --subject)", EXIT_USAGE)  # fmt: skip
    thread = threads[0] if k != "subject" and threads else None
    na = _check_time("--not-after", not_after)
    assert na is not None
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if _instant(na, "") < _instant(now, ""):
        _die(f"--not-after {na} is in the past (now {now})", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    _check_out(out)
    commit = None
    if commitment_key is not None:
        from ..privacy import CommitmentKey

        try:
            ck = CommitmentKey.from_file(commitment_key, allow_insecure=allow_insecure_key)
            commit = ck.commit
        except OSError as exc:
            _die(f"cannot read {_display(str(commitment_key))}: {exc.strerror or exc}", EXIT_IO)
        except Error as exc:
            _die(f"{_display(str(commitment_key))}: {exc.message}", EXIT_USAGE, reason="bad_key")
    target = subject if k == "subject" else thread
    assert target is not None
    bound: dict[str, Any] = {}
    if k == "subject":
        bound = {"threads": threads or [], "discovery": metadata_key}
    scope = erasure_scope(k, target, _namespaces(store_ns or []), commit=commit, **bound)
    try:
        auth = sign_authorization(signer, request_id=request_id, scope=scope, not_after=na)
    except (ValueError, TypeError) as exc:
        _die(str(exc), EXIT_USAGE)
    try:
        _write_out(out, auth.to_json())
    except FileExistsError:
        _die(f"{_display(str(out))} already exists; refusing to overwrite it", EXIT_IO,
             reason="output_exists")  # fmt: skip
    except OSError as exc:
        _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "request_id": auth.request_id, "scope": auth.scope,
            "not_after": auth.not_after, "key_id": signer.key_id, "written_to": str(out),
            "authorization": auth.to_dict(),
        })  # fmt: skip
        return
    what = f"subject {subject!r}" if k == "subject" else f"thread {thread!r}"
    if k == "subject":
        what += f", threads {', '.join(repr(t) for t in threads or []) or 'none'}"
        what += f", discovery by {metadata_key!r}" if metadata_key is not None else ""
    nss = ", ".join("/".join(ns) for ns in store_ns or []) or "none"
    if commit is not None:
        what += " (as commitments)"
    typer.echo(
        f"authorized request {auth.request_id!r}: {k} erasure of {what} (store namespaces "
        f"{nss}) until {auth.not_after}; approver key {signer.key_id}"
    )
    typer.echo(f"written to {_display(str(out))}")


# -- erasure per person: --subject, locate ---------------------------------------------


def _one_thread(threads: list[str] | None, **subject_only: Any) -> str:
    """The one ``--thread`` of a thread erasure or digest; subject-only options refused."""
    given = [f"--{k.replace('_', '-')}" for k, v in subject_only.items() if v]
    if given:
        _die(f"{', '.join(given)} need(s) --subject", EXIT_USAGE)
    if not threads:
        _die("give --thread ID (or --subject ID for every thread of a data subject)", EXIT_USAGE)
    if len(threads) > 1:
        _die("--thread is given once, unless with --subject (one receipt for several threads)",
             EXIT_USAGE)  # fmt: skip
    return threads[0]


def _erase_target(
    threads: list[str] | None,
    subject: str | None,
    metadata_key: str | None,
    needles: list[str] | None,
    privacy: str | None,
    commitment_key: Path | None,
) -> tuple[str | None, dict[str, Any] | None]:
    """``(thread, None)`` for a thread erasure, or ``(None, erase_subject arguments)``."""
    _check_unicode(thread=threads, subject=subject, metadata_key=metadata_key, needle=needles)
    if subject is None:
        thread = _one_thread(threads, metadata_key=metadata_key, needle=needles,
                             privacy=privacy, commitment_key=commitment_key)  # fmt: skip
        return thread, None
    if privacy not in (None, "commitments"):
        _die(f"--privacy takes 'commitments', not {privacy!r}", EXIT_USAGE)
    if (privacy is None) != (commitment_key is None):
        _die("--privacy commitments and --commitment-key KEYFILE go together", EXIT_USAGE)
    if not threads and metadata_key is None:
        _die("--subject needs --metadata-key KEY (e.g. user_id) and/or --thread ID", EXIT_USAGE)
    out: dict[str, Any] = {"subject_id": subject, "threads": threads or [],
                           "metadata_key": metadata_key, "needles": needles or []}  # fmt: skip
    if commitment_key is not None:
        out.update(privacy="commitments", commitment_key=_commitment_key_file(commitment_key))
    return None, out


def _erase_subject(saver: Any, by_subject: dict[str, Any], kwargs: dict[str, Any]) -> Receipt:
    from .._engine import NeedlesFoundError

    try:
        receipt: Receipt = saver.erase_subject(**by_subject, **kwargs)
    except NothingToEraseError as exc:
        _die(exc.message, EXIT_INVALID, reason=exc.reason)
    except NeedlesFoundError as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason,
             locations=exc.locations)  # fmt: skip
    return receipt


def _namespace_only(value: str, **others: Any) -> tuple[str, ...]:
    """``--namespace users.alice`` as labels (exit 2: an empty label, or options that
    name another scope)."""
    _check_unicode(namespace=[value])
    given = [f"--{k.replace('_', '-')}" for k, v in others.items() if v]
    if given:
        _die(f"--namespace erases one store namespace; it does not take {', '.join(given)}",
             EXIT_USAGE)  # fmt: skip
    labels = tuple(value.split("."))
    if not all(labels):
        _die(f"bad namespace {value!r}: use '.'-separated non-empty labels (users.alice)",
             EXIT_USAGE)  # fmt: skip
    return labels


def _erase_namespace(
    saver: Any, prefix: tuple[str, ...], needles: list[str], kwargs: dict[str, Any]
) -> Receipt:
    from .._engine import NeedlesFoundError

    try:
        receipt: Receipt = saver.erase_namespace(prefix, needles=needles, **kwargs)
    except NothingToEraseError as exc:
        _die(exc.message, EXIT_INVALID, reason=exc.reason)
    except NeedlesFoundError as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason,
             locations=exc.locations)  # fmt: skip
    return receipt


def _print_digest(what: str, head: dict[str, Any], d: Any, as_json: bool) -> None:
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if as_json:
        _emit_json({**head, "digest": d.digest, "tables": tables})
        return
    typer.echo(f"{what}\ndigest  {d.digest} ({d.leaves} rows)")
    for t, c in sorted(tables.items()):
        typer.echo(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes")


def _erased_what(receipt: Receipt) -> str:
    scope = receipt.predicate["scope"]
    if "namespace" in scope:
        return f"store namespace {'.'.join(scope['namespace'])!r}"
    if "subject" not in scope:
        return f"thread {scope['thread_id']!r}"
    return f"subject {scope['subject']!r} ({len(scope['threads'])} threads)"


def _subject_fields(receipt: Receipt) -> dict[str, Any]:
    """``erase --json`` members of a subject receipt (as the receipt names them)."""
    scope = receipt.predicate["scope"]
    if "namespace" in scope:  # 9.7: the store namespace, no thread
        return {"namespace": scope["namespace"]}
    if "subject" not in scope:
        return {}
    return {"subject": scope["subject"], "threads": scope["threads"]}


def _reader(saver: Any) -> Any:
    """A saver for the read-only subject operations. On a PostgreSQL database without
    this library's schema, ``_open_saver(read_only=True)`` yields a bare measuring
    object; the Postgres saver on that read-only connection installs nothing for them."""
    if hasattr(saver, "locate"):
        return saver
    from langgraph.store.postgres import PostgresStore

    from .._savers.postgres import AttestingPostgresSaver

    store = PostgresStore(saver.conn) if saver.has_store else None
    return AttestingPostgresSaver(saver.conn, signer=Signer.generate(), store=store)


def _digest_subject(
    db: str,
    subject: str,
    threads: list[str],
    metadata_key: str | None,
    namespaces: list[tuple[str, ...]],
    commitment_key: Path | None,
) -> None:
    if not threads and metadata_key is None:
        _die("--subject needs --metadata-key KEY (e.g. user_id) and/or --thread ID", EXIT_USAGE)
    key = _commitment_key_file(commitment_key) if commitment_key is not None else None
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        try:
            d = _reader(saver).digest_subject(
                subject, threads=threads, metadata_key=metadata_key,
                store_namespaces=namespaces, commitment_key=key,
            )  # fmt: skip
        except NothingToEraseError as exc:
            _die(exc.message, EXIT_INVALID, reason=exc.reason)
    units = {
        name: {"digest": u.digest, "rows": u.leaves,
               "tables": {k: v.to_json() for k, v in u.tables.items()}}
        for name, u in sorted(d.units.items())
    }  # fmt: skip
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if _run.json:
        _emit_json({"subject": subject, "threads": list(d.threads), "digest": d.digest,
                    "rows": d.leaves, "tables": tables, "units": units})  # fmt: skip
        return
    typer.echo(f"subject {subject!r}: {len(d.threads)} thread(s)")
    typer.echo(f"digest  {d.digest} ({d.leaves} rows)")
    for name, u in units.items():
        typer.echo(f"  {name:<44} {u['rows']:>8} rows  {u['digest']}")


def _needles_file(path: str) -> list[str]:
    """The values of a ``--needles-file`` (``-``: stdin): one per line, UTF-8, empty
    lines skipped. Exit 3 if it cannot be read, 2 if it is not UTF-8 or holds none."""
    shown = "standard input" if path == "-" else _display(path)
    try:
        data = _read_arg(path)
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        _die(f"--needles-file {shown}: line {line} is not valid UTF-8 text", EXIT_USAGE)
    lines = text.removeprefix("\ufeff").split("\n")  # only LF (CRLF) ends a line
    values = [v.removesuffix("\r") for v in lines if v.removesuffix("\r")]
    if not values:
        _die(f"--needles-file {shown}: no values (one per line)", EXIT_USAGE)
    return values


def _describe_location(loc: Any) -> str:
    fields = {k: v for k, v in loc.to_json().items() if k not in ("needle", "form", "table")}
    where = " ".join(f"{k}={v!r}" for k, v in fields.items() if k not in ("column", "via"))
    via = "" if loc.via == "sql" else f" (via {loc.via})"
    return f"#{loc.needle} {loc.form:<18} {loc.table}.{loc.column}  {where}{via}"


@app.command("locate")
def locate_cmd(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    needles: Annotated[
        list[str] | None, typer.Argument(help="values to find (an email, a name, ...)")
    ] = None,
    needles_file: NeedlesFile = None,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Find every stored copy of a value (read-only): every row of the checkpoint tables
    and the store, by raw byte search, also in JSON's \\uXXXX-escaped forms.

    One line per location (#N is the value's position on the command line). Exit 0
    whether or not anything is found; the count is on stderr (or in --json).
    """
    _run.json = as_json
    needles = list(needles or [])
    if needles_file is not None:
        needles += _needles_file(needles_file)
    if not needles:
        _die("name the values to find: VALUE... or --needles-file F", EXIT_USAGE)
    _check_unicode(value=needles)
    if any(not n for n in needles):
        _die("a value to find must not be empty", EXIT_USAGE)
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        found = _reader(saver).locate(needles)
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "found": len(found),
                    "locations": [loc.to_json() for loc in found]})  # fmt: skip
        return
    for loc in found:
        typer.echo(_describe_location(loc))
    typer.echo(f"{len(found)} location(s) of {len(needles)} value(s)", err=True)
