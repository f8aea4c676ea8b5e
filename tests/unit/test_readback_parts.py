"""A read-back split into parts (``readback.split``) adds up to the whole
(``readback.merged``): every thread in exactly one part, found items summed."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from erasure_receipts._engine.readback import merged, split
from erasure_receipts._engine.types import ErasureRequest


def _subject(threads: list[str], store: tuple[tuple[str, ...], ...] = ()) -> ErasureRequest:
    return ErasureRequest("subject:x", store, True, False, kind="subject",
                          threads=tuple(threads), subject="subject:x")  # fmt: skip


@given(st.lists(st.text(min_size=1, max_size=4), unique=True, max_size=200),
       st.integers(1, 64))  # fmt: skip
def test_every_thread_is_in_exactly_one_part(threads: list[str], size: int) -> None:
    parts = split(_subject(threads), size)
    assert [t for p in parts for t in p.threads] == threads
    assert all(len(p.threads) <= size for p in parts) or len(parts) == 1
    assert all(replace(p, threads=()) == replace(parts[0], threads=()) for p in parts)


def test_what_is_not_split() -> None:
    many = [f"t{i}" for i in range(100)]
    with_store = _subject(many, (("users", "a"),))
    assert split(with_store, 10) == [with_store]  # the store's check is not per thread
    thread = ErasureRequest("t1", (), True, False)
    assert split(thread, 1) == [thread]


def test_merged_adds_up_what_was_found() -> None:
    a = [("api_get_tuple_none", 0, "1 ns"), ("api_list_empty", 2, "all")]
    b = [("api_get_tuple_none", 1, "1 ns"), ("api_list_empty", 0, "all")]
    assert merged([a, b]) == [("api_get_tuple_none", 1, "1 ns"), ("api_list_empty", 2, "all")]
    assert merged([a]) == a and merged([]) == []
