"""Domain errors to HTTP responses, in one place for every API handler.

400 bad field or body, 401 not authenticated, 404 no such entry (in this tenant), 409
conflict, 413 body too large, 422 request shape or topic contract, 503 database
unavailable. Nothing a caller sends should produce a 500; a bug that does is logged.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from grandbo.api.models import MAX_BODY_BYTES
from grandbo.api.request_body import BodyProblem, parse_json_object
from grandbo.errors import (
    REPLAYED,
    REPLAYED_MESSAGE,
    AuthenticationError,
    EmbeddingError,
    EntryNotActiveError,
    EntryNotFoundError,
    EntryRedactedError,
    ForbiddenError,
    InvalidInputError,
    InvalidTopicError,
    KeyringUnreadableError,
    MergeRefusedError,
    NotARecurrenceError,
    PeopleManagedElsewhereError,
    PersonNotFoundError,
    RateLimitedError,
    RetrievalNotFoundError,
    RevisionConflictError,
    StoreUnavailableError,
    VerdictNotFoundError,
)
from grandbo.observability import logger

# a 503's Retry-After: a failover, a cold secret read or a busy proxy clears within seconds
RETRY_AFTER_S = 5
STORE_UNAVAILABLE = f"the memory store is unavailable; retry after {RETRY_AFTER_S} s"

# 415, for a body declared as anything but JSON (before the resolver, or by it)
_NOT_JSON = (415, "unsupported_media_type", "Content-Type must be application/json", "Content-Type")


def error_body(error: str, message: str, field: str | None = None) -> str:
    """The one error document every API answers with: error, message, and the field."""
    body: dict[str, Any] = {"error": error, "message": message}
    if field is not None:
        body["field"] = field
    return json.dumps(body)


def error_response(
    status: int, error: str, message: str, field: str | None = None
) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_body(error, message, field),
    )


def proxy_error(status: int, error: str, message: str, field: str | None = None) -> dict[str, Any]:
    """An API Gateway proxy response, for errors raised before a resolver runs."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": error_body(error, message, field),
        "isBase64Encoded": False,
    }


def store_unavailable() -> dict[str, Any]:
    """The proxy response for a store (or its credentials) out of reach: 503, Retry-After."""
    response = proxy_error(503, "unavailable", STORE_UNAVAILABLE)
    response["headers"]["Retry-After"] = str(RETRY_AFTER_S)
    return response


def precheck_body(event: dict[str, Any]) -> dict[str, Any] | None:
    """413 for a body over MAX_BODY_BYTES, 400 for one that is not UTF-8 text; else None.

    Runs before the resolver, so no parser ever sees an oversized or binary body.
    """
    body = event.get("body") or ""
    if not isinstance(body, str):
        return proxy_error(400, "invalid_request", "body: must be UTF-8 JSON")
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
            raw.decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return proxy_error(400, "invalid_request", "body: must be UTF-8 JSON", "body")
    else:
        raw = body.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_BODY_BYTES:
        return proxy_error(413, "payload_too_large", f"the body exceeds {MAX_BODY_BYTES} bytes")
    return None


def precheck_json(event: dict[str, Any]) -> dict[str, Any] | None:
    """400 for a body that is not one safe JSON object (`grandbo.api.request_body`).

    Runs after `precheck_body`, before the resolver: no parser ever sees a hostile or
    ambiguous body (an array whose first element would be taken for the object). The
    admin API runs it only once the signature holds: an unsigned caller learns nothing.
    """
    body = event.get("body") or ""
    text = base64.b64decode(body).decode("utf-8") if event.get("isBase64Encoded") else body
    if not _json_content_type(event, has_body=bool(text.strip())):
        return proxy_error(*_NOT_JSON)
    if not text.strip():
        return None
    parsed = parse_json_object(text)
    if isinstance(parsed, BodyProblem):
        return proxy_error(400, "invalid_request", str(parsed), parsed.field)
    return None


def _json_content_type(event: dict[str, Any], *, has_body: bool) -> bool:
    """Whether the request says its body is JSON (or says nothing); the header is then
    written the one way the resolver's parser reads it, whatever its case or parameters.

    Any other media type is refused: the resolver would parse a form or a multipart body
    out of the signed JSON and act on its defaults instead.
    """
    headers = event.get("headers") or {}
    names = [name for name in headers if name.lower() == "content-type"]
    values = [str(headers[name]) for name in names]
    for name, more in (event.get("multiValueHeaders") or {}).items():
        if name.lower() == "content-type":
            values += [str(value) for value in more or []]
    # an empty header says nothing (read as JSON); anything else must be application/json
    media = {value.split(";")[0].strip().lower() for value in values if value.strip()}
    if media - {"application/json"}:
        return not has_body and event.get("httpMethod", "GET").upper() in ("GET", "HEAD")
    for name in names:
        del headers[name]
    multi = event.get("multiValueHeaders") or {}
    for name in [name for name in multi if name.lower() == "content-type"]:
        del multi[name]
    if has_body or names:
        headers["Content-Type"] = "application/json"
        if event.get("multiValueHeaders") is not None:
            multi["Content-Type"] = ["application/json"]
    return True


def register_error_handlers(app: APIGatewayRestResolver) -> None:
    """Map every domain error to its status."""

    @app.exception_handler(RequestValidationError)
    def _request_shape(exc: RequestValidationError) -> Response[Any]:
        error = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "path")]
        field = "body" if error.get("type") == "json_invalid" else ".".join(loc) or "body"
        return error_response(422, "invalid_request", f"{field}: {error.get('msg')}", field)

    @app.exception_handler(RequestUnsupportedContentType)
    def _media_type(exc: RequestUnsupportedContentType) -> Response[Any]:
        return error_response(*_NOT_JSON)

    @app.exception_handler(InvalidTopicError)
    def _topic(exc: InvalidTopicError) -> Response[Any]:
        return error_response(422, "invalid_topic", exc.message, exc.field)

    @app.exception_handler(InvalidInputError)
    def _input(exc: InvalidInputError) -> Response[Any]:
        return error_response(400, "invalid_input", f"{exc.field}: {exc.message}", exc.field)

    @app.exception_handler(AuthenticationError)
    def _auth(exc: AuthenticationError) -> Response[Any]:
        logger.warning("request not authenticated", extra={"reason": exc.reason})
        if exc.reason == REPLAYED:
            # only a request whose signature held is a replay: saying so tells its sender
            # (who signed it) what to do, and a probe nothing it did not have
            return error_response(401, "replayed", REPLAYED_MESSAGE)
        return error_response(401, "unauthorized", "the request is not authenticated")

    @app.exception_handler(ForbiddenError)
    def _forbidden(exc: ForbiddenError) -> Response[Any]:
        return error_response(403, "forbidden", str(exc))

    @app.exception_handler(EntryNotFoundError)
    def _not_found(exc: EntryNotFoundError) -> Response[Any]:
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(RetrievalNotFoundError)
    def _no_question(exc: RetrievalNotFoundError) -> Response[Any]:
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(VerdictNotFoundError)
    def _no_verdict(exc: VerdictNotFoundError) -> Response[Any]:
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(PersonNotFoundError)
    def _no_person(exc: PersonNotFoundError) -> Response[Any]:
        return error_response(404, "not_found", str(exc), "email")

    @app.exception_handler(KeyringUnreadableError)
    def _keyring_unreadable(exc: KeyringUnreadableError) -> Response[Any]:
        return error_response(409, "keyring_unreadable", str(exc))

    @app.exception_handler(PeopleManagedElsewhereError)
    def _people_elsewhere(exc: PeopleManagedElsewhereError) -> Response[Any]:
        return error_response(409, "people_managed_elsewhere", str(exc))

    @app.exception_handler(RevisionConflictError)
    def _conflict(exc: RevisionConflictError) -> Response[Any]:
        return error_response(409, "revision_conflict", str(exc), "expected_revision")

    @app.exception_handler(EntryNotActiveError)
    def _not_active(exc: EntryNotActiveError) -> Response[Any]:
        return error_response(409, "entry_not_active", str(exc))

    @app.exception_handler(MergeRefusedError)
    def _merge_refused(exc: MergeRefusedError) -> Response[Any]:
        return error_response(409, "merge_refused", str(exc), "into")

    @app.exception_handler(NotARecurrenceError)
    def _not_recurrence(exc: NotARecurrenceError) -> Response[Any]:
        return error_response(409, "not_a_recurrence", str(exc))

    @app.exception_handler(EmbeddingError)
    def _embedding(exc: EmbeddingError) -> Response[Any]:
        # a route that embeds (calibration): the provider failed, throttled or refused
        logger.warning("embedding provider unavailable", extra={"reason": str(exc)})
        return error_response(503, "unavailable", "the embedding provider is unavailable; retry")

    @app.exception_handler(EntryRedactedError)
    def _redacted(exc: EntryRedactedError) -> Response[Any]:
        body = {"error": "gone", "message": str(exc), "tombstone": exc.tombstone}
        return Response(
            status_code=410, content_type=content_types.APPLICATION_JSON, body=json.dumps(body)
        )

    @app.exception_handler(RateLimitedError)
    def _rate(exc: RateLimitedError) -> Response[Any]:
        return Response(
            status_code=429,
            content_type=content_types.APPLICATION_JSON,
            body=error_body("too_many_requests", f"{exc}; retry after {exc.retry_after_s} s"),
            headers={"Retry-After": str(exc.retry_after_s)},
        )

    @app.exception_handler(StoreUnavailableError)
    def _database(exc: StoreUnavailableError) -> Response[Any]:
        logger.exception("database unavailable")
        return Response(
            status_code=503,
            content_type=content_types.APPLICATION_JSON,
            body=error_body("unavailable", STORE_UNAVAILABLE),
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    @app.exception_handler(ServiceError)
    def _routing(exc: ServiceError) -> Response[Any]:
        # powertools' own errors (no such route, method not allowed) keep their status
        error = "not_found" if exc.status_code == 404 else "request_error"
        return error_response(exc.status_code, error, str(exc.msg))

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response[Any]:
        # a bug, not an input problem: logged with its trace, answered without internals
        logger.exception("unexpected error")
        return error_response(500, "internal_error", "unexpected error; it has been logged")
