"""Domain errors to HTTP responses, in one place for every API handler.

400 bad field, 401 not authenticated, 404 no such entry (in this tenant), 409 conflict,
413 body too large, 422 request shape or topic contract, 503 database unavailable.
Nothing a caller sends produces a 500.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from grandbo.api_models import MAX_BODY_BYTES
from grandbo.errors import (
    AuthenticationError,
    EntryNotActiveError,
    EntryNotFoundError,
    InvalidInputError,
    InvalidTopicError,
    RevisionConflictError,
)
from grandbo.observability import logger


class PayloadTooLargeError(Exception):
    """The request body exceeds the API's documented limit."""


def error_response(
    status: int, error: str, message: str, field: str | None = None
) -> Response[Any]:
    body: dict[str, Any] = {"error": error, "message": message}
    if field is not None:
        body["field"] = field
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body)
    )


def proxy_error(status: int, error: str, message: str) -> dict[str, Any]:
    """An API Gateway proxy response, for errors raised before a resolver runs."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps({"error": error, "message": message}),
        "isBase64Encoded": False,
    }


def reject_large_bodies(
    app: APIGatewayRestResolver, next_middleware: NextMiddleware
) -> Response[Any]:
    """413 before any parsing when the raw body exceeds MAX_BODY_BYTES."""
    body = app.current_event.body or ""
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"the request body exceeds {MAX_BODY_BYTES} bytes")
    return next_middleware(app)


def register_error_handlers(app: APIGatewayRestResolver) -> None:
    """Map every domain error to its status, and cap request bodies."""
    app.use(middlewares=[reject_large_bodies])

    @app.exception_handler(RequestValidationError)
    def _request_shape(exc: RequestValidationError) -> Response[Any]:
        error = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "path")]
        field = "body" if error.get("type") == "json_invalid" else ".".join(loc) or "body"
        return error_response(422, "invalid_request", f"{field}: {error.get('msg')}", field)

    @app.exception_handler(InvalidTopicError)
    def _topic(exc: InvalidTopicError) -> Response[Any]:
        return error_response(422, "invalid_topic", exc.message, exc.field)

    @app.exception_handler(InvalidInputError)
    def _input(exc: InvalidInputError) -> Response[Any]:
        return error_response(400, "invalid_input", f"{exc.field}: {exc.message}", exc.field)

    @app.exception_handler(AuthenticationError)
    def _auth(exc: AuthenticationError) -> Response[Any]:
        logger.warning("request not authenticated", extra={"reason": exc.reason})
        return error_response(401, "unauthorized", "the request is not authenticated")

    @app.exception_handler(EntryNotFoundError)
    def _not_found(exc: EntryNotFoundError) -> Response[Any]:
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(RevisionConflictError)
    def _conflict(exc: RevisionConflictError) -> Response[Any]:
        return error_response(409, "revision_conflict", str(exc), "expected_revision")

    @app.exception_handler(EntryNotActiveError)
    def _not_active(exc: EntryNotActiveError) -> Response[Any]:
        return error_response(409, "entry_not_active", str(exc))

    @app.exception_handler(PayloadTooLargeError)
    def _too_large(exc: PayloadTooLargeError) -> Response[Any]:
        return error_response(413, "payload_too_large", str(exc))

    @app.exception_handler(psycopg.OperationalError)
    def _database(exc: psycopg.OperationalError) -> Response[Any]:
        logger.exception("database unavailable")
        return error_response(503, "unavailable", "the memory store is unavailable; retry")
