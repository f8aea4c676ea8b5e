"""One exception tree for the whole library.

Every error carries a stable machine-readable ``reason`` code (used by ``receipt verify
--json`` and by dashboards) next to its one-line human message.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ErasureError",
    "ErasureIncompleteError",
    "Error",
    "InputError",
    "KeyFormatError",
    "MalformedReceiptError",
    "ReceiptSemanticsError",
    "SignatureError",
    "ThreadErasedError",
    "UntrustedKeyError",
    "VerificationError",
]


class Error(Exception):
    """Base class of every error this library raises on purpose."""

    reason: str = "error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.reason

    def diagnostics(self) -> str:
        """A short multi-line explanation suitable for a terminal."""
        return f"{type(self).__name__} [{self.reason}]: {self.message}"


class InputError(Error):
    """The input could not be read at all (missing file, permission, I/O)."""

    reason = "unreadable"


class KeyFormatError(Error):
    """A key or trust file is malformed (not a key, wrong algorithm, bad PEM)."""

    reason = "bad_key"


class VerificationError(Error):
    """A receipt failed verification. Subclasses say which kind of failure."""

    reason = "invalid"


class MalformedReceiptError(VerificationError):
    """The bytes are not a well-formed receipt (parse or schema failure)."""

    reason = "malformed"


class SignatureError(VerificationError):
    """A signature did not verify against the statement it claims to sign."""

    reason = "bad_signature"


class UntrustedKeyError(VerificationError):
    """Signatures may be valid, but none is by a key the caller trusts."""

    reason = "untrusted_key"


class ReceiptSemanticsError(VerificationError):
    """The signed statement is internally inconsistent (e.g. erased with rows left)."""

    reason = "inconsistent"


class ErasureError(Error):
    """Base class of errors raised by the erasure protocol."""

    reason = "erasure_failed"


class ErasureIncompleteError(ErasureError):
    """The erasure did not complete or could not be verified; no receipt was issued.

    ``remaining`` maps what is left (table or store namespace) to a row/item count where
    known, so operators see exactly what still holds data.
    """

    reason = "erasure_incomplete"

    def __init__(
        self,
        message: str,
        *,
        remaining: dict[str, int] | None = None,
        recovered: list[Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.remaining: dict[str, int] = dict(remaining or {})
        self.recovered: list[Any] = list(recovered or [])
        """Receipts that *were* issued by a recovery run that also hit failures."""


class ThreadErasedError(ErasureError):
    """A write targeted a thread that was erased (tombstoned); it was rejected."""

    reason = "thread_erased"

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread {thread_id!r} was erased; writes to it are rejected "
            "(call reopen_thread() to reuse the id on purpose)"
        )
        self.thread_id = thread_id
