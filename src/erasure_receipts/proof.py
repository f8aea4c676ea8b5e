"""Legal hold: keep one row of an erased scope and prove later that the erasure covered it.

Before an erasure, ``saver.export_leaves(...)`` returns :class:`LeafRecord` objects: the
exact leaf data of a row (``erasure-receipts-row-v1``), its index, the tree size and the
RFC 9162 audit path in the pre-state tree the erasure will measure.
``LeafRecord.to_json()`` is the ``ROW.json`` file an application keeps; afterwards
:func:`verify_leaf_record` (``receipt prove ROW.json --receipt R.json --key PUB.pem``)
verifies the receipt and the row's inclusion in its pre-state digest, using the
receipt's own ``pre_state.leaves`` as the tree size (RECEIPT_SPEC.md section 4.7).

Verify side: imports nothing from LangGraph or any database driver.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .canonical import parse_strict
from .digest import (
    LEAF_ENCODING,
    MERKLE_ALGORITHM,
    inclusion_proofs,
    leaf_hash,
    merkle_root,
    verify_inclusion,
)
from .errors import InclusionProofError, MalformedReceiptError
from .receipt import Receipt
from .signing import PublicKey
from .verify import TrustedKey, TrustStore, VerifiedReceipt, verify_receipt

__all__ = [
    "MAX_RECORD_BYTES",
    "RECORD_TYPE",
    "DecodedLeaf",
    "InclusionProofError",
    "LeafRecord",
    "ProvenRow",
    "decode_leaf",
    "leaf_records",
    "primary_key_of",
    "verify_leaf_record",
]

RECORD_TYPE = "erasure-receipts-leaf-record-v1"
MAX_RECORD_BYTES = 256 << 20
"""A ROW.json holds one stored row (base64): larger than a receipt, still bounded."""

StoredValue = tuple[str, Any]
"""``(tag, payload)``: ``("n", None)``, ``("i", int)``, ``("I", int)``, ``("r", float)``,
``("t", utf8_bytes)`` or ``("b", bytes)`` - the leaf grammar's tags."""


@dataclass(frozen=True)
class DecodedLeaf:
    """Leaf data parsed back: table, primary key and ``(column, value)`` pairs, each value
    as its ``StoredValue`` ``(tag, payload)``, so the storage class stays visible."""

    table: str
    primary_key: tuple[StoredValue, ...]
    columns: tuple[tuple[str, StoredValue], ...]


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise ValueError("leaf data is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def lp(self) -> bytes:
        return self.take(int(struct.unpack(">Q", self.take(8))[0]))

    def value(self) -> StoredValue:
        tag = self.take(1)
        if tag == b"n":
            return ("n", None)
        if tag == b"i":
            return ("i", int(struct.unpack(">q", self.take(8))[0]))
        if tag == b"r":
            return ("r", float(struct.unpack(">d", self.take(8))[0]))
        if tag in (b"t", b"b"):
            return (tag.decode(), self.lp())
        if tag == b"I":
            text = self.lp().decode("ascii")
            return ("I", int(text))
        raise ValueError(f"unknown value tag {tag!r}")


def _decode(data: bytes, *, head_only: bool) -> DecodedLeaf:
    r = _Reader(data)
    if r.take(4) != b"ERv1":
        raise ValueError("not an erasure-receipts-row-v1 leaf (no ERv1 prefix)")
    table = r.lp().decode("utf-8")
    pk = tuple(r.value() for _ in range(r.u32()))
    if head_only:
        return DecodedLeaf(table, pk, ())
    cols = tuple((r.lp().decode("utf-8", "surrogatepass"), r.value()) for _ in range(r.u32()))
    if r.pos != len(data):
        raise ValueError("trailing bytes after the leaf")
    return DecodedLeaf(table, pk, cols)


def decode_leaf(data: bytes) -> DecodedLeaf:
    """Parse leaf data strictly (``erasure-receipts-row-v1``); raises ``ValueError``."""
    try:
        return _decode(data, head_only=False)
    except (UnicodeDecodeError, struct.error) as exc:
        raise ValueError(f"malformed leaf: {exc}") from None


def _python(v: StoredValue) -> Any:
    tag, payload = v
    return payload.decode("utf-8", "surrogateescape") if tag == "t" else payload


def primary_key_of(data: bytes) -> tuple[str, tuple[Any, ...]]:
    """``(table, primary key)`` of leaf data as Python values (TEXT as ``str``)."""
    leaf = _decode(data, head_only=True)
    return leaf.table, tuple(_python(v) for v in leaf.primary_key)


def _to_json_value(v: StoredValue) -> Any:
    tag, payload = v
    if tag == "n":
        return None
    if tag == "i":
        return payload
    if tag == "I":
        return {"integer": str(payload)}
    if tag == "r":
        return {"real": float(payload).hex()}
    if tag == "t":
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            return {"text_base64": base64.b64encode(payload).decode("ascii")}
    return {"blob_base64": base64.b64encode(payload).decode("ascii")}


@dataclass(frozen=True)
class LeafRecord:
    """One row of a scope, with what it takes to prove it was inside an erasure."""

    thread_id: str
    index: int
    """The row's leaf index (0-based) in the pre-state tree."""
    tree_size: int
    """Leaves in the tree when exported; must equal the receipt's ``pre_state.leaves``."""
    root: str
    """Hex root of that tree; must equal the receipt's pre-state digest."""
    leaf: bytes
    """The exact leaf data (``erasure-receipts-row-v1``): the row's stored values."""
    audit_path: tuple[bytes, ...]
    """RFC 9162 section 2.1.3.1 inclusion proof, leaf to root."""

    @property
    def leaf_hash(self) -> bytes:
        """RFC 9162 hash of ``leaf``: where the audit path starts."""
        return leaf_hash(self.leaf)

    @property
    def table(self) -> str:
        """The row's table, read from the leaf data (not a separately stored claim)."""
        return primary_key_of(self.leaf)[0]

    @property
    def primary_key(self) -> tuple[Any, ...]:
        """The row's primary key as Python values (TEXT as ``str``), read from the leaf."""
        return primary_key_of(self.leaf)[1]

    def decoded(self) -> DecodedLeaf:
        """The whole leaf data, parsed strictly (``ValueError`` if malformed)."""
        return decode_leaf(self.leaf)

    def to_dict(self) -> dict[str, Any]:
        """The ``ROW.json`` object; ``table`` and ``primary_key`` are derived from the
        leaf data, so they cannot disagree with it."""
        head = _decode(self.leaf, head_only=True)
        return {
            "record_type": RECORD_TYPE,
            "merkle": {"algorithm": MERKLE_ALGORITHM, "leaf_encoding": LEAF_ENCODING},
            "thread_id": self.thread_id,
            "tree_size": self.tree_size,
            "root": self.root,
            "index": self.index,
            "table": head.table,
            "primary_key": [_to_json_value(v) for v in head.primary_key],
            "leaf": base64.b64encode(self.leaf).decode("ascii"),
            "audit_path": [h.hex() for h in self.audit_path],
        }

    def to_json(self) -> bytes:
        """The ``ROW.json`` document (UTF-8, one JSON object)."""
        return (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> LeafRecord:
        """Parse and check a ``ROW.json`` strictly; raises ``InclusionProofError``
        (reason ``malformed_record``) for anything that is not a well-formed record."""
        try:
            doc = parse_strict(data, max_bytes=MAX_RECORD_BYTES)
        except MalformedReceiptError as exc:
            raise _malformed(exc.message) from None
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Any) -> LeafRecord:
        """Check a parsed ``ROW.json`` object strictly and build the record; raises
        ``InclusionProofError`` (``malformed_record``). Inclusion is not checked here:
        :func:`verify_leaf_record` does that against a verified receipt."""
        expected = {"record_type", "merkle", "thread_id", "tree_size", "root", "index", "table",
                    "primary_key", "leaf", "audit_path"}  # fmt: skip
        if not isinstance(doc, dict) or set(doc) != expected:
            raise _malformed(f"a row record has exactly the members {sorted(expected)}")
        if doc["record_type"] != RECORD_TYPE:
            raise _malformed(f"unknown record_type {doc['record_type']!r}")
        if doc["merkle"] != {"algorithm": MERKLE_ALGORITHM, "leaf_encoding": LEAF_ENCODING}:
            raise _malformed(f"unsupported merkle parameters {doc['merkle']!r}")
        for name in ("tree_size", "index"):
            if type(doc[name]) is not int or doc[name] < 0:
                raise _malformed(f"{name} must be a non-negative integer")
        if not isinstance(doc["thread_id"], str):
            raise _malformed("thread_id must be a string")
        root = _hex32(doc["root"], "root")
        path = doc["audit_path"]
        if not isinstance(path, list):
            raise _malformed("audit_path must be an array of hex SHA-256 hashes")
        hashes = tuple(bytes.fromhex(_hex32(h, "audit_path")) for h in path)
        try:
            if not isinstance(doc["leaf"], str):
                raise ValueError("leaf must be a base64 string")
            leaf = base64.b64decode(doc["leaf"], validate=True)
            head = decode_leaf(leaf)
        except (ValueError, binascii.Error) as exc:
            raise _malformed(f"leaf: {exc}") from None
        if doc["table"] != head.table or doc["primary_key"] != [
            _to_json_value(v) for v in head.primary_key
        ]:
            raise _malformed("table/primary_key do not match the leaf data")
        return cls(doc["thread_id"], doc["index"], doc["tree_size"], root, leaf, hashes)


def _malformed(message: str) -> InclusionProofError:
    return InclusionProofError(f"malformed row record: {message}", reason="malformed_record")


def _hex32(value: Any, name: str) -> str:
    if not (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    ):
        raise _malformed(f"{name} must hold 64 lowercase hex digits")
    return value


@dataclass(frozen=True)
class ProvenRow:
    """A verified receipt and a row proven to be a leaf of its pre-state digest."""

    receipt: VerifiedReceipt
    table: str
    primary_key: tuple[Any, ...]
    index: int
    tree_size: int
    unit: str | None = None
    """For a subject receipt, the unit the row was proven into (``thread:<id>``)."""


def _proof_tree(rec: LeafRecord, verified: VerifiedReceipt) -> tuple[int, str, str | None]:
    """``(tree size, root, unit name)`` the record must prove into: the pre-state of a
    thread or history receipt, or - for a subject receipt - the unit of the record's
    thread (RECEIPT_SPEC.md 9.3: each unit's digest is the tree of that thread alone,
    the tree ``export_leaves(thread_id)`` exports)."""
    p = verified.statement["predicate"]
    if p.get("kind") != "subject":
        pre = p["pre_state"]
        if rec.thread_id != verified.thread_id:
            raise InclusionProofError(
                f"the row was exported from thread {rec.thread_id!r}; the receipt erased "
                f"{verified.thread_id!r}",
                reason="wrong_thread",
            )
        return int(pre["leaves"]), str(pre["digest"]["sha256"]), None
    name = f"thread:{rec.thread_id}"
    unit = next((u for u in p["units"] if u["name"] == name), None)
    if unit is None:
        private = " (privacy mode: the receipt names its threads by commitments)" * (
            "privacy" in p["scope"]
        )
        raise InclusionProofError(
            f"the row was exported from thread {rec.thread_id!r}, which is not one of the "
            f"{len(p['scope']['threads'])} threads subject receipt {verified.receipt_id} "
            f"erased{private}",
            reason="wrong_thread",
        )
    return int(unit["leaves"]), str(unit["digest"]["sha256"]), name


def verify_leaf_record(
    record: LeafRecord | bytes,
    receipt: bytes | Receipt,
    trusted_keys: TrustStore | PublicKey | TrustedKey | Sequence[PublicKey | TrustedKey],
) -> ProvenRow:
    """Verify the receipt, then the row's inclusion in its pre-state digest.

    The tree size is the receipt's ``pre_state.leaves`` and the root its pre-state
    digest (never the record's own claims); for a subject receipt, the leaves and digest
    of the unit of the record's thread. Raises a ``VerificationError``:
    the receipt's own reasons, or ``InclusionProofError`` (``malformed_record``,
    ``wrong_thread``, ``tree_mismatch``, ``not_included``).
    """
    rec = record if isinstance(record, LeafRecord) else LeafRecord.from_json(record)
    verified = verify_receipt(receipt, trusted_keys)
    size, root, unit = _proof_tree(rec, verified)
    where = f"unit {unit!r}" if unit else "pre-state"
    if (rec.tree_size, rec.root) != (size, root):
        raise InclusionProofError(
            f"the row was exported from a tree of {rec.tree_size} leaves (root "
            f"{rec.root[:16]}...), the receipt's {where} has {size} (root {root[:16]}...): "
            "the scope changed between the export and the erasure",
            reason="tree_mismatch",
        )
    if not verify_inclusion(rec.index, size, rec.leaf_hash, rec.audit_path, bytes.fromhex(root)):
        raise InclusionProofError(
            f"leaf {rec.index} with this audit path is not in the receipt's {where} digest",
            reason="not_included",
        )
    table, pk = primary_key_of(rec.leaf)
    return ProvenRow(verified, table, pk, rec.index, size, unit)


def leaf_records(
    thread_id: str, hashes: Sequence[bytes], chosen: Iterable[tuple[int, bytes]]
) -> list[LeafRecord]:
    """Records for the chosen ``(index, leaf data)`` of a tree given by all its leaf hashes."""
    chosen = list(chosen)
    root = merkle_root(hashes).hex()
    paths = inclusion_proofs(hashes, [i for i, _ in chosen])
    return [
        LeafRecord(thread_id, i, len(hashes), root, data, tuple(paths[i])) for i, data in chosen
    ]


def head_filter(
    select: Callable[[str, tuple[Any, ...]], bool] | None,
) -> Callable[[bytes], bool] | None:
    """Adapt ``select(table, primary_key)`` to a filter over leaf data."""
    if select is None:
        return None

    def keep(data: bytes) -> bool:
        table, pk = primary_key_of(data)
        return bool(select(table, pk))

    return keep
