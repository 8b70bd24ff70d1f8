"""The embed queue: after a write commits, its entry's `EmbedJob` goes here.

In AWS this is SQS (the embed worker is its event source); locally an in-process queue
delivers the same SQS-shaped batches to the same handler.
"""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from grandbo.errors import EnqueueError
from grandbo.models import EmbedJob

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

SQS_BATCH = 10  # SendMessageBatch's limit


class EmbedQueue(Protocol):
    def send(self, jobs: Sequence[EmbedJob]) -> None:
        """Enqueue every job or raise EnqueueError."""


class SqsEmbedQueue:
    """Jobs as JSON message bodies, sent in batches of ten."""

    def __init__(self, queue_url: str, client: SQSClient | None = None) -> None:
        self.queue_url = queue_url
        self._client = client

    @property
    def client(self) -> SQSClient:
        if self._client is None:
            import boto3

            self._client = boto3.client("sqs")
        return self._client

    def send(self, jobs: Sequence[EmbedJob]) -> None:
        for start in range(0, len(jobs), SQS_BATCH):
            chunk = jobs[start : start + SQS_BATCH]
            try:
                response = self.client.send_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "MessageBody": job.model_dump_json()}
                        for i, job in enumerate(chunk)
                    ],
                )
            except Exception as exc:
                raise EnqueueError(f"SQS refused {len(chunk)} embed job(s): {exc}") from exc
            if response.get("Failed"):
                codes = sorted({f["Code"] for f in response["Failed"]})
                raise EnqueueError(f"SQS refused {len(response['Failed'])} job(s): {codes}")


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
