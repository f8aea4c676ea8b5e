"""The auditor's report (``receipt report``): the page is self-contained (a strict CSP
whose hashes match its one inline style sheet and script; no reference to anything
outside the file), failed receipts come first with their reason, the summary validates
against schemas/report.schema.json, request outcomes are computed as stated, tables stay
bounded for large archives while the summary counts everything, and kinds the report
does not know render generically."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner, Result

from erasure_receipts.app import app
from erasure_receipts.index import FIELDS
from erasure_receipts.report import (
    KNOWN_KINDS,
    Report,
    build_report,
    content_security_policy,
    duration_words,
    render_html,
    report_items,
    report_row,
)
from erasure_receipts.verify import TrustStore, VerifiedReceipt, verify_receipt
from receipt_factory import ATTACKER, TRUSTED, dump, make_receipt, make_statement, receipt_doc

GOLDEN = Path(__file__).parents[1] / "golden"
PUB = GOLDEN / "keys" / "trusted.pub.pem"
SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
NOW = "2026-12-03T12:00:00Z"


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def rid(i: int) -> str:
    return str(uuid.UUID(int=i, version=4))


def with_request(i: int, issued: str, received: str | None, due: str | None,
                 request_id: str) -> bytes:  # fmt: skip
    st = make_statement(receipt_id=rid(i), issued_at=issued)
    st["predicate"]["request"] = {"id": request_id, "basis": "gdpr-art17-1a",
                                  "requester": "someone@example.com", "received_at": received,
                                  "due": due}  # fmt: skip
    return make_receipt(st).to_json()


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    d = tmp_path / "archive"
    d.mkdir()
    (d / "a-met.json").write_bytes(
        with_request(
            1, "2026-11-10T10:00:00Z", "2026-11-01T10:00:00Z", "2026-12-01T10:00:00Z", "DSR-MET"
        )
    )
    (d / "b-late.json").write_bytes(
        with_request(
            2, "2026-11-20T10:00:00Z", "2026-10-01T10:00:00Z", "2026-10-31T10:00:00Z", "DSR-LATE"
        )
    )
    (d / "c-no-due.json").write_bytes(
        with_request(3, "2026-11-21T10:00:00Z", "2026-11-20T10:00:00Z", None, "DSR-NODUE")
    )
    (d / "d-plain.json").write_bytes(make_receipt(make_statement(receipt_id=rid(4))).to_json())
    for name in ("history.json", "subject-privacy.json"):
        (d / name).write_bytes((GOLDEN / "good" / name).read_bytes())
    doc = receipt_doc(make_receipt(make_statement(receipt_id=rid(5))))
    doc["statement"]["predicate"]["pre_state"]["leaves"] = 4
    (d / "e-tampered.json").write_bytes(dump(doc))
    (d / "f-forged.json").write_bytes(
        make_receipt(make_statement(receipt_id=rid(6)), ATTACKER).to_json()
    )
    return d


def _report(archive: Path, **kw: Any) -> Report:
    trust = TrustStore([TRUSTED.public_key])
    return build_report(report_items([str(archive)]), trust, now=NOW, **kw)


def test_summary_counts_and_schema(archive: Path) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    rep = _report(archive)
    s = rep.summary()
    VALIDATOR.validate(s)
    assert s["receipts"] == {"total": 8, "verified": 6, "failed": 2, "duplicates": 0}
    assert s["failed_by_reason"] == {"bad_signature": 1, "untrusted_key": 1}
    assert [Path(f["source"]).name for f in s["failed"]] == ["e-tampered.json", "f-forged.json"]
    assert s["by_kind"] == {"history": {"erased": 1}, "subject": {"erased": 1},
                            "thread": {"erased": 4}}  # fmt: skip
    assert s["requests"] == {"received": 3, "met": 1, "late": 1, "open": 0, "no_due_date": 1,
                             "open_overdue": 0}  # fmt: skip
    assert s["privacy_mode"] == 1
    spare = {b["bucket"]: b["receipts"] for b in s["days_to_spare"]}
    assert spare["more than 30 days to spare"] == 0
    assert spare["8-30 days to spare"] == 1  # met: due 21 days after issued_at
    assert spare["8-30 days late"] == 1  # late: issued 20 days after the due date
    assert s["time_to_erasure"]["receipts"] == 3
    assert s["time_to_erasure"]["max_seconds"] == 50 * 86400
    assert sum(w["by_kind"].get("thread", 0) for w in s["weeks"]) == 4


def _inline(html: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)


def test_page_is_self_contained_with_a_strict_policy(archive: Path) -> None:
    html = render_html(_report(archive))
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert meta is not None and meta.group(1) == content_security_policy()
    policy = dict(p.strip().split(" ", 1) for p in meta.group(1).split(";"))
    assert policy["default-src"] == "'none'"
    (style,), (script,) = _inline(html, "style"), _inline(html, "script")
    for text, directive in ((style, "style-src"), (script, "script-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert policy[directive] == f"'sha256-{digest}'"
    # nothing loads from anywhere: no src/href/url()/@import, no inline style attributes
    # (a hash policy refuses them), no other script or style element, no event handler
    assert not re.search(r"\s(src|href|style|on[a-z]+)\s*=", html, flags=re.I)
    assert "url(" not in style and "@import" not in style
    assert html.count("<script") == 1 and html.count("<style") == 1
    assert "<link" not in html and "<iframe" not in html and "<img" not in html


def test_failed_receipts_come_first_with_their_reason(archive: Path) -> None:
    html = render_html(_report(archive))
    failed = html.index('id="failed"')
    assert failed < html.index('id="summary"') < html.index('id="requests"')
    section = html[failed : html.index('id="summary"')]
    assert "e-tampered.json" in section and "bad_signature" in section
    assert "f-forged.json" in section and "untrusted_key" in section
    assert "2 receipts did NOT verify" in section
    # a tampered receipt's content is nowhere in the page
    assert rid(5) not in html and rid(6) not in html
    for r in ("DSR-MET", "DSR-LATE", "DSR-NODUE", rid(1), rid(2), rid(3), rid(4)):
        assert r in html


def test_requester_is_never_shown_and_privacy_receipts_show_commitments(archive: Path) -> None:
    html = render_html(_report(archive))
    assert "someone@example.com" not in html
    p = json.loads((GOLDEN / "good" / "subject-privacy.json").read_bytes())["statement"]
    subject = p["predicate"]["scope"]["subject"]
    assert subject.startswith("hmac-sha256:") and subject in html
    assert f"commitment {subject[12:24]}" in html


def test_no_failures_no_alert(tmp_path: Path) -> None:
    d = tmp_path / "ok"
    d.mkdir()
    (d / "r.json").write_bytes(make_receipt(make_statement(receipt_id=rid(1))).to_json())
    html = render_html(_report(d))
    assert 'id="failed"' not in html and "did NOT verify" not in html


def _row(i: int, **changes: Any) -> dict[str, Any]:
    v = verify_receipt(
        make_receipt(make_statement(receipt_id=rid(i))).to_json(), [TRUSTED.public_key]
    )
    row = report_row(v, f"r{i}.json")
    row.update(changes)
    return row


def test_tables_are_bounded_and_the_summary_counts_everything() -> None:
    rep = Report(max_rows=10, now=NOW)
    base = _row(1)
    for i in range(1000):
        row = copy.copy(base)
        due = "2026-11-29T11:00:00Z" if i % 4 else "2026-12-31T00:00:00Z"
        row.update(receipt_id=rid(10_000 + i), request_id=f"REQ-{i}",
                   request_received_at="2026-11-01T00:00:00Z", request_due_at=due)  # fmt: skip
        rep.add({"row": row})
    for i in range(1200):
        rep.add({"failed": {"source": f"bad-{i}.json", "reason": "not_json", "message": "x"}})
    s = rep.summary()
    VALIDATOR.validate(s)
    assert s["receipts"] == {"total": 2200, "verified": 1000, "failed": 1200, "duplicates": 0}
    assert s["requests"]["received"] == 1000 and s["requests"]["late"] == 750
    assert s["requests"]["met"] == 250 and len(s["failed"]) == 1000
    html = render_html(rep)
    assert html.count("<details><summary>machine values") == 10
    assert "The first 10 of 1,000 receipts are listed" in html
    assert "990 more requests are counted" in html
    assert "200 more failed receipts are counted" in html
    assert len(html) < 500_000
    requests = html[html.index('id="requests"') : html.index('id="kind-thread"')]
    assert requests.count("LATE") == 10  # worst first


def test_request_outcomes_and_deferrals() -> None:
    rep = Report(now=NOW)
    times = {
        "request_received_at": "2026-11-01T00:00:00Z",
        "request_due_at": "2026-11-29T12:00:00Z",
    }
    rep.add({"row": _row(1, request_id="ON-TIME", **times)})  # issued exactly at due: met
    rep.add({"row": _row(2, request_id="LATE", issued_at="2026-11-29T12:00:00.5Z", **times)})
    kept = {"until": "2027-06-01T00:00:00Z", "basis": "legal hold"}
    deferral = _row(3, kind="deferral", request_id="KEPT", rows=0, bytes=0, deferral=kept,
                    **times)  # fmt: skip
    rep.add({"row": deferral})
    old = _row(4, kind="deferral", request_id="KEPT-2",
               deferral={"until": "2026-12-01T00:00:00Z"})  # fmt: skip
    rep.add({"row": old})
    rep.add({"row": _row(5, request_id="REPLAYED", replay_of=rid(99), **times)})
    rep.add({"row": _row(6, deferral_of=rid(4), issued_at="2026-12-02T00:00:00Z",
                         request_id="KEPT-2")})  # fmt: skip
    s = rep.summary()
    VALIDATOR.validate(s)
    assert s["requests"] == {"received": 5, "met": 1, "late": 1, "open": 2, "no_due_date": 1,
                             "open_overdue": 2}  # fmt: skip
    assert s["deferrals"] == {"total": 2, "open": 1, "executed": 1, "open_past_until": 0}
    assert s["replays"] == 1
    html = render_html(rep)
    assert 'retained (nothing deleted) until <time datetime="2027-06-01T00:00:00Z"' in html
    assert "Decision to retain" in html
    assert f'carries out deferral <code class="nw">{rid(4)}</code>' in html
    # a deferral row tells the decision and its state, never "erased <date>"
    section = html[html.index('id="kind-deferral"') :]
    section = section[: section.index("</section>")]
    rows = section.split("<tr>")[2:]
    assert len(rows) == 2 and "erased <time" not in section and "on time" not in section
    open_row = next(r for r in rows if rid(3) in r)
    assert f'retained since <time datetime="{deferral["issued_at"]}"' in open_row
    assert 'until <time datetime="2027-06-01T00:00:00Z"' in open_row
    assert '<span class="warn">open</span>: no erasure among these receipts names it' in open_row
    assert "(nothing erased)" in open_row
    done_row = next(r for r in rows if rid(4) in r)
    assert '<span class="ok">carried out</span>: erasure receipt' in done_row
    assert rid(6) in done_row


def test_shred_and_deferral_receipts_are_described() -> None:
    """The golden shred and deferral receipts, verified: the shred is described (key
    destroyed, what it covers, its condition with the receipt's retention), not as a kind
    the report does not know; the deferral with its decision."""
    trust = TrustStore([TRUSTED.public_key])
    rep = Report(now=NOW)
    for name in ("shred-store.json", "deferral.json"):
        v = verify_receipt((GOLDEN / "good" / name).read_bytes(), trust)
        rep.add({"row": report_row(v, name)})
    html = render_html(rep)
    assert "does not describe" not in html
    assert "Data key destroyed (crypto-shredding" in html
    shred = html[html.index('id="kind-shred"') :]
    assert "data key of subject <code" in shred and "alice" in shred
    assert "data key destroyed (5 key-store rows deleted); covers 2 threads and 2 store " in shred
    assert "unreadable only provided no copy of the key survives" in shred
    assert "the key store's backups (kept P30D) must have expired" in shred
    deferral = html[html.index('id="kind-deferral"') : html.index('id="kind-shred"')]
    assert 'retained since <time datetime="2026-11-29T12:00:00Z"' in deferral
    assert "retains thread <code" in deferral and "erased <time" not in deferral
    assert "(code <code>gdpr-17-3-b</code>)" in deferral


def test_a_redaction_reads_redacted_not_erased() -> None:
    rep = Report(now=NOW)
    v = verify_receipt((GOLDEN / "good" / "redaction.json").read_bytes(), [TRUSTED.public_key])
    rep.add({"row": report_row(v, "redaction.json")})
    html = render_html(rep)
    section = html[html.index('id="kind-redaction"') :]
    assert "redacted <time" in section and "erased <time" not in section


@pytest.mark.parametrize("kind", ["redaction", "shred", "deferral", "x<script>"])
def test_unknown_kinds_render_generically(kind: str) -> None:
    """A kind added after the report: rows of any shape of the known columns render, and
    a receipt whose statement the index cannot read still becomes a row."""
    rep = Report(now=NOW)
    row = _row(1, kind=kind, status="redacted", rows=None, bytes=None, checks=[],
               residue_items=[], out_of_scope=[], deferral=None)  # fmt: skip
    rep.add({"row": row})
    st = make_statement(receipt_id=rid(2))
    st["predicate"] = {"kind": kind, "receipt_id": rid(2), "issued_at": "2026-11-30T00:00:00Z",
                       "status": "shredded", "scope": {"thread_id": "t-9"}}  # fmt: skip
    v = VerifiedReceipt(receipt_id=rid(2), thread_id="t-9", status="shredded",
                        issued_at="2026-11-30T00:00:00Z", pre_digest="0" * 64,
                        key_id=TRUSTED.key_id, key_name="", statement=st)  # fmt: skip
    generic = report_row(v, "new.json")
    assert list(generic)[: len(FIELDS)] == list(FIELDS) and generic["kind"] == kind
    rep.add({"row": generic})
    s = rep.summary()
    VALIDATOR.validate(s)
    assert s["by_kind"] == {kind: {"redacted": 1, "shredded": 1}}
    html = render_html(rep)
    assert rid(1) in html and rid(2) in html and "t-9" in html
    if kind not in KNOWN_KINDS:
        assert "a receipt kind this report does not describe" in html
    assert html.count("<script") == 1  # the kind is escaped


def test_duration_words() -> None:
    assert duration_words(30) == "under a minute"
    assert duration_words(3 * 86400 + 4 * 3600 + 59) == "3 days 4 h"
    assert duration_words(2 * 3600 + 5 * 60) == "2 h 5 min"
    assert duration_words(-86400) == "minus 1 day"


def test_cli_report_and_json(archive: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = cli("report", archive, "--key", PUB, "-o", out, "--json", "--jobs", "1")
    assert res.exit_code == 1, res.stderr  # two receipts failed; the report is written
    doc = json.loads(res.stdout)
    VALIDATOR.validate(doc)
    assert doc["receipts"]["failed"] == 2
    assert out.read_text("utf-8").startswith("<!DOCTYPE html>")
    assert "6 verified, 2 failed" in res.stderr
    again = cli("report", archive, "--key", PUB, "-o", out)
    assert again.exit_code == 3 and "already exists" in again.stderr
    assert cli("report", archive, "--key", PUB).exit_code == 2  # neither -o nor --json
    assert cli("report", tmp_path / "empty-none", "--key", PUB, "--json").exit_code == 3
    ok = tmp_path / "ok"
    ok.mkdir()
    (ok / "r.json").write_bytes(make_receipt(make_statement(receipt_id=rid(1))).to_json())
    good = cli("report", ok, "--key", PUB, "--json")
    assert good.exit_code == 0 and json.loads(good.stdout)["receipts"]["verified"] == 1


def test_jobs_change_nothing(tmp_path: Path) -> None:
    d = tmp_path / "many"
    d.mkdir()
    for i in range(300):
        (d / f"{i:03d}.json").write_bytes(make_receipt(make_statement(receipt_id=rid(i))).to_json())
    trust = TrustStore([TRUSTED.public_key])
    one = build_report(report_items([str(d)]), trust, jobs=1, now=NOW)
    two = build_report(report_items([str(d)]), trust, jobs=2, now=NOW)
    assert one.summary() == two.summary()
    assert render_html(one) == render_html(two)


def test_the_same_receipt_twice_counts_once(tmp_path: Path) -> None:
    """An archive directory and a receipt log usually hold the same receipts."""
    from erasure_receipts.log import ReceiptLog

    rs = [make_receipt(make_statement(receipt_id=rid(i))) for i in range(3)]
    d = tmp_path / "files"
    d.mkdir()
    for r in rs:
        (d / f"{r.receipt_id}.json").write_bytes(r.to_json())
    log = ReceiptLog(tmp_path / "log", signer=TRUSTED)
    log.append_many(rs)
    trust = TrustStore([TRUSTED.public_key])
    s = build_report(report_items([str(d), str(tmp_path / "log")]), trust, now=NOW).summary()
    VALIDATOR.validate(s)
    assert s["receipts"] == {"total": 6, "verified": 3, "failed": 0, "duplicates": 3}
    assert s["by_kind"] == {"thread": {"erased": 3}}


def test_hostile_ids_are_text(tmp_path: Path) -> None:
    """Thread ids, request ids and bases are anyone's text: the page shows them as text,
    never as markup (one script element, no event handler, no other element injected)."""
    evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    st = make_statement(receipt_id=rid(1), thread_id="t" + evil)
    st["predicate"]["request"] = {"id": "R" + evil[:200], "basis": "b" + evil, "requester": None,
                                  "received_at": None, "due": None}  # fmt: skip
    d = tmp_path / "evil"
    d.mkdir()
    (d / "r.json").write_bytes(make_receipt(st).to_json())
    rep = _report(d)
    assert rep.verified == 1
    html = render_html(rep)
    assert html.count("<script") == 1 and "<img" not in html
    from html.parser import HTMLParser

    seen: list[tuple[str, list[str]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            seen.append((tag, [a for a, _ in attrs]))

    Tags().feed(html)
    assert not [t for t, attrs in seen if t in ("img", "iframe", "object", "embed")]
    assert not [(t, a) for t, attrs in seen for a in attrs if a.startswith("on") or a == "src"]
    assert [t for t, _ in seen].count("script") == 1
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
