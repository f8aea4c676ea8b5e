"""The streaming row hasher used by erasures equals leaf_hash(encode_row(...))."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from erasure_receipts.digest import RowLeafHasher, encode_row, leaf_hash

column_values = st.none() | st.integers(-(2**70), 2**70) | st.floats() | st.text() | st.binary()


@given(
    st.text(min_size=1, max_size=10),
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6, unique=True).flatmap(
        lambda cols: st.tuples(
            st.just(cols),
            st.lists(st.sampled_from(cols), unique=True, max_size=len(cols)),
            st.lists(column_values, min_size=len(cols), max_size=len(cols)),
        )
    ),
)
def test_streaming_hash_equals_encode_then_hash(table: str, case: tuple) -> None:  # type: ignore[type-arg]
    cols, pk, row = case
    expected = leaf_hash(
        encode_row(table, [row[cols.index(c)] for c in pk], list(zip(cols, row, strict=True)))
    )
    assert RowLeafHasher(table, cols, pk)(row) == expected
