"""The query API: `POST /v1/memory/query`, `GET /v1/memory/entries/{entry_id}` and
`POST /v1/memory/entries/{entry_id}/feedback`; the topology reads.

The tenant is the one the authorizer proved; nothing in the request can choose it.
"""

import json
import time
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.api.http_errors import precheck_body, precheck_json, register_error_handlers
from grandbo.api.models import FeedbackRequest, QueryRequest
from grandbo.api.resolver import RestResolver
from grandbo.errors import AuthenticationError
from grandbo.observability import bind_request_keys, logger, metrics, tracer
from grandbo.runtime.after_answer import finishes_after_answer, register_after_answer
from grandbo.runtime.lambda_container import drain_retrievals, runtime, warm_at_init
from grandbo.topology.model import Namespaces

NAMESPACES = (
    "topology (dependency edges), learned (services that failed together in past "
    "incidents), or both"
)

app = RestResolver(enable_validation=True)
# in Lambda, the retrieval log's write finishes after the answer (grandbo.runtime.after_answer)
register_after_answer(drain_retrievals)
register_error_handlers(app)
# the model loaded during init, not on the first question (issue 43)
warm_at_init()


def caller_tenant() -> str:
    tenant = app.current_event.request_context.authorizer.get_context().get("tenant_id")
    if not isinstance(tenant, str) or not tenant:
        raise AuthenticationError("no tenant in the authorizer context")
    return tenant


def caller_key_id() -> str:
    key_id = app.current_event.request_context.authorizer.get_context().get("key_id")
    if not isinstance(key_id, str) or not key_id:
        raise AuthenticationError("no key id in the authorizer context")
    return key_id


@app.post("/v1/memory/query")
@tracer.capture_method
def query_memory(request: QueryRequest) -> dict[str, Any]:
    started = time.perf_counter()
    # its searches on a reader where reads scale out; a deploy's smoke check reads
    # `metadata.read_from` to show one served them (issue 35)
    result = runtime().query_org_memory(
        caller_tenant(),
        request.topic,
        caller=caller_key_id(),
        incident_id=request.incident_id,
        **request.arguments(),
    )
    metrics.add_metric(
        "QueryLatency", MetricUnit.Milliseconds, (time.perf_counter() - started) * 1000
    )
    metrics.add_metric("LexicalCandidates", MetricUnit.Count, result.metadata.lexical_candidates)
    metrics.add_metric("VectorCandidates", MetricUnit.Count, result.metadata.vector_candidates)
    if result.metadata.vector_leg_error:
        metrics.add_metric("VectorLegUnavailable", MetricUnit.Count, 1)
    return result.model_dump(mode="json")


@app.get("/v1/memory/entries/<entry_id>")
@tracer.capture_method
def get_entry(entry_id: UUID) -> dict[str, Any]:
    return runtime().service().get_entry(caller_tenant(), entry_id).model_dump(mode="json")


@app.post("/v1/memory/entries/<entry_id>/feedback")
@tracer.capture_method
def record_feedback(entry_id: UUID, request: FeedbackRequest) -> Response[Any]:
    """Did this entry help the investigation? Counted once per caller, entry and incident
    (the first verdict stands; a retry is a no-op), rate-limited per caller (429)."""
    key_id = caller_key_id()
    own = app.current_event.headers.get("idempotency-key") or app.current_event.headers.get(
        "Idempotency-Key"
    )
    outcome = (
        runtime()
        .service()
        .record_caller_feedback(
            caller_tenant(),
            entry_id,
            request.model_dump(),
            caller=key_id,
            own_key=own,
        )
    )
    if outcome.applied:
        metrics.add_metric(f"Feedback_{request.verdict}", MetricUnit.Count, 1)
    body = {
        "entry_id": str(entry_id),
        "applied": outcome.applied,
        "feedback": outcome.entry.feedback.model_dump(),
    }
    return Response(
        status_code=201 if outcome.applied else 200,
        content_type="application/json",
        body=json.dumps(body),
    )


@app.get("/v1/topology/blast-radius")
@tracer.capture_method
def blast_radius(
    node_type: Annotated[str, Query(alias="type", description="Service, Repo, Team, ...")],
    external_id: Annotated[str, Query(alias="id", min_length=1, max_length=300)],
    hops: Annotated[int, Query(ge=1, le=3)] = 3,
    as_of: Annotated[datetime | None, Query(description="ISO 8601 with a time zone")] = None,
    namespaces: Annotated[Namespaces, Query(description=NAMESPACES)] = Namespaces.TOPOLOGY,
) -> dict[str, Any]:
    """Everything affected if this node fails (its transitive dependents, or the services
    that failed with it in past incidents), nearest first."""
    radius = (
        runtime()
        .topology()
        .blast_radius(
            caller_tenant(),
            node_type,
            external_id,
            hops=hops,
            as_of=as_of,
            namespaces=namespaces,
        )
    )
    return radius.model_dump(mode="json")


@app.get("/v1/topology/criticality")
@tracer.capture_method
def criticality(
    node_type: Annotated[str, Query(alias="type")],
    external_id: Annotated[str, Query(alias="id", min_length=1, max_length=300)],
    as_of: Annotated[datetime | None, Query()] = None,
    namespaces: Annotated[Namespaces, Query(description=NAMESPACES)] = Namespaces.TOPOLOGY,
) -> dict[str, Any]:
    """Sum of 1/distance over transitive dependents, or the degree (`basis` says which)."""
    result = (
        runtime()
        .topology()
        .criticality(caller_tenant(), node_type, external_id, as_of=as_of, namespaces=namespaces)
    )
    return result.model_dump(mode="json")


@finishes_after_answer
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True
)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    return precheck_body(event) or precheck_json(event) or app.resolve(event, context)
