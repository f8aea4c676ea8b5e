"""Trusted time in process: RFC 3161 tokens from a local OpenSSL TSA (``openssl ts
-reply`` behind ``http.server`` on 127.0.0.1) over a log's checkpoints. A token verifies
against its TSA certificate; a token over another checkpoint, from an unrelated TSA, or
signed after the TSA certificate expired fails with its own reason; malformed tokens and
an unreachable TSA are refused; the earliest time-stamped checkpoint covering a receipt
bounds it; a receipt whose ``issued_at`` is after that bound is flagged; bundles carry
the token in ``extra``."""

from __future__ import annotations

import datetime
import os
import socket
import uuid
from pathlib import Path

import pytest

from erasure_receipts.bundle import ProofBundle, build_bundle, verify_bundle
from erasure_receipts.errors import ConfigurationError, TimestampError
from erasure_receipts.log import Checkpoint, LogCheck, ReceiptLog, verifier_key
from erasure_receipts.policy import Policy
from erasure_receipts.receipt import Receipt
from erasure_receipts.timestamp import (
    TsaClient,
    TsaTrust,
    VerifiedTimestamp,
    check_issued_at,
    imprint,
    token_time,
)
from erasure_receipts.verify import TrustStore
from receipt_factory import TRUSTED, make_receipt, make_statement
from tsa_helpers import OPENSSL, UTC, Tsas, serve_tsa

# Under CI=true (.ci/run installs openssl) a missing command fails the tests, never skips them.
pytestmark = pytest.mark.skipif(
    OPENSSL is None and os.environ.get("CI") != "true", reason="needs the openssl command"
)

ORIGIN = "example.com/erasures"
TRUST = TrustStore([TRUSTED.public_key])
POLICY = Policy.parse(f"log {verifier_key(ORIGIN, TRUSTED.public_key)}\nquorum none\n".encode())


def rec(n: int, issued_at: str | None = None) -> Receipt:
    extra = {"issued_at": issued_at} if issued_at else {}
    return make_receipt(make_statement(receipt_id=str(uuid.UUID(int=n + 1, version=4)), **extra))


@pytest.fixture(scope="module")
def tsas(tmp_path_factory: pytest.TempPathFactory) -> Tsas:
    return Tsas(tmp_path_factory.mktemp("pki"))


def make_log(d: Path, n: int, start: int = 0) -> ReceiptLog:
    rl = ReceiptLog(d, TRUSTED, origin=ORIGIN)
    rl.append_many([rec(i) for i in range(start, start + n)])
    return rl


def test_a_token_from_a_local_openssl_tsa_verifies(tmp_path: Path, tsas: Tsas) -> None:
    rl = make_log(tmp_path / "log", 3)
    before = datetime.datetime.now(UTC).replace(microsecond=0)
    with serve_tsa(tsas.cert, tsas.key) as url:
        size, token = rl.timestamp(TsaClient(url, 10))
    assert size == 3 and (tmp_path / "log" / "timestamps" / "3.tsr").read_bytes() == token
    text = Checkpoint.parse(rl.checkpoint()).text
    ts = tsas.trust.verify(token, text)
    assert before <= ts.gen_time <= datetime.datetime.now(UTC)
    assert ts.accuracy == datetime.timedelta(seconds=1) and "good tsa" in ts.tsa
    assert token_time(token) == ts.issued_no_later_than
    assert ts.issued_no_later_than.endswith("Z") and len(ts.issued_no_later_than) == 20
    assert rl.timestamp_sizes() == [3] and rl.timestamp_token(3) == token
    check = LogCheck(str(tmp_path / "log"), TRUST, tsa=tsas.trust)
    found = check.timestamp_of(2)
    assert found is not None and found[0] == 3
    assert found[1].gen_time == ts.gen_time
    assert LogCheck(str(tmp_path / "log"), TRUST).timestamp_of(2) is None  # no TSA: no check


def test_the_earliest_stamped_checkpoint_covering_a_receipt_bounds_it(
    tmp_path: Path, tsas: Tsas
) -> None:
    rl = make_log(tmp_path / "log", 3)
    with serve_tsa(tsas.cert, tsas.key) as url:
        rl.timestamp(TsaClient(url))
        rl.append_many([rec(3), rec(4)])
        rl.timestamp(TsaClient(url))
    rl.append(rec(5))
    (tmp_path / "log" / "timestamps" / "9.tsr.tmp").write_bytes(b"x")  # a crash leftover
    assert rl.timestamp_sizes() == [3, 5]
    check = LogCheck(str(tmp_path / "log"), TRUST, tsa=tsas.trust)
    assert check.size == 6
    # size 3's text is rebuilt from the tree at 3, proven consistent with the trusted 6
    assert [check.timestamp_of(i)[0] for i in range(5)] == [3, 3, 3, 5, 5]  # type: ignore[index]
    assert check.timestamp_of(5) is None  # appended after the last time-stamp


def test_a_token_over_another_checkpoint_fails(tmp_path: Path, tsas: Tsas) -> None:
    rl = make_log(tmp_path / "log", 2)
    with serve_tsa(tsas.cert, tsas.key) as url:
        _, token = rl.timestamp(TsaClient(url))
    rl.append(rec(2))
    with pytest.raises(TimestampError) as e:
        tsas.trust.verify(token, Checkpoint.parse(rl.checkpoint()).text)
    assert e.value.reason == "timestamp_mismatch"
    # the token of size 2 stored as the one of size 3: caught by the log check too
    (tmp_path / "log" / "timestamps" / "3.tsr").write_bytes(token)
    (tmp_path / "log" / "timestamps" / "2.tsr").unlink()
    with pytest.raises(TimestampError) as e:
        LogCheck(str(tmp_path / "log"), TRUST, tsa=tsas.trust).timestamp_of(0)
    assert e.value.reason == "timestamp_mismatch"


def test_a_token_from_an_untrusted_tsa_fails(tmp_path: Path, tsas: Tsas) -> None:
    rl = make_log(tmp_path / "log", 2)
    text = Checkpoint.parse(rl.checkpoint()).text
    with serve_tsa(tsas.other_cert, tsas.other_key) as url:
        token = TsaClient(url).stamp(text)
    with pytest.raises(TimestampError) as e:
        tsas.trust.verify(token, text)
    assert e.value.reason == "untrusted_tsa" and "other" in e.value.message
    # the other TSA's certificate pinned, but chained to our root: the chain fails
    pinned = TsaTrust(tsas.other_cert.read_bytes(), tsas.pki.root_pem.read_bytes())
    with pytest.raises(TimestampError) as e:
        pinned.verify(token, text)
    assert e.value.reason == "untrusted_tsa" and "local issuer" in e.value.message
    # ... and with its own root it verifies
    TsaTrust(tsas.other_cert.read_bytes(), tsas.other.root_pem.read_bytes()).verify(token, text)


def test_a_token_after_the_tsa_certificate_expired_fails(tmp_path: Path, tsas: Tsas) -> None:
    rl = make_log(tmp_path / "log", 1)
    text = Checkpoint.parse(rl.checkpoint()).text
    with serve_tsa(tsas.expired, tsas.expired_key) as url:
        token = TsaClient(url).stamp(text)  # OpenSSL signs with an expired certificate
    trust = TsaTrust(tsas.expired.read_bytes(), tsas.pki.root_pem.read_bytes())
    with pytest.raises(TimestampError) as e:
        trust.verify(token, text)
    assert e.value.reason == "tsa_cert_not_valid" and "validity" in e.value.message


def test_malformed_tokens_and_refusals(tmp_path: Path, tsas: Tsas) -> None:
    text = b"example.com/erasures\n0\nAAAA\n"
    for bad in (b"", b"garbage", b"\x30\x03\x02\x01\x00", b"\x30" * 70_000):
        with pytest.raises(TimestampError) as e:
            tsas.trust.verify(bad, text)
        assert e.value.reason == "malformed_timestamp", bad[:10]
    rl = make_log(tmp_path / "log", 1)
    with serve_tsa(tsas.cert, tsas.key, answer=b"not a token") as url:
        with pytest.raises(TimestampError) as e:
            rl.timestamp(TsaClient(url))
        assert e.value.reason == "malformed_timestamp"
    assert rl.timestamp_sizes() == []  # nothing stored
    # a replayed token (another request's nonce and imprint) is refused
    with serve_tsa(tsas.cert, tsas.key) as url:
        old = TsaClient(url).stamp(b"another checkpoint\n")
    with serve_tsa(tsas.cert, tsas.key, answer=old) as url:
        with pytest.raises(TimestampError) as e:
            rl.timestamp(TsaClient(url))
        assert e.value.reason == "timestamp_mismatch"


def test_an_unreachable_tsa_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    rl = make_log(tmp_path / "log", 1)
    with pytest.raises(TimestampError) as e:
        rl.timestamp(TsaClient(f"http://127.0.0.1:{port}/", timeout=2))
    assert e.value.reason == "tsa_unreachable" and f"127.0.0.1:{port}" in e.value.message
    for bad in ("ftp://tsa.example", "tsa.example"):
        with pytest.raises(ConfigurationError):
            TsaClient(bad)
    with pytest.raises(ConfigurationError):
        TsaClient("http://127.0.0.1:1/", timeout=0)


def test_a_tsa_certificate_without_its_root_is_refused(tsas: Tsas) -> None:
    with pytest.raises(ConfigurationError, match="--tsa-root"):
        TsaTrust(tsas.cert.read_bytes())
    with pytest.raises(ConfigurationError, match="not PEM"):
        TsaTrust(b"not a certificate")
    # a chain file (TSA certificate, then its root) needs no separate root
    chain = tsas.cert.read_bytes() + tsas.pki.root_pem.read_bytes()
    assert TsaTrust(chain).roots[0].subject == tsas.trust.roots[0].subject


def test_issued_at_after_the_time_stamp_is_flagged() -> None:
    gen = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    ts = VerifiedTimestamp(gen, datetime.timedelta(seconds=1), "CN=tsa", 1)
    check_issued_at("2026-03-01T11:59:59.5Z", ts)
    check_issued_at("2026-03-01T12:00:02Z", ts)  # within accuracy + 1 s resolution
    with pytest.raises(TimestampError) as e:
        check_issued_at("2026-03-01T12:00:02.000001Z", ts, 7)
    assert e.value.reason == "issued_after_timestamp"
    assert "2026-03-01T12:00:00Z" in e.value.message and "(size 7)" in e.value.message


def test_a_future_dated_receipt_in_a_stamped_checkpoint_is_flagged(
    tmp_path: Path, tsas: Tsas
) -> None:
    rl = ReceiptLog(tmp_path / "log", TRUSTED, origin=ORIGIN)
    late = rec(0, issued_at="2099-01-01T00:00:00Z")
    rl.append_many([rec(1), late])
    with serve_tsa(tsas.cert, tsas.key) as url:
        rl.timestamp(TsaClient(url))
    found = LogCheck(str(tmp_path / "log"), TRUST, tsa=tsas.trust).timestamp_of(1)
    assert found is not None
    with pytest.raises(TimestampError) as e:
        check_issued_at(late.statement["predicate"]["issued_at"], found[1], found[0])
    assert e.value.reason == "issued_after_timestamp"


def test_a_bundle_carries_the_token_in_extra(tmp_path: Path, tsas: Tsas) -> None:
    rl = make_log(tmp_path / "log", 3)
    data = rec(1).to_json()
    assert ProofBundle.parse(build_bundle(rl, data)).extra is None  # not stamped yet
    with serve_tsa(tsas.cert, tsas.key) as url:
        _, token = rl.timestamp(TsaClient(url))
    blob = build_bundle(rl, data)
    b = ProofBundle.parse(blob)
    assert b.extra == token
    vb = verify_bundle(data, blob, TRUST, POLICY, tsas.trust)
    assert vb.timestamp is not None and vb.timestamp.gen_time <= datetime.datetime.now(UTC)
    assert verify_bundle(data, blob, TRUST, POLICY).timestamp is None  # no TSA: not checked
    untrusted = TsaTrust(tsas.other_cert.read_bytes(), tsas.other.root_pem.read_bytes())
    with pytest.raises(TimestampError) as e:
        verify_bundle(data, blob, TRUST, POLICY, untrusted)
    assert e.value.reason == "untrusted_tsa"
    junk = ProofBundle(b.index, b.path, b.checkpoint, b"junk").to_bytes()
    with pytest.raises(TimestampError) as e:
        verify_bundle(data, junk, TRUST, POLICY, tsas.trust)
    assert e.value.reason == "malformed_timestamp"


def test_the_imprint_is_sha256_of_the_note_text() -> None:
    import hashlib

    note = Checkpoint.sign(ORIGIN, 0, bytes(32), TRUSTED)
    cp = Checkpoint.parse(note)
    assert imprint(cp.text) == hashlib.sha256(note.split(b"\n\n")[0] + b"\n").digest()


def test_every_timestamp_reason_code_is_in_the_spec() -> None:
    spec = (Path(__file__).resolve().parents[2] / "RECEIPT_SPEC.md").read_text("utf-8")
    section = spec[spec.index("### 10.9 Trusted time") :]
    doc = TimestampError.__doc__ or ""
    codes = [c.strip("`,. ") for c in doc.split("``")[1::2]]
    assert len(codes) >= 7
    assert [c for c in codes if c not in section] == []
