"""``receipt report`` over a real, mixed archive, and the page in a real browser.

A LangGraph graph writes threads of several users into an SQLite database; the attesting
saver erases a thread (late against its request's due date), a history (no due date), a
data subject in privacy mode (on time), a thread without a request and a thread with an
erasure target in another database (swept after the commit); it signs two decisions to
retain (``defer``), one of which an erasure then carries out (``override_deferral``);
a second saver signs a receipt with a key nobody trusts, and one receipt is tampered
with. The report's summary - deferral counts included - equals counts computed
independently from the receipt files (their JSON read directly, times compared with
``datetime``), the page names every verified receipt's request, the failed receipts'
reasons and the targets of the receipt that has them, tells each decision to retain
with its state, and names the privacy-mode subject only by commitments.

Headless Chromium (``chromium`` or ``chromium-browser`` on PATH; ``.ci/run`` installs it
in CI) loads the file with networking off (its own network namespace where ``unshare``
is allowed, and a dead proxy either way): the page logs no console message (a blocked
inline style or script would), its script ran under the page's own CSP, the DOM text
has every verified request id and each failure reason, and a screenshot is not blank.
A second, small page (``--tsa-cert`` over a log time-stamped by a local OpenSSL TSA)
renders its trusted times and its forward-dated receipt under the same policy.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, RequestContext, Signer, SqlTarget
from erasure_receipts.privacy import CommitmentKey
from explain_facts import check_facts, predicate
from test_subject import EMAIL, NAMESPACES, OTHERS, SUBJECT, SUPPORT, THREADS, build, cfg, populate

TRUSTED = Signer.from_seed(bytes(range(32)))
STRANGER = Signer.from_seed(b"\x07" * 32)
SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "report.schema.json").read_text())
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
CAROL = "carol-chat-1"
KEPT, OVERRIDDEN, GRANTED = "erin-chat-1", "frank-chat-1", "gina-chat-1"
LEDGER = """CREATE TABLE refund_grants (grant_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL,
    amount_cents INTEGER)"""


def _t(d: datetime) -> str:
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(t: str) -> datetime:
    return datetime.fromisoformat(t.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("report")
    db = base / "app.db"
    arch = base / "archive"
    arch.mkdir()
    now = datetime.now(UTC)
    ck = CommitmentKey.generate()
    ledger = base / "ledger.db"
    with sqlite3.connect(ledger) as c:
        c.execute(LEDGER)
        c.executemany(
            "INSERT INTO refund_grants VALUES (?, ?, ?)",
            [("g-1", GRANTED, 500), ("g-2", GRANTED, 700), ("g-3", CAROL, 100)],
        )
    c.close()
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=TRUSTED, store=store) as saver,
    ):
        store.setup()
        graph = build(saver, store)
        populate(graph)
        graph.invoke({"messages": [HumanMessage(content="hello")]}, cfg(CAROL, "carol"))
        for thread, user in ((KEPT, "erin"), (OVERRIDDEN, "frank"), (GRANTED, "gina")):
            graph.invoke({"messages": [HumanMessage(content="hi")]}, cfg(thread, user))
        deferrals = {
            "deferral-open": saver.defer(KEPT, basis="GDPR Art. 17(3)(e): open legal claim",
                                         until=now + timedelta(days=90), code="gdpr-17-3-e"),
            "deferral-overridden": saver.defer(OVERRIDDEN, basis="litigation hold",
                                               until=now + timedelta(days=30)),
        }  # fmt: skip
        receipts = {
            **deferrals,
            "thread-overriding": saver.erase_thread(OVERRIDDEN, override_deferral=True),
            "thread-targets": saver.erase_thread(
                GRANTED, targets=[SqlTarget("refund_grants", "thread_id", database=str(ledger))]
            ),
            "thread-late": saver.erase_thread(
                OTHERS[0],
                request=RequestContext("DSR-0001", "gdpr-art17-1b", requester="bob@example.com",
                                       received_at=_t(now - timedelta(days=40)),
                                       due=_t(now - timedelta(days=10))),
            ),
            "history": saver.erase_history(
                OTHERS[1],
                request=RequestContext("DSR-0002", "retention:chat-90d",
                                       received_at=_t(now - timedelta(days=1))),
            ),
            "subject-private": saver.erase_subject(
                SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES,
                privacy="commitments", commitment_key=ck,
                request=RequestContext("DSR-0003", "gdpr-art17-1a", requester=EMAIL,
                                       received_at=_t(now - timedelta(days=3)),
                                       due=_t(now + timedelta(days=27))),
            ),
            "thread-plain": saver.erase_thread(CAROL),
            "redaction": saver.redact(OTHERS[1], ["bob@example.com"]),
            "namespace": saver.erase_namespace(
                ("memories", "carol", "prefs"),
                request=RequestContext("DSR-0004", "user-deletion",
                                       received_at=_t(now - timedelta(hours=2)),
                                       due=_t(now + timedelta(days=1))),
            ),
        }  # fmt: skip
    for name, r in receipts.items():
        (arch / f"{name}.json").write_bytes(r.to_json())
    other_db = base / "other.db"
    with (
        SqliteStore.from_conn_string(str(other_db)) as store,
        AttestingSqliteSaver.from_conn_string(str(other_db), signer=STRANGER, store=store) as s,
    ):
        store.setup()
        build(s, store).invoke({"messages": [HumanMessage(content="hi")]}, cfg("dave-1", "dave"))
        forged = s.erase_thread("dave-1", request=RequestContext("DSR-0666", "user-deletion"))
    (arch / "untrusted.json").write_bytes(forged.to_json())
    doc = json.loads(receipts["thread-plain"].to_json())
    doc["statement"]["predicate"]["issued_at"] = "2026-01-01T00:00:00Z"  # backdated
    (arch / "tampered.json").write_bytes(json.dumps(doc).encode())
    pub = base / "trusted.pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    out = base / "report.html"
    res = subprocess.run([*CLI, "report", str(arch), "--key", str(pub), "-o", str(out), "--json"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    return {"dir": arch, "out": out, "res": res, "receipts": receipts, "forged": forged,
            "now": now}  # fmt: skip


def independent_counts(arch: Path, failed: set[str], now: datetime) -> dict[str, Any]:
    """The summary's counts from the receipt files themselves (no library code)."""
    by_kind: Counter[tuple[str, str]] = Counter()
    requests: dict[str, list[dict[str, Any]]] = {}
    until: dict[str, datetime] = {}  # decision to retain -> its end
    carried_out: set[str] = set()  # named by an erasure's deferral_of
    for f in sorted(arch.glob("*.json")):
        if f.name in failed:
            continue
        p = json.loads(f.read_bytes())["statement"]["predicate"]
        by_kind[(p.get("kind", "thread"), p["status"])] += 1
        if p.get("kind") == "deferral":
            until[p["receipt_id"]] = _parse(p["deferral"]["until"])
        if "deferral_of" in p:
            carried_out.add(p["deferral_of"])
        if "request" in p:
            requests.setdefault(p["request"]["id"], []).append(p)
    met = late = no_due = 0
    for ps in requests.values():
        done = max(_parse(p["issued_at"]) for p in ps)
        due = ps[0]["request"]["due"]
        if due is None:
            no_due += 1
        elif done <= _parse(due):
            met += 1
        else:
            late += 1
    executed = sum(1 for d in until if d in carried_out)
    past = sum(1 for d, u in until.items() if d not in carried_out and u < now)
    deferrals = {"total": len(until), "open": len(until) - executed, "executed": executed,
                 "open_past_until": past}  # fmt: skip
    return {"by_kind": {k: {s: n} for (k, s), n in sorted(by_kind.items())},
            "deferrals": deferrals,
            "requests": {"received": len(requests), "met": met, "late": late, "open": 0,
                         "no_due_date": no_due, "open_overdue": 0},
            "verified": sum(by_kind.values())}  # fmt: skip


def test_summary_equals_independent_counts(archive: dict[str, Any]) -> None:
    res = archive["res"]
    assert res.returncode == 1, res.stderr  # two receipts failed; the report is written
    summary = json.loads(res.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    failed = {Path(f["source"]).name: f["reason"] for f in summary["failed"]}
    assert failed == {"tampered.json": "bad_signature", "untrusted.json": "untrusted_key"}
    want = independent_counts(archive["dir"], set(failed), _parse(summary["generated_at"]))
    assert summary["by_kind"] == want["by_kind"] == {
        "deferral": {"retained": 2}, "history": {"erased": 1}, "namespace": {"erased": 1},
        "redaction": {"redacted": 1}, "subject": {"erased": 1},
        "thread": {"erased": 4}}  # fmt: skip
    assert summary["deferrals"] == want["deferrals"]
    assert want["deferrals"] == {"total": 2, "open": 1, "executed": 1, "open_past_until": 0}
    assert summary["requests"] == want["requests"]
    assert (want["requests"]["met"], want["requests"]["late"]) == (2, 1)
    assert summary["receipts"] == {"total": 12, "verified": want["verified"], "failed": 2,
                                   "duplicates": 0}  # fmt: skip
    assert summary["privacy_mode"] == 1
    rows = sum(r.statement["predicate"]["pre_state"]["leaves"]
               for r in archive["receipts"].values()
               if r.statement["predicate"]["status"] == "erased")  # fmt: skip
    assert summary["rows_erased"] == rows


def test_page_names_verified_requests_failures_and_only_commitments(
    archive: dict[str, Any],
) -> None:
    html = archive["out"].read_text("utf-8")
    for r in archive["receipts"].values():
        assert r.receipt_id in html
    for rid in ("DSR-0001", "DSR-0002", "DSR-0003", "DSR-0004"):
        assert rid in html
    assert "DSR-0666" not in html  # the untrusted receipt's content is not shown
    assert archive["forged"].receipt_id not in html
    assert "bad_signature" in html and "untrusted_key" in html
    assert html.index('id="failed"') < html.index('id="summary"')
    private = archive["receipts"]["subject-private"].statement["predicate"]
    for raw in (SUBJECT, EMAIL, *THREADS, SUPPORT, "bob@example.com"):
        assert raw not in html, raw
    assert private["scope"]["subject"] in html  # the commitment, in the machine values
    assert OTHERS[0] in html and CAROL in html  # not privacy mode: named in clear


def _row_of(html: str, receipt_id: str) -> str:
    """The table row (``<tr>...</tr>``) of the kind section that lists a receipt."""
    at = html.index(f'<code class="rid">{receipt_id}</code>')
    return html[html.rindex("<tr>", 0, at) : html.index("</tr>", at)]


def test_page_tells_decisions_to_retain_and_targets(archive: dict[str, Any]) -> None:
    """Each deferral row: the decision (retained since its issued_at, until its until) and
    its state as the archive shows it; the receipt with targets names them."""
    html = archive["out"].read_text("utf-8")
    rs = archive["receipts"]
    overriding = rs["thread-overriding"].statement["predicate"]
    states = {"deferral-open": '<span class="warn">open</span>',
              "deferral-overridden": '<span class="ok">carried out</span>'}  # fmt: skip
    for name, state in states.items():
        p = rs[name].statement["predicate"]
        row = _row_of(html, p["receipt_id"])
        assert f'retained since <time datetime="{p["issued_at"]}"' in row
        assert f'until <time datetime="{p["deferral"]["until"]}"' in row
        assert state in row and "erased <time" not in row
        assert (overriding["receipt_id"] in row) == (name == "deferral-overridden")
    assert overriding["deferral_of"] == rs["deferral-overridden"].receipt_id
    p = rs["thread-targets"].statement["predicate"]
    row = _row_of(html, p["receipt_id"])
    names = [t["name"] for t in p["targets"]]
    assert names == ["refund_grants"] and p["targets"][0]["method"] == "sweep"
    assert "with targets " + ", ".join(f"<code>{n}</code>" for n in names) in row
    assert f"({p['pre_state']['tables']['target:refund_grants']['rows']} rows)" in row


def test_explain_states_the_facts_of_every_real_receipt(archive: dict[str, Any]) -> None:
    """``receipt verify --explain`` on each real receipt: the facts it states are the
    receipt's; the late request is called late; the failed ones are NOT VERIFIED."""
    pub = archive["out"].parent / "trusted.pub.pem"
    for f in sorted(archive["dir"].glob("*.json")):
        res = subprocess.run([*CLI, "verify", "--explain", str(f), "--key", str(pub)],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        if f.name in ("tampered.json", "untrusted.json"):
            assert res.returncode == 1 and res.stdout.startswith("NOT VERIFIED"), res.stdout
            assert "DSR-0666" not in res.stdout
            continue
        assert res.returncode == 0, res.stdout + res.stderr
        check_facts(res.stdout, predicate(f))
        if f.name == "thread-late.json":
            assert ": LATE, by 10 days" in res.stdout
        if f.name == "subject-private.json":
            assert EMAIL not in res.stdout and SUBJECT + "'" not in res.stdout
            assert "The requester is recorded only as a commitment" in res.stdout


# -- a real browser ------------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _no_network_prefix() -> list[str]:
    """Run in a network namespace of its own (only loopback, and it is down) when the
    system allows it: as root ``unshare -n``, else an unprivileged user namespace."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    for prefix in ([unshare, "-n"], [unshare, "-rn"]):
        try:
            ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok.returncode == 0:
            return prefix
    return []


def _browser(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    exe = _chromium()
    assert exe is not None
    cmd = [*_no_network_prefix(), exe, "--headless", "--no-sandbox", "--disable-gpu",
           f"--user-data-dir={tmp / 'profile'}", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--proxy-server=socks5://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
           "--enable-logging=stderr", "--v=0", *args]  # fmt: skip
    env = {**os.environ, "HOME": str(tmp)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of an 8-bit RGB/RGBA PNG (stdlib only)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = bpp = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


needs_chromium = pytest.mark.skipif(
    _chromium() is None,
    reason="no chromium or chromium-browser on PATH (apt-get install -y chromium; "
    ".ci/run installs it when run as root with CI=true)",
)


@needs_chromium
def test_browser_renders_the_page_offline(archive: dict[str, Any], tmp_path: Path) -> None:
    url = archive["out"].resolve().as_uri()
    dom = _browser(["--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console  # a CSP violation or script error would be logged here
    text = dom.stdout
    assert 'data-script="ran"' in text  # the inline script ran: its hash is in the CSP
    for r in archive["receipts"].values():
        req = r.statement["predicate"].get("request")
        if req is not None:
            assert req["id"] in text
        assert r.receipt_id in text
    assert "bad_signature" in text and "untrusted_key" in text

    shot = tmp_path / "report.png"
    res = _browser(["--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={shot}",
                    url], tmp_path)  # fmt: skip
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1600)
    bpp = len(rows[0]) // width
    colours: Counter[bytes] = Counter()
    for y in range(0, height, 4):
        line = rows[y]
        for x in range(0, width, 4):
            colours[line[x * bpp : x * bpp + 3]] += 1
    # the inline style sheet applied (the CSP allowed it): the header's navy at the top
    assert rows[10][10 * bpp : 10 * bpp + 3] == bytes((0x1A, 0x36, 0x5D))
    top, n = colours.most_common(1)[0]
    assert len(colours) > 50, len(colours)  # text, charts, colours: not one flat fill
    assert n / sum(colours.values()) < 0.9, top
    keep = os.environ.get("ERASURE_RECEIPTS_KEEP_SCREENSHOT")
    if keep:  # to look at the page: the screenshot, and the page next to it
        shutil.copy(shot, keep)
        shutil.copy(archive["out"], keep + ".html")


@needs_chromium
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_browser_renders_trusted_time(tmp_path: Path) -> None:
    """A report with --tsa-cert over a log time-stamped by a local OpenSSL TSA (the
    helpers of test_timestamp_cli): one forward-dated receipt flagged, the others
    showing the time they were issued no later than, under the same strict CSP."""
    from test_timestamp_cli import Env, stamp

    (tmp_path / "tsa").mkdir()
    env = Env(tmp_path / "tsa")
    env.append(2)
    env.append(1, issued_at="2099-01-01T00:00:00Z")
    stamp(env)
    out = tmp_path / "timed.html"
    res = subprocess.run([*CLI, "report", str(env.log), "--key", str(env.pub), "-o", str(out),
                          "--json", *map(str, env.trust())],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 1, res.stderr  # the forward-dated receipt failed
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(res.stdout))
    dom = _browser(["--dump-dom", out.resolve().as_uri()], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert [x for x in dom.stderr.splitlines() if ":CONSOLE" in x] == []
    text = dom.stdout
    assert 'data-script="ran"' in text and "issued_after_timestamp" in text
    assert text.count("(RFC 3161 time-stamp of log checkpoint 3)") == 2
    assert text.count("issued no later than <time") == 2
