"""The curation routes of the signed admin API (issue 26): the console reads nothing a
deployed stack does not offer. "Why not this one?", the catalog, an entry's history,
growth, possible duplicates and the two verdicts on a pair, each tenant-isolated."""

from __future__ import annotations

from typing import Any

import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider

from .conftest import Gateway

POOL = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
    "service": "checkout-api",
}
DNS = {
    "title": "Resolver cache poisoned after the CoreDNS upgrade",
    "summary": "CoreDNS 1.11 cached NXDOMAIN answers for internal names for an hour, so "
    "services could not find each other after a rollout.",
    "service": "coredns",
}
TLS = {
    "title": "Expired intermediate certificate on the edge proxy",
    "summary": "The edge proxy served a chain with an expired intermediate; clients with "
    "strict validation refused every handshake until the bundle was replaced.",
}
TOPIC = "checkout requests time out waiting for a database connection from the pool"
TOPOLOGY = {
    "namespace": "topology",
    "nodes": [{"node_type": "Service", "external_id": n} for n in ("coredns", "checkout-api")],
    "edges": [
        {
            "source": {"node_type": "Service", "external_id": "coredns"},
            "edge_type": "DEPENDS_ON",
            "target": {"node_type": "Service", "external_id": "checkout-api"},
        }
    ],
    "sync": True,
}


def _create(gateway: Gateway, tenant: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = gateway.admin(tenant, "POST", "/v1/admin/entries", body)
    assert reply.status == 201, reply.body
    return dict(reply.body["entry"])


def _explain(gateway: Gateway, tenant: str, entry_id: str, **query: Any) -> dict[str, Any]:
    reply = gateway.admin(
        tenant, "POST", "/v1/admin/explanation", {"topic": TOPIC, "entry_id": entry_id, **query}
    )
    assert reply.status == 200, reply.body
    return dict(reply.body)


def test_why_not_this_one_says_what_the_ranking_did(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    pool = _create(gateway, tenant, POOL)
    dns = _create(gateway, tenant, DNS)
    tls = _create(gateway, tenant, TLS)
    gateway.drain()

    served = _explain(gateway, tenant, pool["entry_id"])
    assert (served["verdict"], served["position"]) == ("served", 1)
    answer = gateway.admin(tenant, "POST", "/v1/admin/query", {"topic": TOPIC}).body
    first = answer["hits"][0]
    # the explanation's signals are the query's own
    assert first["entry_id"] == pool["entry_id"]
    assert served["fused_score"] == first["why"]["fused_score"]
    assert served["lexical_score"] == first["why"]["lexical_score"]
    why = first["why"]
    assert why["lexical_part"] + why["vector_part"] == pytest.approx(why["fused_score"], abs=1e-5)
    assert "pool" in why["shared_words"]
    assert "connection" in why["shared_words"]

    unrelated = _explain(gateway, tenant, tls["entry_id"])
    assert unrelated["verdict"] == "not_a_candidate"
    assert unrelated["lexical_score"] is None
    assert any("shares no tag" in reason for reason in unrelated["reasons"])
    assert unrelated["vector_distance"] is not None
    over = unrelated["vector_distance"] - unrelated["vector_cutoff"]
    assert over > 0
    assert any(f"by {over:.3f}" in reason for reason in unrelated["reasons"])
    assert unrelated["fused_position"] > 1
    assert next(r["entry_id"] for r in unrelated["ahead"]) == pool["entry_id"]

    scoped = _explain(gateway, tenant, dns["entry_id"], service="checkout-api")
    assert scoped["verdict"] == "outside_scope"
    assert "coredns" in scoped["summary"]

    retire = {"reason": "replaced", "superseded_by": pool["entry_id"]}
    path = f"/v1/admin/entries/{dns['entry_id']}/retirement"
    assert gateway.admin(tenant, "POST", path, retire).status == 200
    superseded = _explain(gateway, tenant, dns["entry_id"])
    assert (superseded["verdict"], superseded["related_entry_id"]) == (
        "superseded",
        pool["entry_id"],
    )

    # another organization's entry is not found, whatever the body says
    elsewhere = gateway.admin(
        other_tenant,
        "POST",
        "/v1/admin/explanation",
        {"topic": TOPIC, "entry_id": pool["entry_id"]},
    )
    assert elsewhere.status == 404
    bad = gateway.admin(tenant, "POST", "/v1/admin/explanation", {"topic": TOPIC})
    assert (bad.status, bad.body["field"]) == (422, "entry_id")


def test_an_entry_outranked_is_ranked_behind_the_served(gateway: Gateway, tenant: str) -> None:
    entries = [
        _create(
            gateway,
            tenant,
            {
                "title": f"Checkout pool exhausted by connection leak number {n}",
                "summary": f"Leak {n}: the checkout database pool was exhausted and requests "
                "timed out waiting for a connection.",
            },
        )
        for n in range(101, 104)
    ]
    gateway.drain()
    answer = gateway.admin(tenant, "POST", "/v1/admin/query", {"topic": TOPIC, "limit": 1}).body
    served = answer["hits"][0]["entry_id"]
    other = next(e for e in entries if e["entry_id"] != served)
    found = _explain(gateway, tenant, other["entry_id"], limit=1)
    assert found["verdict"] == "outranked"
    assert found["fused_position"] >= 2
    assert served in [r["entry_id"] for r in found["ahead"]]
    assert f"ranked {found['fused_position']}" in found["summary"]


def test_the_catalog_filters_pages_and_matches_text_literally(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    made = [
        _create(
            gateway,
            tenant,
            {
                "title": f"Batch job {n} ran out of disk at 100% usage",
                "summary": f"Batch job {n} filled its scratch volume to 100% and failed.",
                "service": "batch" if n % 2 else "reports",
            },
        )
        for n in range(5)
    ]
    _create(gateway, other_tenant, {**TLS, "service": "batch"})
    first = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"limit": 2})
    assert first.status == 200
    assert len(first.body["entries"]) == 2
    assert first.body["next"]
    second = gateway.admin(
        tenant, "POST", "/v1/admin/catalog", {"limit": 2, "after": first.body["next"]}
    )
    third = gateway.admin(
        tenant, "POST", "/v1/admin/catalog", {"limit": 2, "after": second.body["next"]}
    )
    paged = [e["entry_id"] for r in (first, second, third) for e in r.body["entries"]]
    assert paged == [e["entry_id"] for e in reversed(made)]
    assert third.body["next"] is None

    batch = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"service": "batch"}).body
    assert {e["entry_id"] for e in batch["entries"]} == {
        e["entry_id"] for e in made if e["service"] == "batch"
    }
    percent = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"text": "100%"}).body
    assert len(percent["entries"]) == 5
    wildcard = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"text": "job _ ran"}).body
    assert wildcard["entries"] == []  # `_` is a character here, not a wildcard
    forged = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"after": "bm90IGEgY3Vyc29y"})
    assert (forged.status, forged.body["field"]) == (400, "after")
    bad = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"status": "deleted"})
    assert (bad.status, bad.body["field"]) == (422, "status")


def test_history_lists_every_revision_with_who_and_through_which_path(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    entry = _create(gateway, tenant, POOL)
    correction = {**POOL, "title": "Checkout pool exhausted by a leaked connection on retry"}
    path = f"/v1/admin/entries/{entry['entry_id']}/corrections"
    assert gateway.admin(tenant, "POST", path, correction).status == 201
    reply = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry['entry_id']}/history")
    assert reply.status == 200
    events = reply.body["events"]
    assert [(e["event_type"], e["revision"]) for e in events] == [
        ("entry_created", 1),
        ("entry_corrected", 2),
    ]
    assert events[0]["payload"]["title"] == POOL["title"]
    assert events[1]["payload"]["title"] == correction["title"]
    assert {e["path"] for e in events} == {"admin"}
    assert all(e["actor"].startswith("admin:") for e in events)
    assert reply.body["entry"]["revision"] == 2
    other = gateway.admin(other_tenant, "GET", f"/v1/admin/entries/{entry['entry_id']}/history")
    assert other.status == 404


def test_growth_counts_this_weeks_entries_by_origin(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    _create(gateway, tenant, POOL)
    _create(gateway, tenant, DNS)
    _create(gateway, other_tenant, TLS)
    weeks = gateway.admin(tenant, "GET", "/v1/admin/growth").body["weeks"]
    assert len(weeks) == 26
    assert weeks[-1]["created"] == {"admin": 2}
    assert all(not w["created"] for w in weeks[:-1])


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider()  # no automatic merges: every close pair is a person's


LOOK_ALIKE = {
    "title": "Checkout pool exhausted by a connection leak on retries",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a free connection.",
    "service": "checkout-api",
}


def test_possible_duplicates_are_merged_split_or_marked_distinct(
    gateway: Gateway, tenant: str, other_tenant: str, provider: FakeEmbeddingProvider
) -> None:
    older = _create(gateway, tenant, POOL)
    newer = _create(gateway, tenant, LOOK_ALIKE)
    _create(gateway, tenant, TLS)
    _create(gateway, other_tenant, LOOK_ALIKE)
    gateway.drain()

    found = gateway.admin(tenant, "GET", "/v1/admin/duplicates").body
    pairs = [(p["canonical"]["entry_id"], p["recurrence"]["entry_id"]) for p in found["pairs"]]
    assert pairs == [(older["entry_id"], newer["entry_id"])]
    assert 0 < found["pairs"][0]["distance"] <= 0.2

    # across services is refused, whatever the pair's words
    elsewhere = _create(gateway, tenant, {**LOOK_ALIKE, "service": "payments-api"})
    refused = gateway.admin(
        tenant,
        "POST",
        f"/v1/admin/entries/{elsewhere['entry_id']}/merge",
        {"into": older["entry_id"]},
    )
    assert (refused.status, refused.body["error"]) == (409, "merge_refused")
    assert "different services" in refused.body["message"]
    # another tenant's entry cannot be merged into, or merged
    cross = gateway.admin(
        other_tenant,
        "POST",
        f"/v1/admin/entries/{newer['entry_id']}/merge",
        {"into": older["entry_id"]},
    )
    assert cross.status == 404

    merged = gateway.admin(
        tenant, "POST", f"/v1/admin/entries/{newer['entry_id']}/merge", {"into": older["entry_id"]}
    )
    assert merged.status == 200, merged.body
    assert merged.body["entry"]["seen_count"] == 2
    history = gateway.admin(tenant, "GET", f"/v1/admin/entries/{newer['entry_id']}/history").body
    assert history["events"][-1]["event_type"] == "entry_merged"
    assert history["events"][-1]["payload"]["by"] == "admin"
    assert gateway.admin(tenant, "GET", "/v1/admin/duplicates").body["pairs"] == []

    split = gateway.admin(tenant, "POST", f"/v1/admin/entries/{newer['entry_id']}/split")
    assert split.status == 200
    distinct_path = f"/v1/admin/entries/{older['entry_id']}/distinct"
    assert (
        gateway.admin(other_tenant, "POST", distinct_path, {"other": newer["entry_id"]}).status
        == 404
    )
    marked = gateway.admin(tenant, "POST", distinct_path, {"other": newer["entry_id"]})
    assert (marked.status, marked.body["recorded"]) == (200, True)
    again = gateway.admin(tenant, "POST", distinct_path, {"other": newer["entry_id"]})
    assert again.body["recorded"] is False
    remaining = gateway.admin(tenant, "GET", "/v1/admin/duplicates").body["pairs"]
    assert (older["entry_id"], newer["entry_id"]) not in [
        (p["canonical"]["entry_id"], p["recurrence"]["entry_id"]) for p in remaining
    ]
    self_pair = gateway.admin(tenant, "POST", distinct_path, {"other": older["entry_id"]})
    assert self_pair.status == 400


def test_the_admin_search_asks_what_the_query_route_asks(gateway: Gateway, tenant: str) -> None:
    _create(gateway, tenant, POOL)
    _create(gateway, tenant, DNS)
    gateway.drain()
    assert gateway.admin(tenant, "POST", "/v1/admin/topology", TOPOLOGY).status == 200
    for body in (
        {"topic": TOPIC},
        {"topic": TOPIC, "service": "coredns", "scope": "dependencies", "limit": 3},
        {"topic": TOPIC, "service": "coredns", "as_of": "2020-01-01T00:00:00Z"},
    ):
        admin = gateway.admin(tenant, "POST", "/v1/admin/query", body)
        query = gateway.query(tenant, body)
        assert (admin.status, query.status) == (200, 200), (admin.body, query.body)
        assert [h["entry_id"] for h in admin.body["hits"]] == [
            h["entry_id"] for h in query.body["hits"]
        ]
        assert admin.body["metadata"] == query.body["metadata"]
