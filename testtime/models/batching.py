"""Micro-batching for local engines: concurrent single-sample requests become one batched generate call.

The rollout engine sends one request per sample; on a local model that would waste the batch dimension.
Requests that arrive while a batch runs are grouped (by the backend's key: which settings may share a batch)
and run together in a worker thread, so the event loop keeps scheduling while the engine computes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from testtime.core.model import BatchCounts
from testtime.core.records import Completion, Message, SamplingParams


@dataclass
class BatchRow:
    messages: Sequence[Message]
    n: int
    params: SamplingParams
    future: asyncio.Future[list[Completion]] = field(repr=False)


RunBatch = Callable[[list[BatchRow]], list[list[Completion]]]


class MicroBatcher:
    def __init__(
        self, run_batch: RunBatch, max_sequences: int, group_key: Callable[[SamplingParams], Hashable]
    ) -> None:
        self.run_batch = run_batch
        self.max_sequences = max_sequences
        self.group_key = group_key
        self._pending: list[BatchRow] = []
        self._worker: asyncio.Task[None] | None = None
        self.counts = BatchCounts(max_rows=max_sequences)  # the forward passes run, and the rows they carried

    async def submit(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        row = BatchRow(messages, n, params, asyncio.get_running_loop().create_future())
        self._pending.append(row)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await row.future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(0.002)  # let callers scheduled in the same tick join this batch
            batch = self._take_group()
            self.counts.add(sum(row.n for row in batch))
            try:
                results = await asyncio.to_thread(self.run_batch, batch)
            except Exception as exc:  # noqa: BLE001 - delivered to every waiting caller, who re-raises it
                for row in batch:
                    if not row.future.done():
                        row.future.set_exception(exc)
                continue
            for row, completions in zip(batch, results, strict=True):
                if not row.future.done():
                    row.future.set_result(completions)

    def _take_group(self) -> list[BatchRow]:
        key = self.group_key(self._pending[0].params)
        batch, rest, sequences = [], [], 0
        for row in self._pending:
            if self.group_key(row.params) == key and (not batch or sequences + row.n <= self.max_sequences):
                batch.append(row)
                sequences += row.n
            else:
                rest.append(row)
        self._pending = rest
        return batch
