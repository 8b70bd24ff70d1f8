"""Per-tenant HNSW indexes: created past a threshold, used only by that tenant, same answers."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pgvector import HalfVector

from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository.search import _VECTOR_LEG, VECTOR_LEG_SETTINGS
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, entry

TOPIC = "checkout requests wait for a database connection and time out"
POOL = "checkout requests waited for a database connection from the pool"
KAFKA = "kafka consumer lag grew for hours after a broker restart"
DNS = "dns resolution failed for every pod while coredns was throttled"


def test_a_tenant_past_the_threshold_gets_its_own_index_and_the_same_results(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    for i in range(40):
        words = POOL if i % 3 == 0 else KAFKA
        service.record_entry(tenant, entry(f"Finding {i}", f"{words}, case {i}"), context())
    service.embed_pending(tenant)
    exact = service.query_org_memory(tenant, TOPIC, limit=25)

    created = ensure_hnsw_indexes(database.admin, min_entries=40)
    assert tenant in created
    assert ensure_hnsw_indexes(database.admin, min_entries=40) == []  # idempotent
    definition = admin_conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (index_name(tenant),)
    ).fetchone()
    assert definition is not None
    assert "USING hnsw (embedding halfvec_cosine_ops)" in definition[0]
    assert f"tenant_id = '{tenant}'" in definition[0]

    with_index = service.query_org_memory(tenant, TOPIC, limit=25)
    assert [h.entry_id for h in with_index.hits] == [h.entry_id for h in exact.hits]


def test_an_index_left_invalid_by_an_interrupted_build_is_built_again(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    for i in range(30):
        service.record_entry(tenant, entry(f"Finding {i}", f"{KAFKA}, case {i}"), context())
    service.embed_pending(tenant)
    assert tenant in ensure_hnsw_indexes(database.admin, min_entries=30)
    # what CREATE INDEX CONCURRENTLY leaves behind when the function times out mid-build
    admin_conn.execute(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
        (index_name(tenant),),
    )
    assert tenant in ensure_hnsw_indexes(database.admin, min_entries=30)
    valid = admin_conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s",
        (index_name(tenant),),
    ).fetchall()
    assert valid == [(True,)]


def test_the_hourly_schedule_indexes_organizations_that_grew_past_the_threshold(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import functions.index_job.handler as index_job

    from grandbo.local.runner import lambda_context
    from grandbo.memory.repository import vector_indexes as vector_index

    for i in range(30):
        service.record_entry(tenant, entry(f"Finding {i}", f"{DNS}, case {i}"), context())
    service.embed_pending(tenant)
    monkeypatch.setattr(vector_index, "HNSW_MIN_ENTRIES", 30)
    monkeypatch.setattr(index_job, "schema_owner_url", lambda: database.admin)

    # the schedule's event carries nothing the job reads
    reply = index_job.lambda_handler({"source": "aws.events"}, lambda_context("index"))

    assert tenant in reply["hnsw_indexed"]
    indexed = admin_conn.execute(
        "SELECT 1 FROM pg_indexes WHERE indexname = %s", (index_name(tenant),)
    ).fetchall()
    assert indexed == [(1,)]


def _limit_rows(plan: dict[str, Any]) -> list[float]:
    """The planner's row estimate of every Limit node in a JSON plan."""
    found = [plan["Plan Rows"]] if plan["Node Type"] == "Limit" else []
    for child in plan.get("Plans", []):
        found += _limit_rows(child)
    return found


@pytest.mark.parametrize("now", [None, "2026-01-01T00:00:00Z"])
def test_the_vector_legs_limit_is_a_constant_the_planner_sees(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str, now: str | None
) -> None:
    """Whether the planner takes a tenant's HNSW index depends on knowing the leg reads
    LEG_LIMIT rows: a computed limit (an expression with a subquery) is planned as a tenth
    of the rows, and at 15,000 entries that chose the exact scan over the index."""
    admin_conn.execute(
        "INSERT INTO org_memory_tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING",
        (tenant,),
    )
    admin_conn.execute(
        "INSERT INTO org_memory_entries (tenant_id, entry_id, title, summary, tags, origin,"
        " status, revision, created_at, updated_at, embedding, embed_rev, embedded_revision,"
        " embedded_at) SELECT %s, gen_random_uuid(), 't', 's', '{a}', 'admin', 'active', 1,"
        " now(), now(), l2_normalize(array_fill(1.0::real, ARRAY[1024])::vector)::halfvec,"
        " 'rev', 1, now() FROM generate_series(1, 2000)",
        (tenant,),
    )
    admin_conn.execute("ANALYZE org_memory_entries")
    with connect(database.app) as conn, conn.transaction(force_rollback=True):
        conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        for name, value in VECTOR_LEG_SETTINGS.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) " + _VECTOR_LEG,
            {
                "q": HalfVector([1.0] * 1024),
                "tenant": tenant,
                "rev": "rev",
                "services": None,
                "cutoff": 2.0,
                "limit": LEG_LIMIT,
                "now": now,
            },
        ).fetchone()
    assert row is not None
    assert _limit_rows(row[0][0]["Plan"]) == [LEG_LIMIT]
