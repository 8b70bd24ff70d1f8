"""The OpenAPI document: in sync with the handlers, valid, and fuzzed without a 5xx."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate

from grandbo.api.auth import mint_query_token, sign_admin_request
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.openapi import openapi_json
from grandbo.runtime.lambda_container import install_runtime
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway, start_gateway

DOCUMENT = Path(__file__).parents[2] / "docs" / "openapi.json"


def test_the_checked_in_document_matches_the_handlers() -> None:
    assert DOCUMENT.read_text() == openapi_json(), (
        "docs/openapi.json is stale: run `.venv/bin/grandbo openapi > docs/openapi.json`"
    )


def test_the_document_is_valid_openapi() -> None:
    validate(json.loads(DOCUMENT.read_text()))


schema = schemathesis.openapi.from_path(str(DOCUMENT))


@pytest.fixture(scope="module")
def fuzz_gateway(database: DatabaseUrls) -> Iterator[Gateway]:
    tenant = f"fuzz-{uuid.uuid4().hex[:8]}"
    gateway, server = start_gateway(database, (tenant,), FakeEmbeddingProvider())
    created = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {
            "title": "Seed entry for fuzzing",
            "summary": "Gives GET and corrections a target: a pool exhausted by doubled workers.",
        },
    )
    assert created.status == 201
    yield gateway
    server.shutdown()
    server.server_close()
    gateway.runtime.close()
    install_runtime(None)


def _send(gateway: Gateway, case: Any, *, signed: bool) -> int:
    tenant = next(iter(gateway.keys)).rsplit("-", 1)[0]
    path = case.formatted_path
    payload = case.body if isinstance(case.body, dict | list | str | int | float | bool) else None
    body = b"" if payload is None or case.method == "GET" else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if path.startswith("/v1/admin/"):
        if signed:
            headers.update(
                sign_admin_request(gateway.keys[f"{tenant}-admin"], case.method, path, body)
            )
    elif signed:
        headers["Authorization"] = f"Bearer {mint_query_token(gateway.keys[f'{tenant}-query'])}"
    return gateway.request(case.method, path, body or None, headers).status


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_5xx(case: Any, fuzz_gateway: Gateway) -> None:
    for signed in (True, False):
        status = _send(fuzz_gateway, case, signed=signed)
        assert status < 500, f"{case.method} {case.formatted_path} {case.body!r} -> {status}"
        # the reference lists every status a route answers (issue 53): none is missing
        declared = case.method.lower() == case.operation.method.lower()
        documented = case.operation.definition.raw["responses"]
        assert not declared or str(status) in documented, (
            f"{case.method} {case.path} answered {status}, not in its documented "
            f"{sorted(documented)}"
        )
        if not signed:
            # unsigned: refused, a route or method the edge does not serve, or a body over
            # the size limit
            assert status in (401, 404, 405, 413)
