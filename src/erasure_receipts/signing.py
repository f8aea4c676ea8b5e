"""Ed25519 keys, key ids and the DSSE pre-authentication encoding.

The key id is the lowercase hex SHA-256 of the raw 32-byte public key: stable across
PEM/DER re-encodings and computable by any auditor from the key alone.

The verify path only needs raw-key verification, so this module imports the Ed25519
primitive alone; ``cryptography``'s serialization package (which pulls in RSA, EC,
ciphers and SSH support) is imported only when a PEM must be written or a private key
loaded. An Ed25519 public-key PEM is parsed directly: its DER is a fixed 12-byte
SubjectPublicKeyInfo header followed by the 32-byte key.
"""

from __future__ import annotations

import binascii

try:  # the builtin module: hashlib would also load OpenSSL's libcrypto wrapper at import
    # (note, witness and timestamp use this sha256 too)
    from _sha256 import sha256 as sha256  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - other Pythons
    from hashlib import sha256 as sha256
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .errors import KeyFormatError

__all__ = [
    "PublicKey",
    "Signer",
    "key_id",
    "pae",
]

_SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: the exact bytes that get signed."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_id(raw_public_key: bytes) -> str:
    """The key id of a raw 32-byte public key: lowercase hex SHA-256 of those bytes."""
    digest: str = sha256(raw_public_key).hexdigest()
    return digest


def b64decode(text: str | bytes) -> bytes:
    """Strict, canonical standard base64: raises ``ValueError`` unless re-encoding the
    decoded bytes gives back exactly ``text`` (no whitespace, no missing or extra
    padding, no padding after a full group, unused trailing bits zero). Every byte
    string then has exactly one accepted spelling."""
    if isinstance(text, str):
        if not text.isascii():
            raise ValueError("not valid base64")
        encoded = text.encode("ascii")
    elif isinstance(text, bytes | bytearray):
        encoded = bytes(text)
    else:
        raise ValueError(f"not valid base64 (a {type(text).__name__}, not text)")
    try:
        data = binascii.a2b_base64(encoded, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ValueError("not valid base64") from None
    if binascii.b2a_base64(data, newline=False) != encoded:
        raise ValueError("not canonical base64 (padding or trailing bits)")
    return data


def b64encode(data: bytes) -> str:
    """Standard padded base64, no newline: the one spelling :func:`b64decode` accepts."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _serialization() -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization


def _pem_bytes(data: bytes | str, what: str) -> bytes:
    """PEM text as bytes: ``str`` (PEM is ASCII text) or bytes-like; TypeError otherwise."""
    if isinstance(data, str):
        try:
            return data.encode("ascii")
        except UnicodeEncodeError:
            raise KeyFormatError(f"{what} PEM text is not ASCII") from None
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"a {what} PEM must be bytes or str, not {type(data).__name__}")


def _pem_ed25519_raw(data: bytes) -> bytes | None:
    """The raw key of an Ed25519 SubjectPublicKeyInfo PEM, or None if it is not one."""
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    head, tail = "-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----"
    if not (text.startswith(head) and text.endswith(tail)):
        return None
    body = "".join(text[len(head) : -len(tail)].split())
    try:
        der = b64decode(body)
    except ValueError:
        return None
    if len(der) == 44 and der.startswith(_SPKI_ED25519):
        return der[12:]
    return None


class PublicKey:
    """An Ed25519 verification key with its key id."""

    __slots__ = ("_key", "key_id", "raw")

    def __init__(self, key: Ed25519PublicKey | None, raw: bytes | None = None) -> None:
        self._key = key
        if raw is None:
            if key is None:
                raise KeyFormatError("a public key needs a key object or raw bytes")
            s = _serialization()
            raw = key.public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)
        self.raw: bytes = raw
        self.key_id: str = key_id(raw)

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicKey:
        """A key from its raw 32 bytes; whether they are a valid Ed25519 key is only
        checked when :attr:`key` is first used (``verify`` then returns False)."""
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise TypeError(f"a raw public key is bytes, not {type(raw).__name__}")
        if len(raw) != 32:
            raise KeyFormatError(f"an Ed25519 public key is 32 bytes, got {len(raw)}")
        # The cryptography key object is built on first use: a key embedded in a
        # receipt is usually never used (the auditor's trusted key is).
        return cls(None, bytes(raw))

    @classmethod
    def from_base64(cls, text: str) -> PublicKey:
        """A key from strict, canonical base64 of its raw bytes (the trust file's
        ``ed25519``); ``KeyFormatError`` otherwise."""
        if not isinstance(text, str | bytes):
            raise TypeError(f"a base64 public key is str, not {type(text).__name__}")
        try:
            raw = b64decode(text)
        except ValueError:
            raise KeyFormatError("public key is not valid base64") from None
        return cls.from_raw(raw)

    @classmethod
    def from_pem(cls, data: bytes | str) -> PublicKey:
        """An Ed25519 public key from SubjectPublicKeyInfo PEM (bytes or text)."""
        data = _pem_bytes(data, "public key")
        raw = _pem_ed25519_raw(data)
        if raw is not None:
            pk = cls.from_raw(raw)
            _ = pk.key  # reject encodings that are not points on the curve now
            return pk
        # Not the canonical Ed25519 form: let cryptography explain what it is.
        try:
            key = _serialization().load_pem_public_key(data)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise KeyFormatError("not a PEM public key of a supported type") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFormatError(f"not an Ed25519 key ({type(key).__name__})")
        return cls(key)

    @property
    def key(self) -> Ed25519PublicKey:
        """The ``cryptography`` key object, built on first use; ``KeyFormatError`` if
        the raw bytes are rejected as an Ed25519 key."""
        if self._key is None:
            try:
                self._key = Ed25519PublicKey.from_public_bytes(self.raw)
            except ValueError:
                raise KeyFormatError("not a valid Ed25519 public key") from None
        return self._key

    def pem(self) -> bytes:
        """SubjectPublicKeyInfo PEM (what :meth:`from_pem` and ``--key`` read)."""
        s = _serialization()
        data: bytes = self.key.public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo)
        return data

    def b64(self) -> str:
        """Base64 of the raw key (``ed25519`` in trust files and receipts)."""
        return b64encode(self.raw)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``.

        Never raises for a bad signature or a key that is not a valid Ed25519 key.
        """
        try:
            self.key.verify(signature, message)
        except (InvalidSignature, KeyFormatError):
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"PublicKey(key_id={self.key_id[:16]}...)"


class Signer:
    """An Ed25519 signing key. Keep the private PEM out of logs and repositories."""

    __slots__ = ("_key", "public_key")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_key = PublicKey(key.public_key())

    @classmethod
    def generate(cls) -> Signer:
        """A new random key (save it with :meth:`private_pem`, or it is lost on exit)."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, data: bytes | str, password: bytes | str | None = None) -> Signer:
        """An Ed25519 private key from PKCS#8 PEM (bytes or text), optionally encrypted."""
        data = _pem_bytes(data, "private key")
        if isinstance(password, str):
            password = password.encode("utf-8")
        try:
            key = _serialization().load_pem_private_key(data, password=password)
        except TypeError as exc:  # password missing or given for an unencrypted key
            raise KeyFormatError(f"cannot load private key: {exc}") from None
        except (ValueError, UnsupportedAlgorithm):
            raise KeyFormatError("not a PEM private key, or wrong password") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFormatError(f"not an Ed25519 key ({type(key).__name__})")
        return cls(key)

    @classmethod
    def from_seed(cls, seed: bytes) -> Signer:
        """Deterministic key from a 32-byte seed (tests, HSM-derived material)."""
        if len(seed) != 32:
            raise KeyFormatError("an Ed25519 seed is 32 bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @property
    def key_id(self) -> str:
        """The public key's id (what receipts name in ``keyid``)."""
        return self.public_key.key_id

    def private_pem(self, password: bytes | None = None) -> bytes:
        """PKCS#8 PEM of the private key, encrypted if ``password`` is non-empty. Secret."""
        s = _serialization()
        enc = s.BestAvailableEncryption(password) if password else s.NoEncryption()
        data: bytes = self._key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, enc)
        return data

    def public_pem(self) -> bytes:
        """SubjectPublicKeyInfo PEM of the public key: what auditors pass as ``--key``."""
        return self.public_key.pem()

    def sign(self, message: bytes) -> bytes:
        """Raw Ed25519 signature of ``message``; deterministic (same key and message, same
        bytes), which is what makes receipt recovery idempotent."""
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"Signer(key_id={self.key_id[:16]}...)"
