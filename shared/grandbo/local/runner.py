"""The local runner: every Lambda of Grandbo on 127.0.0.1, driven by real AWS event shapes.

HTTP requests pass the deployed edge's checks first (`grandbo.api.edge`: the WAF's
User-Agent and body-size rules, API Gateway's routes, the REQUEST authorizer of the query
routes, required parameters and body models, each refusal answered as AWS answers it),
then become API Gateway REST proxy events; `POST /local/events` hands an EventBridge
event to the incident function as the body of one incident-queue message (the function's
own `deliver`, which every SQS record goes through; the caller hears the outcome, a
refusal as a 400 and the store out of reach as a 503, where SQS would dead-letter or
retry), `POST /local/backfill` invokes the backfill handler
(local doors, with no WAF or API Gateway in front in AWS either), and an in-process
queue feeds SQS-shaped batches to the embed worker, redelivering records it reports in
`batchItemFailures` (up to MAX_RECEIVES, then a local dead-letter list).

Requests are served concurrently, one thread each, every one inside one of the runtime's
bounded pool of containers (`LambdaRuntime.container`): like Lambda's concurrency, a
request never shares a connection or a transaction, and the pool caps the connections.
A connection that stalls (an idle client, a partial header, a short body) is dropped
after SOCKET_TIMEOUT_S without holding anything the others need.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from grandbo.api.auth import Keyring, SigningKey, keyring_document, new_secret
from grandbo.api.edge import (
    BODY_TOO_LARGE,
    IAM_IN_AWS_ONLY,
    NO_ROUTE,
    UNAUTHORIZED,
    Refusal,
    route_for,
    validation_refusal,
    waf_refusal,
)
from grandbo.api.request_body import BodyProblem, parse_json_object
from grandbo.errors import InvalidEventError, InvalidInputError, StoreUnavailableError
from grandbo.local.doors import DoorGuard, DoorRefusal
from grandbo.local.embed_queue import InProcessEmbedQueue
from grandbo.memory.domain.models import EmbedJob
from grandbo.runtime.lambda_container import ContainersBusyError, runtime

_log = logging.getLogger(__name__)

MAX_RECEIVES = 5
LOCAL_ACCOUNT = "000000000000"  # the account local events and contexts name
LOCAL_DOORS = ("/local/events", "/local/backfill")  # guarded: grandbo.local.doors
REDELIVERY_DELAY_S = 0.5
MAX_REQUEST_BYTES = 1024 * 1024
SOCKET_TIMEOUT_S = 15.0
LISTEN_BACKLOG = 128
CONTAINER_WAIT_S = 10.0


@dataclass
class LambdaContextStub:
    """The attributes powertools reads from a Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    account_id: str = LOCAL_ACCOUNT

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:local:{self.account_id}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def local_keyring(path: Path, tenant_id: str) -> Keyring:
    """The local keyring file, created with one admin and one query key for `tenant_id`."""
    if not path.exists():
        keys = [
            SigningKey(
                key_id=f"{tenant_id}-admin",
                tenant_id=tenant_id,
                secret=new_secret(),
                roles=["admin"],
            ),
            SigningKey(
                key_id=f"{tenant_id}-beacon",
                tenant_id=tenant_id,
                secret=new_secret(),
                roles=["query"],
            ),
        ]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(keyring_document(keys))
        path.chmod(0o600)
    return Keyring.from_json(path.read_text())


def proxy_event(
    method: str,
    raw_path: str,
    headers: dict[str, str],
    body: bytes,
    *,
    authorizer: dict[str, Any] | None = None,
    multi_headers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """An API Gateway REST API (v1) proxy event for one HTTP request (`headers` keeps a
    repeated header's last value, `multi_headers` all of them, as API Gateway does)."""
    url = urlsplit(raw_path)
    query = parse_qs(url.query, keep_blank_values=True)
    try:
        text: str | None = body.decode("utf-8") if body else None
        encoded = False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": "/{proxy+}",
        "path": url.path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": multi_headers or {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": {"proxy": url.path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/local{url.path}",
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "accountId": LOCAL_ACCOUNT,
            "apiId": "local",
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": authorizer,
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


def lambda_context(function_name: str, account_id: str = LOCAL_ACCOUNT) -> Any:
    """A context object with what powertools reads (typed Any: it stands in for Lambda's)."""
    return LambdaContextStub(function_name, account_id=account_id)


def authorizer_event(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "REQUEST",
        "methodArn": f"arn:aws:execute-api:local:{LOCAL_ACCOUNT}:local/local/{method}{path}",
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "queryStringParameters": {},
        "pathParameters": {},
        "stageVariables": {},
        "requestContext": {"stage": "local", "apiId": "local", "accountId": LOCAL_ACCOUNT},
    }


class LocalEmbedPump:
    """Drains the in-process queue into the embed worker as SQS batches, with redelivery."""

    def __init__(self, embed_queue: InProcessEmbedQueue, handler: Callable[..., dict[str, Any]]):
        self.queue = embed_queue
        self.handler = handler
        self.receives: dict[str, int] = {}
        self.dead_letters: list[EmbedJob] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pump_once(self) -> int:
        """Deliver one batch (up to 10); returns how many records were delivered."""
        batch = self.queue.drain()
        if not batch:
            return 0
        records = []
        for job in batch:
            message_id = str(uuid.uuid4())
            key = f"{job.tenant_id}/{job.entry_id}/{job.revision}"
            self.receives[key] = self.receives.get(key, 0) + 1
            records.append((message_id, key, job))
        event = {
            "Records": [_sqs_record(mid, job, self.receives[key]) for mid, key, job in records]
        }
        response = self.handler(event, lambda_context("grandbo-embed-worker"))
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        for message_id, key, job in records:
            if message_id not in failed:
                self.receives.pop(key, None)
            elif self.receives[key] >= MAX_RECEIVES:
                _log.error("embed job dead-lettered after %s receives: %s", MAX_RECEIVES, key)
                self.dead_letters.append(job)
                self.receives.pop(key, None)
            else:
                threading.Timer(REDELIVERY_DELAY_S, self.queue.send, args=([job],)).start()
        return len(records)

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    if not self.pump_once():
                        time.sleep(0.1)
                except Exception:
                    _log.exception("embed pump failed; continuing")
                    time.sleep(1.0)

        self._thread = threading.Thread(target=loop, name="grandbo-embed-pump", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _sqs_record(message_id: str, job: EmbedJob, receive_count: int) -> dict[str, Any]:
    now = str(int(time.time() * 1000))
    return {
        "messageId": message_id,
        "receiptHandle": f"local-{message_id}",
        "body": job.model_dump_json(),
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": now,
            "SenderId": "local",
            "ApproximateFirstReceiveTimestamp": now,
        },
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:local:000000000000:grandbo-embed",
        "awsRegion": "local",
    }


class LocalGateway(BaseHTTPRequestHandler):
    """API Gateway, EventBridge and Lambda invoke, for one process on 127.0.0.1."""

    server_version = "grandbo-local"
    timeout = SOCKET_TIMEOUT_S  # per connection: a stalled client is dropped, never waited on

    def __getattr__(self, name: str) -> Any:
        # every method goes through the edge, as in AWS: the WAF first, then the routes
        # (ANY on the admin routes includes HEAD; a method no route has is a 404 there)
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        _log.info("%s %s", self.address_string(), format % args)

    def _dispatch(self) -> None:
        declared = (self.headers.get("Content-Length") or "0").strip()
        if not (declared.isascii() and declared.isdigit()):  # '²'.isdigit() is True
            self.close_connection = True
            self._reply(400, {"error": "invalid_request", "message": "bad Content-Length"})
            return
        length = int(declared)
        path = urlsplit(self.path).path
        local_door = path.startswith("/local/")  # local mode's own doors: no WAF in front
        user_agents = self.headers.get_all("User-Agent") or []  # every one, any case
        refusal = None if local_door else waf_refusal(user_agents, length)
        if refusal is None and length > MAX_REQUEST_BYTES:
            refusal = BODY_TOO_LARGE
        if refusal is not None and length > 0:  # never read what is refused for its size
            self.close_connection = True
            self._drain(length)
        if refusal is not None:
            self._reply(refusal.status, refusal.document())
            return
        body = self.rfile.read(length) if length else b""
        if len(body) < length:  # the client closed (or stalled past the timeout) mid-body
            self.close_connection = True
            return
        try:
            with runtime().container(CONTAINER_WAIT_S):
                self._route(body)
        except ContainersBusyError:
            self._reply(503, {"error": "unavailable", "message": "busy; retry"})

    def _drain(self, length: int) -> None:
        """Read and drop a refused body (bounded), so the client hears the answer."""
        remaining = min(length, 16 * MAX_REQUEST_BYTES)
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)

    def _headers(self) -> dict[str, str]:
        """The request's headers, a repeated one's last value (as API Gateway's event)."""
        return {k: v for k, v in self.headers.items()}

    def _route(self, body: bytes) -> None:
        from functions.admin_api.handler import lambda_handler as admin_handler
        from functions.authorizer.handler import lambda_handler as authorize
        from functions.backfill.handler import lambda_handler as backfill_handler
        from functions.incident_closed.handler import deliver as deliver_incident
        from functions.query_api.handler import lambda_handler as query_handler

        headers = self._headers()
        multi: dict[str, list[str]] = {}
        for name, value in self.headers.items():
            multi.setdefault(name, []).append(value)
        url = urlsplit(self.path)
        path = url.path
        try:
            if path in LOCAL_DOORS and self.command == "POST":
                refused = self._door_refusal()
                if refused is not None:
                    self._reply(refused.status, refused.document())
                    return
            if path == "/local/events" and self.command == "POST":
                closed = self._json_object(body)
                if closed is not None:
                    self._reply(200, deliver_incident(json.dumps(closed)))
                return
            if path == "/local/backfill" and self.command == "POST":
                payload = self._json_object(body) if body.strip() else {}
                if payload is not None:
                    self._reply(200, backfill_handler(payload, lambda_context("grandbo-backfill")))
                return
            route = route_for(self.command, path)
            if route is None:
                self._refuse(NO_ROUTE)
                return
            context: dict[str, Any] | None = None
            if route.auth == "iam":
                # AWS's signature is verified by API Gateway in AWS; nothing here can
                self._refuse(IAM_IN_AWS_ONLY)
                return
            if route.auth == "token":
                try:
                    policy = authorize(
                        authorizer_event(self.command, path, headers),
                        lambda_context("grandbo-authorizer"),
                    )
                except Exception:
                    self._refuse(UNAUTHORIZED)
                    return
                context = {**policy.get("context", {}), "principalId": policy["principalId"]}
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            refusal = validation_refusal(route, query, headers, body)
            if refusal is not None:
                self._refuse(refusal)
                return
            event = proxy_event(
                self.command, self.path, headers, body, authorizer=context, multi_headers=multi
            )
            if route.function == "query":
                self._proxy_reply(query_handler(event, lambda_context("grandbo-query")))
            else:
                self._proxy_reply(admin_handler(event, lambda_context("grandbo-admin")))
        except (InvalidEventError, InvalidInputError) as exc:
            # in AWS the event goes to the incident dead-letter queue with the reason; the
            # local door says what was wrong with it, as the API does for a bad request
            field = exc.field if isinstance(exc, InvalidInputError) else "event"
            self._reply(400, {"error": "invalid_event", "message": str(exc), "field": field})
        except StoreUnavailableError:
            _log.exception("memory store unavailable")
            self._reply(503, {"error": "unavailable", "message": "the memory store is unavailable"})
        except Exception:  # a handler raising is what Lambda reports as an error
            _log.exception("handler failed")
            self._reply(502, {"error": "lambda_error", "message": "the function failed; logged"})

    def _door_refusal(self) -> DoorRefusal | None:
        guard = getattr(self.server, "door_guard", None)
        if guard is None:
            return DoorRefusal(403, "forbidden", "this runner's local doors are closed")
        return guard.refusal(  # type: ignore[no-any-return]
            str(self.client_address[0]),
            self.headers.get_all("Host") or [],
            self.headers.get_all("Origin") or [],
            self.headers.get_all("Content-Type") or [],
            self.headers.get_all("Authorization") or [],
        )

    def _refuse(self, refusal: Refusal) -> None:
        self._reply(refusal.status, refusal.document())

    def _json_object(self, body: bytes) -> dict[str, Any] | None:
        """The body as one JSON object, or None once a 400 has been sent.

        Strings are left to the handler's own validation, as in AWS, where EventBridge
        hands the event over as it is.
        """
        try:
            parsed = parse_json_object(body.decode("utf-8"), text_rules=False)
        except UnicodeDecodeError:
            parsed = BodyProblem("body", "must be UTF-8 JSON")
        if isinstance(parsed, BodyProblem):
            self._reply(
                400, {"error": "invalid_request", "message": str(parsed), "field": parsed.field}
            )
            return None
        return parsed

    def _proxy_reply(self, response: dict[str, Any]) -> None:
        body = response.get("body") or ""
        raw = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
        self.send_response(int(response["statusCode"]))
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, values[-1])
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def _reply(self, status: int, payload: Any) -> None:
        raw = json.dumps(payload, default=str).encode()
        self.send_response(status, HTTPStatus(status).phrase)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)


class LocalServer(ThreadingHTTPServer):
    """One thread per request; a backlog that absorbs a burst instead of resetting it."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    door_guard: DoorGuard | None = None  # None: the local doors are closed


def serve(host: str, port: int, *, door_key: str | None = None) -> LocalServer:
    """An HTTP server bound to `host:port`, serving requests concurrently (the runtime's
    container pool bounds how many run at once); its local doors open to `door_key`."""
    server = LocalServer((host, port), LocalGateway)
    if door_key is not None:
        server.door_guard = DoorGuard.serving(door_key, host, int(server.server_address[1]))
    return server
