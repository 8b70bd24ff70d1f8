"""Python clients of the HTTP API: Beacon's `query_org_memory` and the signed admin calls.

Standard library only (http.client), so an agent or a script can use them without extras.
Every request names its client (`User-Agent: grandbo/<version> (<component>)`): the
deployed edge's WAF blocks a request without a User-Agent (the Core rule set's
`NoUserAgent_HEADER`), and http.client sends none of its own. A call never follows a
redirect (the bearer token or signature would go wherever it points), reads at most
MAX_RESPONSE_BYTES, and ends within its timeout as a whole, not per socket read: a server
that trickles its answer cannot hold a caller.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from grandbo import __version__
from grandbo.api.auth import SigningKey, mint_query_token, sign_admin_request
from grandbo.errors import InvalidInputError
from grandbo.memory.domain.lake_stream import (
    MAX_IMPORT_BATCH,
    LakeEvent,
    LakeManifest,
    LakeStream,
    read_stream,
)

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
_READ_CHUNK = 64 * 1024


def user_agent(component: str) -> str:
    """What a Grandbo client says it is: `grandbo/<version> (<component>)`."""
    return f"grandbo/{__version__} ({component})"


class GrandboHTTPError(Exception):
    """The API answered with an error status; `body` is its JSON error document."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body.get('message', body)}")
        self.status = status
        self.body = body


class _Exchange:
    """One request on its own connection, which a timer closes at the deadline (a
    blocked read then fails at once instead of waiting for the server)."""

    def __init__(self, base_url: str, timeout: float) -> None:
        parts = base_url_parts(base_url)
        connection = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        self.prefix = parts.path.rstrip("/")
        self.conn = connection(str(parts.hostname), parts.port, timeout=timeout)
        self.timed_out = False

    def abort(self) -> None:
        self.timed_out = True
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing left to stop
                sock.shutdown(socket.SHUT_RDWR)


def base_url_parts(base_url: str) -> urllib.parse.SplitResult:
    """The API's base URL, checked: http(s), a host, a valid port, no query or fragment
    (nothing of it would be sent). ValueError otherwise: a configuration error, raised
    when a client is made rather than on its first call."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) base URL: {base_url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"a base URL takes no query or fragment: {base_url!r}")
    _ = parts.port  # ValueError for a port out of range or not a number
    return parts


def _call(
    base_url: str,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: float,
    component: str,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> dict[str, Any]:
    exchange = _Exchange(base_url, timeout)
    deadline = time.monotonic() + timeout
    timer = threading.Timer(timeout, exchange.abort)
    timer.daemon = True
    timer.start()
    try:
        exchange.conn.connect()
        if exchange.timed_out:  # the deadline passed while connecting (a slow name lookup,
            # an address that never answered): the timer found no socket to close
            raise TimeoutError(f"no connection within {timeout:g} s")
        exchange.conn.request(
            method,
            exchange.prefix + path,
            body=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": user_agent(component),
                **headers,
            },
        )
        response = exchange.conn.getresponse()
        raw = _read_capped(response, deadline, max_bytes)
    except (OSError, http.client.HTTPException):
        if exchange.timed_out:
            raise TimeoutError(f"no complete answer within {timeout:g} s") from None
        raise
    finally:
        timer.cancel()
        exchange.conn.close()
    if exchange.timed_out:  # the cut left a short read that looked complete
        raise TimeoutError(f"no complete answer within {timeout:g} s")
    if response.status >= 300:  # 3xx included: a redirect is refused, never followed
        try:
            error = json.loads(raw)
        except ValueError:
            error = None
        if not isinstance(error, dict):
            error = {"message": raw[:500].decode(errors="replace")}
        raise GrandboHTTPError(response.status, error)
    payload: dict[str, Any] = json.loads(raw or b"{}")
    return payload


def _read_capped(
    response: http.client.HTTPResponse, deadline: float, max_bytes: int = MAX_RESPONSE_BYTES
) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(_READ_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise ValueError(f"the answer is larger than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise TimeoutError("the answer did not arrive within the timeout")
        chunks.append(chunk)
    return b"".join(chunks)


class MemoryClient:
    """Beacon's seam: `query_org_memory(topic)` over the query API with a bearer token."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 5.0,
        component: str = "memory-client",
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        base_url_parts(base_url)
        self.base_url = base_url
        self.token = token
        self.timeout = timeout
        self.component = component  # named in the User-Agent: recall-hook, mcp, ...
        self.max_response_bytes = max_response_bytes

    @classmethod
    def with_key(cls, base_url: str, key: SigningKey, *, ttl_s: int = 3600) -> MemoryClient:
        return cls(base_url, mint_query_token(key, ttl_s=ttl_s))

    def query_org_memory(
        self,
        topic: str,
        *,
        limit: int = 5,
        service: str | None = None,
        scope: str | None = None,
        as_of: datetime | None = None,
        min_confidence: float | None = None,
        incident_id: str | None = None,
    ) -> dict[str, Any]:
        """Have we seen this before? `topic` is a sentence about what was found. Every hit
        carries its `confidence`; hits under `min_confidence` (default: the organization's
        floor) are withheld, and `metadata.no_precedent` says when none is left.
        `incident_id` (the caller's current incident) files the question in the retrieval
        log under it."""
        body: dict[str, Any] = {"topic": topic, "limit": limit}
        if incident_id is not None:
            body["incident_id"] = incident_id
        if min_confidence is not None:
            body["min_confidence"] = min_confidence
        if service is not None:
            body["service"] = service
        if scope is not None:
            body["scope"] = scope
        if as_of is not None:
            body["as_of"] = as_of.isoformat()
        return self._get_or_post("POST", "/v1/memory/query", json.dumps(body).encode())

    def get_entry(self, entry_id: UUID | str) -> dict[str, Any]:
        path = f"/v1/memory/entries/{urllib.parse.quote(str(entry_id), safe='')}"
        return self._get_or_post("GET", path)

    def record_feedback(
        self,
        entry_id: UUID | str,
        verdict: str,
        incident_id: str,
        *,
        note: str | None = None,
        idempotency_key: str | None = None,
        confidence: float | None = None,
    ) -> dict[str, Any]:
        """After an investigation: helpful, not_helpful or misleading (counted, an event);
        `confidence` is accepted and ignored (a verdict recalibrates with the confidence
        the server logged for the hit under `incident_id`, never one a caller states)."""
        body: dict[str, Any] = {"verdict": verdict, "incident_id": incident_id}
        if note is not None:
            body["note"] = note
        if confidence is not None:
            body["confidence"] = confidence
        path = f"/v1/memory/entries/{urllib.parse.quote(str(entry_id), safe='')}/feedback"
        extra = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        return self._get_or_post("POST", path, json.dumps(body).encode(), extra)

    def blast_radius(
        self, service: str, *, hops: int = 3, namespaces: str = "topology"
    ) -> dict[str, Any]:
        """What is affected if `service` fails: its transitive dependents (and with
        `namespaces` learned or both, the services that failed with it), nearest first."""
        query = urllib.parse.urlencode(
            {"type": "Service", "id": service, "hops": hops, "namespaces": namespaces}
        )
        return self._get_or_post("GET", f"/v1/topology/blast-radius?{query}")

    def criticality(self, service: str, *, namespaces: str = "topology") -> dict[str, Any]:
        query = urllib.parse.urlencode({"type": "Service", "id": service, "namespaces": namespaces})
        return self._get_or_post("GET", f"/v1/topology/criticality?{query}")

    def _get_or_post(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}", **(extra_headers or {})}
        return _call(
            self.base_url,
            method,
            path,
            body,
            headers,
            self.timeout,
            self.component,
            self.max_response_bytes,
        )


class AdminClient:
    """Signed admin calls: create, correct, retire. Each request gets a fresh nonce.

    The signature covers the path after the API's base URL (stage excluded).
    """

    def __init__(
        self,
        base_url: str,
        key: SigningKey,
        *,
        timeout: float = 5.0,
        component: str = "admin-client",
    ) -> None:
        base_url_parts(base_url)
        self.base_url = base_url
        self.key = key
        self.timeout = timeout
        self.component = component  # how its requests name themselves (User-Agent)

    def call(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Any signed admin route (docs/openapi.json): its JSON answer, or GrandboHTTPError."""
        return self._signed(method, path, payload, idempotency_key)

    def _signed(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        body = json.dumps(payload, ensure_ascii=False).encode() if payload is not None else b""
        headers = sign_admin_request(self.key, method, path, body, idempotency_key=idempotency_key)
        return _call(
            self.base_url, method, path, body or None, headers, self.timeout, self.component
        )

    def create_entry(
        self,
        title: str,
        summary: str,
        *,
        service: str | None = None,
        tags: list[str] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"title": title, "summary": summary, "tags": tags or []}
        if service is not None:
            payload["service"] = service
        return self._signed("POST", "/v1/admin/entries", payload, idempotency_key)

    def correct_entry(
        self,
        entry_id: UUID | str,
        title: str,
        summary: str,
        *,
        service: str | None = None,
        expected_revision: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"title": title, "summary": summary}
        if service is not None:
            payload["service"] = service
        if expected_revision is not None:
            payload["expected_revision"] = expected_revision
        return self._signed(
            "POST", f"/v1/admin/entries/{entry_id}/corrections", payload, idempotency_key
        )

    def retire_entry(
        self, entry_id: UUID | str, reason: str, *, superseded_by: UUID | str | None = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"reason": reason}
        if superseded_by is not None:
            payload["superseded_by"] = str(superseded_by)
        return self._signed("POST", f"/v1/admin/entries/{entry_id}/retirement", payload)

    def get_entry(self, entry_id: UUID | str) -> dict[str, Any]:
        return self._signed("GET", f"/v1/admin/entries/{entry_id}", None)

    def _signed_body(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """A POST whose body is compact UTF-8 JSON (a batch packed up to the body limit
        measures exactly what is sent)."""
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        headers = sign_admin_request(self.key, "POST", path, body)
        return _call(self.base_url, "POST", path, body, headers, self.timeout, self.component)

    def export_page(self, after: str | None = None, *, limit: int = 500) -> dict[str, Any]:
        """One page of the key's organization's event log (`POST /v1/admin/export`)."""
        return self._signed_body("/v1/admin/export", {"after": after, "limit": limit})

    def export_lake(self, write_line: Callable[[str], None]) -> LakeManifest:
        """The organization's whole lake stream through `write_line`, page by page; the
        pages are checked against the last page's manifest (InvalidInputError if not)."""
        after: str | None = None
        lines: list[str] = []
        while True:
            page = self.export_page(after, limit=1000)
            lines += [LakeEvent.model_validate(event).line() for event in page["events"]]
            if page["next"] is None:
                break
            after = page["next"]
        manifest = LakeManifest.model_validate(page["manifest"])
        read_stream([*lines, manifest.line()], source="export")  # proves it before writing
        for line in lines:
            write_line(line)
        write_line(manifest.line())
        return manifest

    def import_batch(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One batch of a lake stream (`POST /v1/admin/import`, an `ImportRequest`)."""
        return self._signed_body("/v1/admin/import", payload)

    def import_lake(
        self,
        stream: LakeStream,
        *,
        rename: bool = False,
        merge: bool = False,
        max_body_bytes: int | None = None,
    ) -> dict[str, Any]:
        """A whole stream (proven whole by `read_stream`), in batches each packed below
        the API's body limit; the last batch's answer, with the totals of all."""
        if max_body_bytes is None:  # imported here: the query client stays light
            from grandbo.api.models import MAX_BODY_BYTES

            max_body_bytes = MAX_BODY_BYTES
        if not stream.events:
            raise InvalidInputError("file", "the stream holds no events: nothing to import")
        base = {
            "manifest": stream.manifest.model_dump(mode="json"),
            "rename": rename,
            "merge": merge,
        }
        # the body's fixed part: the manifest, two links, the flags and the punctuation
        fixed = len(json.dumps(base, ensure_ascii=False).encode()) + 256
        inserted = present = 0
        answer: dict[str, Any] = {}
        start = 0
        while start < len(stream.events):
            end, size = start, fixed
            while end < len(stream.events) and end - start < MAX_IMPORT_BATCH:
                grown = size + len(stream.lines[end].encode()) + 1
                if grown > max_body_bytes:
                    break
                end, size = end + 1, grown
            if end == start:
                raise InvalidInputError(
                    "file", f"event {start} alone is over the API's {max_body_bytes}-byte body"
                )
            answer = self.import_batch(
                {
                    **base,
                    "offset": start,
                    "chain_sha256": stream.links[start],
                    "rest_sha256": stream.links[end],
                    "events": [json.loads(line) for line in stream.lines[start:end]],
                }
            )
            inserted += int(answer["inserted"])
            present += int(answer["present"])
            start = end
        return {**answer, "offset": 0, "inserted": inserted, "present": present}


class IamAdminClient:
    """The admin routes as a person signed in with their organization's identity: each
    request to `/v1/iam/admin/...` signed with AWS's signature (SigV4, service
    execute-api) from the caller's AWS credentials (an IAM Identity Center session:
    `aws sso login`), which API Gateway verifies (grandbo.api.iam_people). The same
    `call` as AdminClient: a path `/v1/admin/...` goes to its /v1/iam twin."""

    def __init__(
        self,
        base_url: str,
        credentials: Any,
        region: str,
        *,
        timeout: float = 5.0,
        component: str = "admin-client",
    ) -> None:
        base_url_parts(base_url)
        self.base_url = base_url
        self.credentials = credentials  # botocore Credentials (refreshable ones refresh)
        self.region = region
        self.timeout = timeout
        self.component = component

    def call(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        routed = "/v1/iam/" + path.removeprefix("/v1/") if path.startswith("/v1/admin") else path
        body = json.dumps(payload, ensure_ascii=False).encode() if payload is not None else b""
        headers = {"Content-Type": "application/json"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        request = AWSRequest(
            method=method, url=self.base_url.rstrip("/") + routed, data=body, headers=headers
        )
        SigV4Auth(self.credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(
            request
        )
        signed = {name: str(value) for name, value in request.headers.items()}
        return _call(
            self.base_url, method, routed, body or None, signed, self.timeout, self.component
        )


def execute_api_region(base_url: str) -> str | None:
    """The region of an API Gateway URL (https://<id>.execute-api.<region>.amazonaws.com)."""
    host = str(base_url_parts(base_url).hostname or "")
    parts = host.split(".")
    if len(parts) >= 5 and parts[1] == "execute-api":
        return parts[2]
    return None
