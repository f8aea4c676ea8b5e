"""A receipt log's config file is read as strictly as every other input: JSON a second
reader could parse differently (duplicate member names, NaN, trailing bytes) is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from erasure_receipts import ReceiptLog, Signer
from erasure_receipts.errors import LogError

ORIGIN = "example.test/erasure-log"


def _config(tmp_path: Path) -> Path:
    ReceiptLog(tmp_path / "log", signer=Signer.from_seed(b"\x11" * 32), origin=ORIGIN)
    return tmp_path / "log" / "log.conf"


def test_a_well_formed_config_opens(tmp_path: Path) -> None:
    _config(tmp_path)
    assert ReceiptLog(tmp_path / "log").origin == ORIGIN


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("{", '{"origin": "attacker.test/log", ', 1),  # duplicate name
        lambda t: t.rstrip() + " {}",  # trailing bytes
        lambda t: t.replace("{", '{"x": NaN, ', 1),  # not JSON's numbers
    ],
    ids=["duplicate-member", "trailing-bytes", "nan"],
)
def test_a_config_two_readers_could_disagree_on_is_refused(tmp_path: Path, edit: object) -> None:
    config = _config(tmp_path)
    text = config.read_text()
    config.write_text(edit(text))  # type: ignore[operator]
    with pytest.raises(LogError) as exc:
        ReceiptLog(tmp_path / "log")
    assert exc.value.reason == "malformed_log"
