"""The golden corpus is frozen: receipts issued by earlier versions must keep verifying
exactly as they are, so no file of it may change. ``tests/golden/SHA256SUMS`` pins every
file's bytes; a new case is added with a new line, never by editing an old one."""

from __future__ import annotations

import hashlib
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _pinned() -> dict[str, str]:
    out = {}
    for line in (GOLDEN / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        out[name] = digest
    return out


def test_every_corpus_file_is_pinned_and_unchanged() -> None:
    pinned = _pinned()
    present = {
        str(p.relative_to(GOLDEN))
        for d in ("good", "bad", "keys")
        for p in (GOLDEN / d).rglob("*")
        if p.is_file()
    }
    assert present == set(pinned), "a corpus file was added or removed without SHA256SUMS"
    for name, digest in pinned.items():
        assert hashlib.sha256((GOLDEN / name).read_bytes()).hexdigest() == digest, name
