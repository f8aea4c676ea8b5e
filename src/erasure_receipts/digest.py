"""Streaming RFC 9162 Merkle tree over stored rows, and inclusion proofs.

Hashes follow RFC 9162 section 2.1.1: ``leaf = SHA-256(0x00 || data)``,
``node = SHA-256(0x01 || left || right)``, and the root of the empty tree is
``SHA-256("")``. ``MerkleTree`` keeps only a stack of perfect-subtree roots, so memory
is O(log n) however many rows a thread has.

Each stored row becomes one leaf whose data is ``encode_row(table, primary_key, columns)``,
a length-prefixed encoding that cannot be read two ways (see RECEIPT_SPEC.md, "Leaves").
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "EMPTY_ROOT",
    "LEAF_ENCODING",
    "MERKLE_ALGORITHM",
    "MerkleTree",
    "RowLeafHasher",
    "encode_row",
    "inclusion_proof",
    "leaf_hash",
    "merkle_root",
    "node_hash",
    "root_from_inclusion_proof",
    "verify_inclusion",
]

MERKLE_ALGORITHM = "rfc9162-sha256"
LEAF_ENCODING = "erasure-receipts-row-v1"
EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()

ColumnValue = None | int | float | str | bytes | bytearray | memoryview


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


def _lp(data: bytes) -> bytes:
    return _U64.pack(len(data)) + data


def _emit(out: Callable[[bytes], object], value: ColumnValue) -> None:
    """Write one column value's encoding to ``out``; the single definition of it.

    One type tag per SQL storage class, so 1, 1.0, "1" and b"1" never collide. Text and
    blobs go out as header + payload, so large values are never copied into a buffer.
    """
    if isinstance(value, bytes):
        out(b"b" + _U64.pack(len(value)))
        out(value)
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        out(b"t" + _U64.pack(len(data)))
        out(data)
    elif value is None:
        out(b"n")
    elif isinstance(value, bool):  # bool is an int subclass; stores never hand us one
        out(b"i" + _I64.pack(int(value)))
    elif isinstance(value, int):
        if -(2**63) <= value < 2**63:
            out(b"i" + _I64.pack(value))
        else:
            out(b"I" + _lp(str(value).encode("ascii")))
    elif isinstance(value, float):
        out(b"r" + _F64.pack(value))
    elif isinstance(value, bytearray | memoryview):
        _emit(out, bytes(value))
    else:
        raise TypeError(f"cannot encode column value of type {type(value).__name__}")


def encode_row(
    table: str,
    primary_key: Sequence[ColumnValue],
    columns: Sequence[tuple[str, ColumnValue]],
) -> bytes:
    """Unambiguous bytes for one stored row: table, primary key, then named columns.

    ``columns`` holds every stored column (primary-key columns included) as
    ``(name, raw value)`` in a fixed order, so the leaf commits to the exact stored bytes.
    """
    parts = [b"ERv1", _lp(table.encode("utf-8")), _U32.pack(len(primary_key))]
    out = parts.append
    for v in primary_key:
        _emit(out, v)
    out(_U32.pack(len(columns)))
    for name, value in columns:
        out(_lp(name.encode("utf-8")))
        _emit(out, value)
    return b"".join(parts)


class RowLeafHasher:
    """``leaf_hash(encode_row(...))`` for rows of one table, streamed into SHA-256.

    Equal by construction to encoding then hashing, but the table and column-name
    prefixes are encoded once per table and large values are never copied into a leaf
    buffer: an erasure hashes every stored byte of the thread exactly once.
    """

    __slots__ = ("_head", "_names", "_ncols", "_pk")

    def __init__(self, table: str, columns: Sequence[str], primary_key: Sequence[str]) -> None:
        self._pk = [list(columns).index(c) for c in primary_key]
        self._head = b"\x00ERv1" + _lp(table.encode("utf-8")) + _U32.pack(len(self._pk))
        self._ncols = _U32.pack(len(columns))
        self._names = [_lp(n.encode("utf-8")) for n in columns]

    def __call__(self, row: Sequence[ColumnValue]) -> bytes:
        h = hashlib.sha256(self._head)
        update = h.update
        for i in self._pk:
            _emit(update, row[i])
        update(self._ncols)
        for name, value in zip(self._names, row, strict=True):
            update(name)
            _emit(update, value)
        return h.digest()


class MerkleTree:
    """Incremental RFC 9162 tree: append leaves in order, read the root at any time."""

    __slots__ = ("_size", "_stack")

    def __init__(self) -> None:
        # (height, hash) of perfect subtrees, left to right, strictly decreasing height.
        self._stack: list[tuple[int, bytes]] = []
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def append(self, data: bytes) -> bytes:
        """Add one leaf from its data; returns its leaf hash."""
        h = leaf_hash(data)
        self.append_hash(h)
        return h

    def append_hash(self, h: bytes) -> None:
        """Add one leaf from an already computed leaf hash."""
        stack = self._stack
        height = 0
        while stack and stack[-1][0] == height:
            h = node_hash(stack.pop()[1], h)
            height += 1
        stack.append((height, h))
        self._size += 1

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        # Fold right to left: the ragged right edge of an RFC 9162 tree.
        h = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            h = node_hash(left, h)
        return h


def merkle_root(leaf_hashes: Iterable[bytes]) -> bytes:
    tree = MerkleTree()
    for h in leaf_hashes:
        tree.append_hash(h)
    return tree.root()


def _split(n: int) -> int:
    """Largest power of two strictly less than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 9162 section 2.1.3.1 audit path for leaf ``index`` of the given leaves."""
    n = len(leaf_hashes)
    if not 0 <= index < n:
        raise ValueError(f"leaf index {index} is outside a tree of size {n}")
    proof: list[bytes] = []
    lo, hi, m = 0, n, index
    path: list[tuple[int, int]] = []
    while hi - lo > 1:
        k = _split(hi - lo)
        if m - lo < k:
            path.append((lo + k, hi))
            hi = lo + k
        else:
            path.append((lo, lo + k))
            lo = lo + k
    for a, b in reversed(path):
        proof.append(merkle_root(leaf_hashes[a:b]))
    return proof


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """RFC 9162 section 2.1.3.2: the root implied by a leaf hash and its audit path."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is outside a tree of size {size}")
    if len(leaf) != 32 or any(len(p) != 32 for p in proof):
        raise ValueError("hashes must be 32 bytes")
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            raise ValueError("inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("inclusion proof is too short")
    return r


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> bool:
    """True iff ``leaf`` is leaf ``index`` of the tree of ``size`` leaves with ``root``."""
    try:
        return root_from_inclusion_proof(index, size, leaf, proof) == root
    except ValueError:
        return False
