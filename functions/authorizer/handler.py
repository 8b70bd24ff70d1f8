"""API Gateway REQUEST authorizer: a `Bearer gbq1...` token becomes the caller's tenant.

Allowed requests reach the query Lambda with `tenant_id` in the authorizer context; a
missing, malformed, expired or forged token is refused with 401 before any Lambda runs.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerRequestEvent,
    APIGatewayAuthorizerResponse,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.api.auth import verify_query_token
from grandbo.errors import AuthenticationError
from grandbo.observability import bind_request_keys, logger
from grandbo.runtime.lambda_container import runtime


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    request = APIGatewayAuthorizerRequestEvent(event)
    try:
        caller = verify_query_token(
            runtime().keyring(),
            request.headers.get("authorization") or request.headers.get("Authorization"),
        )
    except AuthenticationError as exc:
        logger.warning("query token refused", extra={"reason": exc.reason})
        raise Exception("Unauthorized") from None  # API Gateway's contract for a 401
    arn = request.parsed_arn
    policy = APIGatewayAuthorizerResponse(
        principal_id=caller.key_id,
        context={"tenant_id": caller.tenant_id, "key_id": caller.key_id},
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
    )
    policy.allow_all_routes()
    return policy.asdict()
