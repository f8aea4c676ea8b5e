"""LangGraph's own conformance suite against both Postgres savers (real server).

``validate`` drives the async API. The async saver is run as is; the sync saver is run
through a thin adapter whose async methods call its sync ones on a worker thread, so
what is exercised is ``AttestingPostgresSaver``'s own ``put``/``list``/``delete_thread``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from erasure_receipts import AsyncAttestingPostgresSaver, AttestingPostgresSaver, Signer

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}


class SyncUnderTest(AttestingPostgresSaver):
    """The sync saver, reachable from the (async) conformance suite."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(  # type: ignore[override]
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await asyncio.to_thread(lambda: list(self.list(config, **kwargs))):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _check(report: CapabilityReport, minimum: int) -> int:
    failed = {
        cap: r.tests_failed for cap, r in report.results.items() if r.detected and not r.passed
    }
    assert failed == {}
    ran = sum(r.tests_passed for r in report.results.values())
    assert ran >= minimum, ran  # the suite really ran
    passed = {cap for cap, r in report.results.items() if r.passed}
    assert passed >= BASE | {"prune"}, report.results
    return ran


async def test_async_attesting_postgres_saver_conformance(pg_db: str) -> None:
    @checkpointer_test(name="AsyncAttestingPostgresSaver")
    async def factory() -> AsyncIterator[AsyncAttestingPostgresSaver]:
        async with AsyncAttestingPostgresSaver.from_conn_string(
            pg_db, signer=Signer.generate()
        ) as saver:
            await saver.setup()
            yield saver

    report = await validate(factory)
    ran = _check(report, 66)
    async with AsyncPostgresSaver.from_conn_string(pg_db) as parent:
        parent_caps = DetectedCapabilities.from_instance(parent).detected
    async with AsyncAttestingPostgresSaver.from_conn_string(
        pg_db, signer=Signer.generate()
    ) as ours:
        assert parent_caps <= DetectedCapabilities.from_instance(ours).detected
    print(f"conformance AsyncAttestingPostgresSaver: {ran} tests passed")


async def test_sync_attesting_postgres_saver_conformance(pg_db: str) -> None:
    @checkpointer_test(name="AttestingPostgresSaver")
    async def factory() -> AsyncIterator[AttestingPostgresSaver]:
        cm = SyncUnderTest.from_conn_string(pg_db, signer=Signer.generate())
        saver = await asyncio.to_thread(cm.__enter__)
        try:
            await asyncio.to_thread(saver.setup)
            yield saver
        finally:
            await asyncio.to_thread(cm.__exit__, None, None, None)

    report = await validate(factory)
    ran = _check(report, 66)
    with PostgresSaver.from_conn_string(pg_db) as parent:
        parent_caps = DetectedCapabilities.from_instance(parent).detected
    # The parent (sync only) has no async methods; ours reaches them through the adapter.
    assert parent_caps <= BASE | {"prune", "copy_thread", "delete_for_runs"}
    print(f"conformance AttestingPostgresSaver: {ran} tests passed")
