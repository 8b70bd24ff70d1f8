"""The knowledge-graph tier on hand-written graphs with known answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.errors import InvalidInputError
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .helpers import context, entry

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def topology(app_conn: psycopg.Connection[Any], clock: Clock) -> TopologyService:
    return TopologyService(TopologyRepository(app_conn), clock=clock)


def svc(name: str) -> dict[str, str]:
    return {"node_type": "Service", "external_id": name}


def depends(a: str, b: str) -> dict[str, Any]:
    """a DEPENDS_ON b: if b fails, a is affected."""
    return {"source": svc(a), "edge_type": "DEPENDS_ON", "target": svc(b)}


def graph(edges: list[tuple[str, str]], extra_nodes: tuple[str, ...] = ()) -> dict[str, Any]:
    names = sorted({n for pair in edges for n in pair} | set(extra_nodes))
    return {"nodes": [svc(n) for n in names], "edges": [depends(a, b) for a, b in edges]}


def affected(radius: Any) -> dict[str, int]:
    return {node.external_id: node.distance for node in radius.affected}


# db <- api <- web, db <- worker <- web (a diamond), plus a cycle queue <-> worker
DIAMOND = [("api", "db"), ("worker", "db"), ("web", "api"), ("web", "worker")]


def test_diamond_blast_radius_has_each_node_once_at_its_shortest_distance(
    topology: TopologyService, tenant: str
) -> None:
    topology.record(tenant, graph(DIAMOND))
    radius = topology.blast_radius(tenant, "Service", "db", hops=3)
    assert affected(radius) == {"api": 1, "worker": 1, "web": 2}
    web = next(n for n in radius.affected if n.external_id == "web")
    assert web.path in (["db", "api", "web"], ["db", "worker", "web"])
    assert not radius.truncated


def test_hops_limit_the_walk(topology: TopologyService, tenant: str) -> None:
    chain = [("b", "a"), ("c", "b"), ("d", "c"), ("e", "d")]
    topology.record(tenant, graph(chain))
    assert affected(topology.blast_radius(tenant, "Service", "a", hops=1)) == {"b": 1}
    assert affected(topology.blast_radius(tenant, "Service", "a", hops=3)) == {
        "b": 1,
        "c": 2,
        "d": 3,
    }


def test_a_cycle_terminates_and_counts_each_node_once(
    topology: TopologyService, tenant: str
) -> None:
    topology.record(tenant, graph([("b", "a"), ("c", "b"), ("a", "c")]))
    assert affected(topology.blast_radius(tenant, "Service", "a", hops=3)) == {"b": 1, "c": 2}
    crit = topology.criticality(tenant, "Service", "a")
    assert crit.basis == "reverse_reachability"
    assert crit.dependents == 2
    assert crit.score == pytest.approx(1 + 1 / 2)


def test_criticality_sums_one_over_distance(topology: TopologyService, tenant: str) -> None:
    topology.record(tenant, graph(DIAMOND))
    crit = topology.criticality(tenant, "Service", "db")
    assert crit.score == pytest.approx(1 / 1 + 1 / 1 + 1 / 2)
    assert crit.dependents == 3


def test_criticality_falls_back_to_degree_when_nothing_depends_on_the_node(
    topology: TopologyService, tenant: str
) -> None:
    topology.record(tenant, graph(DIAMOND))
    topology.record(
        tenant,
        {
            "nodes": [{"node_type": "Team", "external_id": "payments-team"}],
            "edges": [
                {
                    "source": svc("web"),
                    "edge_type": "OWNED_BY",
                    "target": {"node_type": "Team", "external_id": "payments-team"},
                }
            ],
        },
    )
    crit = topology.criticality(tenant, "Service", "web")  # the top: no dependents
    assert crit.basis == "degree"
    assert crit.degree == 3  # two DEPENDS_ON out, one OWNED_BY
    assert crit.score == 3.0


def test_an_invalidated_edge_is_never_crossed_and_as_of_returns_the_older_topology(
    topology: TopologyService, tenant: str, clock: Clock
) -> None:
    topology.record(tenant, graph(DIAMOND), sync=True)
    clock.now = T0 + timedelta(days=10)
    # api no longer depends on db: the next full snapshot lacks that edge
    snapshot = graph([("worker", "db"), ("web", "api"), ("web", "worker")])
    report = topology.record(tenant, snapshot, sync=True)
    assert report["edges_invalidated"] == 1

    now = topology.blast_radius(tenant, "Service", "db", hops=3)
    assert affected(now) == {"worker": 1, "web": 2}
    before = topology.blast_radius(tenant, "Service", "db", hops=3, as_of=T0 + timedelta(days=5))
    assert affected(before) == {"api": 1, "worker": 1, "web": 2}


def test_a_node_absent_from_a_snapshot_is_invalidated_with_its_edges(
    topology: TopologyService, tenant: str, clock: Clock
) -> None:
    topology.record(tenant, graph(DIAMOND), sync=True)
    clock.now = T0 + timedelta(days=1)
    report = topology.record(tenant, graph([("web", "api")], extra_nodes=("db",)), sync=True)
    assert report["nodes_invalidated"] == 1  # worker
    assert affected(topology.blast_radius(tenant, "Service", "db", hops=3)) == {}
    with pytest.raises(InvalidInputError, match="no Service 'worker'"):
        topology.blast_radius(tenant, "Service", "worker")
    old = topology.blast_radius(tenant, "Service", "worker", as_of=T0 + timedelta(hours=1))
    assert affected(old) == {"web": 1}


def test_rediscovery_reinforces_instead_of_duplicating(
    topology: TopologyService, tenant: str, clock: Clock, admin_conn: psycopg.Connection[Any]
) -> None:
    first = topology.record(tenant, graph([("api", "db")]))
    assert first["nodes_created"] == 2
    clock.now = T0 + timedelta(hours=2)
    again = topology.record(tenant, graph([("api", "db")]))
    assert again == {
        "nodes_created": 0,
        "nodes_reinforced": 2,
        "edges_created": 0,
        "edges_reinforced": 1,
    }
    rows = admin_conn.execute(
        "SELECT external_id, observed_count, first_seen, last_seen FROM topology_nodes"
        " WHERE tenant_id = %s ORDER BY external_id",
        (tenant,),
    ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [("api", 2), ("db", 2)]
    assert all(r[2] == T0 and r[3] == clock.now for r in rows)


def test_nothing_is_ever_deleted(
    topology: TopologyService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    topology.record(tenant, graph([("api", "db")]))
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="never deleted"):
        admin_conn.execute("DELETE FROM topology_nodes WHERE tenant_id = %s", (tenant,))


@pytest.mark.parametrize(
    "node_type",
    ["Service') DETACH DELETE n //", "service", "Database", "", "DEPENDS_ON"],
)
def test_type_injection_is_rejected_before_any_sql(
    topology: TopologyService, tenant: str, node_type: str
) -> None:
    with pytest.raises(InvalidInputError) as error:
        topology.blast_radius(tenant, node_type, "db")
    assert error.value.field == "node_type"
    assert "must be one of Service, Repo, Team" in error.value.message
    with pytest.raises(InvalidInputError):
        topology.record(tenant, {"nodes": [{"node_type": node_type, "external_id": "x"}]})


@pytest.mark.parametrize("hops", [0, 4, -1, "three", True, 2.5, None])
def test_hops_outside_one_to_three_are_rejected(
    topology: TopologyService, tenant: str, hops: Any
) -> None:
    topology.record(tenant, graph([("api", "db")]))
    with pytest.raises(InvalidInputError) as error:
        topology.blast_radius(tenant, "Service", "db", hops=hops)
    assert error.value.field == "hops"


def test_an_edge_to_an_unknown_node_rejects_the_whole_batch(
    topology: TopologyService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    batch = {"nodes": [svc("api")], "edges": [depends("api", "ghost")]}
    with pytest.raises(InvalidInputError, match="not current nodes"):
        topology.record(tenant, batch)
    assert admin_conn.execute(
        "SELECT count(*) FROM topology_nodes WHERE tenant_id = %s", (tenant,)
    ).fetchone() == (0,)


def test_another_tenants_graph_is_invisible(
    topology: TopologyService, tenant: str, other_tenant: str
) -> None:
    topology.record(other_tenant, graph(DIAMOND))
    with pytest.raises(InvalidInputError, match="no Service 'db'"):
        topology.blast_radius(tenant, "Service", "db")
    topology.record(tenant, graph([("api", "db")]))
    assert affected(topology.blast_radius(tenant, "Service", "db")) == {"api": 1}
    assert topology.criticality(tenant, "Service", "db").dependents == 1


def test_memory_scope_widens_the_service_filter_through_the_topology(
    repository: MemoryRepository,
    app_conn: psycopg.Connection[Any],
    fake_provider: Any,
    tenant: str,
) -> None:
    topology = TopologyService(TopologyRepository(app_conn))
    memory = MemoryService(repository, fake_provider, topology=topology)
    topology.record(tenant, graph([("checkout", "payments"), ("payments", "postgres")]))
    topic = "requests time out waiting for a database connection from the pool"
    for name in ("checkout", "payments", "postgres", "search"):
        memory.record_entry(
            tenant,
            entry(
                f"Pool exhausted on {name}",
                "requests waited for a database connection from the pool until they timed out",
                service=name,
            ),
            context(),
        )

    def services(**kwargs: Any) -> set[str]:
        result = memory.query_org_memory(tenant, topic, limit=10, **kwargs)
        return {hit.service for hit in result.hits if hit.service}

    assert services(service="payments") == {"payments"}
    assert services(service="payments", scope="blast_radius") == {"payments", "checkout"}
    assert services(service="checkout", scope="dependencies") == {
        "checkout",
        "payments",
        "postgres",
    }
    with pytest.raises(InvalidInputError) as error:
        memory.query_org_memory(tenant, topic, scope="blast_radius")
    assert error.value.field == "scope"


def test_criticality_sees_graph_changes_despite_its_cache(
    topology: TopologyService, tenant: str, clock: Clock
) -> None:
    topology.record(tenant, graph([("api", "db")]), sync=True)
    assert topology.criticality(tenant, "Service", "db").score == 1.0
    topology.record(tenant, graph([("web", "api")]))  # a new dependent, two hops out
    assert topology.criticality(tenant, "Service", "db").score == pytest.approx(1.5)
    clock.now = T0 + timedelta(days=1)
    topology.record(tenant, graph([("web", "api")], extra_nodes=("db",)), sync=True)
    assert topology.criticality(tenant, "Service", "db").basis == "degree"
    assert topology.criticality(tenant, "Service", "db", as_of=T0).score == pytest.approx(1.5)
