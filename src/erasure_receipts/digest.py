"""Streaming RFC 9162 Merkle tree over stored rows, and inclusion proofs.

Hashes follow RFC 9162 section 2.1.1: ``leaf = SHA-256(0x00 || data)``,
``node = SHA-256(0x01 || left || right)``, and the root of the empty tree is
``SHA-256("")``. ``MerkleTree`` keeps only a stack of perfect-subtree roots, so memory
is O(log n) however many rows a thread has.

Each stored row becomes one leaf whose data is ``encode_row(table, primary_key, columns)``,
a length-prefixed encoding that cannot be read two ways (RECEIPT_SPEC.md section 4). Rows
read from SQLite are encoded from their *storage class* (``RowLeafHasher.stored``), never
from the Python types a connection's converters produce; store items seen only through
the ``BaseStore`` API are encoded by ``store_item_leaf`` (RFC 8785 JSON, UTC timestamps).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from .canonical import canonicalize

__all__ = [
    "EMPTY_ROOT",
    "LEAF_ENCODING",
    "MERKLE_ALGORITHM",
    "MerkleTree",
    "NodeRoot",
    "RowLeafHasher",
    "audit_path",
    "consistency_path",
    "consistency_proof",
    "encode_row",
    "inclusion_proof",
    "inclusion_proofs",
    "jcs_value",
    "leaf_hash",
    "merkle_root",
    "node_hash",
    "root_from_inclusion_proof",
    "store_item_leaf",
    "subtree_root",
    "utc_timestamp",
    "verify_consistency",
    "verify_inclusion",
]

MERKLE_ALGORITHM = "rfc9162-sha256"
LEAF_ENCODING = "erasure-receipts-row-v1"
EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()

ColumnValue = None | int | float | str | bytes | bytearray | memoryview


def leaf_hash(data: bytes) -> bytes:
    """RFC 9162 leaf hash: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 interior node hash: ``SHA-256(0x01 || left || right)``."""
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

    def _feed_stored(self, out: Callable[[bytes], object], row: Sequence[Any], mask: int) -> int:
        """Emit a leaf from storage-class values; returns the row's ``bytes`` figure.

        ``row`` holds one value per column (extra trailing items are ignored): ``None``
        (NULL), ``int`` (INTEGER), ``float`` (REAL) or ``bytes`` - a BLOB, or the stored
        UTF-8 bytes of a TEXT value when bit ``i`` of ``mask`` is set for column ``i``.
        """
        for i in self._pk:
            value = row[i]
            if value.__class__ is bytes:
                out((b"t" if mask >> i & 1 else b"b") + _U64.pack(len(value)))
                out(value)
            elif value is None:
                out(b"n")
            elif value.__class__ is int:
                out(b"i" + _I64.pack(value))
            elif value.__class__ is float:
                out(b"r" + _F64.pack(value))
            else:
                raise TypeError(f"not a storage-class value: {type(value).__name__}")
        out(self._ncols)
        size = 0
        for i, name in enumerate(self._names):
            value = row[i]
            if value.__class__ is bytes:
                n = len(value)
                size += n
                out(name + (b"t" if mask >> i & 1 else b"b") + _U64.pack(n))
                out(value)
            elif value is None:
                out(name + b"n")
            elif value.__class__ is int:
                size += 8
                out(name + b"i" + _I64.pack(value))
            elif value.__class__ is float:
                size += 8
                out(name + b"r" + _F64.pack(value))
            else:
                raise TypeError(f"not a storage-class value: {type(value).__name__}")
        return size

    def stored(self, row: Sequence[Any], text_mask: int) -> tuple[bytes, int]:
        """Leaf hash and ``bytes`` figure of a row read as storage classes (see
        ``_feed_stored``): the form ``SqlTablePart`` reads, whatever the connection's
        ``detect_types``, converters or ``text_factory``."""
        h = hashlib.sha256(self._head)
        size = self._feed_stored(h.update, row, text_mask)
        return h.digest(), size

    def stored_data(self, row: Sequence[Any], text_mask: int) -> bytes:
        """The leaf data (``encode_row`` bytes) of the same row; ``leaf_hash`` of it
        equals ``stored(row, text_mask)[0]``."""
        parts = [self._head[1:]]
        self._feed_stored(parts.append, row, text_mask)
        return b"".join(parts)


class MerkleTree:
    """Incremental RFC 9162 tree: append leaves in order, read the root at any time."""

    __slots__ = ("_size", "_stack")

    def __init__(self) -> None:
        # (height, hash) of perfect subtrees, left to right, strictly decreasing height.
        self._stack: list[tuple[int, bytes]] = []
        self._size = 0

    @property
    def size(self) -> int:
        """Leaves appended so far (the receipt's ``leaves`` count)."""
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
        """Root of the leaves so far (``EMPTY_ROOT`` if none); appending may continue."""
        if not self._stack:
            return EMPTY_ROOT
        # Fold right to left: the ragged right edge of an RFC 9162 tree.
        h = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            h = node_hash(left, h)
        return h

    def append_hash_nodes(self, h: bytes) -> list[bytes]:
        """Add one leaf from its hash, like :meth:`append_hash`, and return the roots of
        the perfect subtrees it completes, lowest first: ``[h, parent, grandparent, ...]``.

        Written out in order for every leaf, these form a post-order node store (leaf ``i``
        at position ``2i - popcount(i)``) from which any subtree root, and so any proof, is
        read in O(log n) (``subtree_root``)."""
        stack = self._stack
        out = [h]
        height = 0
        while stack and stack[-1][0] == height:
            h = node_hash(stack.pop()[1], h)
            height += 1
            out.append(h)
        stack.append((height, h))
        self._size += 1
        return out

    def perfect_roots(self) -> list[bytes]:
        """Roots of the perfect subtrees the leaves so far form, left to right (one per set
        bit of ``size``, largest first): all that is needed to resume appending."""
        return [h for _, h in self._stack]

    @classmethod
    def from_perfect_roots(cls, size: int, roots: Sequence[bytes]) -> MerkleTree:
        """Resume a tree of ``size`` leaves from its :meth:`perfect_roots`."""
        heights = [b for b in range(size.bit_length() - 1, -1, -1) if size >> b & 1]
        if size < 0 or len(roots) != len(heights) or any(len(r) != 32 for r in roots):
            raise ValueError(f"{len(roots)} roots do not describe a tree of {size} leaves")
        tree = cls()
        tree._stack = [(height, bytes(r)) for height, r in zip(heights, roots, strict=True)]
        tree._size = size
        return tree


def merkle_root(leaf_hashes: Iterable[bytes]) -> bytes:
    """Root of the tree over already computed leaf hashes, in order (``EMPTY_ROOT`` if none)."""
    tree = MerkleTree()
    for h in leaf_hashes:
        tree.append_hash(h)
    return tree.root()


UNIT_LEAF_PREFIX = b"erasure-receipts-unit-v1\x00"


def unit_leaf(name: str, leaves: int, root: bytes) -> bytes:
    """Leaf data binding one unit (a thread, or the store) of a subject receipt: its
    name, its tree size and its root (RECEIPT_SPEC.md 9.3)."""
    n = name.encode("utf-8", "surrogatepass")
    return UNIT_LEAF_PREFIX + struct.pack(">I", len(n)) + n + struct.pack(">Q", leaves) + root


def units_root(units: Iterable[tuple[str, int, bytes]]) -> bytes:
    """The subject receipt's pre-state root over ``(name, leaves, root)`` in order."""
    return merkle_root(leaf_hash(unit_leaf(*u)) for u in units)


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


def inclusion_proofs(
    leaf_hashes: Sequence[bytes], indices: Iterable[int]
) -> dict[int, list[bytes]]:
    """Audit paths of several leaves at once, equal to ``inclusion_proof`` for each.

    Builds the tree level by level once (O(n) hashes), so exporting every leaf of a
    thread costs O(n log n), not O(n^2). An RFC 9162 tree pairs nodes left to right on
    each level and carries an unpaired last node up unchanged; a leaf's path is its
    sibling on every level where it has one.
    """
    wanted = sorted(set(indices))
    n = len(leaf_hashes)
    for i in wanted:
        if not 0 <= i < n:
            raise ValueError(f"leaf index {i} is outside a tree of size {n}")
    paths: dict[int, list[bytes]] = {i: [] for i in wanted}
    pos = {i: i for i in wanted}
    level = list(leaf_hashes)
    while len(level) > 1:
        for i in wanted:
            sibling = pos[i] ^ 1
            if sibling < len(level):
                paths[i].append(level[sibling])
            pos[i] >>= 1
        nxt = [node_hash(level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return paths


# -- proofs over stored subtree roots, and consistency proofs (RFC 9162 2.1.3, 2.1.4) --------

NodeRoot = Callable[[int, int], bytes]
"""``root(lo, hi)`` = MTH(D[lo:hi]), the root of the leaves in ``[lo, hi)``."""


def subtree_root(lo: int, hi: int, perfect: Callable[[int, int], bytes]) -> bytes:
    """MTH(D[lo:hi]) from the roots of perfect, aligned subtrees:
    ``perfect(height, i)`` = MTH(D[i * 2**height : (i + 1) * 2**height]).

    Every node of an RFC 9162 tree is either perfect and aligned (one look-up) or on the
    ragged right edge of the tree (O(log n) look-ups), so a proof built from stored
    perfect subtree roots costs O(log n) reads instead of O(n) hashes."""
    n = hi - lo
    if lo < 0 or n <= 0:
        raise ValueError(f"empty or negative leaf range [{lo}, {hi})")
    if n & (n - 1) == 0 and lo % n == 0:
        return perfect(n.bit_length() - 1, lo // n)
    k = _split(n)
    return node_hash(subtree_root(lo, lo + k, perfect), subtree_root(lo + k, hi, perfect))


def audit_path(index: int, size: int, root: NodeRoot) -> list[bytes]:
    """RFC 9162 section 2.1.3.1 PATH(index, D[size]), leaf to root, with the subtree
    roots supplied by ``root(lo, hi)``; equal to ``inclusion_proof(leaves, index)``."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is outside a tree of size {size}")
    path: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index - lo < k:
            path.append(root(lo + k, hi))
            hi = lo + k
        else:
            path.append(root(lo, lo + k))
            lo += k
    path.reverse()
    return path


def consistency_path(old_size: int, new_size: int, root: NodeRoot) -> list[bytes]:
    """RFC 9162 section 2.1.4.1 PROOF(old_size, D[new_size]) with the subtree roots
    supplied by ``root(lo, hi)``: the nodes that let a verifier holding only the two roots
    check that the first ``old_size`` leaves are unchanged. Empty when ``old_size`` is 0
    or equals ``new_size``."""
    if not 0 <= old_size <= new_size:
        raise ValueError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    out: list[bytes] = []
    # SUBPROOF(m, D[lo:hi], complete), unrolled: each step appends the node *after* the
    # recursive part, so the list is built top-down and reversed at the end.
    lo, hi, m, complete = 0, new_size, old_size, True
    while True:
        n = hi - lo
        if m == n:
            if not complete:
                out.append(root(lo, hi))
            break
        k = _split(n)
        if m <= k:
            out.append(root(lo + k, hi))
            hi = lo + k
        else:
            out.append(root(lo, lo + k))
            lo += k
            m -= k
            complete = False
    out.reverse()
    return out


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int) -> list[bytes]:
    """RFC 9162 section 2.1.4.1 consistency proof from the tree of the first ``old_size``
    leaves to the tree of all ``leaf_hashes`` (O(n) hashes; a log with stored subtree
    roots uses :func:`consistency_path`)."""
    return consistency_path(
        old_size, len(leaf_hashes), lambda lo, hi: merkle_root(leaf_hashes[lo:hi])
    )


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 section 2.1.4.2: True iff ``proof`` shows that the tree of ``new_size``
    leaves with ``new_root`` extends the tree of ``old_size`` leaves with ``old_root``.

    Equal sizes need equal roots and an empty proof; every tree extends the empty tree
    (``old_root`` must then be ``EMPTY_ROOT``, the proof empty)."""
    if not 0 <= old_size <= new_size:
        return False
    if len(old_root) != 32 or len(new_root) != 32 or any(len(p) != 32 for p in proof):
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # an exact power of 2: the old root is a node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


# -- store items seen through the BaseStore API (swept stores) -----------------------------


def jcs_value(value: Any) -> bytes | None:
    """RFC 8785 (JCS) UTF-8 bytes of a store item's value, or None if it is not I-JSON.

    Not I-JSON: a non-JSON type (an in-process store may hold any object), a non-string
    member name, NaN/Infinity, an integer beyond +-2**53, a lone surrogate.
    """
    try:
        return canonicalize(value, floats=True)
    except (TypeError, ValueError, UnicodeEncodeError):
        return None


def utc_timestamp(t: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC, always six fractional digits; a naive
    datetime is taken to be UTC already."""
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
        f"{t.second:02d}.{t.microsecond:06d}Z"
    )


def store_item_leaf(
    namespace: Sequence[str], key: str, value: Any, created_at: datetime, updated_at: datetime
) -> tuple[tuple[str, str], bytes, int]:
    """Sort key ``(prefix, key)``, leaf data and ``bytes`` figure of one store item seen
    through the ``BaseStore`` API (RECEIPT_SPEC.md section 4, "Swept store items").

    ``value`` is TEXT holding its RFC 8785 JSON; a value that is not I-JSON falls back to
    a BLOB holding ``orjson.dumps(value, OPT_SORT_KEYS | OPT_NON_STR_KEYS)``.
    """
    prefix = ".".join(namespace)
    jcs = jcs_value(value)
    stored: str | bytes
    if jcs is not None:
        stored = jcs.decode("utf-8")
        value_size = len(jcs)
    else:
        import orjson

        stored = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
        value_size = len(stored)
    created, updated = utc_timestamp(created_at), utc_timestamp(updated_at)
    data = encode_row(
        "store",
        [prefix, key],
        [("prefix", prefix), ("key", key), ("value", stored),
         ("created_at", created), ("updated_at", updated)],
    )  # fmt: skip
    size = (
        len(prefix.encode("utf-8", "surrogatepass"))
        + len(key.encode("utf-8", "surrogatepass"))
        + value_size
        + len(created)
        + len(updated)
    )
    return (prefix, key), data, size
