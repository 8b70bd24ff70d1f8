"""The signed calibration route: the organization's cutoff measured, kept and reported."""

from __future__ import annotations

import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from tests.integration.test_calibration import synthetic_lake

from .conftest import Gateway

PROVIDER, ENTRIES = synthetic_lake()


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return PROVIDER


def test_an_admin_calibrates_the_organizations_cutoff(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    too_few = gateway.admin(tenant, "POST", "/v1/admin/calibration", {})
    assert too_few.status == 400
    assert "calibrating needs at least 20" in too_few.body["message"]
    for bad in ({"sample": 5}, {"sample": "100"}, {"sample": 100, "x": 1}):
        assert gateway.admin(tenant, "POST", "/v1/admin/calibration", bad).status == 422, bad
    for item in ENTRIES:
        assert gateway.admin(tenant, "POST", "/v1/admin/entries", item).status == 201
    gateway.drain()
    answer = gateway.admin(tenant, "POST", "/v1/admin/calibration", {"sample": 30})
    assert answer.status == 200
    assert answer.body["vector_cutoff"] == pytest.approx(0.65, abs=0.01)
    assert answer.body["tenant_id"] == tenant
    query = gateway.query(tenant, {"topic": "the checkout service stopped answering today"})
    assert query.body["metadata"]["vector_cutoff"] == answer.body["vector_cutoff"]
    other = gateway.query(other_tenant, {"topic": "the checkout service stopped answering"})
    assert other.body["metadata"]["vector_cutoff"] == PROVIDER.vector_cutoff


def test_a_provider_failure_while_calibrating_is_a_503(
    gateway: Gateway, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grandbo.errors import EmbeddingError

    for item in ENTRIES:
        gateway.admin(tenant, "POST", "/v1/admin/entries", item)
    gateway.drain()

    def throttled(texts: object) -> object:
        raise EmbeddingError("amazon.titan-embed-text-v2:0 failed: ThrottlingException")

    monkeypatch.setattr(PROVIDER, "embed", throttled)
    answer = gateway.admin(tenant, "POST", "/v1/admin/calibration", {})
    assert answer.status == 503
    assert answer.body["error"] == "unavailable"
    assert gateway.admin(tenant, "POST", "/v1/admin/calibration", {"sample": 101}).status == 422
