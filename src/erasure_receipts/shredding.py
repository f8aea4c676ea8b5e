"""Crypto-shredding: per-subject encryption of everything the attesting savers store, so
that destroying one key erases a data subject from every copy of the database, backups
included.

``KeyStore`` holds one AES-256 data key per data subject (or per thread without one),
wrapped by a ``KeyWrapper`` (``LocalKeyWrapper``: a key-encryption key in a file or an
environment variable; an external KMS implements the same three members).
``Encryption(keys, subject_of=...)`` passed to a saver as ``encryption=`` encrypts every
checkpoint and pending write with AES-256-GCM, the row's identity as associated data;
``saver.shred_subject(subject)`` destroys the key and signs a ``shred`` receipt.
"""

from __future__ import annotations

from ._backends.keys import DestroyedKey, KeyStore, KeyWrapper, LocalKeyWrapper
from ._backends.sealing import SEALED_TYPE, Encryption, default_subject_of

__all__ = [
    "SEALED_TYPE",
    "DestroyedKey",
    "Encryption",
    "KeyStore",
    "KeyWrapper",
    "LocalKeyWrapper",
    "default_subject_of",
]
