"""The store through a transaction pooler (PgBouncer, pool_mode=transaction), as RDS Proxy
multiplexes it: after each transaction a client's backend serves the next client.

What must hold there as on a direct connection: the tenant scope, the pipelined search,
the tenant locks, `rebuild`, the migrations and the index job; and nothing a client did
may reach the next client of its backend. RDS Proxy pins a session that leaves state
behind (a SET, a session advisory lock, a temporary table, a prepared statement:
https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy-pinning.html);
PgBouncer does not, so such state shows here as a leak or a failure.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from grandbo.api.nonces import NonceStore
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.curation.audit import audit
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations, migrate
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.storage.tenant_scope import TenantLock
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .helpers import context, entry
from .transaction_pooler import TransactionPooler

LESSON = entry(
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool was "
    "exhausted and requests timed out waiting for a connection.",
)
OTHER = entry(
    "Kafka consumer lag after a broker restart",
    "Consumer lag grew for hours after a broker restart because partitions were not rebalanced.",
)
TOPIC = "checkout requests time out waiting for a database connection from the pool"
# A backend with nothing carried over from an earlier client.
CLEAN = {
    "session_settings": [],
    "advisory_locks": [],
    "prepared_statements": [],
    "temporary_relations": [],
    "listening_channels": [],
    "open_cursors": [],
    "tenant": None,
}
# what a request's transaction-local settings must not leave on the backend
LOCAL_SETTINGS = (
    "SELECT '[1]'::vector IS NOT NULL AS loaded,"  # pgvector's settings exist once it is loaded
    " current_setting('hnsw.ef_search') AS ef_search,"
    " current_setting('hnsw.iterative_scan') AS iterative_scan,"
    " current_setting('lock_timeout') AS lock_timeout,"
    " current_setting('idle_in_transaction_session_timeout') AS idle_timeout"
)


def carried_over(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What the backend serving `conn`'s next statement keeps from earlier clients: one
    statement, so one transaction, so one backend through the pooler."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT"
            " ARRAY(SELECT name || '=' || setting FROM pg_settings WHERE source = 'session'"
            "   ORDER BY name) AS session_settings,"
            " ARRAY(SELECT objid::text FROM pg_locks WHERE locktype = 'advisory'"
            "   AND pid = pg_backend_pid()) AS advisory_locks,"
            " ARRAY(SELECT name FROM pg_prepared_statements) AS prepared_statements,"
            " ARRAY(SELECT relname::text FROM pg_class"
            "   WHERE relnamespace = pg_my_temp_schema()) AS temporary_relations,"
            " ARRAY(SELECT pg_listening_channels()) AS listening_channels,"
            " ARRAY(SELECT name FROM pg_cursors) AS open_cursors,"
            " NULLIF(current_setting('grandbo.tenant_id', true), '') AS tenant"
        )
        row = cur.fetchone()
    assert row is not None
    return row


def backend_pid(conn: psycopg.Connection[Any]) -> int:
    """The server process behind the pooler (`conn.info.backend_pid` is PgBouncer's)."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def pooled_app(pooled_database: DatabaseUrls) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(pooled_database.app)
    yield conn
    conn.close()


@pytest.fixture
def next_client(pooled_database: DatabaseUrls) -> Iterator[psycopg.Connection[Any]]:
    """Another client of the application role, served by the same backend in turn."""
    conn = connect(pooled_database.app)
    yield conn
    conn.close()


@pytest.fixture
def pooled_service(pooled_app: psycopg.Connection[Any]) -> MemoryService:
    return MemoryService(MemoryRepository(pooled_app), FakeEmbeddingProvider())


def test_two_clients_of_one_role_take_turns_on_one_backend(
    pooled_app: psycopg.Connection[Any], next_client: psycopg.Connection[Any]
) -> None:
    # what makes every test below meaningful: the pooler really shares the backend
    assert backend_pid(pooled_app) == backend_pid(next_client)
    assert pooled_app.info.backend_pid != next_client.info.backend_pid  # two clients


def test_a_tenant_scope_leaves_no_tenant_and_no_setting_to_the_next_client(
    pooled_service: MemoryService,
    pooled_app: psycopg.Connection[Any],
    next_client: psycopg.Connection[Any],
    app_conn: psycopg.Connection[Any],
    tenant: str,
) -> None:
    # Given client A wrote, embedded and searched as `tenant` (the search with its
    # transaction-local vector-leg settings and bounded waits)
    created = pooled_service.record_entry(tenant, LESSON, context()).entry
    pooled_service.embed_pending(tenant)
    assert [h.entry_id for h in pooled_service.query_org_memory(tenant, TOPIC).hits] == [
        created.entry_id
    ]
    # When client B is served by the same backend
    assert backend_pid(next_client) == backend_pid(pooled_app)
    # Then B has no tenant, so row-level security shows it nothing (fails closed)
    assert carried_over(next_client)["tenant"] is None
    assert next_client.execute("SELECT count(*) FROM org_memory_entries").fetchone() == (0,)
    assert next_client.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone() == (0,)
    # and none of A's settings: B's backend answers as a fresh session does
    assert (
        next_client.execute(LOCAL_SETTINGS).fetchone()
        == app_conn.execute(LOCAL_SETTINGS).fetchone()
    )


def test_the_request_paths_leave_no_session_state_on_their_backend(
    pooled_service: MemoryService,
    pooled_app: psycopg.Connection[Any],
    next_client: psycopg.Connection[Any],
    tenant: str,
) -> None:
    # Given every kind of request a function serves, run through the pooler
    service = pooled_service
    created = service.record_entry(tenant, LESSON, context()).entry
    service.record_entries(tenant, [(OTHER, context())])
    service.embed_pending(tenant)
    service.query_org_memory(tenant, TOPIC)
    service.get_entry(tenant, created.entry_id)
    service.record_feedback(
        tenant, created.entry_id, {"verdict": "misleading", "incident_id": "INC-1"}, context()
    )
    service.entries_for_review(tenant)
    service.correct_entry(tenant, created.entry_id, entry("Pool leak", TOPIC), context())
    service.embed_pending(tenant)
    assert audit(service, tenant).tenant_id == tenant  # a snapshot-isolated verification
    service.retire_entry(tenant, created.entry_id, "superseded", context())
    NonceStore(pooled_app).claim_nonce(tenant, "key-1", uuid.uuid4().hex, 60)
    topology = TopologyService(TopologyRepository(pooled_app))
    node = {"node_type": "Service", "external_id": "checkout"}
    db = {"node_type": "Service", "external_id": "db"}
    topology.record(
        tenant,
        {"nodes": [node, db], "edges": [{"source": node, "edge_type": "DEPENDS_ON", "target": db}]},
    )
    topology.blast_radius(tenant, "Service", "db")
    # Then the backend they ran on carries nothing over to the next client
    assert backend_pid(next_client) == backend_pid(pooled_app)
    assert carried_over(next_client) == CLEAN


def test_the_pipelined_search_answers_the_same_through_the_pooler(
    service: MemoryService, pooled_service: MemoryService, tenant: str
) -> None:
    for lesson in (LESSON, OTHER, entry("Pool sized too small", TOPIC)):
        service.record_entry(tenant, lesson, context())
    service.embed_pending(tenant)
    direct = service.query_org_memory(tenant, TOPIC)
    pooled = pooled_service.query_org_memory(tenant, TOPIC)
    assert len(direct.hits) >= 2
    assert [(h.entry_id, h.why) for h in pooled.hits] == [(h.entry_id, h.why) for h in direct.hits]
    assert pooled.metadata.active_entries == direct.metadata.active_entries == 3


def test_a_tenant_lock_lasts_exactly_its_transaction_through_the_pooler(
    pooled_app: psycopg.Connection[Any],
    next_client: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
) -> None:
    repository = MemoryRepository(pooled_app)
    key = f"grandbo.tenant:{tenant}"

    def free_for(kind: str) -> bool:
        """Whether a direct session could take the tenant's lock now (without waiting)."""
        with admin_conn.transaction():
            row = admin_conn.execute(
                f"SELECT pg_try_advisory_xact_lock{kind}(hashtextextended(%s, 0))", (key,)
            ).fetchone()
        assert row is not None
        return bool(row[0])

    with repository._tenant_scope(tenant, lock=TenantLock.EXCLUSIVE):
        assert not free_for("_shared")  # a writer waits while a rebuild holds it
    with repository._tenant_scope(tenant, lock=TenantLock.WRITE):
        assert free_for("_shared")  # writers share it
        assert not free_for("")  # a rebuild waits for the writer
    # released at commit, on the backend the next client now gets
    assert free_for("")
    assert carried_over(next_client)["advisory_locks"] == []


def test_rebuild_through_the_pooler_keeps_vectors_and_leaves_no_temporary_table(
    pooled_service: MemoryService, next_client: psycopg.Connection[Any], tenant: str
) -> None:
    created = [pooled_service.record_entry(tenant, e, context()).entry for e in (LESSON, OTHER)]
    pooled_service.embed_pending(tenant)
    before = pooled_service.query_org_memory(tenant, TOPIC)
    repository = pooled_service.repository
    # twice on the one backend: the first's temporary table must be gone by its commit
    repository.rebuild_projection(tenant)
    report = repository.rebuild_projection(tenant)
    assert (report.events, report.entries) == (2, 2)
    assert repository.verify_projection(tenant).mismatches == []
    assert all(repository.get_entry(tenant, e.entry_id).embedded_revision == 1 for e in created)
    after = pooled_service.query_org_memory(tenant, TOPIC)
    assert [(h.entry_id, h.why) for h in after.hits] == [(h.entry_id, h.why) for h in before.hits]
    assert carried_over(next_client) == CLEAN


def test_two_deploys_migrating_at_once_through_the_pooler_apply_each_migration_once(
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    transaction_pooler: TransactionPooler,
) -> None:
    # Given a new database, and two deploys' migrations through the pooler, which serves
    # both (one backend) a transaction at a time
    name = f"grandbo_pooled_{uuid.uuid4().hex[:8]}"
    admin_conn.execute(f'CREATE DATABASE "{name}"')
    params = {k: str(v) for k, v in conninfo_to_dict(database.admin).items() if v is not None}
    url = transaction_pooler.url_for(make_conninfo("", **{**params, "dbname": name}))
    applied: list[list[int]] = []
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def deploy() -> None:
        start.wait()
        try:
            applied.append([m.version for m in migrate(url)])
        except BaseException as exc:  # reported below, with the other deploy's outcome
            failures.append(exc)

    try:
        deploys = [threading.Thread(target=deploy) for _ in range(2)]
        for thread in deploys:
            thread.start()
        for thread in deploys:
            thread.join(timeout=120)
        # Then both succeed, and together they applied every migration once, in order
        assert failures == []
        everything = [m.version for m in available_migrations()]
        assert sorted(applied[0] + applied[1]) == everything
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            recorded = conn.execute(
                "SELECT version FROM grandbo_schema_migrations ORDER BY version"
            ).fetchall()
            assert [version for (version,) in recorded] == everything
            assert carried_over(conn) == CLEAN  # no lock, no prepared statement left
        assert migrate(url) == []
    finally:
        admin_conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_the_index_job_through_the_pooler_builds_a_valid_index_and_leaves_no_setting(
    service: MemoryService,
    tenant: str,
    pooled_database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    for i in range(30):
        service.record_entry(
            tenant, entry(f"Finding {i}", f"{LESSON['summary']} case {i}"), context()
        )
    service.embed_pending(tenant)
    exact = service.query_org_memory(tenant, TOPIC, limit=25)
    # each CREATE INDEX CONCURRENTLY is a statement of its own, outside any transaction
    # block, which a transaction pooler serves like any other
    assert tenant in ensure_hnsw_indexes(pooled_database.admin, min_entries=30)
    assert ensure_hnsw_indexes(pooled_database.admin, min_entries=30) == []
    valid = admin_conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s",
        (index_name(tenant),),
    ).fetchall()
    assert valid == [(True,)]
    with_index = service.query_org_memory(tenant, TOPIC, limit=25)
    assert [h.entry_id for h in with_index.hits] == [h.entry_id for h in exact.hits]
    with psycopg.connect(pooled_database.admin, autocommit=True, prepare_threshold=None) as conn:
        assert carried_over(conn) == CLEAN
        # the build's memory comes with the role (migration 0017), on any backend
        assert conn.execute("SHOW maintenance_work_mem").fetchone() == ("1GB",)
