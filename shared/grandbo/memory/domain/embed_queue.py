"""The embed queue port: after a write commits, its entry's `EmbedJob` goes here.

In AWS this is SQS (`grandbo.runtime.sqs_queue`); locally an in-process queue
(`grandbo.local.embed_queue`) delivers the same SQS-shaped batches to the same handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from grandbo.memory.domain.models import EmbedJob

SQS_BATCH = 10  # SendMessageBatch's limit; local batches are the same size


class EmbedQueue(Protocol):
    def send(self, jobs: Sequence[EmbedJob]) -> None:
        """Enqueue every job or raise EnqueueError."""
