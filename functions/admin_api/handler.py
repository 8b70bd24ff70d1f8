"""The signed admin API: the organization's memory, curated by its people and its tools.

Every request is verified (HMAC-SHA256 over timestamp, nonce, method, path and the raw
body; 5-minute window; one use per nonce), or verified by AWS (the /v1/iam routes), before
routing; the tenant is the signing key's, and the caller's role must allow the route. The
routes are grouped by area, each a router of its own: entries, curation's reads,
the organization, the topology, people. `Idempotency-Key` makes a retried write a no-op.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.admin_api import curation_reads, entries, organization, people, topology
from grandbo.api.auth import SIGNATURE_WINDOW_S, Caller, verify_admin_request
from grandbo.api.http_errors import (
    precheck_body,
    precheck_json,
    proxy_error,
    register_error_handlers,
    store_unavailable,
)
from grandbo.api.iam_people import IAM_PREFIX
from grandbo.api.people import may, role_needed
from grandbo.api.resolver import RestResolver
from grandbo.errors import (
    REPLAYED,
    REPLAYED_MESSAGE,
    AuthenticationError,
    ForbiddenError,
    StoreUnavailableError,
)
from grandbo.observability import bind_request_keys, logger, metrics, tracer
from grandbo.runtime.after_answer import finishes_after_answer, register_after_answer
from grandbo.runtime.lambda_container import drain_retrievals, runtime, warm_at_init

NONCE_RETENTION_S = 3 * SIGNATURE_WINDOW_S
_NOT_OUR_PERSON = (
    "this AWS identity is none of Grandbo's people: sign in through IAM Identity Center with "
    "a permission set the stack maps to an organization (docs/OPERATIONS.md)"
)

app = RestResolver(enable_validation=True)
# in Lambda, the retrieval log's write finishes after the answer (grandbo.runtime.after_answer)
register_after_answer(drain_retrievals)
register_error_handlers(app)
for area in (entries, curation_reads, organization, topology, people):
    app.include_router(area.router)
# the console's searches meet the topic's deadline from the first (issue 43)
warm_at_init()


def authenticate(event: APIGatewayProxyEvent) -> Caller:
    """The caller a signed request proves; its nonce is spent only once the signature holds."""
    nonces = runtime().nonces()

    def claim(caller: Caller, nonce: str) -> bool:
        return nonces.claim_nonce(caller.tenant_id, caller.key_id, nonce, NONCE_RETENTION_S)

    raw = event.decoded_body or ""
    return verify_admin_request(
        runtime().keyring(),
        event.headers,
        event.http_method,
        event.path,
        raw.encode("utf-8", "surrogatepass"),
        claim,
    )


def iam_caller(event: dict[str, Any], context: LambdaContext) -> tuple[Caller, dict[str, Any]]:
    """The person of a request API Gateway authorized with AWS's signature (the route's
    authorization type AWS_IAM: the function runs only for a verified identity), and the
    event as the admin routes read it (its path without the /v1/iam prefix). The person's
    role must be of the account this function runs in (its ARN's account field)."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    account_id = str(context.invoked_function_arn).split(":")[4]
    caller = runtime().iam_people().caller(identity.get("userArn"), account_id)
    path = "/v1" + str(event["path"]).removeprefix(IAM_PREFIX)
    return caller, {**event, "path": path}


@finishes_after_answer
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True
)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    rejected = precheck_body(event)
    if rejected is not None:
        return rejected
    if event.get("queryStringParameters"):
        # the signature covers the path, not a query string: admin routes take none
        return proxy_error(400, "invalid_request", "admin routes take no query string", "query")
    # Authenticate before routing or validation: an unsigned caller learns nothing else.
    try:
        if str(event.get("path", "")).startswith(f"{IAM_PREFIX}/admin/"):
            try:
                caller, event = iam_caller(event, context)
            except AuthenticationError as exc:  # verified by AWS, but none of our people
                logger.warning("IAM caller not mapped", extra={"reason": exc.reason})
                return proxy_error(403, "forbidden", _NOT_OUR_PERSON)
        else:
            caller = authenticate(APIGatewayProxyEvent(event))
    except AuthenticationError as exc:
        logger.warning("admin request not authenticated", extra={"reason": exc.reason})
        if exc.reason == REPLAYED:  # its signature held: its sender is told what to do
            return proxy_error(401, "replayed", REPLAYED_MESSAGE)
        return proxy_error(401, "unauthorized", "the request is not authenticated")
    except StoreUnavailableError:
        logger.exception("database unavailable while checking the nonce")
        return store_unavailable()
    bind_request_keys(tenant_id=caller.tenant_id, key_id=caller.key_id)
    method, path = event.get("httpMethod", ""), event.get("path", "")
    needed = role_needed(method, path)
    if not may(caller.role, needed):
        # before validation: a person learns what they may not do, not how to shape it
        logger.info("admin request beyond the caller's role", extra={"role": caller.role})
        return proxy_error(
            403, "forbidden", str(ForbiddenError(caller.role, needed, f"{method} {path}"))
        )
    rejected = precheck_json(event)
    if rejected is not None:
        return rejected
    app.append_context(caller=caller)  # type: ignore[no-untyped-call]
    return app.resolve(event, context)
