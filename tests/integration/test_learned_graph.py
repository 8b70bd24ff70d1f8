"""The learned graph (issue 27): incidents write Incident nodes, AFFECTS and
CORRELATES_WITH in the same transaction as their entries; redelivered, reordered and
concurrent deliveries leave it as one delivery would; tenants never see each other's."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.cli import main
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import InvalidInputError
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.topology.learned.graph import incident_node_id
from grandbo.topology.model import service_dependencies
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .helpers import context, entry

T0 = datetime(2026, 11, 1, tzinfo=UTC)
TOPIC = "checkout requests failed because the payments database ran out of connections"


class Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(days=20)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def memory_on(conn: psycopg.Connection[Any], clock: Clock) -> MemoryService:
    topology = TopologyService(TopologyRepository(conn), clock=clock)
    return MemoryService(
        MemoryRepository(conn), FakeEmbeddingProvider(), topology=topology, clock=clock
    )


@pytest.fixture
def memory(app_conn: psycopg.Connection[Any], clock: Clock) -> MemoryService:
    return memory_on(app_conn, clock)


def topology_of(memory: MemoryService) -> TopologyService:
    assert isinstance(memory.topology, TopologyService)
    return memory.topology


def incident(
    tenant: str,
    incident_id: str,
    *,
    service: str | None,
    findings: list[tuple[str, str | None]],
    closed_at: datetime = T0,
    status: str = "corroborated",
) -> dict[str, Any]:
    """An IncidentClosed detail: one finding per (finding id, service)."""
    return {
        "tenant_id": tenant,
        "incident_id": incident_id,
        "title": "Checkout errors",
        "service": service,
        "closed_at": closed_at.isoformat(),
        "findings": [
            {
                "finding_id": fid,
                "status": status,
                "title": f"Connections exhausted near {svc or service}",
                "summary": "The database ran out of connections and requests failed to "
                f"connect while {fid} was investigated on {svc or service}.",
                **({"service": svc} if svc else {}),
            }
            for fid, svc in findings
        ],
    }


def deliver(memory: MemoryService, detail: dict[str, Any]) -> None:
    record_incident(memory, parse_incident_closed(detail))


def learned_rows(admin_conn: psycopg.Connection[Any], tenant: str) -> dict[str, Any]:
    """The tenant's learned graph as one delivery would leave it, tenant prefix removed."""
    prefix = f"{tenant}::"
    nodes = admin_conn.execute(
        "SELECT node_key, namespace, valid_at, invalid_at, observed_count FROM topology_nodes"
        " WHERE tenant_id = %s ORDER BY node_key, valid_at",
        (tenant,),
    ).fetchall()
    edges = admin_conn.execute(
        "SELECT source_key, edge_type, target_key, valid_at, first_seen, last_seen,"
        " invalid_at, observed_count FROM topology_edges"
        " WHERE tenant_id = %s AND namespace = 'learned' ORDER BY 1, 2, 3, 4",
        (tenant,),
    ).fetchall()
    strip = lambda v: v.removeprefix(prefix) if isinstance(v, str) else v  # noqa: E731
    return {
        "nodes": [tuple(strip(v) for v in row) for row in nodes],
        "edges": [tuple(strip(v) for v in row) for row in edges],
    }


def correlations(admin_conn: psycopg.Connection[Any], tenant: str) -> dict[tuple[str, str], int]:
    rows = admin_conn.execute(
        "SELECT source_key, target_key, observed_count FROM topology_edges"
        " WHERE tenant_id = %s AND edge_type = 'CORRELATES_WITH' AND invalid_at IS NULL",
        (tenant,),
    ).fetchall()
    return {(s.split("::")[2], t.split("::")[2]): n for s, t, n in rows}


def affected_by(admin_conn: psycopg.Connection[Any], tenant: str, incident_id: str) -> set[str]:
    key = f"{tenant}::Incident::{incident_node_id(incident_id)}"
    rows = admin_conn.execute(
        "SELECT target_key FROM topology_edges WHERE tenant_id = %s AND source_key = %s"
        " AND edge_type = 'AFFECTS' AND namespace = 'learned'",
        (tenant, key),
    ).fetchall()
    return {row[0].split("::")[2] for row in rows}


# -- writes ---------------------------------------------------------------------------


def test_an_incident_writes_its_node_affects_and_correlations_with_its_entries(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    deliver(
        memory,
        incident(
            tenant, "INC-1", service="checkout", findings=[("f1", "payments-db"), ("f2", None)]
        ),
    )
    # the incident's service (the symptom) and the findings' (the cause) are affected
    assert affected_by(admin_conn, tenant, "INC-1") == {"checkout", "payments-db"}
    assert correlations(admin_conn, tenant) == {("checkout", "payments-db"): 1}
    # entries keep the incident id: entry -> incident node -> services, no second source
    entries = admin_conn.execute(
        "SELECT incident_id, service FROM org_memory_entries WHERE tenant_id = %s", (tenant,)
    ).fetchall()
    assert {i for i, _ in entries} == {"INC-1"}
    node = admin_conn.execute(
        "SELECT namespace, external_id FROM topology_nodes WHERE tenant_id = %s"
        " AND node_type = 'Incident'",
        (tenant,),
    ).fetchall()
    # the node is keyed by a digest: a redaction of the entry leaves no readable id
    assert node == [("learned", incident_node_id("INC-1"))]
    assert "INC-1" not in node[0][1]


def test_an_incident_with_no_corroborated_finding_writes_nothing(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    deliver(
        memory,
        incident(
            tenant, "INC-2", service="checkout", findings=[("h1", "search")], status="hypothesis"
        ),
    )
    assert learned_rows(admin_conn, tenant) == {"nodes": [], "edges": []}


def test_redelivery_is_a_no_op_and_a_recurrence_reinforces(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    first = incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")])
    deliver(memory, first)
    once = learned_rows(admin_conn, tenant)
    deliver(memory, first)
    deliver(memory, first)
    assert learned_rows(admin_conn, tenant) == once
    later = T0 + timedelta(days=3)
    deliver(
        memory,
        incident(
            tenant,
            "INC-9",
            service="checkout",
            findings=[("f1", "payments-db")],
            closed_at=later,
        ),
    )
    row = admin_conn.execute(
        "SELECT observed_count, valid_at, first_seen, last_seen FROM topology_edges"
        " WHERE tenant_id = %s AND edge_type = 'CORRELATES_WITH'",
        (tenant,),
    ).fetchall()
    assert row == [(2, T0, T0, later)]


def test_reordered_deliveries_leave_the_graph_one_order_would(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    clock: Clock,
    tenant: str,
    other_tenant: str,
) -> None:
    def incidents(t: str) -> list[dict[str, Any]]:
        return [
            incident(t, "INC-1", service="checkout", findings=[("f1", "payments-db")]),
            incident(
                t,
                "INC-2",
                service="checkout",
                findings=[("f1", "payments-db"), ("f2", "ledger")],
                closed_at=T0 + timedelta(days=1),
            ),
            incident(
                t,
                "INC-3",
                service="ledger",
                findings=[("f1", "payments-db")],
                closed_at=T0 + timedelta(days=2),
            ),
        ]

    memory = memory_on(app_conn, clock)
    for detail in incidents(tenant):
        deliver(memory, detail)
    for detail in reversed(incidents(other_tenant)):
        deliver(memory, detail)
        deliver(memory, detail)  # and each twice
    assert learned_rows(admin_conn, tenant) == learned_rows(admin_conn, other_tenant)
    assert correlations(admin_conn, tenant) == {
        ("checkout", "payments-db"): 2,
        ("checkout", "ledger"): 1,
        ("ledger", "payments-db"): 2,
    }


def test_concurrent_deliveries_count_each_incident_once(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], clock: Clock, tenant: str
) -> None:
    """Eight threads: the same event four times, and two events of one incident naming
    different services (a re-closed incident), twice each; all at once."""
    same = incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")])
    part_a = incident(tenant, "INC-7", service="search", findings=[("a", "index")])
    part_b = incident(tenant, "INC-7", service="search", findings=[("b", "cache")])
    details = [same] * 4 + [part_a, part_b] * 2
    barrier = threading.Barrier(len(details))
    errors: list[BaseException] = []

    def run(detail: dict[str, Any]) -> None:
        conn = connect(database.app)
        try:
            memory = memory_on(conn, clock)
            barrier.wait()
            deliver(memory, detail)
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(d,)) for d in details]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert correlations(admin_conn, tenant) == {
        ("checkout", "payments-db"): 1,
        ("cache", "index"): 1,
        ("cache", "search"): 1,
        ("index", "search"): 1,
    }
    assert affected_by(admin_conn, tenant, "INC-7") == {"search", "index", "cache"}


def test_the_graph_write_shares_the_entries_transaction(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    clock: Clock,
    tenant: str,
) -> None:
    class FailingTopology(TopologyService):
        def record_incidents(self, *args: Any, **kwargs: Any) -> dict[str, int]:
            super().record_incidents(*args, **kwargs)
            raise RuntimeError("the graph write failed after its rows went in")

    memory = MemoryService(
        MemoryRepository(app_conn),
        FakeEmbeddingProvider(),
        topology=FailingTopology(TopologyRepository(app_conn), clock=clock),
        clock=clock,
    )
    with pytest.raises(RuntimeError, match="graph write failed"):
        deliver(memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "db")]))
    assert learned_rows(admin_conn, tenant) == {"nodes": [], "edges": []}
    stored = admin_conn.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert stored == (0,)


def test_admin_entries_of_one_incident_correlate_their_services(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    for name in ("checkout", "payments-db"):
        memory.record_entry(
            tenant,
            entry(
                f"Connections exhausted on {name}",
                "The database ran out of connections and requests failed to connect.",
                service=name,
                incident_id="INC-44",
            ),
            context(),
        )
    memory.record_entry(  # no incident: teaches the graph nothing
        tenant,
        entry("Runbook for search", "Restart the indexer when the queue backs up for long."),
        context(),
    )
    assert affected_by(admin_conn, tenant, "INC-44") == {"checkout", "payments-db"}
    assert correlations(admin_conn, tenant) == {("checkout", "payments-db"): 1}


def test_tenants_never_see_each_others_learned_graph(
    memory: MemoryService,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
) -> None:
    deliver(memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")]))
    # the other organization: same incident id, one service in common, one its own
    deliver(memory, incident(other_tenant, "INC-1", service="checkout", findings=[("f1", "vault")]))
    topology = topology_of(memory)
    assert topology.services_in_scope(tenant, "checkout", "correlated") == [
        "checkout",
        "payments-db",
    ]
    assert topology.services_in_scope(other_tenant, "checkout", "correlated") == [
        "checkout",
        "vault",
    ]
    radius = topology.blast_radius(tenant, "Service", "checkout", namespaces="learned")
    assert [n.external_id for n in radius.affected] == ["payments-db"]
    with pytest.raises(InvalidInputError, match="no Service 'vault'"):
        topology.blast_radius(tenant, "Service", "vault", namespaces="learned")
    # and under row-level security, the application role reads none of the other's rows
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        seen = app_conn.execute(
            "SELECT DISTINCT tenant_id FROM topology_edges WHERE namespace = 'learned'"
        ).fetchall()
    assert seen == [(tenant,)]
    assert correlations(admin_conn, other_tenant) == {("checkout", "vault"): 1}


# -- reads ----------------------------------------------------------------------------


def test_blast_radius_and_criticality_read_learned_edges_when_asked(
    memory: MemoryService, tenant: str
) -> None:
    topology = topology_of(memory)
    topology.record(
        tenant,
        service_dependencies([("checkout", "payments-db")]),
    )
    deliver(memory, incident(tenant, "INC-1", service="ledger", findings=[("f1", "payments-db")]))

    def reached(namespaces: str) -> dict[str, int]:
        radius = topology.blast_radius(tenant, "Service", "payments-db", namespaces=namespaces)
        assert radius.namespaces.value == namespaces
        return {n.external_id: n.distance for n in radius.affected}

    assert reached("topology") == {"checkout": 1}
    assert reached("learned") == {"ledger": 1}
    assert reached("both") == {"checkout": 1, "ledger": 1}
    plain = topology.criticality(tenant, "Service", "payments-db")
    learned = topology.criticality(tenant, "Service", "payments-db", namespaces="learned")
    both = topology.criticality(tenant, "Service", "payments-db", namespaces="both")
    assert (plain.basis, plain.score) == ("reverse_reachability", 1.0)
    assert (learned.basis, learned.score) == ("learned_correlation", 1.0)
    # ledger correlates with payments-db; checkout depends on it: two dependents at 1
    assert (both.basis, both.score, both.dependents) == ("reverse_reachability+learned", 2.0, 2)
    with pytest.raises(InvalidInputError) as error:
        topology.blast_radius(tenant, "Service", "payments-db", namespaces="everything")
    assert error.value.field == "namespaces"


def test_scope_correlated_searches_services_that_failed_together_most_often_first(
    memory: MemoryService, clock: Clock, tenant: str
) -> None:
    for day, (number, cause) in enumerate(
        [("1", "payments-db"), ("2", "payments-db"), ("3", "ledger")]
    ):
        deliver(
            memory,
            incident(
                tenant,
                f"INC-{number}",
                service="checkout",
                findings=[("f1", cause), ("f2", None)],
                closed_at=T0 + timedelta(days=day),
            ),
        )
    result = memory.query_org_memory(
        tenant, TOPIC, limit=10, service="checkout", scope="correlated"
    )
    assert result.metadata.services_in_scope == ["checkout", "payments-db", "ledger"]
    assert {hit.service for hit in result.hits} == {"checkout", "payments-db", "ledger"}
    only = memory.query_org_memory(tenant, TOPIC, limit=10, service="checkout")
    assert {hit.service for hit in only.hits} == {"checkout"}
    # as of before the third incident closed, ledger had not failed with checkout yet
    then = memory.query_org_memory(
        tenant, TOPIC, service="checkout", scope="correlated", as_of=T0 + timedelta(hours=30)
    )
    assert then.metadata.services_in_scope == ["checkout", "payments-db"]
    assert then.metadata.as_of == T0 + timedelta(hours=30)


# -- rebuild --verify -----------------------------------------------------------------


@pytest.fixture
def cli_env(database: DatabaseUrls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", database.app)
    monkeypatch.setenv("GRANDBO_ADMIN_DATABASE_URL", database.admin)
    monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")


def test_rebuild_verify_covers_the_learned_graph(
    cli_env: None,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    clock: Clock,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # entries written with no topology tier configured taught the graph nothing yet
    bare = MemoryService(MemoryRepository(app_conn), FakeEmbeddingProvider(), clock=clock)
    deliver(bare, incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")]))
    deliver(bare, incident(tenant, "INC-2", service="checkout", findings=[("f1", "payments-db")]))
    assert main(["rebuild", "--tenant", tenant, "--verify-only"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH learned graph: incident" in out
    # each incident's finding and its own service (the symptom), recorded in its events
    assert "the learned graph DIFFERS FROM the 4 (incident, service) pairs" in out

    # the rebuild completes it from the events (each pair once), and it verifies
    assert main(["rebuild", "--tenant", tenant, "--verify"]) == 0
    out = capsys.readouterr().out
    assert "learned graph: 4 AFFECTS edge(s) added from the events" in out
    assert "the learned graph agrees with the 4 (incident, service) pairs" in out
    assert affected_by(admin_conn, tenant, "INC-1") == {"checkout", "payments-db"}
    assert main(["rebuild", "--tenant", tenant]) == 0  # a second rebuild adds nothing
    assert "0 AFFECTS edge(s) added" in capsys.readouterr().out

    # with the tier, new incidents correlate; a count one redelivery too many would show
    memory = memory_on(app_conn, clock)
    deliver(memory, incident(tenant, "INC-3", service="checkout", findings=[("f1", "ledger")]))
    assert main(["rebuild", "--tenant", tenant, "--verify-only"]) == 0
    capsys.readouterr()
    admin_conn.execute(
        "UPDATE topology_edges SET observed_count = observed_count + 1"
        " WHERE tenant_id = %s AND edge_type = 'CORRELATES_WITH'",
        (tenant,),
    )
    assert main(["rebuild", "--tenant", tenant, "--verify-only"]) == 1
    assert "checkout and ledger correlated 2 times, affected together by 1 incidents" in (
        capsys.readouterr().out
    )


def test_a_rename_carries_what_incidents_taught_and_scopes_reach_the_old_name(
    memory: MemoryService,
    admin_conn: psycopg.Connection[Any],
    clock: Clock,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topology = topology_of(memory)
    topology.record(
        tenant,
        service_dependencies([("checkout", "payments-db")]),
        sync=True,
    )
    for number in ("1", "2"):
        deliver(
            memory,
            incident(tenant, f"INC-{number}", service="checkout", findings=[("f1", "payments-db")]),
        )
    clock.now += timedelta(days=1)
    counts = topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": "checkout"},
                {"node_type": "Service", "external_id": "ledger-db", "replaces": "payments-db"},
            ],
            "edges": [
                {
                    "source": {"node_type": "Service", "external_id": "checkout"},
                    "edge_type": "DEPENDS_ON",
                    "target": {"node_type": "Service", "external_id": "ledger-db"},
                }
            ],
        },
        sync=True,
    )
    assert counts["nodes_replaced"] == 1
    # the correlation (2 incidents) and both incidents' AFFECTS go on under the new name
    assert correlations(admin_conn, tenant) == {("checkout", "ledger-db"): 2}
    assert counts["learned_edges_carried"] == 3
    for scope in ("correlated", "dependencies"):
        result = memory.query_org_memory(tenant, TOPIC, service="checkout", scope=scope)
        assert result.metadata.services_in_scope == ["checkout", "ledger-db", "payments-db"]
        old = [hit for hit in result.hits if hit.service == "payments-db"]
        assert old, scope  # the lessons written under the old name are found
        assert all(
            h.staleness is not None and h.staleness.changes[0].replaced_by == "ledger-db"
            for h in old
        )
    # and the graph still agrees with the events
    assert main(["rebuild", "--tenant", tenant, "--verify-only"]) == 0, capsys.readouterr().out


def test_a_redaction_leaves_no_readable_incident_id_in_the_graph_and_it_still_verifies(
    memory: MemoryService,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = "INC-acme-merger-talks"  # an incident id can carry words
    outcomes = memory.record_entries(
        tenant,
        [
            (
                entry(
                    f"Connections exhausted on {name}",
                    "The database ran out of connections and requests failed to connect.",
                    service=name,
                    incident_id=secret,
                ),
                context(),
            )
            for name in ("checkout", "payments-db")
        ],
    )
    for outcome in outcomes:
        memory.redact_entry(tenant, outcome.entry.entry_id, "legal hold", context())
    rows = admin_conn.execute(
        "SELECT count(*) FROM topology_nodes n WHERE n.tenant_id = %(t)s"
        " AND (n.node_key || n.external_id || coalesce(n.name, '') || n.properties::text)"
        "     ILIKE %(s)s",
        {"t": tenant, "s": "%merger%"},
    ).fetchone()
    edges = admin_conn.execute(
        "SELECT count(*) FROM topology_edges e WHERE e.tenant_id = %(t)s"
        " AND (e.source_key || e.target_key || e.properties::text) ILIKE %(s)s",
        {"t": tenant, "s": "%merger%"},
    ).fetchone()
    assert (rows, edges) == ((0,), (0,))
    # nor by its digest (an id of the platform's shape is guessed by hashing candidates):
    # what it taught stays under an id of its own
    assert affected_by(admin_conn, tenant, secret) == set()
    assert correlations(admin_conn, tenant) == {("checkout", "payments-db"): 1}
    assert main(["rebuild", "--tenant", tenant, "--verify-only"]) == 0, capsys.readouterr().out


def test_a_sync_never_retires_a_service_under_an_incident_being_recorded(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], clock: Clock, tenant: str
) -> None:
    """An incident's transaction has drawn its edges to `payments-db` and not committed;
    a sync that retires `payments-db` waits for it, then closes those edges too: no
    current learned edge is left touching a retired node."""
    entered, release = threading.Event(), threading.Event()

    class SlowTopology(TopologyService):
        def record_incidents(self, *args: Any, **kwargs: Any) -> dict[str, int]:
            counts = super().record_incidents(*args, **kwargs)
            entered.set()
            release.wait(10)
            return counts

    def connected() -> psycopg.Connection[Any]:
        return connect(database.app)

    writer, syncer = connected(), connected()
    try:
        TopologyService(TopologyRepository(syncer), clock=clock).record(
            tenant, service_dependencies([("checkout", "payments-db")]), sync=True
        )
        memory = MemoryService(
            MemoryRepository(writer),
            FakeEmbeddingProvider(),
            topology=SlowTopology(TopologyRepository(writer), clock=clock),
            clock=clock,
        )
        record = threading.Thread(
            target=deliver,
            args=(
                memory,
                incident(tenant, "INC-1", service="checkout", findings=[("f", "payments-db")]),
            ),
        )
        record.start()
        assert entered.wait(10)
        retire = threading.Thread(
            target=TopologyService(TopologyRepository(syncer), clock=clock).record,
            args=(tenant, {"nodes": [{"node_type": "Service", "external_id": "checkout"}]}),
            kwargs={"sync": True},
        )
        retire.start()
        retire.join(0.5)
        assert retire.is_alive()  # the sync waits for the incident's transaction
        release.set()
        record.join(10)
        retire.join(10)
    finally:
        release.set()
        writer.close()
        syncer.close()
    dangling = admin_conn.execute(
        "SELECT count(*) FROM topology_edges e JOIN topology_nodes n"
        "   ON n.tenant_id = e.tenant_id AND n.node_key IN (e.source_key, e.target_key)"
        " WHERE e.tenant_id = %s AND e.invalid_at IS NULL"
        "   AND NOT EXISTS (SELECT 1 FROM topology_nodes c WHERE c.tenant_id = n.tenant_id"
        "     AND c.node_key = n.node_key AND c.invalid_at IS NULL)",
        (tenant,),
    ).fetchone()
    assert dangling == (0,)
    assert affected_by(admin_conn, tenant, "INC-1") == {"checkout", "payments-db"}


def test_the_command_line_queries_a_scope_as_of_a_moment_and_prints_staleness(
    memory: MemoryService, cli_env: None, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = topology_of(memory)
    topology.record(tenant, service_dependencies([("checkout", "payments-db")]), sync=True)
    deliver(memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")]))
    # the rename, a batch after the incident (the fixture's clock: T0 + 20 days)
    topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": "ledger-db", "replaces": "payments-db"}
            ]
        },
    )
    base = ["query", TOPIC, "--tenant", tenant, "--service", "checkout", "--scope", "correlated"]
    assert main([*base, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["metadata"]["services_in_scope"] == ["checkout", "ledger-db", "payments-db"]
    assert main(base) == 0
    assert 'Stale: "payments-db" was renamed to "ledger-db" on ' in capsys.readouterr().out
    assert main([*base, "--as-of", (T0 + timedelta(days=19)).isoformat(), "--json"]) == 0
    then = json.loads(capsys.readouterr().out)
    assert then["metadata"]["as_of"].startswith("2026-11-20")
    assert all(hit["staleness"] is None for hit in then["hits"])
    assert main(["topology", "blast-radius", "--tenant", tenant, "--id", "checkout",
                 "--namespaces", "learned"]) == 0  # fmt: skip
    assert "ledger-db" in capsys.readouterr().out


def test_a_batch_cannot_write_or_sync_the_learned_namespace(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    deliver(memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")]))
    taught = learned_rows(admin_conn, tenant)
    forged = service_dependencies([("checkout", "vault")]).model_dump()
    forged["namespace"] = "learned"
    forged["edges"][0]["edge_type"] = "CORRELATES_WITH"
    for batch, sync in ((forged, False), ({"namespace": "learned"}, True)):
        with pytest.raises(InvalidInputError) as error:
            topology_of(memory).record(tenant, batch, sync=sync)
        assert error.value.field == "namespace"
    assert learned_rows(admin_conn, tenant) == taught
