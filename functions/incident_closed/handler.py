"""The incident queue's messages → memory entries for corroborated findings only, and the
incident's verdicts on the memory entries it recalled (`grandbo.memory.incidents`).

The incident-closed rule puts each event on the incident queue (SQS); this function takes
batches of it and reports each record on its own (partial batch responses):

- recorded (or a redelivery, which records nothing new): done;
- an event that can never be recorded (not an incident-closed event, a field the write
  refuses: InvalidEventError / InvalidInputError): sent to the dead-letter queue at once,
  with the reason as its `error` attribute, and done; nothing of it is stored;
- anything else (the database in a failover, a patch window): failed, and kept invisible
  for its next back-off step (grandbo.runtime.incident_queue), so an outage of an hour
  or more dead-letters nothing.

The dead-letter queue then holds one shape: a message whose body is the EventBridge event.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from grandbo.errors import EnqueueError, InvalidEventError, InvalidInputError
from grandbo.memory.incidents import (
    INCIDENT_CLOSED,
    INCIDENT_SOURCE,
    parse_incident_closed,
    record_incident,
)
from grandbo.observability import bind_request_keys, count_entries_created, logger, metrics, tracer
from grandbo.runtime.lambda_container import runtime

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def deliver(body: str) -> dict[str, Any]:
    """Record the incident-closed event in one message body; what it created.

    InvalidEventError for a body that is not one (nothing is stored); the store's errors
    as they come (the caller retries)."""
    try:
        # json first: a lone surrogate escaped in a title is the finding's problem (named
        # by the incident's model), not a body pydantic's JSON parser refuses unnamed
        event = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting past the stack
        raise InvalidEventError(f"the message body is not JSON: {exc}") from exc
    try:
        envelope = EventBridgeModel.model_validate(event)
    except ValidationError as exc:
        raise InvalidEventError(f"not an EventBridge event: {exc.errors()[0]['msg']}") from exc
    if (envelope.source, envelope.detail_type) != (INCIDENT_SOURCE, INCIDENT_CLOSED):
        # the rule filters these in AWS; a redrive or a local delivery must not slip past
        raise InvalidEventError(
            f"not an incident-closed event: source {envelope.source!r}, "
            f"detail-type {envelope.detail_type!r}"
        )
    incident = parse_incident_closed(envelope.detail)
    bind_request_keys(tenant_id=incident.tenant_id, incident_id=incident.incident_id)
    outcomes = record_incident(runtime().service(), incident)
    created = sum(o.applied for o in outcomes)
    count_entries_created("incident", created)
    metrics.add_metric(
        "EnqueueFailures", MetricUnit.Count, sum(o.embed_enqueued is False for o in outcomes)
    )
    # not "created": a LogRecord attribute, which logging refuses to overwrite (KeyError)
    logger.info(
        "incident recorded", extra={"corroborated": len(outcomes), "entries_created": created}
    )
    return {
        "incident_id": incident.incident_id,
        "entries": [str(o.entry.entry_id) for o in outcomes],
        "created": created,
    }


@tracer.capture_method
def record_message(record: SQSRecord) -> None:
    bind_request_keys()  # nothing of the previous record's incident
    queue = runtime().incident_queue
    try:
        deliver(record.body)
    except (InvalidEventError, InvalidInputError) as exc:
        # it would fail the same way on every retry: dead-lettered now, with the reason
        logger.warning("incident-closed event refused", extra={"reason": str(exc)})
        if queue is None:
            raise
        queue.dead_letter(record.body, str(exc))  # EnqueueError: reported failed, retried
        metrics.add_metric("IncidentsRefused", MetricUnit.Count, 1)
    except Exception:
        metrics.add_metric("IncidentRetries", MetricUnit.Count, 1)
        if queue is not None:
            try:
                queue.back_off(
                    record.receipt_handle, int(record.attributes.approximate_receive_count)
                )
            except EnqueueError:
                logger.exception("back-off not set: the queue's visibility timeout applies")
        raise


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    return dict(
        process_partial_response(
            event=event, record_handler=record_message, processor=processor, context=context
        )
    )
