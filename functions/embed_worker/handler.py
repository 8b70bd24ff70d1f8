"""SQS embed worker: each record is one EmbedJob; failures are reported per record.

A provider failure (throttling, 5xx, timeout, a vector that breaks the 1024 contract)
fails only that record, which SQS redelivers and finally dead-letters; the entry itself
is never touched except by a successful, revision-guarded vector write. A record whose
entry already has its vector costs no provider call.

A record the function has no time left for (under DEADLINE_MARGIN_MS) is not tried: its
job is sent to the queue again as a new message and the record reported done, so the
deferral spends none of its retries. SQS counts every receive toward the redrive
policy's maxReceiveCount whatever the consumer did with it ("If the receive count for a
message exceeds the maximum receive count, Amazon SQS moves the message to the
dead-letter queue": https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html),
so reporting it failed five times would dead-letter a job never tried. Only if the
re-send fails is the record reported failed (SQS then hands it out again).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.errors import EnqueueError, GrandboError
from grandbo.memory.domain.models import EmbedJob
from grandbo.observability import bind_request_keys, logger, metrics, tracer
from grandbo.runtime.lambda_container import runtime

# A batch where every record failed is reported like any other partial failure, so each
# record is retried and dead-lettered on its own instead of failing the invocation.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


# The longest one record can take: a Titan call's worst case (grandbo.aws_clients,
# 9 s), the database's connect and write, and a re-send's; a record starts only if that
# much time is left.
DEADLINE_MARGIN_MS = 25_000


class DeadlineError(GrandboError):
    """Too little of the invocation is left to embed this record; SQS will redeliver it."""


@tracer.capture_method
def embed_record(record: SQSRecord, lambda_context: LambdaContext) -> int:
    job = EmbedJob.model_validate_json(record.body)
    if lambda_context.get_remaining_time_in_millis() < DEADLINE_MARGIN_MS:
        defer(job, record)
        return 0
    try:
        stored = runtime().service().embed_jobs([job])
    except Exception:
        metrics.add_metric("EmbedFailures", MetricUnit.Count, 1)
        raise
    metrics.add_metric("EmbeddingsWritten", MetricUnit.Count, stored)
    return stored


def defer(job: EmbedJob, record: SQSRecord) -> None:
    """The job again, as a new message with receives of its own; DeadlineError if the
    queue refuses it (the record is then reported failed and SQS redelivers it)."""
    queue = runtime().embed_queue
    try:
        if queue is None:
            raise EnqueueError("no embed queue configured")
        queue.send([job])
    except EnqueueError as exc:
        metrics.add_metric("EmbedDeferralsFailed", MetricUnit.Count, 1)
        raise DeadlineError(
            f"under {DEADLINE_MARGIN_MS} ms left and not re-sent ({exc}): "
            f"record {record.message_id}"
        ) from exc
    metrics.add_metric("EmbedDeferred", MetricUnit.Count, 1)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    return dict(
        process_partial_response(
            event=event, record_handler=embed_record, processor=processor, context=context
        )
    )
