"""Signed decisions to retain on SQLite (RECEIPT_SPEC.md 9.14): ``defer`` signs a
``deferral`` receipt of a thread, a history or a subject, records it in the database;
erasures of a retained thread are refused (``DeferredError``) unless overridden;
retention sweeps skip it until ``until`` passes by the saver's (injected) clock, then
erase it with a receipt whose ``deferral_of`` names the deferral.

Real graphs, real SQLite files, raw rows compared byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    DeferralScope,
    DeferredError,
    ErasureIncompleteError,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from erasure_receipts.errors import ReceiptSemanticsError
from scenario import raw_rows
from test_history_graphs import CHAT_TURNS, cfg, chat_graph, human

SEED = bytes(range(32))
TABLES = ("checkpoints", "writes")


class Clock:
    """The saver's injected clock: starts two days after the threads were written (so
    they are idle for ``older_than=1 day``), moved by the test."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(days=2)

    def __call__(self) -> datetime:
        return self.now


def _rows(db: Path, thread: str) -> dict[str, list[tuple[Any, ...]]]:
    return {t: raw_rows(db, t, "thread_id = ?", (thread,)) for t in TABLES}


def _chat(saver: Any, *threads: str) -> None:
    graph = chat_graph(saver)
    for t in threads:
        for turn in CHAT_TURNS[:3]:
            graph.invoke(human(turn), cfg(t))


@pytest.fixture
def signer() -> Signer:
    return Signer.from_seed(SEED)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_defer_sweep_keeps_then_erases_and_names_the_deferral(
    tmp_path: Path, signer: Signer, clock: Clock
) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, clock=clock
    ) as saver:
        _chat(saver, "kept", "other")
        until = clock.now + timedelta(days=30)
        deferral = saver.defer(
            "kept", basis="GDPR Art. 17(3)(b): legal obligation to keep", until=until,
            code="gdpr-17-3-b",
        )  # fmt: skip
        p = deferral.predicate
        assert p["kind"] == "deferral" and p["status"] == "retained"
        assert p["deferral"] == {
            "of_kind": "thread", "basis": "GDPR Art. 17(3)(b): legal obligation to keep",
            "code": "gdpr-17-3-b", "until": until.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }  # fmt: skip
        assert p["scope"]["thread_id"] == "kept" and p["scope"]["tombstone"] is False
        assert p["pre_state"] == p["post_state"] and p["pre_state"]["leaves"] > 0
        # the digest is what an erasure would measure now
        assert p["pre_state"]["digest"]["sha256"] == saver.digest_thread("kept").digest
        assert (archive / f"{deferral.receipt_id}.json").read_bytes() == deferral.to_json()
        v = verify_receipt(deferral.to_json(), [signer.public_key])
        assert v.status == "retained" and v.thread_id == "kept"
        [rec] = saver.deferrals()
        assert (rec.receipt_id, rec.state, rec.threads) == (deferral.receipt_id, "open", ("kept",))

        before = _rows(db, "kept")
        result = saver.erase_idle_threads(timedelta(days=1))
        assert result.skipped == {"deferred": 1} and result.threads == 1  # "other" erased
        assert result.deferrals == 0
        assert _rows(db, "kept") == before  # byte-identical: nothing of it touched
        assert _rows(db, "other") == {t: [] for t in TABLES}

        with pytest.raises(DeferredError) as err:
            saver.erase_thread("kept")
        assert err.value.reason == "deferred"
        assert err.value.deferrals == [(deferral.receipt_id, p["deferral"]["until"])]
        assert _rows(db, "kept") == before

        clock.now = until + timedelta(seconds=1)
        result = saver.erase_idle_threads(timedelta(days=1))
        assert result.ok and result.deferrals == 1 and result.threads == 1
        assert _rows(db, "kept") == {t: [] for t in TABLES}
        [erasure] = [
            json.loads(f.read_bytes())
            for f in archive.glob("*.json")
            if json.loads(f.read_bytes())["statement"]["predicate"].get("deferral_of")
        ]
        ep = erasure["statement"]["predicate"]
        assert ep["deferral_of"] == deferral.receipt_id and ep["kind"] == "thread"
        assert ep["pre_state"]["digest"] == p["pre_state"]["digest"]  # the same rows
        ev = verify_receipt(json.dumps(erasure).encode(), [signer.public_key])
        assert ev.status == "erased"
        [rec] = saver.deferrals()
        assert (rec.state, rec.closed_by) == ("executed", ep["receipt_id"])
        # a further sweep finds nothing to do
        assert saver.erase_idle_threads(timedelta(days=1)).deferrals == 0


def test_override_names_the_deferral(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, clock=clock) as saver:
        _chat(saver, "t1")
        d = saver.defer("t1", basis="litigation hold", until=date.today() + timedelta(days=90))
        receipt = saver.erase_thread("t1", override_deferral=True)
        assert receipt.predicate["deferral_of"] == d.receipt_id
        verify_receipt(receipt.to_json(), [signer.public_key])
        [rec] = saver.deferrals("executed")
        assert (rec.closed_by, rec.note) == (receipt.receipt_id, "overridden")


def test_history_and_subject_deferrals(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, clock=clock) as saver:
        _chat(saver, "h1", "s1", "s2")
        until = clock.now + timedelta(days=10)
        h = saver.defer(DeferralScope.history("h1"), basis="AI Act Art. 19 logs", until=until)
        assert h.predicate["deferral"]["of_kind"] == "history"
        assert h.predicate["scope"]["keep"] == "latest"
        s = saver.defer(
            DeferralScope.subject("alice", threads=["s1", "s2"]), basis="open claim", until=until
        )
        assert s.predicate["scope"]["threads"] == ["s1", "s2"]
        assert s.statement["subject"][0]["name"] == "langgraph-subject:alice"
        assert (
            s.predicate["pre_state"]["digest"]["sha256"]
            == saver.digest_subject("alice", threads=["s1", "s2"]).digest
        )
        for r in (h, s):
            verify_receipt(r.to_json(), [signer.public_key])
        with pytest.raises(DeferredError):
            saver.erase_history("h1")
        with pytest.raises(DeferredError):
            saver.erase_thread("h1")  # a retained history is part of the whole thread
        with pytest.raises(DeferredError):
            saver.erase_thread("s2")
        with pytest.raises(DeferredError):
            saver.erase_subject("alice", threads=["s1"])
        assert saver.prune_histories(timedelta(days=1)).skipped.get("deferred") == 3
        clock.now = until + timedelta(minutes=1)
        result = saver.erase_idle_threads(timedelta(days=1))
        assert result.ok and result.deferrals == 2, result
        kinds = sorted(
            r.predicate["kind"] for r in saver.journal_receipts() if "deferral_of" in r.predicate
        )
        assert kinds == ["history", "subject"]
        assert {d.state for d in saver.deferrals()} == {"executed"}


def test_release(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=signer, clock=clock
    ) as saver:
        _chat(saver, "t1")
        d = saver.defer("t1", basis="hold", until=clock.now + timedelta(days=1))
        with pytest.raises(ConfigurationError, match="reason"):
            saver.release_deferral(d.receipt_id, reason=" ")
        rec = saver.release_deferral(d.receipt_id, reason="claim settled")
        assert (rec.state, rec.note) == ("released", "claim settled")
        with pytest.raises(ConfigurationError, match="it is released"):
            saver.release_deferral(d.receipt_id, reason="again")
        saver.erase_thread("t1")  # no longer retained


def test_bad_input(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, clock=clock) as saver:
        _chat(saver, "t1")
        with pytest.raises(ConfigurationError, match="not in the future"):
            saver.defer("t1", basis="b", until=clock.now - timedelta(seconds=1))
        with pytest.raises(ConfigurationError, match="not in the future"):
            saver.defer("t1", basis="b", until="2020-01-01")
        with pytest.raises(ConfigurationError, match="neither a date"):
            saver.defer("t1", basis="b", until="next year")
        with pytest.raises(ConfigurationError, match="empty"):
            saver.defer("t1", basis="  ", until=clock.now + timedelta(days=1))
        with pytest.raises(ConfigurationError, match="code="):
            saver.defer("t1", basis="b", until=clock.now + timedelta(days=1), code="GDPR 17")
        with pytest.raises(NothingToEraseError, match="nothing to defer"):
            saver.defer("missing", basis="b", until=clock.now + timedelta(days=1))
        assert saver.deferrals() == []


def test_tampered_deferral_fails(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=signer, clock=clock
    ) as saver:
        _chat(saver, "t1")
        d = saver.defer("t1", basis="b", until=clock.now + timedelta(days=1))
    st = json.loads(json.dumps(d.statement))
    st["predicate"]["deferral"]["until"] = st["predicate"]["issued_at"]
    forged = type(d).sign(st, signer)  # a correct signature over a wrong statement
    with pytest.raises(ReceiptSemanticsError, match="not after issued_at"):
        verify_receipt(forged.to_json(), [signer.public_key])


def test_async_defer(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        _chat(saver, "t1")
    before = _rows(db, "t1")

    async def run() -> None:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, clock=clock
        ) as saver:
            d = await saver.adefer("t1", basis="b", until=clock.now + timedelta(hours=1))
            verify_receipt(d.to_json(), [signer.public_key])
            with pytest.raises(DeferredError):
                await saver.aerase_thread("t1")
            res = await saver.aerase_idle_threads(timedelta(days=1))
            assert res.skipped == {"deferred": 1}
            assert _rows(db, "t1") == before
            clock.now += timedelta(hours=2)
            res = await saver.aerase_idle_threads(timedelta(days=1))
            assert res.deferrals == 1
            [rec] = await saver.adeferrals()
            assert rec.state == "executed"

    asyncio.run(run())
    assert _rows(db, "t1") == {t: [] for t in TABLES}
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT state FROM erasure_deferrals").fetchall() == [("executed",)]


def test_recovered_receipt_closes_the_deferral(
    tmp_path: Path, signer: Signer, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's erasure commits but its receipt is not signed (the process "dies"):
    the deferral stays open; recover_receipts issues the receipt naming it and closes it."""
    from erasure_receipts._engine import eraser

    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, clock=clock) as saver:
        _chat(saver, "t1")
        d = saver.defer("t1", basis="b", until=clock.now + timedelta(days=1))
        clock.now += timedelta(days=2)

        def fail(*args: Any, **kwargs: Any) -> Any:
            raise OSError("disk full")

        with monkeypatch.context() as m:
            m.setattr(eraser, "sign_and_archive", fail)
            res = saver.erase_idle_threads(timedelta(days=1))
        assert res.failed == 1 and _rows(db, "t1") == {t: [] for t in TABLES}
        assert [x.state for x in saver.deferrals()] == ["open"]
        clock.now += timedelta(seconds=1)
        [receipt] = saver.recover_receipts(min_age_seconds=0)
        assert receipt.predicate["deferral_of"] == d.receipt_id
        verify_receipt(receipt.to_json(), [signer.public_key])
        [rec] = saver.deferrals()
        assert (rec.state, rec.closed_by) == ("executed", receipt.receipt_id)


def test_erased_while_the_deferral_is_recorded(
    tmp_path: Path, signer: Signer, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection erases the thread between the deferral's measurement and its
    record (it could not see the deferral yet): the record's transaction finds the thread
    gone, records nothing, and no deferral receipt is archived."""
    from erasure_receipts._backends import sqlite as sqlite_backend

    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, clock=clock, archive=archive
    ) as saver:
        _chat(saver, "t1")
        real = sqlite_backend.SqliteJournal.record_deferral

        def racing(self: Any, conn: Any, row: Any, threads: Any, present: Any) -> Any:
            with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as other:
                other.erase_thread("t1")  # a second connection, as another worker
            return real(self, conn, row, threads, present)

        monkeypatch.setattr(sqlite_backend.SqliteJournal, "record_deferral", racing)
        with pytest.raises(ErasureIncompleteError, match="erased while the deferral"):
            saver.defer("t1", basis="b", until=clock.now + timedelta(days=1))
        assert saver.deferrals() == []  # nothing recorded
        assert not archive.exists() or not list(archive.glob("*.json"))


def test_an_approver_authorizes_the_deferral(tmp_path: Path, signer: Signer, clock: Clock) -> None:
    """request=/authorization= as for an erasure of the scope: the approver's signed
    scope is the retained thread's; another thread's authorization is refused."""
    from erasure_receipts import (
        AuthorizationError,
        RequestContext,
        TrustedKey,
        TrustStore,
        authorize,
    )
    from erasure_receipts.request import erasure_scope

    approver = Signer.from_seed(b"\x07" * 32)
    trust = TrustStore([TrustedKey(signer.public_key, "ops"),
                        TrustedKey(approver.public_key, "dpo", role="approver")])  # fmt: skip
    context = RequestContext("DSR-7", "gdpr-art17-1a")
    not_after = clock.now + timedelta(days=1)
    auth = authorize(approver, request_id="DSR-7", scope=erasure_scope("thread", "t1"),
                     not_after=not_after)  # fmt: skip
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=signer, clock=clock
    ) as saver:
        _chat(saver, "t1", "t2")
        until = clock.now + timedelta(days=30)
        with pytest.raises(AuthorizationError):
            saver.defer("t2", basis="b", until=until, request=context, authorization=auth)
        d = saver.defer("t1", basis="b", until=until, request=context, authorization=auth)
    v = verify_receipt(d.to_json(), trust, require_authorization=True)
    assert v.approver == "dpo" and v.request is not None and v.request["id"] == "DSR-7"


def test_dry_run_counts_ended_deferrals_and_changes_nothing(
    tmp_path: Path, signer: Signer, clock: Clock
) -> None:
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, clock=clock) as saver:
        _chat(saver, "t1", "t2")
        saver.defer("t1", basis="b", until=clock.now + timedelta(days=1))
        saver.defer(DeferralScope.subject("s", threads=["t2"]), basis="b",
                    until=clock.now + timedelta(days=5))  # fmt: skip
        before = {t: _rows(db, t) for t in ("t1", "t2")}
        clock.now += timedelta(days=2)  # the first has ended, the second not
        events: list[Any] = []
        res = saver.erase_idle_threads(timedelta(days=1), dry_run=True, progress=events.append)
        assert (res.deferrals, res.threads, res.skipped) == (1, 1, {"deferred": 1})
        assert [(e.thread_id, e.outcome) for e in events] == [
            ("t1", "would_be_erased"), ("t2", "deferred"),
        ]  # fmt: skip
        assert {t: _rows(db, t) for t in ("t1", "t2")} == before
        assert [d.state for d in saver.deferrals()] == ["open", "open"]
