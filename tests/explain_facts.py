"""What ``receipt verify --explain`` must state about a receipt, read from the receipt
file directly (shared by the explain tests on the golden corpus and on real erasures)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from erasure_receipts.signing import Signer


def _dt(t: str) -> datetime:
    return datetime.fromisoformat(t.replace("Z", "+00:00"))


def _when(t: str) -> str:
    return f"{t[:10]} {t[11:19]} UTC"


def predicate(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_bytes())
    if "statement" in doc:
        return dict(doc["statement"]["predicate"])
    import base64

    return dict(json.loads(base64.b64decode(doc["payload"]))["predicate"])


def check_facts(text: str, p: dict[str, Any]) -> None:
    """Every fact of the receipt the explanation must state, read from the file."""
    kind = p.get("kind", "thread")
    scope = p["scope"]
    assert text.startswith("VERIFIED")
    assert p["receipt_id"] in text
    assert _when(p["issued_at"]) in text and p["issued_at"] in text
    assert p["pre_state"]["digest"]["sha256"] in text
    # what was erased: the scope's id as the receipt names it, and every table's counts
    sid = {"thread": "thread_id", "history": "thread_id", "subject": "subject"}.get(kind)
    if sid is not None:
        assert repr(scope[sid]) in text
    if kind == "namespace":
        assert repr("/".join(scope["namespace"])) in text
    for name, t in p["pre_state"]["tables"].items():
        if t["rows"]:
            rows = f"{t['rows']:,} row{'s' * (t['rows'] != 1)}"
            assert f"{name} {rows} ({t['bytes']:,} byte" in text, name
    leaves = p["pre_state"]["leaves"]
    assert f"{leaves:,} row{'s' * (leaves != 1)} (" in text
    if kind == "redaction":
        r = p["redaction"]
        assert "No row was deleted" in text and "What was redacted" in text
        assert f"{r['checkpoints_before']} before, {r['checkpoints_after']} after" in text
        assert r["replacement"]["sha256"] in text
    methods = p.get("methods", {})
    for t in p.get("targets") or ():
        assert repr(t["name"]) in text and f"keyed by {t['key']}" in text
        if t.get("database") is not None:  # the other database, as the receipt names it
            assert f"in the other database {t['database']!r}" in text
        if t["method"] == "sweep":
            assert f"the target {t['name']!r} (" in text and "swept after the commit" in text
    # one transaction is claimed only when every part of the erasure was in it
    swept = [g for g, m in methods.items() if m != "atomic-transaction"]
    if swept:
        assert "erased together in one transaction" not in text
        assert "All of it was erased together" not in text
        if kind in ("thread", "subject"):
            assert "; not in it - " in text
    if kind == "subject" and not swept:
        assert "All of it was erased together in one database transaction." in text
    for g in methods:
        assert f"[{g}]: " in text  # each method group is told, with its machine name
    if kind == "history":
        kept = p["kept_state"]["leaves"]
        assert f"latest state of the thread ({kept:,} row{'s' * (kept != 1)}" in text
    if kind == "subject":
        for t in scope["threads"][:10]:
            assert repr(t) in text
        assert f"{len(scope['threads'])} thread" in text
    if kind == "deferral":
        d = p["deferral"]
        assert "Nothing was erased" in text and "What is retained" in text
        assert "What was erased" not in text and "erasure began" not in text
        assert "fingerprint of the erased rows" not in text
        assert "fingerprint of the retained rows" in text
        assert f"kept until {_when(d['until'])}" in text
        assert f"on the basis {d['basis']!r}" in text
        assert (f"(code {d['code']})" in text) == (d["code"] is not None)
        sid = scope["subject"] if d["of_kind"] == "subject" else scope["thread_id"]
        assert repr(sid) in text
        if d["of_kind"] == "subject":  # every retained thread is listed
            assert f"The threads retained ({len(scope['threads'])} thread" in text
            for t in scope["threads"]:
                assert repr(t) in text
        for ns in scope["store_namespaces"]:
            assert repr("/".join(ns)) in text and "are retained with it" in text
        assert "were erased with it" not in text
    if p.get("deferral_of") is not None:
        assert f"decision to retain recorded in receipt {p['deferral_of']}" in text
    else:
        assert "decision to retain recorded in receipt" not in text
    if kind == "shred":
        ks = scope["key_store"]
        assert "What was erased" in text and repr(scope["subject"]) in text
        for t in scope["threads"]:
            assert repr(t) in text
        assert f"of {len(scope['threads'])} thread" in text
        assert "PROVIDED NO COPY OF THE KEY SURVIVES" in text
        if ks["backup_retention"] is not None:
            assert f"backup retention, as the receipt records it: {ks['backup_retention']})" in text
        else:
            assert "does not state the key store's backup retention" in text
        assert "can no longer be decrypted" not in text
        for ns in scope["store_namespaces"]:
            assert repr("/".join(ns)) in text and "under the same condition" in text
        assert "were erased with it" not in text
    if "privacy" in scope:
        assert "Privacy mode" in text
    if scope.get("tombstone") and kind != "history":
        assert "A tombstone was left behind" in text
    else:
        assert "tombstone was left" not in text
    # on whose request
    r = p.get("request")
    if r is None:
        assert "The receipt names no request" in text
    else:
        assert repr(r["id"]) in text and r["basis"] in text
        if r["requester"] is not None:
            assert r["requester"] in text
        if r["received_at"] is not None:
            assert f"Received {_when(r['received_at'])}" in text
        if r["due"] is not None and kind == "deferral":  # nothing erased: no met or late
            assert f"Due {_when(r['due'])}: nothing was erased" in text
        elif r["due"] is not None:
            met = _dt(p["issued_at"]) <= _dt(r["due"])
            assert f"Due {_when(r['due'])}: " + ("met" if met else "LATE") in text
    # what was checked and how
    for c in p["checks"]:
        assert f"[{c['name']}]: {c['result']}" in text
        assert f"- {c['name']} [" not in text, c["name"]  # told in words, not only its name
    words = {"applied": "done", "partial": "partly done", "failed": "FAILED",
             "skipped": "not done", "not_applicable": "not applicable"}  # fmt: skip
    for res in p["residue"]:
        assert f"[{res['action']}]: {words[res['status']]}" in text
        assert f"- {res['action']} [" not in text, res["action"]
    needles = p.get("needles")
    if needles is not None:
        n = len(needles["values"])
        assert f"A search for {n} erased value" in text
        assert f"[searched: {needles['searched']}]: " in text
        assert f"A search of the {needles['searched']}" not in text
        scope_words = {
            "thread": "in the stored rows of the erased thread(s), read after deleting and "
            "before the commit",
            "database": "in every row of the checkpoint tables and of the store table of this "
            "database, read after deleting and before the commit",
        }[needles["searched"]]
        assert scope_words in text
        found = needles["occurrences_after"]
        assert (": none found." if found == 0 else f": {found} found.") in text
    assert "Ed25519" in text and Signer.from_seed(bytes(range(32))).key_id[:16] in text
    # what is not covered, each note as the receipt words it
    for o in p["out_of_scope"]:
        assert f"[{o['id']}]: {o['note']}" in text
    assert "Why it matters" in text
