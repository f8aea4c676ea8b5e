"""Trusted time for receipt logs: RFC 3161 time-stamp tokens over checkpoints.

A receipt's ``issued_at`` is its issuer's clock. A time-stamping authority (TSA) that
signs a log checkpoint at time T proves that every receipt the checkpoint covers
existed no later than T, whatever the issuer's clock said.

* :class:`TsaClient` - ask a TSA for a token over a checkpoint (RFC 3161 over HTTP:
  ``POST`` of an ``application/timestamp-query``). The message imprint is SHA-256 of the
  checkpoint's note text (its lines, without signatures); the request carries a nonce
  and asks for the TSA's certificate; the answer is checked (granted, this imprint,
  this nonce) before it is returned.
* :class:`TsaTrust` - the TSA certificate an auditor trusts and the root it chains to;
  :meth:`TsaTrust.verify` checks a token over a checkpoint's text and returns a
  :class:`VerifiedTimestamp` (the token's genTime, accuracy, TSA), or raises
  :class:`~erasure_receipts.errors.TimestampError`.
* :func:`check_issued_at` - a receipt whose ``issued_at`` is after the time-stamp of a
  checkpoint that covers it (beyond the token's accuracy and one second of genTime
  resolution) states a time that cannot be true.

Parsing and CMS signature checks are ``rfc3161-client``'s (no hand-written ASN.1); it
is imported only when a token is requested or verified.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from .errors import ConfigurationError, TimestampError
from .signing import sha256

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from rfc3161_client import TimeStampResponse

__all__ = [
    "MAX_TOKEN",
    "RESOLUTION",
    "TsaClient",
    "TsaTrust",
    "VerifiedTimestamp",
    "check_issued_at",
    "imprint",
    "token_time",
]

MAX_TOKEN = 64 * 1024
"""The largest time-stamp response read or stored (a token with a certificate chain is
a few kilobytes)."""
RESOLUTION = datetime.timedelta(seconds=1)
"""Allowed on top of a token's accuracy when comparing ``issued_at`` with genTime: a TSA
may truncate genTime to whole seconds (OpenSSL does by default)."""
_SHA256_OID = "2.16.840.1.101.3.4.2.1"


def imprint(text: bytes) -> bytes:
    """The message imprint of a checkpoint: SHA-256 of its note text."""
    digest: bytes = sha256(text).digest()
    return digest


def _utc(t: datetime.datetime) -> str:
    return (
        t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        + (f".{t.microsecond:06d}".rstrip("0") if t.microsecond else "")
        + "Z"
    )


def _parse(token: bytes) -> TimeStampResponse:
    """A granted time-stamp response; ``malformed_timestamp`` otherwise."""
    from rfc3161_client import decode_timestamp_response

    if not isinstance(token, bytes) or not token or len(token) > MAX_TOKEN:
        raise TimestampError(
            f"a time-stamp response is 1-{MAX_TOKEN} bytes", reason="malformed_timestamp"
        )
    try:
        resp = decode_timestamp_response(token)
        status = resp.status
    except ValueError as exc:
        msg = str(exc).split("\n", 1)[0][:120]
        raise TimestampError(
            f"not an RFC 3161 time-stamp response ({msg})", reason="malformed_timestamp"
        ) from None
    if status != 0:
        try:
            text = ": " + "; ".join(resp.status_string)[:200] if resp.status_string else ""
        except ValueError:
            text = ""
        raise TimestampError(
            f"the TSA did not grant the time-stamp (PKIStatus {status}{text})",
            reason="tsa_refused",
        )
    try:
        resp.tst_info.gen_time  # noqa: B018 - the token's content parses
    except ValueError:
        raise TimestampError(
            "the time-stamp token has no readable TSTInfo", reason="malformed_timestamp"
        ) from None
    return resp


def token_time(token: bytes) -> str:
    """The genTime a time-stamp response states, as an RFC 3339 UTC time (read, not
    verified: see :meth:`TsaTrust.verify`)."""
    return _utc(_parse(token).tst_info.gen_time)


def _check_imprint(resp: TimeStampResponse, text: bytes) -> None:
    mi = resp.tst_info.message_imprint
    if mi.hash_algorithm.dotted_string != _SHA256_OID or mi.message != imprint(text):
        raise TimestampError(
            "the time-stamp is over another message, not this checkpoint's text "
            f"(imprint {mi.message.hex()[:16]}..., expected {imprint(text).hex()[:16]}...)",
            reason="timestamp_mismatch",
        )


class TsaClient:
    """A time-stamping authority at ``url`` (``http://`` or ``https://``), asked with a
    ``timeout`` in seconds."""

    __slots__ = ("timeout", "url")

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        if type(url) is not str or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"a TSA URL is http:// or https://, not {str(url)[:60]!r}")
        if not 0 < timeout <= 600:
            raise ConfigurationError("a TSA timeout is 0 < t <= 600 seconds")
        self.url, self.timeout = url, timeout

    def __repr__(self) -> str:
        return f"TsaClient({self.url!r})"

    def stamp(self, text: bytes) -> bytes:
        """The TSA's time-stamp response (DER) over ``text`` (a checkpoint's note text),
        checked to be granted, over SHA-256 of ``text``, and for this request's nonce.
        ``TimestampError``: ``tsa_unreachable`` (no answer: connection, timeout, HTTP
        error status), ``tsa_refused``, ``malformed_timestamp``, ``timestamp_mismatch``."""
        import http.client
        import urllib.parse

        from rfc3161_client import HashAlgorithm, TimestampRequestBuilder

        req = (
            TimestampRequestBuilder()
            .data(text)
            .hash_algorithm(HashAlgorithm.SHA256)
            .nonce(nonce=True)
            .cert_request(cert_request=True)
            .build()
        )
        u = urllib.parse.urlsplit(self.url)
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        try:
            conn = cls(u.hostname or "", u.port, timeout=self.timeout)
            try:
                conn.request("POST", (u.path or "/") + (f"?{u.query}" if u.query else ""),
                             req.as_bytes(),
                             {"Content-Type": "application/timestamp-query"})  # fmt: skip
                answer = conn.getresponse()
                status, body = answer.status, answer.read(MAX_TOKEN + 1)
            finally:
                conn.close()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise TimestampError(f"TSA {self.url}: {why}", reason="tsa_unreachable") from None
        if status != 200:
            raise TimestampError(f"TSA {self.url}: HTTP {status}", reason="tsa_unreachable")
        resp = _parse(body)
        _check_imprint(resp, text)
        if resp.tst_info.nonce != req.nonce:
            raise TimestampError(
                f"TSA {self.url}: the answer is not for this request (another nonce)",
                reason="timestamp_mismatch",
            )
        return body


class VerifiedTimestamp:
    """What :meth:`TsaTrust.verify` established: the token's ``gen_time`` (aware, UTC),
    its ``accuracy`` (zero when the token states none), the TSA's subject name and the
    token's serial number."""

    __slots__ = ("accuracy", "gen_time", "serial", "tsa")

    def __init__(
        self, gen_time: datetime.datetime, accuracy: datetime.timedelta, tsa: str, serial: int
    ) -> None:
        self.gen_time, self.accuracy, self.tsa, self.serial = gen_time, accuracy, tsa, serial

    @property
    def issued_no_later_than(self) -> str:
        """genTime as an RFC 3339 UTC time (the receipts' form)."""
        return _utc(self.gen_time)

    def __repr__(self) -> str:
        return f"VerifiedTimestamp({self.issued_no_later_than}, tsa={self.tsa!r})"


def _load_certs(pem: bytes, what: str) -> list[Certificate]:
    from cryptography import x509

    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ConfigurationError(f"{what} is not PEM X.509 certificates") from None
    return certs


class TsaTrust:
    """The TSA an auditor trusts: ``tsa_pem``, its certificate (optionally followed by
    intermediate certificates), and ``root_pem``, the root it chains to. Without a root,
    the last certificate of ``tsa_pem`` must be self-signed and is the root."""

    __slots__ = ("cert", "intermediates", "roots")

    def __init__(self, tsa_pem: bytes, root_pem: bytes | None = None) -> None:
        certs = _load_certs(tsa_pem, "the TSA certificate file")
        self.cert = certs[0]
        self.intermediates = certs[1:]
        self.roots = _load_certs(root_pem, "the TSA root file") if root_pem is not None else []
        if not self.roots:
            last = certs[-1]
            if last.issuer != last.subject:
                raise ConfigurationError(
                    "the TSA certificate is not self-signed: give the root it chains to "
                    "(--tsa-root)"
                )
            self.roots, self.intermediates = [last], certs[1:-1]

    @property
    def name(self) -> str:
        """The TSA certificate's subject (RFC 4514)."""
        return self.cert.subject.rfc4514_string()

    def verify(self, token: bytes, text: bytes) -> VerifiedTimestamp:
        """Verify a time-stamp response over a checkpoint's note ``text``. In order:
        ``malformed_timestamp`` (not a granted RFC 3161 response), ``timestamp_mismatch``
        (its imprint is not SHA-256 of ``text``), ``untrusted_tsa`` (not signed with the
        configured TSA certificate, or its signature or chain does not verify),
        ``tsa_cert_not_valid`` (genTime outside the TSA certificate's validity)."""
        from rfc3161_client import VerificationError, VerifierBuilder

        resp = _parse(token)
        _check_imprint(resp, text)
        tst = resp.tst_info
        infos = list(resp.signed_data.signer_infos)
        cert = self.cert
        if len(infos) != 1 or (infos[0].issuer, infos[0].serial_number) != (
            cert.issuer,
            cert.serial_number,
        ):
            who = (
                f"{infos[0].issuer.rfc4514_string()} serial {infos[0].serial_number:x}"
                if len(infos) == 1
                else f"{len(infos)} signers"
            )
            raise TimestampError(
                f"the time-stamp is signed by {who}, not by the trusted TSA {self.name}",
                reason="untrusted_tsa",
            )
        gen = tst.gen_time
        if gen.tzinfo is None:  # pragma: no cover - rfc3161-client gives aware times
            gen = gen.replace(tzinfo=datetime.UTC)
        if not cert.not_valid_before_utc <= gen <= cert.not_valid_after_utc:
            raise TimestampError(
                f"the time-stamp's time {_utc(gen)} is outside the TSA certificate's "
                f"validity ({_utc(cert.not_valid_before_utc)} to "
                f"{_utc(cert.not_valid_after_utc)})",
                reason="tsa_cert_not_valid",
            )
        verifier = VerifierBuilder(
            tsa_certificate=cert, intermediates=list(self.intermediates), roots=list(self.roots)
        ).build()
        try:
            verifier.verify(resp, imprint(text))
        except (VerificationError, ValueError) as exc:
            msg = str(exc).split("ErrorStack", 1)[0].strip()[:160]
            detail = " (" + str(exc).rsplit('data: "', 1)[-1].split('"')[0][:80] + ")"
            raise TimestampError(
                f"the time-stamp does not verify with the trusted TSA {self.name}: {msg}"
                + (detail if 'data: "' in str(exc) else ""),
                reason="untrusted_tsa",
            ) from None
        acc = tst.accuracy
        accuracy = datetime.timedelta(
            seconds=acc.seconds or 0, milliseconds=acc.millis or 0, microseconds=acc.micros or 0
        ) if acc is not None else datetime.timedelta(0)  # fmt: skip
        return VerifiedTimestamp(gen, accuracy, self.name, tst.serial_number)


def check_issued_at(issued_at: str, ts: VerifiedTimestamp, size: int | None = None) -> None:
    """``TimestampError`` "issued_after_timestamp" if the receipt's self-asserted
    ``issued_at`` is later than genTime + accuracy + :data:`RESOLUTION` of a
    time-stamped checkpoint that covers the receipt (of tree ``size``)."""
    t = datetime.datetime.fromisoformat(issued_at.replace("Z", "+00:00"))
    if t > ts.gen_time + ts.accuracy + RESOLUTION:
        at = f" (size {size})" if size is not None else ""
        raise TimestampError(
            f"issued_at {issued_at} is after the time-stamp {ts.issued_no_later_than} of the "
            f"checkpoint{at} that contains the receipt: its self-asserted time cannot be true",
            reason="issued_after_timestamp",
        )
