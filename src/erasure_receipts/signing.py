"""Ed25519 keys, key ids and the DSSE pre-authentication encoding.

The key id is the lowercase hex SHA-256 of the raw 32-byte public key: stable across
PEM/DER re-encodings and computable by any auditor from the key alone.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
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


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: the exact bytes that get signed."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_id(raw_public_key: bytes) -> str:
    return hashlib.sha256(raw_public_key).hexdigest()


class PublicKey:
    """An Ed25519 verification key with its key id."""

    __slots__ = ("_key", "key_id", "raw")

    def __init__(self, key: Ed25519PublicKey) -> None:
        self._key = key
        self.raw: bytes = key.public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.key_id: str = key_id(self.raw)

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicKey:
        if len(raw) != 32:
            raise KeyFormatError(f"an Ed25519 public key is 32 bytes, got {len(raw)}")
        return cls(Ed25519PublicKey.from_public_bytes(raw))

    @classmethod
    def from_base64(cls, text: str) -> PublicKey:
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise KeyFormatError("public key is not valid base64") from None
        return cls.from_raw(raw)

    @classmethod
    def from_pem(cls, data: bytes) -> PublicKey:
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, TypeError):
            raise KeyFormatError("not a PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFormatError(f"not an Ed25519 key ({type(key).__name__})")
        return cls(key)

    def pem(self) -> bytes:
        return self._key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def b64(self) -> str:
        return base64.b64encode(self.raw).decode("ascii")

    def verify(self, signature: bytes, message: bytes) -> bool:
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
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
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, data: bytes, password: bytes | None = None) -> Signer:
        try:
            key = serialization.load_pem_private_key(data, password=password)
        except TypeError as exc:  # password missing or given for an unencrypted key
            raise KeyFormatError(f"cannot load private key: {exc}") from None
        except ValueError:
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
        return self.public_key.key_id

    def private_pem(self, password: bytes | None = None) -> bytes:
        enc: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc
        )

    def public_pem(self) -> bytes:
        return self.public_key.pem()

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"Signer(key_id={self.key_id[:16]}...)"
