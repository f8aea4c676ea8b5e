"""Verification told in plain language (``receipt verify --explain FILE``).

:func:`explain` turns a :class:`~erasure_receipts.verify.VerifiedReceipt` into text for a
reader who is not a programmer: what was erased (or, for kinds added later, what the
receipt records), when, on whose request, what was checked and how, and what the
receipt does not cover and why that matters. Every fact comes from the statement that
verification parsed from the signed payload; nothing is inferred beyond it.
:func:`explain_failure` says what a failed verification means (and that nothing in the
file can be relied on). The words for kinds, checks and residue steps are shared with
the HTML report (:mod:`erasure_receipts.report`).

Standard library only; on the verify side.
"""

from __future__ import annotations

from typing import Any

from .receipt import time_key
from .request import describe_basis, seconds_between
from .verify import REASONS, VerifiedReceipt

__all__ = [
    "CHECK_WORDS",
    "KIND_WORDS",
    "OUT_OF_SCOPE_WORDS",
    "RESIDUE_ACTION_WORDS",
    "RESIDUE_WORDS",
    "duration_words",
    "explain",
    "explain_failure",
]

KIND_WORDS = {
    "thread": "Thread erased",
    "history": "Thread history erased (latest state kept)",
    "subject": "Data subject erased (all their threads)",
    "namespace": "Store namespace erased",
    "deferral": "Decision to retain (deferral)",
    "redaction": "Values redacted in a thread (every checkpoint kept)",
    "shred": "Data key destroyed (crypto-shredding; the encrypted rows stay)",
}
"""Each known kind in a few words (headings)."""

CHECK_WORDS = {
    "raw_rows_zero_in_transaction": "no row of the scope left inside the deleting transaction",
    "raw_rows_zero_after_commit": "no row of the scope left after the commit",
    "raw_rows_zero_at_recovery": "no row of the scope left when the erasure was recovered",
    "api_get_tuple_none": "LangGraph's get_tuple finds no checkpoint",
    "api_get_tuple_kept": "LangGraph's get_tuple still finds the kept latest checkpoint",
    "api_list_empty": "LangGraph's list finds no checkpoint",
    "api_list_no_removed": "LangGraph's list finds none of the removed checkpoints",
    "api_store_search_empty": "the store's search finds no item",
    "tombstone_written": "a tombstone refuses later writes to the erased thread",
    "late_writes_removed": "writes that arrived during the erasure were removed too",
    "issued_from_journal": "issued from the erasure journal after an interruption",
    "preflight": "the receipt could be issued before anything was deleted",
    "post_state_empty": "nothing of the scope was left afterwards",
    "integrity_check": "the database passed its integrity check",
    "decoded_needles_zero_in_transaction": "no redacted value left in the decoded rows, "
    "inside the rewriting transaction",
    "checkpoints_kept": "as many checkpoints after the rewrite as before",
    "raw_needles_zero_after_commit": "no redacted value left in the raw rows after the commit",
    "api_checkpoints_kept": "LangGraph's list returns every checkpoint the redaction kept",
    "api_needles_zero": "LangGraph loads every checkpoint, and no redacted value is in it",
    "target_swept_after_commit": "the application's own data (targets) removed after the commit",
    "targets_kept": "the application's own data (targets) left untouched: the thread lives on",
    "scope_measured": "the scope's rows were measured in one read snapshot, and nothing was "
    "deleted",
    "until_after_issued_at": "the end of the retention (until) is after the moment the "
    "decision was signed",
    "key_store_rows_zero_after_commit": "no row of the destroyed key left in the key store "
    "after the commit",
    "api_reads_refused": "reading each covered thread through the saver is refused",
}
"""What each check the eraser records means."""

RESIDUE_WORDS = {
    "applied": "done",
    "partial": "partly done",
    "failed": "FAILED",
    "skipped": "not done",
    "not_applicable": "not applicable",
}
"""Residue statuses in words."""

RESIDUE_ACTION_WORDS = {
    "sqlite.secure_delete": "SQLite overwrites deleted content with zeros (secure_delete)",
    "sqlite.wal_checkpoint": "SQLite's write-ahead log, which holds copies of changed pages, "
    "written back into the database and emptied",
    "wal_checkpoint_truncate": "SQLite's write-ahead log, which holds copies of changed pages, "
    "written back into the database and emptied",
    "sqlite.rollback_journal": "SQLite's rollback journal (it can hold old page copies)",
    "sqlite.live_page_free_space": "the free space inside database pages still in use "
    "(old bytes can stay there until overwritten)",
    "residue_scan": "a scan of the database file for the erased values",
    "postgres.vacuum": "PostgreSQL's VACUUM (old row versions removed from the table files)",
    "postgres.wal": "PostgreSQL's write-ahead log (it keeps copies until it is recycled)",
    "store.scrub": "the leftovers of the swept store",
    "key_store.vacuum": "the key store's VACUUM (old copies of the destroyed key's rows "
    "removed from its tables)",
    "key_store.residue_scan": "a scan of the key store's files for the destroyed key",
}
"""What each residue step is about (leftover copies on disk, not rows)."""

OUT_OF_SCOPE_WORDS = {
    "backups": "backups",
    "replicas": "replicas",
    "point_in_time_recovery": "point-in-time recovery archives",
    "storage_media": "the storage media itself",
    "other_copies": "other copies (caches, exports, logs)",
    "key_store_backups": "the key store's own backups, replicas and recovery archives",
}
"""The standard out-of-scope ids in words (and a shred's ``key_store_backups``)."""

_WHY = {
    "backups": "restoring such a backup brings the data back; after a restore, repeat the "
    "erasure (receipt replay) or keep the backup under its own deletion schedule.",
    "replicas": "a replica or file copy still answers with the data until it is erased too.",
    "point_in_time_recovery": "a recovery to a moment before the erasure restores the data.",
    "storage_media": "someone with raw access to the disk might recover old blocks; the "
    "receipt is about the database, not about forensic unrecoverability.",
    "other_copies": "data copied elsewhere (another thread, an export, a log) is not named "
    "by this receipt and must be found and erased separately.",
    "key_store_backups": "a copy of the key store older than the shred brings the key back, "
    "and with it every row encrypted under it, until that copy expires.",
}
_WHY_SHRED = {
    "backups": "restoring such a backup brings the rows back as ciphertext: unreadable only "
    "provided no copy of the key survives (above).",
    "replicas": "a replica or file copy holds the rows as ciphertext: unreadable only "
    "provided no copy of the key survives (above).",
}

_WHY_DEFERRAL = {
    "backups": "nothing was erased: the retained rows are in the database and its backups "
    "as before; when the retention ends and the rows are erased, restoring a backup "
    "older than that erasure brings them back (receipt replay).",
    "replicas": "nothing was erased: replicas and copies hold the retained rows as before.",
    "point_in_time_recovery": "nothing was erased: recovery archives hold the rows as before.",
}

_REASON_WORDS = {code: meaning for code, _, meaning in REASONS}

_NEEDLES_SEARCHED = {
    "thread": "the stored rows of the erased thread(s), read after deleting and before the commit",
    "database": "every row of the checkpoint tables and of the store table of this database, "
    "read after deleting and before the commit",
}
"""Where a ``needles`` search looked (RECEIPT_SPEC.md 9.4, 9.13), by ``searched``."""


def duration_words(seconds: int) -> str:
    """``3 days 4 h``, ``2 h 5 min``, ``12 min``, ``under a minute``."""
    neg, s = seconds < 0, abs(seconds)
    d, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m = rest // 60
    if d:
        text = f"{d} day{'s' * (d != 1)}" + (f" {h} h" if h else "")
    elif h:
        text = f"{h} h" + (f" {m} min" if m else "")
    elif m:
        text = f"{m} min"
    else:
        text = "under a minute"
    return ("minus " if neg else "") + text


def _when(t: str) -> str:
    return f"{t[:10]} {t[11:19]} UTC"


def _q(v: Any) -> str:
    """A value quoted on one line (ids are anyone's text)."""
    return repr(str(v))


def _is_commitment(v: Any) -> bool:
    return type(v) is str and v.startswith("hmac-sha256:")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def _tables(state: dict[str, Any]) -> str:
    parts = [
        f"{name} {_plural(t['rows'], 'row')} ({_plural(t['bytes'], 'byte')})"
        for name, t in sorted(state.get("tables", {}).items())
        if t.get("rows")
    ]
    return ", ".join(parts) or "no rows in any table"


def _size(state: dict[str, Any]) -> str:
    rows = state.get("leaves", 0)
    nbytes = sum(t.get("bytes", 0) for t in state.get("tables", {}).values())
    return f"{_plural(rows, 'row')} ({_plural(nbytes, 'byte')})"


def _ns(ns: list[str]) -> str:
    if len(ns) == 1 and _is_commitment(ns[0]):
        return f"the namespace committed as {ns[0]}"
    return _q("/".join(ns))


def _targets(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The receipt's targets by their method group (``target:NAME``)."""
    return {f"target:{t.get('name')}": t for t in p.get("targets") or () if isinstance(t, dict)}


def _target_where(t: dict[str, Any]) -> str:
    """Where a target's rows are, as the receipt names it."""
    kind = t.get("type")
    if kind == "sql":
        table = f"table {_q(t.get('table'))}"
        if t.get("database"):
            return f"{table} in the other database {_q(t['database'])}"
        return f"{table} of this database"
    if kind == "vectorstore":
        store = f" {_q(t['store'])}" if t.get("store") else ""
        return f"documents of the vector store{store}"
    if kind == "function":
        return "items the application's own functions list and delete"
    return f"of the type {_q(kind)}"


def _group_words(group: str, p: dict[str, Any]) -> str:
    """A method group in words: whose rows it is."""
    if group.startswith("target:"):
        t = _targets(p).get(group)
        where = f" ({_target_where(t)})" if t is not None else ""
        return f"the target {_q(group[7:])}{where}"
    return {
        "checkpoints": "the conversation rows (checkpoint tables)",
        "store": "the long-term store items",
        "key_store": "the key store's rows",
    }.get(group, _q(group))


def _method_words(group: str, method: str) -> str:
    """How a method group's rows were handled (RECEIPT_SPEC.md 5, 9.13, 9.14, 9.16)."""
    if method == "atomic-transaction":
        if group == "key_store":
            return "deleted in one transaction of the key store (all or nothing)"
        return "deleted in one database transaction (all or nothing)"
    if method == "sweep":
        if group.startswith("target:"):
            return (
                "measured inside the transaction and swept after the commit, once the "
                "scope's own rows were measured empty again (not in that transaction)"
            )
        return (
            "deleted item by item through the store's own interface, outside the "
            "database transaction (a rollback cannot restore it)"
        )
    if method == "read-snapshot":
        return "measured in one read snapshot; nothing deleted"
    return _q(method)


def _transaction_words(p: dict[str, Any]) -> str | None:
    """Which parts of an erasure were deleted in its one transaction, and which were
    swept outside it, as ``methods`` records (None: no method is recorded)."""
    methods = p.get("methods") if isinstance(p.get("methods"), dict) else {}
    if not methods:
        return None
    atomic = [g for g, m in sorted(methods.items()) if m == "atomic-transaction"]
    other = [(g, m) for g, m in sorted(methods.items()) if m != "atomic-transaction"]
    if not other:
        return "All of it was erased together in one database transaction."
    words = []
    for g, m in other:
        if m == "sweep" and g.startswith("target:"):
            how = "swept after the commit"
        elif m == "sweep":
            how = "swept through the store's own interface, outside the transaction"
        else:
            how = _method_words(g, m)
        words.append(f"{_group_words(g, p)}: {how}")
    together = (
        "Only " + " and ".join(_group_words(g, p) for g in atomic) + " were erased together "
        "in one database transaction"
        if atomic
        else "Nothing was erased in one database transaction"
    )
    return f"{together}; not in it - " + "; ".join(words) + "."


def _what(p: dict[str, Any]) -> list[str]:
    kind = p.get("kind", "thread")
    scope = p.get("scope", {})
    pre = p.get("pre_state", {})
    private = "privacy" in scope
    out: list[str] = []
    namespaces = scope.get("store_namespaces") or []
    if kind == "thread":
        out.append(
            f"Every stored row of the conversation thread {_q(scope.get('thread_id'))}: "
            f"{_size(pre)}, in {_tables(pre)}."
        )
        how_erased = _transaction_words(p)
        if how_erased is not None and not how_erased.startswith("All of it"):
            out.append(how_erased)
    elif kind == "history":
        kept = p.get("kept_state", {})
        out.append(
            f"The old history of the conversation thread {_q(scope.get('thread_id'))}: "
            f"{_size(pre)} removed, in {_tables(pre)}. The latest state of the thread "
            f"({_size(kept)}) was kept on purpose, so the conversation still works."
        )
    elif kind == "subject":
        threads = scope.get("threads") or []
        shown = ", ".join(_q(t) for t in threads[:10]) + (" and more" if len(threads) > 10 else "")
        found = scope.get("discovery")
        how = (
            f" (found through the metadata key {_q(found['metadata_key'])}, and any named "
            "explicitly)"
            if isinstance(found, dict)
            else ""
        )
        out.append(
            f"Everything stored about the data subject {_q(scope.get('subject'))}: "
            f"{_plural(len(threads), 'thread')}{how}"
            + (f": {shown}" if threads else "")
            + f"; {_size(pre)} in all, in {_tables(pre)}."
        )
        how_erased = _transaction_words(p)
        if how_erased is not None:
            out.append(how_erased)
    elif kind == "namespace":
        out.append(
            f"Every item of the long-term store at or below the namespace "
            f"{_ns(scope.get('namespace') or [])}: {_size(pre)}, in {_tables(pre)}."
        )
    elif kind == "redaction":
        r = p.get("redaction") if isinstance(p.get("redaction"), dict) else None
        n = len((p.get("needles") or {}).get("values", ()))
        out.append(
            f"Values were REDACTED, not whole rows erased: in the conversation thread "
            f"{_q(scope.get('thread_id'))}, {_plural(n, 'value')} (needles) were rewritten to "
            f"a replacement text in {_size(pre)}, in {_tables(pre)}. No row was deleted."
        )
        if r is not None:
            rep = (r.get("replacement") or {}).get("sha256")
            out.append(
                f"Every checkpoint was kept: {r.get('checkpoints_before')} before, "
                f"{r.get('checkpoints_after')} after, so the conversation and its history "
                "still work. The receipt holds only the SHA-256 of the replacement text"
                + (f" ({rep})." if rep else ".")
            )
    elif kind == "deferral":
        member = p.get("deferral")
        d: dict[str, Any] = member if isinstance(member, dict) else {}
        of = d.get("of_kind", "thread")
        sid = scope.get("subject") if of == "subject" else scope.get("thread_id")
        what = {"subject": "everything of the data subject", "history": "the history of the "
                "conversation thread"}.get(of, "the conversation thread")  # fmt: skip
        code = f" (code {d['code']})" if d.get("code") else ""
        until = d.get("until")
        out.append(
            f"Nothing was erased. This is a signed decision to RETAIN {what} {_q(sid)}: "
            f"{_size(pre)}, in {_tables(pre)}, kept until "
            + (_when(until) if isinstance(until, str) else "an unstated date")
            + f", on the basis {_q(d.get('basis'))}{code}."
        )
        threads = scope.get("threads")
        if of == "subject" and isinstance(threads, list):
            out.append(
                f"The threads retained ({_plural(len(threads), 'thread')}): "
                + (", ".join(_q(t) for t in threads) or "none")
                + "."
            )
        out.append(
            "The library records this decision in the database: while it is open, "
            "erasures of this scope are refused unless they override it (and then name "
            "it); once that date has passed, the next retention sweep erases the scope, "
            "and that erasure's receipt names this decision (deferral_of). A decision "
            "can also be released early without erasing (not signed), so this receipt "
            "alone does not show whether it is still open."
        )
    elif kind == "shred":  # RECEIPT_SPEC.md 9.16: a data key destroyed, no row deleted
        whose = "data subject" if scope.get("key_scope") == "subject" else "thread"
        threads = scope.get("threads") or []
        ks = scope.get("key_store") if isinstance(scope.get("key_store"), dict) else {}
        retention = ks.get("backup_retention")
        kept = (
            f"the key store's backup retention, as the receipt records it: {retention}"
            if isinstance(retention, str)
            else "the receipt does not state the key store's backup retention"
        )
        out.append(
            f"Crypto-shredding: the data key of the {whose} {_q(scope.get('subject'))} was "
            f"destroyed in the key store ({_size(pre)}, in {_tables(pre)}). The rows "
            f"encrypted under it - of {_plural(len(threads), 'thread')}"
            + (": " + ", ".join(_q(t) for t in threads) if threads else "")
            + " - were not deleted: they stay in the database, and in its backups and "
            "copies, as ciphertext."
        )
        out.append(
            "They are unreadable only PROVIDED NO COPY OF THE KEY SURVIVES: copies of "
            "the key store taken before the shred (its backups, replicas, recovery "
            f"archives) must have expired ({kept}), and a process that unwrapped the key "
            "before the shred may still hold it in memory (see what this receipt does not "
            "cover)."
        )
    else:
        out.append(
            f"This receipt is of the kind {_q(kind)}, which this explanation does not "
            f"describe in detail; it records the scope {_q(scope)} and the status "
            f"{_q(p.get('status'))}."
        )
    targets = p.get("targets")
    if isinstance(targets, list) and targets:
        described = []
        for t in targets:
            if not isinstance(t, dict):
                continue
            when = " after the thread was verified gone" if t.get("after") else ""
            how = {
                "atomic-transaction": "deleted in the erasure's database transaction",
                "sweep": "swept after the commit, outside that transaction",
            }.get(str(t.get("method")), f"method {_q(t.get('method'))}")
            described.append(
                f"{_q(t.get('name'))} ({_target_where(t)}, keyed by {t.get('key')}, {how}{when})"
            )
        out.append(
            "The application's own data about it was erased with it (targets, counted as "
            "the tables target:NAME above): " + ", ".join(described) + "."
        )
    if namespaces and kind not in ("namespace", "deferral", "shred"):
        out.append(
            "Store items under " + ", ".join(_ns(ns) for ns in namespaces) + " were erased with it."
        )
    elif namespaces and kind == "deferral":
        out.append(
            "Store items under " + ", ".join(_ns(ns) for ns in namespaces) + " are retained "
            "with it."
        )
    elif namespaces and kind == "shred":
        out.append(
            "Store items under " + ", ".join(_ns(ns) for ns in namespaces) + " were encrypted "
            "under the same key: they stay too, as ciphertext, under the same condition."
        )
    if scope.get("tombstone") and kind in ("thread", "subject", "namespace"):
        out.append(
            "A tombstone was left behind: the database refuses new writes to what was "
            "erased, so it cannot silently come back."
        )
    if p.get("pre_state", {}).get("leaves") == 0:
        out.append("Nothing existed to erase: the receipt attests an EMPTY scope.")
    if private:
        out.append(
            "Privacy mode: the receipt names people and threads only by keyed commitments "
            "(hmac-sha256:...); the ids themselves are not in it. Whoever holds the "
            "commitment key can prove which ids these are (receipt open)."
        )
    if p.get("replay_of"):
        out.append(
            f"This erasure repeats the erasure of receipt {p['replay_of']} after a restore "
            "brought data back."
        )
    if p.get("deferral_of"):
        out.append(f"It carries out the decision to retain recorded in receipt {p['deferral_of']}.")
    return out


def _moment(kind: str) -> str:
    """The moment ``issued_at`` records, by kind."""
    return {"deferral": "the decision was signed", "redaction": "the redaction began",
            "shred": "the key's destruction began"}.get(kind, "the erasure began")  # fmt: skip


def _request(v: VerifiedReceipt, issued: str) -> list[str]:
    r = v.request
    kind = v.statement["predicate"].get("kind", "thread")
    deferral = kind == "deferral"
    if r is None:
        what = "this decision" if deferral else "this erasure"
        return [f"The receipt names no request: it does not say who asked for {what} or why."]
    basis = r["basis"]
    desc = describe_basis(basis)
    out = [
        f"Request {_q(r['id'])}, on the legal basis "
        + (f"{basis} - {desc}." if desc else f"{_q(basis)} (free text).")
    ]
    requester = r.get("requester")
    if requester is None:
        out.append("No requester is recorded.")
    elif _is_commitment(requester):
        out.append(f"The requester is recorded only as a commitment ({requester}).")
    else:
        out.append(f"Asked by {_q(requester)}.")
    received, due = r.get("received_at"), r.get("due")
    if received is not None:
        out.append(
            f"Received {_when(received)}; {'decided' if deferral else 'erased'} "
            f"{duration_words(seconds_between(received, issued))} later."
        )
    if due is not None and deferral:
        out.append(
            f"Due {_when(due)}: nothing was erased - the decision to retain was signed "
            + (
                f"{duration_words(seconds_between(issued, due))} before it."
                if time_key(issued) <= time_key(due)
                else f"{duration_words(seconds_between(due, issued))} after it."
            )
        )
    elif due is not None:
        if time_key(issued) <= time_key(due):
            out.append(
                f"Due {_when(due)}: met, with {duration_words(seconds_between(issued, due))} "
                "to spare."
            )
        else:
            out.append(
                f"Due {_when(due)}: LATE, by {duration_words(seconds_between(due, issued))}."
            )
    else:
        out.append("No due date is recorded.")
    if v.approver is not None:
        out.append(
            f"Approved (four eyes) by {_q(v.approver)}: an approver's signature over this "
            f"request and this exact scope, by key {str(v.approver_key_id)[:16]} that your "
            f"trust file lists as an approver, valid when {_moment(kind)}."
        )
    else:
        out.append("No approval by a second person (authorization) is attached.")
    return out


def _checks(v: VerifiedReceipt) -> list[str]:
    p = v.statement["predicate"]
    kind = p.get("kind", "thread")
    name = f" ({v.key_name})" if v.key_name else ""
    empty_after = p.get("post_state", {}).get("leaves") == 0
    rows = {
        "deferral": "the retained rows (the digest an erasure of this scope would record if "
        "nothing changes)",
        "redaction": "the rewritten rows as they were before",
        "shred": "the deleted key-store rows",
    }.get(kind, "the erased rows")
    items: list[list[str]] = [
        [
            f"The signature. The receipt is signed (Ed25519) by key {v.key_id[:16]}{name}, "
            f"a key you said to trust, and the key was valid when {_moment(kind)}. Any "
            "change to the receipt after it was signed would break this signature."
        ],
        [
            "The receipt is consistent: the row counts, the table list and the fingerprint "
            f"of {rows} (a Merkle tree digest, SHA-256 {v.pre_digest}) agree with "
            "each other, "
            + ("the state afterwards is empty, " if empty_after else "")
            + (
                "the same rows were measured before and after the rewrite, "
                if p.get("kind") == "redaction"
                else ""
            )
            + "and the disclosures it must make are there."
        ],
    ]
    checks = p.get("checks") or []
    if checks:
        items.append(
            [
                (
                    "What the library checked while measuring (as it recorded them, covered "
                    "by the signature):"
                    if kind == "deferral"
                    else "What the eraser checked while erasing (as it recorded them, "
                    "covered by the signature):"
                )
            ]
            + [
                f"   - {CHECK_WORDS.get(c['name'], c['name'])} [{c['name']}]: {c['result']}"
                for c in checks
            ]
        )
    needles = p.get("needles")
    if isinstance(needles, dict):
        n, found = len(needles.get("values", ())), needles.get("occurrences_after")
        searched = needles.get("searched")
        where = _NEEDLES_SEARCHED.get(str(searched), f"what the receipt calls {_q(searched)}")
        if searched == "database" and p.get("targets"):
            where += ", and the rows and listable documents of its targets outside the erased scope"
        if searched == "database" and (p.get("methods") or {}).get("store") == "sweep":
            where += (
                ", and the items the store swept through its interface still returns (items "
                "it hides, such as expired ones, are not seen)"
            )
        items.append(
            [
                f"A search for {_plural(n, 'erased value')} "
                f"(in {_plural(len(needles.get('forms', ())), 'spelling')}) in {where} "
                f"[searched: {searched}]: "
                + ("none found." if found == 0 else f"{found} found.")
                + " It covers only those rows: not the database file's free space, its "
                "logs or backups, nor other databases."
            ]
        )
    if v.methods:
        how = "; ".join(
            f"{_group_words(group, p)} [{group}]: {_method_words(group, m)}"
            for group, m in sorted(v.methods.items())
        )
        items.append([f"How: {how}."])
    if v.residue:
        items.append(
            ["Leftover copies on disk (residue: not rows, but old bytes the database may keep):"]
            + [
                f"   - {RESIDUE_ACTION_WORDS.get(a, a)} [{a}]: {RESIDUE_WORDS.get(s, s)}"
                for a, s in v.residue
            ]
        )
    out = []
    for i, item in enumerate(items, 1):
        out.append(f"{i}. {item[0]}")
        out += item[1:]
    out.append(
        "This checks the receipt, not the database: it shows what the "
        + ("library" if kind == "deferral" else "eraser")
        + " measured and signed at the time. It cannot see the database as it is today."
    )
    return out


def _not_covered(p: dict[str, Any]) -> list[str]:
    out = []
    special = {"shred": _WHY_SHRED, "deferral": _WHY_DEFERRAL}.get(p.get("kind", ""), {})
    for o in p.get("out_of_scope") or ():
        i = o.get("id", "")
        why = special.get(i) or _WHY.get(i)
        out.append(
            f"- {OUT_OF_SCOPE_WORDS.get(i, i)} [{i}]: {o.get('note', '')}"
            + (f" Why it matters: {why}" if why else "")
        )
    return out


def explain(v: VerifiedReceipt, *, source: str | None = None) -> str:
    """The verification of one receipt in plain language (several short paragraphs,
    ending with a newline). Only facts the verified statement holds are stated."""
    p = v.statement["predicate"]
    kind = p.get("kind", "thread")
    head = KIND_WORDS.get(kind, f"Receipt of the kind {_q(kind)}")
    where = f" ({source})" if source else ""
    began = _moment(kind)
    began = began[0].upper() + began[1:] + " at"
    title = {"deferral": "What is retained\n", "redaction": "What was redacted\n"}.get(
        kind, "What was erased\n"
    )
    sections = [
        f"VERIFIED{where}: {head}. Receipt {v.receipt_id}.",
        title + "\n".join(f"  {line}" for line in _what(p)),
        f"When\n  {began} {_when(v.issued_at)} (issued_at {v.issued_at}); status: {v.status}.",
        "On whose request\n" + "\n".join(f"  {line}" for line in _request(v, v.issued_at)),
        "What was checked, and how\n" + "\n".join(f"  {line}" for line in _checks(v)),
        "What this receipt does not cover, and why that matters\n"
        + "\n".join(f"  {line}" for line in _not_covered(p)),
    ]
    return "\n\n".join(sections) + "\n"


def explain_failure(source: str, reason: str, message: str) -> str:
    """A failed verification in plain language."""
    meaning = _REASON_WORDS.get(reason, reason)
    return (
        f"NOT VERIFIED ({source}): {meaning} [{reason}].\n"
        f"  Detail: {message}\n"
        "  Nothing in this file can be relied on: it may have been changed after it was "
        "signed, be signed by a key you do not trust, or not be a receipt at all. Ask the "
        "operator for the original receipt, or for the key it was signed with.\n"
    )
