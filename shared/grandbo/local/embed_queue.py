"""The embed queue of local mode: a thread-safe FIFO the local runner drains."""

from __future__ import annotations

import queue
from collections.abc import Sequence

from grandbo.memory.embed_queue import SQS_BATCH
from grandbo.memory.models import EmbedJob


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
