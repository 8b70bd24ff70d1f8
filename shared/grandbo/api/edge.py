"""The deployed edge's contract, in one place: every route, what API Gateway checks
before a function runs, what the WAF refuses, and the answer each refusal gets.

`infra/api.py` builds the REST API, its gateway responses and the WAF's custom responses
from these definitions, and the local gateway (`grandbo.local.runner`) enforces the same
ones in the same order, so a request the deployed edge would refuse is refused locally
first, with the same status and document. What only AWS can do (managed rule groups'
signatures, per-IP rate counting across a fleet) is listed in the README.

Order, as in AWS: the WAF (no User-Agent, a body past MAX_BODY_BYTES), then API
Gateway's routing, then the route's authorizer, then its request validator (required
parameters, then the body model), then the function.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ValidationError

from grandbo.api.models import MAX_BODY_BYTES, FeedbackRequest, QueryRequest


@dataclass(frozen=True)
class Refusal:
    """An answer of the edge itself, before any Grandbo function runs."""

    status: int
    error: str
    message: str
    field: str | None = None

    def document(self) -> dict[str, str | None]:
        return {"error": self.error, "message": self.message, "field": self.field}

    def body(self) -> str:
        """The document as API Gateway's response template and the WAF's custom body."""
        return json.dumps(self.document(), separators=(",", ":"))


# The WAF (infra/api.py: each is a Block action's custom response, which takes precedence
# over the protected resource's own responses:
# https://docs.aws.amazon.com/waf/latest/developerguide/customizing-the-response-for-blocked-requests.html)
NO_USER_AGENT = Refusal(
    403,
    "forbidden",
    "a User-Agent header is required: Grandbo's clients send 'grandbo/<version> "
    "(<component>)'; any other client must name itself",
    "User-Agent",
)
BODY_TOO_LARGE = Refusal(
    413, "payload_too_large", f"the request body is over {MAX_BODY_BYTES} bytes", "body"
)
RATE_LIMITED = Refusal(
    429, "too_many_requests", "too many requests from this address; retry after a pause"
)
# the query route's per-token bound (infra/waf.py RatePerToken): a backstop far above any
# organization's own rate, which the query function holds each caller to
TOKEN_RATE_LIMITED = Refusal(
    429,
    "too_many_requests",
    "too many questions with this token, past every organization's highest rate; retry "
    "after a pause",
)
# API Gateway's own answers (gateway responses, infra/api.py), by response type
NO_ROUTE = Refusal(404, "not_found", "no such route (docs/openapi.json lists the API)")
UNAUTHORIZED = Refusal(
    401, "unauthorized", "a valid query token is required: Authorization: Bearer gbq1..."
)
ACCESS_DENIED = Refusal(403, "forbidden", "the caller is not allowed this route")
# the local gateway's answer on an AWS_IAM route: only API Gateway can verify SigV4
IAM_IN_AWS_ONLY = Refusal(
    403,
    "forbidden",
    "/v1/iam routes take AWS's signature, verified by API Gateway in AWS: locally, sign "
    "/v1/admin with a person's key (grandbo people add)",
)
BAD_PARAMETERS = Refusal(
    400, "invalid_request", "a required request parameter is missing", "parameters"
)
BAD_BODY = Refusal(
    400,
    "invalid_request",
    "the request body does not match the route's model (docs/openapi.json)",
    "body",
)
GATEWAY_RESPONSES: Mapping[str, Refusal] = {
    "MISSING_AUTHENTICATION_TOKEN": NO_ROUTE,  # API Gateway's answer to an unknown route
    "UNAUTHORIZED": UNAUTHORIZED,
    "ACCESS_DENIED": ACCESS_DENIED,
    "BAD_REQUEST_PARAMETERS": BAD_PARAMETERS,
    "BAD_REQUEST_BODY": BAD_BODY,
    "REQUEST_TOO_LARGE": BODY_TOO_LARGE,
    "THROTTLED": Refusal(429, "too_many_requests", "the API's rate limit; retry after a pause"),
}

Function = Literal["query", "admin"]
_PARAMETER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)(\+?)\}$")


@dataclass(frozen=True)
class Route:
    """One API Gateway method: its resource path, what guards it, which function it runs."""

    method: str  # "ANY" for every method
    resource: str  # API Gateway's resource path: {name} one segment, {name+} the rest
    function: Function
    # "token": the REQUEST authorizer on the Authorization header; "signed": none at the
    # edge (a REQUEST authorizer never sees the body the HMAC covers: the function checks)
    # "iam": AWS_IAM, API Gateway verifies a SigV4 signature (grandbo.api.iam_people)
    auth: Literal["token", "signed", "iam"]
    body: type[BaseModel] | None = None
    query_parameters: tuple[str, ...] = ()
    segments: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", tuple(self.resource.strip("/").split("/")))

    @property
    def path_parameters(self) -> tuple[str, ...]:
        return tuple(
            match.group(1) for segment in self.segments if (match := _PARAMETER.match(segment))
        )

    def matches(self, method: str, path: str) -> bool:
        if self.method not in ("ANY", method):
            return False
        parts = path.strip("/").split("/") if path.strip("/") else []
        for index, segment in enumerate(self.segments):
            parameter = _PARAMETER.match(segment)
            if parameter is not None and parameter.group(2):  # greedy: one or more left
                return len(parts) > index and all(parts[index:])
            if index >= len(parts) or not parts[index]:
                return False
            if parameter is None and parts[index] != segment:
                return False
        return len(parts) == len(self.segments)


# Beacon's question: the route the edge's per-token rate counts (infra/waf.py)
QUERY_PATH = "/v1/memory/query"
ROUTES: tuple[Route, ...] = (
    Route("POST", QUERY_PATH, "query", "token", body=QueryRequest),
    Route("GET", "/v1/memory/entries/{entry_id}", "query", "token"),
    Route("POST", "/v1/memory/entries/{entry_id}/feedback", "query", "token", FeedbackRequest),
    Route("GET", "/v1/topology/blast-radius", "query", "token", query_parameters=("type", "id")),
    Route("GET", "/v1/topology/criticality", "query", "token", query_parameters=("type", "id")),
    Route("ANY", "/v1/admin/{proxy+}", "admin", "signed"),
    # the same admin routes for people signed in with their organization's identity:
    # API Gateway verifies AWS's signature (SigV4) before the function runs
    Route("ANY", "/v1/iam/admin/{proxy+}", "admin", "iam"),
)


def route_for(method: str, path: str) -> Route | None:
    """The route API Gateway would run for `method path`, or None (NO_ROUTE)."""
    return next((route for route in ROUTES if route.matches(method, path)), None)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The header's last value, whatever the case of its name (as API Gateway's event)."""
    wanted = name.lower()
    found = [value for key, value in headers.items() if key.lower() == wanted]
    return found[-1] if found else None


def waf_refusal(user_agents: Iterable[str], body_length: int) -> Refusal | None:
    """What the stage's WAF blocks before API Gateway sees the request (infra/api.py),
    given every User-Agent header the request carries: refused when none says anything."""
    if not any(value.strip() for value in user_agents):
        return NO_USER_AGENT
    if body_length > MAX_BODY_BYTES:
        return BODY_TOO_LARGE
    return None


def validation_refusal(
    route: Route, query: Mapping[str, str], headers: Mapping[str, str], body: bytes
) -> Refusal | None:
    """What the route's request validator refuses: a missing required query parameter,
    then a body its model does not accept. The gateway's draft-4 model is generated from
    the same pydantic model (grandbo.api.gateway_schema; tests/infra compare the two).
    AWS: required parameters must be "included and not blank", and "If no matching
    content type is found, request validation is not performed"
    (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-method-request-validation.html);
    a request that names no type is taken as application/json."""
    if any(not query.get(name) for name in route.query_parameters):
        return BAD_PARAMETERS
    content_type = _header(headers, "Content-Type") or "application/json"
    # the model's content type, parameters (charset) aside
    if route.body is None or content_type.split(";")[0].strip().lower() != "application/json":
        return None
    try:
        route.body.model_validate_json(body or b"{}")
    except ValidationError:
        return BAD_BODY
    return None
