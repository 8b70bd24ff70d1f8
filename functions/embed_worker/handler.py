"""SQS embed worker: each record is one EmbedJob; failures are reported per record.

A provider failure (throttling, 5xx, timeout, a vector that breaks the 1024 contract)
fails only that record, which SQS redelivers and finally dead-letters; the entry itself
is never touched except by a successful, revision-guarded vector write. A record whose
entry already has its vector costs no provider call. Records the function has no time
left for (under DEADLINE_MARGIN_MS) are reported failed without being tried: SQS hands
them out again, instead of a timeout losing the whole batch's report.
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

from grandbo.errors import GrandboError
from grandbo.memory.models import EmbedJob
from grandbo.observability import bind_request_keys, logger, metrics, tracer
from grandbo.runtime.lambda_container import runtime

# A batch where every record failed is reported like any other partial failure, so each
# record is retried and dead-lettered on its own instead of failing the invocation.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


# The longest one record can take: a Titan call is at most 3 attempts of a 2 s connect and
# a 5 s read (grandbo.embedding.titan), plus the database; a record starts only if that
# much time is left.
DEADLINE_MARGIN_MS = 25_000


class DeadlineError(GrandboError):
    """Too little of the invocation is left to embed this record; SQS will redeliver it."""


@tracer.capture_method
def embed_record(record: SQSRecord, lambda_context: LambdaContext) -> int:
    if lambda_context.get_remaining_time_in_millis() < DEADLINE_MARGIN_MS:
        metrics.add_metric("EmbedDeferred", MetricUnit.Count, 1)
        raise DeadlineError(f"under {DEADLINE_MARGIN_MS} ms left: record {record.message_id}")
    job = EmbedJob.model_validate_json(record.body)
    try:
        stored = runtime().service().embed_jobs([job])
    except Exception:
        metrics.add_metric("EmbedFailures", MetricUnit.Count, 1)
        raise
    metrics.add_metric("EmbeddingsWritten", MetricUnit.Count, stored)
    return stored


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
