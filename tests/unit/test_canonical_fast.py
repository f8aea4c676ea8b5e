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


# -- the receipt file's layout ------------------------------------------------------------

file_values = st.recursive(
    scalars | st.text(st.characters(exclude_categories=["Cs"]), max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=8), inner, max_size=5
        )
    ),
    max_leaves=25,
)


@given(file_values)
def test_orjson_file_layout_is_the_stdlib_indent_2_layout(value: object) -> None:
    """``Receipt.to_json`` writes with orjson the layout of ``json.dumps(indent=2,
    ensure_ascii=False)``: control characters, U+2028, non-ASCII text, empty containers
    and nesting come out byte for byte the same (the batch verifier's fast path and
    every receipt already written depend on it)."""
    import json

    import orjson

    assert orjson.dumps(value, option=orjson.OPT_INDENT_2) == json.dumps(
        value, indent=2, ensure_ascii=False
    ).encode("utf-8")


def test_receipt_files_keep_their_layout() -> None:
    """Every good receipt of the golden corpus is written back byte for byte."""
    from pathlib import Path

    from erasure_receipts.receipt import Receipt

    good = sorted((Path(__file__).parents[1] / "golden" / "good").glob("*.json"))
    files = [p for p in good if not p.name.endswith(".dsse.json")]
    assert files
    for path in files:
        data = path.read_bytes()
        assert Receipt.from_json(data).to_json() == data, path.name
