"""The batch (orjson) canonical encoder is byte-identical to the reference one."""

from __future__ import annotations

import string
from collections.abc import Iterator

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from erasure_receipts import canonical
from erasure_receipts.errors import MalformedReceiptError

ascii_keys = st.text(string.printable, max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(ascii_keys, inner, max_size=5),
    max_leaves=25,
)


@pytest.fixture
def fast() -> Iterator[None]:
    canonical.use_orjson()
    try:
        yield
    finally:
        canonical._orjson_dumps = None


@given(values)
def test_orjson_path_matches_reference(value: object) -> None:
    canonical.use_orjson()
    try:
        fast = canonical.canonicalize_ascii_keys(value)
    finally:
        canonical._orjson_dumps = None
    assert fast == canonical.canonicalize_ascii_keys(value) == canonical.canonicalize(value)
    assert fast == rfc8785.dumps(value)


def test_orjson_path_rejects_lone_surrogates(fast: None) -> None:
    with pytest.raises(MalformedReceiptError) as ei:
        canonical.canonicalize_ascii_keys({"a": "\ud800"})
    assert ei.value.reason == "not_utf8"
