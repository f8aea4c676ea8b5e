"""Offline proofs of logging (C2SP ``tlog-proof``): a receipt's index in a receipt log,
its RFC 9162 inclusion proof and the log's cosigned checkpoint, in one text file
(``RECEIPT.tlog-proof``) that verifies without the log::

    c2sp.org/tlog-proof@v1
    index 7
    <base64 hash, leaf's sibling first>
    ...

    <the checkpoint note, with the log's signature and the witnesses' cosignatures>

:func:`verify_bundle` checks the receipt (its signature by a trusted key, as ``receipt
verify`` does), that its exact bytes are entry ``index`` (leaf ``SHA-256(0x00 ||
receipt bytes)``, as the log stores it) of the checkpoint's tree, and the checkpoint
against a witness :class:`~erasure_receipts.policy.Policy` (a listed log signed it, the
quorum of witnesses cosigned it). When the log holds an RFC 3161 time-stamp of that
checkpoint (``receipt log timestamp``), the bundle carries it as its ``extra`` data:
``extra`` is unauthenticated, which suits a token, as the token authenticates itself
(the TSA's signature over SHA-256 of the checkpoint's text); :func:`verify_bundle`
checks it only against a TSA the caller trusts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .digest import leaf_hash, verify_inclusion
from .errors import LogError, WitnessError
from .note import MAX_NOTE, Checkpoint
from .policy import Policy, PolicyResult
from .signing import b64decode, b64encode
from .verify import TrustStore, VerifiedReceipt, verify_receipt

if TYPE_CHECKING:
    from .log import ReceiptLog
    from .timestamp import TsaTrust, VerifiedTimestamp

__all__ = ["HEADER", "ProofBundle", "VerifiedBundle", "build_bundle", "verify_bundle"]

HEADER = b"c2sp.org/tlog-proof@v1"
MAX_BUNDLE = MAX_NOTE + 4096


def _bad(why: str) -> WitnessError:
    return WitnessError(f"malformed tlog-proof: {why}", reason="malformed_proof")


class ProofBundle:
    """A parsed tlog-proof: entry ``index``, the inclusion ``path`` (leaf's sibling
    first), the ``checkpoint`` note and the unauthenticated ``extra`` data."""

    __slots__ = ("checkpoint", "extra", "index", "path")

    def __init__(
        self, index: int, path: tuple[bytes, ...], checkpoint: bytes, extra: bytes | None = None
    ) -> None:
        self.index, self.path, self.checkpoint, self.extra = index, path, checkpoint, extra

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProofBundle) and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def to_bytes(self) -> bytes:
        """The tlog-proof text."""
        out = [HEADER]
        if self.extra is not None:
            out.append(b"extra " + b64encode(self.extra).encode())
        out.append(b"index %d" % self.index)
        out += [b64encode(h).encode() for h in self.path]
        return b"\n".join(out) + b"\n\n" + self.checkpoint

    @classmethod
    def parse(cls, data: bytes) -> ProofBundle:
        """Strictly parse a tlog-proof; ``WitnessError`` "malformed_proof" otherwise (the
        checkpoint is parsed, its signatures are not checked here)."""
        return _parse(data)[0]


def _parse(data: bytes) -> tuple[ProofBundle, Checkpoint]:
    """Parse a tlog-proof once: the bundle and its parsed checkpoint."""
    if not isinstance(data, bytes) or not data:
        raise _bad("empty")
    if len(data) > MAX_BUNDLE:
        raise _bad(f"over {MAX_BUNDLE} bytes")
    head, sep, note = data.partition(b"\n\n")
    if not sep:
        raise _bad("no empty line before the checkpoint")
    lines = head.split(b"\n")
    if lines[0] != HEADER:
        raise _bad(f"the first line is not {HEADER.decode()}")
    rest = lines[1:]
    extra = None
    if rest and rest[0].startswith(b"extra "):
        try:
            extra = b64decode(rest[0][6:].decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise _bad("the extra line is not base64") from None
        rest = rest[1:]
    if not rest or not rest[0].startswith(b"index "):
        raise _bad("no 'index N' line")
    num = rest[0][6:]
    if not (num.isascii() and num.isdigit()) or len(num) > 19 or num[:1] == b"0" != num:
        raise _bad("the index is not a decimal without leading zeros")
    if len(rest) - 1 > 64:
        raise _bad("more than 64 inclusion proof hashes")
    path = []
    for line in rest[1:]:
        try:
            h = b64decode(line.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise _bad("an inclusion proof line is not base64") from None
        if len(h) != 32:
            raise _bad("an inclusion proof line is not a 32-byte hash")
        path.append(h)
    try:
        cp = Checkpoint.parse(note)
    except LogError as exc:
        raise _bad(exc.message) from None
    return ProofBundle(int(num), tuple(path), note, extra), cp


class VerifiedBundle:
    """What :func:`verify_bundle` established: the verified receipt, its entry index,
    the checkpoint the policy accepted (origin, size, root, cosigners) and, with a
    trusted TSA, the checkpoint's verified time-stamp (None: the bundle has none)."""

    __slots__ = ("checkpoint", "index", "receipt", "timestamp")

    def __init__(
        self,
        receipt: VerifiedReceipt,
        index: int,
        checkpoint: PolicyResult,
        timestamp: VerifiedTimestamp | None = None,
    ) -> None:
        self.receipt, self.index, self.checkpoint = receipt, index, checkpoint
        self.timestamp = timestamp


def build_bundle(log: ReceiptLog, receipt: bytes) -> bytes:
    """The tlog-proof of ``receipt`` (its exact bytes) in ``log``, against the log's
    latest cosigned checkpoint; ``WitnessError`` "not_witnessed" if that checkpoint does
    not cover it yet (push to the witnesses first), ``LogError`` "not_in_log" if it is
    not in the log."""
    index = log.index_of(receipt)
    if index is None:
        raise LogError(f"the receipt is not in the log {log.directory}", reason="not_in_log")
    note = log.cosigned()
    cp = Checkpoint.parse(note)
    if index >= cp.size:
        raise WitnessError(
            f"the receipt is entry {index}, but the latest cosigned checkpoint covers "
            f"{cp.size} entries: push the log to its witnesses first",
            reason="not_witnessed",
        )
    proof = log.inclusion_proof(index, note)
    token = log.timestamp_token(cp.size)
    return ProofBundle(index, tuple(proof.audit_path), note, token).to_bytes()


def verify_bundle(
    receipt: bytes, bundle: bytes, trust: TrustStore, policy: Policy, tsa: TsaTrust | None = None
) -> VerifiedBundle:
    """Verify a receipt with its tlog-proof, offline: the receipt (``verify_receipt``
    with ``trust``; its errors as they are), the bundle's form (``malformed_proof``),
    the inclusion of the receipt's exact bytes at ``index`` in the checkpoint's tree
    (``proof_mismatch``), then the checkpoint against ``policy`` (``unknown_log``,
    ``bad_log_signature``, ``bad_cosignature``, ``quorum_not_met``). With ``tsa``, the
    ``extra`` data, if any, must be a time-stamp of the checkpoint by that TSA
    (``TimestampError``, :meth:`~erasure_receipts.timestamp.TsaTrust.verify`) and the
    receipt's ``issued_at`` must not be after it (``issued_after_timestamp``)."""
    v = verify_receipt(receipt, trust)
    b, cp = _parse(bundle)
    leaf = leaf_hash(receipt)
    if not (b.index < cp.size and verify_inclusion(b.index, cp.size, leaf, b.path, cp.root)):
        raise WitnessError(
            f"the receipt's bytes are not entry {b.index} of the checkpoint of {cp.origin!r} "
            f"(size {cp.size}): the inclusion proof does not lead to its root",
            reason="proof_mismatch",
        )
    result = policy.check(cp)
    stamp = None
    if tsa is not None and b.extra is not None:
        from .timestamp import check_issued_at

        stamp = tsa.verify(b.extra, cp.text)
        check_issued_at(v.issued_at, stamp, cp.size)
    return VerifiedBundle(v, b.index, result, stamp)
