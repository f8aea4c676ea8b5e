"""Review fixes: subject authorizations bind the threads, privacy mode enforced by the
verifier, DSN passwords with an un-encoded ``@``, and invalid UTF-8 on the command line.

1. A subject authorization names the explicit threads and the discovery key (RECEIPT_SPEC.md
   9.6): the saver refuses others before deleting; the verifier requires the authorized
   threads among the receipt's (equal without discovery) and the same discovery.
2. With ``scope.privacy`` the verifier rejects (``inconsistent``) any raw id (9.5).
3. ``postgresql://u:hun@ter2@host/db``: no fragment of the password in any message.
4. ``--needle $'\\xff'`` (and subject/thread ids) that are not UTF-8: usage error, exit 2.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
import sys
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


# -- 1. a subject authorization binds the threads ------------------------------------------


def test_subject_authorization_without_threads_is_refused_by_authorize() -> None:
    # The review's example: authorizes "alice" but no thread at all.
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
            (["bob-1"], None),  # the review's case: Bob's thread under Alice's authorization
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


# -- 2. privacy mode is enforced by the verifier ------------------------------------------


@pytest.fixture
def private_receipt(db: Path) -> Receipt:
    ck = CommitmentKey.generate()
    with _saver(db) as saver:
        return saver.erase_subject(  # type: ignore[no-any-return]
            "alice", threads=["alice-1"], metadata_key="user_id", store_namespaces=[NS],
            privacy="commitments", commitment_key=ck,
        )  # fmt: skip


def test_privacy_receipt_with_raw_ids_is_inconsistent(private_receipt: Receipt) -> None:
    assert _reason(private_receipt.to_json()) == "ok"
    upper = "hmac-sha256:" + "AB" * 32

    def scope(st: dict[str, Any]) -> dict[str, Any]:
        return st["predicate"]["scope"]  # type: ignore[no-any-return]

    def raw_subject(st: dict[str, Any]) -> None:
        scope(st)["subject"] = "alice"
        st["subject"][0]["name"] = "langgraph-subject:alice"

    def raw_threads(value: str) -> Any:
        def edit(st: dict[str, Any]) -> None:
            p = st["predicate"]
            old = p["scope"]["threads"][0]
            p["scope"]["threads"] = sorted([value, *p["scope"]["threads"][1:]])
            for u in p["units"]:
                if u["name"] == f"thread:{old}":
                    u["name"] = f"thread:{value}"
            p["units"].sort(key=lambda u: u["name"])
            from erasure_receipts.digest import units_root

            root = units_root(
                (u["name"], u["leaves"], bytes.fromhex(u["digest"]["sha256"])) for u in p["units"]
            )
            p["pre_state"]["digest"]["sha256"] = root.hex()
            st["subject"][0]["digest"]["sha256"] = root.hex()

        return edit

    def raw_namespace(st: dict[str, Any]) -> None:
        scope(st)["store_namespaces"] = [list(NS)]

    def two_part_namespace(st: dict[str, Any]) -> None:
        c = scope(st)["store_namespaces"][0][0]
        scope(st)["store_namespaces"] = [[c, c]]

    def raw_database(st: dict[str, Any]) -> None:
        st["predicate"]["backend"]["database"] = "/srv/app.db"

    def upper_database(st: dict[str, Any]) -> None:
        st["predicate"]["backend"]["database"] = upper

    cases = {
        "subject": raw_subject,
        "thread": raw_threads("alice-1"),
        "thread (upper-case hex)": raw_threads(upper),
        "store namespace": raw_namespace,
        "store namespace of two parts": two_part_namespace,
        "database": raw_database,
        "database (upper-case hex)": upper_database,
    }
    for why, edit in cases.items():
        assert _reason(_resigned(private_receipt, edit)) == "inconsistent", why
    # Unchanged but re-signed: still fine (the cases fail for the raw id alone).
    assert _reason(_resigned(private_receipt, lambda st: None)) == "ok"


def test_privacy_thread_receipt_with_raw_thread_id_is_inconsistent(db: Path) -> None:
    ck = CommitmentKey.generate()
    with _saver(db) as saver:
        # A thread-kind receipt made private by hand (the saver issues privacy mode for
        # subject erasures): committed ids verify, a raw thread id does not.
        receipt = saver.erase_thread("bob-1")
    c = ck.commit("thread", "bob-1")

    def private(thread_id: str) -> Any:
        def edit(st: dict[str, Any]) -> None:
            p = st["predicate"]
            p["scope"]["privacy"] = {"mode": "hmac-sha256", "key_id": ck.key_id}
            p["scope"]["thread_id"] = thread_id
            p["backend"]["database"] = ck.commit("database", p["backend"]["database"])
            st["subject"][0]["name"] = f"langgraph-thread:{thread_id}"

        return edit

    assert _reason(_resigned(receipt, private(c))) == "ok"
    assert _reason(_resigned(receipt, private("bob-1"))) == "inconsistent"


# -- 3. DSN passwords with an un-encoded '@' ------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u:hun@ter2@127.0.0.1:1/db",
        "postgresql://u:hun@ter2@127.0.0.1:1/db?connect_timeout=2",
        "host=127.0.0.1 port=1 dbname=db user=u password=hun@ter2",
        "host=127.0.0.1 port=1 dbname=db user=u password='hun@ter2 x'",
    ],
)
def test_dsn_password_never_printed(dsn: str) -> None:
    pytest.importorskip("psycopg")
    res = subprocess.run(
        [sys.executable, "-c", "from erasure_receipts.cli import main; main()", "digest", dsn,
         "--thread", "t", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 3, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    for fragment in ("hun", "ter2"):
        assert fragment not in res.stdout and fragment not in res.stderr, (fragment, res.stderr)


# -- 4. invalid UTF-8 on the command line ---------------------------------------------------


def test_invalid_utf8_needle_is_a_usage_error(db: Path, tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_bytes(SIGNER.private_pem())
    key.chmod(0o600)
    before = _threads(db)
    cmd = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
    # As a shell passes $'\xff': raw bytes, decoded by Python with surrogateescape.
    runs = [
        [*cmd, "locate", str(db), b"\xff"],
        [*cmd, "erase", str(db), "--key", str(key), "--subject", "alice", "--thread",
         "alice-1", "--needle", b"x\xff"],
        [*cmd, "erase", str(db), "--key", str(key), "--subject", b"al\xffice", "--thread",
         "alice-1"],
        [*cmd, "erase", str(db), "--key", str(key), "--thread", b"alice-\xff"],
        [*cmd, "digest", str(db), "--subject", "alice", "--thread", b"\xff"],
        [*cmd, "authorize", "--request-id", "R", "--not-after", "2099-01-01T00:00:00Z",
         "--key", str(key), "--subject", b"\xff", "--thread", "a", "--out",
         str(tmp_path / "auth.json")],
    ]  # fmt: skip
    for args in runs:
        res = subprocess.run(args, capture_output=True, timeout=60)
        err = res.stderr.decode("utf-8", "replace")
        assert res.returncode == 2, (args, err)
        assert "not valid UTF-8" in err and len(err.strip().splitlines()) == 1, err
    assert _threads(db) == before
    assert not (tmp_path / "auth.json").exists()
    # In-process (CliRunner) with a lone surrogate, --json: one failure document.
    res = CliRunner().invoke(app, ["locate", str(db), "\udcff", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["ok"] is False
