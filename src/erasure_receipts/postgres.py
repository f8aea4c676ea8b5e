"""The PostgreSQL attesting savers and ``digest_read_only`` (the pre-deletion digest of
a thread, installing nothing). Requires the ``postgres`` extra:
``pip install 'langgraph-erasure-receipts[postgres]'``. They live in
:mod:`erasure_receipts._savers.postgres`."""

from __future__ import annotations

from ._savers.postgres import AsyncAttestingPostgresSaver, AttestingPostgresSaver, digest_read_only

__all__ = ["AsyncAttestingPostgresSaver", "AttestingPostgresSaver", "digest_read_only"]
