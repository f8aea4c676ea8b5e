"""A local RFC 3161 time-stamping authority for tests: a CA and TSA certificates made with
``cryptography``'s x509 builder (extendedKeyUsage critical timeStamping), and OpenSSL's
``openssl ts -reply`` behind a tiny ``http.server`` on 127.0.0.1 (a thread in the test
process). Nothing leaves the machine."""

from __future__ import annotations

import datetime
import http.server
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from erasure_receipts.timestamp import TsaTrust

OPENSSL = shutil.which("openssl")
UTC = datetime.UTC


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip


class Pki:
    """A root CA and the TSA certificates it issues, written as PEM files in ``d``."""

    def __init__(self, d: Path, name: str) -> None:
        self.d, self.name = d, name
        d.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(f"{name} root"))
            .issuer_name(_name(f"{name} root"))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=3650))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.root_pem = d / "root.pem"
        self.root_pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def tsa(self, label: str, *, not_after: datetime.datetime | None = None) -> tuple[Path, Path]:
        """A TSA certificate and key (``label.pem``, ``label.key``) issued by this CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(UTC)
        end = not_after or now + datetime.timedelta(days=365)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(f"{self.name} {label}"))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(min(now, end) - datetime.timedelta(days=30))
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                critical=True,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )
        pem, keyfile = self.d / f"{label}.pem", self.d / f"{label}.key"
        pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        keyfile.write_bytes(_pem_key(key))
        keyfile.chmod(0o600)
        return pem, keyfile


CONFIG = """\
[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
dir = {d}
serial = {d}/serial
crypto_device = builtin
signer_digest = sha256
default_policy = 1.3.6.1.4.1.57264.2.1
other_policies = 1.3.6.1.4.1.57264.2.2
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


def reply(query: bytes, cert: Path, key: Path) -> bytes:
    """``openssl ts -reply`` to one DER time-stamp query."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "serial").write_text("01\n")
        (d / "tsa.cnf").write_text(CONFIG.format(d=d))
        (d / "q.tsq").write_bytes(query)
        subprocess.run(
            [OPENSSL or "openssl", "ts", "-reply", "-config", str(d / "tsa.cnf"), "-queryfile",
             str(d / "q.tsq"), "-signer", str(cert), "-inkey", str(key), "-out", str(d / "r.tsr")],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        return (d / "r.tsr").read_bytes()


@contextmanager
def serve_tsa(cert: Path, key: Path, *, answer: bytes | None = None
              ) -> Iterator[str]:  # fmt: skip
    """A TSA on ``http://127.0.0.1:<port>/`` for the block (``answer``: reply with these
    bytes instead, e.g. garbage)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            data = answer if answer is not None else reply(body, cert, key)
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class Tsas:
    """A test PKI with a good TSA, an expired one and one under another root."""

    def __init__(self, d: Path) -> None:
        self.pki = Pki(d / "good", "good")
        self.cert, self.key = self.pki.tsa("tsa")
        past = datetime.datetime.now(UTC) - datetime.timedelta(days=1)
        self.expired, self.expired_key = self.pki.tsa("expired", not_after=past)
        self.other = Pki(d / "other", "other")
        self.other_cert, self.other_key = self.other.tsa("tsa")
        self.trust = TsaTrust(self.cert.read_bytes(), self.pki.root_pem.read_bytes())
