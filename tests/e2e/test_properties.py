"""Property-based checks over HTTP (hypothesis): whatever text, JSON shape, header or query
string a caller sends, the answer is never a 5xx, and text that is accepted is stored as
it was sent (issue 11, item 6; the schemathesis run in test_openapi.py covers the routes
of the OpenAPI document, these cover the rest and the free-form parts)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grandbo.api.auth import mint_query_token, sign_admin_request
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.runtime.lambda_container import install_runtime
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway, start_gateway

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
ADMIN_ROUTES = ["/v1/admin/entries", "/v1/admin/topology"]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
# above the minimum of informative content (grandbo.memory.domain.content), then any text: drawn
# summaries are stored as well as refused, not almost always refused as thin
INFORMATIVE = "Replication lag let WAL accumulate on the orders primary until the volume filled."
SUMMARIES = st.text(max_size=300) | st.text(max_size=200).map(lambda tail: f"{INFORMATIVE} {tail}")


@pytest.fixture(scope="module")
def prop_gateway(database: DatabaseUrls) -> Iterator[tuple[Gateway, str]]:
    tenant = f"prop-{uuid.uuid4().hex[:8]}"
    gateway, server = start_gateway(database, (tenant,), FakeEmbeddingProvider())
    yield gateway, tenant
    server.shutdown()
    server.server_close()
    gateway.runtime.close()
    install_runtime(None)


def _signed(gateway: Gateway, tenant: str, path: str, raw: bytes, key: str | None = None) -> Any:
    headers = sign_admin_request(
        gateway.keys[f"{tenant}-admin"], "POST", path, raw, idempotency_key=key
    )
    return gateway.request("POST", path, raw, {"Content-Type": "application/json", **headers})


@SETTINGS
@given(title=st.text(max_size=80), summary=SUMMARIES, tags=st.lists(st.text()))
def test_any_entry_text_is_refused_with_a_4xx_or_stored_as_sent(
    prop_gateway: tuple[Gateway, str], title: str, summary: str, tags: list[str]
) -> None:
    gateway, tenant = prop_gateway
    raw = json.dumps({"title": title, "summary": summary, "tags": tags}).encode()
    reply = _signed(gateway, tenant, "/v1/admin/entries", raw)
    assert reply.status < 500, reply.body
    if reply.status == 201:
        stored = reply.body["entry"]
        assert (stored["title"], stored["summary"]) == (title.strip(), summary.strip())
    else:
        assert reply.status in (400, 422)
        assert reply.body["field"]


@SETTINGS
@given(body=JSON, route=st.sampled_from(ADMIN_ROUTES))
def test_any_json_body_on_an_admin_route_is_never_a_5xx(
    prop_gateway: tuple[Gateway, str], body: Any, route: str
) -> None:
    gateway, tenant = prop_gateway
    reply = _signed(gateway, tenant, route, json.dumps(body).encode())
    assert reply.status < 500, (body, reply.body)


@SETTINGS
@given(body=JSON)
def test_any_json_body_on_the_query_route_is_never_a_5xx(
    prop_gateway: tuple[Gateway, str], body: Any
) -> None:
    gateway, tenant = prop_gateway
    reply = gateway.query(tenant, None, raw=json.dumps(body).encode())
    assert reply.status < 500, (body, reply.body)


@SETTINGS
@given(body=JSON, route=st.sampled_from(["/local/events", "/local/backfill"]))
def test_any_json_body_on_the_local_doors_is_never_a_5xx(
    prop_gateway: tuple[Gateway, str], body: Any, route: str
) -> None:
    gateway, _ = prop_gateway
    reply = gateway.door(route, json.dumps(body).encode())
    assert reply.status < 500, (body, reply.body)


@SETTINGS
@given(key=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=300))
def test_any_idempotency_key_is_never_a_5xx(prop_gateway: tuple[Gateway, str], key: str) -> None:
    gateway, tenant = prop_gateway
    summary = "One shard took all the writes because the partition key was the tenant id."
    raw = json.dumps({"title": "Hot shard", "summary": summary}).encode()
    reply = _signed(gateway, tenant, "/v1/admin/entries", raw, key=key or None)
    assert reply.status < 500, (key, reply.body)


@SETTINGS
@given(
    node_id=st.text(max_size=40),
    as_of=st.one_of(st.none(), st.text(max_size=40)),
    route=st.sampled_from(["blast-radius", "criticality"]),
)
def test_any_topology_query_string_is_never_a_5xx(
    prop_gateway: tuple[Gateway, str], node_id: str, as_of: str | None, route: str
) -> None:
    gateway, tenant = prop_gateway
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    query = f"type=Service&id={quote(node_id, safe='')}"
    if as_of is not None:
        query += f"&as_of={quote(as_of, safe='')}"
    reply = gateway.request(
        "GET", f"/v1/topology/{route}?{query}", headers={"Authorization": f"Bearer {token}"}
    )
    assert reply.status < 500, (node_id, as_of, reply.body)
