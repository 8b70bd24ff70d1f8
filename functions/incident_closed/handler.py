"""EventBridge incident-closed events → memory entries for corroborated findings only.

A malformed event raises InvalidEventError: EventBridge's retries and the target's DLQ
keep it for inspection, and nothing of it is stored.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from grandbo.errors import InvalidEventError
from grandbo.memory.incidents import (
    INCIDENT_CLOSED,
    INCIDENT_SOURCE,
    parse_incident_closed,
    record_incident,
)
from grandbo.observability import bind_request_keys, count_entries_created, logger, metrics, tracer
from grandbo.runtime.lambda_container import runtime


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    try:
        envelope = EventBridgeModel.model_validate(event)
    except ValidationError as exc:
        raise InvalidEventError(f"not an EventBridge event: {exc.errors()[0]['msg']}") from exc
    if (envelope.source, envelope.detail_type) != (INCIDENT_SOURCE, INCIDENT_CLOSED):
        # the rule filters these in AWS; a replay or a local delivery must not slip past
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
