"""The embed queues of local mode: a thread-safe FIFO the local runner drains, and the
command line's, which embeds as it is sent."""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence

from grandbo.memory.domain.embed_queue import SQS_BATCH
from grandbo.memory.domain.models import EmbedJob


class InProcessEmbedQueue:
    """Local mode: a thread-safe FIFO the local runner drains into the embed worker."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[EmbedJob] = queue.Queue()

    def send(self, jobs: Sequence[EmbedJob]) -> None:
        for job in jobs:
            self.jobs.put(job)

    def drain(self, limit: int = SQS_BATCH) -> list[EmbedJob]:
        batch: list[EmbedJob] = []
        while len(batch) < limit:
            try:
                batch.append(self.jobs.get_nowait())
            except queue.Empty:
                break
        return batch


class InlineEmbedQueue:
    """The command line's queue: a job is embedded as it is sent, in the command's own
    process, so a write from the CLI is embedded before the command returns (a `grandbo
    serve` running beside it never hears of the CLI's writes: before, they stayed
    unembedded until `grandbo embed-pending`). A failure raises, so the write's outcome
    says the job did not reach the queue (`embed_enqueued` False) and the command says
    what to run; the write stands."""

    def __init__(self, embed: Callable[[Sequence[EmbedJob]], int]) -> None:
        self._embed = embed

    def send(self, jobs: Sequence[EmbedJob]) -> None:
        self._embed(jobs)
