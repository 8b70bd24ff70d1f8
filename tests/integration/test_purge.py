"""Offboarding (issue 25, items 8-9): an organization purged leaves no row in any table
that holds one, a table added later included, and every other organization as it was."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from grandbo.api.nonces import NonceStore
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import EntryNotFoundError
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .helpers import context, entry

LESSON = (
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool was "
    "exhausted and requests timed out waiting for a connection.",
)
REWORDED = (
    "Connection leak exhausted the checkout pool",
    "Requests timed out waiting for a connection: on a retry path the checkout service "
    "leaked database connections until the pool was exhausted.",
)
# every table of the schema with a tenant_id column, from the catalog, as the test sees it
TENANT_TABLES = (
    "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
    " WHERE a.attname = 'tenant_id' AND c.relnamespace = 'public'::regnamespace"
    "   AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1"
)


@pytest.fixture
def service(repository: MemoryRepository) -> MemoryService:
    return MemoryService(repository, FakeEmbeddingProvider(duplicate_distance=0.05))


def _seed(service: MemoryService, app_conn: psycopg.Connection[Any], tenant: str) -> None:
    """Rows of the organization in every table the product writes."""
    first = service.record_entry(tenant, entry(*LESSON), context()).entry
    service.embed_pending(tenant)
    service.record_entry(tenant, entry(*REWORDED, incident_id="INC-2"), context())
    service.embed_pending(tenant)  # a recurrence merged
    service.record_feedback(
        tenant, first.entry_id, {"verdict": "helpful", "incident_id": "INC-3"}, context()
    )
    other = service.record_entry(
        tenant,
        entry(
            "Payments TLS certificate expired",
            "The gateway certificate expired "
            "overnight and every card authorization failed its handshake.",
        ),
        context(),
    ).entry
    service.retire_entry(tenant, other.entry_id, "outdated", context())
    service.set_episodic_ttl_days(tenant, 14)
    service.repository.store_calibration(tenant, service.provider.embed_rev, 0.6, 20, {})
    NonceStore(app_conn).claim_nonce(tenant, "key-1", uuid.uuid4().hex, 60)
    node = {"node_type": "Service", "external_id": "checkout"}
    db = {"node_type": "Service", "external_id": "db"}
    TopologyService(TopologyRepository(app_conn)).record(
        tenant,
        {"nodes": [node, db], "edges": [{"source": node, "edge_type": "DEPENDS_ON", "target": db}]},
    )


def _rows(admin_conn: psycopg.Connection[Any], tenant: str) -> dict[str, int]:
    tables = [name for (name,) in admin_conn.execute(TENANT_TABLES).fetchall()]
    counts = {}
    for table in tables:
        count = sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s").format(
            sql.Identifier(table)
        )
        counts[table] = int((admin_conn.execute(count, (tenant,)).fetchone() or (0,))[0])
    return counts


def test_a_purge_leaves_no_row_of_the_organization_and_every_other_as_it_was(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    # a tenant-scoped table added later, as a migration would add one: purged too
    admin_conn.execute(
        "CREATE TABLE IF NOT EXISTS later_tenant_notes (tenant_id text NOT NULL, note text)"
    )
    admin_conn.execute("GRANT SELECT, INSERT ON later_tenant_notes TO grandbo_app")
    try:
        for org in (tenant, other_tenant):
            _seed(service, app_conn, org)
            admin_conn.execute("INSERT INTO later_tenant_notes VALUES (%s, 'a note')", (org,))
        before = _rows(admin_conn, tenant)
        theirs = _rows(admin_conn, other_tenant)
        seeded = {table for table, n in before.items() if n}
        assert {
            "org_memory_events",
            "org_memory_entries",
            "org_memory_tag_postings",
            "org_memory_tag_stats",
            "org_memory_tenant_stats",
            "org_memory_tenants",
            "org_memory_tenant_settings",
            "org_memory_calibrations",
            "topology_nodes",
            "topology_edges",
            "later_tenant_notes",
        } <= seeded
        assert service.organization_rows(tenant) == {
            t: n for t, n in before.items() if t != "admin_request_nonces"
        }

        deleted = service.purge_organization(tenant)

        # reported, table by table; the spent nonces of signed requests stay (they hold no
        # memory, and deleting them would make the purge's own confirmation replayable)
        nonces = before.pop("admin_request_nonces")
        assert nonces == 1
        assert deleted == before
        after = _rows(admin_conn, tenant)
        assert after.pop("admin_request_nonces") == nonces
        assert set(after.values()) == {0}
        assert _rows(admin_conn, other_tenant) == theirs
        with pytest.raises(EntryNotFoundError):
            service.get_entry(tenant, uuid.uuid4())
        assert (
            service.query_org_memory(
                tenant, "checkout requests time out waiting for a database connection"
            ).hits
            == []
        )
        # the organization can start again from nothing
        service.record_entry(tenant, entry(*LESSON), context())
        assert service.repository.verify_projection(tenant).mismatches == []
    finally:
        admin_conn.execute("DROP TABLE IF EXISTS later_tenant_notes")


def test_deletes_outside_the_purge_are_still_refused(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    _seed(service, app_conn, tenant)
    for statement in (
        "DELETE FROM org_memory_events WHERE tenant_id = %s",
        "DELETE FROM topology_nodes WHERE tenant_id = %s",
    ):
        with admin_conn.transaction():
            # the purge's setting, but naming another tenant than the transaction's
            admin_conn.execute(
                "SELECT set_config('grandbo.tenant_id', %s, true),"
                " set_config('grandbo.purging', %s, true)",
                (other_tenant, tenant),
            )
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                admin_conn.execute(statement, (tenant,))
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (other_tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute("SELECT * FROM grandbo_purge_tenant(%s)", (tenant,))
    assert _rows(admin_conn, tenant)["org_memory_events"] > 0


def test_a_write_racing_the_purge_is_either_purged_or_after_it(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    """The purge holds the organization's exclusive lock: a write waits for it and then
    lands in an empty lake, or landed before and is purged; never half of either."""
    _seed(service, app_conn, tenant)
    writer = MemoryService(MemoryRepository(connect(database.app)), service.provider)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(5):
                writer.record_entry(
                    tenant,
                    entry(
                        f"Cache stampede {n} after a deploy",
                        "Every pod refilled the cache "
                        "at once after the deploy and the database saturated for minutes.",
                    ),
                    context(),
                )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    service.purge_organization(tenant)
    thread.join(30)
    assert errors == []
    assert service.repository.verify_projection(tenant).mismatches == []
    left = _rows(admin_conn, tenant)
    entries, events = left["org_memory_entries"], left["org_memory_events"]
    assert entries == events  # only whole writes after the purge (one event each)
