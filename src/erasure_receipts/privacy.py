"""Keyed commitments: receipts that are not themselves personal data.

A receipt that spells out ``thread_id: "alice-chat"`` is personal data. In privacy mode
every identifier is replaced by ``hmac-sha256:<hex>`` = HMAC-SHA256(K, label 0x00
value), with ``K`` a secret commitment key the operator keeps (RECEIPT_SPEC.md 9.5). The
receipt still verifies with the public signing key alone; whoever holds ``K`` can show
which id was erased (``receipt open``). A plain hash would not do: ids are low-entropy,
and anyone can hash the candidates.

Verify-side module: standard library only (sealing imports ``cryptography`` when used).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import hmac
import os
import secrets
import stat
from typing import Any

from .errors import ConfigurationError, KeyFormatError

__all__ = ["LABELS", "PREFIX", "CommitmentKey", "commit", "needle_commitment", "open_claims"]

PREFIX = "hmac-sha256:"
LABELS = frozenset(("subject", "thread", "store_namespace", "database", "requester", "needle"))
KEY_BYTES = 32
SEAL_ALG = "aes-256-gcm"
_SEAL_INFO = b"erasure-receipts journal seal v1"


def commit(key: bytes, label: str, value: str) -> str:
    """The commitment ``hmac-sha256:<hex>`` to ``value`` under ``label``."""
    if label not in LABELS:
        raise ConfigurationError(f"unknown commitment label {label!r}")
    mac = hmac.new(key, label.encode() + b"\x00" + value.encode("utf-8", "surrogatepass"),
                   hashlib.sha256)  # fmt: skip
    return PREFIX + mac.hexdigest()


def needle_commitment(key: bytes, needle: str) -> str:
    """A needle's commitment value (hex only, as listed in ``needles.values``)."""
    return commit(key, "needle", needle)[len(PREFIX) :]


class CommitmentKey:
    """The operator's secret commitment key (32 random bytes, stored as hex text)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if type(key) is not bytes or len(key) != KEY_BYTES:
            raise KeyFormatError(f"a commitment key is {KEY_BYTES} bytes")
        self._key = key

    def __repr__(self) -> str:
        return f"CommitmentKey(key_id={self.key_id[:16]}...)"

    @classmethod
    def generate(cls) -> CommitmentKey:
        """A new random key."""
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, allow_insecure: bool = False
    ) -> CommitmentKey:
        """Load a key file (64 hex characters); refused if group/world-readable."""
        # O_NONBLOCK and a regular-file check: a FIFO given as the key must not hang.
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
            data = fh.read(1024)
        if mode & (stat.S_IRWXG | stat.S_IRWXO) and not allow_insecure:
            raise KeyFormatError(f"{os.fspath(path)} is readable by others: chmod 600 it")
        try:
            return cls(bytes.fromhex(data.decode("ascii").strip()))
        except (UnicodeDecodeError, ValueError):
            raise KeyFormatError("a commitment key file holds 64 hex characters") from None

    def to_file(self, path: str | os.PathLike[str]) -> None:
        """Write the key (hex, mode 0600); never overwrites."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self._key.hex() + "\n")

    @property
    def key_id(self) -> str:
        """SHA-256 of the key: names it in receipts without revealing it."""
        return hashlib.sha256(self._key).hexdigest()

    def commit(self, label: str, value: str) -> str:
        """:func:`commit` with this key."""
        return commit(self._key, label, value)

    def needle(self, needle: str) -> str:
        """:func:`needle_commitment` with this key."""
        return needle_commitment(self._key, needle)

    def seal(self, data: bytes, aad: bytes) -> dict[str, str]:
        """``data`` encrypted (AES-256-GCM, bound to ``aad``) under a key derived from
        this one: what the erasure journal keeps instead of raw ids in privacy mode."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self._seal_key()).encrypt(nonce, data, aad)
        return {"alg": SEAL_ALG, "key_id": self.key_id,
                "nonce": base64.b64encode(nonce).decode("ascii"),
                "ciphertext": base64.b64encode(sealed).decode("ascii")}  # fmt: skip

    def unseal(self, sealed: dict[str, Any], aad: bytes) -> bytes:
        """The data :meth:`seal` sealed (``KeyFormatError`` for another key, a tampered
        or truncated seal, or another ``aad``)."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if sealed.get("alg") != SEAL_ALG or sealed.get("key_id") != self.key_id:
            raise KeyFormatError("sealed with another commitment key or algorithm")
        try:
            nonce = base64.b64decode(str(sealed["nonce"]), validate=True)
            data = base64.b64decode(str(sealed["ciphertext"]), validate=True)
            return AESGCM(self._seal_key()).decrypt(nonce, data, aad)
        except (KeyError, ValueError, InvalidTag):
            raise KeyFormatError("the sealed data does not open with this key") from None

    def _seal_key(self) -> bytes:
        # A key of its own (HMAC-based derivation), never the commitment key itself.
        return hmac.new(self._key, _SEAL_INFO, hashlib.sha256).digest()


def open_claims(
    predicate: dict[str, Any], key: CommitmentKey | None, claims: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Open a receipt's privacy commitments (``receipt open``): for each ``(what, id)``
    claim, the value the receipt's ``predicate`` would carry for it and whether it does.

    ``what`` is ``thread``, ``subject``, ``store-ns`` (slash-separated, ``users/alice``),
    ``database`` or ``needle``. With ``key`` (a privacy-mode receipt's commitment key:
    check its ``key_id`` against ``predicate["scope"]["privacy"]`` first) the value is
    the HMAC commitment; without, the id itself (a needle: its salted commitment). Take
    ``predicate`` from a *verified* statement: only what the signature binds proves
    anything. Returns ``{"what", "value", "committed_as", "found"}`` per claim, in order;
    ``ValueError`` for a store namespace with an empty part."""
    scope = predicate["scope"]

    def commit(label: str, value: str) -> str:
        return value if key is None else str(key.commit(label, value))

    needles = predicate.get("needles") or {}
    threads = scope["threads"] if "threads" in scope else [scope["thread_id"]]
    out = []
    for what, value in claims:
        if what == "thread":
            c = commit("thread", value)
            found = c in threads
        elif what == "subject":
            c = commit("subject", value)
            found = c == scope.get("subject")
        elif what == "store-ns":
            parts = tuple(value.split("/"))
            if not all(parts):
                raise ConfigurationError(
                    f"bad store namespace {value!r}: use slash-separated non-empty parts"
                )
            c = commit("store_namespace", ".".join(parts))
            found = ([c] if key is not None else list(parts)) in scope["store_namespaces"]
        elif what == "database":
            c = commit("database", value)
            found = c == predicate["backend"]["database"]
        else:  # needle
            salt = needles.get("salt")
            if key is not None:
                c = key.needle(value)
            elif salt is not None:
                c = needle_commitment(base64.b64decode(salt), value)
            else:
                c = ""
            found = bool(c) and c in needles.get("values", [])
        out.append({"what": what, "value": value, "committed_as": c, "found": found})
    return out
