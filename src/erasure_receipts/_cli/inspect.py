"""``receipt show``, ``export``, ``index``, ``prove`` and ``open``: reading receipts."""

from __future__ import annotations

import json
import os
import stat
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import (
    ConfigurationError,
    Error,
    InputError,
)
from ..privacy import open_claims
from ..receipt import Receipt
from ..verify import _display
from ..verify import read_input as _read_input
from ._app import (
    CommitmentKeyFile,
    JobsOption,
    JsonFlag,
    KeyOption,
    TrustOption,
    Verbose,
    _check_out,
    _check_unicode,
    _commitment_key_file,
    _log_errors,
    _read_trust,
    _trusted,
    _write_out,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE


def _load_receipt(path: Path) -> Receipt:
    try:
        return Receipt.from_json(_read_input(str(path)))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(
            f"{_display(str(path))}: [{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason
        )


@app.command()
def show(
    file: Annotated[Path, typer.Argument(help="receipt file or DSSE envelope")],
    as_json: Annotated[bool, typer.Option("--json", help="print the statement as JSON")] = False,
    verbose: Verbose = False,
) -> None:
    """Summarise a receipt for a human. Does NOT verify it: use `receipt verify`."""
    _run.json = as_json
    r = _load_receipt(file)
    if as_json:
        typer.echo(json.dumps(r.statement, indent=2, ensure_ascii=False))
        return
    p = r.predicate
    pre, post = p["pre_state"], p["post_state"]
    kind, scope = p.get("kind", "thread"), p["scope"]
    lines = [
        f"receipt      {p['receipt_id']}  (NOT verified; run `receipt verify`)",
        f"kind         {kind}" + ("" if "kind" in p else " (no kind member: a thread receipt)"),
        f"status       {p['status']}"
        + (" - EMPTY SCOPE: no rows existed, nothing was deleted" if not pre["leaves"] else ""),
        *_show_scope(p),
        "store ns     " + (", ".join("/".join(ns) for ns in scope["store_namespaces"]) or "(none)"),
        f"tombstone    {'yes' if scope['tombstone'] else 'no'}" + _store_tombstone_text(scope),
        f"issued at    {p['issued_at']}",
        f"backend      {p['backend']['kind']} via {p['backend']['saver']}"
        f" (store: {p['backend']['store'] or 'none'})",
        f"pre digest   {pre['digest']['sha256']} ({pre['leaves']} rows"
        + {
            "history": " removed)",
            "redaction": " before the rewrite)",
            "deferral": " retained)",
        }.get(kind, ")"),
        f"post digest  {post['digest']['sha256']} ({post['leaves']} rows"
        + (" after the rewrite)" if kind == "redaction" else ")"),
    ]
    for t, c in sorted(pre["tables"].items()):
        after = post["tables"].get(t, {}).get("rows", "?")  # unverified: may be inconsistent
        lines.append(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes -> {after} rows")
    lines += _show_kind_members(p)
    lines.append("methods      " + ", ".join(f"{k}={v}" for k, v in sorted(p["methods"].items())))
    lines.append("checks       " + ", ".join(f"{c['name']}={c['result']}" for c in p["checks"]))
    for res in p["residue"]:
        detail = ", ".join(f"{k}={v}" for k, v in res["detail"].items())
        lines.append(f"residue      {res['action']}: {res['status']} ({detail})")
    lines.append("out of scope " + ", ".join(o["id"] for o in p["out_of_scope"]))
    if "request" in p:  # RECEIPT_SPEC.md 9.6
        rq = p["request"]
        when = "".join(f", {k.replace('_', ' ')} {rq[k]}" for k in ("received_at", "due") if rq[k])
        lines.append(f"request      {rq['id']!r} (basis {rq['basis']!r}){when}")
    if "replay_of" in p:  # RECEIPT_SPEC.md 9.11
        lines.append(f"replay of    {p['replay_of']} (the same scope erased again after a restore)")
    for t in p.get("targets") or ():  # RECEIPT_SPEC.md 9.13
        lines.append(f"target       {_target_text(t)}")
    if "deferral" in p:  # RECEIPT_SPEC.md 9.14: a decision to retain, not an erasure
        d = p["deferral"]
        lines.append(f"retained     until {d['until']} (a decision NOT to erase yet; nothing "
                     "was deleted)")  # fmt: skip
        lines.append(f"basis        {d['basis']!r}" + (f" (code {d['code']})" if d["code"] else ""))
    if "deferral_of" in p:  # RECEIPT_SPEC.md 9.14
        lines.append(f"deferral of  {p['deferral_of']} (the deferral this erasure carries out)")
    if "authorization" in p:
        a = p["authorization"]
        keys = ", ".join(s["keyid"][:16] for s in a["signatures"])
        lines.append(f"authorized   until {a['statement']['not_after']} by key {keys} "
                     "(approver checked by `receipt verify --trust`)")  # fmt: skip
    signers = ", ".join(s.keyid[:16] for s in r.signatures)
    lines.append(f"signed by    {signers}")
    typer.echo("\n".join(lines))


def _target_text(t: dict[str, Any]) -> str:
    """One erasure target as ``receipt show`` names it (RECEIPT_SPEC.md 9.13)."""
    what = {
        "sql": f"table {t.get('table')!r} by {t.get('key_column')!r}"
        + (f" in {t['database']}" if "database" in t else " (same database)"),
        "vectorstore": f"{t.get('store')} documents"
        + (f" by metadata {t['metadata_key']!r}" if "metadata_key" in t else " by ids"),
        "function": "items through the target protocol",
    }.get(str(t["type"]), str(t["type"]))
    after = ", only once the threads were verified gone" if "after" in t else ""
    return f"target:{t['name']}: {what}, keyed by {t['key']}, {t['method']}{after}"


def _show_scope(p: dict[str, Any]) -> list[str]:
    """``receipt show``: what the scope names, by kind (RECEIPT_SPEC.md 9.1)."""
    scope, kind = p["scope"], p.get("kind", "thread")
    if kind == "deferral":  # 9.14: the retained scope, as an erasure of it names it
        kind = p["deferral"]["of_kind"]
    if kind == "subject":
        found = scope["discovery"]
        lines = [
            f"subject      {scope['subject']!r}",
            f"threads      {len(scope['threads'])}: "
            + ", ".join(repr(t) for t in scope["threads"]),
            "discovery    "
            + (f"metadata key {found['metadata_key']!r}" if found else "none (threads named)"),
        ]
    elif kind == "namespace":  # RECEIPT_SPEC.md 9.7
        lines = [
            f"namespace    {'/'.join(scope['namespace'])!r} (every item at or below it, "
            "expired ones included; no thread)"
        ]
    elif kind == "shred":  # RECEIPT_SPEC.md 9.16
        ks = scope["key_store"]
        whose = "subject" if scope["key_scope"] == "subject" else "thread "
        lines = [
            f"{whose}      {scope['subject']!r} (its data key destroyed: crypto-shredded; "
            "the rows stay, as ciphertext)",
            f"threads      {len(scope['threads'])}: "
            + ", ".join(repr(t) for t in scope["threads"]),
            f"key          commitment {scope['key_commitment']}",
            f"key store    {ks['kind']}, scrub {ks['scrub']}, its backups kept "
            + (ks["backup_retention"] or "(retention not stated)")
            + " - backups of the data hold ciphertext only readable with a surviving key copy",
        ]
    elif kind == "history":
        lines = [
            f"thread       {scope['thread_id']!r} (history: every checkpoint except the "
            f"{scope['keep']} of each namespace; the thread lives on)"
        ]
    elif kind == "redaction":  # RECEIPT_SPEC.md 9.12
        lines = [
            f"thread       {scope['thread_id']!r} (all checkpoint namespaces)",
            "redaction    the rows holding a needle rewritten in place; every checkpoint kept",
        ]
    else:
        lines = [f"thread       {scope['thread_id']!r} (all checkpoint namespaces)"]
    if "privacy" in scope:
        lines.append(
            f"privacy      ids are {scope['privacy']['mode']} commitments "
            f"(commitment key id {scope['privacy']['key_id'][:16]}; `receipt open` checks ids)"
        )
    return lines


def _store_tombstone_text(scope: dict[str, Any]) -> str:
    """Whether the store prefixes are tombstoned too (8.1; absent in older receipts)."""
    if scope.get("namespace") is not None:
        return " (the database refuses puts at or below the prefix)" * bool(scope["tombstone"])
    if "store_tombstone" not in scope:
        return ""
    return f"; store namespaces {'tombstoned' if scope['store_tombstone'] else 'not tombstoned'}"


def _show_kind_members(p: dict[str, Any]) -> list[str]:
    """``receipt show``: the kept state (history), units (subject) and needles."""
    lines: list[str] = []
    if "kept_state" in p:
        k = p["kept_state"]
        lines.append(f"kept digest  {k['digest']['sha256']} ({k['leaves']} rows kept)")
        for t, c in sorted(k["tables"].items()):
            lines.append(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes kept")
        cps = ", ".join(f"{c['checkpoint_ns']!r}/{c['checkpoint_id']}" for c in k["checkpoints"])
        lines.append(f"kept cps     {cps or '(none)'}")
    if "redaction" in p:  # RECEIPT_SPEC.md 9.12
        r = p["redaction"]
        lines.append(
            f"checkpoints  {r['checkpoints_before']} before, {r['checkpoints_after']} after "
            f"(replacement sha256 {r['replacement']['sha256'][:16]}...)"
        )
    for u in p.get("units") or ():
        lines.append(f"unit         {u['name']!r}: {u['leaves']} rows, {u['digest']['sha256']}")
    if "needles" in p:
        n = p["needles"]
        lines.append(
            f"needles      {len(n['values'])} value(s) ({n['commitment']}"
            f"{', salted' if n['salt'] else ', keyed'}), searched {n['searched']}, "
            f"{n['occurrences_after']} occurrence(s) after, forms {', '.join(n['forms'])}"
        )
    return lines


class ExportFormat(StrEnum):
    dsse = "dsse"
    statement = "statement"


@app.command()
def export(
    file: Annotated[Path, typer.Argument(help="receipt file")],
    fmt: Annotated[ExportFormat, typer.Option("--format", help="output format")] = (
        ExportFormat.dsse
    ),
    out: Annotated[Path | None, typer.Option("--out", help="write here instead of stdout")] = None,
    verbose: Verbose = False,
) -> None:
    """Export a receipt as a standard DSSE envelope (or its canonical statement)."""
    r = _load_receipt(file)
    if out is not None:
        _check_out(out)
    if fmt is ExportFormat.dsse:
        data = (json.dumps(r.to_dsse(), indent=2) + "\n").encode("utf-8")
    else:
        data = r.payload
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        _write_out(out, data)
    except FileExistsError:
        _die(f"{_display(str(out))} already exists; refusing to overwrite it", EXIT_IO,
             reason="output_exists")  # fmt: skip
    except OSError as exc:
        _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip


# -- legal hold ---------------------------------------------------------------------------


def _read_record(path: Path) -> bytes:
    """A row record (ROW.json): like ``_read_input``, with the record size limit."""
    from ..proof import MAX_RECORD_BYTES

    shown = _display(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                _die(f"cannot read {shown}: not a regular file", EXIT_IO)
            data = fh.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        _die(f"cannot read {shown}: {exc.strerror or exc}", EXIT_IO)
    if len(data) > MAX_RECORD_BYTES:
        _die(f"{shown}: over the {MAX_RECORD_BYTES}-byte row record limit", EXIT_INVALID,
             reason="malformed_record")  # fmt: skip
    return data


@app.command()
def prove(
    row: Annotated[Path, typer.Argument(help="row record (ROW.json) kept from export_leaves")],
    receipt: Annotated[Path, typer.Option("--receipt", help="the erasure's receipt file")],
    key: Annotated[
        list[Path] | None,
        typer.Option("--key", help="trusted Ed25519 public key (PEM); repeatable"),
    ] = None,
    trust: Annotated[
        Path | None, typer.Option("--trust", help="trust file (keys with validity windows)")
    ] = None,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Legal hold: prove a kept row was inside an erasure (receipt + RFC 9162 inclusion)."""
    from ..errors import VerificationError
    from ..proof import LeafRecord, verify_leaf_record
    from ..signing import PublicKey
    from ..verify import TrustStore

    _run.json = as_json
    if not key and trust is None:
        _die("give the trusted key with --key PUB.pem or --trust TRUSTFILE", EXIT_USAGE)
    trusted: list[Any] = []
    for k in key or []:
        try:
            trusted.append(PublicKey.from_pem(_read_input(str(k))))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{_display(str(k))}: bad key: {exc.message}", EXIT_USAGE, reason="bad_key")
    if trust is not None:
        trusted += _read_trust(trust)[1]
    shown = _display(str(row))
    try:
        receipt_bytes = _read_input(str(receipt))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{_display(str(receipt))}: [{exc.reason}] {exc.message}", EXIT_INVALID,
             reason=exc.reason)  # fmt: skip
    record_bytes = _read_record(row)
    try:
        record = LeafRecord.from_json(record_bytes)
        proven = verify_leaf_record(record, receipt_bytes, TrustStore(trusted))
    except VerificationError as exc:
        _die(f"{shown}: [{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason)
    v = proven.receipt
    if as_json:
        _emit_json(
            {"ok": True, "exit_code": 0, "file": shown, "receipt_id": v.receipt_id,
             "thread_id": v.thread_id, "issued_at": v.issued_at, "pre_digest": v.pre_digest,
             "key_id": v.key_id, "table": proven.table,
             "primary_key": record.to_dict()["primary_key"], "index": proven.index,
             "tree_size": proven.tree_size, "unit": proven.unit}
        )  # fmt: skip
        return
    scope = "thread" if proven.unit is None else "subject"
    where = "the pre-state" if proven.unit is None else f"unit {proven.unit!r}"
    typer.echo(
        f"OK    {shown}: {proven.table} row {proven.primary_key!r} is leaf {proven.index} of "
        f"{proven.tree_size} in {where} of receipt {v.receipt_id} ({scope} "
        f"{v.thread_id!r}, erased {v.issued_at}, key {v.key_id[:16]})"
    )


class IndexFormat(StrEnum):
    ndjson = "ndjson"
    csv = "csv"


@app.command("index")
def index_cmd(
    paths: Annotated[list[str], typer.Argument(help="receipt files, directories or logs")],
    key: KeyOption = None,
    trust: TrustOption = None,
    fmt: Annotated[IndexFormat, typer.Option("--format", help="output format")] = (
        IndexFormat.ndjson
    ),
    rejected: Annotated[
        Path | None,
        typer.Option("--rejected", help="also write the rejected receipts here (NDJSON)"),
    ] = None,
    jobs: JobsOption = None,
    verbose: Verbose = False,
) -> None:
    """Dashboard feed: one flat record per verified receipt (schemas/index-record.schema.json)
    on stdout; receipts that do not verify are never records: they are listed on stderr
    (and in --rejected FILE). Exit 1 if any was rejected, 3 if any could not be read."""
    from .._batch import default_jobs
    from ..index import build, csv_header, csv_row, index_items

    trusted = _trusted(key, trust)
    skip = [str(p) for p in [*(key or []), *([trust] if trust else [])]]
    if rejected is not None:
        _check_out(rejected)
    with _log_errors():
        items = index_items(paths, skip)
    if not items:
        _die("no receipts found", EXIT_USAGE)
    out = sys.stdout
    if fmt is IndexFormat.csv:
        out.write(csv_header())
    rejects: list[dict[str, Any]] = []
    n = 0
    for res in build(items, trusted, jobs if jobs is not None else default_jobs()):
        rec = res.get("record")
        if rec is None:
            r = res["rejected"]
            rejects.append(r)
            typer.echo(f"REJECTED  {r['source']}: [{r['reason']}] {r['message']}", err=True)
            continue
        n += 1
        out.write(
            csv_row(rec) if fmt is IndexFormat.csv else json.dumps(rec, ensure_ascii=False) + "\n"
        )
    out.flush()
    if rejected is not None:
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejects).encode("utf-8")
        try:
            _write_out(rejected, data)
        except OSError as exc:
            _die(f"cannot write {_display(str(rejected))}: {exc.strerror or exc}", EXIT_IO,
                 reason="unwritable")  # fmt: skip
    typer.echo(f"{n} indexed, {len(rejects)} rejected", err=True)
    unreadable = any(r["reason"] == "unreadable" for r in rejects)
    raise typer.Exit(EXIT_IO if unreadable else EXIT_INVALID if rejects else 0)


@app.command("open")
def open_receipt(
    file: Annotated[Path, typer.Argument(help="receipt file")],
    commitment_key: CommitmentKeyFile = None,
    thread: Annotated[
        list[str] | None, typer.Option("--thread", help="a thread id it erased; repeatable")
    ] = None,
    subject: Annotated[str | None, typer.Option("--subject", help="the data subject")] = None,
    store_ns: Annotated[
        list[str] | None,
        typer.Option("--store-ns", help="a store namespace prefix (users/alice); repeatable"),
    ] = None,
    database: Annotated[
        str | None, typer.Option("--database", help="database path (or PostgreSQL label)")
    ] = None,
    needle: Annotated[
        list[str] | None, typer.Option("--needle", help="a value it searched for; repeatable")
    ] = None,
    key: KeyOption = None,
    trust: TrustOption = None,
    no_verify: Annotated[
        bool,
        typer.Option(
            "--no-verify",
            help="open a receipt without verifying it (the output says NOT verified)",
        ),
    ] = False,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Show an auditor that the given ids are the ones a receipt names.

    A privacy-mode receipt carries HMAC commitments only: with its commitment key this
    recomputes them (the key must be the receipt's, by key id). The receipt is verified
    first with --key or --trust, and the ids are looked up in the verified statement;
    --no-verify skips that (and says so). Exit 0 if every id given is in the receipt, 1
    if one is not (or the key is not the receipt's, or the receipt does not verify), 2
    without --key, --trust or --no-verify.
    """
    _run.json = as_json
    _check_unicode(thread=thread, subject=subject, needle=needle)
    claims = [("thread", t) for t in thread or []] + [("store-ns", n) for n in store_ns or []]
    claims += [("needle", n) for n in needle or []]
    claims += [(w, v) for w, v in (("subject", subject), ("database", database)) if v]
    if not claims:
        _die("name what to show: --thread, --subject, --store-ns, --database or --needle",
             EXIT_USAGE)  # fmt: skip
    checked = bool(key) or trust is not None
    if checked == no_verify:
        _die("--no-verify and --key/--trust exclude each other" if checked else
             "give --key PUB.pem or --trust TRUSTFILE to verify the receipt before opening "
             "it, or --no-verify to open it unverified", EXIT_USAGE)  # fmt: skip
    receipt = _load_receipt(file)
    predicate = receipt.predicate
    signature = "NOT verified (--no-verify)"
    if checked:
        from ..verify import verify_receipt

        try:
            verified = verify_receipt(receipt, _trusted(key, trust))
        except Error as exc:
            _die(f"{_display(str(file))}: does not verify: [{exc.reason}] {exc.message}",
                 EXIT_INVALID, reason=exc.reason)  # fmt: skip
        predicate = verified.statement["predicate"]  # only what the signature binds
        signature = "verified"
    privacy = predicate["scope"].get("privacy")
    ck = None
    if privacy is not None:
        if commitment_key is None:
            _die("this receipt carries commitments: give its --commitment-key", EXIT_USAGE)
        ck = _commitment_key_file(commitment_key)
        if ck.key_id != privacy["key_id"]:
            mine, theirs = ck.key_id[:16], privacy["key_id"][:16]
            _die(f"the commitment key (id {mine}...) is not this receipt's (id {theirs}...)",
                 EXIT_INVALID, reason="wrong_commitment_key")  # fmt: skip
    try:
        results = open_claims(predicate, ck, claims)
    except ConfigurationError as exc:  # a malformed --store-ns (anything else is a bug)
        _die(exc.message, EXIT_USAGE)
    ok = all(r["found"] for r in results)
    code = 0 if ok else EXIT_INVALID
    if as_json:
        _emit_json({"ok": ok, "exit_code": code, "receipt_id": receipt.receipt_id,
                    "signature": signature, "claims": results})  # fmt: skip
    else:
        typer.echo(f"receipt {receipt.receipt_id} (signature {signature})")
        for r in results:
            verdict = "is in this receipt" if r["found"] else "is NOT in this receipt"
            typer.echo(f"  {r['what']} {r['value']!r} {verdict}: {r['committed_as']}")
    raise typer.Exit(code)
