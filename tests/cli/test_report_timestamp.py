"""Trusted time in the auditor's report: ``receipt report LOG --tsa-cert TSA.pem
[--tsa-root ROOT.pem]`` over a receipt log time-stamped by a local OpenSSL TSA (the
helpers of test_timestamp_cli). Each receipt a verified time-stamp covers shows the time
it was issued no later than, in the HTML "When" cell and the --json summary (which
validates); a forward-dated receipt fails as ``issued_after_timestamp``; a time-stamp
from an untrusted TSA is one failure of the time evidence and the receipts stay
verified (a later time-stamp that verifies still bounds them); each token is verified
once, whatever the number of receipts or workers; without --tsa-cert the report is what
it was; --tsa-cert without a log SOURCE is a usage error."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner, Result

from erasure_receipts.app import app
from erasure_receipts.report import build_report, render_html, report_items
from erasure_receipts.timestamp import TsaTrust
from erasure_receipts.verify import TrustStore
from receipt_factory import TRUSTED
from test_timestamp_cli import Env, stamp
from tsa_helpers import OPENSSL

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command")

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
NOW = "2026-12-03T12:00:00Z"
FUTURE = "2099-01-01T00:00:00Z"


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def report(env: Env, *extra: Any, code: int = 0) -> tuple[dict[str, Any], str]:
    out = env.d / f"report-{len(list(env.d.glob('report-*')))}.html"
    res = cli("report", env.log, "--key", env.pub, "-o", out, "--json", "--jobs", "1", *extra)
    assert res.exit_code == code, (res.stdout, res.stderr)
    doc: dict[str, Any] = json.loads(res.stdout)
    VALIDATOR.validate(doc)
    return doc, out.read_text("utf-8")


def row_of(html: str, receipt_id: str) -> str:
    at = html.index(f'<code class="rid">{receipt_id}</code>')
    return html[html.rindex("<tr>", 0, at) : html.index("</tr>", at)]


def receipt_ids(env: Env) -> list[str]:
    return [json.loads(f.read_bytes())["statement"]["predicate"]["receipt_id"] for f in env.files]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path)
    e.append(3)
    return e


def test_each_receipt_shows_the_time_it_was_issued_no_later_than(env: Env) -> None:
    stamped = stamp(env)
    env.append(1)  # entry 3: after the time-stamp, not covered yet
    doc, html = report(env, *env.trust())
    tt = doc["trusted_time"]
    assert tt["tsa"].endswith("good tsa") and tt["timestamps"] == {"verified": 1, "failed": 0}
    assert tt["failed_timestamps"] == []
    assert (tt["receipts_with_trusted_time"], tt["receipts_without_trusted_time"]) == (3, 1)
    assert tt["issued_after_timestamp"] == 0 and doc["receipts"]["failed"] == 0
    ids = receipt_ids(env)
    bound = None
    for rid in ids[:3]:
        row = row_of(html, rid)
        m = re.search(r'issued no later than <time datetime="([^"]+)"', row)
        assert m is not None, row
        bound = m.group(1)
        assert "(RFC 3161 time-stamp of log checkpoint 3)" in row
        assert "(issuer's clock)" in row  # the self-asserted time, named as such
        assert f"&quot;issued_no_later_than&quot;: &quot;{bound}&quot;" in row  # machine values
        assert "&quot;timestamp_size&quot;: 3" in row
    assert bound is not None and bound == stamped["gen_time"]
    last = row_of(html, ids[3])
    assert "no verified time-stamp of the log covers it yet" in last
    assert "&quot;issued_no_later_than&quot;: null" in last
    assert "did NOT verify" not in html
    assert "3 verified receipt(s) were issued no later than a verified time-stamp" in html


def test_a_forward_dated_receipt_is_flagged(env: Env) -> None:
    env.append(1, issued_at=FUTURE)
    stamp(env)
    doc, html = report(env, *env.trust(), code=1)
    assert doc["receipts"] == {"total": 4, "verified": 3, "failed": 1, "duplicates": 0}
    assert doc["failed_by_reason"] == {"issued_after_timestamp": 1}
    bad = doc["failed"][0]
    assert bad["reason"] == "issued_after_timestamp" and bad["source"].endswith("log#3")
    assert bad["issued_at"] == FUTURE and bad["timestamp_size"] == 4
    assert bad["issued_no_later_than"] < FUTURE
    assert doc["trusted_time"]["issued_after_timestamp"] == 1
    assert doc["trusted_time"]["receipts_with_trusted_time"] == 3
    failed = html[html.index('<section id="failed"') : html.index("</section>")]
    assert "issued_after_timestamp" in failed and f"issued_at {FUTURE}" in failed
    assert receipt_ids(env)[3] not in html.split("</section>", 1)[1]  # not among the verified


def test_an_untrusted_time_stamp_is_one_failure_and_the_receipts_stay(env: Env) -> None:
    stamp(env, env.other_cert, env.other_key)  # size 3, by a TSA nobody trusts
    doc, html = report(env, *env.trust(), code=1)
    assert doc["receipts"] == {"total": 3, "verified": 3, "failed": 0, "duplicates": 0}
    tt = doc["trusted_time"]
    assert tt["timestamps"] == {"verified": 0, "failed": 1}
    (f,) = tt["failed_timestamps"]
    assert (f["reason"], f["size"], f["source"]) == ("untrusted_tsa", 3, str(env.log))
    assert (tt["receipts_with_trusted_time"], tt["receipts_without_trusted_time"]) == (0, 3)
    section = html[html.index('<section id="failed-timestamps"') :].split("</section>")[0]
    assert "1 RFC 3161 time-stamp did NOT verify" in section and "untrusted_tsa" in section
    assert "did NOT verify" in html.split("<main>")[0]  # the header says so too
    for rid in receipt_ids(env):
        assert "no verified time-stamp of the log covers it yet" in row_of(html, rid)
    # a later time-stamp that verifies bounds them all; the bad one is still reported once
    env.append(1)
    stamp(env)
    doc, html = report(env, *env.trust(), code=1)
    tt = doc["trusted_time"]
    assert tt["timestamps"] == {"verified": 1, "failed": 1}
    assert tt["receipts_with_trusted_time"] == 4 and doc["receipts"]["failed"] == 0
    assert html.count("untrusted_tsa</code>") == 1
    assert all("log checkpoint 4)" in row_of(html, rid) for rid in receipt_ids(env))


def test_without_tsa_cert_the_report_is_unchanged(env: Env) -> None:
    trust = TrustStore([TRUSTED.public_key])
    plain = env.d / "plain-log"
    shutil.copytree(env.log, plain)
    stamp(env)
    got = build_report(report_items([str(env.log)]), trust, now=NOW)
    before = build_report(report_items([str(plain)]), trust, now=NOW)
    assert "trusted_time" not in got.summary()
    html = render_html(got)
    assert "issued_no_later_than" not in html and "issuer's clock" not in html
    assert html == render_html(before).replace(str(plain), str(env.log))


def test_each_time_stamp_is_verified_once(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    stamp(env)
    env.append(300)  # past PARALLEL_MIN: forked workers
    stamp(env)
    calls: list[int] = []
    verify = TsaTrust.verify

    def counted(self: TsaTrust, token: bytes, text: bytes) -> Any:
        calls.append(len(token))
        return verify(self, token, text)

    monkeypatch.setattr(TsaTrust, "verify", counted)
    tsa = TsaTrust(env.cert.read_bytes(), env.pki.root_pem.read_bytes())
    trust = TrustStore([TRUSTED.public_key])
    items = report_items([str(env.log)])
    one = build_report(items, trust, now=NOW, tsa=tsa)
    assert len(calls) == 2
    two = build_report(items, trust, now=NOW, tsa=tsa, jobs=2)
    assert len(calls) == 4
    assert one.summary() == two.summary() and render_html(one) == render_html(two)
    tt = one.summary()["trusted_time"]
    assert tt["receipts_with_trusted_time"] == 303 and tt["timestamps"]["verified"] == 2
    sizes = {r["timestamp_size"] for r in one.kind_rows["thread"]}
    assert sizes == {3, 303}


def test_tsa_cert_needs_a_log_source(env: Env) -> None:
    res = cli("report", env.files[0], "--key", env.pub, "--json", *env.trust())
    assert res.exit_code == 2 and "--tsa-cert needs a receipt log" in res.stderr
    res = cli("report", env.log, "--key", env.pub, "--json", "--tsa-root", env.pki.root_pem)
    assert res.exit_code == 2 and "--tsa-root needs --tsa-cert" in res.stderr
    res = cli("report", env.log, "--key", env.pub, "--json", "--tsa-cert", env.pub)
    assert res.exit_code == 2 and "not PEM X.509 certificates" in res.stderr
    res = cli("report", env.log, "--key", env.pub, "--json", "--tsa-cert", env.cert)
    assert res.exit_code == 2 and "--tsa-root" in res.stderr  # not self-signed: needs a root
    help_text = " ".join(cli("report", "--help").stdout.split())
    assert "only for receipts read from a log SOURCE" in help_text.replace("│ ", "")
