"""A subject authorization names the explicit threads and the discovery key (RECEIPT_SPEC.md
9.6): the saver refuses others before deleting; the verifier requires the authorized threads
among the receipt's (equal without discovery) and the same discovery.
"""

from __future__ import annotations

import copy
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.sqlite import SqliteStore
from typer.testing import CliRunner

from erasure_receipts import (
    AttestingSqliteSaver,
    Authorization,
    AuthorizationError,
    Receipt,
    RequestContext,
    Signer,
    TrustedKey,
    TrustStore,
    VerificationError,
    authorize,
    verify_receipt,
)
from erasure_receipts.app import app
from erasure_receipts.privacy import CommitmentKey
from erasure_receipts.request import erasure_scope

SIGNER = Signer.from_seed(b"\x05" * 32)
APPROVER = Signer.from_seed(b"\x06" * 32)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NOT_AFTER = "2026-11-30T00:00:00Z"
CONTEXT = RequestContext("DSR-1", "gdpr-art17-1a")
NS = ("users", "alice")
TRUST = TrustStore(
    [TrustedKey(SIGNER.public_key, "ops"), TrustedKey(APPROVER.public_key, "dpo", role="approver")]
)
OWNERS = {"alice-1": "alice", "alice-2": "alice", "bob-1": "bob"}


def _put(saver: Any, thread: str, i: int, owner: str) -> None:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{i:029d}"
    cp["channel_values"] = {"v": f"secret of {thread}"}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, cp, {"user_id": owner}, {})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(path)) as store,
        AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        for thread, owner in OWNERS.items():
            for i in range(2):
                _put(saver, thread, i, owner)
        store.put(NS, "profile", {"email": "alice@example.com"})
    return path


def _saver(db: Path) -> Any:
    class Ctx:
        def __enter__(self) -> Any:
            self.s = SqliteStore.from_conn_string(str(db))
            self.c = AttestingSqliteSaver.from_conn_string(
                str(db), signer=SIGNER, store=self.s.__enter__(), clock=lambda: NOW
            )
            return self.c.__enter__()

        def __exit__(self, *exc: Any) -> None:
            self.c.__exit__(*exc)
            self.s.__exit__(*exc)

    return Ctx()


def _threads(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]


def _auth(**scope: Any) -> Authorization:
    full = {"kind": "subject", "subject": "alice", "store_namespaces": [list(NS)], **scope}
    return authorize(APPROVER, request_id="DSR-1", scope=full, not_after=NOT_AFTER)


def _reason(data: bytes) -> str:
    try:
        verify_receipt(data, TRUST)
    except VerificationError as exc:
        return exc.reason
    return "ok"


def _resigned(receipt: Receipt, edit: Any) -> bytes:
    st = copy.deepcopy(receipt.statement)
    edit(st)
    return Receipt.sign(st, SIGNER).to_json()


# -- a subject authorization binds the threads ---------------------------------------------


def test_subject_authorization_without_threads_is_refused_by_authorize() -> None:
    # Authorizes "alice" but no thread at all.
    with pytest.raises(ValueError, match="threads"):
        _auth(store_namespaces=[])
    auth = _auth(threads=["alice-2", "alice-1", "alice-1"], discovery="user_id")
    assert auth.scope["threads"] == ["alice-1", "alice-2"]
    assert auth.scope["discovery"] == {"metadata_key": "user_id"}


def test_saver_refuses_threads_the_authorization_does_not_name(db: Path) -> None:
    auth = _auth(threads=["alice-1"])
    before = _threads(db)
    with _saver(db) as saver:
        for threads, key in (
            (["bob-1"], None),  # Bob's thread under Alice's authorization
            (["alice-1", "bob-1"], None),  # one more
            (["alice-1"], "user_id"),  # discovery the approver did not authorize
        ):
            with pytest.raises(AuthorizationError, match=r"threads|metadata") as e:
                saver.erase_subject("alice", threads=threads, metadata_key=key,
                                    store_namespaces=[NS], request=CONTEXT,
                                    authorization=auth)  # fmt: skip
            assert e.value.reason == "not_authorized"
        assert _threads(db) == before  # nothing was deleted
        receipt = saver.erase_subject("alice", threads=["alice-1"], store_namespaces=[NS],
                                      request=CONTEXT, authorization=auth)  # fmt: skip
    assert _threads(db) == ["alice-2", "bob-1"]
    assert verify_receipt(receipt.to_json(), TRUST).approver == "dpo"


def test_saver_refuses_another_discovery_key(db: Path) -> None:
    auth = _auth(threads=[], discovery="user_id")
    with _saver(db) as saver:
        for threads, key in ((["bob-1"], "user_id"), ([], "owner")):
            with pytest.raises(AuthorizationError):
                saver.erase_subject("alice", threads=threads, metadata_key=key,
                                    store_namespaces=[NS], request=CONTEXT,
                                    authorization=auth)  # fmt: skip
        assert "bob-1" in _threads(db)
        # Discovered threads are added to the authorized (here: no) explicit threads.
        receipt = saver.erase_subject("alice", metadata_key="user_id", store_namespaces=[NS],
                                      request=CONTEXT, authorization=auth)  # fmt: skip
    assert receipt.predicate["scope"]["threads"] == ["alice-1", "alice-2"]
    assert _threads(db) == ["bob-1"]
    assert verify_receipt(receipt.to_json(), TRUST).approver == "dpo"


def test_verifier_binds_authorized_threads_and_discovery(db: Path) -> None:
    with _saver(db) as saver:
        receipt = saver.erase_subject(
            "alice", threads=["alice-1"], metadata_key="user_id", store_namespaces=[NS],
            request=CONTEXT, authorization=_auth(threads=["alice-1"], discovery="user_id"),
        )  # fmt: skip
    assert receipt.predicate["scope"]["threads"] == ["alice-1", "alice-2"]
    assert _reason(receipt.to_json()) == "ok"

    def with_auth(auth: Authorization) -> Any:
        def edit(st: dict[str, Any]) -> None:
            st["predicate"]["authorization"] = auth.to_dict()

        return edit

    cases = {
        "not among the erased": _auth(threads=["bob-1"], discovery="user_id"),
        "other discovery": _auth(threads=["alice-1"], discovery="owner"),
        "no discovery authorized": _auth(threads=["alice-1"]),
        "no discovery, not equal": _auth(threads=["alice-1", "alice-2"]),
    }
    for why, auth in cases.items():
        assert _reason(_resigned(receipt, with_auth(auth))) == "authorization_mismatch", why
    ok = _auth(threads=[], discovery="user_id")  # a subset (empty) with the same discovery
    assert _reason(_resigned(receipt, with_auth(ok))) == "ok"

    # Without discovery the authorized threads must equal the receipt's.
    def no_discovery(st: dict[str, Any]) -> None:
        st["predicate"]["scope"]["discovery"] = None
        st["predicate"]["authorization"] = _auth(threads=["alice-1"]).to_dict()

    assert _reason(_resigned(receipt, no_discovery)) == "authorization_mismatch"


def test_privacy_mode_authorization_binds_committed_threads(db: Path) -> None:
    ck = CommitmentKey.generate()
    scope = erasure_scope("subject", "alice", [NS], commit=ck.commit, threads=["alice-1"])
    assert scope["threads"] == [ck.commit("thread", "alice-1")]
    auth = authorize(APPROVER, request_id="DSR-1", scope=scope, not_after=NOT_AFTER)
    private = {"privacy": "commitments", "commitment_key": ck}
    with _saver(db) as saver:
        with pytest.raises(AuthorizationError):
            saver.erase_subject("alice", threads=["bob-1"], store_namespaces=[NS],
                                request=CONTEXT, authorization=auth, **private)  # fmt: skip
        receipt = saver.erase_subject("alice", threads=["alice-1"], store_namespaces=[NS],
                                      request=CONTEXT, authorization=auth, **private)  # fmt: skip
    assert "alice-1" not in receipt.to_json().decode()
    assert verify_receipt(receipt.to_json(), TRUST).approver == "dpo"


def test_cli_authorize_subject_threads_and_metadata_key(tmp_path: Path) -> None:
    key = tmp_path / "approver.key"
    key.write_bytes(APPROVER.private_pem())
    key.chmod(0o600)
    out = tmp_path / "auth.json"
    base = ["authorize", "--request-id", "DSR-1", "--not-after", "2099-01-01T00:00:00Z",
            "--key", str(key)]  # fmt: skip
    res = CliRunner().invoke(app, [*base, "--subject", "alice", "--thread", "b", "--thread",
                                   "a", "--metadata-key", "user_id", "--out", str(out),
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    scope = Authorization.from_json(out.read_bytes()).scope
    assert scope == {"kind": "subject", "subject": "alice", "threads": ["a", "b"],
                     "discovery": {"metadata_key": "user_id"}, "store_namespaces": []}  # fmt: skip
    res = CliRunner().invoke(app, [*base, "--subject", "alice", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--metadata-key" in res.output
    res = CliRunner().invoke(app, [*base, "--thread", "t", "--metadata-key", "k", "--out",
                                   str(tmp_path / "y")])  # fmt: skip
    assert res.exit_code == 2
