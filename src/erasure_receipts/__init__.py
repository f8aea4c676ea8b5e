"""Provable deletion for LangGraph threads.

Quick start (SQLite, the embedded default)::

    from erasure_receipts import AttestingSqliteSaver, Signer

    signer = Signer.generate()
    with AttestingSqliteSaver.from_conn_string("app.db", signer=signer) as saver:
        graph = builder.compile(checkpointer=saver)
        ...
        receipt = saver.erase_thread("thread-42")   # measure, delete, verify, sign
        receipt.save("thread-42.receipt.json")

Auditors verify with ``receipt verify thread-42.receipt.json --key signer.pub.pem`` or
:func:`verify_receipt`. The verify side is importable without LangGraph: names are
loaded lazily so ``import erasure_receipts.verify`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ._ops.defer import Deferral, DeferralScope
    from ._ops.history import SweepEvent, SweepResult
    from ._ops.redact import MIN_NEEDLE_CHARS
    from ._ops.replay import ReplayedScope, ReplayResult
    from ._ops.subject import Location, SubjectDigest
    from ._savers.postgres import AsyncAttestingPostgresSaver, AttestingPostgresSaver
    from ._savers.sqlite import (
        AsyncAttestingSqliteSaver,
        AttestingSqliteSaver,
        PendingErasure,
        ThreadDigest,
    )
    from .digest import MerkleTree, encode_row, inclusion_proof, verify_inclusion
    from .errors import (
        ArgumentTypeError,
        AuthorizationError,
        CiphertextRejectedError,
        ConfigurationError,
        DeferredError,
        DeltaChannelError,
        ErasedDataRestoredError,
        ErasureError,
        ErasureIncompleteError,
        Error,
        InclusionProofError,
        InputError,
        KeyFormatError,
        KeyShreddedError,
        LogConflictError,
        LogCorruptError,
        LogError,
        MalformedReceiptError,
        NeedlesFoundError,
        NoDataKeyError,
        NotALangGraphDatabaseError,
        NothingToEraseError,
        NothingToRedactError,
        PlaintextRowError,
        ReceiptSemanticsError,
        SignatureError,
        ThreadErasedError,
        TimestampError,
        UntrustedKeyError,
        VerificationError,
        WitnessError,
    )
    from .log import ReceiptLog
    from .privacy import CommitmentKey
    from .receipt import Receipt
    from .request import Authorization, RequestContext, authorize
    from .shredding import Encryption, KeyStore, KeyWrapper, LocalKeyWrapper
    from .signing import PublicKey, Signer
    from .targets import ErasureTarget, FunctionTarget, SqlTarget, VectorStoreTarget
    from .trust import TrustedKey, TrustStore
    from .verify import VerifiedReceipt, verify_receipt

_LAZY = {
    "MerkleTree": "digest",
    "encode_row": "digest",
    "inclusion_proof": "digest",
    "verify_inclusion": "digest",
    "Error": "errors",
    "ArgumentTypeError": "errors",
    "InclusionProofError": "errors",
    "LogError": "errors",
    "LogCorruptError": "errors",
    "LogConflictError": "errors",
    "ConfigurationError": "errors",
    "NotALangGraphDatabaseError": "errors",
    "NothingToEraseError": "errors",
    "PendingErasure": "_engine.eraser",
    "ThreadDigest": "_engine.eraser",
    "ErasureError": "errors",
    "ErasureIncompleteError": "errors",
    "InputError": "errors",
    "KeyFormatError": "errors",
    "MalformedReceiptError": "errors",
    "ReceiptSemanticsError": "errors",
    "SignatureError": "errors",
    "ThreadErasedError": "errors",
    "TimestampError": "errors",
    "UntrustedKeyError": "errors",
    "VerificationError": "errors",
    "WitnessError": "errors",
    "Receipt": "receipt",
    "AttestingSqliteSaver": "_savers.sqlite",
    "AsyncAttestingSqliteSaver": "_savers.sqlite",
    "AttestingPostgresSaver": "_savers.postgres",
    "AsyncAttestingPostgresSaver": "_savers.postgres",
    "PublicKey": "signing",
    "Signer": "signing",
    "TrustStore": "trust",
    "TrustedKey": "trust",
    "VerifiedReceipt": "verify",
    "verify_receipt": "verify",
    "Authorization": "request",
    "AuthorizationError": "errors",
    "RequestContext": "request",
    "authorize": "request",
    "CommitmentKey": "privacy",
    "ReceiptLog": "log",
    "Location": "_ops.subject",
    "NeedlesFoundError": "errors",
    "SubjectDigest": "_ops.subject",
    "DeltaChannelError": "errors",
    "SweepEvent": "_ops.history",
    "SweepResult": "_ops.history",
    "ErasedDataRestoredError": "errors",
    "ReplayResult": "_ops.replay",
    "ReplayedScope": "_ops.replay",
    "ErasureTarget": "targets",
    "FunctionTarget": "targets",
    "SqlTarget": "targets",
    "VectorStoreTarget": "targets",
    "NothingToRedactError": "errors",
    "MIN_NEEDLE_CHARS": "_ops.redact",
    "Deferral": "_ops.defer",
    "DeferralScope": "_ops.defer",
    "DeferredError": "errors",
    "Encryption": "shredding",
    "KeyStore": "shredding",
    "KeyWrapper": "shredding",
    "LocalKeyWrapper": "shredding",
    "CiphertextRejectedError": "errors",
    "KeyShreddedError": "errors",
    "PlaintextRowError": "errors",
    "NoDataKeyError": "errors",
}

__all__ = [
    "MIN_NEEDLE_CHARS",
    "ArgumentTypeError",
    "AsyncAttestingPostgresSaver",
    "AsyncAttestingSqliteSaver",
    "AttestingPostgresSaver",
    "AttestingSqliteSaver",
    "Authorization",
    "AuthorizationError",
    "CiphertextRejectedError",
    "CommitmentKey",
    "ConfigurationError",
    "Deferral",
    "DeferralScope",
    "DeferredError",
    "DeltaChannelError",
    "Encryption",
    "ErasedDataRestoredError",
    "ErasureError",
    "ErasureIncompleteError",
    "ErasureTarget",
    "Error",
    "FunctionTarget",
    "InclusionProofError",
    "InputError",
    "KeyFormatError",
    "KeyShreddedError",
    "KeyStore",
    "KeyWrapper",
    "LocalKeyWrapper",
    "Location",
    "LogConflictError",
    "LogCorruptError",
    "LogError",
    "MalformedReceiptError",
    "MerkleTree",
    "NeedlesFoundError",
    "NoDataKeyError",
    "NotALangGraphDatabaseError",
    "NothingToEraseError",
    "NothingToRedactError",
    "PendingErasure",
    "PlaintextRowError",
    "PublicKey",
    "Receipt",
    "ReceiptLog",
    "ReceiptSemanticsError",
    "ReplayResult",
    "ReplayedScope",
    "RequestContext",
    "SignatureError",
    "Signer",
    "SqlTarget",
    "SubjectDigest",
    "SweepEvent",
    "SweepResult",
    "ThreadDigest",
    "ThreadErasedError",
    "TimestampError",
    "TrustStore",
    "TrustedKey",
    "UntrustedKeyError",
    "VectorStoreTarget",
    "VerificationError",
    "VerifiedReceipt",
    "WitnessError",
    "__version__",
    "authorize",
    "encode_row",
    "inclusion_proof",
    "verify_inclusion",
    "verify_receipt",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'erasure_receipts' has no attribute {name!r}")
    # __import__ rather than importlib: keeps importlib off the verifier's cold start.
    value = getattr(__import__(f"{__name__}.{module}", fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
