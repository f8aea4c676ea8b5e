"""RFC 6962 / RFC 9162 Merkle trees: reference vectors, a naive model, inclusion proofs,
O(log n) memory and the unambiguous row encoding."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure_receipts.digest import (
    EMPTY_ROOT,
    MerkleTree,
    encode_row,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    node_hash,
    root_from_inclusion_proof,
    verify_inclusion,
)

Row = tuple[Any, ...]

# -- RFC 6962 reference data (as used by Certificate Transparency implementations) -------

LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    bytes.fromhex("606162636465666768696a6b6c6d6e6f"),
]
LEAF_HASHES = [leaf_hash(x) for x in LEAVES]

ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]

# (1-based leaf, tree size, audit path)
INCLUSION_VECTORS = [
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        2,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


def naive_mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.1 MTH, written straight from the definition."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + naive_mth(leaves[:k]) + naive_mth(leaves[k:])).digest()


def _root_of(n: int) -> bytes:
    return bytes.fromhex(ROOTS[n])


# -- roots ----------------------------------------------------------------------------------


def test_empty_root() -> None:
    assert EMPTY_ROOT.hex() == ROOTS[0]
    assert MerkleTree().root() == EMPTY_ROOT
    assert merkle_root([]) == EMPTY_ROOT


@pytest.mark.parametrize("size", range(9))
def test_reference_roots(size: int) -> None:
    tree = MerkleTree()
    for data in LEAVES[:size]:
        tree.append(data)
    assert tree.size == size
    assert tree.root().hex() == ROOTS[size]
    assert merkle_root(LEAF_HASHES[:size]).hex() == ROOTS[size]
    assert naive_mth(LEAVES[:size]).hex() == ROOTS[size]


def test_root_is_readable_at_every_size() -> None:
    tree = MerkleTree()
    assert tree.root().hex() == ROOTS[0]
    for i, data in enumerate(LEAVES, 1):
        assert tree.append(data) == LEAF_HASHES[i - 1]
        assert tree.root().hex() == ROOTS[i]


def test_append_hash_equals_append() -> None:
    a, b = MerkleTree(), MerkleTree()
    for data in LEAVES:
        a.append(data)
        b.append_hash(leaf_hash(data))
    assert a.root() == b.root()


def test_domain_separation() -> None:
    # A leaf and an interior node over the same bytes must hash differently.
    left, right = LEAF_HASHES[0], LEAF_HASHES[1]
    assert node_hash(left, right) != leaf_hash(left + right)
    assert leaf_hash(b"") != hashlib.sha256(b"").digest()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=16), max_size=300))
def test_root_matches_naive_model(leaves: list[bytes]) -> None:
    tree = MerkleTree()
    for data in leaves:
        tree.append(data)
    assert tree.size == len(leaves)
    assert tree.root() == naive_mth(leaves)


# -- inclusion proofs ---------------------------------------------------------------------


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION_VECTORS)
def test_inclusion_proof_vectors(leaf: int, size: int, path: list[str]) -> None:
    index = leaf - 1
    proof = inclusion_proof(LEAF_HASHES[:size], index)
    assert [p.hex() for p in proof] == path
    root = _root_of(size)
    assert root_from_inclusion_proof(index, size, LEAF_HASHES[index], proof) == root
    assert verify_inclusion(index, size, LEAF_HASHES[index], proof, root)


def _corruptions(
    index: int, size: int, proof: list[bytes], root: bytes
) -> list[tuple[str, int, int, bytes, list[bytes], bytes]]:
    """(label, index, size, leaf, proof, root) variants that must all be rejected."""
    leaf = LEAF_HASHES[index]
    out = []
    for wrong in (index - 1, index + 1, -1, size, size + 5):
        if wrong != index:
            out.append((f"index {wrong}", wrong, size, leaf, proof, root))
    for i in range(len(proof)):
        for bit in (0, 7, 128, 255):
            p = [bytearray(x) for x in proof]
            p[i][bit // 8] ^= 1 << (bit % 8)
            out.append(
                (f"flip bit {bit} of proof[{i}]", index, size, leaf, [bytes(x) for x in p], root)
            )
    out.append(("truncated proof", index, size, leaf, proof[:-1], root))
    out.append(("empty proof", index, size, leaf, [], root))
    out.append(("extra element", index, size, leaf, [*proof, LEAF_HASHES[0]], root))
    out.append(("extra element first", index, size, leaf, [LEAF_HASHES[0], *proof], root))
    if len(proof) > 1:
        out.append(("reversed proof", index, size, leaf, proof[::-1], root))
    out.append(("short element", index, size, leaf, [proof[0][:31], *proof[1:]], root))
    out.append(("wrong root", index, size, leaf, proof, _root_of(size - 1)))
    out.append(("root flipped", index, size, leaf, proof, bytes([root[0] ^ 1]) + root[1:]))
    out.append(("wrong leaf", index, size, LEAF_HASHES[(index + 1) % 8], proof, root))
    out.append(
        ("leaf data not hash", index, size, hashlib.sha256(LEAVES[index]).digest(), proof, root)
    )
    out.append(("size 0", index, 0, leaf, proof, root))
    return out


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION_VECTORS)
def test_inclusion_rejects_corrupted_variants(leaf: int, size: int, path: list[str]) -> None:
    index = leaf - 1
    proof = [bytes.fromhex(p) for p in path]
    root = _root_of(size)
    for label, i, n, lh, p, r in _corruptions(index, size, proof, root):
        assert not verify_inclusion(i, n, lh, p, r), label


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION_VECTORS)
def test_inclusion_rejects_wrong_tree_size(leaf: int, size: int, path: list[str]) -> None:
    index = leaf - 1
    proof = [bytes.fromhex(p) for p in path]
    for wrong in range(index + 1, 9):
        if wrong == size:
            continue
        # A proof for the tree of `size` leaves never proves inclusion in another tree.
        assert not verify_inclusion(index, wrong, LEAF_HASHES[index], proof, _root_of(wrong))
        # Against the original root it can only pass when the audit path has the same
        # shape for both sizes (RFC 9162 binds size and root together; the caller pairs them).
        if len(inclusion_proof(LEAF_HASHES[:wrong], index)) != len(proof):
            assert not verify_inclusion(index, wrong, LEAF_HASHES[index], proof, _root_of(size))


def test_inclusion_proof_index_out_of_range() -> None:
    with pytest.raises(ValueError):
        inclusion_proof(LEAF_HASHES, 8)
    with pytest.raises(ValueError):
        inclusion_proof(LEAF_HASHES, -1)
    with pytest.raises(ValueError):
        inclusion_proof([], 0)
    assert inclusion_proof(LEAF_HASHES[:1], 0) == []
    assert verify_inclusion(0, 1, LEAF_HASHES[0], [], _root_of(1))
    assert not verify_inclusion(0, 1, LEAF_HASHES[0], [LEAF_HASHES[1]], _root_of(1))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=8), min_size=1, max_size=70))
def test_every_leaf_inclusion_proof_verifies(leaves: list[bytes]) -> None:
    hashes = [leaf_hash(x) for x in leaves]
    n = len(hashes)
    root = naive_mth(leaves)
    for i in range(n):
        proof = inclusion_proof(hashes, i)
        assert len(proof) <= max(1, (n - 1).bit_length())
        assert verify_inclusion(i, n, hashes[i], proof, root)
        if n > 1:
            assert not verify_inclusion(i, n, hashes[i], proof[:-1], root)
            assert not verify_inclusion(i, n, hashes[i], [*proof, hashes[0]], root)
            other = (i + 1) % n
            if hashes[other] != hashes[i]:
                assert not verify_inclusion(i, n, hashes[other], proof, root)


# -- memory ---------------------------------------------------------------------------------


def test_stack_stays_logarithmic() -> None:
    tree = MerkleTree()
    h = leaf_hash(b"row")
    worst = 0
    for n in range(1, 100_001):
        tree.append_hash(h)
        depth = len(tree._stack)
        # One perfect subtree per set bit of n.
        assert depth == n.bit_count() <= n.bit_length()
        worst = max(worst, depth)
    assert tree.size == 100_000
    assert worst <= (100_000).bit_length()


# -- row encoding ---------------------------------------------------------------------------


def test_encode_row_distinguishes_type_confusable_values() -> None:
    values: list[object] = [1, "1", b"1", 1.0, None, 0, "", b"", 0.0, True, 2**63, str(2**63)]
    encodings = {encode_row("t", [v], [("c", v)]) for v in values[:-3]}
    assert len(encodings) == len(values) - 3
    # bool is encoded as the integer it is (stores never hand one in): documented collision.
    assert encode_row("t", [True], [("c", True)]) == encode_row("t", [1], [("c", 1)])
    # Big integers and their decimal text must still differ.
    assert encode_row("t", [2**63], []) != encode_row("t", [str(2**63)], [])
    assert encode_row("t", [2**63], []) != encode_row("t", [2**63 - 1], [])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("t", ["ab"], [("c", "x")]), ("t", ["a"], [("c", "bx")])),
        (("t", ["ab", "c"], []), ("t", ["a", "bc"], [])),
        (("t", [], [("ab", "c")]), ("t", [], [("a", "bc")])),
        (("t", [], [("a", "b"), ("c", "d")]), ("t", [], [("a", "b" + "c"), ("", "d")])),
        (("ab", ["c"], []), ("a", ["bc"], [])),
        (("t", ["a"], []), ("t", [], [("a", None)])),
        (("t", [b"ab"], [("c", b"")]), ("t", [b"a"], [("c", b"b")])),
        (("t", [1, 2], []), ("t", [12], [])),
        (("t", [None], []), ("t", [], [])),
        (("t", ["x"], [("c", "y")]), ("t", [], [("x", "c"), ("y", None)])),
    ],
)
def test_encode_row_is_unambiguous_across_boundaries(a: Row, b: Row) -> None:
    assert encode_row(*a) != encode_row(*b)


@settings(max_examples=150)
@given(
    st.tuples(
        st.text(max_size=4),
        st.lists(
            st.one_of(st.none(), st.integers(), st.text(max_size=4), st.binary(max_size=4)),
            max_size=3,
        ),
        st.lists(
            st.tuples(
                st.text(max_size=3),
                st.one_of(st.none(), st.integers(), st.text(max_size=3), st.binary(max_size=3)),
            ),
            max_size=3,
        ),
    ),
    st.tuples(
        st.text(max_size=4),
        st.lists(
            st.one_of(st.none(), st.integers(), st.text(max_size=4), st.binary(max_size=4)),
            max_size=3,
        ),
        st.lists(
            st.tuples(
                st.text(max_size=3),
                st.one_of(st.none(), st.integers(), st.text(max_size=3), st.binary(max_size=3)),
            ),
            max_size=3,
        ),
    ),
)
def test_encode_row_is_injective(a: Row, b: Row) -> None:
    def norm(row: Row) -> Row:
        table, pk, cols = row
        return (table, [(type(v), v) for v in pk], [(n, type(v), v) for n, v in cols])

    if norm(a) != norm(b):
        assert encode_row(*a) != encode_row(*b)
    else:
        assert encode_row(*a) == encode_row(*b)


def test_encode_row_rejects_unknown_types() -> None:
    with pytest.raises(TypeError):
        encode_row("t", [object()], [])
    with pytest.raises(TypeError):
        encode_row("t", [], [("c", [1, 2])])
