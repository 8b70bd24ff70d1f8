"""What the admin API's routes share: the write context of a signed request (who writes,
under which idempotency key) and the answer a write makes."""

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from aws_lambda_powertools.metrics import MetricUnit

from grandbo.api.auth import Caller
from grandbo.memory.domain.idempotency import KeySpace, caller_key, idempotency_key
from grandbo.memory.domain.models import WriteContext, WriteOutcome
from grandbo.observability import count_entries_created, metrics


def write_context(router: APIGatewayRouter, *operation: str) -> WriteContext:
    """Who writes, and the key: the caller's Idempotency-Key for this operation, or the
    request's single-use nonce (a request without a key is never a replay)."""
    caller: Caller = router.context["caller"]
    headers = router.current_event.headers
    key = headers.get("idempotency-key") or headers.get("Idempotency-Key")
    nonce = headers.get("x-grandbo-nonce") or headers.get("X-Grandbo-Nonce") or ""
    if caller.via == "iam":  # no nonce: API Gateway's id of this request is its own
        nonce = router.current_event.request_context.request_id
    if key is None:
        stored = idempotency_key(KeySpace.ADMIN, caller.key_id, "nonce", nonce)
    else:  # each signing key has its own keys: two admin tools never meet by accident
        stored = idempotency_key(KeySpace.ADMIN, caller.key_id, *operation, caller_key(key))
    return WriteContext(actor=caller.actor, idempotency_key=stored)


def written(outcome: WriteOutcome, status: int, *, created: bool = False) -> Response[Any]:
    if created and outcome.applied:
        count_entries_created(outcome.entry.origin.value, 1)
    if outcome.embed_enqueued is False:
        metrics.add_metric("EnqueueFailures", MetricUnit.Count, 1)
    return Response(
        status_code=status if outcome.applied else 200,
        content_type=content_types.APPLICATION_JSON,
        body=outcome.model_dump_json(),
    )
