"""The verifier's hand-written format checks agree with the JSON Schema's patterns."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from erasure_receipts.receipt import is_hex64, is_name, is_time, is_uuid

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "receipt.schema.json").read_text())
DEFS = SCHEMA["$defs"]
PATTERNS = {
    is_hex64: DEFS["hex64"]["pattern"],
    is_name: DEFS["name"]["pattern"],
    is_uuid: DEFS["predicate"]["properties"]["receipt_id"]["pattern"],
    is_time: DEFS["predicate"]["properties"]["issued_at"]["pattern"],
}
ALPHABET = "0123456789abcdefABCDEF-T:Z._/ é٣²\n"


def near_miss(fmt: str) -> st.SearchStrategy[str]:
    """Strings shaped like the format with random substitutions, and random text."""

    def mutate(s: str, data: st.DataObject) -> str:
        chars = list(s)
        for _ in range(data.draw(st.integers(0, 3))):
            if chars:
                i = data.draw(st.integers(0, len(chars) - 1))
                chars[i] = data.draw(st.sampled_from(ALPHABET))
        return "".join(chars)

    return st.builds(lambda d: mutate(fmt, d), st.data()) | st.text(ALPHABET, max_size=70)


SAMPLES = {
    is_hex64: "ab" * 32,
    is_name: "sqlite.wal_checkpoint",
    is_uuid: "123e4567-e89b-42d3-a456-426614174000",
    is_time: "2026-11-29T20:41:27.123456Z",
}


def _agree(check, value: str) -> None:  # type: ignore[no-untyped-def]
    # ECMA-262 "$" matches only at the very end; Python's also before a final newline.
    pattern = PATTERNS[check].removesuffix("$") + r"\Z"
    expected = re.search(pattern, value) is not None
    assert check(value) == expected, (check.__name__, value)


@given(
    st.sampled_from(list(SAMPLES)).flatmap(lambda c: st.tuples(st.just(c), near_miss(SAMPLES[c])))
)
@example((is_time, "2026-11-29T20:41:27Z"))
@example((is_time, "2026-11-29T20:41:27.Z"))
@example((is_time, "2026-11-29T20:41:27.1234567Z"))
@example((is_time, "٢٠٢٦-11-29T20:41:27Z"))
@example((is_name, "a" * 65))
@example((is_hex64, "AB" * 32))
@example((is_hex64, "ab" * 32 + "\n"))
def test_checks_match_schema_patterns(case: tuple[object, str]) -> None:
    check, value = case
    _agree(check, value)
