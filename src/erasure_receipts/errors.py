"""One exception tree for the whole library.

Every error carries a stable machine-readable ``reason`` code (used by ``receipt verify
--json`` and by dashboards) next to its one-line human message. Every exception class the
library raises to callers is defined here and derives from :class:`Error`; where an error
also has a builtin base (``ValueError``, ``TypeError``, ``NotImplementedError``), that is
for callers that already catch the builtin.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "ArgumentTypeError",
    "AuthorizationError",
    "CiphertextRejectedError",
    "ConfigurationError",
    "DeferredError",
    "DeltaChannelError",
    "ErasedDataRestoredError",
    "ErasureError",
    "ErasureIncompleteError",
    "Error",
    "InclusionProofError",
    "InputError",
    "KeyFormatError",
    "KeyShreddedError",
    "LogConflictError",
    "LogCorruptError",
    "LogError",
    "MalformedReceiptError",
    "NeedlesFoundError",
    "NoDataKeyError",
    "NotALangGraphDatabaseError",
    "NothingToEraseError",
    "NothingToRedactError",
    "PlaintextRowError",
    "ReceiptSemanticsError",
    "SignatureError",
    "ThreadErasedError",
    "TimestampError",
    "UntrustedKeyError",
    "VerificationError",
    "WitnessError",
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
        """The one-line human message (without the class name and ``reason``)."""
        return str(self.args[0]) if self.args else self.reason

    def diagnostics(self) -> str:
        """A short multi-line explanation suitable for a terminal."""
        return f"{type(self).__name__} [{self.reason}]: {self.message}"


class InputError(Error):
    """The input could not be read at all (missing file, permission, I/O)."""

    reason = "unreadable"


class NotALangGraphDatabaseError(InputError):
    """The database has no LangGraph checkpoint tables: nothing in it can be attested."""

    reason = "not_langgraph_database"


class ConfigurationError(Error, ValueError):
    """The saver or call is set up in a way that cannot work (detected before deleting)."""

    reason = "configuration"


class ArgumentTypeError(Error, TypeError):
    """An argument has the wrong Python type (a ``str`` where a list is meant, ...)."""

    reason = "bad_argument"


class KeyFormatError(Error):
    """A key or trust file is malformed (not a key, wrong algorithm, bad PEM)."""

    reason = "bad_key"


class VerificationError(Error):
    """A receipt failed verification. Subclasses say which kind of failure."""

    reason = "invalid"


class MalformedReceiptError(VerificationError):
    """The bytes are not a well-formed receipt (parse or schema failure)."""

    reason = "malformed"


class InclusionProofError(VerificationError):
    """The row record is malformed, or does not prove inclusion in the receipt."""

    reason = "not_included"


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
        unparsable: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.remaining: dict[str, int] = dict(remaining or {})
        self.recovered: list[Any] = list(recovered or [])
        """Receipts that *were* issued by a recovery run that also hit failures."""
        self.unparsable: list[str] = list(unparsable or [])
        """Receipt ids of journal entries a recovery could not read (left as they are)."""


class ThreadErasedError(ErasureError):
    """A write (or, with ``refuse_erased_reads``, a read) targeted an erased thread."""

    reason = "thread_erased"

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread {thread_id!r} was erased; it is tombstoned: writes to it (and, with "
            "refuse_erased_reads, reads) are refused (reopen_thread() reuses the id on purpose)"
        )
        self.thread_id = thread_id


class ErasedDataRestoredError(ErasureError):
    """The startup guard (``check_erasures=``): an erasure the receipts attest has data in
    the database again (a backup restored from before it); replay it before serving."""

    reason = "erased_data_restored"


class NothingToEraseError(ErasureError):
    """The scope holds no rows: a typo'd thread id, a wrong namespace, or a thread that
    was already erased (``previous_receipt_id`` then names that erasure's receipt).

    Nothing was deleted and no receipt was issued; pass ``allow_empty=True`` to attest
    an empty scope on purpose.
    """

    reason = "nothing_to_erase"

    def __init__(self, thread_id: str, previous_receipt_id: str | None = None) -> None:
        if previous_receipt_id:
            msg = (
                f"thread {thread_id!r} was already erased (receipt {previous_receipt_id}); "
                "nothing left to erase"
            )
        else:
            msg = (
                f"thread {thread_id!r} has no stored rows in this scope (unknown thread id or "
                "store namespace?); nothing was erased (allow_empty=True attests an empty scope)"
            )
        super().__init__(msg)
        self.thread_id = thread_id
        self.previous_receipt_id = previous_receipt_id


class AuthorizationError(ErasureError):
    """An erasure's authorization does not cover it (another scope or request id, or
    past its ``not_after``); refused before anything is deleted."""

    reason = "not_authorized"


class NeedlesFoundError(ErasureIncompleteError):
    """A value the caller wanted gone still occurs: nothing was deleted.

    ``locations`` lists where (table, thread, checkpoint namespace and id, column or
    store key); the value itself is never in the message.
    """

    reason = "needles_found"

    def __init__(
        self, locations: list[dict[str, Any]], swept: dict[str, int] | None = None
    ) -> None:
        where = "; ".join(
            ", ".join(f"{k}={v}" for k, v in loc.items() if k != "needle") for loc in locations[:10]
        )
        more = f" (+{len(locations) - 10} more)" if len(locations) > 10 else ""
        deleted = (
            f"items already swept from the store outside the transaction (not restorable): "
            f"{swept}; everything else was rolled back"
            if swept
            else "nothing was deleted"
        )
        super().__init__(
            f"{len(locations)} stored location(s) still hold a value to erase; {deleted}: "
            f"{where}{more}"
        )
        self.locations = locations
        self.swept = dict(swept or {})


class DeltaChannelError(ErasureError, NotImplementedError):
    """LangGraph refuses ``keep_latest`` on ``DeltaChannel`` threads: the latest value is
    rebuilt from older checkpoints and their writes, so they cannot be removed.

    Also a ``NotImplementedError``: the type LangGraph's own ``prune`` raises for it."""

    reason = "delta_channel"

    def __init__(self, thread_ids: Iterable[str]) -> None:
        super().__init__(
            "keep_latest can't prune threads that use a DeltaChannel: "
            + ", ".join(sorted(thread_ids))
        )


class DeferredError(ErasureError):
    """An open deferral (a signed decision to retain, ``saver.defer``) retains a thread
    of this erasure's scope until its ``until``: nothing was deleted. ``deferrals`` holds
    ``(receipt id, until)`` of each; pass ``override_deferral=True`` to erase anyway
    (the receipt then names the deferral in ``deferral_of``), or let the retention sweep
    erase the scope once the deferral ends."""

    reason = "deferred"

    def __init__(self, label: str, deferrals: Iterable[tuple[str, str]]) -> None:
        self.deferrals = list(deferrals)
        shown = ", ".join(f"{rid} until {until}" for rid, until in self.deferrals[:5])
        super().__init__(
            f"{label} is retained by {len(self.deferrals)} open deferral(s) ({shown}); "
            "nothing was erased (override_deferral=True or `receipt erase --override-deferral` "
            "erases it anyway, naming the deferral; release_deferral or `receipt "
            "release-deferral` ends it without erasing)"
        )


class LogError(Error):
    """The log cannot be used as asked (not a log, wrong key, bad checkpoint, ...).

    ``reason`` is a stable code (RECEIPT_SPEC.md, "Receipt log")."""

    reason = "log_error"


class LogCorruptError(LogError):
    """The log's committed records do not match its signed checkpoints: nothing is
    appended to it (a new checkpoint would sign over the damage). ``receipt log verify``
    names the first bad entry."""

    reason = "log_corrupt"


class LogConflictError(LogError):
    """A different receipt with the same receipt id is already in the log."""

    reason = "log_conflict"


class WitnessError(LogError):
    """A witness, a cosignature, a witness policy or an offline proof refused a checkpoint
    (or could not be used). ``reason`` is a stable code (RECEIPT_SPEC.md, "Receipt log",
    "Witnesses"): ``unknown_log``, ``bad_log_signature``, ``bad_cosignature``,
    ``quorum_not_met``, ``not_witnessed``, ``split_view``, ``malformed_policy``,
    ``malformed_proof``, ``proof_mismatch``, ``bad_request``, ``witness_conflict``,
    ``bad_consistency_proof``, ``unknown_origin``, ``witness_corrupt``."""

    reason = "witness_error"


class TimestampError(LogError):
    """An RFC 3161 time-stamp on a log checkpoint could not be obtained, or does not
    verify against the configured TSA certificate, or contradicts a receipt's time.
    ``reason`` is a stable code (RECEIPT_SPEC.md, "Trusted time"): ``tsa_unreachable``,
    ``tsa_refused``, ``malformed_timestamp``, ``timestamp_mismatch``, ``untrusted_tsa``,
    ``tsa_cert_not_valid``, ``issued_after_timestamp``."""

    reason = "timestamp_error"


class NothingToRedactError(NothingToEraseError):
    """A redaction found none of its needles in the thread's rows (decoded through the
    saver's serde): a needle of another thread, a typo. Nothing was changed."""

    reason = "nothing_to_redact"

    def __init__(self, thread_id: str) -> None:
        super().__init__(thread_id)
        self.args = (
            f"thread {thread_id!r} holds none of the needles (every row searched, decoded "
            "through the saver's serde); nothing was changed",
        )


class CiphertextRejectedError(ErasureError):
    """An encrypted row failed authentication: its ciphertext was altered, or moved
    from the row it was written for (thread, checkpoint namespace, checkpoint, task,
    channel are its associated data), or a key-encryption key does not fit."""

    reason = "ciphertext_rejected"


class PlaintextRowError(ErasureError):
    """With encryption on, a row that is not encrypted by this library was read; it is
    refused, not silently served (``receipt encrypt`` migrates a plaintext database)."""

    reason = "plaintext_row"


class KeyShreddedError(ThreadErasedError):
    """The data key a row was encrypted under is gone from the key store (shredded):
    the row can never be decrypted again. A ``ThreadErasedError``, so callers that
    handle erased threads handle shredded ones."""

    reason = "key_shredded"

    def __init__(
        self, thread_id: str, what: str = "the data key", *, scope: str = "thread"
    ) -> None:
        rows = "items" if scope == "store namespace" else "rows"
        ErasureError.__init__(
            self,
            f"{scope} {thread_id!r} was crypto-shredded: {what} its {rows} were encrypted "
            "under is destroyed; they cannot be decrypted",
        )
        self.thread_id = thread_id
        """The thread id, or the store namespace (dotted) when ``scope`` says so."""
        self.scope = scope


class NoDataKeyError(ErasureError):
    """A shred found no data key to destroy: the subject or thread was never written with
    encryption, or was already shredded. Nothing was destroyed, no receipt issued."""

    reason = "no_data_key"
