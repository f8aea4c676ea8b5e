from __future__ import annotations

import sys
from pathlib import Path

import pytest

from erasure_receipts import Signer

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def signer() -> Signer:
    return Signer.from_seed(bytes(range(32)))


@pytest.fixture
def pub_pem(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "signer.pub.pem"
    path.write_bytes(signer.public_pem())
    return path
