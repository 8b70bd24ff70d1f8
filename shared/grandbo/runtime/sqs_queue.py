"""The embed queue in AWS: jobs as JSON SQS messages, sent in batches of ten."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grandbo.errors import EnqueueError
from grandbo.memory.domain.embed_queue import SQS_BATCH
from grandbo.memory.domain.models import EmbedJob

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SqsQueues:
    """An SQS client (bounded: grandbo.aws_clients), built on first use unless given."""

    def __init__(self, client: SQSClient | None = None) -> None:
        self._client = client

    @property
    def client(self) -> SQSClient:
        if self._client is None:
            from grandbo.aws_clients import client

            self._client = client("sqs")
        return self._client


class SqsEmbedQueue(SqsQueues):
    """Jobs as JSON message bodies, sent in batches of ten."""

    def __init__(self, queue_url: str, client: SQSClient | None = None) -> None:
        super().__init__(client)
        self.queue_url = queue_url

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
