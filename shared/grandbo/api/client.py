"""Python clients of the HTTP API: Beacon's `query_org_memory` and the signed admin calls.

Standard library only (urllib), so an agent or a script can use them without extras.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any
from uuid import UUID

from grandbo.api.auth import SigningKey, mint_query_token, sign_admin_request


class GrandboHTTPError(Exception):
    """The API answered with an error status; `body` is its JSON error document."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body.get('message', body)}")
        self.status = status
        self.body = body


def _call(
    base_url: str,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: float,
) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - the caller's configured API URL
        base_url.rstrip("/") + path,
        data=body,
        method=method,
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            payload: dict[str, Any] = json.loads(response.read() or b"{}")
            return payload
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            error = json.loads(raw)
        except ValueError:
            error = {"message": raw.decode(errors="replace")}
        raise GrandboHTTPError(exc.code, error) from None


class MemoryClient:
    """Beacon's seam: `query_org_memory(topic)` over the query API with a bearer token."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 5.0) -> None:
        self.base_url = base_url
        self.token = token
        self.timeout = timeout

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
    ) -> dict[str, Any]:
        """Have we seen this before? `topic` is a sentence about what was found."""
        body: dict[str, Any] = {"topic": topic, "limit": limit}
        if service is not None:
            body["service"] = service
        if scope is not None:
            body["scope"] = scope
        return self._get_or_post("POST", "/v1/memory/query", json.dumps(body).encode())

    def get_entry(self, entry_id: UUID | str) -> dict[str, Any]:
        path = f"/v1/memory/entries/{urllib.parse.quote(str(entry_id), safe='')}"
        return self._get_or_post("GET", path)

    def blast_radius(self, service: str, *, hops: int = 3) -> dict[str, Any]:
        """What is affected if `service` fails: its transitive dependents, nearest first."""
        query = urllib.parse.urlencode({"type": "Service", "id": service, "hops": hops})
        return self._get_or_post("GET", f"/v1/topology/blast-radius?{query}")

    def criticality(self, service: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"type": "Service", "id": service})
        return self._get_or_post("GET", f"/v1/topology/criticality?{query}")

    def _get_or_post(self, method: str, path: str, body: bytes | None = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        return _call(self.base_url, method, path, body, headers, self.timeout)


class AdminClient:
    """Signed admin calls: create, correct, retire. Each request gets a fresh nonce.

    The signature covers the path after the API's base URL (stage excluded).
    """

    def __init__(self, base_url: str, key: SigningKey, *, timeout: float = 5.0) -> None:
        self.base_url = base_url
        self.key = key
        self.timeout = timeout

    def _signed(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        body = json.dumps(payload).encode() if payload is not None else b""
        headers = sign_admin_request(self.key, method, path, body, idempotency_key=idempotency_key)
        return _call(self.base_url, method, path, body or None, headers, self.timeout)

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
